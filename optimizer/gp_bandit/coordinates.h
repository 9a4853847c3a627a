// GP_BANDIT's first stage: the search space in the model's coordinates, and
// the row selections (nearest points, best rows) that later stages build
// models on. Pure functions over immutable values; thread-safe.
#ifndef HYPERTUNE_OPTIMIZER_GP_BANDIT_COORDINATES_H_
#define HYPERTUNE_OPTIMIZER_GP_BANDIT_COORDINATES_H_

#include <memory>
#include <vector>

#include <Eigen/Core>

#include "optimizer/conditional.h"
#include "optimizer/gp.h"
#include "optimizer/kernel.h"
#include "optimizer/search_space.h"
#include "optimizer/tree_kernel.h"

namespace hypertune::optimizer::gp_bandit {

// The model's coordinates: the unit-cube encoding for numeric parameters,
// the category index for categorical ones (compared for equality only).
// An inactive parameter's coordinate is a placeholder (0.5, or category 0)
// that the conditional space's kernel never reads.
struct Coordinates {
  std::vector<int> categories;    // 0 for numeric dimensions.
  std::vector<bool> categorical;  // categories[j] > 0.
  std::vector<bool> snapped;      // Integer and discrete: decode rounds.
  // A conditional space's tree (tree_kernel.h); empty for a flat space.
  std::vector<TreeKernelGroup> tree;
  // Whether the column is some parameter's parent.
  std::vector<bool> parent;

  explicit Coordinates(const SearchSpace& space);
  int dim() const { return static_cast<int>(categories.size()); }

  Eigen::VectorXd FromUnit(const Eigen::VectorXd& unit) const;
  Eigen::VectorXd ToUnit(const Eigen::VectorXd& x) const;
  Eigen::VectorXd FromAssignment(const SearchSpace& space,
                                 const Assignment& a) const;
  // The kernel of the model: on a conditional space the tree kernel, which
  // compares only the groups both points have active (and has no additive
  // variant); otherwise MakeMixedKernel's.
  std::unique_ptr<Kernel> MakeKernel(
      KernelStructure structure = KernelStructure::kProduct) const;
  // Moves integer and discrete coordinates to the centre of their cell.
  void Snap(const SearchSpace& space, Eigen::VectorXd& x) const;
};

// Squared distance with per-dimension weights on numeric coordinates and
// weight categorical_weight per differing category.
double Distance2(const Coordinates& c, const Eigen::VectorXd& a,
                 const Eigen::VectorXd& b, const Eigen::VectorXd& weights,
                 double categorical_weight);

// Indices of the `count` rows of x nearest to row `centre`, ties by index,
// in increasing index order (so subsets keep history order).
std::vector<int> Nearest(const Coordinates& c, const Eigen::MatrixXd& x,
                         int centre, int count, const Eigen::VectorXd& weights,
                         double categorical_weight);

// Indices of the `count` rows of x nearest to any of the rows `centres`
// (unit-cube distance, 1 per differing category), ties by index, in
// increasing index order.
std::vector<int> NearestToAny(const Coordinates& c, const Eigen::MatrixXd& x,
                              const std::vector<int>& centres, int count);

Eigen::MatrixXd Rows(const Eigen::MatrixXd& x, const std::vector<int>& rows);
Eigen::VectorXd Entries(const Eigen::VectorXd& y, const std::vector<int>& rows);
// The rows as a matrix with `cols` columns (0 rows when empty).
Eigen::MatrixXd ToMatrix(const std::vector<Eigen::VectorXd>& rows, int cols);
int ArgMax(const Eigen::VectorXd& y);
// The best rows (or prior trials) the acquisition optimizer perturbs.
inline constexpr int kAnchors = 5;

// The indices of the at most `count` largest entries of y, largest first,
// ties in index order.
std::vector<int> TopEntries(const Eigen::VectorXd& y, int count);

// Keeps the at most `count` rows of (x, y) nearest the best one, distances
// in unit lengthscales.
void KeepNearestBest(const Coordinates& c, int count, Eigen::MatrixXd& x,
                     Eigen::VectorXd& y);

// Numeric lengthscales per dimension (categorical dimensions: 1): the
// Matérn's parameters come first in MakeMixedKernel's layout.
Eigen::VectorXd NumericLengthscales(const Coordinates& c,
                                    const GpParams& params);

// The hyperparameter prior: an additive kernel's lengthscales are those of
// one-dimensional functions, so its prior is the d = 1 prior.
GpPrior PriorFor(const Coordinates& c, KernelStructure structure);

// Perturbation scales of the acquisition optimizer's anchors: half a
// lengthscale on numeric dimensions, within [0.01, 0.5].
Eigen::VectorXd PerturbationScale(const Coordinates& coords,
                                  const Eigen::VectorXd& lengthscales);

}  // namespace hypertune::optimizer::gp_bandit

#endif  // HYPERTUNE_OPTIMIZER_GP_BANDIT_COORDINATES_H_
