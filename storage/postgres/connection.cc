#include "storage/postgres/connection.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "storage/postgres/url.h"

namespace hypertune::storage::postgres {

namespace {

// Type OIDs (the server's catalog/pg_type.dat), fixed since PostgreSQL 7.
constexpr Oid kByteaOid = 17;
constexpr Oid kInt8Oid = 20;
constexpr Oid kInt8ArrayOid = 1016;
constexpr Oid kByteaArrayOid = 1001;

// Appends `value` as a big-endian int4.
void AppendInt4(std::string& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>(value >> shift));
  }
}

// Debian's Abseil has its own string_view, not std::string_view.
absl::string_view ToAbsl(std::string_view view) {
  return absl::string_view(view.data(), view.size());
}

// libpq's messages end in a newline and may span lines.
std::string OneLine(const char* message) {
  std::string line(
      absl::StripAsciiWhitespace(message == nullptr ? "" : message));
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  return line;
}

absl::StatusCode CodeFor(std::string_view sqlstate) {
  const std::string_view error_class = sqlstate.substr(0, 2);
  // Connection exceptions; the server shutting down or starting up;
  // a write sent to a read-only standby: another server may answer.
  if (error_class == "08" || sqlstate == "57P01" || sqlstate == "57P02" ||
      sqlstate == "57P03" || sqlstate == "25006") {
    return absl::StatusCode::kUnavailable;
  }
  if (error_class == "40") return absl::StatusCode::kAborted;
  if (error_class == "53") return absl::StatusCode::kResourceExhausted;
  if (sqlstate == "57014") return absl::StatusCode::kDeadlineExceeded;
  if (sqlstate == "42501") return absl::StatusCode::kPermissionDenied;
  if (sqlstate == "XX001" || sqlstate == "XX002") {
    return absl::StatusCode::kDataLoss;
  }
  return absl::StatusCode::kInternal;
}

}  // namespace

// ----- Params -----

Params& Params::Int(int64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<char>(static_cast<uint64_t>(value) >> (56 - 8 * i));
  }
  values_.push_back({kInt8Oid, 1, false, std::move(bytes), {}});
  return *this;
}

Params& Params::Bytes(std::string_view value) {
  values_.push_back({kByteaOid, 1, false, {}, value});
  return *this;
}

Params& Params::Ints(const std::vector<int>& values) {
  values_.push_back({kInt8ArrayOid,
                     0,
                     false,
                     absl::StrCat("{", absl::StrJoin(values, ","), "}"),
                     {}});
  return *this;
}

Params& Params::ByteArrays(const std::vector<std::string>& values) {
  // The binary array form: dimensions, a has-nulls flag, the element type,
  // each dimension's size and lower bound, then each element's length and
  // bytes. An empty array has no dimensions.
  size_t size = 20;
  for (const std::string& value : values) size += 4 + value.size();
  std::string bytes;
  bytes.reserve(size);
  AppendInt4(bytes, values.empty() ? 0 : 1);
  AppendInt4(bytes, 0);
  AppendInt4(bytes, kByteaOid);
  if (!values.empty()) {
    AppendInt4(bytes, static_cast<uint32_t>(values.size()));
    AppendInt4(bytes, 1);
  }
  for (const std::string& value : values) {
    AppendInt4(bytes, static_cast<uint32_t>(value.size()));
    bytes.append(value);
  }
  values_.push_back({kByteaArrayOid, 1, false, std::move(bytes), {}});
  return *this;
}

Params& Params::Null() {
  values_.push_back({kInt8Oid, 1, true, {}, {}});
  return *this;
}

// ----- Result -----

int64_t Result::affected() const {
  int64_t count = 0;
  return absl::SimpleAtoi(PQcmdTuples(result_.get()), &count) ? count : 0;
}

int64_t Result::Int(int row, int column) const {
  const auto* bytes = reinterpret_cast<const unsigned char*>(
      PQgetvalue(result_.get(), row, column));
  const int size = PQgetlength(result_.get(), row, column);
  // Big-endian two's complement of 2, 4 or 8 bytes.
  uint64_t value = (size > 0 && (bytes[0] & 0x80)) ? ~uint64_t{0} : 0;
  for (int i = 0; i < size; ++i) value = (value << 8) | bytes[i];
  return static_cast<int64_t>(value);
}

std::string_view Result::Bytes(int row, int column) const {
  return std::string_view(PQgetvalue(result_.get(), row, column),
                          PQgetlength(result_.get(), row, column));
}

// ----- Errors -----

absl::Status PostgresError(std::string_view sqlstate,
                           std::string_view server_message,
                           std::string_view what) {
  return absl::Status(CodeFor(sqlstate),
                      absl::StrCat(ToAbsl(what), ": ", ToAbsl(server_message),
                                   " (SQLSTATE ", ToAbsl(sqlstate), ")"));
}

absl::Status Connection::Error(const PGresult* result,
                               std::string_view what) const {
  const char* sqlstate = result == nullptr
                             ? nullptr
                             : PQresultErrorField(result, PG_DIAG_SQLSTATE);
  // No SQLSTATE: libpq's own failure, which is the connection's.
  if (sqlstate == nullptr || PQstatus(connection_) == CONNECTION_BAD) {
    return absl::UnavailableError(
        absl::StrCat(ToAbsl(what), ": lost the connection to PostgreSQL at ",
                     shown_url_, ": ", OneLine(PQerrorMessage(connection_))));
  }
  const char* primary = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
  absl::Status status = PostgresError(
      sqlstate,
      OneLine(primary != nullptr ? primary : PQresultErrorMessage(result)),
      what);
  if (status.code() == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(
        absl::StrCat(status.message(), " (PostgreSQL at ", shown_url_, ")"));
  }
  return status;
}

