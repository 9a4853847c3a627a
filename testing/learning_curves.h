// The early-stopping benchmark (`hypertune-bench early-stopping`): a
// synthetic suite of learning curves and an asynchronous study simulated over
// it that drives optimizer/early_stopping.h exactly as the service does
// (DecideTrial after every reported step; with pause mode, Promotions before
// new configurations). The cost measure is epochs: every reported step is
// one epoch, whoever runs it. Each call is self-contained and
// thread-compatible.
#ifndef HYPERTUNE_TESTING_LEARNING_CURVES_H_
#define HYPERTUNE_TESTING_LEARNING_CURVES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "optimizer/early_stopping.h"

namespace hypertune::bench {

// A pool of configurations, each a saturating learning curve (maximized)
//   y(t) = a - b * t^(-c) + noise(t),   t = 1 .. max_resource,
// with a ~ U(0.60, 0.95) the asymptote, b ~ U(0.1, 0.5) the initial gap,
// c ~ logU(0.15, 2) the speed (slow starters with a high asymptote cross
// fast starters with a low one), noise ~ N(0, 0.005^2) i.i.d. per epoch.
struct CurveSuite {
  uint64_t seed = 0;
  int64_t max_resource = 0;
  // curves[i][t - 1]: the noisy value config i reports at epoch t.
  std::vector<std::vector<double>> curves;
  // The noise-free value of config i at max_resource: its true quality.
  std::vector<double> quality;
  // max(quality): the full-budget optimum of the pool.
  double optimum = 0;
};

// The suite for `seed`: `configs` curves of `max_resource` epochs, from a
// SplitMix64 stream (portable, so the JSON written for the peer is the
// whole truth). REQUIRES: configs >= 1, max_resource >= 1
CurveSuite MakeCurveSuite(int configs, int64_t max_resource, uint64_t seed);

struct StudySimOptions {
  std::string label;
  optimizer::EarlyStoppingConfig config;
  // Simulated workers; each runs one epoch per tick.
  int workers = 4;
  // The target: the study's best (the full-budget trial with the best
  // reported final value) has quality >= optimum - tolerance * |optimum|.
  double tolerance = 0.01;
};

struct StudySimResult {
  // Epochs spent (all workers) when the target was first met, or all epochs
  // of the study when it never was.
  int64_t epochs_to_target = 0;
  bool reached = false;
  // The quality of the study's best at the end (the target, or the whole
  // pool tried).
  double final_quality = 0;
  // Configurations started.
  int trials = 0;
  // Trials that reached max_resource.
  int full_budget_trials = 0;
  int paused_resumes = 0;
};

// Runs a study over the pool, configurations in pool order, until the
// target is met or every configuration is done (then the paused trials
// that can never be promoted are stopped). Returns INVALID_ARGUMENT for an
// invalid config or a max_resource other than the suite's.
absl::StatusOr<StudySimResult> SimulateStudy(const CurveSuite& suite,
                                             const StudySimOptions& options);

// What one epoch did to a simulated trial (both simulations' step).
enum class EpochOutcome {
  kGoesOn,      // It keeps its worker.
  kFullBudget,  // It reached max_resource: finished.
  kLeft,        // Stopped or paused by the rule: its worker is free.
};

// Trial `study[k]` reports `value` for its next epoch; it is then finished
// at `max_resource`, or stopped or paused as DecideTrial says.
EpochOutcome RunEpoch(const optimizer::EarlyStoppingConfig& config,
                      std::vector<optimizer::TrialCurve>& study, size_t k,
                      double value, int64_t max_resource);

// Writes the suites as JSON for benchmarks/peers_optuna_pruners.py:
// {"max_resource", "tolerance", "suites": [{"seed", "optimum", "quality":
// [...], "curves": [[...], ...]}]}.
absl::Status WriteSuitesJson(const std::vector<CurveSuite>& suites,
                             double tolerance, const std::string& path);

}  // namespace hypertune::bench

#endif  // HYPERTUNE_TESTING_LEARNING_CURVES_H_
