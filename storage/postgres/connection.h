// One libpq connection to a PostgreSQL server, the statements run on it and
// the errors they meet, for PostgresStore.
//
// Statements have fixed text and take their values as parameters (never
// spliced into the text), each prepared once per connection and cached.
// Parameters go in binary: integers as int8, names and messages as bytea,
// so that any bytes (NUL included) round-trip and compare exactly. Results
// come back in binary too (Result).
//
// Errors are absl::Status with the code that the server's SQLSTATE
// (PostgresError) or a lost connection (UNAVAILABLE) calls for, and a
// message that starts with `what`, the operation (as in "updating trial 3
// of study \"mnist\""). A URL is only ever shown as RedactUrl gives it.
//
// Thread safety: a Connection has one user at a time (ConnectionPool hands
// each to one thread); Params and Result are plain values.
#ifndef HYPERTUNE_STORAGE_POSTGRES_CONNECTION_H_
#define HYPERTUNE_STORAGE_POSTGRES_CONNECTION_H_

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hypertune::storage::postgres {

// The values of a statement's parameters $1, $2, ... in order.
class Params {
 public:
  // An int8.
  Params& Int(int64_t value);
  // A bytea. The bytes are not copied: they must outlive the statement.
  Params& Bytes(std::string_view value);
  // An int8[] (for "= ANY($n)").
  Params& Ints(const std::vector<int>& values);
  // A bytea[] of `values`, which are copied.
  Params& ByteArrays(const std::vector<std::string>& values);
  // An int8 NULL (as in "LIMIT NULL", no limit).
  Params& Null();

 private:
  friend class Connection;
  struct Value {
    Oid type;
    // 1 binary, 0 text.
    int format;
    bool null;
    // Integers and arrays, encoded here; bytea points at the caller's.
    std::string owned;
    std::string_view bytes;
  };
  std::vector<Value> values_;
};

// The rows a statement returned, in binary format.
class Result {
 public:
  explicit Result(PGresult* result) : result_(result, &PQclear) {}

  int rows() const { return PQntuples(result_.get()); }
  // The rows an INSERT, UPDATE or DELETE changed.
  int64_t affected() const;
  bool IsNull(int row, int column) const {
    return PQgetisnull(result_.get(), row, column) != 0;
  }
  // An int2, int4 or int8 column.
  int64_t Int(int row, int column) const;
  // A bytea column; valid while the Result lives.
  std::string_view Bytes(int row, int column) const;

 private:
  friend class Connection;
  std::unique_ptr<PGresult, decltype(&PQclear)> result_;
};

// The status for a failed statement: the code its SQLSTATE calls for (a
// lost connection, a server shutting down or a read-only standby:
// UNAVAILABLE; a serialization failure or deadlock: ABORTED; out of disk or
// connections: RESOURCE_EXHAUSTED; a cancelled statement:
// DEADLINE_EXCEEDED; corruption: DATA_LOSS; anything else: INTERNAL) and
// the message "WHAT: SERVER'S MESSAGE (SQLSTATE XXXXX)".
absl::Status PostgresError(std::string_view sqlstate,
                           std::string_view server_message,
                           std::string_view what);

class Connection {
 public:
  // Connects to `url` (a libpq URL, which may set any connection
  // parameter); `shown_url` is its redacted form, for messages.
  // UNAVAILABLE (naming `shown_url` and saying why) if no connection could
  // be made, INVALID_ARGUMENT if `url` does not parse.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const std::string& url, const std::string& shown_url,
      int connect_timeout_seconds);

  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs `sql` with `params` and returns its rows (none for most writes).
  absl::StatusOr<Result> Run(const std::string& sql, const Params& params,
                             std::string_view what);
  // Runs `sql`, without parameters and without preparing it (BEGIN,
  // COMMIT, schema changes), and returns its command tag ("COMMIT").
  absl::StatusOr<std::string> Execute(const std::string& sql,
                                      std::string_view what);

  // Whether the connection can take the next call: connected, and not left
  // inside a transaction.
  bool Reusable() const;

  const std::string& shown_url() const { return shown_url_; }

 private:
  Connection(PGconn* connection, std::string shown_url)
      : connection_(connection), shown_url_(std::move(shown_url)) {}

  // The error of `result` (null when libpq could not even make one).
  absl::Status Error(const PGresult* result, std::string_view what) const;

  PGconn* const connection_;
  const std::string shown_url_;
  // Statement text -> the name it was prepared under on this connection.
  absl::flat_hash_map<std::string, std::string> prepared_;
};

// A transaction on one connection: rolled back when destroyed uncommitted.
class Transaction {
 public:
  explicit Transaction(Connection& connection) : connection_(connection) {}
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // BEGIN, or `begin` (as in "BEGIN ISOLATION LEVEL REPEATABLE READ").
  absl::Status Begin(std::string_view what, const std::string& begin = "BEGIN");
  // COMMIT. A lost connection here is UNAVAILABLE saying that the
  // transaction may or may not have been committed.
  absl::Status Commit(std::string_view what);

 private:
  Connection& connection_;
  bool open_ = false;
};

}  // namespace hypertune::storage::postgres

#endif  // HYPERTUNE_STORAGE_POSTGRES_CONNECTION_H_
