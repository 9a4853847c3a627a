#include "storage/sqlite/read_pool.h"

#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "storage/sqlite/connection.h"

namespace hypertune::storage::sqlite {

ReadPool::ReadPool(std::string path, int max_connections, int busy_timeout_ms)
    : path_(std::move(path)),
      max_connections_(max_connections),
      busy_timeout_ms_(busy_timeout_ms) {}

ReadPool::~ReadPool() {
  absl::MutexLock lock(&mu_);
  idle_.clear();
}

absl::Status ReadPool::Read(absl::FunctionRef<absl::Status(Connection&)> read) {
  std::unique_ptr<Connection> connection;
  {
    absl::MutexLock lock(&mu_);
    while (idle_.empty() && open_ >= max_connections_) freed_.Wait(&mu_);
    if (idle_.empty()) {
      ++open_;  // Opened below, outside the lock.
    } else {
      connection = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (connection == nullptr) {
    absl::StatusOr<std::unique_ptr<Connection>> opened = Connection::Open(
        path_, SQLITE_OPEN_READONLY, busy_timeout_ms_,
        absl::StrCat("opening a read connection to SQLite database '", path_,
                     "'"));
    if (!opened.ok()) {
      absl::MutexLock lock(&mu_);
      --open_;
      freed_.Signal();
      return opened.status();
    }
    connection = *std::move(opened);
  }
  absl::Status status = read(*connection);
  absl::MutexLock lock(&mu_);
  // Most recently used first: its statements are warm.
  idle_.push_back(std::move(connection));
  freed_.Signal();
  return status;
}

}  // namespace hypertune::storage::sqlite
