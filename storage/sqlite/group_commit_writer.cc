#include "storage/sqlite/group_commit_writer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/sqlite/connection.h"

namespace hypertune::storage::sqlite {

namespace {

// Each write of a batch runs inside one, so that it can be undone alone.
constexpr char kSavepoint[] = "SAVEPOINT write";
constexpr char kRollbackToSavepoint[] = "ROLLBACK TO write";
constexpr char kReleaseSavepoint[] = "RELEASE write";

}  // namespace

// One write call waiting in the queue. Lives on its caller's stack, which
// stays blocked in Write until the write is done.
struct GroupCommitWriter::PendingWrite {
  PendingWrite(absl::string_view what,
               absl::FunctionRef<absl::Status(Connection&)> apply)
      : what(what), apply(apply) {}

  // Wakes the waiting caller. It may return (and destroy the write) as soon
  // as this has released `mu`.
  void MarkDone() {
    absl::MutexLock lock(&mu);
    done = true;
  }

  void AwaitDone() { absl::MutexLock lock(&mu, absl::Condition(&done)); }

  // Names the write in errors that befall its whole batch.
  const absl::string_view what;
  // Runs the write's statements inside the batch's transaction; returns its
  // own status.
  const absl::FunctionRef<absl::Status(Connection&)> apply;
  // Set by the committer before MarkDone.
  absl::Status status;
  // Each write has its own lock, so waking one caller never makes the
  // others or the committer wait.
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
};

GroupCommitWriter::GroupCommitWriter(std::unique_ptr<Connection> connection)
    : connection_(std::move(connection)), drainer_([this] { Drain(); }) {}

GroupCommitWriter::~GroupCommitWriter() {
  {
    absl::MutexLock lock(&queue_mu_);
    closing_ = true;
    drain_.Signal();
  }
  drainer_.join();
}

absl::Status GroupCommitWriter::Use(
    absl::FunctionRef<absl::Status(Connection&)> use) {
  absl::MutexLock lock(&connection_mu_);
  return use(*connection_);
}

absl::Status GroupCommitWriter::Write(
    absl::string_view what,
    absl::FunctionRef<absl::Status(Connection&)> apply) {
  PendingWrite write(what, apply);
  bool commit;
  {
    absl::MutexLock lock(&queue_mu_);
    queue_.push_back(&write);
    commit = committer_ == Committer::kNone;
    if (commit) committer_ = Committer::kCaller;
  }
  if (!commit) {
    write.AwaitDone();
    return std::move(write.status);
  }
  // No commit was in progress: commit this write, with any that arrived
  // meanwhile, without waking another thread.
  std::vector<PendingWrite*> batch;
  if (TakeBatch(batch)) {
    CommitBatch(batch);
    absl::MutexLock lock(&queue_mu_);
    RecordBatch(batch.size());
    if (queue_.empty()) {
      committer_ = Committer::kNone;
    } else {
      // Writes are piling up: the drainer takes over, so that this caller
      // returns now and the committer's role stays on one busy thread.
      committer_ = Committer::kDrainer;
      drain_.Signal();
    }
  }
  for (PendingWrite* other : batch) {
    if (other != &write) other->MarkDone();
  }
  return std::move(write.status);
}

bool GroupCommitWriter::TakeBatch(std::vector<PendingWrite*>& batch) {
  batch.clear();
  absl::MutexLock lock(&queue_mu_);
  while (paused_) resumed_.Wait(&queue_mu_);
  if (queue_.empty()) {
    committer_ = Committer::kNone;
    return false;
  }
  const size_t count =
      std::min(queue_.size(), static_cast<size_t>(kMaxBatchWrites));
  batch.assign(queue_.begin(), queue_.begin() + count);
  queue_.erase(queue_.begin(), queue_.begin() + count);
  return true;
}

void GroupCommitWriter::RecordBatch(size_t size) {
  ++stats_.batches;
  stats_.writes += static_cast<int64_t>(size);
  stats_.largest_batch =
      std::max(stats_.largest_batch, static_cast<int64_t>(size));
}

void GroupCommitWriter::Drain() {
  std::vector<PendingWrite*> batch;
  while (true) {
    {
      absl::MutexLock lock(&queue_mu_);
      while (committer_ != Committer::kDrainer && !closing_) {
        drain_.Wait(&queue_mu_);
      }
      if (committer_ != Committer::kDrainer) return;  // Closing.
    }
    // Commit until the queue is empty, which gives the role back.
    while (TakeBatch(batch)) {
      CommitBatch(batch);
      {
        absl::MutexLock lock(&queue_mu_);
        RecordBatch(batch.size());
      }
      for (PendingWrite* write : batch) write->MarkDone();
    }
  }
}

void GroupCommitWriter::CommitBatch(const std::vector<PendingWrite*>& batch) {
  absl::MutexLock lock(&connection_mu_);
  Connection& db = *connection_;

  // Rolls back and gives `error` to every write that has not failed on its
  // own: nothing of the batch is committed.
  auto fail_batch = [&](const absl::Status& error) {
    if (!db.InAutocommit()) {
      db.Execute(kRollback, "rolling back the batch").IgnoreError();
    }
    for (PendingWrite* write : batch) {
      if (write->status.ok()) {
        write->status = absl::Status(
            error.code(), absl::StrCat(write->what, ": ", error.message()));
      }
    }
  };

  if (absl::Status s = db.Execute(kBegin, "beginning the write transaction");
      !s.ok()) {
    return fail_batch(s);
  }
  // A write alone needs no savepoint: if it fails, the transaction is rolled
  // back instead.
  const bool savepoints = batch.size() > 1;
  for (PendingWrite* write : batch) {
    if (savepoints) {
      if (absl::Status s = db.Execute(kSavepoint, "opening a savepoint");
          !s.ok()) {
        return fail_batch(s);
      }
    }
    write->status = write->apply(db);
    if (db.InAutocommit()) {
      // The write's error (I/O, disk full, out of memory) ended the whole
      // transaction, undoing the writes before it too.
      return fail_batch(absl::Status(
          write->status.ok() ? absl::StatusCode::kInternal
                             : write->status.code(),
          absl::StrCat("another write of the same transaction failed: ",
                       write->status.ok() ? "transaction ended"
                                          : write->status.message())));
    }
    if (!savepoints) continue;
    if (!write->status.ok()) {
      if (absl::Status s =
              db.Execute(kRollbackToSavepoint, "rolling back a failed write");
          !s.ok()) {
        return fail_batch(s);
      }
    }
    if (absl::Status s = db.Execute(kReleaseSavepoint, "releasing a savepoint");
        !s.ok()) {
      return fail_batch(s);
    }
  }
  if (!savepoints && !batch.front()->status.ok()) {
    db.Execute(kRollback, "rolling back a failed write").IgnoreError();
    return;
  }
  if (absl::Status s = db.Execute(kCommit, "committing the write transaction");
      !s.ok()) {
    fail_batch(s);
  }
}

void GroupCommitWriter::PauseCommitsForTesting() {
  absl::MutexLock lock(&queue_mu_);
  paused_ = true;
}

void GroupCommitWriter::ResumeCommitsForTesting() {
  absl::MutexLock lock(&queue_mu_);
  paused_ = false;
  resumed_.SignalAll();
}

void GroupCommitWriter::AwaitQueuedWritesForTesting(int count) {
  auto queued = [this, count]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
    return queue_.size() >= static_cast<size_t>(count);
  };
  absl::MutexLock lock(&queue_mu_);
  queue_mu_.Await(absl::Condition(&queued));
}

GroupCommitWriter::CommitStats GroupCommitWriter::GetCommitStats() const {
  absl::MutexLock lock(&queue_mu_);
  return stats_;
}

}  // namespace hypertune::storage::sqlite
