// OpenStore: the StudyStore that StoreOptions name, so that callers (the
// server, tools, tests of the service) need not name an implementation or
// include its header.
//
// kSqlite opens a SqliteStore on options.path (a file, or ":memory:" for a
// private in-memory SQLite database), unless options.path is a PostgreSQL
// URL (postgresql://, postgres://): that, like kPostgres, opens a
// PostgresStore on the database it names. kMemory makes an empty
// MemoryStore.
//
// Thread safety: OpenStore may be called from any thread; the store it
// returns is thread-safe (study_store.h).
#ifndef HYPERTUNE_STORAGE_OPEN_STORE_H_
#define HYPERTUNE_STORAGE_OPEN_STORE_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "storage/store_options.h"
#include "storage/study_store.h"

namespace hypertune::storage {

// Opens (creating a SQLite file if absent) the store that `options` name,
// with the implementation's own errors: SqliteStore::Open's (among them
// FAILED_PRECONDITION when another hypertuned holds the file) or
// PostgresStore::Open's (among them UNAVAILABLE when the server cannot be
// reached; a URL is shown without its password).
absl::StatusOr<std::unique_ptr<StudyStore>> OpenStore(
    const StoreOptions& options);

// Whether `location` (a --db value) names a database server (a PostgreSQL
// URL) rather than a file.
bool IsServerLocation(std::string_view location);

// `location` as it may be shown in logs and messages: a URL's password
// hidden.
std::string DisplayLocation(std::string_view location);

}  // namespace hypertune::storage

#endif  // HYPERTUNE_STORAGE_OPEN_STORE_H_
