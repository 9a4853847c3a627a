// The end of a trial's log file (the `log_path` that `hypertune worker`
// records), served only from the log root the server was given
// (`hypertuned --log-root DIR`): never a file outside it, however the path
// is spelled (`..`, symlinks out of the root, absolute paths elsewhere).
//
// The check is made on the file actually opened (its /proc/self/fd link),
// so a symlink swapped in between the check and the open cannot lead out.
//
// Thread-safe: LogRoot is immutable; ReadLogTail reads the file system only.
#ifndef HYPERTUNE_SERVICE_HTTP_LOG_TAIL_H_
#define HYPERTUNE_SERVICE_HTTP_LOG_TAIL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace hypertune::service {

// At most this much of a log's end is served. 64 KiB.
inline constexpr int64_t kMaxLogTailBytes = 64 << 10;

struct LogTail {
  // The file read, symlinks resolved.
  std::string path;
  // Its size, and where the text served begins.
  int64_t size = 0;
  int64_t offset = 0;
  // Bytes [offset, size), as valid UTF-8 (invalid bytes replaced by U+FFFD,
  // a character cut at `offset` dropped).
  std::string text;
};

// The resolved form of a log root directory: FAILED_PRECONDITION when
// `dir` is not an existing directory.
absl::StatusOr<std::string> ResolveLogRoot(const std::string& dir);

// The last `max_bytes` (1 to kMaxLogTailBytes) of `path` if it is an
// absolute path of a regular file inside `resolved_root` (ResolveLogRoot's
// answer) once symlinks are resolved. NOT_FOUND when `resolved_root` is
// empty (no log serving) or the file does not exist; PERMISSION_DENIED when
// it lies outside the root or is not a regular file; INVALID_ARGUMENT for a
// relative path.
absl::StatusOr<LogTail> ReadLogTail(const std::string& resolved_root,
                                    const std::string& path, int64_t max_bytes);

// `bytes` with every invalid UTF-8 sequence replaced by U+FFFD.
std::string ValidUtf8(const std::string& bytes);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_HTTP_LOG_TAIL_H_
