// The outcome pipeline that turns observed objective values (already to be
// maximized) into GP targets: winsorize the bad tail, Yeo-Johnson power
// transform, standardize. It makes heavy-tailed and skewed objectives look
// Gaussian enough for a stationary GP (Ax's winsorization; HEBO,
// Cowen-Rivers et al., arXiv 2012.03826, for the power transform).
// Pure functions; thread-safe.
#ifndef HYPERTUNE_OPTIMIZER_OUTPUT_TRANSFORM_H_
#define HYPERTUNE_OPTIMIZER_OUTPUT_TRANSFORM_H_

#include <Eigen/Core>

namespace hypertune::optimizer {

// The p-quantile (0..1) of y with linear interpolation between order
// statistics. REQUIRES: y.size() >= 1
double Quantile(const Eigen::VectorXd& y, double p);

// Values below Tukey's lower fence q1 - 1.5 (q3 - q1) raised to the fence
// (the bad tail, since we maximize). Fewer than 4 values: unchanged.
Eigen::VectorXd WinsorizeLowerTail(const Eigen::VectorXd& y);

// Yeo and Johnson, "A new family of power transformations to improve
// normality or symmetry", Biometrika 87(4), 2000:
//   y >= 0: ((y + 1)^l - 1) / l        (log(y + 1) if l == 0)
//   y <  0: -((1 - y)^(2 - l) - 1) / (2 - l)   (-log(1 - y) if l == 2)
// Monotone increasing in y for every l.
double YeoJohnson(double y, double lambda);

// The lambda in [-2, 4] maximizing the Gaussian profile log-likelihood
//   -n/2 log var(psi(y)) + (l - 1) sum sign(y) log(|y| + 1)
// by golden-section search.
double FitYeoJohnsonLambda(const Eigen::VectorXd& y);

// (y - mean) / sd; a constant vector becomes all zeros.
Eigen::VectorXd Standardize(const Eigen::VectorXd& y);

// The whole pipeline: winsorize, standardize, Yeo-Johnson with the fitted
// lambda, standardize. Order-preserving (ties stay ties).
// REQUIRES: y.size() >= 1, all finite.
Eigen::VectorXd TransformOutputs(const Eigen::VectorXd& y);

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_OUTPUT_TRANSFORM_H_
