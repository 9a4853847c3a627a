// The schema of a SqliteStore file and its forward migrations.
//
// A file records each schema version applied to it (table schema_version).
// Migrate brings an older file up to kSchemaVersion in one transaction, so a
// file is never left half-migrated; a file written by a newer build is
// refused. Migrations are only ever appended: a released step never changes.
//
// Thread safety: Migrate uses the connection it is given, which has one user
// at a time (connection.h).
#ifndef HYPERTUNE_STORAGE_SQLITE_SCHEMA_H_
#define HYPERTUNE_STORAGE_SQLITE_SCHEMA_H_

#include "absl/status/status.h"
#include "storage/sqlite/connection.h"

namespace hypertune::storage::sqlite {

// The schema version this build writes.
inline constexpr int kSchemaVersion = 6;

// The table that marks a file as a backup (backup.h): a backup may replace
// only a file that has it. Created in each copy; dropped when a file is
// opened to be served.
inline constexpr char kBackupMarkerTable[] = "hypertune_backup";

// Applies the migrations that `db`'s file lacks, in order, each once, and
// drops the backup marker. FAILED_PRECONDITION if the file's schema is
// newer than kSchemaVersion; other failures name the step and SQLite's
// message.
absl::Status Migrate(Connection& db);

}  // namespace hypertune::storage::sqlite

#endif  // HYPERTUNE_STORAGE_SQLITE_SCHEMA_H_
