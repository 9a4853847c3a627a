// The initial design that precedes the model: the centre of the unit cube
// (Song et al., "Vizier's default algorithm", arXiv 2408.11527, seed Vizier
// with the centre) and then scrambled Sobol points, for the first
// InitialDesignSize(d) trials of a study. Trials users created count toward
// it like any other. Pure functions; thread-safe.
#ifndef HYPERTUNE_OPTIMIZER_INITIAL_DESIGN_H_
#define HYPERTUNE_OPTIMIZER_INITIAL_DESIGN_H_

#include <cstdint>

#include <Eigen/Core>

namespace hypertune::optimizer {

// max(5, min(2 d, 10)): BoTorch's legacy max(5, min(2d, budget / 5)) for a
// nominal budget of 50 trials. REQUIRES: dim >= 1
int InitialDesignSize(int dim);

// Design point number `index` (the study's trial counter, so that points
// never repeat, even when failed trials are left out of the history): the
// centre for index 0, else scrambled Sobol point number `index`, scrambled
// by `seed`.
// REQUIRES: 1 <= dim <= SobolSequence::kMaxDimension, index >= 0
Eigen::VectorXd InitialDesignPoint(int dim, uint64_t seed, int64_t index);

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_INITIAL_DESIGN_H_
