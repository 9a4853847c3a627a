#include "storage/sqlite/connection.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hypertune::storage::sqlite {

namespace {

absl::StatusCode CodeFor(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kUnavailable;
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_CORRUPT:
      return absl::StatusCode::kDataLoss;
    case SQLITE_NOTADB:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what) {
  const char* generic = sqlite3_errstr(rc);
  const char* specific = db != nullptr ? sqlite3_errmsg(db) : generic;
  std::string message =
      std::strcmp(specific, generic) == 0
          ? absl::StrCat(what, ": ", generic)
          : absl::StrCat(what, ": ", specific, " (", generic, ")");
  return absl::Status(CodeFor(rc), message);
}

// ----- Query -----

absl::StatusOr<bool> Query::Step() {
  if (bind_rc_ != SQLITE_OK) return SqliteError(db_, bind_rc_, what_);
  const int rc = sqlite3_step(statement_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  last_rc_ = rc;
  return SqliteError(db_, rc, what_);
}

absl::Status Query::Run() {
  return ForEachRow([] { return absl::OkStatus(); });
}

absl::Status Query::ForEachRow(absl::FunctionRef<absl::Status()> on_row) {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
    if (absl::Status s = on_row(); !s.ok()) return s;
  }
}

// ----- Connection -----

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(
    const std::string& path, int flags, int busy_timeout_ms,
    absl::string_view context) {
  sqlite3* db = nullptr;
  // NOMUTEX: a connection has one user at a time.
  const int rc =
      sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = SqliteError(db, rc, context);
    sqlite3_close_v2(db);  // Allocated even on most failures.
    return status;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, busy_timeout_ms);
  return std::unique_ptr<Connection>(new Connection(db));
}

Connection::~Connection() {
  statements_.clear();  // Finalized before the connection closes.
  sqlite3_close_v2(db_);
}

absl::StatusOr<sqlite3_stmt*> Connection::Prepared(absl::string_view sql) {
  auto it = statements_.find(sql);
  if (it != statements_.end()) return it->second.get();
  sqlite3_stmt* raw = nullptr;
  const int rc =
      sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                         SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  StatementPtr statement(raw);
  if (rc != SQLITE_OK) {
    return SqliteError(db_, rc, absl::StrCat("preparing \"", sql, "\""));
  }
  sqlite3_stmt* result = statement.get();
  statements_.emplace(std::string(sql), std::move(statement));
  return result;
}

absl::Status Connection::Execute(const char* sql, absl::string_view what) {
  absl::StatusOr<sqlite3_stmt*> statement = Prepared(sql);
  if (!statement.ok()) return statement.status();
  return Query(db_, *statement, what).Run();
}

absl::StatusOr<std::string> Connection::RunOnce(const char* sql,
                                                absl::string_view what) {
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql, -1, &raw, nullptr);
  StatementPtr statement(raw);
  if (rc != SQLITE_OK) return SqliteError(db_, rc, what);
  std::string first;
  bool first_row = true;
  Query query(db_, statement.get(), what);
  absl::Status status = query.ForEachRow([&] {
    if (first_row) {
      const unsigned char* text = sqlite3_column_text(statement.get(), 0);
      if (text != nullptr) first = reinterpret_cast<const char*>(text);
      first_row = false;
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return first;
}

// ----- Transaction -----

Transaction::~Transaction() {
  // Some errors (SQLITE_FULL, IOERR) already rolled back: then SQLite is in
  // autocommit mode again and there is nothing to undo.
  if (!open_ || connection_.InAutocommit()) return;
  connection_.Execute(kRollback, "rolling back").IgnoreError();
}

absl::Status Transaction::Begin(const char* begin, absl::string_view what) {
  absl::Status status =
      connection_.Execute(begin, absl::StrCat(what, ": begin"));
  open_ = status.ok();
  return status;
}

absl::Status Transaction::Commit(absl::string_view what) {
  absl::Status status =
      connection_.Execute(kCommit, absl::StrCat(what, ": commit"));
  if (status.ok()) open_ = false;
  return status;
}

// ----- Pragmas -----

absl::Status ConfigureWriter(Connection& db, bool durable_full,
                             bool in_memory) {
  absl::StatusOr<std::string> mode =
      db.RunOnce("PRAGMA journal_mode=WAL", "setting journal_mode=WAL");
  if (!mode.ok()) return mode.status();
  if (*mode != "wal" && !(in_memory && *mode == "memory")) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal_mode=WAL was refused (the mode is \"", *mode,
                     "\"); WAL needs a local file system with shared memory"));
  }
  absl::StatusOr<std::string> synchronous = db.RunOnce(
      durable_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
      "setting synchronous");
  if (!synchronous.ok()) return synchronous.status();
  absl::StatusOr<std::string> foreign_keys =
      db.RunOnce("PRAGMA foreign_keys=ON", "enabling foreign_keys");
  if (!foreign_keys.ok()) return foreign_keys.status();
  foreign_keys = db.RunOnce("PRAGMA foreign_keys", "reading foreign_keys");
  if (!foreign_keys.ok()) return foreign_keys.status();
  if (*foreign_keys != "1") {
    return absl::FailedPreconditionError(
        "this SQLite library does not enforce foreign keys");
  }
  return absl::OkStatus();
}

}  // namespace hypertune::storage::sqlite
