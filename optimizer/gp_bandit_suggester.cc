#include "optimizer/gp_bandit_suggester.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "optimizer/conditional.h"
#include "optimizer/cost_model.h"
#include "optimizer/hyperparameter_sampling.h"
#include "optimizer/initial_design.h"
#include "optimizer/kernel.h"
#include "optimizer/output_transform.h"
#include "optimizer/pareto.h"
#include "optimizer/sobol.h"
#include "optimizer/splitmix.h"
#include "optimizer/tree_kernel.h"

namespace hypertune::optimizer {
namespace {

// The model's coordinates: the unit-cube encoding for numeric parameters,
// the category index for categorical ones (compared for equality only).
// An inactive parameter's coordinate is a placeholder (0.5, or category 0)
// that the conditional space's kernel never reads.
struct Coordinates {
  std::vector<int> categories;    // 0 for numeric dimensions.
  std::vector<bool> categorical;  // categories[j] > 0.
  std::vector<bool> snapped;      // Integer and discrete: decode rounds.
  // A conditional space's tree (tree_kernel.h); empty for a flat space.
  std::vector<TreeKernelGroup> tree;
  // Whether the column is some parameter's parent.
  std::vector<bool> parent;

  explicit Coordinates(const SearchSpace& space)
      : parent(space.parameters().size(), false) {
    if (space.conditional()) tree = TreeKernelGroups(space);
    for (const ParameterConfig& p : space.parameters()) {
      if (p.parent != kNoParent) parent[p.parent] = true;
    }
    for (const ParameterConfig& p : space.parameters()) {
      const bool is_cat = p.type == ParameterType::kCategorical;
      categories.push_back(is_cat ? static_cast<int>(p.categories.size()) : 0);
      categorical.push_back(is_cat);
      snapped.push_back(p.type == ParameterType::kInteger ||
                        p.type == ParameterType::kDiscrete);
    }
  }
  int dim() const { return static_cast<int>(categories.size()); }

