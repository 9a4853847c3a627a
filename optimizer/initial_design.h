// The initial design that precedes the model: the centre of the unit cube
// (Song et al., "Vizier's default algorithm", arXiv 2408.11527, seed Vizier
// with the centre) and then scrambled Sobol points, for the first
// InitialDesignSize(d, metrics) trials of a study. Trials users created
// count toward it like any other. Pure functions; thread-safe.
#ifndef HYPERTUNE_OPTIMIZER_INITIAL_DESIGN_H_
#define HYPERTUNE_OPTIMIZER_INITIAL_DESIGN_H_

#include <cstdint>

#include <Eigen/Core>

namespace hypertune::optimizer {

// One metric: d + 1 clamped to [3, 10], the fewest points that fix a linear
// trend, as small designs leave more of a small budget to the model (Bossek
// et al., "Initial design strategies and their effects on sequential
// model-based optimization", GECCO 2020; Ax now starts with 5). Against
// max(5, min(2 d, 10)), 20 seeds: at 25 trials rosenbrock5 1125 -> 508 and
// ackley5 9.3 -> 7.0, at 100 within noise. Several metrics (objectives or
// constraints): max(5, min(2 d, 10)), BoTorch's legacy rule at a nominal 50
// trials, since every metric's model starts from the design (a 2-d front
// at 30 trials lost hypervolume with 3). REQUIRES: dim >= 1, metrics >= 1
int InitialDesignSize(int dim, int metrics);

// Design point number `index` (the study's trial counter, so that points
// never repeat, even when failed trials are left out of the history): the
// centre for index 0, else scrambled Sobol point number `index`, scrambled
// by `seed`.
// REQUIRES: 1 <= dim <= SobolSequence::kMaxDimension, index >= 0
Eigen::VectorXd InitialDesignPoint(int dim, uint64_t seed, int64_t index);

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_INITIAL_DESIGN_H_
