// GP_BANDIT's models stage: every model one suggestion's acquisition reads,
// built from the encoded history, and conditioned on pending evaluations
// (fantasies) as the batch grows.
//
// One objective and no constraints (the plain problem) builds its objective
// as a local model around the incumbent past max_local_points, weighs the
// infeasibility classifier inside LogEI, and averages over hyperparameter
// draws while the history is small and no trial is pending. Every other
// shape builds all its models on one shared subset near the anchors and
// weighs constraints and the classifier outside the objective term
// (metric_acquisition.h).
// Not thread-safe: built and used by one Suggest.
#ifndef HYPERTUNE_OPTIMIZER_GP_BANDIT_MODELS_H_
#define HYPERTUNE_OPTIMIZER_GP_BANDIT_MODELS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include <Eigen/Core>

#include "absl/status/statusor.h"
#include "optimizer/gp.h"
#include "optimizer/gp_bandit/coordinates.h"
#include "optimizer/gp_bandit/metric_model.h"
#include "optimizer/gp_bandit/options.h"
#include "optimizer/gp_bandit/transfer_prior.h"
#include "optimizer/metrics.h"
#include "optimizer/search_space.h"
#include "optimizer/suggester.h"

namespace hypertune::optimizer::gp_bandit {

// The request's history in model coordinates, one representation for every
// shape of problem.
struct EncodedHistory {
  // Completed trials: their metrics (objectives maximized, infinities as
  // the worst value seen), and their points, rows in table.rows' order.
  MetricTable table;
  Eigen::MatrixXd x;
  // kInfeasible trials' points.
  Eigen::MatrixXd infeasible;
  // kPending trials' points.
  std::vector<Eigen::VectorXd> pending;
  // Cost-aware requests: the completed and infeasible trials with a known
  // cost, and the log of it.
  Eigen::MatrixXd costed_x;
  Eigen::VectorXd log_costs;
  // Every assignment in the history: never proposed again.
  AssignmentSet taken;

  int completed() const { return static_cast<int>(x.rows()); }
  int num_objectives() const {
    return static_cast<int>(table.objectives.size());
  }
  int num_constraints() const {
    return static_cast<int>(table.constraints.size());
  }
  // One objective and no constraints.
  bool plain() const { return num_objectives() == 1 && num_constraints() == 0; }
};

// REQUIRES: ValidateRequest(request).ok()
EncodedHistory EncodeHistory(const SuggestRequest& request,
                             const Coordinates& coords);

struct Models {
  std::vector<MetricModel> objectives;
  std::vector<MetricModel> constraints;
  // Per constraint: its bounds in the GP's target units.
  std::vector<double> lower, upper;
  // The plain problem with few trials and none pending: the objective
  // under posterior draws of its hyperparameters, which the acquisition
  // averages over (empty: the objective's gp alone).
  std::vector<GaussianProcess> draws;
  // One objective and no constraints (see above).
  bool plain = false;
  // The infeasibility classifier (acquisition.h).
  std::optional<GaussianProcess> classifier;
  bool any_feasible = false;
  // One objective: the best feasible target and its point.
  double best = 0;
  Eigen::VectorXd incumbent;
  // Several objectives: the feasible Pareto front (targets, rows), the
  // reference point, and the fantasized outcomes of pending points
  // predicted feasible.
  Eigen::MatrixXd front;
  Eigen::VectorXd reference;
  std::vector<Eigen::VectorXd> pending_front;
  // What the acquisition optimizer searches: the box and the anchors it
  // perturbs, by perturbation_scale.
  Eigen::VectorXd box_lower, box_upper;
  Eigen::MatrixXd anchors;
  Eigen::VectorXd perturbation_scale;

  // Conditions every model on a pending evaluation at x (model
  // coordinates), noise-free, at its posterior mean (the kriging believer,
  // Ginsbourger et al. 2010). With one objective, a pending point predicted
  // feasible and better than the best raises `best` to its mean, so that
  // later picks must beat it rather than crowd next to it; `incumbent`
  // stays the observed best. Drops the hyperparameter draws: picks made
  // with trials pending use the MAP fit alone (options.h,
  // hyperparameter_draws).
  void AddFantasy(const Eigen::VectorXd& x);
};

// What the models stage reads besides the history.
struct ModelInputs {
  const SearchSpace* space;
  const Coordinates* coords;
  const EncodedHistory* history;
  // The request's metrics (one objective for a request without any).
  const std::vector<MetricConfig>* metrics;
  uint64_t seed;
  // Per objective: its transfer prior, or null.
  std::vector<const PriorFit*> priors;
};

// Builds every metric's model; `fits` holds one MetricFits per metric of
// the request (SuggestRequest::metrics' order).
absl::StatusOr<Models> BuildModels(const ModelInputs& in,
                                   const GpBanditOptions& options,
                                   std::vector<MetricFits>& fits);

}  // namespace hypertune::optimizer::gp_bandit

#endif  // HYPERTUNE_OPTIMIZER_GP_BANDIT_MODELS_H_