  Eigen::VectorXd FromUnit(const Eigen::VectorXd& unit) const {
    Eigen::VectorXd x = unit;
    for (int j = 0; j < dim(); ++j) {
      if (categorical[j]) {
        x[j] = std::min(std::floor(std::clamp(unit[j], 0.0, 1.0) *
                                   categories[j]),
                        categories[j] - 1.0);
      }
    }
    return x;
  }
  Eigen::VectorXd ToUnit(const Eigen::VectorXd& x) const {
    Eigen::VectorXd unit = x;
    for (int j = 0; j < dim(); ++j) {
      if (categorical[j]) unit[j] = (x[j] + 0.5) / categories[j];
    }
    return unit;
  }
  Eigen::VectorXd FromAssignment(const SearchSpace& space,
                                 const Assignment& a) const {
    Eigen::VectorXd x = space.Encode(a);
    for (int j = 0; j < dim(); ++j) {
      if (categorical[j]) x[j] = std::isnan(a[j]) ? 0.0 : a[j];
    }
    return x;
  }
  // The kernel of the model: on a conditional space the tree kernel, which
  // compares only the groups both points have active (and has no additive
  // variant); otherwise MakeMixedKernel's.
  std::unique_ptr<Kernel> MakeKernel(
      KernelStructure structure = KernelStructure::kProduct) const {
    if (!tree.empty()) return std::make_unique<TreeKernel>(tree);
    return MakeMixedKernel(categorical, structure);
  }
  // Moves integer and discrete coordinates to the centre of their cell.
  void Snap(const SearchSpace& space, Eigen::VectorXd& x) const {
    if (std::none_of(snapped.begin(), snapped.end(), [](bool b) { return b; })) {
      return;
    }
    const Eigen::VectorXd centred = space.Encode(space.Decode(ToUnit(x)));
    for (int j = 0; j < dim(); ++j) {
      if (snapped[j]) x[j] = centred[j];
    }
  }
};

// Squared distance with per-dimension weights on numeric coordinates and
// weight categorical_weight per differing category.
double Distance2(const Coordinates& c, const Eigen::VectorXd& a,
                 const Eigen::VectorXd& b, const Eigen::VectorXd& weights,
                 double categorical_weight) {
  double d2 = 0;
  for (int j = 0; j < c.dim(); ++j) {
    if (c.categorical[j]) {
      d2 += a[j] != b[j] ? categorical_weight : 0.0;
    } else {
      d2 += weights[j] * (a[j] - b[j]) * (a[j] - b[j]);
    }
  }
  return d2;
}

// Indices of the `count` rows of x nearest to row `centre`, ties by index,
// in increasing index order (so subsets keep history order).
std::vector<int> Nearest(const Coordinates& c, const Eigen::MatrixXd& x,
                         int centre, int count, const Eigen::VectorXd& weights,
                         double categorical_weight) {
  const Eigen::VectorXd centre_x = x.row(centre).transpose();
  std::vector<std::pair<double, int>> d(x.rows());
  for (int i = 0; i < x.rows(); ++i) {
    d[i] = {Distance2(c, x.row(i).transpose(), centre_x, weights,
                      categorical_weight),
            i};
  }
  const int k = std::min<int>(count, static_cast<int>(d.size()));
  std::partial_sort(d.begin(), d.begin() + k, d.end());
  std::vector<int> out(k);
  for (int i = 0; i < k; ++i) out[i] = d[i].second;
  std::sort(out.begin(), out.end());
  return out;
}

Eigen::MatrixXd Rows(const Eigen::MatrixXd& x, const std::vector<int>& rows) {
  Eigen::MatrixXd out(rows.size(), x.cols());
  for (size_t i = 0; i < rows.size(); ++i) {
    out.row(static_cast<Eigen::Index>(i)) = x.row(rows[i]);
  }
  return out;
}

Eigen::VectorXd Entries(const Eigen::VectorXd& y,
                        const std::vector<int>& rows) {
  Eigen::VectorXd out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    out[static_cast<Eigen::Index>(i)] = y[rows[i]];
  }
  return out;
}

int ArgMax(const Eigen::VectorXd& y) {
  Eigen::Index i = 0;
  y.maxCoeff(&i);
  return static_cast<int>(i);
}

// Keeps the at most `count` rows of (x, y) nearest the best one, distances
// in unit lengthscales.
void KeepNearestBest(const Coordinates& c, int count, Eigen::MatrixXd& x,
                     Eigen::VectorXd& y) {
  if (x.rows() <= count) return;
  const std::vector<int> rows =
      Nearest(c, x, ArgMax(y), count, Eigen::VectorXd::Ones(c.dim()), 1.0);
  x = Rows(x, rows);
  y = Entries(y, rows);
}

// Numeric lengthscales per dimension (categorical dimensions: 1): the
// Matérn's parameters come first in MakeMixedKernel's layout.
Eigen::VectorXd NumericLengthscales(const Coordinates& c,
                                    const GpParams& params) {
  if (!c.tree.empty()) {
    return TreeKernelLengthscales(c.tree, params.kernel, c.dim());
  }
  Eigen::VectorXd l = Eigen::VectorXd::Ones(c.dim());
  int k = 0;
  for (int j = 0; j < c.dim(); ++j) {
    if (!c.categorical[j]) l[j] = std::exp(params.kernel[k++]);
  }
  return l;
}

// The hyperparameter prior: an additive kernel's lengthscales are those of
// one-dimensional functions, so its prior is the d = 1 prior.
GpPrior PriorFor(const Coordinates& c, KernelStructure structure) {
  return GpPrior::ForDimension(structure == KernelStructure::kAdditive ? 1
                                                                       : c.dim());
}

// Moves x's coordinates, one dimension at a time in index order, to the
// incumbent's wherever the acquisition stays within `tolerance` of its
// value at x. Returns the moved point (x itself if tolerance <= 0).
// With few points in many dimensions the fit deems most dimensions
// irrelevant (long lengthscales) and the acquisition is flat along them, so
// its maximizer takes arbitrary values there, drawn from the Sobol
// candidates; the incumbent's values are the best the data supports.
Eigen::VectorXd PullTowardIncumbent(const Acquisition& acquisition,
                                    const Coordinates& coords,
                                    const SearchSpace& space,
                                    const Eigen::VectorXd& incumbent,
                                    const Eigen::VectorXd& x,
                                    double tolerance) {
  Eigen::VectorXd out = x;
  if (!(tolerance > 0)) return out;
  // Against x's value, so the total loss stays within the tolerance.
  const double floor = acquisition.Evaluate(x, nullptr) - tolerance;
  // An inactive coordinate is a placeholder that neither the model nor the
  // decoded assignment reads: moving it changes nothing, so it costs no
  // evaluation (a conditional space's points have few active ones).
  const std::vector<bool> active =
      space.conditional() ? space.Active(space.Decode(coords.ToUnit(x)))
                          : std::vector<bool>(coords.dim(), true);
  for (int j = 0; j < coords.dim(); ++j) {
    // A parent's value chooses which parameters exist: moving it is a move
    // to another subspace, not along a direction the model deems flat.
    if (out[j] == incumbent[j] || coords.parent[j] || !active[j]) continue;
    Eigen::VectorXd moved = out;
    moved[j] = incumbent[j];
    coords.Snap(space, moved);
    const double v = acquisition.Evaluate(moved, nullptr);
    if (std::isfinite(v) && v >= floor) out = std::move(moved);
  }
  return out;
}

constexpr int kMinModelPoints = 2;
// The log Bayes factor the additive kernel must win by ("positive evidence",
// Kass and Raftery 1995): early, weak preferences for it sent non-separable
// objectives down worse paths (hartmann6 in benchmarks/README.md).
constexpr double kAdditiveMargin = 2.0;
constexpr int kAnchors = 5;
// A cost-aware initial design picks the cheapest of this many Sobol points
// per trial.
constexpr int kCostAwareDesignCandidates = 4;
// Feasibility GP: labels +-1 with this noise variance, unit signal.
constexpr double kFeasibilityNoise = 1e-2;
// Fantasies (kriging believer) are noise-free: the pending evaluation will
// reveal f there, so the acquisition should see no uncertainty left.
constexpr double kFantasyNoise = 1e-8;

// Perturbation scales of the acquisition optimizer's anchors: half a
// lengthscale on numeric dimensions, within [0.01, 0.5].
Eigen::VectorXd PerturbationScale(const Coordinates& coords,
                                  const Eigen::VectorXd& lengthscales) {
  Eigen::VectorXd scale = Eigen::VectorXd::Zero(coords.dim());
  for (int j = 0; j < coords.dim(); ++j) {
    if (!coords.categorical[j]) {
      scale[j] = std::clamp(0.5 * lengthscales[j], 0.01, 0.5);
    }
  }
  return scale;
}

// The infeasibility classifier: a GP regressing +1 on the completed rows
// data_x and -1 on the infeasible ones (acquisition.h), with the product
// kernel and the objective's lengthscales (an additive fit's are not
// comparable: the prior's mode instead), capped at the prior's mode: a
// smooth objective must not make the feasible region's edge look smooth
// too. Empty if it cannot be factored.
std::optional<GaussianProcess> FeasibilityClassifier(
    const Coordinates& coords, const Eigen::MatrixXd& data_x,
    const Eigen::MatrixXd& infeasible, const GpParams& params,
    KernelStructure structure) {
  Eigen::MatrixXd fx(data_x.rows() + infeasible.rows(), data_x.cols());
  fx << data_x, infeasible;
  Eigen::VectorXd labels(fx.rows());
  labels << Eigen::VectorXd::Ones(data_x.rows()),
      -Eigen::VectorXd::Ones(infeasible.rows());
  const std::unique_ptr<Kernel> fkernel = coords.MakeKernel();
  const Eigen::VectorXd mode =
      GpPrior::ForDimension(coords.dim()).Mode(fkernel->num_params()).kernel;
  GpParams fparams = params;
  fparams.kernel = structure == KernelStructure::kProduct
                       ? Eigen::VectorXd(fparams.kernel.cwiseMin(mode))
                       : mode;
  fparams.log_signal_variance = 0;
  fparams.log_noise_variance = std::log(kFeasibilityNoise);
  fparams.mean = 0;
  absl::StatusOr<GaussianProcess> feasibility =
      GaussianProcess::Create(*fkernel, fparams, fx, labels);
  if (!feasibility.ok()) return std::nullopt;
  return *std::move(feasibility);
}

// The affine map of Standardize (output_transform.h), kept to map a
// constraint's bounds the same way: (y - mean) / scale, scale the sample
// standard deviation (1 for a constant sample, which Standardize maps to
// zeros alike).
struct Standardization {
  double mean = 0, scale = 1;
};

Standardization StandardizationOf(const Eigen::VectorXd& y) {
  Standardization map;
  map.mean = y.mean();
  const Eigen::VectorXd centred = y.array() - map.mean;
  const double sd = std::sqrt(centred.squaredNorm() /
                              static_cast<double>(std::max<Eigen::Index>(
                                  y.size() - 1, 1)));
  map.scale = sd > 1e-300 ? sd : 1.0;
  return map;
}

}  // namespace

struct GpBanditSuggester::Model {
  GaussianProcess gp;
  // With few trials: models under posterior draws of the hyperparameters,
  // which the acquisition averages over (empty: gp alone).
  std::vector<GaussianProcess> draws;
  std::optional<GaussianProcess> feasibility;
  double best;
  Eigen::MatrixXd anchors;
  Eigen::VectorXd lower, upper;
  Eigen::VectorXd perturbation_scale;
};

GpBanditSuggester::GpBanditSuggester(GpBanditOptions options)
    : options_(std::move(options)) {}

GpBanditSuggester::~GpBanditSuggester() {
  for (MetricCache& cache : caches_) {
    if (cache.background) cache.background->cancelled = true;
  }
  if (cost_cache_.background) cost_cache_.background->cancelled = true;
}

int GpBanditSuggester::LastRefitCheckpoint(int n) {
  int c = kMinModelPoints;
  while (true) {
    const int next = c < 20 ? c + 1 : c + std::max(5, c / 10);
    if (next > n) return c;
    c = next;
  }
}

