// Early-stopping rules: pure functions of a study's learning curves that say
// whether a running trial should continue, stop or pause, and which paused
// trials to resume (ASHA's promotions). The rules are
//   - median (Golovin et al., "Google Vizier", KDD 2017): stop a trial whose
//     best value up to step s is worse than the median of the finished
//     trials' running averages at s;
//   - percentile: the median rule with another cut (see `percentile`);
//   - ASHA (Li et al., "A System for Massively Parallel Hyperparameter
//     Tuning", MLSys 2020): rungs at min_resource * eta^k; a trial reaching a
//     rung goes on only if it is in the top 1/eta of the trials that reached
//     that rung so far; with `pause_at_rungs` it pauses there instead of being
//     stopped, and is resumed (promoted) when later arrivals leave it in the
//     top 1/eta;
//   - Hyperband (Li et al., JMLR 2018) as several ASHA brackets, each trial
//     assigned to one bracket deterministically by its id.
// With several objectives (EarlyStoppingConfig::objectives_maximize) the
// rules judge them all unless multi_objective is kFirstObjective: ASHA and
// Hyperband order each rung by non-dominated fronts, each front as an
// epsilon-net or by hypervolume contribution (MO-ASHA, mo_early_stopping.h),
// and the median and percentile rules stop a trial only when it is worse
// than the cut on every objective (it is then dominated by the point of the
// objectives' cuts, and no objective it might still lead is given up). With
// stop_on_constraints any rule also stops a trial whose constraint metric is
// predicted to miss its bound at max_resource (ForecastConstraint).
// The resource is the step a trial reports (epochs). Nothing here keeps
// state: every answer is recomputed from the curves, so the caller may ask
// again with the same data and get the same answer. All functions are
// thread-safe.
#ifndef HYPERTUNE_OPTIMIZER_EARLY_STOPPING_H_
#define HYPERTUNE_OPTIMIZER_EARLY_STOPPING_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace hypertune::optimizer {

struct EarlyStoppingConfig {
  // Bounds that keep every rung and bracket computation exact in doubles and
  // free of overflow: 2^53 steps, eta up to 10^6, hence at most 54 rungs.
  static constexpr int64_t kMaxResource = int64_t{1} << 53;
  static constexpr double kMaxReductionFactor = 1e6;
  enum class Rule { kNone, kMedian, kPercentile, kAsha, kHyperband };
  Rule rule = Rule::kNone;
  // Whether larger objective values are better.
  bool maximize = true;
  // Median/percentile: a trial whose latest step is below grace_steps always
  // continues. Default 1 (every step may be judged).
  int64_t grace_steps = 1;
  // Median/percentile: the finished trials that must have reached step s
  // before anyone is judged at s. ASHA/Hyperband without pause: the trials
  // (this one included) that must have reached a rung before anyone is
  // stopped there. 0 (the default) means the rule's own: 5 for median and
  // percentile (Optuna's n_startup_trials), 1 for ASHA/Hyperband (as
  // Optuna's SuccessiveHalvingPruner: the second arrival is stopped when
  // worse than the first).
  int min_trials = 0;
  // Percentile rule, in (0, 100): the share (percent) of trials kept. A trial
  // is stopped when its best-so-far at s is worse than the value that the
  // best `percentile` percent of the finished trials' running averages reach
  // at s (linear interpolation between order statistics). 50 is the median
  // rule; 25 keeps only the top quarter. Default 50.
  double percentile = 50.0;
  // ASHA/Hyperband: the first rung, in steps, >= 1. Default 1.
  int64_t min_resource = 1;
  // ASHA/Hyperband: the full budget of a trial, in steps, in [min_resource,
  // kMaxResource]. The trial's program should train for exactly this many
  // steps. Default 81.
  int64_t max_resource = 81;
  // ASHA/Hyperband: eta, in [2, kMaxReductionFactor]: rungs grow by this
  // factor and the top 1/eta of each rung goes on. Default 3.
  double reduction_factor = 3.0;
  // Hyperband: how many brackets, the most aggressive first; 0 means all
  // s_max + 1 of them (s_max = floor(log_eta(max_resource / min_resource))).
  // Default 0.
  int brackets = 0;
  // ASHA/Hyperband: pause at a rung (checkpoint kept) instead of stopping.
  // Default false.
  bool pause_at_rungs = false;
  // ASHA/Hyperband with pause_at_rungs: DecideTrial pauses every trial at
  // every rung of its bracket, and one model of all the learning curves
  // (every bracket's), not the rung's ranking, decides which paused trials
  // go on (ModelPromotions in learning_curve_model.h; the service lets the
  // one it would resume first go on at once, ResumesAtOnce). Default false.
  bool promote_by_model = false;

