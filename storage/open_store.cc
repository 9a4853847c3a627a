#include "storage/open_store.h"

#include "absl/strings/match.h"
#include "storage/memory_store.h"
#include "storage/sqlite_store.h"

namespace hypertune::storage {

absl::StatusOr<std::unique_ptr<StudyStore>> OpenStore(
    const StoreOptions& options) {
  if (options.kind == StoreOptions::Kind::kMemory) {
    return std::make_unique<MemoryStore>();
  }
  // URL schemes ignore case. The location is not repeated in the message:
  // a URL may carry a password.
  if (absl::StartsWithIgnoreCase(options.path, "postgresql://") ||
      absl::StartsWithIgnoreCase(options.path, "postgres://")) {
    return absl::InvalidArgumentError(
        "postgresql:// is not supported by this build yet; give the path of "
        "a SQLite file, or \":memory:\"");
  }
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(options.path, options.sqlite);
  if (!store.ok()) return store.status();
  return std::unique_ptr<StudyStore>(*std::move(store));
}

}  // namespace hypertune::storage
