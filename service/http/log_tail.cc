#include "service/http/log_tail.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace hypertune::service {
namespace {

// realpath(3), or its errno.
absl::StatusOr<std::string> RealPath(const std::string& path) {
  std::unique_ptr<char, decltype(&free)> resolved(
      realpath(path.c_str(), nullptr), &free);
  if (resolved == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot resolve ", path));
  }
  return std::string(resolved.get());
}

bool Inside(const std::string& root, const std::string& path) {
  return root == "/" ? absl::StartsWith(path, "/")
                     : absl::StartsWith(path, absl::StrCat(root, "/"));
}

absl::Status Outside(const std::string& path) {
  return absl::PermissionDeniedError(absl::StrCat(
      "log path \"", path, "\" is outside the server's log root (--log-root)"));
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

absl::StatusOr<std::string> ResolveLogRoot(const std::string& dir) {
  absl::StatusOr<std::string> root = RealPath(dir);
  struct stat st;
  if (!root.ok() || stat(root->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--log-root: \"", dir, "\" is not a directory"));
  }
  return root;
}

absl::StatusOr<LogTail> ReadLogTail(const std::string& resolved_root,
                                    const std::string& path,
                                    int64_t max_bytes) {
  if (resolved_root.empty()) {
    return absl::NotFoundError(
        "this server serves no logs: start hypertuned with --log-root DIR "
        "(the folder the workers write their logs into)");
  }
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("log path \"", path, "\" is not absolute"));
  }
  // Resolved first, so that nothing outside the root is even opened.
  absl::StatusOr<std::string> resolved = RealPath(path);
  if (!resolved.ok()) {
    // Missing only if it would be inside: no answer tells whether a file
    // outside the root exists.
    const std::string lexical =
        std::filesystem::path(path).lexically_normal().string();
    if (absl::IsNotFound(resolved.status()) && Inside(resolved_root, lexical)) {
      return absl::NotFoundError(
          absl::StrCat("log file \"", path, "\" does not exist"));
    }
    return Outside(path);
  }
  if (!Inside(resolved_root, *resolved)) return Outside(path);
  // O_NONBLOCK: a FIFO (refused below) must not block the open.
  Fd fd(open(resolved->c_str(),
             O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("log file \"", path, "\" does not exist"));
    }
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open log file \"", path, "\": ", strerror(errno)));
  }
  // What was opened, in case the path changed since it was resolved.
  char opened[PATH_MAX + 1];
  const ssize_t length = readlink(
      absl::StrCat("/proc/self/fd/", fd.get()).c_str(), opened, PATH_MAX);
  if (length <= 0 || !Inside(resolved_root, std::string(opened, length))) {
    return Outside(path);
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::PermissionDeniedError(
        absl::StrCat("log path \"", path, "\" is not a regular file"));
  }
  LogTail tail;
  tail.path = std::string(opened, length);
  tail.size = st.st_size;
  tail.offset = std::max<int64_t>(
      0, tail.size - std::clamp<int64_t>(max_bytes, 1, kMaxLogTailBytes));
  std::string bytes(static_cast<size_t>(tail.size - tail.offset), '\0');
  size_t read_total = 0;
  while (read_total < bytes.size()) {
    const ssize_t n =
        pread(fd.get(), bytes.data() + read_total, bytes.size() - read_total,
              tail.offset + static_cast<off_t>(read_total));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("cannot read log file \"", path, "\""));
    }
    if (n == 0) break;  // shrank meanwhile
    read_total += static_cast<size_t>(n);
  }
  bytes.resize(read_total);
  // A character cut by the offset: its continuation bytes are dropped.
  size_t start = 0;
  if (tail.offset > 0) {
    while (start < bytes.size() && start < 3 &&
           (static_cast<unsigned char>(bytes[start]) & 0xC0) == 0x80) {
      ++start;
    }
  }
  tail.offset += static_cast<int64_t>(start);
  tail.text = ValidUtf8(bytes.substr(start));
  return tail;
}

std::string ValidUtf8(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    size_t length = 0;
    uint32_t min = 0;
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      length = 2;
      min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3;
      min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4;
      min = 0x10000;
    }
    bool valid = length > 0 && i + length <= n;
    uint32_t code = valid ? c & (0x7F >> length) : 0;
    for (size_t k = 1; valid && k < length; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) {
        valid = false;
      } else {
        code = (code << 6) | (s[i + k] & 0x3F);
      }
    }
    // Overlong forms, surrogates and code points past U+10FFFF are invalid.
    if (valid &&
        (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))) {
      valid = false;
    }
    if (valid) {
      out.append(bytes, i, length);
      i += length;
    } else {
      out.append("\xEF\xBF\xBD");
      ++i;
    }
  }
  return out;
}

}  // namespace hypertune::service
