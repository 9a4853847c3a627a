#include "storage/sqlite/backup.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>
#include <system_error>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "storage/sqlite/connection.h"
#include "storage/sqlite/file_lock.h"
#include "storage/sqlite/schema.h"

namespace hypertune::storage::sqlite {
namespace {

namespace fs = std::filesystem;

// How many steps in a row may find the source or the copy busy before the
// backup gives up (the snapshot is held, so this is rare: WAL recovery).
constexpr int kMaxBusySteps = 1000;

absl::Status ErrnoError(int error, const std::string& what) {
  const absl::StatusCode code =
      error == ENOENT || error == ENOTDIR ? absl::StatusCode::kNotFound
      : error == EACCES || error == EROFS ? absl::StatusCode::kPermissionDenied
      : error == ENOSPC                   ? absl::StatusCode::kResourceExhausted
                                          : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(what, ": ", std::strerror(error)));
}

// fsync()s the file or directory at `path`.
absl::Status Sync(const std::string& path, const std::string& what) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, what);
  const int rc = fsync(fd);
  const int error = errno;
  close(fd);
  if (rc != 0) return ErrnoError(error, what);
  return absl::OkStatus();
}

// Removes the temporary copy (and a journal SQLite may have left beside
// it) unless released.
class TemporaryFile {
 public:
  explicit TemporaryFile(std::string path) : path_(std::move(path)) {}
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (!released_) {
      unlink(path_.c_str());
      unlink((path_ + "-journal").c_str());
    }
  }
  const std::string& path() const { return path_; }
  void Release() { released_ = true; }

 private:
  const std::string path_;
  bool released_ = false;
};

// Copies every page of `source` into `destination`, in steps.
absl::Status CopyPages(Connection& source, Connection& destination,
                       const std::string& what) {
  sqlite3_backup* backup =
      sqlite3_backup_init(destination.db(), "main", source.db(), "main");
  if (backup == nullptr) {
    return SqliteError(destination.db(), sqlite3_errcode(destination.db()),
                       absl::StrCat(what, ": starting"));
  }
  int rc;
  int busy_steps = 0;
  while (true) {
    rc = sqlite3_backup_step(backup, kBackupPagesPerStep);
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
      if (++busy_steps > kMaxBusySteps) break;
    } else if (rc == SQLITE_OK) {
      busy_steps = 0;
    } else {
      break;  // SQLITE_DONE, or an error.
    }
    // Lets the writer and the readers have the disk and the CPU.
    std::this_thread::sleep_for(kBackupPause);
  }
  // Finishing releases the copy's locks; its result repeats the step's.
  const int finish_rc = sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) {
    return SqliteError(destination.db(), rc,
                       absl::StrCat(what, ": copying pages"));
  }
  if (finish_rc != SQLITE_OK) {
    return SqliteError(destination.db(), finish_rc,
                       absl::StrCat(what, ": finishing"));
  }
  return absl::OkStatus();
}

constexpr const char* kMarkBackup[] = {
    "CREATE TABLE hypertune_backup(made_time_ms INTEGER NOT NULL)",
    "INSERT INTO hypertune_backup VALUES "
    "(CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))"};
static_assert(std::string_view(kBackupMarkerTable) == "hypertune_backup");

// Whether the SQLite file at `path` carries the backup marker; not an
// SQLite database at all is false. Read as immutable: no lock taken, and no
// -wal or -shm file left beside it. REQUIRES: no PATH-wal exists.
absl::StatusOr<bool> IsBackup(const std::string& path) {
  std::string uri = "file:";
  for (char c : fs::absolute(path).string()) {
    if (c == '%' || c == '?' || c == '#') {
      absl::StrAppend(
          &uri, "%", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    } else {
      uri.push_back(c);
    }
  }
  uri += "?immutable=1";
  absl::StatusOr<std::unique_ptr<Connection>> file = Connection::Open(
      uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, /*busy_timeout_ms=*/0,
      absl::StrCat("opening '", path, "' to see whether it is a backup"));
  if (!file.ok()) return false;
  absl::StatusOr<std::string> marked = (*file)->RunOnce(
      "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = "
      "'hypertune_backup'",
      absl::StrCat("reading '", path, "'"));
  if (!marked.ok()) return false;  // not a database, or not readable as one
  return *marked == "1";
}

}  // namespace

