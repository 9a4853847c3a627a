#include "optimizer/learning_curve_model.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <Eigen/Core>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "optimizer/acquisition.h"
#include "optimizer/conditional.h"
#include "optimizer/fidelity.h"
#include "optimizer/gp.h"
#include "optimizer/gp_bandit/coordinates.h"
#include "optimizer/kernel.h"
#include "optimizer/sobol.h"
#include "optimizer/splitmix.h"

namespace hypertune::optimizer {
namespace {

// The most (trial, rung) values the model is fitted on: the fit is cubic in
// them and runs while the study's suggestions wait.
constexpr int kMaxRows = 160;
// A new configuration is the best of kCandidates quasi-random points and
// kLocalCandidates Gaussian steps (sd kLocalStep in the unit cube) around
// each of the kLocalCentres configurations the model expects most of.
constexpr int kCandidates = 512;
constexpr int kLocalCentres = 5;
constexpr int kLocalCandidates = 64;
constexpr double kLocalStep = 0.05;
constexpr int kFitIterations = 60;
constexpr double kMinNoise = 1e-6;
// Once a trial finished, ASHA's promotions that the model gives less than
// kMinChance to beat the best final value stay paused (Domhan et al., IJCAI
// 2015, end a run below a 5% chance), and paused trials ASHA passes over
// that it gives at least kSlowStarterChance to beat it go on. A slow
// starter ranks low at every rung, so ASHA leaves it paused until the table
// drains; at a 50% bar the best configuration of the Fashion-MNIST table,
// rank 52 at epoch 4 and first at 16, waited there for hundreds of epochs
// with a 1-32% chance (benchmarks/README.md).
constexpr double kMinChance = 0.05;
constexpr double kSlowStarterChance = 0.25;

// A trial's value at one resource level (a rung, or max_resource).
struct Row {
  int trial;  // index into study
  int level;  // index into the resources
  double y;   // maximized
};

// The rungs of bracket 0, which include every other Hyperband bracket's,
// then max_resource.
std::vector<int64_t> Resources(const EarlyStoppingConfig& config) {
  std::vector<int64_t> resources = RungResources(config, 0);
  resources.push_back(config.max_resource);
  return resources;
}

// The model's input: the encoded assignment `unit` in the model's
// coordinates (categories as indices), then the level coordinate.
Eigen::VectorXd CurveInput(const gp_bandit::Coordinates& coords,
                           const Eigen::VectorXd& unit, double level) {
  Eigen::VectorXd at(coords.dim() + 1);
  at.head(coords.dim()) = coords.FromUnit(unit);
  at(coords.dim()) = level;
  return at;
}

// Level k's coordinate in the model: log resource scaled onto [0, 1]
// (learning curves move on a log scale of epochs).
double LevelCoordinate(const std::vector<int64_t>& resources, int level) {
  const double span = std::log(static_cast<double>(resources.back()) /
                               static_cast<double>(resources.front()));
  if (span <= 0) return 0.0;
  return std::log(static_cast<double>(resources[level]) /
                  static_cast<double>(resources.front())) /
         span;
}

// The values `curve` reported at each level it reached: its first finite
// point in [resource_k, resource_k+1), so that a trial that reported past a
// level without stopping there does not stand for that level.
std::vector<std::pair<int, double>> LevelValues(
    const std::vector<int64_t>& resources, const TrialCurve& curve) {
  std::vector<std::pair<int, double>> values;
  const int levels = static_cast<int>(resources.size());
  for (int k = 0; k < levels; ++k) {
    const int64_t end =
        k + 1 < levels ? resources[k + 1] : std::numeric_limits<int64_t>::max();
    for (const auto& [step, value] : curve.points) {
      if (step >= resources[k] && step < end && std::isfinite(value)) {
        values.emplace_back(k, value);
        break;
      }
    }
  }
  return values;
}

// At most kMaxRows rows: the higher levels first (fewer trials reach them
// and they carry the curves' ends), then the best values within a level.
std::vector<Row> SelectRows(std::vector<Row> rows) {
  if (static_cast<int>(rows.size()) <= kMaxRows) return rows;
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (a.level != b.level) return a.level > b.level;
    return a.y > b.y;
  });
  rows.resize(kMaxRows);
  return rows;
}

}  // namespace

