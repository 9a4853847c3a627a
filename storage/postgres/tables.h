// The rows of a PostgresStore database: studies and trials read and written
// on one connection, each as its serialized message beside a few columns
// that exist only for lookups and conditional updates (name, state, client
// id, lease epoch), kept equal to the message's fields by every write. An
// unfinished trial's measurements are rows of their own (StoredTrial);
// every read assembles the whole trial in the statement that reads it.
//
// Each function is one atomic step: a single statement, or a transaction of
// its own. Writes to a study's trials first take the study's next change
// sequence number (or trial ids), which locks the study's row until the
// transaction ends: they are ordered per study, and sequence numbers are
// committed in increasing order. Locks are always taken study row first,
// then trial rows, so writers never deadlock. Reads are single statements,
// each on one snapshot, so the study check and the rows agree.
//
// `what` names the operation in errors (as in "updating trial 3 of study
// \"mnist\""). NOT_FOUND says which of the study or the trial is missing; a
// stored message that does not parse is DATA_LOSS naming its study or
// trial; a conditional write whose trial changed is ABORTED naming both
// versions (CheckVersion, store_util.h).
//
// Thread safety: as for the connection passed in (connection.h).
#ifndef HYPERTUNE_STORAGE_POSTGRES_TABLES_H_
#define HYPERTUNE_STORAGE_POSTGRES_TABLES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/postgres/connection.h"
#include "storage/store_util.h"
#include "storage/study_store.h"

namespace hypertune::storage::postgres {

// ----- Studies -----

// Inserts `study`. ALREADY_EXISTS if a study of that name exists;
// INVALID_ARGUMENT if it would not read back.
absl::Status InsertStudy(Connection& db, const v1::Study& study,
                         const std::string& what);

// The named study, parsed into `study`.
absl::Status LoadStudy(Connection& db, std::string_view name,
                       const std::string& what, v1::Study& study);

// Replaces the stored study of `study`'s name.
absl::Status SaveStudy(Connection& db, const v1::Study& study,
                       const std::string& what);

// Applies `modify` to the named study and stores the result, in one
// transaction that holds the study's row locked meanwhile.
absl::Status ModifyStudy(Connection& db, std::string_view name,
                         absl::FunctionRef<void(v1::Study&)> modify,
                         const std::string& what);

// Deletes the named study and, by cascade, its trials and their
// measurement rows.
absl::Status DeleteStudy(Connection& db, std::string_view name,
                         const std::string& what);

// Appends every study, by name, to `studies`.
absl::Status LoadStudies(Connection& db, std::vector<v1::Study>& studies);

// ----- Trials -----

// StoredTrial, KeepsCurveInline, SplitTrial and MeasurementBytes: see
// storage/store_util.h.

// Makes the row of trial `trial_id` of study row `study_id`, which has no
// measurement rows, hold `stored`: its message, counts and measurement
// rows. For a caller's transaction (InsertTrials, the schema's migration).
absl::Status StoreMeasurementRows(Connection& db, int64_t study_id,
                                  int64_t trial_id, const StoredTrial& stored,
                                  const std::string& what);

// Inserts `trials` into the named study with the next dense ids and change
// sequence numbers, setting their study_name and id; returns the study's
// last trial id after it. In one statement if `last_id` (the caller's
// guess) is still the study's last trial id, in a transaction of several
// otherwise.
absl::StatusOr<int64_t> InsertTrials(Connection& db,
                                     std::string_view study_name,
                                     std::vector<v1::Trial>& trials,
                                     std::optional<int64_t> last_id,
                                     const std::string& what);

// The trial, parsed into `trial`.
absl::Status LoadTrial(Connection& db, std::string_view study_name,
                       int64_t trial_id, const std::string& what,
                       v1::Trial& trial);

// The trial without its measurements, with their count, size and the
// latest of them (TrialHead), in one statement that reads a few rows,
// whatever the curve's length.
absl::Status LoadTrialHead(Connection& db, std::string_view study_name,
                           int64_t trial_id, const std::string& what,
                           TrialHead& head);

// The study and its trial, on one snapshot, into `read`.
absl::Status LoadStudyWithTrial(Connection& db, std::string_view study_name,
                                int64_t trial_id, const std::string& what,
                                StudyWithTrial& read);

// The study, its trial counts and its trials in `states`, in one statement.
absl::Status LoadStudyOverview(Connection& db, std::string_view study_name,
                               const std::vector<v1::Trial::State>& states,
                               const std::string& what,
                               StudyOverview& overview);

// Replaces the stored trial (matched by study_name and id) with `trial`,
// whose stored form is `stored`, giving it the next number of the study's
// change sequence: if `read` is null, or only while the stored trial's
// state and lease epoch are still `*read` (compared under the study's lock
// and the trial's). Measurement rows the trial already has are kept (a
// trial's measurements only grow, or are all moved away).
absl::Status UpdateTrial(Connection& db, const v1::Trial& trial,
                         const StoredTrial& stored, const TrialVersion* read,
                         const std::string& what);

// Stores `trial` (its message and client id), whose stored form is
// `stored`, without recording a change, only while the stored trial's
// state and lease epoch are still `trial`'s. Takes no lock on the study.
absl::Status RenewTrialLease(Connection& db, const v1::Trial& trial,
                             const StoredTrial& stored,
                             const std::string& what);

// Stores `head` (a trial whose measurements are not written), whose message
// is `head_bytes`, and appends a measurement whose bytes are `measurement`
// (MeasurementBytes), in one statement, while the stored trial's state and
// lease epoch are still `read` (ABORTED otherwise); records the change.
// Costs the same however many measurements the trial has.
// FAILED_PRECONDITION for a finished trial (KeepsCurveInline).
absl::Status AppendMeasurement(Connection& db, const v1::Trial& head,
                               std::string_view head_bytes,
                               std::string_view measurement,
                               const TrialVersion& read,
                               const std::string& what);

// Appends the trials of the named study that match `query` to `trials`,
// by id.
absl::Status LoadTrials(Connection& db, std::string_view study_name,
                        const TrialQuery& query, const std::string& what,
                        std::vector<v1::Trial>& trials);

// Appends the trials of the named study changed after `after_sequence`, at
// most `limit` (0: no limit), by sequence, to `changes`.
absl::Status LoadTrialChanges(Connection& db, std::string_view study_name,
                              int64_t after_sequence, int limit,
                              const std::string& what,
                              std::vector<TrialChange>& changes);

// Sets the number of the named study's trials in each state that has any.
absl::Status CountTrials(
    Connection& db, std::string_view study_name, const std::string& what,
    absl::flat_hash_map<v1::Trial::State, int64_t>& counts);

// Appends every trial in one of `states` (empty: any), by study name, then
// id, to `trials`.
absl::Status LoadTrialsInStates(Connection& db,
                                const std::vector<v1::Trial::State>& states,
                                std::vector<v1::Trial>& trials);

// ----- The database -----

// What is wrong with the stored rows, on one snapshot: messages that do
// not parse, columns that disagree with their message, a study whose trial
// ids are not dense or whose counters lag behind its trials. Empty when
// all is sound; at most a few problems are listed.
absl::StatusOr<std::vector<std::string>> IntegrityProblems(Connection& db);

}  // namespace hypertune::storage::postgres

#endif  // HYPERTUNE_STORAGE_POSTGRES_TABLES_H_
