// The completed trials of a multi-metric request (suggester.h) as every
// algorithm reads them: objective values with infinities replaced by the
// worst value seen, constraint values, feasibility and total violation.
// Pure functions; thread-safe.
#ifndef HYPERTUNE_OPTIMIZER_METRICS_H_
#define HYPERTUNE_OPTIMIZER_METRICS_H_

#include <vector>

#include <Eigen/Core>

#include "optimizer/suggester.h"

namespace hypertune::optimizer {

struct MetricTable {
  // Indices into SuggestRequest::metrics, in its order.
  std::vector<int> objectives;
  std::vector<int> constraints;
  // The history index of each completed trial, oldest first.
  std::vector<int> rows;
  // rows x objectives, maximized; +-infinity replaced by the column's
  // lowest finite value (0 if it has none).
  Eigen::MatrixXd objective_values;
  // rows x constraints as measured; +-infinity clamped to the column's
  // finite range (0 if it has none), so that a model can fit them.
  Eigen::MatrixXd constraint_values;
  // Per row: every constraint holds (judged on the measured values, so an
  // infinite value outside a bound misses it).
  std::vector<bool> feasible;
  // Per row: the sum over constraints of the distance from the measured
  // value to the bounds (0 when feasible; +infinity for an infinite miss).
  std::vector<double> violation;
};

// A request without metrics is tabulated as one objective.
// REQUIRES: ValidateRequest(request).ok()
MetricTable TabulateMetrics(const SuggestRequest& request);

// The request's metrics; one objective for a request that lists none.
std::vector<MetricConfig> MetricsOf(const SuggestRequest& request);

// The rows of `table` from most to least preferred, for a split that keeps
// the first `keep` (TPE's "good" group):
//  - feasible rows before the others (feasibility first, as Deb's
//    constrained domination, "An efficient constraint handling method for
//    genetic algorithms", CMAME 186, 2000, and Optuna's constrained TPE);
//  - feasible rows by non-domination rank of their objectives (one
//    objective: by value), whole ranks while they fit in `keep`; the rank
//    that straddles `keep` ordered by greedy hypervolume contribution
//    (reference: that rank's nadir less a tenth of its range), as MOTPE's
//    split (Ozaki et al., "Multiobjective tree-structured Parzen estimator",
//    JAIR 73, 2022);
//  - the other rows by total violation, least first.
// Ties keep history order. REQUIRES: keep >= 0
std::vector<int> PreferenceOrder(const MetricTable& table, int keep);

// True for one objective and no constraints (a request without metrics
// too): the single-objective problem.
bool IsPlainSingleObjective(const SuggestRequest& request);

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_METRICS_H_
