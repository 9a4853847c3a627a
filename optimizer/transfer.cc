#include "optimizer/transfer.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace hypertune::optimizer {

PriorWeight FitPriorWeight(const Eigen::VectorXd& prior_at_own,
                           const Eigen::VectorXd& own_targets) {
  assert(prior_at_own.size() == own_targets.size());
  if (own_targets.size() == 0) return {};
  const double m_mean = prior_at_own.mean();
  const double t_mean = own_targets.mean();
  const Eigen::ArrayXd m = prior_at_own.array() - m_mean;
  const Eigen::ArrayXd t = own_targets.array() - t_mean;
  // Prior N(1, 1) on the weight, unit noise: posterior precision
  // 1 + sum m^2, posterior mean (1 + sum m t) / precision.
  const double weight =
      std::max(0.0, (1.0 + (m * t).sum()) / (1.0 + m.square().sum()));
  return {weight, -weight * m_mean};
}

TransferMean::TransferMean(GaussianProcess prior, std::vector<bool> shared,
                           PriorWeight weight)
    : prior_(std::move(prior)), shared_(std::move(shared)), weight_(weight) {}

Eigen::MatrixXd TransferMean::Project(const std::vector<bool>& shared,
                                      Eigen::MatrixXd xs) {
  for (Eigen::Index j = 0; j < xs.cols(); ++j) {
    if (!shared[static_cast<size_t>(j)]) xs.col(j).setZero();
  }
  return xs;
}

double TransferMean::Value(const Eigen::VectorXd& x,
                           Eigen::VectorXd* grad) const {
  const Eigen::VectorXd px = Project(shared_, x.transpose()).row(0).transpose();
  double mean, var;
  Eigen::VectorXd dmean, dvar;
  prior_.PredictWithGradient(px, &mean, &var, &dmean, &dvar);
  if (grad) {
    *grad = weight_.weight * dmean;
    for (Eigen::Index j = 0; j < grad->size(); ++j) {
      if (!shared_[static_cast<size_t>(j)]) (*grad)[j] = 0;
    }
  }
  return weight_.offset + weight_.weight * mean;
}

Eigen::VectorXd TransferMean::Unweighted(const Eigen::MatrixXd& xs) const {
  Eigen::VectorXd mean, var;
  prior_.Predict(Project(shared_, xs), &mean, &var);
  return mean;
}

Eigen::VectorXd TransferMean::Values(const Eigen::MatrixXd& xs) const {
  return (weight_.offset + weight_.weight * Unweighted(xs).array()).matrix();
}

}  // namespace hypertune::optimizer
