// Parameter importance by functional ANOVA on a random forest (fANOVA:
// Hutter, Hoos and Leyton-Brown, "An Efficient Approach for Assessing
// Hyperparameter Importance", ICML 2014).
//
// A random forest of regression trees (CART, squared error, bootstrap
// samples) is fitted to the observations on the search space: numeric
// parameters in their unit encoding (SearchSpace::Encode, so a LOG-scaled
// one is measured in log space and an integer or discrete value by the
// share of the unit interval it owns), categorical ones as categories (a
// split sends a set of categories each way). A tree is a function f that is
// constant on its leaves' boxes. Under the uniform measure on the space
// (the unit interval per numeric parameter, 1/K per category), f splits
// into main effects and interactions (functional ANOVA), and parameter i's
// importance is the share of f's variance that its main effect explains:
//
//   V   = ∫ (f(x) - E f)² dx,
//   V_i = ∫ (E[f | x_i] - E f)² dx_i,       importance_i = V_i / V.
//
// Between two consecutive split points of parameter i (on each category of
// a categorical one), E[f | x_i] is constant:
//
//   E[f | x_i ∈ cell] = Σ_{leaves L that cover the cell} value_L · vol_{-i}(L),
//
// vol_{-i}(L) being the measure of L's box over the other parameters. The
// importances are averaged over the trees (Hutter et al. report the mean
// and standard deviation over trees too). They need not sum to 1: the rest
// of the variance belongs to interactions.
//
// Pure math: knows nothing of protobuf or the service. Thread-safe (no
// shared state).
#ifndef HYPERTUNE_OPTIMIZER_IMPORTANCE_H_
#define HYPERTUNE_OPTIMIZER_IMPORTANCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "optimizer/search_space.h"

namespace hypertune::optimizer {

struct ImportanceOptions {
  // Trees in the forest. Default 64 (as Optuna's fANOVA evaluator).
  int num_trees = 64;
  // Each tree is fitted to a bootstrap sample of this many observations (all
  // of them when there are fewer), which bounds the cost on large studies.
  // Default 2048.
  int max_points_per_tree = 2048;
  // A node with fewer points is a leaf. Default 2.
  int min_samples_split = 2;
  // Each side of a split keeps at least this many points. Default 1.
  int min_samples_leaf = 1;
  // No split below this depth. Default 64.
  int max_depth = 64;
  // Bootstrap samples derive from it: same seed and data, same answer.
  uint64_t seed = 0;
};

struct ParameterImportance {
  // V_i / V, averaged over the trees whose prediction varies; in [0, 1].
  double fraction = 0.0;
  // The standard deviation of V_i / V over those trees.
  double stddev = 0.0;
};

struct ImportanceResult {
  // One per parameter, in the search space's order.
  std::vector<ParameterImportance> parameters;
  // Trees that were fitted, and how many of them vary (a tree that predicts
  // one constant explains nothing and is left out of the averages).
  int trees = 0;
  int varying_trees = 0;
};

// The fANOVA importances of `space`'s parameters given `points` (valid
// assignments with every parameter active: of a conditional space, fit over
// the points where the parameters asked about are active) and their
// `values` (finite; maximized or minimized makes no difference).
// INVALID_ARGUMENT when the sizes differ, with fewer than two points, a
// non-finite value, an invalid assignment, an inactive parameter (named)
// or options out of range (num_trees, max_points_per_tree,
// min_samples_split, min_samples_leaf and max_depth must be at least 1).
// Constant values give zero importances.
absl::StatusOr<ImportanceResult> FanovaImportance(
    const SearchSpace& space, const std::vector<Assignment>& points,
    const std::vector<double>& values, const ImportanceOptions& options = {});

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_IMPORTANCE_H_
