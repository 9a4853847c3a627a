#include "optimizer/gp_bandit/metric_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "optimizer/output_transform.h"
#include "optimizer/splitmix.h"

namespace hypertune::optimizer::gp_bandit {
namespace {

// The log Bayes factor the additive kernel must win by ("positive evidence",
// Kass and Raftery 1995): early, weak preferences for it sent non-separable
// objectives down worse paths (hartmann6 in benchmarks/README.md).
constexpr double kAdditiveMargin = 2.0;

}  // namespace

Standardization StandardizationOf(const Eigen::VectorXd& y) {
  Standardization map;
  map.mean = y.mean();
  const Eigen::VectorXd centred = y.array() - map.mean;
  const double sd =
      std::sqrt(centred.squaredNorm() /
                static_cast<double>(std::max<Eigen::Index>(y.size() - 1, 1)));
  map.scale = sd > 1e-300 ? sd : 1.0;
  return map;
}

Eigen::VectorXd ToTargets(Targets kind, const Eigen::VectorXd& y) {
  if (kind == Targets::kWarped) return TransformOutputs(y);
  if (kind == Targets::kAsGiven) return y;
  const Standardization map = StandardizationOf(y);
  return (y.array() - map.mean) / map.scale;
}

int LastRefitCheckpoint(int n) {
  int c = kMinModelPoints;
  while (true) {
    const int next = c < 20 ? c + 1 : c + std::max(5, c / 10);
    if (next > n) return c;
    c = next;
  }
}

MetricFits::~MetricFits() {
  if (background_) background_->cancelled = true;
}

Fit MetricFits::CheckpointParams(const SearchSpace& space, uint64_t seed,
                                 const Eigen::MatrixXd& x,
                                 const Eigen::VectorXd& y, int c,
                                 bool allow_additive, Targets kind) {
  const Coordinates coords(space);
  Eigen::MatrixXd xc = x.topRows(c);
  Eigen::VectorXd yc = y.head(c);
  KeepNearestBest(coords, options_->max_fit_points, xc, yc);
  if (fit_ && fit_->Holds(c, seed, allow_additive, xc, yc)) {
    return fit_->fit;
  }
  // Small fits are quick, and decide most of a small budget: they stay on
  // the request path.
  if (options_->background_fits && c > options_->warm_refit_below) {
    if (!fit_) {
      // A fresh instance (a restarted server) has fitted nothing yet: the
      // prior's mode, as a never-matching checkpoint 0, until a fit lands.
      const std::unique_ptr<Kernel> kernel =
          coords.MakeKernel(KernelStructure::kProduct);
      fit_ = FitCache{0,
                      seed,
                      allow_additive,
                      Eigen::MatrixXd(),
                      Eigen::VectorXd(),
                      Fit{KernelStructure::kProduct,
                          PriorFor(coords, KernelStructure::kProduct)
                              .Mode(kernel->num_params())}};
    }
    FitInBackground(space, seed, std::move(xc), std::move(yc), c,
                    allow_additive, kind);
    // The latest fit: this checkpoint's if it just finished, else older.
    return fit_->fit;
  }
  const Fit fit = *FitCheckpoint(space, seed, xc, yc, c, allow_additive, kind,
                                 *options_, [] { return false; });
  fit_ = FitCache{c, seed, allow_additive, std::move(xc), std::move(yc), fit};
  return fit;
}

void MetricFits::FitInBackground(const SearchSpace& space, uint64_t seed,
                                 Eigen::MatrixXd xc, Eigen::VectorXd yc, int c,
                                 bool allow_additive, Targets kind) {
  if (!background_) background_ = std::make_shared<BackgroundFit>();
  const std::shared_ptr<BackgroundFit> background = background_;
  absl::MutexLock lock(&background->mu);
  if (background->done) {
    fit_ = *std::move(background->done);
    background->done.reset();
  }
  if (background->running || fit_->Holds(c, seed, allow_additive, xc, yc)) {
    return;
  }
  background->running = true;
  // The job owns copies of everything it reads: the suggester may be gone
  // before it runs.
  options_->background_fits([background, space, seed, xc = std::move(xc),
                             yc = std::move(yc), c, allow_additive, kind,
                             options = *options_](
                                const std::atomic<bool>& stop) mutable {
    std::optional<Fit> fit =
        FitCheckpoint(space, seed, xc, yc, c, allow_additive, kind, options,
                      [&] { return stop || background->cancelled; });
    absl::MutexLock lock(&background->mu);
    background->running = false;
    if (!fit) return;
    background->done = FitCache{
        c, seed, allow_additive, std::move(xc), std::move(yc), *std::move(fit)};
  });
}

std::optional<Fit> FitCheckpoint(const SearchSpace& space, uint64_t seed,
                                 const Eigen::MatrixXd& xc,
                                 const Eigen::VectorXd& yc, int c,
                                 bool allow_additive, Targets kind,
                                 const GpBanditOptions& options,
                                 const std::function<bool()>& stop) {
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

absl::StatusOr<MetricModel> MetricFits::Build(
    const SearchSpace& space, uint64_t seed, const Eigen::MatrixXd& x,
    const Eigen::VectorXd& y, Targets kind, const std::vector<int>* subset,
    bool allow_local) {
  const Coordinates coords(space);
  const int n = static_cast<int>(x.rows());
  const int c = LastRefitCheckpoint(n);
  // The additive kernel costs d times the product's per kernel entry: not
  // past max_local_points, where latency matters more than sample
  // efficiency.
  const Fit fit = CheckpointParams(
      space, seed, x, y, c,
      options_->select_additive && n <= options_->max_local_points, kind);
  const std::unique_ptr<Kernel> kernel = coords.MakeKernel(fit.structure);
  const GpParams& checkpoint = fit.params;
  GpParams params = checkpoint;
  if (n > c && n <= options_->warm_refit_below) {
    const GpPrior prior = PriorFor(coords, fit.structure);
    params = FitGpParams(*kernel, x, ToTargets(kind, y), {checkpoint}, prior,
                         options_->min_noise_variance,
                         options_->warm_fit_iterations);
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
  } else if (allow_local && n > options_->max_local_points) {
    // Local model: the nearest points to the incumbent in lengthscale units,
    // searched within their bounding box.
    const std::vector<int> rows =
        Nearest(coords, x, ArgMax(y), options_->max_local_points,
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
      if (factor_ && factor_structure_ == fit.structure &&
          factor_->params() == checkpoint && factor_->size() >= c &&
          factor_->size() <= n && factor_->x().cols() == x.cols() &&
          factor_->x() == x.topRows(factor_->size())) {
        gp = *std::move(factor_);
        m = gp->size();
      } else {
        absl::StatusOr<GaussianProcess> prefix = GaussianProcess::Create(
            *kernel, checkpoint, x.topRows(c), Eigen::VectorXd::Zero(c));
        if (!prefix.ok()) return prefix.status();
        gp = *std::move(prefix);
        m = c;
      }
      factor_.reset();
      for (int i = m; i < n; ++i) {
        if (absl::Status s = gp->AddPoint(x.row(i).transpose(), 0.0); !s.ok()) {
          return s;
        }
      }
      factor_ = *gp;
      factor_structure_ = fit.structure;
    }
    gp->SetTargets(targets);
  }
  MetricModel model{*std::move(gp),    fit.structure,      params, lengthscales,
                    std::move(data_x), std::move(targets), lower,  upper};
  if (kind == Targets::kStandardized) {
    const Standardization map = StandardizationOf(data_y);
    model.target_mean = map.mean;
    model.target_scale = map.scale;
  }
  return model;
}

}  // namespace hypertune::optimizer::gp_bandit
