#include "storage/store_util.h"

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace hypertune::storage {

namespace {
constexpr size_t kMaxShownBytes = 100;
}  // namespace

std::string Quoted(std::string_view name) {
  const bool cut = name.size() > kMaxShownBytes;
  // Debian's Abseil has its own string_view, not std::string_view.
  const absl::string_view shown(name.data(),
                                cut ? kMaxShownBytes : name.size());
  return absl::StrCat("\"", absl::CHexEscape(shown), cut ? "...\"" : "\"",
                      cut ? absl::StrCat(" (", name.size(), " bytes)") : "");
}

std::string StudyLabel(std::string_view study_name) {
  return absl::StrCat("study ", Quoted(study_name));
}

std::string TrialLabel(std::string_view study_name, int64_t trial_id) {
  return absl::StrCat("trial ", trial_id, " of study ", Quoted(study_name));
}

absl::Status StudyNotFound(std::string_view study_name) {
  return absl::NotFoundError(
      absl::StrCat(StudyLabel(study_name), " not found"));
}

absl::Status TrialNotFound(std::string_view study_name, int64_t trial_id) {
  return absl::NotFoundError(
      absl::StrCat(TrialLabel(study_name, trial_id), " not found"));
}

absl::Status ParseStored(std::string_view bytes,
                         google::protobuf::Message& message,
                         absl::string_view label) {
  if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(
        absl::StrCat(label, ": the stored ", message.GetDescriptor()->name(),
                     " message (", bytes.size(), " bytes) does not parse"));
  }
  return absl::OkStatus();
}

absl::Status CheckLimit(int limit) {
  if (limit >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("limit: must be >= 0, got ", limit));
}

absl::StatusOr<std::string> SerializeForStore(
    const google::protobuf::Message& message, absl::string_view label) {
  const std::string type(message.GetDescriptor()->name());
  std::string bytes;
  if (!message.SerializeToString(&bytes)) {
    return absl::InternalError(
        absl::StrCat(label, ": cannot serialize the ", type, " message"));
  }
  std::unique_ptr<google::protobuf::Message> check(message.New());
  if (!check->ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        label, ": the ", type,
        " has a string field that is not valid UTF-8 and could not be "
        "read back"));
  }
  return bytes;
}

absl::Status CheckVersion(std::string_view study_name, int64_t trial_id,
                          const TrialVersion& stored,
                          const TrialVersion& read) {
  if (stored.state == read.state && stored.lease_epoch == read.lease_epoch) {
    return absl::OkStatus();
  }
  return absl::AbortedError(absl::StrCat(
      TrialLabel(study_name, trial_id), " changed since it was read: ",
      v1::Trial::State_Name(read.state), " under lease epoch ",
      read.lease_epoch, " then, ", v1::Trial::State_Name(stored.state),
      " under lease epoch ", stored.lease_epoch, " now"));
}

bool KeepsCurveInline(v1::Trial::State state) {
  switch (state) {
    case v1::Trial::COMPLETED:
    case v1::Trial::STOPPED:
    case v1::Trial::FAILED:
    case v1::Trial::INFEASIBLE:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<std::string> MeasurementBytes(const v1::Measurement& measurement,
                                             const std::string& label) {
  v1::Trial wrapper;
  *wrapper.add_measurements() = measurement;
  std::string bytes;
  {
    // Deterministic (map entries in key order), so that an unchanged
    // measurement compares equal to its stored row.
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    if (!wrapper.SerializeToCodedStream(&coded)) {
      return absl::InternalError(
          absl::StrCat(label, ": cannot serialize a measurement"));
    }
  }
  if (!wrapper.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        label,
        ": a measurement has a string that is not valid UTF-8 and could not "
        "be read back"));
  }
  return bytes;
}

absl::StatusOr<StoredTrial> SplitTrial(const v1::Trial& trial,
                                       const std::string& label) {
  StoredTrial stored;
  if (KeepsCurveInline(trial.state()) || trial.measurements_size() == 0) {
    absl::StatusOr<std::string> bytes = SerializeForStore(trial, label);
    if (!bytes.ok()) return bytes.status();
    stored.head = *std::move(bytes);
    return stored;
  }
  stored.measurements.reserve(trial.measurements_size());
  for (const v1::Measurement& measurement : trial.measurements()) {
    absl::StatusOr<std::string> bytes = MeasurementBytes(measurement, label);
    if (!bytes.ok()) return bytes.status();
    stored.measurement_bytes += static_cast<int64_t>(bytes->size());
    stored.measurements.push_back(*std::move(bytes));
  }
  v1::Trial head = trial;
  head.clear_measurements();
  absl::StatusOr<std::string> bytes = SerializeForStore(head, label);
  if (!bytes.ok()) return bytes.status();
  stored.head = *std::move(bytes);
  return stored;
}

absl::StatusOr<StoredAppend> PrepareAppend(const v1::Trial& head,
                                           const v1::Measurement& measurement) {
  const std::string label = TrialLabel(head.study_name(), head.id());
  StoredAppend stored;
  absl::StatusOr<std::string> row = MeasurementBytes(measurement, label);
  if (!row.ok()) return row.status();
  stored.measurement = *std::move(row);
  stored.head = head;
  stored.head.clear_measurements();
  absl::StatusOr<std::string> bytes = SerializeForStore(stored.head, label);
  if (!bytes.ok()) return bytes.status();
  stored.head_bytes = *std::move(bytes);
  stored.what = absl::StrCat("adding a measurement to ", label);
  return stored;
}

}  // namespace hypertune::storage
