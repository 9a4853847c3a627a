// The interface every search algorithm implements: given a study's search
// space and history, propose the next points.
//
// Suggest must be deterministic: same request, same answer, whether the
// instance is fresh or has served earlier requests. Model-based algorithms
// (GP_BANDIT) keep caches between calls (hyperparameters, Cholesky factors)
// that only make later calls faster, never different. Hence the contract:
// the service keeps one Suggester per study and calls it from one thread at
// a time (Suggest is not thread-safe; the service's StudyModel, handed only
// to the leader of the study's suggestion queue, is what ensures it),
// passing the full history every time.
// Histories are append-only in practice (new trials appended, pending ones
// turning completed); a suggester detects a matching prefix to update its
// model incrementally and otherwise rebuilds it. Instances of the stateless
// algorithms (RANDOM, QUASI_RANDOM) may be shared freely.
//
// Objectives and constraints: each completed trial carries one value per
// metric of the request (Observation::values, in SuggestRequest::metrics'
// order); a request that lists no metrics has one objective, so one value.
// Objectives arrive already turned into maximization; a constraint holds
// when lower <= value <= upper. A trial that misses a constraint is
// completed, not infeasible: kInfeasible keeps its meaning (bad
// parameters). An objective value of +-infinity counts as the worst finite
// value of that objective in the history, never as a number.
#ifndef HYPERTUNE_OPTIMIZER_SUGGESTER_H_
#define HYPERTUNE_OPTIMIZER_SUGGESTER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "optimizer/early_stopping.h"
#include "optimizer/search_space.h"

