// The in-process drivers of the multi-objective and constrained protocols
// (benchmarks/README.md, "Multi-objective and constrained"): the
// hypervolume an optimizer's trials reach on a multi-objective problem, the
// regret of its best feasible trial on a constrained one, and suggestion
// latency with several metrics. No server, no storage: the optimizer
// library alone, fed through SuggestRequest::metrics. Self-contained (only
// mo_functions.h and the optimizer). Each call is thread-compatible.
#ifndef HYPERTUNE_TESTING_MULTI_OBJECTIVE_H_
#define HYPERTUNE_TESTING_MULTI_OBJECTIVE_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "optimizer/search_space.h"
#include "optimizer/suggester.h"
#include "testing/mo_functions.h"

namespace hypertune::bench {

struct MetricsRunOptions {
  optimizer::Algorithm algorithm = optimizer::Algorithm::kGpBandit;
  // Trials per run (default 100).
  int trials = 100;
  // Simulated workers (default 1): each suggestion is made while
  // parallel - 1 earlier trials are pending; they complete oldest first.
  int parallel = 1;
  // The optimizer's seed (default 0).
  uint64_t seed = 0;
};

struct MultiObjectiveRun {
  // hypervolume_fraction[k]: the hypervolume of the first k + 1 trials'
  // outcomes above the problem's reference point, over the true front's.
  std::vector<double> hypervolume_fraction;
  double seconds = 0;
};

// Minimizes every objective of `problem` (the optimizer maximizes the
// negated values). REQUIRES: options.trials >= 1, options.parallel >= 1
absl::StatusOr<MultiObjectiveRun> RunMultiObjective(
    const MultiObjectiveProblem& problem, const MetricsRunOptions& options);

struct ConstrainedRun {
  // best_regret[k]: the best objective value among the feasible trials of
  // the first k + 1 minus the known minimum; problem.infeasible_regret
  // while none is feasible.
  std::vector<double> best_regret;
  double seconds = 0;
};

// Minimizes `problem` subject to its constraints (each an upper bound 0).
// REQUIRES: options.trials >= 1, options.parallel >= 1
absl::StatusOr<ConstrainedRun> RunConstrained(const ConstrainedProblem& problem,
                                              const MetricsRunOptions& options);

// The search space of a box: one linear double x0, x1, ... per dimension.
absl::StatusOr<optimizer::SearchSpace> BoxSpace(
    const std::vector<std::pair<double, double>>& bounds);

struct MetricsLatency {
  double median_ms = 0;
  double p95_ms = 0;
  double max_ms = 0;
};

// A study of `history` completed uniform random trials on [0,1]^dim with
// `objectives` smooth objectives (minimized: sum((x - c_k)^2) with c_k
// spread over (0.3, 0.7)) and `constraints` linear constraints
// (sum(x) - dim (0.5 + 0.1 k) <= 0), then `rounds` rounds of suggest +
// complete on one suggester; statistics of the suggestion times. With one
// objective and no constraints, the study of `hypertune-bench latency`
// (sum((x - 0.3)^2), the same random trials) in the metrics form.
// REQUIRES: dim >= 1, history >= 0, objectives >= 1, constraints >= 0,
// rounds >= 1
absl::StatusOr<MetricsLatency> MeasureMetricsLatency(
    optimizer::Algorithm algorithm, int dim, int history, int objectives,
    int constraints, int rounds = 20);

}  // namespace hypertune::bench

#endif  // HYPERTUNE_TESTING_MULTI_OBJECTIVE_H_
