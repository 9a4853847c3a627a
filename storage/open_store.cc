#include "storage/open_store.h"

#include "storage/memory_store.h"
#include "storage/postgres/url.h"
#include "storage/postgres_store.h"
#include "storage/sqlite_store.h"

namespace hypertune::storage {

absl::StatusOr<std::unique_ptr<StudyStore>> OpenStore(
    const StoreOptions& options) {
  if (options.kind == StoreOptions::Kind::kMemory) {
    return std::make_unique<MemoryStore>();
  }
  if (options.kind == StoreOptions::Kind::kPostgres ||
      postgres::IsPostgresUrl(options.path)) {
    absl::StatusOr<std::unique_ptr<PostgresStore>> store =
        PostgresStore::Open(options.path, options.postgres);
    if (!store.ok()) return store.status();
    return std::unique_ptr<StudyStore>(*std::move(store));
  }
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(options.path, options.sqlite);
  if (!store.ok()) return store.status();
  return std::unique_ptr<StudyStore>(*std::move(store));
}

bool IsServerLocation(std::string_view location) {
  return postgres::IsPostgresUrl(location);
}

std::string DisplayLocation(std::string_view location) {
  return postgres::IsPostgresUrl(location) ? postgres::RedactUrl(location)
                                           : std::string(location);
}

}  // namespace hypertune::storage