namespace hypertune::optimizer {

class LearningCurveModel;  // learning_curve_model.h

enum class Algorithm { kRandom, kQuasiRandom, kGpBandit, kTpe, kGrid };

// What became of a trial, as far as the model is concerned.
enum class Outcome {
  kCompleted,   // `values` holds the metrics.
  kInfeasible,  // The parameters are bad: steer away.
  kPending,     // Running or queued: do not propose it again.
};

// What a metric is to the optimizer.
enum class MetricRole {
  kObjective,   // Maximized.
  kConstraint,  // Must lie within [lower, upper].
};

// One metric of a multi-metric request.
struct MetricConfig {
  MetricRole role = MetricRole::kObjective;
  // kConstraint only: the bounds, either of them infinite for a one-sided
  // constraint (default: none). REQUIRES: lower < upper
  double lower = -std::numeric_limits<double>::infinity();
  double upper = std::numeric_limits<double>::infinity();
};

struct Observation {
  Assignment x;
  Outcome outcome = Outcome::kPending;
  // kCompleted only: one value per metric, in the order of
  // SuggestRequest::metrics (one, the objective, for a request without
  // metrics); objectives turned into maximization, constraints as measured.
  // Never NaN; +-infinity allowed.
  std::vector<double> values = {};
  // Cost-aware requests (SuggestRequest::cost): what the trial cost
  // (device-seconds, or the study's cost metric); 0 if not known.
  double cost = 0.0;
  // Multi-fidelity requests (SuggestRequest::fidelity): the trial's id, as
  // in its learning curve.
  int64_t trial_id = 0;
};

// Multi-fidelity studies (rules with rungs: ASHA, Hyperband): the rule and
// every trial's learning curve of the primary objective. The values a model
// learns from are then of one fidelity, the highest rung that enough
// trials reached (AtOneFidelity in fidelity.h), not the trials' results.
struct FidelityHistory {
  EarlyStoppingConfig rule;
  std::vector<TrialCurve> curves;
  // promote_by_model: the learning-curve model that ModelPromotions fitted
  // on these curves for the same suggestion, or null; ProposeFromCurves
  // then starts from it instead of fitting its own.
  const LearningCurveModel* model = nullptr;
};

// Cost-aware search (GP_BANDIT): each trial's cost is modelled by a GP on
// log cost and the acquisition becomes improvement per unit of expected
// cost raised to a power that falls from 1 to 0 as the horizon is spent
// (cost-cooled EI; gp_bandit_suggester.h).
struct CostAwareness {
  bool enabled = false;
  // The horizon: the cost the study may spend in all (0: none) and what
  // its trials have spent so far, failed ones included.
  double budget = 0.0;
  double spent = 0.0;
  // Without a budget, the horizon in trials (0: none, and the power stays
  // 1: EI per unit cost).
  int64_t max_trials = 0;
};

// Transfer (GP_BANDIT): an earlier study's completed trials, a prior for
// this study's model and never data of its own.
struct PriorStudy {
  // kCompleted observations, assignments of this request's space; values
  // per objective of the earlier study, in its order, turned into
  // maximization (on the prior study's own scale): objective k of this
  // request learns from values[k].
  std::vector<Observation> trials;
  // Per parameter of this space: whether the prior study has it. Where it
  // does not, the trials' value is a placeholder the prior ignores.
  std::vector<bool> shared;
};

struct SuggestRequest {
  const SearchSpace* space = nullptr;
  // Every trial the model may learn from (FAILED trials left out), oldest
  // first.
  std::vector<Observation> history;
  // Trials ever created in the study; sequence-based designs (Sobol) start
  // from this index so that no point repeats.
  int64_t trials_created = 0;
  // How many points to propose, at least 1.
  int count = 1;
  uint64_t seed = 0;
  // The metrics the optimizer models, at least one of them an objective,
  // with their values in Observation::values. Empty: one objective.
  std::vector<MetricConfig> metrics = {};
  // Optional: cost-aware search (GP_BANDIT).
  CostAwareness cost = {};
  // Optional: multi-fidelity (model-based algorithms: GP_BANDIT, TPE).
  // Not owned.
  const FidelityHistory* fidelity = nullptr;
  // Optional: earlier studies over this space, oldest first; flat spaces
  // only (GP_BANDIT). Not owned: they change rarely, and a copy per request
  // would cost as much as the suggestion.
  const std::vector<PriorStudy>* priors = nullptr;
};

class Suggester {
 public:
  virtual ~Suggester() = default;
  // Returns `request.count` valid assignments of `*request.space`; GRID
  // alone returns fewer, the points its grid has left. Non-const:
  // implementations may update caches (see above).
  virtual absl::StatusOr<std::vector<Assignment>> Suggest(
      const SuggestRequest& request) = 0;
  // Whether Suggest reads `request.history`; callers may leave it empty when
  // not (the history of a large study is costly to load).
  virtual bool UsesHistory() const { return true; }
  // Why the last Suggest fell back from the algorithm's own method for some
  // point of its batch: a short label, stable across releases, for
  // counters and logs (which add the study's name), e.g. GP_BANDIT's
  // "model_failed" (gp_bandit_suggester.h lists them); empty if it did not
  // fall back, and always for algorithms without a fallback. Read it after
  // Suggest, under the same lock.
  virtual std::string_view last_fallback_reason() const { return {}; }
};

// Runs `job(stop)` later, on another thread (the service's background
// pool); `stop` turns true once the result is no longer wanted (the study
// deleted, the server stopping), and the job then returns early.
using BackgroundJob = std::function<void(const std::atomic<bool>& stop)>;
using FitRunner = std::function<void(BackgroundJob job)>;

// Returns the suggester for `algorithm`; never null. GP_BANDIT runs its
// large model fits on `background_fits` if given (GpBanditOptions).
std::unique_ptr<Suggester> MakeSuggester(Algorithm algorithm,
                                         FitRunner background_fits = {});

// The checks every Suggest starts with: a space is set, count >= 1,
// trials_created >= 0, and every history entry is a valid assignment; with
// metrics, at least one objective and constraint bounds lower < upper (not
// NaN); one non-NaN value per metric (one without metrics) on every
// completed trial.
// Returns INVALID_ARGUMENT naming the field otherwise.
absl::Status ValidateRequest(const SuggestRequest& request);

// ValidateRequest plus the limits of the Sobol sequence that `algorithm`
// (its name, for the message) draws points from: at most
// SobolSequence::kMaxDimension parameters, and indices
// trials_created .. trials_created + count - 1 inside the sequence.
absl::Status ValidateSobolRequest(const SuggestRequest& request,
                                  const std::string& algorithm);

// The algorithm's name as the API spells it: "RANDOM", "QUASI_RANDOM",
// "GP_BANDIT", "TPE", "GRID".
std::string_view AlgorithmName(Algorithm algorithm);

// The inverse of AlgorithmName; INVALID_ARGUMENT listing the known names for
// anything else.
absl::StatusOr<Algorithm> ParseAlgorithm(std::string_view name);

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_SUGGESTER_H_
