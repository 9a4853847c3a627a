// GP_BANDIT: Bayesian optimization with a Gaussian process (gp.h), LogEI
// (acquisition.h) and a multi-start acquisition optimizer
// (acquisition_optimizer.h), following BoTorch's and Vizier's defaults
// (benchmarks/README.md measures it against them). One Suggest:
//
//   if the history is shorter than the initial design: centre, then Sobol;
//   y  <- winsorize, Yeo-Johnson, standardize (output_transform.h)
//   hyperparameters <- MAP fit at scheduled history sizes of both the
//                      Matérn ARD and an additive kernel, the additive one
//                      kept only if clearly more likely; warm refit in
//                      between while the history is small
//   model <- GP on the completed trials (a local subset near the incumbent
//            past max_local_points), Cholesky extended in O(n^2) per trial
//   pending trials -> noise-free fantasies at min(posterior mean,
//                     incumbent): a constant liar that never improves
//   infeasible trials -> a feasibility GP weighting the acquisition
//   repeat count times: x <- argmax acquisition, each coordinate moved to
//   the incumbent's where the acquisition barely changes; add x as a
//   fantasy.
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
//       constant liar and the pull toward the incumbent as above;
//   several objectives -> the log expected hypervolume improvement over
//       the feasible Pareto front (metric_acquisition.h), estimated by
//       random hypervolume scalarizations (Golovin and Zhang 2020), the
//       reference point halfway between the front's nadir and the feasible
//       trials' (reference_slack), weighted by the probability of
//       feasibility; pending trials are fantasized
//       at their posterior means (kriging believer) in every model and,
//       when predicted feasible, join the front, so that the improvement
//       vanishes near them.
// Cost-aware requests (SuggestRequest::cost, one objective): a GP on the
// log cost of every costed trial, and the acquisition becomes
// LogEI(x) - alpha E[log cost(x)], cost-cooled EI (cost_model.h), alpha
// falling from 1 to 0 as the budget (else max_trials) left after the
// initial design is spent. Once two trials have a cost, each further
// initial-design trial is the cheapest of the next
// kCostAwareDesignCandidates Sobol points: a blind design would spend a
// fixed share of the budget (a fifth to a half, with 10 trials of 50) on
// dear points.
//
// Transfer (SuggestRequest::priors, one objective, flat spaces): a GP on
// the earlier studies' completed trials (each study's values warped on
// their own) becomes the mean function of this study's GP, weighted by how
// well it predicts this study's targets (transfer.h). The second trial is
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
// under the study's lock).
#ifndef HYPERTUNE_OPTIMIZER_GP_BANDIT_SUGGESTER_H_
#define HYPERTUNE_OPTIMIZER_GP_BANDIT_SUGGESTER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "optimizer/acquisition.h"
#include "optimizer/acquisition_optimizer.h"
#include "optimizer/gp.h"
#include "optimizer/metric_acquisition.h"
#include "optimizer/metrics.h"
#include "optimizer/suggester.h"
#include "optimizer/tpe_suggester.h"
#include "optimizer/transfer.h"

