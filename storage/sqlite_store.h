// SqliteStore: the StudyStore kept in one SQLite file (the embedded default).
//
// The file is in WAL mode with foreign keys on. Each study and trial is kept
// as its serialized proto message; a few columns beside it (name, state,
// client id, lease epoch) exist only for lookups and for the conditional
// updates, which compare them instead of reading the message back
// (sqlite/tables.h). Every statement is
// prepared once per connection, cached and given its values through
// bindings, so names of any bytes round-trip verbatim (sqlite/connection.h).
// The schema carries a version and migrates forward on Open; a file written
// by a newer build is refused (sqlite/schema.h).
//
// One writer, group commit (sqlite/group_commit_writer.h): concurrent writes
// queue up and share one transaction, each in its own savepoint, so one that
// fails is undone alone. No write call returns before the COMMIT that holds
// it succeeded; if the batch's transaction fails, every write in it fails.
//
// Reads run on a small pool of read-only connections (sqlite/read_pool.h):
// they never wait for the writer and see every write whose call returned
// before they began (read-your-writes). ":memory:" and "" (private temporary
// databases, one per connection) use a single connection for reads and
// writes.
//
// Durability: with the default synchronous=NORMAL a committed call survives
// a crash (kill -9) of the process; durable_full also survives power loss.
//
// One store per file: Open takes an exclusive lock on the file (a sidecar,
// FILE.lock; sqlite/file_lock.h) and holds it until the store is destroyed,
// so a second store on the same file, in this process or another, is
// refused. The kernel drops the lock when the process dies.
//
// Backup copies the live file with SQLite's online backup API while writes
// go on (sqlite/backup.h).
//
// Thread safety: every method may be called from any thread. The server is
// meant to be the file's only user.
#ifndef HYPERTUNE_STORAGE_SQLITE_STORE_H_
#define HYPERTUNE_STORAGE_SQLITE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/sqlite/file_lock.h"
#include "storage/sqlite/group_commit_writer.h"
#include "storage/sqlite/read_pool.h"
#include "storage/sqlite/schema.h"
#include "storage/store_options.h"
#include "storage/study_store.h"

namespace hypertune::storage {

class SqliteStore : public StudyStore {
 public:
  // The schema version this build writes; Open migrates older files to it.
  static constexpr int kSchemaVersion = sqlite::kSchemaVersion;
  // The most writes one transaction takes; the rest wait for the next.
  static constexpr int kMaxBatchWrites =
      sqlite::GroupCommitWriter::kMaxBatchWrites;

  // Counts of the commits so far, for monitoring and tests.
  using CommitStats = sqlite::GroupCommitWriter::CommitStats;

  // Opens (creating if absent) the database at `path`, locks it and
  // migrates its schema. FAILED_PRECONDITION if another store (another
  // hypertuned) holds the file, if the file is not a SQLite database or if
  // it has a schema newer than kSchemaVersion; INVALID_ARGUMENT if
  // max_read_connections < 1; other failures name the step and SQLite's
  // message.
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(
      const std::string& path, const SqliteOptions& options = {});

  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;
  // REQUIRES: no call is in progress.
  ~SqliteStore() override;

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
  // DATA_LOSS with PRAGMA integrity_check's report when it is not "ok".
  absl::Status CheckIntegrity() override;
  // A copy of the database as of the moment of the call, made while
  // writes go on (sqlite/backup.h). INVALID_ARGUMENT for an empty
  // destination or one that is this store's own file (or its -wal, -shm or
  // .lock); FAILED_PRECONDITION if DESTINATION-wal exists (a database there
  // is open, or was not closed cleanly). An in-memory database holds its
  // writes back while it is copied.
  absl::Status Backup(const std::string& destination_path) override;

  // Runs PRAGMA integrity_check; returns its report, "ok" when the file is
  // sound.
  absl::StatusOr<std::string> IntegrityCheck();

  CommitStats GetCommitStats() const;

  // Test hooks for forcing batches deterministically. While paused, the
  // committer waits before taking its batch, so the writes issued meanwhile
  // queue up; resuming commits them all in one batch (up to
  // kMaxBatchWrites), in the order they were queued. Reads go on.
  void PauseCommitsForTesting();
  void ResumeCommitsForTesting();
  // Returns once at least `count` writes wait in the queue (while paused,
  // that includes the write of the caller that will commit them).
  void AwaitQueuedWritesForTesting(int count);

 private:
  using Connection = sqlite::Connection;

  // `lock` is null for an in-memory database.
  SqliteStore(std::unique_ptr<sqlite::FileLock> lock,
              std::unique_ptr<Connection> writer, const std::string& path,
              const SqliteOptions& options);

  // Sets the pragmas and migrates the schema; run once by Open.
  absl::Status Initialize(const SqliteOptions& options);

  // Runs `read` on a read connection (waiting for a free one) and returns
  // its status, or the error that opening a connection met.
  absl::Status Read(absl::FunctionRef<absl::Status(Connection&)> read);
  // Runs `read` on a read connection in one read transaction, so that the
  // rows it reads agree (a trial's row and its measurements).
  absl::Status ReadTogether(const std::string& what,
                            absl::FunctionRef<absl::Status(Connection&)> read);
  // Runs `read` with the id of study `study_name` on a read connection, in
  // one read transaction so that the study check and the rows agree.
  // NOT_FOUND if the study is absent; `what` names the work in errors.
  absl::Status ReadStudy(
      std::string_view study_name, const std::string& what,
      absl::FunctionRef<absl::Status(Connection&, int64_t)> read);

  // Replaces the trial if `read` is null or its version is still `*read`,
  // recording the change in the sequence or not.
  absl::Status ReplaceTrial(const v1::Trial& trial, const TrialVersion* read,
                            bool record_change);

  // As given to Open.
  const std::string path_;
  const int busy_timeout_ms_;
  // Whether one connection serves reads too (see the header comment).
  const bool single_connection_;
  // Held for the store's lifetime; null when single_connection_. Declared
  // before the connections, so released after they close.
  const std::unique_ptr<sqlite::FileLock> lock_;
  // Declared before readers_, so destroyed after them: the writer's close
  // then checkpoints the WAL alone.
  sqlite::GroupCommitWriter writer_;
  // Null when single_connection_.
  const std::unique_ptr<sqlite::ReadPool> readers_;
};

}  // namespace hypertune::storage

#endif  // HYPERTUNE_STORAGE_SQLITE_STORE_H_
