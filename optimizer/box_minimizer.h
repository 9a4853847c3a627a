// Bound-constrained minimization by L-BFGS-B (LBFGS++, Byrd, Lu, Nocedal and
// Zhu 1995), wrapped so that it never throws and never returns a worse point
// than the best one it evaluated: line-search failures near a minimum, which
// LBFGS++ reports by exception, simply end the search.
// Pure function; thread-compatible.
#ifndef HYPERTUNE_OPTIMIZER_BOX_MINIMIZER_H_
#define HYPERTUNE_OPTIMIZER_BOX_MINIMIZER_H_

#include <functional>

#include <Eigen/Core>

namespace hypertune::optimizer {

// f(x, grad): returns the objective at x and writes its gradient into grad
// (already sized like x). A non-finite value marks x as unusable.
using ObjectiveWithGradient =
    std::function<double(const Eigen::VectorXd& x, Eigen::VectorXd& grad)>;

struct BoxMinimizerOptions {
  // Iterations of L-BFGS-B (default 50).
  int max_iterations = 50;
  // Stop when the projected gradient's norm is below this (default 1e-5).
  double gradient_tolerance = 1e-5;
  // Stop when the value improved by less than this, relatively, over one
  // iteration (default 1e-9).
  double relative_tolerance = 1e-9;
};

struct BoxMinimum {
  Eigen::VectorXd x;
  double value;
  int evaluations;
};

// Returns the best point evaluated while minimizing f over the box
// [lower, upper] from x0 (clamped into the box). value is +infinity only if
// f was non-finite everywhere it was evaluated.
// REQUIRES: x0, lower and upper have one size; lower <= upper.
BoxMinimum MinimizeInBox(const ObjectiveWithGradient& f,
                         const Eigen::VectorXd& x0,
                         const Eigen::VectorXd& lower,
                         const Eigen::VectorXd& upper,
                         const BoxMinimizerOptions& options = {});

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_BOX_MINIMIZER_H_
