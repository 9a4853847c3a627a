// The tree of a conditional search space (DESIGN.md, "Conditional
// parameters"): which parameter is a child of which, under which of its
// parent's values it is active, and the checks that keep that structure
// sound. SearchSpace (search_space.h) applies these rules; the algorithms
// read them through it.
//
// A parameter with a parent is active when its parent is active and holds
// one of its `parent_values`; a parameter without one is always active. An
// Assignment keeps one slot per parameter, kInactive (NaN) in the slots of
// inactive parameters (search_space.h states the whole contract).
//
// Pure functions of the parameter list; thread-safe.
#ifndef HYPERTUNE_OPTIMIZER_CONDITIONAL_H_
#define HYPERTUNE_OPTIMIZER_CONDITIONAL_H_

#include <set>
#include <vector>

#include "absl/status/status.h"
#include "optimizer/search_space.h"

namespace hypertune::optimizer {

// OK when every parameter's `parent` and `parent_values` describe a forest:
// the parent is another parameter of the list, of type CATEGORICAL, DISCRETE
// or INTEGER; parent_values is a non-empty list of distinct values of the
// parent's domain (category indices for CATEGORICAL); and no parameter is its
// own ancestor. (Names are unique across the whole space, which
// SearchSpace::Create checks, so none repeats along a path.) Otherwise
// INVALID_ARGUMENT naming the parameter and the field, e.g.
//   parameters[3] ("momentum").parent_values[0]: 5 is not a category index
//   of parameters[0] ("optimizer"), which has 3 categories
// REQUIRES: every config alone is valid (SearchSpace::Create checks that
// first).
absl::Status ValidateTree(const std::vector<ParameterConfig>& params);

// True if some parameter has a parent.
bool HasConditions(const std::vector<ParameterConfig>& params);

// The parameter indices ordered parents first: by depth in the tree (the
// number of ancestors), ties by index.
// REQUIRES: ValidateTree(params).ok()
std::vector<int> ParentsFirstOrder(const std::vector<ParameterConfig>& params);

// Whether the parent value `parent_value` activates `child` (false for a
// NaN: an inactive parent activates nothing).
// REQUIRES: child.parent != kNoParent
bool ActivatedBy(const ParameterConfig& child, double parent_value);

// active[i]: whether parameter i is active under the values of `a` (only the
// parents' slots are read).
// REQUIRES: order == ParentsFirstOrder(params), a.size() == params.size()
std::vector<bool> ActiveParameters(const std::vector<ParameterConfig>& params,
                                   const std::vector<int>& order,
                                   const Assignment& a);

// Equality and a strict weak order on assignments in which kInactive (NaN)
// is one value of its own, equal to itself and below every number; on
// assignments without NaN they are == and < of std::vector. For sets and
// comparisons of conditional assignments, where NaN breaks both.
bool SameAssignment(const Assignment& a, const Assignment& b);
struct AssignmentLess {
  bool operator()(const Assignment& a, const Assignment& b) const;
};
// Assignments already in a study (or a batch): never proposed again.
using AssignmentSet = std::set<Assignment, AssignmentLess>;

// The parameters that share one condition (one parent and one set of parent
// values): the nodes of the tree as the tree kernel (tree_kernel.h) sees
// it. Group 0 holds the parameters without a parent; every other group's
// parent lies in an earlier group.
struct ConditionGroup {
  std::vector<int> parameters;        // Ascending indices.
  int parent = kNoParent;             // kNoParent for group 0.
  std::vector<double> parent_values;  // Ascending.
  int parent_group = -1;              // The group holding `parent`; -1 for 0.
};

// The groups of a valid tree: group 0 first, then the others in the order
// their first parameter appears in ParentsFirstOrder.
// REQUIRES: ValidateTree(params).ok()
std::vector<ConditionGroup> ConditionGroups(
    const std::vector<ParameterConfig>& params);

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_CONDITIONAL_H_