  // How several objectives are judged; see the file comment. Default
  // kEpsilonNet (the service's default for a study with several objectives;
  // FIRST_OBJECTIVE is explicit).
  enum class MultiObjective { kFirstObjective, kEpsilonNet, kHypervolume };
  MultiObjective multi_objective = MultiObjective::kEpsilonNet;
  // Whether each objective is maximized, in TrialCurve::metrics' order, when
  // the study has several; [0] must equal `maximize`. Empty or one: the
  // first objective alone (TrialCurve::points). Default empty.
  std::vector<bool> objectives_maximize;
  // The constraints' bounds, in TrialCurve::metrics' order. Default empty.
  struct Bound {
    std::string name;  // shown in a stop's reason
    double lower = -std::numeric_limits<double>::infinity();
    double upper = std::numeric_limits<double>::infinity();
  };
  std::vector<Bound> constraints;
  // Any rule: stop a running trial whose constraint metric is predicted to
  // miss its bound at max_resource (ForecastConstraint in
  // mo_early_stopping.h); max_resource must be >= 1 then. Default false.
  bool stop_on_constraints = false;
};

// Whether `config` judges several objectives: more than one objective and
// multi_objective other than kFirstObjective.
bool JudgesSeveralObjectives(const EarlyStoppingConfig& config);

// Returns OK or INVALID_ARGUMENT naming the field and the problem, e.g.
// "early_stopping.max_resource: must be >= min_resource (3), got 1". Only the
// fields the rule uses are checked.
absl::Status ValidateEarlyStoppingConfig(const EarlyStoppingConfig& config);

// One trial's learning curve as the rules see it.
struct TrialCurve {
  enum class Status {
    kRunning,   // ACTIVE (or REQUESTED again after a lost lease).
    kPaused,    // PAUSED at an ASHA rung, checkpoint kept.
    kStopping,  // Stop decided, worker not yet gone: counts as finished.
    kFinished,  // COMPLETED or STOPPED.
  };
  int64_t id = 0;
  Status status = Status::kRunning;
  // (step, objective), steps non-decreasing; a repeated step (a trial resumed
  // from an older checkpoint) is fine: the rules read the first point at or
  // past each rung and the last point overall. Non-finite objectives are
  // ignored.
  std::vector<std::pair<int64_t, double>> points;
  // Every measurement's objectives and constraints when the config judges
  // several objectives or stops on constraints (else may stay empty): in
  // EarlyStoppingConfig::objectives_maximize's and constraints' order, NaN
  // where the measurement lacks the metric; steps as in `points`.
  struct Metrics {
    int64_t step = 0;
    std::vector<double> objectives;
    std::vector<double> constraints;
  };
  std::vector<Metrics> metrics;
};

enum class Action { kContinue, kStop, kPause };

struct Decision {
  Action action = Action::kContinue;
  // Human-readable, e.g. "median: best 0.61 at step 4 is worse than median
  // 0.72 of 5 trials". Empty for a plain kContinue with nothing to say.
  std::string reason;
};

// What to do with the running trial `trial_id` given its latest point.
// Median/percentile: kStop or kContinue. ASHA/Hyperband: only the point that
// first reaches a rung (below max_resource) of the trial's bracket is judged,
// ranked (ties to the smaller id) among the n trials of that bracket that
// reached the rung (several objectives: in the rung's MO-ASHA order, the
// trials without every objective at the rung left out). Without pause: it
// goes on when in the top
// max(1, floor(n / eta)) or while n < min_trials, and is stopped otherwise.
// With pause_at_rungs: it goes on at once when in the top floor(n / eta)
// (exactly what Promotions would do next), and is paused (kPause) otherwise.
// A trial at or past max_resource continues (its program ends by itself).
// With stop_on_constraints a trial predicted to miss a constraint is stopped
// first, whatever the rule. An unknown id, a trial without points or
// Rule::kNone (without stop_on_constraints) gives kContinue.
// REQUIRES: config is valid.
Decision DecideTrial(const EarlyStoppingConfig& config,
                     std::span<const TrialCurve> study, int64_t trial_id);

