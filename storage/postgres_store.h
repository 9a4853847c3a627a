// PostgresStore: the StudyStore kept in a PostgreSQL database, for history
// that must outlive one machine and for several servers on one database.
//
// Each study and trial is kept as its serialized proto message (bytea), so
// that fields added to the proto need no migration; a few columns beside it
// (name, state, client id, lease epoch) exist only for lookups and for the
// conditional updates, which compare them in the UPDATE's WHERE clause
// (postgres/tables.h). An unfinished trial's measurements are rows of their
// own, so that a report (GetTrialHead, AppendMeasurement) reads and writes a
// few rows however long the curve is; every read assembles the whole trial
// (postgres/tables.h: StoredTrial). Every statement takes its values as
// parameters, never in its text, so names of any bytes round-trip verbatim. The
// schema carries a version and migrates forward on Open; a database written by
// a newer build is refused (postgres/schema.h).
//
// Conditional writes: UpdateTrialIf and RenewTrialLease apply only while
// the stored trial still has the state and lease epoch the caller read, as
// the database sees it when it writes, so that the database, not one
// server's memory, decides who owns a trial: of several servers (or
// threads) writing one trial from the same read, exactly one wins and the
// others get ABORTED. Every other trial write of a study waits for the
// study's row lock, which also orders its change sequence.
//
// Connections: a small pool (postgres/connection_pool.h), each call on one
// connection and one transaction at a time. A lost connection fails the
// calls on it with UNAVAILABLE (a COMMIT that lost its connection may or
// may not have been applied) and is replaced on the next call, so the store
// outlives a restart of the server.
//
// Backup is refused (FAILED_PRECONDITION): the database is the server's to
// back up, with pg_dump or a streaming standby.
//
// Thread safety: every method may be called from any thread; several
// stores, in this process or others, may share one database.
#ifndef HYPERTUNE_STORAGE_POSTGRES_STORE_H_
#define HYPERTUNE_STORAGE_POSTGRES_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "storage/postgres/schema.h"
#include "storage/store_options.h"
#include "storage/study_store.h"

namespace hypertune::storage {

namespace postgres {
class Connection;
class ConnectionPool;
}  // namespace postgres

class PostgresStore : public StudyStore {
 public:
  // The schema version this build writes; Open migrates older databases.
  static constexpr int kSchemaVersion = postgres::kSchemaVersion;

  // Connects to the database that `url` (postgresql://... or
  // postgres://..., libpq's URL form) names, which must exist, and migrates
  // its schema. INVALID_ARGUMENT if `url` is not such a URL or
  // max_connections < 1; UNAVAILABLE if the server cannot be reached or
  // refuses the connection; FAILED_PRECONDITION if the database has a
  // schema newer than kSchemaVersion. Messages show the URL without its
  // password.
  static absl::StatusOr<std::unique_ptr<PostgresStore>> Open(
      const std::string& url, const PostgresOptions& options = {});

  PostgresStore(const PostgresStore&) = delete;
  PostgresStore& operator=(const PostgresStore&) = delete;
  // REQUIRES: no call is in progress.
  ~PostgresStore() override;

  absl::Status CreateStudy(const v1::Study& study) override;
  absl::StatusOr<v1::Study> GetStudy(std::string_view name) override;
  absl::StatusOr<std::vector<v1::Study>> ListStudies() override;
  absl::Status UpdateStudy(const v1::Study& study) override;
  absl::Status ModifyStudy(std::string_view name,
                           absl::FunctionRef<void(v1::Study&)> modify) override;
  absl::Status DeleteStudy(std::string_view name) override;
  absl::StatusOr<std::vector<v1::Trial>> CreateTrials(
      std::string_view study_name, std::vector<v1::Trial> trials) override;
  absl::StatusOr<v1::Trial> GetTrial(std::string_view study_name,
                                     int64_t trial_id) override;
  absl::StatusOr<StudyWithTrial> GetStudyWithTrial(std::string_view study_name,
                                                   int64_t trial_id) override;
  absl::StatusOr<StudyOverview> GetStudyOverview(
      std::string_view name,
      const std::vector<v1::Trial::State>& states) override;
  absl::Status UpdateTrial(const v1::Trial& trial) override;
  absl::Status UpdateTrialIf(const v1::Trial& trial,
                             const TrialVersion& read) override;
  absl::Status RenewTrialLease(const v1::Trial& trial) override;
  // Read and written apart from the trial's other measurements: each costs
  // the same however long the curve is.
  absl::StatusOr<TrialHead> GetTrialHead(std::string_view study_name,
                                         int64_t trial_id) override;
  absl::Status AppendMeasurement(const v1::Trial& head,
                                 const v1::Measurement& measurement,
                                 const TrialVersion& read) override;
  absl::StatusOr<std::vector<TrialChange>> ListTrialChanges(
      std::string_view study_name, int64_t after_sequence, int limit) override;
  absl::StatusOr<std::vector<v1::Trial>> ListTrials(
      std::string_view study_name, const TrialQuery& query) override;
  absl::StatusOr<absl::flat_hash_map<v1::Trial::State, int64_t>> CountTrials(
      std::string_view study_name) override;
  absl::StatusOr<std::vector<v1::Trial>> ListTrialsInStates(
      const std::vector<v1::Trial::State>& states) override;
  // Reads every row on one snapshot: DATA_LOSS listing the first problems
  // found (messages that do not parse, columns that disagree with their
  // message, trial ids that are not dense, a damaged change sequence).
  absl::Status CheckIntegrity() override;
  // FAILED_PRECONDITION: this store keeps nothing in a file of its own; the
  // message points to pg_dump and standbys.
  absl::Status Backup(const std::string& destination_path) override;

  // The URL as given to Open, with its password hidden.
  const std::string& shown_url() const { return shown_url_; }

 private:
  PostgresStore(const std::string& url, std::string shown_url,
                const PostgresOptions& options);

  // Runs `use` on a pooled connection; returns its status, or the error
  // that connecting met (postgres/connection_pool.h).
  absl::Status Use(absl::FunctionRef<absl::Status(postgres::Connection&)> use);

  // UpdateTrial, conditional on `read` unless it is null.
  absl::Status ReplaceTrial(const v1::Trial& trial, const TrialVersion* read);

  const std::string shown_url_;
  // Per study, its last trial id as this store last saw it: a guess that
  // lets CreateTrials take ids and insert in one statement (checked there,
  // so a stale guess costs only the slower path).
  absl::Mutex last_trial_ids_mu_;
  absl::flat_hash_map<std::string, int64_t> last_trial_ids_
      ABSL_GUARDED_BY(last_trial_ids_mu_);
  // Kept behind a pointer so that this header does not need libpq's.
  const std::unique_ptr<postgres::ConnectionPool> pool_;
};

}  // namespace hypertune::storage

#endif  // HYPERTUNE_STORAGE_POSTGRES_STORE_H_
