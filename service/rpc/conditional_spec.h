// Conditional parameters in the API (ParameterSpec.parent,
// parent_categories, parent_values) mapped to the optimizer's tree
// (optimizer/conditional.h): parent names become indices, category names
// become category indices. The tree's own rules (parent types, values in
// the parent's domain, cycles) are checked by SearchSpace::Create.
//
// Pure functions; thread-safe.
#ifndef HYPERTUNE_SERVICE_RPC_CONDITIONAL_SPEC_H_
#define HYPERTUNE_SERVICE_RPC_CONDITIONAL_SPEC_H_

#include <vector>

#include "absl/status/status.h"
#include "hypertune/v1/hypertune.pb.h"
#include "optimizer/search_space.h"

namespace hypertune::service {

// Sets configs[i].parent and parent_values from spec.parameters(i).
// INVALID_ARGUMENT naming the field (study.spec.parameters[i].parent, ...)
// when a parent names no parameter or the parameter itself, when parent
// values are given without a parent, when a CATEGORICAL parent is given
// numbers or a numeric one categories, when none are given, or when a
// category is not one of the parent's.
// REQUIRES: configs.size() == spec.parameters_size(), configs[i] converted
// from spec.parameters(i)
absl::Status ResolveParents(const v1::StudySpec& spec,
                            std::vector<optimizer::ParameterConfig>& configs);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_CONDITIONAL_SPEC_H_
