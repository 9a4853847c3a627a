// The SQLite layer under SqliteStore: one connection with its cached
// prepared statements (Connection), one execution of such a statement
// (Query), a scoped transaction (Transaction), and the mapping of SQLite
// result codes to absl::Status (SqliteError).
//
// Statement texts are fixed; values only ever arrive as bindings, so names
// of any bytes round-trip verbatim. Every error names what was being done
// and carries SQLite's own message.
//
// Thread safety: none. A connection has one user at a time (the committer,
// or the read that borrowed it); GroupCommitWriter and ReadPool see to it.
#ifndef HYPERTUNE_STORAGE_SQLITE_CONNECTION_H_
#define HYPERTUNE_STORAGE_SQLITE_CONNECTION_H_

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hypertune::storage::sqlite {

// Transaction control, each cached like any other statement.
inline constexpr char kBegin[] = "BEGIN IMMEDIATE";
inline constexpr char kBeginRead[] = "BEGIN DEFERRED";
inline constexpr char kCommit[] = "COMMIT";
inline constexpr char kRollback[] = "ROLLBACK";

// The status for SQLite result `rc` while doing `what`, with the
// connection's message (when it adds to the generic one). `db` may be null.
absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what);

// Borrows a cached statement for one execution: binds values, steps it,
// reads columns, and on destruction resets it and clears its bindings so
// the next use starts clean (unbound parameters are NULL). `what` names the
// operation in errors.
class Query {
 public:
  Query(sqlite3* db, sqlite3_stmt* statement, absl::string_view what)
      : db_(db), statement_(statement), what_(what) {}
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;
  ~Query() {
    sqlite3_reset(statement_);
    sqlite3_clear_bindings(statement_);
  }

  Query& BindInt(int index, int64_t value) {
    if (bind_rc_ == SQLITE_OK) {
      bind_rc_ = sqlite3_bind_int64(statement_, index, value);
    }
    return *this;
  }

  // Binds `bytes` as a blob with its exact length: an empty value is a
  // zero-length blob, never NULL. SQLite copies the bytes.
  Query& BindBytes(int index, std::string_view bytes) {
    static constexpr char kEmpty[] = "";
    if (bind_rc_ == SQLITE_OK) {
      bind_rc_ = sqlite3_bind_blob64(statement_, index,
                                     bytes.empty() ? kEmpty : bytes.data(),
                                     bytes.size(), SQLITE_TRANSIENT);
    }
    return *this;
  }

  // Advances to the next row: true with a row, false when done.
  absl::StatusOr<bool> Step();

  // Runs the statement to completion, ignoring any rows.
  absl::Status Run();

  // Steps through every row, calling `on_row` at each (it reads the columns
  // of this Query); stops at the first error, its own or the step's.
  absl::Status ForEachRow(absl::FunctionRef<absl::Status()> on_row);

  // The result code of the failed step, SQLITE_OK if none failed.
  int last_rc() const { return last_rc_; }

  int64_t Int(int column) const {
    return sqlite3_column_int64(statement_, column);
  }

  // Valid until the next Step or the end of this Query.
  std::string_view Bytes(int column) const {
    const void* data = sqlite3_column_blob(statement_, column);
    const int size = sqlite3_column_bytes(statement_, column);
    if (data == nullptr) return {};
    return std::string_view(static_cast<const char*>(data), size);
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* statement_;
  std::string what_;
  int bind_rc_ = SQLITE_OK;
  int last_rc_ = SQLITE_OK;
};

// One SQLite connection and its cached statements.
class Connection {
 public:
  // Opens `path` with SQLite `flags` (SQLITE_OPEN_*), extended result codes
  // on and a busy timeout of `busy_timeout_ms`; errors start with `context`.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const std::string& path, int flags, int busy_timeout_ms,
      absl::string_view context);

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  sqlite3* db() const { return db_; }

  // Returns the cached statement for `sql`, preparing it on first use.
  // REQUIRES: `sql` is fixed text, never built from values.
  absl::StatusOr<sqlite3_stmt*> Prepared(absl::string_view sql);

  // Runs the cached statement `sql`, which takes no values (BEGIN, COMMIT,
  // SAVEPOINT...). `what` names the step in errors.
  absl::Status Execute(const char* sql, absl::string_view what);

  // Prepares, runs to completion and finalizes one statement without
  // caching it (pragmas, migrations); returns the first row's first column
  // as text ("" without rows). `what` names the step in errors.
  // REQUIRES: `sql` is fixed text.
  absl::StatusOr<std::string> RunOnce(const char* sql, absl::string_view what);

  // Whether no transaction is open (SQLite's autocommit mode). Some errors
  // (SQLITE_FULL, IOERR) end the transaction on their own.
  bool InAutocommit() const { return sqlite3_get_autocommit(db_) != 0; }

  // The rows the last INSERT, UPDATE or DELETE changed.
  int Changes() const { return sqlite3_changes(db_); }

 private:
  struct StatementDeleter {
    void operator()(sqlite3_stmt* statement) const {
      sqlite3_finalize(statement);
    }
  };
  using StatementPtr = std::unique_ptr<sqlite3_stmt, StatementDeleter>;

  explicit Connection(sqlite3* db) : db_(db) {}

  sqlite3* const db_;
  // By SQL text.
  absl::flat_hash_map<std::string, StatementPtr> statements_;
};

// A transaction on one connection, rolled back when it goes out of scope
// uncommitted.
class Transaction {
 public:
  explicit Transaction(Connection& connection) : connection_(connection) {}
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  // `begin` is kBegin (writes) or kBeginRead (a consistent read).
  absl::Status Begin(const char* begin, absl::string_view what);
  absl::Status Commit(absl::string_view what);

 private:
  Connection& connection_;
  bool open_ = false;
};

// Sets the pragmas of the connection that writes: journal_mode=WAL (kept
// in the file; FAILED_PRECONDITION where it is refused, as on a network
// file system, except that an in-memory database (`in_memory`) keeps its
// "memory" journal), synchronous=NORMAL or, with `durable_full`, FULL, and
// foreign keys on (FAILED_PRECONDITION if this SQLite does not enforce
// them). The first read of the file: a non-database fails here.
absl::Status ConfigureWriter(Connection& db, bool durable_full, bool in_memory);

}  // namespace hypertune::storage::sqlite

#endif  // HYPERTUNE_STORAGE_SQLITE_CONNECTION_H_
