// GroupCommitWriter: the one connection that writes a SqliteStore file, and
// the queue in front of it that commits concurrent writes together.
//
// Every write joins a queue, and one committer at a time takes everything
// queued, applies it in queue order in one BEGIN IMMEDIATE ... COMMIT (each
// write inside its own savepoint, so one that fails is undone alone and gets
// its own status) and then wakes the callers of the batch. No write call
// returns before the COMMIT that holds it succeeded; if the batch's
// transaction fails, every write in it fails. Many concurrent writers thus
// share one commit (with synchronous=FULL, one fsync). A caller that finds no
// commit in progress commits itself, so an uncontended write costs no thread
// switch; if writes queued up meanwhile, it hands the rest to a background
// drainer thread, which keeps the role until the queue is empty (handing it
// from caller to caller would cost a thread switch per batch on the
// committer's path, and hold one caller back for as long as the load lasts).
//
// Thread safety: every method may be called from any thread. The connection
// is used by one thread at a time: the committer, or the caller of Use.
#ifndef HYPERTUNE_STORAGE_SQLITE_GROUP_COMMIT_WRITER_H_
#define HYPERTUNE_STORAGE_SQLITE_GROUP_COMMIT_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace hypertune::storage::sqlite {

class Connection;

class GroupCommitWriter {
 public:
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

  // Takes the connection that writes; starts the drainer thread.
  explicit GroupCommitWriter(std::unique_ptr<Connection> connection);
  GroupCommitWriter(const GroupCommitWriter&) = delete;
  GroupCommitWriter& operator=(const GroupCommitWriter&) = delete;
  // Stops the drainer, then closes the connection.
  // REQUIRES: no call is in progress.
  ~GroupCommitWriter();

  // Queues a write, commits it (with those queued by then) if no commit is
  // in progress, and returns its status once its batch is over: `apply`'s
  // own, or the error that failed the whole batch, prefixed with `what`.
  // `apply` runs the write's statements inside the batch's transaction.
  absl::Status Write(absl::string_view what,
                     absl::FunctionRef<absl::Status(Connection&)> apply)
      ABSL_LOCKS_EXCLUDED(queue_mu_);

  // Runs `use` on the connection outside of any batch, waiting for the one
  // in progress, and returns its status: setting the file up, and reads
  // where one connection serves both.
  absl::Status Use(absl::FunctionRef<absl::Status(Connection&)> use)
      ABSL_LOCKS_EXCLUDED(connection_mu_);

  CommitStats GetCommitStats() const ABSL_LOCKS_EXCLUDED(queue_mu_);

  // Test hooks for forcing batches deterministically. While paused, the
  // committer waits before taking its batch, so the writes issued meanwhile
  // queue up; resuming commits them all in one batch (up to
  // kMaxBatchWrites), in the order they were queued.
  void PauseCommitsForTesting() ABSL_LOCKS_EXCLUDED(queue_mu_);
  void ResumeCommitsForTesting() ABSL_LOCKS_EXCLUDED(queue_mu_);
  // Returns once at least `count` writes wait in the queue (while paused,
  // that includes the write of the caller that will commit them).
  void AwaitQueuedWritesForTesting(int count) ABSL_LOCKS_EXCLUDED(queue_mu_);

 private:
  struct PendingWrite;

  // Moves the queue's head (at most kMaxBatchWrites) into `batch`, first
  // waiting while paused. With nothing queued, gives up the committer's role
  // and returns false. REQUIRES: the caller is the committer.
  bool TakeBatch(std::vector<PendingWrite*>& batch)
      ABSL_LOCKS_EXCLUDED(queue_mu_);
  void RecordBatch(size_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_);
  // The drainer thread's loop: commits whenever handed the role, until
  // closing.
  void Drain() ABSL_LOCKS_EXCLUDED(queue_mu_);
  // Applies `batch` in one transaction and sets each write's status.
  void CommitBatch(const std::vector<PendingWrite*>& batch)
      ABSL_LOCKS_EXCLUDED(connection_mu_);

  // Held by the committer around each batch, and by Use.
  absl::Mutex connection_mu_;
  const std::unique_ptr<Connection> connection_
      ABSL_PT_GUARDED_BY(connection_mu_);

  mutable absl::Mutex queue_mu_;
  // Writes waiting for a batch, in arrival order.
  std::deque<PendingWrite*> queue_ ABSL_GUARDED_BY(queue_mu_);
  // Who commits now. Invariant: the queue is empty when kNone.
  enum class Committer { kNone, kCaller, kDrainer };
  Committer committer_ ABSL_GUARDED_BY(queue_mu_) = Committer::kNone;
  // Signalled when the drainer is handed the role, or on closing.
  absl::CondVar drain_;
  bool closing_ ABSL_GUARDED_BY(queue_mu_) = false;
  bool paused_ ABSL_GUARDED_BY(queue_mu_) = false;
  absl::CondVar resumed_;
  CommitStats stats_ ABSL_GUARDED_BY(queue_mu_);

  // Runs Drain; started last, joined first.
  std::thread drainer_;
};

}  // namespace hypertune::storage::sqlite

#endif  // HYPERTUNE_STORAGE_SQLITE_GROUP_COMMIT_WRITER_H_
