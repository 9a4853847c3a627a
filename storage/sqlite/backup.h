// Online backup of a SqliteStore file: a consistent copy made with SQLite's
// backup API (sqlite3_backup_init/step/finish) while writers go on.
//
// The copy is of one snapshot. The source connection holds one read
// transaction from the first page to the last; in WAL mode writers never
// wait for it (their commits go to the WAL, after the snapshot, which
// cannot be checkpointed past it meanwhile, so the WAL grows for the
// duration), and the copy never restarts, as it would if the snapshot moved
// under it. Pages are copied kBackupPagesPerStep at a time with a short
// pause between steps, so the copy takes its share of the disk and CPU, not
// all of it.
//
// The copy carries a marker table (schema.h, kBackupMarkerTable), so that a
// later backup replaces only backups, never a live database.
//
// The copy is written to a temporary file beside the destination
// (DESTINATION.tmp-XXXXXX), synced, and renamed over the destination at the
// end: the destination is its old self or a complete copy, never half of
// one. On failure the temporary file is removed. The copy is readable and
// writable by its owner only (mode 0600), whatever the live file's mode.
//
// Thread safety: none; the caller lends the source connection to one
// backup at a time.
#ifndef HYPERTUNE_STORAGE_SQLITE_BACKUP_H_
#define HYPERTUNE_STORAGE_SQLITE_BACKUP_H_

#include <chrono>
#include <string>

#include "absl/status/status.h"

namespace hypertune::storage::sqlite {

class Connection;

// Pages copied per step: 1 MiB with SQLite's default 4 KiB pages.
inline constexpr int kBackupPagesPerStep = 256;
// The pause between steps.
inline constexpr std::chrono::milliseconds kBackupPause{1};

// OK if `destination` may receive a backup of the database at `live_path`
// ("" or ":memory:" for an in-memory one): INVALID_ARGUMENT when it is empty
// or is the live file, its -wal, -shm or .lock; FAILED_PRECONDITION when it
// exists and is not a backup (schema.h's marker: another server's database,
// an Optuna one), or when DESTINATION-wal exists (a database there is open,
// or was not closed cleanly: its WAL would be applied to the copy).
absl::Status CheckBackupDestination(const std::string& live_path,
                                    const std::string& destination);

// Copies the database `source` reads (its "main" schema) to `destination`
// as described above; errors name the step and `destination`.
// REQUIRES: `source` is in no transaction; CheckBackupDestination passed.
absl::Status CopyDatabase(Connection& source, const std::string& destination);

}  // namespace hypertune::storage::sqlite

#endif  // HYPERTUNE_STORAGE_SQLITE_BACKUP_H_
