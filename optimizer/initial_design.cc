#include "optimizer/initial_design.h"

#include <algorithm>

#include "optimizer/sobol.h"

namespace hypertune::optimizer {

int InitialDesignSize(int dim, int metrics) {
  return metrics == 1 ? std::clamp(dim + 1, 3, 10)
                      : std::max(5, std::min(2 * dim, 10));
}

Eigen::VectorXd InitialDesignPoint(int dim, uint64_t seed, int64_t index) {
  if (index == 0) return Eigen::VectorXd::Constant(dim, 0.5);
  return SobolSequence(dim, seed).Point(index);
}

}  // namespace hypertune::optimizer
