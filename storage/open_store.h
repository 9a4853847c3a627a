// OpenStore: the StudyStore that StoreOptions name, so that callers (the
// server, tools, tests of the service) need not name an implementation or
// include its header.
//
// kSqlite opens a SqliteStore on options.path (a file, or ":memory:" for a
// private in-memory SQLite database); a PostgreSQL URL (postgresql://,
// postgres://) is refused with INVALID_ARGUMENT until a PostgreSQL store
// exists. kMemory makes an empty MemoryStore.
//
// Thread safety: OpenStore may be called from any thread; the store it
// returns is thread-safe (study_store.h).
#ifndef HYPERTUNE_STORAGE_OPEN_STORE_H_
#define HYPERTUNE_STORAGE_OPEN_STORE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "storage/store_options.h"
#include "storage/study_store.h"

namespace hypertune::storage {

// Opens (creating if absent) the store that `options` name. INVALID_ARGUMENT
// for a location this build cannot serve; otherwise the implementation's
// own errors (SqliteStore::Open: among them FAILED_PRECONDITION when another
// hypertuned holds the file).
absl::StatusOr<std::unique_ptr<StudyStore>> OpenStore(
    const StoreOptions& options);

}  // namespace hypertune::storage

#endif  // HYPERTUNE_STORAGE_OPEN_STORE_H_
