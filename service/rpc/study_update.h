// UpdateStudy's rules, apart from locking and storage: which spec fields may
// change, that a search space may only grow (every stored trial stays
// valid), and the record of what changed.
//
// Pure functions; thread-safe.
#ifndef HYPERTUNE_SERVICE_RPC_STUDY_UPDATE_H_
#define HYPERTUNE_SERVICE_RPC_STUDY_UPDATE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/field_mask.pb.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::service {

// The paths of StudySpec that UpdateStudy may change.
const std::vector<std::string>& UpdatableStudyPaths();

// `spec` with the fields of `mask` taken from `update`. INVALID_ARGUMENT for
// an empty mask, an unknown or repeated path, or an early_stopping field
// that the study's rule does not read (or a study without a rule).
absl::StatusOr<v1::StudySpec> MergeStudyUpdate(
    const v1::StudySpec& spec, const v1::StudySpec& update,
    const google::protobuf::FieldMask& mask);

// FAILED_PRECONDITION when `after.parameters` narrows, removes, renames,
// reorders, adds or changes the kind, scale or conditions of a parameter of
// `before`, naming the `trials` that would fall outside.
// REQUIRES: `after` is a valid search space (finite bounds, no NaN).
absl::Status CheckParametersGrow(const v1::StudySpec& before,
                                 const v1::StudySpec& after,
                                 const std::vector<v1::Trial>& trials);

// One StudyChange::Field per path of `mask` whose value changed (none:
// nothing to do). A changed parameter list is recorded per changed
// parameter, as its domain before and after and the values added (listed
// up to kMaxChangeTextBytes), so the record stays small however large the
// space.
std::vector<v1::StudyChange::Field> RecordChanges(
    const v1::StudySpec& before, const v1::StudySpec& after,
    const google::protobuf::FieldMask& mask);

// Whether `after` gives a study more trials or device-hours than `before`.
bool RaisesBudget(const v1::StudySpec& before, const v1::StudySpec& after);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_STUDY_UPDATE_H_