std::optional<LearningCurveModel> LearningCurveModel::Fit(
    const EarlyStoppingConfig& config, const SearchSpace& space,
    std::span<const TrialCurve> study, std::span<const Assignment> parameters) {
  assert(parameters.size() == study.size());
  const std::vector<int64_t> resources = Resources(config);
  const int levels = static_cast<int>(resources.size());
  const int dim = space.dim();
  std::vector<Row> rows;
  int with_values = 0;
  for (size_t i = 0; i < study.size(); ++i) {
    const std::vector<std::pair<int, double>> values =
        LevelValues(resources, study[i]);
    for (const auto& [level, value] : values) {
      rows.push_back(
          {static_cast<int>(i), level, config.maximize ? value : -value});
    }
    with_values += !values.empty();
  }
  if (levels < 2 || with_values < MinTrialsAtFidelity(dim + 1)) {
    return std::nullopt;
  }
  // Curves rise with the resource: each level's offset is the median gain
  // over the level below of the trials seen at both (paired, so that the
  // better trials' reaching higher levels does not count as a gain; the
  // median, so that one noisy epoch does not move every prediction), and
  // the GP models what is left, which varies little along a curve.
  std::vector<double> offset(levels, 0.0);
  {
    std::vector<std::vector<double>> by_trial(
        study.size(), std::vector<double>(levels, std::nan("")));
    for (const Row& row : rows) by_trial[row.trial][row.level] = row.y;
    for (int k = 1; k < levels; ++k) {
      std::vector<double> gains;
      for (const std::vector<double>& values : by_trial) {
        if (std::isfinite(values[k]) && std::isfinite(values[k - 1])) {
          gains.push_back(values[k] - values[k - 1]);
        }
      }
      double gain = 0;
      if (!gains.empty()) {
        std::nth_element(gains.begin(), gains.begin() + gains.size() / 2,
                         gains.end());
        gain = gains[gains.size() / 2];
      }
      offset[k] = offset[k - 1] + gain;
    }
  }
  rows = SelectRows(std::move(rows));

  // Inputs (parameters in the model's coordinates: unit cube, or category
  // index; level coordinate); outputs standardized, less the level's offset.
  const int n = static_cast<int>(rows.size());
  gp_bandit::Coordinates coords(space);
  Eigen::MatrixXd x(n, dim + 1);
  Eigen::VectorXd y(n);
  for (int r = 0; r < n; ++r) {
    x.row(r) = CurveInput(coords, space.Encode(parameters[rows[r].trial]),
                          LevelCoordinate(resources, rows[r].level))
                   .transpose();
    y(r) = rows[r].y;
  }
  const double mean = y.mean();
  const double scale =
      std::max(std::sqrt((y.array() - mean).square().mean()), 1e-12);
  y = (y.array() - mean) / scale;
  Eigen::VectorXd residual(n);
  for (int r = 0; r < n; ++r) {
    residual(r) = y(r) - offset[rows[r].level] / scale;
  }
  std::vector<bool> categorical = coords.categorical;
  categorical.push_back(false);  // the level
  const std::unique_ptr<Kernel> kernel = MakeMixedKernel(categorical);
  const GpPrior prior = GpPrior::ForDimension(dim + 1);
  const GpParams params =
      FitGpParams(*kernel, x, residual, {prior.Mode(kernel->num_params())},
                  prior, kMinNoise, kFitIterations);
  absl::StatusOr<GaussianProcess> gp =
      GaussianProcess::Create(*kernel, params, x, residual);
  if (!gp.ok()) return std::nullopt;

  // The bar: the best final value seen or, before any trial finished, the
  // best final value the model expects of a started trial.
  LearningCurveModel model(*std::move(gp), std::move(coords),
                           offset.back() / scale);
  double bar = -std::numeric_limits<double>::infinity();
  for (int r = 0; r < n; ++r) {
    if (rows[r].level == levels - 1) bar = std::max(bar, y(r));
  }
  model.finished_ = std::isfinite(bar);
  if (!std::isfinite(bar)) {
    for (const Assignment& a : parameters) {
      bar = std::max(bar, model.Final(space.Encode(a)).mean);
    }
  }
  model.bar_ = bar;
  return model;
}