GpBanditSuggester::Fit GpBanditSuggester::CheckpointParams(
    const SearchSpace& space, uint64_t seed, const Eigen::MatrixXd& x,
    const Eigen::VectorXd& y, int c, bool allow_additive, Targets kind,
    MetricCache& cache) {
  const Coordinates coords(space);
  Eigen::MatrixXd xc = x.topRows(c);
  Eigen::VectorXd yc = y.head(c);
  KeepNearestBest(coords, options_.max_fit_points, xc, yc);
  if (cache.fit && cache.fit->Holds(c, seed, allow_additive, xc, yc)) {
    return cache.fit->fit;
  }
  // Small fits are quick, and decide most of a small budget: they stay on
  // the request path.
  if (options_.background_fits && c > options_.warm_refit_below) {
    if (!cache.fit) {
      // A fresh instance (a restarted server) has fitted nothing yet: the
      // prior's mode, as a never-matching checkpoint 0, until a fit lands.
      const std::unique_ptr<Kernel> kernel =
          coords.MakeKernel(KernelStructure::kProduct);
      cache.fit = FitCache{
          0, seed, allow_additive, Eigen::MatrixXd(), Eigen::VectorXd(),
          Fit{KernelStructure::kProduct,
              PriorFor(coords, KernelStructure::kProduct)
                  .Mode(kernel->num_params())}};
    }
    FitInBackground(space, seed, std::move(xc), std::move(yc), c,
                    allow_additive, kind, cache);
    // The latest fit: this checkpoint's if it just finished, else older.
    return cache.fit->fit;
  }
  const Fit fit = *FitCheckpoint(space, seed, xc, yc, c, allow_additive,
                                 kind, options_, [] { return false; });
  cache.fit = FitCache{c, seed, allow_additive, std::move(xc), std::move(yc),
                       fit};
  return fit;
}

void GpBanditSuggester::FitInBackground(const SearchSpace& space,
                                        uint64_t seed, Eigen::MatrixXd xc,
                                        Eigen::VectorXd yc, int c,
                                        bool allow_additive, Targets kind,
                                        MetricCache& cache) {
  if (!cache.background) cache.background = std::make_shared<BackgroundFit>();
  const std::shared_ptr<BackgroundFit> background = cache.background;
  absl::MutexLock lock(&background->mu);
  if (background->done) {
    cache.fit = *std::move(background->done);
    background->done.reset();
  }
  if (background->running ||
      cache.fit->Holds(c, seed, allow_additive, xc, yc)) {
    return;
  }
  background->running = true;
  // The job owns copies of everything it reads: the suggester may be gone
  // before it runs.
  options_.background_fits(
      [background, space, seed, xc = std::move(xc), yc = std::move(yc), c,
       allow_additive, kind,
       options = options_](const std::atomic<bool>& stop) mutable {
        std::optional<Fit> fit = FitCheckpoint(
            space, seed, xc, yc, c, allow_additive, kind, options,
            [&] { return stop || background->cancelled; });
        absl::MutexLock lock(&background->mu);
        background->running = false;
        if (!fit) return;
        background->done = FitCache{c, seed, allow_additive, std::move(xc),
                                    std::move(yc), *std::move(fit)};
      });
}

std::optional<GpBanditSuggester::Fit> GpBanditSuggester::FitCheckpoint(
    const SearchSpace& space, uint64_t seed, const Eigen::MatrixXd& xc,
    const Eigen::VectorXd& yc, int c, bool allow_additive, Targets kind,
    const GpBanditOptions& options, const std::function<bool()>& stop) {
  const Coordinates coords(space);
  const Eigen::VectorXd targets = ToTargets(kind, yc);
  const int numeric_dims = static_cast<int>(
      std::count(coords.categorical.begin(), coords.categorical.end(), false));
  std::vector<KernelStructure> structures = {KernelStructure::kProduct};
  if (allow_additive && numeric_dims >= 2 && coords.tree.empty()) {
    structures.push_back(KernelStructure::kAdditive);
  }
  Fit best{KernelStructure::kProduct, GpParams()};
  double best_value = std::numeric_limits<double>::infinity();
  for (const KernelStructure structure : structures) {
    if (stop()) return std::nullopt;
    const std::unique_ptr<Kernel> kernel = coords.MakeKernel(structure);
    const GpPrior prior = PriorFor(coords, structure);
    std::vector<GpParams> starts = {prior.Mode(kernel->num_params())};
    SplitMix64 rng(MixSeeds(seed, static_cast<uint64_t>(c)));
    // Large fits are the latency spikes: one restart there.
    const int restarts = c > options.warm_refit_below
                             ? std::min(options.fit_restarts, 1)
                             : options.fit_restarts;
    for (int r = 0; r < restarts; ++r) {
      starts.push_back(prior.Sample(kernel->num_params(), rng));
    }
    const GpParams params =
        FitGpParams(*kernel, xc, targets, starts, prior,
                    options.min_noise_variance, options.fit_iterations, stop);
    if (stop()) return std::nullopt;
    const double value =
        NegLogPosterior(*kernel, xc, targets, params.Flat(), prior, nullptr);
    // The product kernel, the default, unless the additive one is clearly
    // better: a log Bayes factor above kAdditiveMargin.
    if (structure == KernelStructure::kProduct ||
        value < best_value - kAdditiveMargin) {
      best = Fit{structure, params};
      best_value = value;
    }
  }
  return best;
}

