#include "storage/postgres/connection_pool.h"

#include <cassert>
#include <utility>

namespace hypertune::storage::postgres {

ConnectionPool::ConnectionPool(std::string url, std::string shown_url,
                               const PostgresOptions& options)
    : url_(std::move(url)),
      shown_url_(std::move(shown_url)),
      max_connections_(options.max_connections),
      connect_timeout_seconds_(options.connect_timeout_seconds) {
  assert(max_connections_ >= 1);
}

absl::Status ConnectionPool::Use(
    absl::FunctionRef<absl::Status(Connection&)> use) {
  std::unique_ptr<Connection> connection;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](ConnectionPool* pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool->mu_) {
          return !pool->idle_.empty() || pool->open_ < pool->max_connections_;
        },
        this));
    if (!idle_.empty()) {
      connection = std::move(idle_.back());
      idle_.pop_back();
    } else {
      ++open_;  // Counted while it opens, so that no more than the most do.
    }
  }
  if (connection == nullptr) {
    // Opened outside the lock: connecting may take up to the timeout.
    absl::StatusOr<std::unique_ptr<Connection>> opened =
        Connection::Open(url_, shown_url_, connect_timeout_seconds_);
    if (!opened.ok()) {
      absl::MutexLock lock(&mu_);
      --open_;
      return opened.status();
    }
    connection = *std::move(opened);
  }
  absl::Status status = use(*connection);
  absl::MutexLock lock(&mu_);
  if (connection->Reusable()) {
    idle_.push_back(std::move(connection));
  } else {
    --open_;
    connection.reset();  // Closed under the lock: quick, it sends nothing.
  }
  return status;
}

}  // namespace hypertune::storage::postgres
