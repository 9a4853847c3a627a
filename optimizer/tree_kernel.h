// The GP kernel of a conditional search space: an additive tree-structured
// covariance (Ma and Blaschko, "Additive tree-structured covariance function
// for conditional parameter spaces in Bayesian optimization", AISTATS 2020;
// the tree of Jenatton et al., "Bayesian optimization with tree-structured
// dependencies", ICML 2017), extended to all orders of interaction between
// the tree's nodes.
//
// The nodes are condition groups (conditional.h): the parameters that share
// a parent and parent values, group 0 the parameters that are always active.
// Each group g has a kernel k_g on its own columns (Matérn-5/2 ARD on the
// numeric ones times Hamming on the categorical ones, as MakeMixedKernel),
// a weight w_g > 0, and an activity a_g(x) in {0, 1}: 1 when x's parent
// column holds one of the group's parent values and the parent's group is
// active. With A_g = a_g(x) a_g(x'), F_g = 1 + w_g A_g k_g(x, x'):
//
//   K(x, x') = prod_g F_g - 1
//            = sum over non-empty sets S of groups of
//              prod_{g in S} w_g A_g k_g(x, x'),
//   k(x, x') = K(x, x') / sqrt(N(x) N(x')),  N(x) = prod_g (1 + w_g a_g(x))
//   - 1.
//
// Each term of the sum is a product of positive semi-definite kernels
// (a_g(x) a_g(x') has rank one), so K is PSD, and so is k (a rescaling by
// N(x)^-1/2, N > 0 since group 0 is always active); k(x, x) = 1. A group
// contributes only where both points have it active: an inactive parameter
// never looks like a value, and whatever an inactive column holds is
// ignored. Small weights leave the first-order terms, Ma and Blaschko's
// additive tree (f = sum of one function per node on the path); large ones
// the product of the active groups' kernels; the fit decides. On a space of
// group 0 alone k = k_0.
//
// Parameters (log space): every group's k_g parameters in group order, then
// log w_0, ..., log w_{G-1}. Derivatives, with P = prod_g F_g and
// D = (N(x) N(x'))^-1/2:
//   dk / d theta_g     = D (P / F_g) w_g A_g dk_g / d theta_g,
//   dk / d log w_g     = D (P / F_g) w_g A_g k_g - k (s_g(x) + s_g(x')) / 2,
//   s_g(x)             = d log N(x) / d log w_g
//                      = (N(x) + 1) / N(x) w_g a_g(x) / (1 + w_g a_g(x)),
//   dk / dx            = sum_g D (P / F_g) w_g A_g dk_g / dx
// (activity is piecewise constant in x: no term from N or A).
//
// Cost: a point activates only the groups on its path(s) down the tree, and
// every operation works on those alone, each group on its own columns.
// Which children a parent's value activates is looked up (a binary search
// over the parent column's interval endpoints), so k(x, .) against n points
// costs O(n a (log c + m)), a the groups active per point, c the cells of a
// parent column, m a group's columns (InputGradient adds the O(n d) of its
// dense answer): nothing grows with the groups a point does not activate.
// A 1,000-category root with a child under each category costs what a
// two-level tree does, not 500 groups' worth per point.
//
// Immutable apart from set_log_params; not thread-safe while being set.
#ifndef HYPERTUNE_OPTIMIZER_TREE_KERNEL_H_
#define HYPERTUNE_OPTIMIZER_TREE_KERNEL_H_

#include <memory>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "optimizer/kernel.h"
#include "optimizer/search_space.h"

