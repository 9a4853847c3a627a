// ConnectionPool: the connections a PostgresStore runs its calls on.
//
// At most max_connections are open at once, opened on demand; a call takes
// a free one, or opens one while fewer are open, or else waits for one to
// come back. A connection that comes back lost (the server restarted, the
// network failed) or still inside a transaction is closed instead of being
// reused, so the next call connects afresh: a server that comes back is
// used again without restarting the store.
//
// Thread safety: every method may be called from any thread.
#ifndef HYPERTUNE_STORAGE_POSTGRES_CONNECTION_POOL_H_
#define HYPERTUNE_STORAGE_POSTGRES_CONNECTION_POOL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "storage/postgres/connection.h"
#include "storage/store_options.h"

namespace hypertune::storage::postgres {

class ConnectionPool {
 public:
  // `url` as given to Connection::Open; `shown_url` its redacted form.
  // REQUIRES: options.max_connections >= 1.
  ConnectionPool(std::string url, std::string shown_url,
                 const PostgresOptions& options);
  // REQUIRES: no Use is in progress.
  ~ConnectionPool() = default;
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // Runs `use` on a connection that no other call uses meanwhile and
  // returns its status, or the error that connecting met (UNAVAILABLE).
  absl::Status Use(absl::FunctionRef<absl::Status(Connection&)> use);

 private:
  const std::string url_;
  const std::string shown_url_;
  const int max_connections_;
  const int connect_timeout_seconds_;

  absl::Mutex mu_;
  // Open and free.
  std::vector<std::unique_ptr<Connection>> idle_ ABSL_GUARDED_BY(mu_);
  // Open (or being opened), free or in use.
  int open_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hypertune::storage::postgres

#endif  // HYPERTUNE_STORAGE_POSTGRES_CONNECTION_POOL_H_
