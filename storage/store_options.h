// StoreOptions: which StudyStore OpenStore opens, and how (open_store.h);
// SqliteOptions: how a SqliteStore opens its file. Plain structs, one
// comment and default per field.
#ifndef HYPERTUNE_STORAGE_STORE_OPTIONS_H_
#define HYPERTUNE_STORAGE_STORE_OPTIONS_H_

#include <string>

namespace hypertune::storage {

struct SqliteOptions {
  // Commits survive power loss, not only a crash of the process
  // (synchronous=FULL instead of NORMAL); slower commits. Default false.
  bool durable_full = false;
  // How long a statement waits for a lock held by another connection.
  // Default 5 s.
  int busy_timeout_ms = 5000;
  // The most read connections open at once; more concurrent reads wait for
  // one to be free. Opened on demand. Default 4.
  int max_read_connections = 4;
};

struct StoreOptions {
  enum class Kind {
    // SqliteStore on `path`.
    kSqlite,
    // MemoryStore: nothing persists; `path` and `sqlite` are not read.
    kMemory,
  };
  // Default kSqlite.
  Kind kind = Kind::kSqlite;
  // kSqlite: the database file, created if absent; ":memory:" or "" for a
  // private in-memory database. A PostgreSQL URL is refused for now.
  // Default "".
  std::string path;
  // kSqlite: how the file is opened. Defaults as in SqliteOptions.
  SqliteOptions sqlite;
};

}  // namespace hypertune::storage

#endif  // HYPERTUNE_STORAGE_STORE_OPTIONS_H_