absl::Status CheckBackupDestination(const std::string& live_path,
                                    const std::string& destination) {
  if (destination.empty()) {
    return absl::InvalidArgumentError("backup destination: empty path");
  }
  if (!(live_path.empty() || live_path == ":memory:")) {
    for (const std::string& live :
         {live_path, live_path + "-wal", live_path + "-shm",
          FileLock::LockPath(live_path)}) {
      std::error_code error;
      // False, with `error` set, when either does not exist.
      if (fs::equivalent(destination, live, error)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "backup destination '", destination, "' is the live database ",
            live == live_path ? "itself" : absl::StrCat("file '", live, "'"),
            ": give the path of a new file"));
      }
    }
  }
  std::error_code error;
  if (fs::exists(destination + "-wal", error)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "backup destination '", destination, "' has a write-ahead log ('",
        destination,
        "-wal'): a database there is open or was not closed cleanly; give "
        "another path"));
  }
  if (fs::exists(destination, error)) {
    absl::StatusOr<bool> backup = IsBackup(destination);
    if (!backup.ok()) return backup.status();
    if (!*backup) {
      return absl::FailedPreconditionError(absl::StrCat(
          "backup destination '", destination,
          "' is not a hypertune backup (no backup wrote it: another server's "
          "database, or another program's); refusing to replace it"));
    }
  }
  return absl::OkStatus();
}

absl::Status CopyDatabase(Connection& source, const std::string& destination) {
  const std::string what = absl::StrCat("backing up to '", destination, "'");

  // The snapshot: one read transaction, begun by its first read.
  Transaction snapshot(source);
  if (absl::Status s = snapshot.Begin(kBeginRead, what); !s.ok()) return s;
  if (absl::StatusOr<std::string> tables = source.RunOnce(
          "SELECT count(*) FROM sqlite_master", absl::StrCat(what, ": read"));
      !tables.ok()) {
    return tables.status();
  }

  std::string temporary_path = absl::StrCat(destination, ".tmp-XXXXXX");
  const int fd = mkstemp(temporary_path.data());
  if (fd < 0) {
    return ErrnoError(errno,
                      absl::StrCat(what, ": creating '", temporary_path, "'"));
  }
  close(fd);
  TemporaryFile temporary(temporary_path);
  {
    absl::StatusOr<std::unique_ptr<Connection>> copy = Connection::Open(
        temporary.path(), SQLITE_OPEN_READWRITE, /*busy_timeout_ms=*/0,
        absl::StrCat(what, ": opening '", temporary.path(), "'"));
    if (!copy.ok()) return copy.status();
    if (absl::Status s = CopyPages(source, **copy, what); !s.ok()) return s;
    for (const char* sql : kMarkBackup) {
      if (absl::StatusOr<std::string> marked =
              (*copy)->RunOnce(sql, absl::StrCat(what, ": marking the copy"));
          !marked.ok()) {
        return marked.status();
      }
    }
  }  // Closed: the copy is committed (and synced: synchronous=FULL).
  if (absl::Status s = snapshot.Commit(what); !s.ok()) return s;

  if (absl::Status s =
          Sync(temporary.path(),
               absl::StrCat(what, ": syncing '", temporary.path(), "'"));
      !s.ok()) {
    return s;
  }
  if (std::rename(temporary.path().c_str(), destination.c_str()) != 0) {
    return ErrnoError(
        errno, absl::StrCat(what, ": renaming '", temporary.path(), "' to it"));
  }
  temporary.Release();
  // The rename itself survives a crash once its directory is synced.
  const fs::path parent = fs::path(destination).parent_path();
  const std::string directory = parent.empty() ? "." : parent.string();
  return Sync(directory,
              absl::StrCat(what, ": syncing directory '", directory, "'"));
}

}  // namespace hypertune::storage::sqlite
