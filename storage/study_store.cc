#include "storage/study_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/store_util.h"

namespace hypertune::storage {

absl::StatusOr<TrialHead> StudyStore::GetTrialHead(std::string_view study_name,
                                                   int64_t trial_id) {
  absl::StatusOr<v1::Trial> trial = GetTrial(study_name, trial_id);
  if (!trial.ok()) return trial.status();
  TrialHead head;
  const int64_t whole = static_cast<int64_t>(trial->ByteSizeLong());
  head.measurements = trial->measurements_size();
  if (head.measurements > 0) {
    head.latest = trial->measurements(trial->measurements_size() - 1);
  }
  trial->clear_measurements();
  head.measurement_bytes = whole - static_cast<int64_t>(trial->ByteSizeLong());
  head.trial = *std::move(trial);
  return head;
}

namespace {

bool Finished(v1::Trial::State state) {
  return state == v1::Trial::COMPLETED || state == v1::Trial::STOPPED ||
         state == v1::Trial::FAILED || state == v1::Trial::INFEASIBLE;
}

}  // namespace

absl::Status StudyStore::AppendMeasurement(const v1::Trial& head,
                                           const v1::Measurement& measurement,
                                           const TrialVersion& read) {
  if (Finished(read.state) || Finished(head.state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        TrialLabel(head.study_name(), head.id()),
        ": measurements are appended only to an unfinished trial, not a ",
        v1::Trial::State_Name(Finished(read.state) ? read.state : head.state()),
        " one"));
  }
  absl::StatusOr<v1::Trial> stored = GetTrial(head.study_name(), head.id());
  if (!stored.ok()) return stored.status();
  v1::Trial trial = head;
  *trial.mutable_measurements() = std::move(*stored->mutable_measurements());
  *trial.add_measurements() = measurement;
  // Conditional on the version read before `stored` was: a writer that
  // changed the trial in between (and so its measurements) is refused.
  return UpdateTrialIf(trial, read);
}

}  // namespace hypertune::storage
