// Where Backup may write: inside the operator's backup directory
// (hypertuned --backup-dir), never over what is not an earlier backup.
// A caller that names a path only says where in that directory.
//
// Pure functions over the file system; thread-safe.
#ifndef HYPERTUNE_SERVICE_RPC_BACKUP_PATH_H_
#define HYPERTUNE_SERVICE_RPC_BACKUP_PATH_H_

#include <string>

#include "absl/status/statusor.h"

namespace hypertune::service {

// The absolute path that `destination` (relative: to `backup_dir`) names,
// with symbolic links and ".." resolved in its folder. Errors name
// destination_path:
// - FAILED_PRECONDITION: `backup_dir` is empty or not a directory.
// - INVALID_ARGUMENT: the path lies outside `backup_dir`, its folder does
//   not exist, or it names a directory, a symbolic link or anything but a
//   regular file.
// - ALREADY_EXISTS: a file is there and `overwrite` is false.
// - FAILED_PRECONDITION: `overwrite`, but the file there is not an SQLite
//   database (so no backup wrote it).
absl::StatusOr<std::string> ResolveBackupPath(const std::string& backup_dir,
                                              const std::string& destination,
                                              bool overwrite);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_BACKUP_PATH_H_