absl::StatusOr<GpBanditSuggester::MetricModel>
GpBanditSuggester::BuildMetricModel(const SearchSpace& space, uint64_t seed,
                                    const Eigen::MatrixXd& x,
                                    const Eigen::VectorXd& y, Targets kind,
                                    const std::vector<int>* subset,
                                    bool allow_local, MetricCache& cache) {
  const Coordinates coords(space);
  const int n = static_cast<int>(x.rows());
  const int c = LastRefitCheckpoint(n);
  // The additive kernel costs d times the product's per kernel entry: not
  // past max_local_points, where latency matters more than sample
  // efficiency.
  const Fit fit =
      CheckpointParams(space, seed, x, y, c,
                       options_.select_additive &&
                           n <= options_.max_local_points,
                       kind, cache);
  const std::unique_ptr<Kernel> kernel = coords.MakeKernel(fit.structure);
  const GpParams& checkpoint = fit.params;
  GpParams params = checkpoint;
  if (n > c && n <= options_.warm_refit_below) {
    const GpPrior prior = PriorFor(coords, fit.structure);
    params = FitGpParams(*kernel, x, ToTargets(kind, y), {checkpoint}, prior,
                         options_.min_noise_variance,
                         options_.warm_fit_iterations);
  }
  const Eigen::VectorXd lengthscales = NumericLengthscales(coords, params);

  Eigen::VectorXd lower = Eigen::VectorXd::Zero(coords.dim());
  Eigen::VectorXd upper = Eigen::VectorXd::Ones(coords.dim());
  Eigen::MatrixXd data_x;
  Eigen::VectorXd data_y;
  Eigen::VectorXd targets;
  std::optional<GaussianProcess> gp;
  if (subset != nullptr) {
    data_x = Rows(x, *subset);
    data_y = Entries(y, *subset);
    targets = ToTargets(kind, data_y);
    absl::StatusOr<GaussianProcess> part =
        GaussianProcess::Create(*kernel, params, data_x, targets);
    if (!part.ok()) return part.status();
    gp = *std::move(part);
  } else if (allow_local && n > options_.max_local_points) {
    // Local model: the nearest points to the incumbent in lengthscale units,
    // searched within their bounding box.
    const std::vector<int> rows =
        Nearest(coords, x, ArgMax(y), options_.max_local_points,
                lengthscales.cwiseInverse().cwiseAbs2(), 1.0);
    data_x = Rows(x, rows);
    data_y = Entries(y, rows);
    targets = ToTargets(kind, data_y);
    absl::StatusOr<GaussianProcess> local =
        GaussianProcess::Create(*kernel, params, data_x, targets);
    if (!local.ok()) return local.status();
    gp = *std::move(local);
    for (int j = 0; j < coords.dim(); ++j) {
      if (coords.categorical[j]) continue;
      const double pad = 0.02;
      lower[j] = std::max(0.0, data_x.col(j).minCoeff() - pad);
      upper[j] = std::min(1.0, data_x.col(j).maxCoeff() + pad);
    }
  } else {
    data_x = x;
    data_y = y;
    targets = ToTargets(kind, y);
    if (!(params == checkpoint)) {
      absl::StatusOr<GaussianProcess> full =
          GaussianProcess::Create(*kernel, params, x, targets);
      if (!full.ok()) return full.status();
      gp = *std::move(full);
    } else {
      // Factor the checkpoint's prefix, then append the rest in order:
      // the same operations whether or not the cache holds a prefix.
      int m = 0;
      if (cache.factor && cache.factor_structure == fit.structure &&
          cache.factor->params() == checkpoint &&
          cache.factor->size() >= c && cache.factor->size() <= n &&
          cache.factor->x().cols() == x.cols() &&
          cache.factor->x() == x.topRows(cache.factor->size())) {
        gp = *std::move(cache.factor);
        m = gp->size();
      } else {
        absl::StatusOr<GaussianProcess> prefix = GaussianProcess::Create(
            *kernel, checkpoint, x.topRows(c), Eigen::VectorXd::Zero(c));
        if (!prefix.ok()) return prefix.status();
        gp = *std::move(prefix);
        m = c;
      }
      cache.factor.reset();
      for (int i = m; i < n; ++i) {
        if (absl::Status s = gp->AddPoint(x.row(i).transpose(), 0.0); !s.ok()) {
          return s;
        }
      }
      cache.factor = *gp;
      cache.factor_structure = fit.structure;
    }
    gp->SetTargets(targets);
  }
  MetricModel model{*std::move(gp), fit.structure, params, lengthscales,
                    std::move(data_x), std::move(targets), lower, upper};
  if (kind == Targets::kStandardized) {
    const Standardization map = StandardizationOf(data_y);
    model.target_mean = map.mean;
    model.target_scale = map.scale;
  }
  return model;
}

absl::StatusOr<GpBanditSuggester::Model> GpBanditSuggester::BuildModel(
    const SearchSpace& space, uint64_t seed, const Eigen::MatrixXd& x,
    const Eigen::VectorXd& y, const Eigen::MatrixXd& infeasible,
    const PriorFit* prior) {
  const Coordinates coords(space);
  if (caches_.empty()) caches_.resize(1);
  absl::StatusOr<MetricModel> built =
      prior != nullptr
          ? BuildTransferModel(space, seed, x, y, *prior)
          : BuildMetricModel(space, seed, x, y, Targets::kWarped, nullptr,
                             /*allow_local=*/true, caches_[0]);
  if (!built.ok()) return built.status();
  MetricModel& m = *built;
  const Eigen::VectorXd& targets = m.targets;

  // Without own trials yet, the bar is the best the prior predicts at its
  // own trials.
  double best = 0;
  if (targets.size() > 0) {
    best = targets.maxCoeff();
  } else {
    Eigen::VectorXd mean, var;
    m.gp.Predict(prior->x, &mean, &var);
    best = mean.maxCoeff();
  }
  Model model{std::move(m.gp), {}, std::nullopt, best, Eigen::MatrixXd(),
              m.lower, m.upper, Eigen::VectorXd::Zero(coords.dim())};
  // Anchors: the best observed points, best first, then the prior's.
  std::vector<int> order(targets.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return targets[a] > targets[b]; });
  order.resize(std::min<size_t>(order.size(), kAnchors));
  model.anchors = Rows(m.data_x, order);
  // The prior's best trials, while the own ones are few.
  if (prior != nullptr && targets.size() < kAnchors) {
    Eigen::MatrixXd both(model.anchors.rows() + prior->anchors.rows(),
                         coords.dim());
    both << model.anchors, prior->anchors;
    model.anchors = std::move(both);
  }
  model.perturbation_scale = PerturbationScale(coords, m.lengthscales);
  // Few trials: average over hyperparameter draws (no transfer prior,
  // whose own weight is fitted at the MAP).
  if (prior == nullptr && options_.hyperparameter_draws > 0 &&
      targets.size() <= options_.integrate_below) {
    const Kernel& kernel = model.gp.kernel();
    SplitMix64 rng(MixSeeds(seed, static_cast<uint64_t>(targets.size())));
    const std::vector<GpParams> draws = SampleGpParams(
        kernel, m.data_x, targets, m.params, PriorFor(coords, m.structure),
        options_.min_noise_variance, rng,
        {.samples = options_.hyperparameter_draws});
    for (const GpParams& params : draws) {
      absl::StatusOr<GaussianProcess> draw =
          GaussianProcess::Create(kernel, params, m.data_x, targets);
      if (draw.ok()) model.draws.push_back(*std::move(draw));
    }
  }
  if (infeasible.rows() > 0) {
    model.feasibility =
        FeasibilityClassifier(coords, m.data_x, infeasible, m.params, m.structure);
  }
  return model;
}

absl::StatusOr<GpBanditSuggester::MetricModel>
GpBanditSuggester::BuildTransferModel(const SearchSpace& space, uint64_t seed,
                                      const Eigen::MatrixXd& x,
                                      const Eigen::VectorXd& y,
                                      const PriorFit& prior) {
  const Coordinates coords(space);
  absl::StatusOr<MetricModel> m;
  if (x.rows() >= kMinModelPoints) {
    // The study's own model, hyperparameters and all: at weight 0 it is
    // the model the study would have without a prior.
    m = BuildMetricModel(space, seed, x, y, Targets::kWarped, nullptr,
                         /*allow_local=*/true, caches_[0]);
  } else {
    // Too few own trials to fit: the hyperparameter prior's mode (unit
    // signal, little noise), as uncertain about the residual as the prior
    // allows.
    const std::unique_ptr<Kernel> kernel =
        coords.MakeKernel(KernelStructure::kProduct);
    const GpParams params = PriorFor(coords, KernelStructure::kProduct)
                                .Mode(kernel->num_params());
    const Eigen::VectorXd targets =
        y.size() > 0 ? TransformOutputs(y) : Eigen::VectorXd();
    absl::StatusOr<GaussianProcess> gp =
        GaussianProcess::Create(*kernel, params, x, targets);
    if (!gp.ok()) return gp.status();
    m = MetricModel{*std::move(gp),
                    KernelStructure::kProduct,
                    params,
                    NumericLengthscales(coords, params),
                    x,
                    targets,
                    Eigen::VectorXd::Zero(coords.dim()),
                    Eigen::VectorXd::Ones(coords.dim())};
  }
  if (!m.ok()) return m.status();
  m->gp.SetPriorMean(std::make_shared<const TransferMean>(
      prior.mean->WithWeight(FitPriorWeight(
          prior.mean->Unweighted(m->data_x), m->targets))));
  return m;
}

