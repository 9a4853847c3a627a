#include "optimizer/box_minimizer.h"

#include <cmath>
#include <exception>
#include <limits>

#include <LBFGSB.h>

namespace hypertune::optimizer {

BoxMinimum MinimizeInBox(const ObjectiveWithGradient& f,
                         const Eigen::VectorXd& x0,
                         const Eigen::VectorXd& lower,
                         const Eigen::VectorXd& upper,
                         const BoxMinimizerOptions& options) {
  BoxMinimum best{x0.cwiseMax(lower).cwiseMin(upper),
                  std::numeric_limits<double>::infinity(), 0};
  // Non-finite values become a huge finite one so that the line search
  // backs off instead of failing on NaN comparisons.
  constexpr double kHuge = 1e300;
  auto wrapped = [&](const Eigen::VectorXd& x, Eigen::VectorXd& grad) {
    grad.setZero(x.size());
    double value = f(x, grad);
    ++best.evaluations;
    if (!std::isfinite(value) || !grad.allFinite()) {
      grad.setZero();
      return kHuge;
    }
    if (value < best.value) {
      best.value = value;
      best.x = x;
    }
    return value;
  };

  LBFGSpp::LBFGSBParam<double> param;
  param.m = 6;
  param.max_iterations = options.max_iterations;
  param.epsilon = options.gradient_tolerance;
  param.epsilon_rel = 0;
  param.past = 1;
  param.delta = options.relative_tolerance;
  param.max_linesearch = 20;
  LBFGSpp::LBFGSBSolver<double> solver(param);
  Eigen::VectorXd x = best.x;
  double fx = 0;
  try {
    solver.minimize(wrapped, x, fx, lower, upper);
  } catch (const std::exception&) {
    // A failed line search ends the search; `best` holds what it found.
  }
  return best;
}

}  // namespace hypertune::optimizer
