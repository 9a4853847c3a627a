// The schema of a PostgresStore database and its forward migrations.
//
// The database records each schema version applied to it (table
// schema_version). Migrate brings an older database up to kSchemaVersion in
// one transaction (PostgreSQL's schema changes are transactional), so a
// database is never left half-migrated; one written by a newer build is
// refused. Several servers may open one database at once: an advisory lock
// makes their migrations take turns, so each step runs once. Migrations are
// only ever appended: a released step never changes.
//
// Thread safety: Migrate uses the connection it is given, which has one
// user at a time (connection.h).
#ifndef HYPERTUNE_STORAGE_POSTGRES_SCHEMA_H_
#define HYPERTUNE_STORAGE_POSTGRES_SCHEMA_H_

#include "absl/status/status.h"

namespace hypertune::storage::postgres {

class Connection;

// The schema version this build writes.
inline constexpr int kSchemaVersion = 3;

// Applies the migrations that the database lacks, in order, each once.
// FAILED_PRECONDITION if its schema is newer than kSchemaVersion; other
// failures name the step and the server's message.
absl::Status Migrate(Connection& db);

// Migrate, stopping at version `target` (<= kSchemaVersion): for tests
// that need a database as an older build left it.
absl::Status MigrateTo(Connection& db, int target);

}  // namespace hypertune::storage::postgres

#endif  // HYPERTUNE_STORAGE_POSTGRES_SCHEMA_H_
