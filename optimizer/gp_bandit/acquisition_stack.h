// GP_BANDIT's acquisition stage: what the acquisition optimizer maximizes
// for one pick, built from the models in layers,
//
//   objective term: LogEI under the MAP model (one objective)
//                 | LogEI averaged over hyperparameter draws (few trials)
//                 | log expected hypervolume improvement (several)
//                 | none (no feasible trial yet: seek feasibility)
//   + log P(feasible): constraints and the infeasibility classifier
//   - exponent * E[log cost] (cost-aware: cost-cooled EI, cost_model.h)
//
// each layer an Acquisition over the one below. Not copyable or movable:
// the layers point at each other. Immutable once built.
#ifndef HYPERTUNE_OPTIMIZER_GP_BANDIT_ACQUISITION_STACK_H_
#define HYPERTUNE_OPTIMIZER_GP_BANDIT_ACQUISITION_STACK_H_

#include <cstdint>
#include <optional>

#include "optimizer/acquisition.h"
#include "optimizer/cost_model.h"
#include "optimizer/gp.h"
#include "optimizer/gp_bandit/models.h"
#include "optimizer/gp_bandit/options.h"
#include "optimizer/metric_acquisition.h"

namespace hypertune::optimizer::gp_bandit {

// The cost layer's model: a GP on standardized log costs.
struct CostTerm {
  const GaussianProcess* log_cost;
  double exponent;  // Cost cooling's, in [0, 1].
  double scale;     // The log costs' standard deviation.
};

class AcquisitionStack {
 public:
  // `models` and the cost's model (if any) must outlive this object; the
  // hypervolume estimate draws with `seed`.
  AcquisitionStack(const Models& models, std::optional<CostTerm> cost,
                   const GpBanditOptions& options, uint64_t seed);
  AcquisitionStack(const AcquisitionStack&) = delete;
  AcquisitionStack& operator=(const AcquisitionStack&) = delete;

  // The top layer.
  const Acquisition& top() const { return *top_; }

 private:
  std::optional<AcquisitionFunction> improvement_;
  std::optional<IntegratedAcquisition> integrated_;
  std::optional<LogHypervolumeImprovement> hypervolume_;
  std::optional<ConstrainedAcquisition> constrained_;
  std::optional<CostPerUnitAcquisition> per_cost_;
  const Acquisition* top_ = nullptr;
};

}  // namespace hypertune::optimizer::gp_bandit

#endif  // HYPERTUNE_OPTIMIZER_GP_BANDIT_ACQUISITION_STACK_H_
