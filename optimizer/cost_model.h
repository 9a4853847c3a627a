// Cost-aware acquisition (SuggestRequest::cost): trading improvement for
// cost when trials differ in price, as spot-GPU studies do (a large batch
// or a wide model costs many times a small one).
//
// The cost is modelled by its own GP on log cost (costs are positive and
// vary over orders of magnitude); the acquisition is EI per unit of
// expected cost raised to a power, EI(x) / c(x)^alpha with
// c(x) = exp(E[log cost(x)]) (Snoek et al., "Practical Bayesian
// optimization of machine learning algorithms", NeurIPS 2012: EI per
// second). A fixed alpha = 1 keeps favouring cheap regions after they are
// exhausted; cost cooling (Lee et al., "Cost-aware Bayesian optimization",
// ICML AutoML workshop 2020, EI-cool) lets alpha fall linearly from 1 to
// 0 as the budget left after the initial design is spent, so the search
// starts cheap and ends cost-blind.
#ifndef HYPERTUNE_OPTIMIZER_COST_MODEL_H_
#define HYPERTUNE_OPTIMIZER_COST_MODEL_H_

#include <Eigen/Core>

#include "optimizer/acquisition.h"
#include "optimizer/gp.h"

namespace hypertune::optimizer {

// Cost cooling's exponent: (budget - spent) / (budget - initial_spent)
// clamped to [0, 1], where initial_spent is what the initial design cost;
// 0 once budget <= initial_spent. A budget of 0 (no horizon) gives 1.
// REQUIRES: budget, spent, initial_spent >= 0
double CostCoolingExponent(double budget, double spent, double initial_spent);

// inner(x) - exponent * scale * mu(x), mu the mean of `log_cost`, a GP on
// log costs standardized by `scale` (their standard deviation): for a log
// acquisition (LogEI) that is log(EI(x) / c(x)^exponent) up to a constant.
class CostPerUnitAcquisition final : public Acquisition {
 public:
  // `inner` and `log_cost` must outlive this object.
  CostPerUnitAcquisition(const Acquisition* inner,
                         const GaussianProcess* log_cost, double exponent,
                         double scale);

  double Evaluate(const Eigen::VectorXd& x,
                  Eigen::VectorXd* grad) const override;
  Eigen::VectorXd EvaluateBatch(const Eigen::MatrixXd& xs) const override;

 private:
  const Acquisition* inner_;
  const GaussianProcess* log_cost_;
  double weight_;  // exponent * scale
};

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_COST_MODEL_H_