LearningCurveModel::Posterior LearningCurveModel::Final(
    const Eigen::VectorXd& unit) const {
  Eigen::VectorXd mu, var;
  gp_.Predict(CurveInput(coords_, unit, 1.0).transpose(), &mu, &var);
  return {mu(0) + final_offset_, std::sqrt(std::max(var(0), 0.0))};
}

double LearningCurveModel::ChanceToBeatBar(const Eigen::VectorXd& unit) const {
  const Posterior p = Final(unit);
  double unused = 0;
  return std::exp(
      LogNormalCdf((p.mean - bar_) / std::max(p.sd, kMinSigma), &unused));
}

double LearningCurveModel::LogImprovementOverBar(
    const Eigen::VectorXd& unit) const {
  const Posterior p = Final(unit);
  return Acquire(AcquisitionKind::kLogEi, p.mean, p.sd, bar_, 0.0).value;
}

void LearningCurveModel::AddBelief(const Eigen::VectorXd& unit) {
  const Eigen::VectorXd at = CurveInput(coords_, unit, 0.0);
  double mean = 0, variance = 0;
  gp_.PredictWithGradient(at, &mean, &variance, nullptr, nullptr);
  // A failure leaves the model as it was: the proposal may then repeat.
  gp_.AddPoint(at, mean, kMinNoise).IgnoreError();
}

std::vector<Promotion> ModelPromotions(
    const EarlyStoppingConfig& config, const SearchSpace& space,
    std::span<const TrialCurve> study, std::span<const Assignment> parameters,
    bool draining, std::optional<LearningCurveModel>* fitted) {
  const std::vector<Promotion> asha = Promotions(config, study, draining);
  std::optional<LearningCurveModel> own;
  std::optional<LearningCurveModel>& model = fitted ? *fitted : own;
  model.reset();
  if (draining) return asha;
  model = LearningCurveModel::Fit(config, space, study, parameters);
  if (!model) return asha;
  struct Scored {
    Promotion promotion;
    double chance;
  };
  std::vector<Scored> scored;
  for (size_t i = 0; i < study.size(); ++i) {
    if (study[i].status != TrialCurve::Status::kPaused) continue;
    const double chance = model->ChanceToBeatBar(space.Encode(parameters[i]));
    const auto ranked = std::find_if(
        asha.begin(), asha.end(),
        [&](const Promotion& p) { return p.trial_id == study[i].id; });
    if (ranked != asha.end()) {
      if (!model->finished() || chance >= kMinChance) {
        scored.push_back({*ranked, chance});
      }
    } else if (model->finished() && chance >= kSlowStarterChance) {
      if (const std::optional<Promotion> p = PromotionOf(config, study[i])) {
        scored.push_back({*p, chance});
      }
    }
  }
  std::stable_sort(
      scored.begin(), scored.end(),
      [](const Scored& a, const Scored& b) { return a.chance > b.chance; });
  std::vector<Promotion> promotions;
  for (const Scored& s : scored) promotions.push_back(s.promotion);
  return promotions;
}

bool ResumesAtOnce(const EarlyStoppingConfig& config, const SearchSpace& space,
                   std::span<const TrialCurve> study,
                   std::span<const Assignment> parameters, int64_t trial_id) {
  std::vector<TrialCurve> paused(study.begin(), study.end());
  for (TrialCurve& curve : paused) {
    if (curve.id == trial_id) curve.status = TrialCurve::Status::kPaused;
  }
  const std::vector<Promotion> promotions =
      ModelPromotions(config, space, paused, parameters, /*draining=*/false);
  return !promotions.empty() && promotions.front().trial_id == trial_id;
}

