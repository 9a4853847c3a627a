// GP_BANDIT: Bayesian optimization with a Gaussian process (gp.h), LogEI
// (acquisition.h) and a multi-start acquisition optimizer
// (acquisition_optimizer.h), following BoTorch's and Vizier's defaults
// (benchmarks/README.md measures it against them).
//
// One pipeline for every shape of problem, each stage in its own file
// under gp_bandit/:
//   encode (coordinates.h, models.h's EncodedHistory)
//   -> initial design (pick.h) or models (models.h, metric_model.h,
//      transfer_prior.h)
//   -> acquisition stack (acquisition_stack.h): LogEI | integrated LogEI |
//      hypervolume improvement, + log P(feasible), - cost
//   -> maximize (acquisition_optimizer.h) -> pick (pick.h),
// then the pick joins the models as a fantasy and the next point of the
// batch goes round again. In detail, for one objective:
//
//   if the history is shorter than the initial design: centre, then Sobol
//                      (points already taken skipped);
//   y  <- winsorize, Yeo-Johnson, standardize (output_transform.h)
//   hyperparameters <- MAP fit at scheduled history sizes of both the
//                      Matérn ARD and an additive kernel, the additive one
//                      kept only if clearly more likely; warm refit in
//                      between while the history is small
//   model <- GP on the completed trials (a local subset near the incumbent
//            past max_local_points), Cholesky extended in O(n^2) per trial;
//            the acquisition's copy with lengthscales of at most
//            max_acquisition_lengthscale (0.3 of the cube)
//   pending trials -> noise-free fantasies at the posterior mean, a
//                     predicted improvement raising the bar (kriging
//                     believer)
//   infeasible trials -> a feasibility GP weighting the acquisition
//   repeat count times: x <- argmax acquisition, each coordinate moved
//   toward the incumbent's where the acquisition barely changes (a double
//   nine tenths of the way, never onto it); add x as a fantasy.
//
// No point already evaluated or pending is proposed again, compared after
// decoding (integers rounded, categories and inactive parameters as the
// space keeps them), unless every point of the space is taken: the
// design skips Sobol points that decode to a taken cell; when every point
// the acquisition optimizer returns is taken, a finite space of at most
// kMaxEnumeratedPoints is enumerated and its best untried point picked;
// a fallback (gp_bandit/pick.h, UntriedPoint) takes the next untried Sobol
// point, then the untried point farthest from the taken ones.
// last_fallback_reason() names any fallback for the service's counters.
//
// Several metrics (SuggestRequest::metrics; one objective alone is the
// single-objective problem above): every objective and every constraint
// gets its own GP, each with the schedule, fits and caches above. Targets:
// a lone objective through the output transform as above; several
// objectives standardized only, since the hypervolume is not invariant
// under per-objective warps (Yeo-Johnson cost DTLZ2 a fifth of its
// hypervolume); constraints standardized, their bounds mapped alike.
// Completed trials that miss a constraint are data for every model but not
// feasible. Then:
//   no feasible trial yet -> maximize the probability that every
//       constraint holds (seek feasibility; Gelbart et al. 2014);
//   one objective -> LogEI against the best feasible value, weighted by
//       that probability (constrained EI; Gardner et al. 2014), with the
//       kriging believer and the pull toward the incumbent as above;
//   several objectives -> the log expected hypervolume improvement over
//       the feasible Pareto front (metric_acquisition.h), estimated by
//       random hypervolume scalarizations (Golovin and Zhang 2020), the
//       reference point halfway between the front's nadir and the feasible
//       trials' (reference_slack), weighted by the probability of
//       feasibility; pending trials are fantasized
//       at their posterior means (kriging believer) in every model and,
//       when predicted feasible, join the front, so that the improvement
//       vanishes near them.
// Cost-aware requests (SuggestRequest::cost, any shape): a GP on the
// log cost of every costed trial, and the acquisition becomes
// A(x) - alpha E[log cost(x)], A the log acquisition above (LogEI, log
// hypervolume improvement, each weighted by the probability of
// feasibility), cost-cooled EI (cost_model.h), alpha
// falling from 1 to 0 as the budget (else max_trials) left after the
// initial design is spent. Once two trials have a cost, each further
// initial-design trial is the cheapest of the next
// kCostAwareDesignCandidates Sobol points: a blind design would spend a
// fixed share of the budget (a fifth to a half, with 10 trials of 50) on
// dear points.
//
// Transfer (SuggestRequest::priors, flat spaces, any shape): per objective,
// a GP on the earlier studies' completed trials of that objective (each
// study's values warped on their own) becomes the mean function of this
// study's GP of it, weighted by how well it predicts this study's targets
// (transfer.h); constraints are learned from this study alone. With one
// objective and no constraints, the second trial is
// the prior's best guess instead of the initial design's first Sobol point
// (the residual GP, with one trial, has the hyperparameter prior's mode);
// the rest of the design stays, since the weight can tell a related prior
// from an unrelated one only where the prior's predictions differ (ending
// the design once the weight is 1.645 sd above 0 stranded 11 of 20
// branin2 runs away from its optima). While the own trials are fewer than
// the anchors, the earlier studies' best trials join the acquisition's
// anchors.
//
// Past max_local_points completed trials every model is conditioned on
// the max_local_points trials nearest to the anchors (the best feasible
// trials, or the front), searched over the whole domain. The infeasibility
// classifier applies as above.
//
// Work per suggestion past the design, in acquisition evaluations, each
// under up to hyperparameter_draws models: raw_samples + perturbations
// candidates in one batch; per polish start at most ~2 polish_iterations
// with a gradient and max_category_evaluations + 2 without
// (acquisition_optimizer.h); then, for each point tried, one per active
// coordinate that is no parent (the pull toward the incumbent). On a
// conditional space an evaluation costs O(n (d + columns of the groups the
// point activates)) (tree_kernel.h). So neither the number of categories
// nor that of conditional children multiplies the other: a 1,000-category
// root with 499 children, one under each category, went from 5-8 s to
// ~0.2 s a suggestion (issue 31).
//
// Determinism: the schedule, the fit starts and the factor's construction
// order are functions of the history alone, so a fresh instance replaying a
// request computes bit-for-bit what a long-lived one computes from its
// caches. Not thread-safe (see suggester.h: one instance per study, called
// by one thread at a time).
#ifndef HYPERTUNE_OPTIMIZER_GP_BANDIT_SUGGESTER_H_
#define HYPERTUNE_OPTIMIZER_GP_BANDIT_SUGGESTER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "optimizer/gp_bandit/metric_model.h"
#include "optimizer/gp_bandit/options.h"
#include "optimizer/gp_bandit/transfer_prior.h"
#include "optimizer/suggester.h"
#include "optimizer/tpe_suggester.h"

