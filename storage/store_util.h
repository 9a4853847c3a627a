// Helpers shared by the StudyStore implementations: error-message labels and
// the serialization check that keeps every store's accepted input the same.
//
// Stored names are arbitrary bytes (NUL, quotes, kilobytes); messages show
// them escaped and shortened so a log line stays readable. Thread-safe: pure
// functions.
#ifndef HYPERTUNE_STORAGE_STORE_UTIL_H_
#define HYPERTUNE_STORAGE_STORE_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "hypertune/v1/hypertune.pb.h"
#include "storage/study_store.h"

namespace hypertune::storage {

// Returns `name` C-escaped in double quotes, cut to about 100 bytes with
// "..." when longer.
std::string Quoted(std::string_view name);

// Returns `study "NAME"`.
std::string StudyLabel(std::string_view study_name);

// Returns `trial ID of study "NAME"`.
std::string TrialLabel(std::string_view study_name, int64_t trial_id);

// OK if `stored`, the version trial `trial_id` of study `study_name` has
// now, is still `read`; ABORTED naming the trial and both versions
// otherwise.
absl::Status CheckVersion(std::string_view study_name, int64_t trial_id,
                          const TrialVersion& stored, const TrialVersion& read);

// NOT_FOUND: `study "NAME" not found`, and `trial ID of study "NAME" not
// found`.
absl::Status StudyNotFound(std::string_view study_name);
absl::Status TrialNotFound(std::string_view study_name, int64_t trial_id);

// Parses stored `bytes` into `message`; DATA_LOSS naming `label` when they
// do not parse (the store's file or database was damaged).
absl::Status ParseStored(std::string_view bytes,
                         google::protobuf::Message& message,
                         absl::string_view label);

// OK for a row limit >= 0 (0 means none); INVALID_ARGUMENT naming "limit".
absl::Status CheckLimit(int limit);

// Returns `message` serialized, after checking that the bytes parse back:
// proto3 refuses to parse string fields that are not UTF-8, so such a
// message would be stored but never read again. INVALID_ARGUMENT (naming
// `label`) when it would not round-trip.
absl::StatusOr<std::string> SerializeForStore(
    const google::protobuf::Message& message, absl::string_view label);

// The stored form of a trial: its message without measurements (a trials
// row's message), and each measurement as the bytes it takes in the trial's
// message (the repeated field's tag, length and value: a row of the
// store's measurements table each), so that the row's message followed by them
// parses as the whole trial. A finished trial (KeepsCurveInline) keeps its
// curve in its message, with no rows: it takes no more reports, and a study's
// finished trials (most of it, and every imported one) read as one row
// each.
struct StoredTrial {
  std::string head;
  std::vector<std::string> measurements;
  // The sum of measurements' sizes.
  int64_t measurement_bytes = 0;
};

// Whether a trial in `state` keeps its measurements in its message: the
// finished states.
bool KeepsCurveInline(v1::Trial::State state);

// `trial` in its stored form; INVALID_ARGUMENT naming `label` if a part
// would not read back (a string that is not UTF-8).
absl::StatusOr<StoredTrial> SplitTrial(const v1::Trial& trial,
                                       const std::string& label);

// The bytes `measurement` takes in a trial's message (as in StoredTrial),
// the same for the same measurement every time; INVALID_ARGUMENT naming
// `label` if they would not read back.
absl::StatusOr<std::string> MeasurementBytes(const v1::Measurement& measurement,
                                             const std::string& label);

// What a store's AppendMeasurement writes: `head` without its
// measurements and its bytes, the measurement's bytes (MeasurementBytes),
// and the write's name for errors. INVALID_ARGUMENT if a part would not
// read back.
struct StoredAppend {
  v1::Trial head;
  std::string head_bytes;
  std::string measurement;
  std::string what;
};
absl::StatusOr<StoredAppend> PrepareAppend(const v1::Trial& head,
                                           const v1::Measurement& measurement);

}  // namespace hypertune::storage

#endif  // HYPERTUNE_STORAGE_STORE_UTIL_H_