namespace hypertune::optimizer {

struct GpBanditOptions {
  // The acquisition (default LogEI).
  AcquisitionKind acquisition = AcquisitionKind::kLogEi;
  // UCB's coefficient on standardized outputs (default 1.8, Vizier's).
  double ucb_beta = 1.8;
  // Initial design size; 0 means InitialDesignSize (default 0).
  int initial_trials = 0;
  // Up to integrate_below completed trials (default 50), the acquisition
  // is averaged over this many posterior draws of the hyperparameters
  // instead of taken under the MAP fit alone; 0 disables (default 16). One
  // objective without a transfer prior. hartmann6 at 25 trials, 20 seeds:
  // median regret 0.90 under the MAP, 0.80 / 0.62 / 0.51 with 8 / 16 / 32
  // draws; past 50 trials the draws changed nothing measurable and cost
  // ~16x the prediction time (benchmarks/README.md).
  int hyperparameter_draws = 16;
  int integrate_below = 50;
  // Floor on the noise variance of the standardized outputs (default 1e-6).
  double min_noise_variance = 1e-6;
  // Prior draws used as fit starts besides the prior's mode (default 3; at
  // most 1 for fits past warm_refit_below trials).
  int fit_restarts = 3;
  // L-BFGS-B iterations per start of a full fit (default 60).
  int fit_iterations = 60;
  // Iterations of the warm refit between full fits (default 30).
  int warm_fit_iterations = 30;
  // Below this many completed trials the hyperparameters are refitted,
  // warm, at every suggestion (default 100).
  int warm_refit_below = 100;
  // Where the full fits past warm_refit_below trials run (the latency
  // spikes). Empty (the default): on the request path, so that a seed and a
  // history always give the same suggestion. Given: each is handed to the
  // runner, one at a time per metric, and suggestions meanwhile use the
  // latest fitted hyperparameters, the Cholesky factor extended by each new
  // trial; a fresh instance uses the prior's mode until its first fit
  // lands.
  FitRunner background_fits;
  // Full fits use at most this many points, the nearest to the incumbent
  // (default 256).
  int max_fit_points = 256;
  // Past this many completed trials the GP is local: the nearest
  // max_local_points to the incumbent, searched within their bounding box
  // (TuRBO-like trust region; default 400).
  int max_local_points = 400;
  // At each full fit, also fit a first-order additive kernel (kernel.h) and
  // keep whichever has the higher log posterior (default true). Separable
  // objectives need far fewer trials under the additive model. Not past
  // max_local_points trials (its kernel costs d times more).
  bool select_additive = true;
  // After maximizing the acquisition, each coordinate of the pick moves to
  // the incumbent's value if the acquisition (log EI units) loses at most
  // this much in all; 0 disables (default 0.1). Along dimensions the model
  // deems irrelevant the acquisition is flat and its maximizer arbitrary:
  // styblinski10 at 50 trials, seeds 0..7, median regret 197 -> 113.
  double incumbent_pull_tolerance = 0.1;
  // Past this many completed trials, delegate to TPE; 0 never (default 0).
  int tpe_fallback_above = 0;
  AcquisitionOptimizerOptions acquisition_optimizer;
  // The hypervolume-improvement estimate for several objectives.
  HypervolumeImprovementOptions hypervolume;
  // Several objectives: where the hypervolume's reference point lies,
  // from the feasible front's nadir (0) to the feasible trials' nadir (1)
  // (default 0.5). Near the front, the search stays near the front's
  // extent (BoTorch's nadir less a tenth of the front's range never grew
  // ZDT2's front past its first points); at the data's nadir, extreme
  // points with one objective at its best weigh too much (DTLZ2's faces).
  // benchmarks/README.md has the measurements.
  double reference_slack = 0.5;
  // ... and at least this far below the front's nadir, in standardized
  // units (default 0.1).
  double min_reference_margin = 0.1;
};

class GpBanditSuggester final : public Suggester {
 public:
  explicit GpBanditSuggester(GpBanditOptions options = {});
  // Tells background fits still running to stop; they finish on their own.
  ~GpBanditSuggester() override;

  absl::StatusOr<std::vector<Assignment>> Suggest(
      const SuggestRequest& request) override;

  // Why the last Suggest fell back to quasi-random points; empty if it did
  // not.
  const std::string& last_fallback_reason() const { return fallback_reason_; }

  // The history size (completed trials) of the last full hyperparameter fit
  // at or before n: every size below 20, then steps of max(5, c / 10), so
  // full fits come every ~10% of growth. REQUIRES: n >= 2
  static int LastRefitCheckpoint(int n);

 private:
  struct Model;
  struct Fit {
    KernelStructure structure;
    GpParams params;
  };
  struct FitCache {
    int checkpoint;
    uint64_t seed;
    bool allow_additive;
    Eigen::MatrixXd x;  // The data fitted (model coordinates), raw values.
    Eigen::VectorXd y;
    Fit fit;

    // Whether this is the fit of exactly these inputs.
    bool Holds(int c, uint64_t s, bool additive, const Eigen::MatrixXd& xc,
               const Eigen::VectorXd& yc) const {
      return checkpoint == c && seed == s && allow_additive == additive &&
             x.rows() == xc.rows() && x.cols() == xc.cols() && x == xc &&
             y == yc;
    }
  };
  // A full fit off the request path, shared with its job.
  struct BackgroundFit {
    absl::Mutex mu;
    bool running ABSL_GUARDED_BY(mu) = false;
    std::optional<FitCache> done ABSL_GUARDED_BY(mu);
    // Set when the suggester goes: the job stops at its next start and its
    // result is dropped.
    std::atomic<bool> cancelled{false};
  };
  // One metric's caches; each is checked against the request before use.
  struct MetricCache {
    std::optional<FitCache> fit;
    std::shared_ptr<BackgroundFit> background;
    // A GP with the checkpoint's parameters on a prefix of the completed
    // trials, built as "factor the checkpoint's prefix, then append".
    std::optional<GaussianProcess> factor;
    KernelStructure factor_structure = KernelStructure::kProduct;
  };
  // How a metric's values become GP targets.
  enum class Targets {
    kWarped,        // TransformOutputs (objectives).
    kStandardized,  // (y - mean) / sd (constraints: bounds map alike).
    kAsGiven,       // y itself (the transfer prior's, already warped).
  };
  // One metric's GP on the completed trials.
  struct MetricModel {
    GaussianProcess gp;
    KernelStructure structure;
    GpParams params;
    Eigen::VectorXd lengthscales;  // Numeric dimensions; 1 elsewhere.
    Eigen::MatrixXd data_x;        // The rows conditioned on.
    Eigen::VectorXd targets;       // Their targets.
    Eigen::VectorXd lower, upper;  // The search box (a local model's).
    double target_mean = 0, target_scale = 1;  // kStandardized's map.
  };
  struct MetricsModel;
  // The transfer prior's GP on the earlier studies' trials, and the data
  // it was fitted on (the cache key).
  struct PriorFit {
    uint64_t seed;
    Eigen::MatrixXd x;  // Model coordinates; unshared ones 0.
    Eigen::VectorXd y;  // Each study's values warped on their own.
    std::vector<bool> shared;
    std::shared_ptr<const TransferMean> mean;  // Weight 1, offset 0.
    Fit fit;
    Eigen::MatrixXd anchors;  // The best prior trials, best first.
  };