// ----- Connection -----

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(
    const std::string& url, const std::string& shown_url,
    int connect_timeout_seconds) {
  char* parse_error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(url.c_str(), &parse_error);
  if (parsed == nullptr) {
    std::string why = parse_error != nullptr ? OneLine(parse_error)
                                             : std::string("out of memory");
    PQfreemem(parse_error);
    return absl::InvalidArgumentError(
        absl::StrCat("PostgreSQL URL ", shown_url,
                     " does not parse: ", HidePasswords(why, url)));
  }
  PQconninfoFree(parsed);

  // Earlier keywords are defaults that the URL's own parameters override.
  const std::string timeout = absl::StrCat(connect_timeout_seconds);
  const char* const keywords[] = {
      "connect_timeout", "fallback_application_name", "dbname", nullptr};
  const char* const values[] = {timeout.c_str(), "hypertuned", url.c_str(),
                                nullptr};
  PGconn* connection = PQconnectdbParams(keywords, values,
                                         /*expand_dbname=*/1);
  if (connection == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "connecting to PostgreSQL at ", shown_url, ": out of memory"));
  }
  if (PQstatus(connection) != CONNECTION_OK) {
    const std::string why =
        HidePasswords(OneLine(PQerrorMessage(connection)), url);
    PQfinish(connection);
    return absl::UnavailableError(
        absl::StrCat("cannot connect to PostgreSQL at ", shown_url, ": ", why));
  }
  // NOTICEs (as "relation already exists, skipping") would go to stderr.
  PQsetNoticeProcessor(
      connection, [](void*, const char*) {}, nullptr);
  std::unique_ptr<Connection> opened(new Connection(connection, shown_url));
  // Every statement finds its rows by key. A bitmap scan, which the planner
  // may pick on small tables, never marks dead index entries, so on the
  // study rows that every write updates it walks more of them each time
  // (measured: ~25% of the load benchmark's throughput).
  if (absl::StatusOr<std::string> set =
          opened->Execute("SET enable_bitmapscan = off", "configuring");
      !set.ok()) {
    return set.status();
  }
  return opened;
}

Connection::~Connection() { PQfinish(connection_); }

bool Connection::Reusable() const {
  return PQstatus(connection_) == CONNECTION_OK &&
         PQtransactionStatus(connection_) == PQTRANS_IDLE;
}

absl::StatusOr<Result> Connection::Run(const std::string& sql,
                                       const Params& params,
                                       std::string_view what) {
  const int count = static_cast<int>(params.values_.size());
  auto statement = prepared_.find(sql);
  if (statement == prepared_.end()) {
    std::vector<Oid> types;
    for (const Params::Value& value : params.values_) {
      types.push_back(value.type);
    }
    const std::string name = absl::StrCat("s", prepared_.size());
    Result prepared(
        PQprepare(connection_, name.c_str(), sql.c_str(), count, types.data()));
    if (PQresultStatus(prepared.result_.get()) != PGRES_COMMAND_OK) {
      return Error(prepared.result_.get(), what);
    }
    statement = prepared_.emplace(sql, name).first;
  }
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  for (const Params::Value& value : params.values_) {
    // A null pointer would be SQL NULL, so an empty bytea points at "".
    const std::string_view bytes =
        value.type == kByteaOid ? value.bytes : std::string_view(value.owned);
    values.push_back(value.null ? nullptr : bytes.empty() ? "" : bytes.data());
    lengths.push_back(static_cast<int>(bytes.size()));
    formats.push_back(value.format);
  }
  Result result(PQexecPrepared(connection_, statement->second.c_str(), count,
                               values.data(), lengths.data(), formats.data(),
                               /*resultFormat=*/1));
  const ExecStatusType status = PQresultStatus(result.result_.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return Error(result.result_.get(), what);
  }
  return result;
}

absl::StatusOr<std::string> Connection::Execute(const std::string& sql,
                                                std::string_view what) {
  Result result(PQexec(connection_, sql.c_str()));
  const ExecStatusType status = PQresultStatus(result.result_.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return Error(result.result_.get(), what);
  }
  return std::string(PQcmdStatus(result.result_.get()));
}

// ----- Transaction -----

Transaction::~Transaction() {
  // A failure leaves the connection unusable, and the pool then closes it.
  if (open_) connection_.Execute("ROLLBACK", "rolling back").IgnoreError();
}

absl::Status Transaction::Begin(std::string_view what,
                                const std::string& begin) {
  absl::StatusOr<std::string> began = connection_.Execute(begin, what);
  if (!began.ok()) return began.status();
  open_ = true;
  return absl::OkStatus();
}

absl::Status Transaction::Commit(std::string_view what) {
  open_ = false;
  absl::StatusOr<std::string> tag = connection_.Execute("COMMIT", what);
  if (!tag.ok()) {
    if (tag.status().code() != absl::StatusCode::kUnavailable) {
      return tag.status();
    }
    return absl::UnavailableError(
        absl::StrCat(tag.status().message(),
                     " (while committing: the change may or may not have "
                     "been made)"));
  }
  // COMMIT of a transaction that failed earlier rolls it back instead.
  if (*tag != "COMMIT") {
    return absl::AbortedError(absl::StrCat(
        ToAbsl(what), ": the transaction was rolled back (", *tag, ")"));
  }
  return absl::OkStatus();
}

}  // namespace hypertune::storage::postgres
