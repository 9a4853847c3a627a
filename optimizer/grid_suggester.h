// GRID: every combination of the parameters' grid values, each suggested
// once, in an order shuffled by the study's seed (so that the first trials
// already cover every value of every parameter, as Optuna's GridSampler
// does, rather than sweeping the last parameter first).
//
// A parameter's grid values (GridValues): every category, every DISCRETE
// value, every integer of an INTEGER range, or, for a DOUBLE (and an INTEGER
// that sets it), ParameterConfig::grid_points values evenly spaced in the
// parameter's scale, both ends included. A conditional space enumerates only
// the combinations in which a parameter is active, so a child adds points
// only under the parent values that activate it.
//
// The grid is never materialized: its points are numbered 0..N-1 (a mixed
// radix over the tree), a keyed permutation of those numbers gives the
// order, and each point is decoded from its number. A history point that
// lies on the grid (every active value within 1e-9 of its range of a grid
// value), whatever its outcome (completed, infeasible or pending), is done;
// the suggestions are the next points of the order not done. Restarting the
// server, handing trials over, enqueueing grid points by hand or growing a
// category list therefore never repeats a point and never skips one.
//
// When fewer than `count` points remain, Suggest returns those (none once
// the grid is exhausted): the one algorithm whose answer may be shorter
// than the request. Stateless; safe to share between threads.
#ifndef HYPERTUNE_OPTIMIZER_GRID_SUGGESTER_H_
#define HYPERTUNE_OPTIMIZER_GRID_SUGGESTER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "optimizer/search_space.h"
#include "optimizer/suggester.h"

namespace hypertune::optimizer {

// The most points a grid may have: beyond this, an exhaustive search is not
// what the study wants (QUASI_RANDOM or GP_BANDIT cover such spaces better).
inline constexpr int64_t kMaxGridPoints = 1'000'000;

// The grid values of parameter `index` of `space`, ascending (category
// indices for a CATEGORICAL one). INVALID_ARGUMENT naming the parameter for
// a DOUBLE without grid_points, or an INTEGER range without it that holds
// more than kMaxGridPointsPerParameter integers.
absl::StatusOr<std::vector<double>> GridValues(const SearchSpace& space,
                                               int index);

// How many points the grid of `space` has, conditional combinations
// counted only where active. The errors of GridValues, and
// INVALID_ARGUMENT naming kMaxGridPoints for a larger grid.
absl::StatusOr<int64_t> GridSize(const SearchSpace& space);

class GridSuggester final : public Suggester {
 public:
  absl::StatusOr<std::vector<Assignment>> Suggest(
      const SuggestRequest& request) override;
};

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_GRID_SUGGESTER_H_