struct Promotion {
  int64_t trial_id = 0;
  // The rung (its resource, in steps) the trial is paused at.
  int64_t rung = 0;
  // Train until this step: the next rung of its bracket, or max_resource.
  int64_t next_budget = 0;
};

// The promotion that would resume the paused trial `curve`: from the
// highest rung of its bracket at or below its last step to the next rung
// (or max_resource). None when it is not paused or not past a rung.
// REQUIRES: config is valid.
std::optional<Promotion> PromotionOf(const EarlyStoppingConfig& config,
                                     const TrialCurve& curve);

// The paused trials to resume now, in the order SuggestTrials should hand
// them out (before any new configuration): highest rung first, then best
// first (ties to the smaller id). A paused trial is promotable when it is in
// the top floor(n / eta) of the n trials of its bracket that reached its
// rung (trials already promoted from there fill their places). `draining`
// means no new configuration will start (the study's trial budget is spent):
// then each rung keeps at least its best, max(1, floor(n / eta)), so the
// study still carries a configuration to max_resource. Empty unless the rule
// is ASHA/Hyperband with pause_at_rungs.
// REQUIRES: config is valid.
std::vector<Promotion> Promotions(const EarlyStoppingConfig& config,
                                  std::span<const TrialCurve> study,
                                  bool draining = false);

// The paused trials that no promotion will ever resume once nothing runs and
// no new configuration starts: those Promotions(..., draining=true) leaves
// out. The caller STOPs them at the study's end (after promoting the rest
// and letting them run). Ascending ids.
// REQUIRES: config is valid; no trial of `study` is kRunning.
std::vector<int64_t> UnpromotableTrials(const EarlyStoppingConfig& config,
                                        std::span<const TrialCurve> study);

// Hyperband's s_max + 1: the most brackets the config allows (1 for ASHA).
// REQUIRES: config is valid.
int MaxBrackets(const EarlyStoppingConfig& config);

// The brackets in use: `brackets` (or MaxBrackets when 0) for Hyperband, 1
// otherwise.
// REQUIRES: config is valid.
int NumBrackets(const EarlyStoppingConfig& config);

// The bracket of trial `trial_id` (ids from 1): 0 for ASHA; for Hyperband a
// deterministic smooth weighted round robin over brackets 0..NumBrackets-1,
// bracket b weighted as Hyperband allocates configurations,
// ceil((s_max + 1) * eta^(s_max - b) / (s_max - b + 1)), so bracket 0 (the
// most aggressive) gets the most trials and consecutive ids interleave.
// REQUIRES: config is valid.
int BracketOf(const EarlyStoppingConfig& config, int64_t trial_id);

// The rung resources of `bracket`, ascending, all below max_resource:
// round(min_resource * eta^(bracket + k)) for k = 0, 1, ... Empty when the
// bracket's first rung is already max_resource.
// REQUIRES: config is valid; 0 <= bracket < NumBrackets(config).
std::vector<int64_t> RungResources(const EarlyStoppingConfig& config,
                                   int bracket);

// For model-based multi-fidelity (BOHB): (trial id, objective at the
// resource) for the highest resource, among max_resource and every bracket's
// rungs, that at least `min_points` trials (any bracket, any status) reached,
// ascending ids. A trial's value at resource r is its first point at a step
// >= r. Empty when no resource has min_points trials. For the other rules,
// the last point of every finished trial, when there are min_points of them.
// When `resource` is not null it receives the resource chosen (0 when none;
// max_resource for the other rules).
// REQUIRES: config is valid.
std::vector<std::pair<int64_t, double>> HighestRungObservations(
    const EarlyStoppingConfig& config, std::span<const TrialCurve> study,
    int min_points, int64_t* resource = nullptr);

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_EARLY_STOPPING_H_