namespace hypertune::optimizer {

// Why a Suggest departed from the acquisition's pick for some point of its
// batch (the first such point's reason). Every fallback still proposes a
// point not taken, unless none is left.
enum class GpBanditFallback {
  kNone,
  // "model_failed": the models could not be built (a fit or a
  // factorization failed); untried quasi-random points instead.
  kModelFailed,
  // "no_new_point": every point the acquisition optimizer found is taken
  // and the space is too large to enumerate; an untried quasi-random point
  // instead.
  kNoNewPoint,
  // "space_exhausted": no untried point is left (every point of a finite
  // space is taken); the quasi-random point, a repeat.
  kSpaceExhausted,
};

// The label of `reason` ("" for kNone), stable across releases: the
// service counts fallbacks by it.
std::string_view GpBanditFallbackLabel(GpBanditFallback reason);

class GpBanditSuggester final : public Suggester {
 public:
  explicit GpBanditSuggester(GpBanditOptions options = {});
  GpBanditSuggester(const GpBanditSuggester&) = delete;
  GpBanditSuggester& operator=(const GpBanditSuggester&) = delete;

  absl::StatusOr<std::vector<Assignment>> Suggest(
      const SuggestRequest& request) override;

  // Why the last Suggest fell back (kNone if it did not), its label
  // (Suggester::last_fallback_reason), and, for kModelFailed, the models'
  // error message, for logs.
  GpBanditFallback last_fallback() const { return fallback_; }
  std::string_view last_fallback_reason() const override {
    return GpBanditFallbackLabel(fallback_);
  }
  const std::string& last_fallback_detail() const { return fallback_detail_; }

  // gp_bandit::LastRefitCheckpoint (metric_model.h). REQUIRES: n >= 2
  static int LastRefitCheckpoint(int n) {
    return gp_bandit::LastRefitCheckpoint(n);
  }

 private:
  // One Suggest call: the stages of the loop over the state they share
  // (gp_bandit_suggester.cc).
  class Batch;

  // Learning-curve studies: the model of all the curves, else one
  // fidelity's model (fidelity.h).
  absl::StatusOr<std::vector<Assignment>> SuggestAtFidelity(
      const SuggestRequest& request);

  // Read by the caches below: declared first.
  const GpBanditOptions options_;
  TpeSuggester tpe_;
  GpBanditFallback fallback_ = GpBanditFallback::kNone;
  std::string fallback_detail_;
  // Per metric of the request (one for a request without metrics).
  std::vector<gp_bandit::MetricFits> fits_;
  // The log cost's (cost-aware requests).
  gp_bandit::MetricFits cost_fits_;
  gp_bandit::TransferPriors priors_;
};

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_GP_BANDIT_SUGGESTER_H_
