// UpdateStudy's rules, apart from locking and storage: which spec fields may
// change, that a search space may only grow (every stored trial stays
// valid), and the record of what changed.
//
// Pure functions; thread-safe.
#ifndef HYPERTUNE_SERVICE_STUDY_UPDATE_H_
#define HYPERTUNE_SERVICE_STUDY_UPDATE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/field_mask.pb.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::service {

// The paths of StudySpec that UpdateStudy may change.
const std::vector<std::string>& UpdatableStudyPaths();

// `spec` with the fields of `mask` taken from `update`, and one
// StudyChange::Field per field whose value changed (none: nothing to do).
// INVALID_ARGUMENT for an unknown or empty mask; FAILED_PRECONDITION when
// `update.parameters` narrows, removes, renames, reorders, adds or changes
// the kind or scale of a parameter, naming the `trials` that would fall
// outside.
struct SpecUpdate {
  v1::StudySpec spec;
  std::vector<v1::StudyChange::Field> fields;
};
absl::StatusOr<SpecUpdate> ApplyStudyUpdate(
    const v1::StudySpec& spec, const v1::StudySpec& update,
    const google::protobuf::FieldMask& mask,
    const std::vector<v1::Trial>& trials);

// Whether `after` gives a study more trials or device-hours than `before`.
bool RaisesBudget(const v1::StudySpec& before, const v1::StudySpec& after);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_STUDY_UPDATE_H_