const GpBanditSuggester::PriorFit* GpBanditSuggester::FitPrior(
    const SearchSpace& space, uint64_t seed,
    const std::vector<PriorStudy>& priors) {
  const Coordinates coords(space);
  std::vector<bool> shared(coords.dim(), false);
  std::vector<Eigen::VectorXd> rows;
  std::vector<double> values;
  for (const PriorStudy& prior : priors) {
    // Sharing no parameter, a study predicts nothing here.
    if (std::none_of(prior.shared.begin(), prior.shared.end(),
                     [](bool b) { return b; })) {
      continue;
    }
    for (int j = 0; j < coords.dim(); ++j) {
      if (prior.shared[j] && !prior.trials.empty()) shared[j] = true;
    }
    // Each study's values on their own scale: studies differ in offset and
    // spread, not in where their optima lie.
    std::vector<double> y;
    for (const Observation& o : prior.trials) {
      if (!std::isfinite(o.value)) continue;  // As in the study's own model.
      y.push_back(o.value);
      rows.push_back(TransferMean::Project(
                         prior.shared,
                         coords.FromAssignment(space, o.x).transpose())
                         .row(0)
                         .transpose());
    }
    if (y.empty()) continue;
    const Eigen::VectorXd warped = TransformOutputs(Eigen::Map<Eigen::VectorXd>(
        y.data(), static_cast<Eigen::Index>(y.size())));
    values.insert(values.end(), warped.data(), warped.data() + warped.size());
  }
  if (rows.empty()) return nullptr;
  Eigen::MatrixXd x(static_cast<Eigen::Index>(rows.size()), coords.dim());
  for (size_t i = 0; i < rows.size(); ++i) {
    x.row(static_cast<Eigen::Index>(i)) = rows[i].transpose();
  }
  Eigen::VectorXd y = Eigen::Map<const Eigen::VectorXd>(
      values.data(), static_cast<Eigen::Index>(values.size()));
  if (prior_ && prior_->seed == seed && prior_->shared == shared &&
      prior_->x.rows() == x.rows() && prior_->x == x && prior_->y == y) {
    return &*prior_;
  }
  prior_.reset();
  // As a local model: the trials nearest the best.
  KeepNearestBest(coords, options_.max_local_points, x, y);
  const int n = static_cast<int>(x.rows());
  Eigen::MatrixXd fx = x;
  Eigen::VectorXd fy = y;
  KeepNearestBest(coords, options_.max_fit_points, fx, fy);
  const Fit fit = *FitCheckpoint(space, seed, fx, fy, n, /*allow_additive=*/false,
                                 Targets::kAsGiven, options_,
                                 [] { return false; });
  const std::unique_ptr<Kernel> kernel = coords.MakeKernel(fit.structure);
  absl::StatusOr<GaussianProcess> gp =
      GaussianProcess::Create(*kernel, fit.params, x, y);
  if (!gp.ok()) return nullptr;
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return y[a] > y[b]; });
  order.resize(std::min<size_t>(order.size(), kAnchors));
  Eigen::MatrixXd anchors = Rows(x, order);
  prior_ = PriorFit{seed,
                    std::move(x),
                    std::move(y),
                    shared,
                    std::make_shared<const TransferMean>(*std::move(gp), shared,
                                                         PriorWeight{}),
                    fit,
                    std::move(anchors)};
  return &*prior_;
}

double GpBanditSuggester::CostExponent(const SuggestRequest& request,
                                       int initial) {
  const CostAwareness& cost = request.cost;
  if (cost.budget > 0) {
    double initial_spent = 0;
    for (size_t i = 0;
         i < std::min(request.history.size(), static_cast<size_t>(initial));
         ++i) {
      initial_spent += request.history[i].cost;
    }
    return CostCoolingExponent(cost.budget, cost.spent, initial_spent);
  }
  if (cost.max_trials > 0) {
    if (cost.max_trials <= initial) return 0.0;
    return std::clamp(static_cast<double>(cost.max_trials -
                                          request.trials_created) /
                          static_cast<double>(cost.max_trials - initial),
                      0.0, 1.0);
  }
  return 1.0;
}

void GpBanditSuggester::AddFantasy(const Eigen::VectorXd& x, Model& model) {
  Eigen::VectorXd mean, var;
  model.gp.Predict(x.transpose(), &mean, &var);
  // A constant liar that never improves: the pending evaluation counts as
  // min(posterior mean, incumbent), noise-free, so the acquisition is ~0 at
  // the pending point and recovers over about a lengthscale (a local
  // penalty), while the incumbent stays the observed best. A liar above
  // the incumbent would pull the next pick right next to it instead; so
  // does the plain kriging believer (the posterior mean): better regret at
  // 50 trials with 4 workers, but near-duplicate batches.
  (void)model.gp.AddPoint(x, std::min(mean[0], model.best), kFantasyNoise);
  for (GaussianProcess& draw : model.draws) {
    draw.Predict(x.transpose(), &mean, &var);
    (void)draw.AddPoint(x, std::min(mean[0], model.best), kFantasyNoise);
  }
}

absl::StatusOr<std::vector<Assignment>> GpBanditSuggester::Suggest(
    const SuggestRequest& request) {
  if (absl::Status s = ValidateSobolRequest(request, "GP_BANDIT"); !s.ok()) {
    return s;
  }
  if (request.metrics.empty()) return SuggestOneObjective(request);
  const MetricTable table = TabulateMetrics(request);
  if (IsPlainSingleObjective(request)) {
    return SuggestOneObjective(WithoutMetrics(request, table));
  }
  if (request.cost.enabled ||
      (request.priors != nullptr && !request.priors->empty())) {
    return absl::InvalidArgumentError(
        "cost, priors: cost-aware search and transfer need one objective "
        "and no constraints");
  }
  return SuggestWithMetrics(request, table);
}

Eigen::VectorXd GpBanditSuggester::ToTargets(Targets kind,
                                             const Eigen::VectorXd& y) {
  if (kind == Targets::kWarped) return TransformOutputs(y);
  if (kind == Targets::kAsGiven) return y;
  const Standardization map = StandardizationOf(y);
  return (y.array() - map.mean) / map.scale;
}

