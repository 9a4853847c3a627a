#include "service/rpc/backup_path.h"

#include <limits.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace hypertune::service {
namespace {

namespace fs = std::filesystem;

absl::Status Invalid(const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("destination_path: ", problem));
}

// SQLite's file header: the first 16 bytes of every database file.
bool IsSqliteDatabase(const fs::path& path) {
  constexpr char kMagic[] = "SQLite format 3";  // with its NUL: 16 bytes
  char header[sizeof(kMagic)] = {};
  std::ifstream in(path, std::ios::binary);
  return in.read(header, sizeof(header)) &&
         std::memcmp(header, kMagic, sizeof(kMagic)) == 0;
}

}  // namespace

absl::StatusOr<std::string> ResolveBackupPath(const std::string& backup_dir,
                                              const std::string& destination,
                                              bool overwrite) {
  if (backup_dir.empty()) {
    return absl::FailedPreconditionError(
        "destination_path: this server has no backup directory; start "
        "hypertuned with --backup-dir DIR");
  }
  std::error_code error;
  const fs::path root = fs::canonical(backup_dir, error);
  if (error || !fs::is_directory(root)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "destination_path: the backup directory '", backup_dir,
        "' is not a directory", error ? ": " + error.message() : ""));
  }
  if (destination.empty()) {
    return Invalid("empty; name the file to write in the backup directory");
  }
  if (destination.find('\0') != std::string::npos) {
    return Invalid("contains a NUL byte");
  }
  if (destination.size() > PATH_MAX) {
    return Invalid(absl::StrCat("a path of ", destination.size(),
                                " bytes, over the limit of ", PATH_MAX));
  }
  const fs::path given(destination);
  const fs::path path = given.is_absolute() ? given : root / given;
  const fs::path name = path.filename();
  if (name.empty() || name == "." || name == "..") {
    return Invalid(absl::StrCat("'", destination, "' names no file"));
  }
  if (name.native().size() > NAME_MAX) {
    return Invalid(absl::StrCat("a file name of ", name.native().size(),
                                " bytes, over the limit of ", NAME_MAX));
  }
  const fs::path folder = fs::canonical(path.parent_path(), error);
  if (error) {
    return Invalid(absl::StrCat("the folder of '", destination,
                                "' does not exist: ", error.message()));
  }
  // Outside is a path relative to the root that climbs out of it first
  // (a name that merely begins with "..", such as "..hidden", is inside).
  const fs::path inside = folder.lexically_relative(root);
  if (inside.empty() || *inside.begin() == "..") {
    return Invalid(absl::StrCat("'", destination,
                                "' is outside the backup directory '",
                                root.native(), "'"));
  }
  const fs::path target = folder / name;
  struct stat st;
  if (lstat(target.c_str(), &st) != 0) return target.native();  // new file
  if (S_ISLNK(st.st_mode)) {
    return Invalid(absl::StrCat("'", target.native(),
                                "' is a symbolic link; give a new file"));
  }
  if (S_ISDIR(st.st_mode)) {
    return Invalid(absl::StrCat("'", target.native(),
                                "' is a directory; give a file in it"));
  }
  if (!S_ISREG(st.st_mode)) {
    return Invalid(
        absl::StrCat("'", target.native(), "' is not a regular file"));
  }
  if (!overwrite) {
    return absl::AlreadyExistsError(absl::StrCat(
        "destination_path: '", target.native(),
        "' exists; set overwrite (hypertune admin backup --overwrite) to "
        "replace an earlier backup"));
  }
  if (!IsSqliteDatabase(target)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "destination_path: '", target.native(),
        "' is not an SQLite database, so no backup wrote it; refusing to "
        "replace it"));
  }
  return target.native();
}

}  // namespace hypertune::service
