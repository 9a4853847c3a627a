// TPE: the Tree-structured Parzen Estimator (Bergstra et al., "Algorithms
// for hyper-parameter optimization", NeurIPS 2011), with the components
// that Watanabe ("Tree-structured Parzen estimator: understanding its
// algorithm components", arXiv 2304.11127) finds to matter, as Optuna's
// TPESampler has them:
//  - the first startup_trials evaluated trials are scrambled Sobol points;
//  - evaluated trials split into the best gamma(n) = min(ceil(0.1 n), 25)
//    ("good") and the rest ("bad"; infeasible trials join them);
//  - each group of parameters (tpe/groups.h: in a flat space all of them;
//    in a conditional space those active in the same trials) has a Parzen
//    estimator l over its good trials and g over its bad ones
//    (tpe/parzen_estimator.h), each over the trials where the group is
//    active; old trials weigh less past the newest 25 (Optuna's
//    default_weights);
//  - joint (multivariate; Falkner et al., "BOHB", ICML 2018): each group's
//    candidates are drawn jointly from l, so that correlated good values stay
//    together; single (univariate): every parameter is a group of its own;
//    by default suggestions alternate between the two (joint_every);
//  - draw ei_candidates from l and keep the one maximizing
//    log l(x) - log g(x) (expected improvement, Bergstra et al. eq. 4);
//  - constant liar (Ginsbourger et al., "Kriging is well-suited to
//    parallelize optimization", 2010; Optuna's constant_liar): pending trials
//    and the earlier points of the same batch join the bad group as if they
//    had scored worst, so g rises where work is already under way and the
//    points of a batch spread instead of repeating l's mode.
// Several metrics (suggester.h): the split takes the first gamma(n)
// completed trials of PreferenceOrder (metrics.h): feasible before
// constraint-missing ones, then by non-domination rank with greedy
// hypervolume selection inside the rank that straddles gamma(n) (MOTPE's
// split: Ozaki et al., "Multiobjective tree-structured Parzen estimator",
// JAIR 73, 2022), the rest by total violation (feasibility first, as
// Optuna's constrained TPE). MOTPE's hypervolume-contribution weights of the
// good group are not used: every good trial weighs as in the single-objective
// estimator.
// A suggestion never repeats a trial of the history or of its batch while
// the draws find a new point.
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
  // Which suggestions use joint estimators per group of parameters: those
  // whose trial index is a multiple of joint_every; the others use one
  // estimator per parameter. 0: never (univariate, Optuna's default); 1:
  // always (multivariate). Default 2, alternating: joint suggestions keep
  // correlated good values together (hartmann6, rosenbrock5), single ones
  // recombine good values across trials (levy10, styblinski10);
  // benchmarks/README.md has the measurements.
  int joint_every = 2;
  // Pending trials and the batch's earlier points in the bad group
  // (default true).
  bool constant_liar = true;
  // Scores candidates with each component weighted by its bandwidth
  // (tpe::ParzenOptions::bandwidth_weights), as Optuna 3.1 does (default
  // true).
  bool bandwidth_weights = true;
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
