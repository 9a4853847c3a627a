// SqliteStore: the StudyStore kept in one SQLite file (the embedded default).
//
// The file is in WAL mode with foreign keys on. Each study and trial is kept
// as its serialized proto message; a few columns beside it (name, state,
// client id) exist only for lookups. Every statement is prepared once per
// connection, cached and given its values through bindings, so names of any
// bytes round-trip verbatim. The schema carries a version and migrates
// forward on Open; a file written by a newer build is refused.
//
// One writer, group commit: every write joins a queue, and one committer at
// a time takes everything queued, applies it in queue order in one
// BEGIN IMMEDIATE ... COMMIT (each write inside its own savepoint, so one
// that fails is undone alone and gets its own status) and then wakes the
// callers of the batch. No write call returns before the COMMIT that holds
// it succeeded; if the batch's transaction fails, every write in it fails.
// Many concurrent writers thus share one commit (with durable_full, one
// fsync). A caller that finds no commit in progress commits itself, so an
// uncontended write costs no thread switch; if writes queued up meanwhile,
// it hands the rest to a background drainer thread, which keeps the role
// until the queue is empty (handing it from caller to caller would cost a
// thread switch per batch on the committer's path, and hold one caller
// back for as long as the load lasts).
//
// Reads run on a small pool of read-only connections: they never wait for
// the writer and see every write whose call returned before they began
// (read-your-writes). ":memory:" and "" (private temporary databases, one per
// connection) use a single connection for reads and writes.
//
// Durability: with the default synchronous=NORMAL a committed call survives
// a crash (kill -9) of the process; durable_full also survives power loss.
//
// Thread safety: every method may be called from any thread. The server is
// meant to be the file's only user.
#ifndef HYPERTUNE_STORAGE_SQLITE_STORE_H_
#define HYPERTUNE_STORAGE_SQLITE_STORE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "storage/study_store.h"

namespace hypertune::storage {

struct SqliteOptions {
  // synchronous=FULL instead of NORMAL: also survives power loss, slower
  // commits. Default false.
  bool durable_full = false;
  // How long a statement waits for a lock held by another connection.
  // Default 5 s.
  int busy_timeout_ms = 5000;
  // The most read connections open at once; more concurrent reads wait for
  // one to be free. Opened on demand. Default 4.
  int max_read_connections = 4;
};

class SqliteStore : public StudyStore {
 public:
  // The schema version this build writes; Open migrates older files to it.
  static constexpr int kSchemaVersion = 4;
  // The most writes one transaction takes; the rest wait for the next.
  static constexpr int kMaxBatchWrites = 256;

  // Counts of the commits so far, for monitoring and tests.
  struct CommitStats {
    // Transactions run by the committer (successful or not).
    int64_t batches = 0;
    // Writes they carried.
    int64_t writes = 0;
    // The most writes one of them carried.
    int64_t largest_batch = 0;
  };

