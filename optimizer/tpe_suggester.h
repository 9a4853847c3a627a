// TPE: the Tree-structured Parzen Estimator (Bergstra et al., "Algorithms
// for hyper-parameter optimization", NeurIPS 2011), univariate as Optuna's
// default TPESampler (Watanabe, "Tree-structured Parzen estimator:
// understanding its algorithm components", arXiv 2304.11127):
//  - the first n_startup trials are scrambled Sobol points;
//  - completed trials split into the best gamma(n) = min(ceil(0.1 n), 25)
//    ("good") and the rest ("bad"; infeasible trials join them);
//  - per dimension, each group is a Parzen estimator: a truncated-Gaussian
//    mixture on [0,1] with one component per trial plus a prior component
//    (centre 0.5, width 1), bandwidths from the distance to the neighbours
//    clipped to [1 / min(100, n + 1), 1] (Optuna's magic clip), weights
//    ramping down for old trials past 25 (Optuna's default_weights);
//    categorical dimensions use weighted category frequencies plus the
//    prior;
//  - per dimension, draw n_ei_candidates from the good estimator and keep
//    the one maximizing log l(x) - log g(x).
// Several metrics (suggester.h): the split takes the first gamma(n)
// completed trials of PreferenceOrder (metrics.h): feasible before
// constraint-missing ones, then by non-domination rank with greedy
// hypervolume selection inside the rank that straddles gamma(n) (MOTPE's
// split: Ozaki et al., "Multiobjective tree-structured Parzen estimator",
// JAIR 73, 2022), the rest by total violation (feasibility first, as
// Optuna's constrained TPE). MOTPE's hypervolume-contribution weights of the
// good group are not used: every good trial weighs as in the single-objective
// estimator. Infeasible trials join the bad group as above.
// Pending trials are ignored except that a suggestion never repeats a trial.
// Stateless; safe to share between threads.
#ifndef HYPERTUNE_OPTIMIZER_TPE_SUGGESTER_H_
#define HYPERTUNE_OPTIMIZER_TPE_SUGGESTER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "optimizer/suggester.h"

namespace hypertune::optimizer {

struct TpeOptions {
  // Trials before the model is used (default 10, Optuna's).
  int startup_trials = 10;
  // Candidates drawn from the good estimator (default 24, Optuna's).
  int ei_candidates = 24;
  // Weight of the prior component (default 1, Optuna's).
  double prior_weight = 1.0;
};

class TpeSuggester final : public Suggester {
 public:
  explicit TpeSuggester(TpeOptions options = {}) : options_(options) {}

  absl::StatusOr<std::vector<Assignment>> Suggest(
      const SuggestRequest& request) override;

 private:
  TpeOptions options_;
};

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_TPE_SUGGESTER_H_
