#include "storage/sqlite/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace hypertune::storage::sqlite {

std::string FileLock::LockPath(const std::string& database_path) {
  return absl::StrCat(database_path, ".lock");
}

absl::StatusOr<std::unique_ptr<FileLock>> FileLock::Acquire(
    const std::string& database_path) {
  const std::string lock_path = LockPath(database_path);
  int fd;
  do {
    fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int error = errno;
    return absl::Status(error == ENOENT || error == ENOTDIR
                            ? absl::StatusCode::kNotFound
                        : error == EACCES || error == EROFS
                            ? absl::StatusCode::kPermissionDenied
                            : absl::StatusCode::kInternal,
                        absl::StrCat("unable to open lock file '", lock_path,
                                     "': ", std::strerror(error)));
  }
  // A second open file description, in this process or another, conflicts
  // with ours: flock locks belong to the description, not the process.
  int rc;
  do {
    rc = flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int error = errno;
    close(fd);
    if (error == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "SQLite database '", database_path,
          "' is in use: another hypertuned holds it (an exclusive lock on '",
          lock_path, "'); one server per database file"));
    }
    return absl::InternalError(
        absl::StrCat("locking '", lock_path, "': ", std::strerror(error)));
  }
  return std::unique_ptr<FileLock>(new FileLock(fd));
}

FileLock::~FileLock() { close(fd_); }

}  // namespace hypertune::storage::sqlite