namespace hypertune::optimizer {

// One node of the tree in the model's coordinates.
struct TreeKernelGroup {
  // The columns of the group's parameters. REQUIRES: non-empty
  std::vector<int> columns;
  // Per column: whether it is categorical (an index compared for equality).
  std::vector<bool> categorical;
  // The group whose activity this one requires; -1 for an always-active
  // group (only group 0).
  int parent_group = -1;
  // The column of the parent parameter, and the half-open intervals
  // [low, high) of that column's coordinate under which the group is active
  // (a category index c as [c - 0.5, c + 0.5); a numeric parent's value as
  // the stretch of the unit interval that rounds to it).
  int parent_column = -1;
  std::vector<std::pair<double, double>> accepted;
};

class TreeKernel final : public Kernel {
 public:
  // Weights start at 1 and k_g's lengthscales at 1.
  // REQUIRES: !groups.empty(), groups[0].parent_group == -1, every other
  // group's parent_group lies in [0, its own index).
  explicit TreeKernel(std::vector<TreeKernelGroup> groups);

  std::unique_ptr<Kernel> Clone() const override;
  int num_params() const override;
  Eigen::VectorXd log_params() const override;
  void set_log_params(const Eigen::VectorXd& p) override;
  Eigen::MatrixXd Matrix(const Eigen::MatrixXd& a,
                         const Eigen::MatrixXd& b) const override;
  Eigen::VectorXd ContractGradient(const Eigen::MatrixXd& x,
                                   const Eigen::MatrixXd& w) const override;
  Eigen::MatrixXd InputGradient(const Eigen::VectorXd& x,
                                const Eigen::MatrixXd& b) const override;

  int num_groups() const { return static_cast<int>(groups_.size()); }
  // The index in log_params() of group g's first k_g parameter and of its
  // weight; k_g's parameters are its numeric columns' lengthscales, then
  // its categorical ones'.
  int group_param_offset(int g) const { return offsets_[g]; }
  int weight_param_index(int g) const { return weights_offset_ + g; }
  const std::vector<TreeKernelGroup>& groups() const { return groups_; }

  // Row i, column g: whether group g is active at row i of x.
  using ActivityMatrix = Eigen::Array<bool, Eigen::Dynamic, Eigen::Dynamic>;
  ActivityMatrix Activity(const Eigen::MatrixXd& x) const;

  // The groups active at each row of x, ascending: row i's are
  // groups[begin[i]] .. groups[begin[i + 1] - 1].
  struct SparseActivity {
    std::vector<int> begin;  // x.rows() + 1 offsets into groups.
    std::vector<int> groups;
  };
  SparseActivity ActiveGroups(const Eigen::MatrixXd& x) const;

 private:
  // The child groups of one group that one parent column switches on: the
  // sorted distinct endpoints of their accepted intervals and, for each
  // elementary segment [endpoints[s], endpoints[s + 1]), the groups that
  // accept it (ascending).
  struct ChildSwitch {
    int parent_column;
    std::vector<double> endpoints;
    std::vector<std::vector<int>> segment_groups;
  };

  TreeKernel(const TreeKernel& other);

  std::vector<TreeKernelGroup> groups_;
  // Per group: the switches of its child groups, one per parent column.
  std::vector<std::vector<ChildSwitch>> switches_;
  std::vector<std::unique_ptr<Kernel>> kernels_;  // k_g per group.
  std::vector<int> offsets_;
  int weights_offset_ = 0;
  Eigen::VectorXd log_w_;
  Eigen::VectorXd w_;  // exp(log_w_)
};

// The tree of `space` in the GP bandit's model coordinates: column j is
// parameter j, holding its unit-cube encoding, or the category index for a
// categorical parameter. One group per ConditionGroup (conditional.h); a
// numeric parent's accepted intervals are the stretches of the unit interval
// that SearchSpace::Decode maps to each of the parent values (the first and
// last stretched to +-infinity, as Decode clamps).
// REQUIRES: space.conditional()
std::vector<TreeKernelGroup> TreeKernelGroups(const SearchSpace& space);

// Per column of `groups`' coordinates (dim columns): the numeric lengthscale
// that the log parameters `log_params` of TreeKernel(groups) give it; 1 for
// categorical columns.
Eigen::VectorXd TreeKernelLengthscales(
    const std::vector<TreeKernelGroup>& groups,
    const Eigen::VectorXd& log_params, int dim);

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_TREE_KERNEL_H_