  // Opens (creating if absent) the database at `path` and migrates its
  // schema. FAILED_PRECONDITION if the file is not a SQLite database or has
  // a schema newer than kSchemaVersion; INVALID_ARGUMENT if
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
  absl::Status ModifyStudy(
      std::string_view name,
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
  absl::StatusOr<std::vector<TrialChange>> ListTrialChanges(
      std::string_view study_name, int64_t after_sequence, int limit) override;
  absl::StatusOr<std::vector<v1::Trial>> ListTrials(
      std::string_view study_name, const TrialQuery& query) override;
  absl::StatusOr<absl::flat_hash_map<v1::Trial::State, int64_t>> CountTrials(
      std::string_view study_name) override;
  absl::StatusOr<std::vector<v1::Trial>> ListTrialsInStates(
      const std::vector<v1::Trial::State>& states) override;

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
  class Connection;
  struct Write;

  SqliteStore(std::unique_ptr<Connection> writer, std::string path,
              SqliteOptions options);

  // Sets the pragmas and migrates the schema; run once by Open.
  absl::Status Initialize();
  absl::Status Migrate(Connection& db);

  // Queues `write`, commits it (with those queued by then) if no commit is
  // in progress, and returns its status once its batch is over.
  absl::Status Submit(Write& write) ABSL_LOCKS_EXCLUDED(queue_mu_);
  // Moves the queue's head (at most kMaxBatchWrites) into `batch`, first
  // waiting while paused. With nothing queued, gives up the committer's role
  // and returns false. REQUIRES: the caller is the committer.
  bool TakeBatch(std::vector<Write*>& batch) ABSL_LOCKS_EXCLUDED(queue_mu_);
  void RecordBatch(size_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_);
  // The drainer thread's loop: commits whenever handed the role, until
  // closing.
  void Drain() ABSL_LOCKS_EXCLUDED(queue_mu_);
  // Applies `batch` in one transaction and sets each write's status.
  void CommitBatch(const std::vector<Write*>& batch)
      ABSL_LOCKS_EXCLUDED(queue_mu_);

  // Runs `read` with the id of study `study_name` on a read connection, in
  // one read transaction so that the study check and the rows agree.
  // NOT_FOUND if the study is absent; `what` names the work in errors.
  absl::Status ReadStudy(
      std::string_view study_name, const std::string& what,
      absl::FunctionRef<absl::Status(Connection&, int64_t)> read);
  // The study row of `name`, parsed, and its replacement by `study`
  // (NOT_FOUND if absent); `label` and `what` name them in errors.
  static absl::Status LoadStudyRow(Connection& db, std::string_view name,
                                   const std::string& label,
                                   const std::string& what, v1::Study& study);
  static absl::Status SaveStudyRow(Connection& db, const v1::Study& study,
                                   const std::string& label,
                                   const std::string& what);
  // The trial row of `study_name` / `trial_id`, parsed (NOT_FOUND naming
  // the study or the trial if absent).
  static absl::Status LoadTrialRow(Connection& db, std::string_view study_name,
                                   int64_t trial_id, const std::string& label,
                                   const std::string& what, v1::Trial& trial);
  // Replaces the trial if `read` is null or its version is still `*read`,
  // recording the change in the sequence or not.
  absl::Status ReplaceTrial(const v1::Trial& trial, const TrialVersion* read,
                            bool record_change);

  // Runs `read` on a read connection (waiting for a free one) and returns
  // its status, or the error that opening a connection met.
  absl::Status Read(absl::FunctionRef<absl::Status(Connection&)> read)
      ABSL_LOCKS_EXCLUDED(pool_mu_);

  const std::string path_;
  const SqliteOptions options_;
  // One connection serves reads too (see the header comment).
  const bool single_connection_;

  // Held by the committer around each batch, and by reads in
  // single-connection mode.
  absl::Mutex writer_mu_;
  const std::unique_ptr<Connection> writer_ ABSL_PT_GUARDED_BY(writer_mu_);

  mutable absl::Mutex queue_mu_;
  // Writes waiting for a batch, in arrival order.
  std::deque<Write*> queue_ ABSL_GUARDED_BY(queue_mu_);
  // Who commits now. Invariant: the queue is empty when kNone.
  enum class Committer { kNone, kCaller, kDrainer };
  Committer committer_ ABSL_GUARDED_BY(queue_mu_) = Committer::kNone;
  // Signalled when the drainer is handed the role, or on closing.
  absl::CondVar drain_;
  bool closing_ ABSL_GUARDED_BY(queue_mu_) = false;
  bool paused_ ABSL_GUARDED_BY(queue_mu_) = false;
  absl::CondVar resumed_;
  CommitStats stats_ ABSL_GUARDED_BY(queue_mu_);

  absl::Mutex pool_mu_;
  absl::CondVar reader_freed_;
  std::vector<std::unique_ptr<Connection>> idle_readers_
      ABSL_GUARDED_BY(pool_mu_);
  // Idle and lent out, including those being opened.
  int open_readers_ ABSL_GUARDED_BY(pool_mu_) = 0;

  // Runs Drain; started last, joined first.
  std::thread drainer_;
};

}  // namespace hypertune::storage

#endif  // HYPERTUNE_STORAGE_SQLITE_STORE_H_