absl::StatusOr<std::vector<Assignment>> GpBanditSuggester::SuggestOneObjective(
    const SuggestRequest& request) {
  const SearchSpace& space = *request.space;
  const Coordinates coords(space);
  const int d = coords.dim();
  fallback_reason_.clear();

  std::vector<Eigen::VectorXd> completed_x, infeasible_x, pending_x, costed_x;
  std::vector<double> completed_y, log_costs;
  std::set<Assignment, AssignmentLess> taken;
  for (const Observation& o : request.history) {
    taken.insert(o.x);
    const Eigen::VectorXd x = coords.FromAssignment(space, o.x);
    if (request.cost.enabled && o.outcome != Outcome::kPending && o.cost > 0) {
      costed_x.push_back(x);
      log_costs.push_back(std::log(o.cost));
    }
    switch (o.outcome) {
      case Outcome::kCompleted:
        if (std::isfinite(o.value)) {
          completed_x.push_back(x);
          completed_y.push_back(o.value);
        }
        break;
      case Outcome::kInfeasible:
        infeasible_x.push_back(x);
        break;
      case Outcome::kPending:
        pending_x.push_back(x);
        break;
    }
  }
  const int n = static_cast<int>(completed_x.size());
  if (options_.tpe_fallback_above > 0 && n > options_.tpe_fallback_above) {
    return tpe_.Suggest(request);
  }
  auto to_matrix = [d](const std::vector<Eigen::VectorXd>& rows) {
    Eigen::MatrixXd m(rows.size(), d);
    for (size_t i = 0; i < rows.size(); ++i) {
      m.row(static_cast<Eigen::Index>(i)) = rows[i].transpose();
    }
    return m;
  };

  const int initial = options_.initial_trials > 0 ? options_.initial_trials
                                                  : InitialDesignSize(d, 1);
  const int64_t history_size = static_cast<int64_t>(request.history.size());
  const PriorFit* prior =
      request.priors == nullptr || request.priors->empty() ||
              !coords.tree.empty()
          ? nullptr
          : FitPrior(space, request.seed, *request.priors);
  std::vector<Assignment> out;
  std::vector<Eigen::VectorXd> picks;  // This batch's points, model coords.
  std::optional<Model> model;
  // Cost-aware: the log-cost model, once two trials have a cost.
  std::optional<MetricModel> cost_model;
  const double cost_exponent = CostExponent(request, initial);
  if (costed_x.size() >= kMinModelPoints && cost_exponent > 0) {
    absl::StatusOr<MetricModel> cost = BuildMetricModel(
        space, request.seed, to_matrix(costed_x),
        Eigen::Map<const Eigen::VectorXd>(
            log_costs.data(), static_cast<Eigen::Index>(log_costs.size())),
        Targets::kStandardized, nullptr, /*allow_local=*/false, cost_cache_);
    // Without a cost model the search is merely cost-blind.
    if (cost.ok()) cost_model = *std::move(cost);
  }
  auto fallback = [&](int i, const std::string& reason) {
    if (fallback_reason_.empty()) {
      fallback_reason_ = reason;
      std::cerr << "hypertune: GP_BANDIT fell back to quasi-random points: "
                << reason << "\n";
    }
    return space.Decode(
        SobolSequence(d, request.seed).Point(request.trials_created + i));
  };

  for (int i = 0; i < request.count; ++i) {
    Assignment a;
    // A transfer prior's best guess replaces the initial design's first
    // Sobol point (after the centre); the rest of the design stays, so that
    // an unrelated prior is found out (transfer.h).
    const bool prior_pick =
        prior != nullptr && history_size + i == std::min(1, initial - 1);
    if (!prior_pick && (history_size + i < initial || n < kMinModelPoints)) {
      const int64_t index = request.trials_created + i;
      a = space.Decode(InitialDesignPoint(d, request.seed, index));
      if (cost_model && index > 0) {
        // Cost-aware: the cheapest of the next few Sobol points, so that
        // the design does not spend a fixed share of the budget blind.
        double cheapest = std::numeric_limits<double>::infinity();
        for (int j = 0; j < kCostAwareDesignCandidates; ++j) {
          Assignment candidate = space.Decode(InitialDesignPoint(
              d, request.seed, index * kCostAwareDesignCandidates + j));
          if (taken.contains(candidate)) continue;
          Eigen::VectorXd mean, var;
          cost_model->gp.Predict(
              coords.FromAssignment(space, candidate).transpose(), &mean,
              &var);
          if (mean[0] < cheapest) {
            cheapest = mean[0];
            a = std::move(candidate);
          }
        }
      }
    } else {
      if (!model) {
        absl::StatusOr<Model> built = BuildModel(
            space, request.seed, to_matrix(completed_x),
            Eigen::Map<const Eigen::VectorXd>(completed_y.data(), n),
            to_matrix(infeasible_x), prior);
        if (built.ok()) {
          model = *std::move(built);
          std::vector<Eigen::VectorXd> fantasies = pending_x;
          fantasies.insert(fantasies.end(), picks.begin(), picks.end());
          for (const Eigen::VectorXd& p : fantasies) {
            AddFantasy(p, *model);
          }
        }
        if (!built.ok()) {
          a = fallback(i, std::string(built.status().message()));
        }
      }
      if (model) {
        const GaussianProcess* feasibility =
            model->feasibility ? &*model->feasibility : nullptr;
        const AcquisitionFunction improvement(&model->gp, feasibility,
                                              options_.acquisition, model->best,
                                              options_.ucb_beta);
        // Averaged over the hyperparameter draws, when there are some.
        std::optional<IntegratedAcquisition> integrated;
        if (!model->draws.empty()) {
          integrated.emplace(model->draws, feasibility, options_.acquisition,
                             model->best, options_.ucb_beta);
        }
        const Acquisition& expected =
            integrated ? static_cast<const Acquisition&>(*integrated)
                       : improvement;
        std::optional<CostPerUnitAcquisition> per_cost;
        if (cost_model) {
          per_cost.emplace(&expected, &cost_model->gp, cost_exponent,
                           cost_model->target_scale);
        }
        const Acquisition& acquisition =
            per_cost ? static_cast<const Acquisition&>(*per_cost) : expected;
        AcquisitionDomain domain{coords.categories, model->lower, model->upper,
                                 [&](Eigen::VectorXd& x) { coords.Snap(space, x); }};
        const std::vector<ScoredPoint> ranked = MaximizeAcquisition(
            acquisition, domain, model->anchors, model->perturbation_scale,
            MixSeeds(request.seed,
                     static_cast<uint64_t>(request.trials_created + i)),
            options_.acquisition_optimizer);
        bool found = false;
        for (const ScoredPoint& p : ranked) {
          if (!std::isfinite(p.value) || !p.x.allFinite()) continue;
          // Before any own trial there is no incumbent to pull toward.
          const Eigen::VectorXd px = PullTowardIncumbent(
              acquisition, coords, space, model->anchors.row(0).transpose(),
              p.x, n > 0 ? options_.incumbent_pull_tolerance : 0.0);
          Assignment candidate = space.Decode(coords.ToUnit(px));
          // Fully pulled onto a known point: the acquisition's own pick.
          if (taken.contains(candidate)) {
            candidate = space.Decode(coords.ToUnit(p.x));
          }
          if (taken.contains(candidate)) continue;
          a = std::move(candidate);
          found = true;
          break;
        }
        if (!found) {
          a = fallback(i, "no finite, new point maximizes the acquisition");
        }
      }
    }
    taken.insert(a);
    const Eigen::VectorXd x = coords.FromAssignment(space, a);
    picks.push_back(x);
    if (model) AddFantasy(x, *model);
    out.push_back(std::move(a));
  }
  return out;
}


struct GpBanditSuggester::MetricsModel {
  std::vector<MetricModel> objectives;
  std::vector<MetricModel> constraints;
  // Per constraint: its bounds in the GP's target units.
  std::vector<double> lower, upper;
  std::optional<GaussianProcess> classifier;
  bool any_feasible = false;
  // One objective: the best feasible target and its point.
  double best = 0;
  Eigen::VectorXd incumbent;
  // Several objectives: the feasible Pareto front (targets, rows), the
  // reference point, and the fantasized outcomes of pending points
  // predicted feasible.
  Eigen::MatrixXd front;
  Eigen::VectorXd reference;
  std::vector<Eigen::VectorXd> pending_front;
  Eigen::MatrixXd anchors;
  Eigen::VectorXd perturbation_scale;
};

