// Group decomposition of a search space for multivariate TPE: the
// parameters that are active in exactly the same trials form one group, and
// each group gets its own joint Parzen estimator (as Optuna's group=True,
// which finds the groups from the trials' parameter sets; here they follow
// from the space's tree, so that a group is known before any trial).
//
// In a flat space every parameter is in one group. In a conditional space
// the always-active parameters form one group and the children of a parent
// active under the same parent values another, recursively.
//
// Pure function; thread-safe.
#ifndef HYPERTUNE_OPTIMIZER_TPE_GROUPS_H_
#define HYPERTUNE_OPTIMIZER_TPE_GROUPS_H_

#include <vector>

#include "optimizer/search_space.h"

namespace hypertune::optimizer::tpe {

// The groups as parameter indices, each ascending; groups ordered by their
// first parameter in space.parents_first() order. Every parameter is in
// exactly one group.
std::vector<std::vector<int>> ParameterGroups(const SearchSpace& space);

}  // namespace hypertune::optimizer::tpe

#endif  // HYPERTUNE_OPTIMIZER_TPE_GROUPS_H_
