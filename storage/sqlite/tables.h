// The rows of a SqliteStore file: studies and trials read and written on
// one connection, each as its serialized message beside a few columns that
// exist only for lookups and conditional updates (name, state, client id,
// lease epoch), kept equal to the message's fields by every write.
//
// These functions know the SQL and the stored form; they know nothing of
// the write queue or the read pool: the caller supplies the connection and,
// for anything that must be atomic, the transaction. `what` names the
// operation in errors (as in "updating trial 3 of study \"mnist\"").
// NOT_FOUND says which of the study or the trial is missing; a stored
// message that does not parse is DATA_LOSS naming its study or trial.
//
// Thread safety: as for the connection passed in (connection.h).
#ifndef HYPERTUNE_STORAGE_SQLITE_TABLES_H_
#define HYPERTUNE_STORAGE_SQLITE_TABLES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/sqlite/connection.h"
#include "storage/store_util.h"
#include "storage/study_store.h"

namespace hypertune::storage::sqlite {

// ----- Studies -----

// The row id of the named study, or NOT_FOUND.
absl::StatusOr<int64_t> StudyId(Connection& db, std::string_view name);

// The stored form of `study` (trial_counts are derived on read, never
// kept), or INVALID_ARGUMENT naming the study if it would not read back.
absl::StatusOr<std::string> StudyBytes(const v1::Study& study);

// Inserts `study`, whose stored form is `bytes`. ALREADY_EXISTS if a study
// of that name exists.
absl::Status InsertStudy(Connection& db, const v1::Study& study,
                         std::string_view bytes, const std::string& what);

// The named study, parsed into `study`.
absl::Status LoadStudy(Connection& db, std::string_view name,
                       const std::string& what, v1::Study& study);

// Replaces the stored study of `study`'s name.
absl::Status SaveStudy(Connection& db, const v1::Study& study,
                       const std::string& what);

// Deletes the named study and, by cascade, its trials.
absl::Status DeleteStudy(Connection& db, std::string_view name,
                         const std::string& what);

// Appends every study, by name, to `studies`.
absl::Status LoadStudies(Connection& db, std::vector<v1::Study>& studies);

// ----- Trials -----

// StoredTrial, KeepsCurveInline, SplitTrial and MeasurementBytes: see
// storage/store_util.h.

// Inserts `trials` into the named study with the next dense ids and change
// sequence numbers, setting their study_name and id.
absl::Status InsertTrials(Connection& db, std::string_view study_name,
                          std::vector<v1::Trial>& trials,
                          const std::string& what);

// The trial, parsed into `trial`.
absl::Status LoadTrial(Connection& db, std::string_view study_name,
                       int64_t trial_id, const std::string& what,
                       v1::Trial& trial);

// The trial without its measurements, with their count, size and the
// latest of them (TrialHead): a few rows, whatever the curve's length.
absl::Status LoadTrialHead(Connection& db, std::string_view study_name,
                           int64_t trial_id, const std::string& what,
                           TrialHead& head);

// Replaces the stored trial (matched by study_name and id) with `trial`,
// whose stored form is `stored`: if `read` is null, or while the stored
// trial's state and lease epoch are still `*read` (ABORTED naming both
// versions otherwise). `record_change` gives it the next number of the
// study's change sequence. Measurement rows the stored trial already has
// are kept (a trial's measurements only grow, or are all moved away).
absl::Status UpdateTrial(Connection& db, const v1::Trial& trial,
                         const StoredTrial& stored, const TrialVersion* read,
                         bool record_change, const std::string& what);

// Stores `head` (a trial whose measurements are not written), whose message
// is `head_bytes`, and appends a measurement whose bytes are `measurement`
// (MeasurementBytes), while the stored trial's state and lease epoch are
// still `read` (ABORTED otherwise); records the change. Costs the same
// however many measurements the trial has. FAILED_PRECONDITION for a
// finished trial (KeepsCurveInline).
absl::Status AppendMeasurement(Connection& db, const v1::Trial& head,
                               std::string_view head_bytes,
                               std::string_view measurement,
                               const TrialVersion& read,
                               const std::string& what);

// Appends the trials of study `study_id` (named `study_name`) that match
// `query` to `trials`, by id.
absl::Status LoadTrials(Connection& db, int64_t study_id,
                        std::string_view study_name, const TrialQuery& query,
                        const std::string& what,
                        std::vector<v1::Trial>& trials);

// Appends the trials of study `study_id` changed after `after_sequence`, at
// most `limit` (0: no limit), by sequence, to `changes`.
absl::Status LoadTrialChanges(Connection& db, int64_t study_id,
                              std::string_view study_name,
                              int64_t after_sequence, int limit,
                              const std::string& what,
                              std::vector<TrialChange>& changes);

// Sets the number of trials of study `study_id` in each state that has any.
absl::Status CountTrials(
    Connection& db, int64_t study_id, const std::string& what,
    absl::flat_hash_map<v1::Trial::State, int64_t>& counts);

// Appends every trial in one of `states` (empty: any), by study name, then
// id, to `trials`.
absl::Status LoadTrialsInStates(Connection& db,
                                const std::vector<v1::Trial::State>& states,
                                std::vector<v1::Trial>& trials);

// ----- The file -----

// PRAGMA integrity_check's report, "ok" when the file is sound.
absl::StatusOr<std::string> IntegrityReport(Connection& db);

}  // namespace hypertune::storage::sqlite

#endif  // HYPERTUNE_STORAGE_SQLITE_TABLES_H_