namespace {

// Indices of the `count` rows of x nearest to any of the rows `centres`
// (unit-cube distance, 1 per differing category), ties by index, in
// increasing index order.
std::vector<int> NearestToAny(const Coordinates& c, const Eigen::MatrixXd& x,
                              const std::vector<int>& centres, int count) {
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(c.dim());
  std::vector<std::pair<double, int>> d(x.rows());
  for (int i = 0; i < x.rows(); ++i) {
    double best = std::numeric_limits<double>::infinity();
    for (int k : centres) {
      best = std::min(best, Distance2(c, x.row(i).transpose(),
                                      x.row(k).transpose(), ones, 1.0));
    }
    d[i] = {best, i};
  }
  const int k = std::min<int>(count, static_cast<int>(d.size()));
  std::partial_sort(d.begin(), d.begin() + k, d.end());
  std::vector<int> out(k);
  for (int i = 0; i < k; ++i) out[i] = d[i].second;
  std::sort(out.begin(), out.end());
  return out;
}

// Rows of a multi-metric table the acquisition optimizer perturbs: the best
// feasible trials (one objective), the feasible front (several; at most
// kFrontAnchors, chosen by greedy hypervolume contribution), or, with no
// feasible trial, those that miss the constraints by least.
constexpr int kFrontAnchors = 16;

std::vector<int> AnchorRows(const MetricTable& table) {
  const int n = static_cast<int>(table.rows.size());
  std::vector<int> feasible;
  for (int r = 0; r < n; ++r) {
    if (table.feasible[r]) feasible.push_back(r);
  }
  std::vector<int> out;
  if (feasible.empty()) {
    out.resize(n);
    std::iota(out.begin(), out.end(), 0);
    std::stable_sort(out.begin(), out.end(), [&](int a, int b) {
      return table.violation[a] < table.violation[b];
    });
    out.resize(std::min<size_t>(out.size(), kAnchors));
    return out;
  }
  if (table.objectives.size() == 1) {
    out = feasible;
    std::stable_sort(out.begin(), out.end(), [&](int a, int b) {
      return table.objective_values(a, 0) > table.objective_values(b, 0);
    });
    out.resize(std::min<size_t>(out.size(), kAnchors));
    return out;
  }
  const Eigen::MatrixXd values = Rows(table.objective_values, feasible);
  std::vector<int> front = ParetoFrontRows(values);
  if (static_cast<int>(front.size()) > kFrontAnchors) {
    const Eigen::MatrixXd front_values = Rows(values, front);
    const std::vector<int> chosen = GreedyHypervolumeSubset(
        front_values, InferReferencePoint(front_values, 0.0), kFrontAnchors);
    std::vector<int> subset;
    for (int k : chosen) subset.push_back(front[k]);
    front = std::move(subset);
  }
  for (int k : front) out.push_back(feasible[k]);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Assignment>> GpBanditSuggester::SuggestWithMetrics(
    const SuggestRequest& request, const MetricTable& table) {
  const SearchSpace& space = *request.space;
  const Coordinates coords(space);
  const int d = coords.dim();
  fallback_reason_.clear();
  const int n = static_cast<int>(table.rows.size());
  if (options_.tpe_fallback_above > 0 && n > options_.tpe_fallback_above) {
    return tpe_.Suggest(request);
  }
  const int num_objectives = static_cast<int>(table.objectives.size());
  const int num_constraints = static_cast<int>(table.constraints.size());
  if (caches_.size() < request.metrics.size()) {
    caches_.resize(request.metrics.size());
  }

  std::vector<Eigen::VectorXd> infeasible_x, pending_x;
  std::set<Assignment, AssignmentLess> taken;
  for (const Observation& o : request.history) {
    taken.insert(o.x);
    if (o.outcome == Outcome::kInfeasible) {
      infeasible_x.push_back(coords.FromAssignment(space, o.x));
    } else if (o.outcome == Outcome::kPending) {
      pending_x.push_back(coords.FromAssignment(space, o.x));
    }
  }
  Eigen::MatrixXd x(n, d);
  for (int r = 0; r < n; ++r) {
    x.row(r) =
        coords.FromAssignment(space, request.history[table.rows[r]].x).transpose();
  }

  // Builds every metric's model; an error ends in the quasi-random fallback.
  auto build = [&]() -> absl::StatusOr<MetricsModel> {
    MetricsModel m;
    const std::vector<int> anchor_rows = AnchorRows(table);
    std::vector<int> data_rows(n);
    std::iota(data_rows.begin(), data_rows.end(), 0);
    const bool local = n > options_.max_local_points;
    if (local) {
      data_rows = NearestToAny(coords, x, anchor_rows, options_.max_local_points);
    }
    auto metric_seed = [&](int metric) {
      // Metric 0 keeps the request's seed, as in the single-objective form.
      return metric == 0 ? request.seed
                         : MixSeeds(request.seed, static_cast<uint64_t>(metric));
    };
    for (int c = 0; c < num_objectives; ++c) {
      const int metric = table.objectives[c];
      absl::StatusOr<MetricModel> built = BuildMetricModel(
          space, metric_seed(metric), x, table.objective_values.col(c),
          num_objectives > 1 ? Targets::kStandardized : Targets::kWarped,
          local ? &data_rows : nullptr,
          /*allow_local=*/false, caches_[metric]);
      if (!built.ok()) return built.status();
      m.objectives.push_back(*std::move(built));
    }
    for (int c = 0; c < num_constraints; ++c) {
      const int metric = table.constraints[c];
      absl::StatusOr<MetricModel> built = BuildMetricModel(
          space, metric_seed(metric), x, table.constraint_values.col(c),
          Targets::kStandardized, local ? &data_rows : nullptr,
          /*allow_local=*/false, caches_[metric]);
      if (!built.ok()) return built.status();
      const MetricConfig& config = request.metrics[metric];
      m.lower.push_back((config.lower - built->target_mean) /
                        built->target_scale);
      m.upper.push_back((config.upper - built->target_mean) /
                        built->target_scale);
      m.constraints.push_back(*std::move(built));
    }
    const MetricModel& first = m.objectives.front();
    if (!infeasible_x.empty()) {
      Eigen::MatrixXd infeasible(infeasible_x.size(), d);
      for (size_t i = 0; i < infeasible_x.size(); ++i) {
        infeasible.row(static_cast<Eigen::Index>(i)) = infeasible_x[i].transpose();
      }
      m.classifier = FeasibilityClassifier(coords, first.data_x, infeasible,
                                           first.params, first.structure);
    }
    // The feasible data rows' targets.
    std::vector<int> feasible;
    for (int k = 0; k < static_cast<int>(data_rows.size()); ++k) {
      if (table.feasible[data_rows[k]]) feasible.push_back(k);
    }
    m.any_feasible = !feasible.empty();
    if (m.any_feasible && num_objectives == 1) {
      int best = feasible.front();
      for (int k : feasible) {
        if (first.targets[k] > first.targets[best]) best = k;
      }
      m.best = first.targets[best];
      m.incumbent = first.data_x.row(best).transpose();
    } else if (m.any_feasible) {
      Eigen::MatrixXd values(feasible.size(), num_objectives);
      for (int c = 0; c < num_objectives; ++c) {
        for (size_t k = 0; k < feasible.size(); ++k) {
          values(static_cast<Eigen::Index>(k), c) =
              m.objectives[c].targets[feasible[k]];
        }
      }
      m.front = Rows(values, ParetoFrontRows(values));
      // The reference point: between the front's nadir and the feasible
      // data's, reference_slack of the way (at least min_reference_margin
      // below the front).
      const Eigen::VectorXd front_nadir =
          m.front.colwise().minCoeff().transpose();
      const Eigen::VectorXd data_nadir = values.colwise().minCoeff().transpose();
      m.reference = front_nadir -
                    (options_.reference_slack * (front_nadir - data_nadir))
                        .cwiseMax(options_.min_reference_margin);
    }
    m.anchors = Rows(x, anchor_rows);
    Eigen::VectorXd lengthscales = first.lengthscales;
    for (const MetricModel& other : m.objectives) {
      lengthscales = lengthscales.cwiseMin(other.lengthscales);
    }
    if (!m.any_feasible) {
      for (const MetricModel& other : m.constraints) {
        lengthscales = lengthscales.cwiseMin(other.lengthscales);
      }
    }
    m.perturbation_scale = PerturbationScale(coords, lengthscales);
    return m;
  };

  // Conditions every model on a pending evaluation at p: constraints and
  // several objectives at their posterior means (kriging believer), one
  // objective at the constant liar min(mean, best feasible).
  auto add_fantasy = [&](const Eigen::VectorXd& p, MetricsModel& m) {
    bool predicted_feasible = true;
    for (int c = 0; c < num_constraints; ++c) {
      Eigen::VectorXd mean, var;
      m.constraints[c].gp.Predict(p.transpose(), &mean, &var);
      predicted_feasible &= mean[0] >= m.lower[c] && mean[0] <= m.upper[c];
      (void)m.constraints[c].gp.AddPoint(p, mean[0], kFantasyNoise);
    }
    Eigen::VectorXd outcome(num_objectives);
    for (int c = 0; c < num_objectives; ++c) {
      Eigen::VectorXd mean, var;
      m.objectives[c].gp.Predict(p.transpose(), &mean, &var);
      outcome[c] = num_objectives == 1 && m.any_feasible
                       ? std::min(mean[0], m.best)
                       : mean[0];
      (void)m.objectives[c].gp.AddPoint(p, outcome[c], kFantasyNoise);
    }
    if (num_objectives > 1 && m.any_feasible && predicted_feasible) {
      m.pending_front.push_back(outcome);
    }
  };

  const int initial =
      options_.initial_trials > 0
          ? options_.initial_trials
          : InitialDesignSize(d, num_objectives + num_constraints);
  const int64_t history_size = static_cast<int64_t>(request.history.size());
  std::vector<Assignment> out;
  std::vector<Eigen::VectorXd> picks;  // This batch's points, model coords.
  std::optional<MetricsModel> model;
  bool model_failed = false;
  auto fallback = [&](int i, const std::string& reason) {
    if (fallback_reason_.empty()) {
      fallback_reason_ = reason;
      std::cerr << "hypertune: GP_BANDIT fell back to quasi-random points: "
                << reason << "\n";
    }
    return space.Decode(
        SobolSequence(d, request.seed).Point(request.trials_created + i));
  };

  for (int i = 0; i < request.count; ++i) {
    Assignment a;
    if (history_size + i < initial || n < kMinModelPoints) {
      a = space.Decode(
          InitialDesignPoint(d, request.seed, request.trials_created + i));
    } else {
      if (!model && !model_failed) {
        absl::StatusOr<MetricsModel> built = build();
        if (built.ok()) {
          model = *std::move(built);
          std::vector<Eigen::VectorXd> fantasies = pending_x;
          fantasies.insert(fantasies.end(), picks.begin(), picks.end());
          for (const Eigen::VectorXd& p : fantasies) add_fantasy(p, *model);
        } else {
          model_failed = true;
          a = fallback(i, std::string(built.status().message()));
        }
      } else if (model_failed) {
        a = fallback(i, fallback_reason_);
      }
      if (model) {
        const uint64_t pick_seed = MixSeeds(
            request.seed, static_cast<uint64_t>(request.trials_created + i));
        std::optional<AcquisitionFunction> improvement;
        std::optional<LogHypervolumeImprovement> hypervolume;
        const Acquisition* objective = nullptr;
        if (model->any_feasible && num_objectives == 1) {
          improvement.emplace(&model->objectives[0].gp, nullptr,
                              options_.acquisition, model->best,
                              options_.ucb_beta);
          objective = &*improvement;
        } else if (model->any_feasible) {
          Eigen::MatrixXd front(model->front.rows() + model->pending_front.size(),
                                num_objectives);
          front.topRows(model->front.rows()) = model->front;
          for (size_t k = 0; k < model->pending_front.size(); ++k) {
            front.row(model->front.rows() + static_cast<Eigen::Index>(k)) =
                model->pending_front[k].transpose();
          }
          std::vector<const GaussianProcess*> gps;
          for (const MetricModel& o : model->objectives) gps.push_back(&o.gp);
          hypervolume.emplace(std::move(gps), Rows(front, ParetoFrontRows(front)),
                              model->reference, pick_seed,
                              options_.hypervolume);
          objective = &*hypervolume;
        }
        std::vector<ConstraintModel> constraints;
        for (int c = 0; c < num_constraints; ++c) {
          constraints.push_back(
              {&model->constraints[c].gp, model->lower[c], model->upper[c]});
        }
        const ConstrainedAcquisition acquisition(
            objective, std::move(constraints),
            model->classifier ? &*model->classifier : nullptr);
        AcquisitionDomain domain{coords.categories, Eigen::VectorXd::Zero(d),
                                 Eigen::VectorXd::Ones(d),
                                 [&](Eigen::VectorXd& p) { coords.Snap(space, p); }};
        AcquisitionOptimizerOptions search = options_.acquisition_optimizer;
        search.distinct_results = true;
        const std::vector<ScoredPoint> ranked = MaximizeAcquisition(
            acquisition, domain, model->anchors, model->perturbation_scale,
            pick_seed, search);
        const bool pull = num_objectives == 1 && model->any_feasible;
        bool found = false;
        for (const ScoredPoint& p : ranked) {
          if (!std::isfinite(p.value) || !p.x.allFinite()) continue;
          const Eigen::VectorXd px =
              pull ? PullTowardIncumbent(acquisition, coords, space,
                                         model->incumbent, p.x,
                                         options_.incumbent_pull_tolerance)
                   : p.x;
          Assignment candidate = space.Decode(coords.ToUnit(px));
          if (taken.contains(candidate)) {
            candidate = space.Decode(coords.ToUnit(p.x));
          }
          if (taken.contains(candidate)) continue;
          a = std::move(candidate);
          found = true;
          break;
        }
        if (!found) {
          a = fallback(i, "no finite, new point maximizes the acquisition");
        }
      }
    }
    taken.insert(a);
    const Eigen::VectorXd p = coords.FromAssignment(space, a);
    picks.push_back(p);
    if (model) add_fantasy(p, *model);
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace hypertune::optimizer
