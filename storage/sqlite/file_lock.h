// FileLock: an exclusive advisory lock (flock) that one SqliteStore holds
// on its database for as long as it lives, so that no second store (a
// second hypertuned, or a second open in this process) serves the same file.
//
// The lock is taken on a sidecar file, DATABASE.lock, never on the database
// itself: SQLite's own locks are POSIX record locks, which any close of the
// database file in this process would drop. The sidecar is created on first
// use and left in place (unlinking it would let a new holder lock a new
// file while an old opener still holds the unlinked one). The kernel
// releases the lock when its holder's descriptor closes, including when the
// process dies (kill -9); the descriptor is close-on-exec, so programs
// started by the holder never inherit it.
//
// Thread safety: none needed; an object is created and destroyed by one
// thread and has no other methods.
#ifndef HYPERTUNE_STORAGE_SQLITE_FILE_LOCK_H_
#define HYPERTUNE_STORAGE_SQLITE_FILE_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace hypertune::storage::sqlite {

class FileLock {
 public:
  // The sidecar that guards `database_path`.
  static std::string LockPath(const std::string& database_path);

  // Takes the exclusive lock that guards `database_path`, without waiting.
  // FAILED_PRECONDITION saying that another hypertuned holds the database
  // when someone else has it; other failures (a missing directory) name the
  // lock file and the system's reason.
  static absl::StatusOr<std::unique_ptr<FileLock>> Acquire(
      const std::string& database_path);

  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  // Releases the lock.
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}

  const int fd_;
};

}  // namespace hypertune::storage::sqlite

#endif  // HYPERTUNE_STORAGE_SQLITE_FILE_LOCK_H_
