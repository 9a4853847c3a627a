#include "optimizer/gp_bandit/models.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <utility>

#include "optimizer/acquisition.h"
#include "optimizer/hyperparameter_sampling.h"
#include "optimizer/pareto.h"
#include "optimizer/splitmix.h"

namespace hypertune::optimizer::gp_bandit {
namespace {

// With several objectives, the acquisition optimizer perturbs at most this
// many rows of the front, chosen by greedy hypervolume contribution.
constexpr int kFrontAnchors = 16;
// Feasibility GP: labels +-1 with this noise variance, unit signal.
constexpr double kFeasibilityNoise = 1e-2;
// Fantasies are noise-free: the pending evaluation will reveal f there, so
// the acquisition should see no uncertainty left.
constexpr double kFantasyNoise = 1e-8;

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

// Cuts the product Matérn's numeric lengthscales (its first parameters,
// in log space) to at most `cap`.
void CapLengthscales(const Coordinates& coords, double cap, GpParams& params) {
  const double log_cap = std::log(cap);
  int k = 0;
  for (int j = 0; j < coords.dim(); ++j) {
    if (coords.categorical[j]) continue;
    params.kernel[k] = std::min(params.kernel[k], log_cap);
    ++k;
  }
}

// Rows of a multi-metric table the acquisition optimizer perturbs: the best
// feasible trials (one objective), the feasible front (several; at most
// kFrontAnchors, chosen by greedy hypervolume contribution), or, with no
// feasible trial, those that miss the constraints by least.
std::vector<int> AnchorRows(const MetricTable& table) {
  const int n = static_cast<int>(table.rows.size());
  std::vector<int> feasible;
  for (int r = 0; r < n; ++r) {
    if (table.feasible[r]) feasible.push_back(r);
  }
  if (feasible.empty()) {
    const Eigen::VectorXd violation = Eigen::Map<const Eigen::VectorXd>(
        table.violation.data(), static_cast<Eigen::Index>(n));
    return TopEntries(-violation, kAnchors);
  }
  std::vector<int> out;
  if (table.objectives.size() == 1) {
    for (int k : TopEntries(Entries(table.objective_values.col(0), feasible),
                            kAnchors)) {
      out.push_back(feasible[k]);
    }
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

// anchors with the prior's best trials after them.
Eigen::MatrixXd WithPriorAnchors(const Eigen::MatrixXd& anchors,
                                 const PriorFit& prior) {
  Eigen::MatrixXd both(anchors.rows() + prior.anchors.rows(), anchors.cols());
  both << anchors, prior.anchors;
  return both;
}

// An objective's model, through its transfer prior when it has one.
absl::StatusOr<MetricModel> BuildObjective(
    const ModelInputs& in, uint64_t seed, const Eigen::VectorXd& y,
    Targets targets, const std::vector<int>* subset, bool allow_local,
    const PriorFit* prior, MetricFits& fits) {
  if (prior != nullptr) {
    return BuildTransferModel(*in.space, seed, in.history->x, y, targets,
                              subset, allow_local, *prior, fits);
  }
  return fits.Build(*in.space, seed, in.history->x, y, targets, subset,
                    allow_local);
}

// One objective, no constraints: a local model around the incumbent past
// max_local_points, LogEI weighted by the classifier, hyperparameter draws
// while the history is small.
absl::StatusOr<Models> BuildPlainModels(const ModelInputs& in,
                                        const GpBanditOptions& options,
                                        std::vector<MetricFits>& fits) {
  const Coordinates& coords = *in.coords;
  const PriorFit* prior = in.priors.empty() ? nullptr : in.priors[0];
  absl::StatusOr<MetricModel> built = BuildObjective(
      in, in.seed, in.history->table.objective_values.col(0), Targets::kWarped,
      nullptr, /*allow_local=*/true, prior, fits[0]);
  if (!built.ok()) return built.status();
  Models models;
  models.plain = true;
  MetricModel& m = models.objectives.emplace_back(*std::move(built));
  const Eigen::VectorXd& targets = m.targets;
  // Without own trials yet, the bar is the best the prior predicts at its
  // own trials.
  if (targets.size() > 0) {
    models.best = targets.maxCoeff();
  } else {
    Eigen::VectorXd mean, var;
    m.gp.Predict(prior->x, &mean, &var);
    models.best = mean.maxCoeff();
  }
  models.any_feasible = true;
  // Anchors: the best observed points, best first, then, while the own
  // ones are few, the prior's.
  models.anchors = Rows(m.data_x, TopEntries(targets, kAnchors));
  if (targets.size() > 0) models.incumbent = models.anchors.row(0).transpose();
  if (prior != nullptr && targets.size() < kAnchors) {
    models.anchors = WithPriorAnchors(models.anchors, *prior);
  }
  models.perturbation_scale = PerturbationScale(coords, m.lengthscales);
  models.box_lower = m.lower;
  models.box_upper = m.upper;
  // The acquisition's models with their numeric lengthscales cut to
  // max_acquisition_lengthscale (options.h); the perturbation scales and
  // the feasibility model keep the fit's.
  const bool bound =
      prior == nullptr && options.max_acquisition_lengthscale > 0 &&
      m.structure == KernelStructure::kProduct && coords.tree.empty();
  auto bounded = [&](GpParams params) {
    if (bound) {
      CapLengthscales(coords, options.max_acquisition_lengthscale, params);
    }
    return params;
  };
  if (bound) {
    absl::StatusOr<GaussianProcess> gp = GaussianProcess::Create(
        m.gp.kernel(), bounded(m.params), m.data_x, targets);
    if (gp.ok()) m.gp = *std::move(gp);
  }
  // Few trials and none pending: average over hyperparameter draws (no
  // transfer prior, whose own weight is fitted at the MAP). With trials
  // pending the first fantasy would drop them (AddFantasy): not drawn.
  if (prior == nullptr && options.hyperparameter_draws > 0 &&
      targets.size() <= options.integrate_below &&
      in.history->pending.empty()) {
    const Kernel& kernel = m.gp.kernel();
    SplitMix64 rng(MixSeeds(in.seed, static_cast<uint64_t>(targets.size())));
    const std::vector<GpParams> draws = SampleGpParams(
        kernel, m.data_x, targets, m.params, PriorFor(coords, m.structure),
        options.min_noise_variance, rng,
        {.samples = options.hyperparameter_draws});
    for (const GpParams& params : draws) {
      absl::StatusOr<GaussianProcess> draw =
          GaussianProcess::Create(kernel, bounded(params), m.data_x, targets);
      if (draw.ok()) models.draws.push_back(*std::move(draw));
    }
  }
  if (in.history->infeasible.rows() > 0) {
    models.classifier = FeasibilityClassifier(
        coords, m.data_x, in.history->infeasible, m.params, m.structure);
  }
  return models;
}

// Constraints or several objectives: every model on the rows nearest the
// anchors past max_local_points.
absl::StatusOr<Models> BuildMetricModels(const ModelInputs& in,
                                         const GpBanditOptions& options,
                                         std::vector<MetricFits>& fits) {
  const Coordinates& coords = *in.coords;
  const EncodedHistory& h = *in.history;
  const MetricTable& table = h.table;
  const int n = h.completed();
  const int num_objectives = h.num_objectives();
  Models m;
  const std::vector<int> anchor_rows = AnchorRows(table);
  std::vector<int> data_rows(n);
  std::iota(data_rows.begin(), data_rows.end(), 0);
  const bool local = n > options.max_local_points;
  if (local) {
    data_rows =
        NearestToAny(coords, h.x, anchor_rows, options.max_local_points);
  }
  auto metric_seed = [&](int metric) {
    // Metric 0 keeps the request's seed, as in the single-objective form.
    return metric == 0 ? in.seed
                       : MixSeeds(in.seed, static_cast<uint64_t>(metric));
  };
  for (int c = 0; c < num_objectives; ++c) {
    const int metric = table.objectives[c];
    const PriorFit* prior =
        c < static_cast<int>(in.priors.size()) ? in.priors[c] : nullptr;
    absl::StatusOr<MetricModel> built = BuildObjective(
        in, metric_seed(metric), table.objective_values.col(c),
        num_objectives > 1 ? Targets::kStandardized : Targets::kWarped,
        local ? &data_rows : nullptr, /*allow_local=*/false, prior,
        fits[metric]);
    if (!built.ok()) return built.status();
    m.objectives.push_back(*std::move(built));
  }
  for (int c = 0; c < h.num_constraints(); ++c) {
    const int metric = table.constraints[c];
    absl::StatusOr<MetricModel> built = fits[metric].Build(
        *in.space, metric_seed(metric), h.x, table.constraint_values.col(c),
        Targets::kStandardized, local ? &data_rows : nullptr,
        /*allow_local=*/false);
    if (!built.ok()) return built.status();
    const MetricConfig& config = (*in.metrics)[metric];
    m.lower.push_back((config.lower - built->target_mean) /
                      built->target_scale);
    m.upper.push_back((config.upper - built->target_mean) /
                      built->target_scale);
    m.constraints.push_back(*std::move(built));
  }
  const MetricModel& first = m.objectives.front();
  if (h.infeasible.rows() > 0) {
    m.classifier = FeasibilityClassifier(coords, first.data_x, h.infeasible,
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
    m.reference =
        front_nadir - (options.reference_slack * (front_nadir - data_nadir))
                          .cwiseMax(options.min_reference_margin);
  }
  m.anchors = Rows(h.x, anchor_rows);
  // While the own feasible trials are few, the priors' best trials too.
  if (static_cast<int>(feasible.size()) < kAnchors) {
    for (const PriorFit* prior : in.priors) {
      if (prior != nullptr) m.anchors = WithPriorAnchors(m.anchors, *prior);
    }
  }
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
  m.box_lower = Eigen::VectorXd::Zero(coords.dim());
  m.box_upper = Eigen::VectorXd::Ones(coords.dim());
  return m;
}

}  // namespace

EncodedHistory EncodeHistory(const SuggestRequest& request,
                             const Coordinates& coords) {
  const SearchSpace& space = *request.space;
  EncodedHistory h;
  h.table = TabulateMetrics(request);
  std::vector<Eigen::VectorXd> infeasible, costed;
  std::vector<double> log_costs;
  for (const Observation& o : request.history) {
    h.taken.insert(o.x);
    const Eigen::VectorXd x = coords.FromAssignment(space, o.x);
    if (request.cost.enabled && o.outcome != Outcome::kPending && o.cost > 0) {
      costed.push_back(x);
      log_costs.push_back(std::log(o.cost));
    }
    if (o.outcome == Outcome::kInfeasible) infeasible.push_back(x);
    if (o.outcome == Outcome::kPending) h.pending.push_back(x);
  }
  h.x.resize(static_cast<Eigen::Index>(h.table.rows.size()), coords.dim());
  for (size_t r = 0; r < h.table.rows.size(); ++r) {
    h.x.row(static_cast<Eigen::Index>(r)) =
        coords.FromAssignment(space, request.history[h.table.rows[r]].x)
            .transpose();
  }
  h.infeasible = ToMatrix(infeasible, coords.dim());
  h.costed_x = ToMatrix(costed, coords.dim());
  h.log_costs = Eigen::Map<const Eigen::VectorXd>(
      log_costs.data(), static_cast<Eigen::Index>(log_costs.size()));
  return h;
}

absl::StatusOr<Models> BuildModels(const ModelInputs& in,
                                   const GpBanditOptions& options,
                                   std::vector<MetricFits>& fits) {
  return in.history->plain() ? BuildPlainModels(in, options, fits)
                             : BuildMetricModels(in, options, fits);
}

void Models::AddFantasy(const Eigen::VectorXd& x) {
  draws.clear();
  bool predicted_feasible = true;
  Eigen::VectorXd mean, var;
  for (size_t c = 0; c < constraints.size(); ++c) {
    constraints[c].gp.Predict(x.transpose(), &mean, &var);
    predicted_feasible &= mean[0] >= lower[c] && mean[0] <= upper[c];
    (void)constraints[c].gp.AddPoint(x, mean[0], kFantasyNoise);
  }
  Eigen::VectorXd outcome(objectives.size());
  for (size_t c = 0; c < objectives.size(); ++c) {
    objectives[c].gp.Predict(x.transpose(), &mean, &var);
    outcome[static_cast<Eigen::Index>(c)] = mean[0];
    (void)objectives[c].gp.AddPoint(x, mean[0], kFantasyNoise);
  }
  if (!any_feasible || !predicted_feasible) return;
  if (objectives.size() == 1) {
    best = std::max(best, outcome[0]);
  } else {
    pending_front.push_back(outcome);
  }
}

}  // namespace hypertune::optimizer::gp_bandit
