#include "optimizer/gp_bandit/acquisition_stack.h"

#include <utility>
#include <vector>

#include "optimizer/gp_bandit/coordinates.h"
#include "optimizer/pareto.h"

namespace hypertune::optimizer::gp_bandit {

AcquisitionStack::AcquisitionStack(const Models& models,
                                   std::optional<CostTerm> cost,
                                   const GpBanditOptions& options,
                                   uint64_t seed) {
  const int num_objectives = static_cast<int>(models.objectives.size());
  // The plain problem weighs the classifier inside LogEI; every other
  // shape in the constraint layer.
  const GaussianProcess* classifier =
      models.classifier ? &*models.classifier : nullptr;
  const GaussianProcess* inner_classifier = models.plain ? classifier : nullptr;
  const Acquisition* objective = nullptr;
  if (models.any_feasible && num_objectives == 1) {
    improvement_.emplace(&models.objectives[0].gp, inner_classifier,
                         options.acquisition, models.best, options.ucb_beta);
    objective = &*improvement_;
    if (!models.draws.empty()) {
      integrated_.emplace(models.draws, inner_classifier, options.acquisition,
                          models.best, options.ucb_beta);
      objective = &*integrated_;
    }
  } else if (models.any_feasible) {
    // The front with the pending points predicted feasible on it, so that
    // the improvement vanishes near them.
    Eigen::MatrixXd front(models.front.rows() + models.pending_front.size(),
                          num_objectives);
    front.topRows(models.front.rows()) = models.front;
    for (size_t k = 0; k < models.pending_front.size(); ++k) {
      front.row(models.front.rows() + static_cast<Eigen::Index>(k)) =
          models.pending_front[k].transpose();
    }
    std::vector<const GaussianProcess*> gps;
    for (const MetricModel& o : models.objectives) gps.push_back(&o.gp);
    hypervolume_.emplace(std::move(gps), Rows(front, ParetoFrontRows(front)),
                         models.reference, seed, options.hypervolume);
    objective = &*hypervolume_;
  }
  top_ = objective;
  if (!models.plain) {
    std::vector<ConstraintModel> constraints;
    for (size_t c = 0; c < models.constraints.size(); ++c) {
      constraints.push_back(
          {&models.constraints[c].gp, models.lower[c], models.upper[c]});
    }
    constrained_.emplace(objective, std::move(constraints), classifier);
    top_ = &*constrained_;
  }
  if (cost) {
    per_cost_.emplace(top_, cost->log_cost, cost->exponent, cost->scale);
    top_ = &*per_cost_;
  }
}

}  // namespace hypertune::optimizer::gp_bandit