  // A metric's values as GP targets.
  static Eigen::VectorXd ToTargets(Targets kind, const Eigen::VectorXd& y);

  absl::StatusOr<std::vector<Assignment>> SuggestOneObjective(
      const SuggestRequest& request);
  absl::StatusOr<std::vector<Assignment>> SuggestWithMetrics(
      const SuggestRequest& request, const MetricTable& table);

  // The GP of one metric (values y on the rows of x, model coordinates):
  // hyperparameters from the checkpoint schedule, conditioned on the rows
  // `subset` if given, else on all rows, or past max_local_points (when
  // allow_local) on the nearest to the incumbent within their bounding box.
  absl::StatusOr<MetricModel> BuildMetricModel(
      const SearchSpace& space, uint64_t seed, const Eigen::MatrixXd& x,
      const Eigen::VectorXd& y, Targets targets,
      const std::vector<int>* subset, bool allow_local, MetricCache& cache);
  // The single-objective model of the completed trials (rows of x in model
  // coordinates, raw values y) and the infeasible ones.
  // With `prior`, its prediction is the GP's mean function (transfer.h).
  absl::StatusOr<Model> BuildModel(const SearchSpace& space, uint64_t seed,
                                   const Eigen::MatrixXd& x,
                                   const Eigen::VectorXd& y,
                                   const Eigen::MatrixXd& infeasible,
                                   const PriorFit* prior);
  // The objective's model with a transfer prior: the model without it,
  // the weighted prior added as its mean function; with fewer than
  // kMinModelPoints trials, with the hyperparameter prior's mode.
  absl::StatusOr<MetricModel> BuildTransferModel(const SearchSpace& space,
                                                 uint64_t seed,
                                                 const Eigen::MatrixXd& x,
                                                 const Eigen::VectorXd& y,
                                                 const PriorFit& prior);
  // The fitted transfer prior of `priors`, from the cache when it holds the
  // same data; null if they hold no trial or the fit fails.
  const PriorFit* FitPrior(const SearchSpace& space, uint64_t seed,
                           const std::vector<PriorStudy>& priors);
  // The cost exponent of cost-cooled EI for `request` (cost_model.h).
  static double CostExponent(const SuggestRequest& request, int initial);
  // The hyperparameters at checkpoint c (the first c completed trials),
  // from the cache when it holds the same data.
  Fit CheckpointParams(const SearchSpace& space, uint64_t seed,
                       const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                       int c, bool allow_additive, Targets targets,
                       MetricCache& cache);

  // The hyperparameters of the fitted data xc, yc (checkpoint c); nullopt
  // if `stop` returns true first.
  static std::optional<Fit> FitCheckpoint(
      const SearchSpace& space, uint64_t seed, const Eigen::MatrixXd& xc,
      const Eigen::VectorXd& yc, int c, bool allow_additive, Targets targets,
      const GpBanditOptions& options, const std::function<bool()>& stop);
  // Hands checkpoint c's fit to options_.background_fits unless one is
  // running; adopts a finished one into cache.fit.
  void FitInBackground(const SearchSpace& space, uint64_t seed,
                       Eigen::MatrixXd xc, Eigen::VectorXd yc, int c,
                       bool allow_additive, Targets targets,
                       MetricCache& cache);

  // Conditions the model on a pending evaluation at x (model coordinates).
  void AddFantasy(const Eigen::VectorXd& x, Model& model);

  GpBanditOptions options_;
  TpeSuggester tpe_;
  std::string fallback_reason_;
  // Per metric (index 0 alone for a request without metrics).
  std::vector<MetricCache> caches_;
  // The log-cost model's (cost-aware requests).
  MetricCache cost_cache_;
  std::optional<PriorFit> prior_;
};

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_GP_BANDIT_SUGGESTER_H_
