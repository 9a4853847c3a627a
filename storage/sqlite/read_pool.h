// ReadPool: read-only connections to a SqliteStore file, lent to one read
// at a time.
//
// In WAL mode readers never wait for the writer, and each read sees every
// transaction committed before it began. Connections open on demand, up to
// a bound; a read that finds them all lent out waits for one. The most
// recently returned is lent first: its statements are warm.
//
// Thread safety: every method may be called from any thread.
#ifndef HYPERTUNE_STORAGE_SQLITE_READ_POOL_H_
#define HYPERTUNE_STORAGE_SQLITE_READ_POOL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace hypertune::storage::sqlite {

class Connection;

class ReadPool {
 public:
  // Reads the file at `path` through at most `max_connections` (>= 1)
  // connections, each waiting up to `busy_timeout_ms` for a lock. Opens
  // none yet.
  ReadPool(std::string path, int max_connections, int busy_timeout_ms);
  ReadPool(const ReadPool&) = delete;
  ReadPool& operator=(const ReadPool&) = delete;
  // REQUIRES: no read is in progress.
  ~ReadPool();

  // Runs `read` on a connection (waiting for a free one) and returns its
  // status, or the error that opening a connection met.
  absl::Status Read(absl::FunctionRef<absl::Status(Connection&)> read)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string path_;
  const int max_connections_;
  const int busy_timeout_ms_;

  absl::Mutex mu_;
  absl::CondVar freed_;
  std::vector<std::unique_ptr<Connection>> idle_ ABSL_GUARDED_BY(mu_);
  // Idle and lent out, including those being opened.
  int open_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hypertune::storage::sqlite

#endif  // HYPERTUNE_STORAGE_SQLITE_READ_POOL_H_