std::optional<std::vector<Assignment>> ProposeFromCurves(
    const SuggestRequest& request) {
  if (request.fidelity == nullptr) return std::nullopt;
  const SearchSpace& space = *request.space;
  const FidelityHistory& fidelity = *request.fidelity;
  absl::flat_hash_map<int64_t, const Assignment*> parameters_of;
  for (const Observation& o : request.history) {
    parameters_of[o.trial_id] = &o.x;
  }
  std::vector<TrialCurve> curves;
  std::vector<Assignment> parameters;
  absl::flat_hash_set<int64_t> with_data;
  for (const TrialCurve& curve : fidelity.curves) {
    const auto it = parameters_of.find(curve.id);
    if (it == parameters_of.end()) continue;
    curves.push_back(curve);
    parameters.push_back(*it->second);
    if (!curve.points.empty()) with_data.insert(curve.id);
  }
  std::optional<LearningCurveModel> model =
      fidelity.model != nullptr
          ? std::optional<LearningCurveModel>(*fidelity.model)
          : LearningCurveModel::Fit(fidelity.rule, space, curves, parameters);
  if (!model) return std::nullopt;
  // Trials that run without a value yet, and each point proposed here, are
  // believed to reach the model's mean at the first rung (the kriging
  // believer), so that the next proposal looks elsewhere.
  for (const Observation& o : request.history) {
    if (o.outcome == Outcome::kPending && !with_data.contains(o.trial_id)) {
      model->AddBelief(space.Encode(o.x));
    }
  }
  // Candidates: quasi-random points, and perturbations of the started
  // configurations the model expects most of.
  std::vector<std::pair<double, Eigen::VectorXd>> expected;
  for (const Assignment& a : parameters) {
    const Eigen::VectorXd unit = space.Encode(a);
    expected.emplace_back(model->Final(unit).mean, unit);
  }
  std::sort(expected.begin(), expected.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  // Never a configuration the study already has, nor one proposed twice.
  AssignmentSet taken;
  for (const Observation& o : request.history) taken.insert(o.x);
  std::vector<Assignment> proposals;
  for (int k = 0; k < request.count; ++k) {
    const uint64_t stream = MixSeeds(
        request.seed, static_cast<uint64_t>(request.trials_created + k));
    const SobolSequence sobol(space.dim(), stream);
    SplitMix64 rng(stream);
    std::vector<Assignment> candidates;
    for (int i = 0; i < kCandidates; ++i) {
      candidates.push_back(space.Decode(sobol.Point(i)));
    }
    for (size_t c = 0; c < std::min<size_t>(kLocalCentres, expected.size());
         ++c) {
      for (int i = 0; i < kLocalCandidates; ++i) {
        Eigen::VectorXd unit = expected[c].second;
        for (int j = 0; j < unit.size(); ++j) {
          unit(j) =
              std::clamp(unit(j) + kLocalStep * rng.NextNormal(), 0.0, 1.0);
        }
        candidates.push_back(space.Decode(unit));
      }
    }
    const Assignment* best = nullptr;
    double best_score = -std::numeric_limits<double>::infinity();
    for (const Assignment& a : candidates) {
      if (taken.contains(a)) continue;
      const double score = model->LogImprovementOverBar(space.Encode(a));
      if (best == nullptr || score > best_score) {
        best_score = score;
        best = &a;
      }
    }
    // Every candidate taken (a small discrete space): the caller's own
    // algorithm proposes instead.
    if (best == nullptr) return std::nullopt;
    taken.insert(*best);
    proposals.push_back(*best);
    model->AddBelief(space.Encode(*best));
  }
  return proposals;
}

}  // namespace hypertune::optimizer
