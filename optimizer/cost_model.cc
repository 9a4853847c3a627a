#include "optimizer/cost_model.h"

#include <algorithm>
#include <cassert>

namespace hypertune::optimizer {

double CostCoolingExponent(double budget, double spent, double initial_spent) {
  assert(budget >= 0 && spent >= 0 && initial_spent >= 0);
  if (budget == 0) return 1.0;
  if (budget <= initial_spent) return 0.0;
  return std::clamp((budget - spent) / (budget - initial_spent), 0.0, 1.0);
}

CostPerUnitAcquisition::CostPerUnitAcquisition(const Acquisition* inner,
                                               const GaussianProcess* log_cost,
                                               double exponent, double scale)
    : inner_(inner), log_cost_(log_cost), weight_(exponent * scale) {}

double CostPerUnitAcquisition::Evaluate(const Eigen::VectorXd& x,
                                        Eigen::VectorXd* grad) const {
  const double value = inner_->Evaluate(x, grad);
  if (weight_ == 0) return value;
  double mean, var;
  Eigen::VectorXd dmean, dvar;
  log_cost_->PredictWithGradient(x, &mean, &var, &dmean, &dvar);
  if (grad) *grad -= weight_ * dmean;
  return value - weight_ * mean;
}

Eigen::VectorXd CostPerUnitAcquisition::EvaluateBatch(
    const Eigen::MatrixXd& xs) const {
  Eigen::VectorXd values = inner_->EvaluateBatch(xs);
  if (weight_ == 0) return values;
  Eigen::VectorXd mean, var;
  log_cost_->Predict(xs, &mean, &var);
  return values - weight_ * mean;
}

}  // namespace hypertune::optimizer
