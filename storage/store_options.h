// StoreOptions: which StudyStore OpenStore opens, and how (open_store.h);
// SqliteOptions: how a SqliteStore opens its file; PostgresOptions: how a
// PostgresStore uses its server. Plain structs, one comment and default per
// field.
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

struct PostgresOptions {
  // The most connections open at once, reads and writes together; more
  // concurrent calls wait for one to be free. Opened on demand. Default 4.
  int max_connections = 4;
  // How long opening a connection may take, unless the URL sets
  // connect_timeout itself. Default 10 s.
  int connect_timeout_seconds = 10;
};

struct StoreOptions {
  enum class Kind {
    // SqliteStore on `path`; a `path` that is a PostgreSQL URL means
    // kPostgres instead, so that one --db flag takes either.
    kSqlite,
    // MemoryStore: nothing persists; `path` and the options are not read.
    kMemory,
    // PostgresStore on the server and database that `path` names, a
    // postgresql:// or postgres:// URL.
    kPostgres,
  };
  // Default kSqlite.
  Kind kind = Kind::kSqlite;
  // kSqlite: the database file, created if absent; ":memory:" or "" for a
  // private in-memory database. kPostgres: the URL. Default "".
  std::string path;
  // kSqlite: how the file is opened. Defaults as in SqliteOptions.
  SqliteOptions sqlite;
  // kPostgres: how the server is used. Defaults as in PostgresOptions.
  PostgresOptions postgres;
};

}  // namespace hypertune::storage

#endif  // HYPERTUNE_STORAGE_STORE_OPTIONS_H_
