#include "storage/sqlite_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "storage/store_util.h"

namespace hypertune::storage {

namespace {

// ----- Schema -----

// Version 1: studies and trials, each row holding its serialized message.
// Names and client ids are BLOB columns so that any bytes (NUL included)
// compare exactly and sort like std::string.
constexpr const char* kSchemaV1[] = {
    R"sql(CREATE TABLE studies(
      id INTEGER PRIMARY KEY,
      name BLOB UNIQUE NOT NULL,
      state INTEGER NOT NULL,
      create_time_ms INTEGER NOT NULL,
      study BLOB NOT NULL))sql",
    R"sql(CREATE TABLE trials(
      study_id INTEGER NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
      trial_id INTEGER NOT NULL,
      state INTEGER NOT NULL,
      client_id BLOB NOT NULL,
      trial BLOB NOT NULL,
      PRIMARY KEY(study_id, trial_id)))sql",
    "CREATE INDEX trials_by_state ON trials(study_id, state)",
    "CREATE INDEX trials_by_client ON trials(study_id, client_id)",
};

struct Migration {
  // The version the file has once `statements` have run.
  int version;
  std::span<const char* const> statements;
};

// Applied in order, each once; append, never edit a released step.
constexpr Migration kMigrations[] = {
    {1, kSchemaV1},
};
static_assert(std::size(kMigrations) == SqliteStore::kSchemaVersion &&
                  kMigrations[std::size(kMigrations) - 1].version ==
                      SqliteStore::kSchemaVersion,
              "kSchemaVersion must be the last migration's version");

// ----- Statements (fixed text; values only ever arrive as bindings) -----

constexpr char kBegin[] = "BEGIN IMMEDIATE";
constexpr char kBeginRead[] = "BEGIN DEFERRED";
constexpr char kCommit[] = "COMMIT";
constexpr char kRollback[] = "ROLLBACK";

constexpr char kCreateVersionTable[] =
    "CREATE TABLE IF NOT EXISTS schema_version("
    "version INTEGER PRIMARY KEY, applied_time_ms INTEGER NOT NULL)";
constexpr char kSelectVersion[] =
    "SELECT COALESCE(MAX(version), 0) FROM schema_version";
constexpr char kInsertVersion[] =
    "INSERT INTO schema_version(version, applied_time_ms) VALUES (?1, ?2)";

constexpr char kInsertStudy[] =
    "INSERT INTO studies(name, state, create_time_ms, study) "
    "VALUES (?1, ?2, ?3, ?4)";
constexpr char kSelectStudy[] = "SELECT study FROM studies WHERE name = ?1";
constexpr char kSelectStudyId[] = "SELECT id FROM studies WHERE name = ?1";
constexpr char kListStudies[] = "SELECT name, study FROM studies ORDER BY name";
constexpr char kUpdateStudy[] =
    "UPDATE studies SET state = ?2, create_time_ms = ?3, study = ?4 "
    "WHERE name = ?1";
constexpr char kDeleteStudy[] = "DELETE FROM studies WHERE name = ?1";

constexpr char kMaxTrialId[] =
    "SELECT COALESCE(MAX(trial_id), 0) FROM trials WHERE study_id = ?1";
constexpr char kInsertTrial[] =
    "INSERT INTO trials(study_id, trial_id, state, client_id, trial) "
    "VALUES (?1, ?2, ?3, ?4, ?5)";
constexpr char kSelectTrial[] =
    "SELECT t.trial FROM trials t JOIN studies s ON s.id = t.study_id "
    "WHERE s.name = ?1 AND t.trial_id = ?2";
constexpr char kUpdateTrial[] =
    "UPDATE trials SET state = ?3, client_id = ?4, trial = ?5 "
    "WHERE study_id = (SELECT id FROM studies WHERE name = ?1) "
    "AND trial_id = ?2";
constexpr char kCountTrials[] =
    "SELECT state, COUNT(*) FROM trials WHERE study_id = ?1 GROUP BY state";
constexpr char kIntegrityCheck[] = "PRAGMA integrity_check";

// ----- Errors -----

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

// The status for SQLite result `rc` while doing `what`, with the
// connection's message (when it adds to the generic one).
absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what) {
  const char* generic = sqlite3_errstr(rc);
  const char* specific = db != nullptr ? sqlite3_errmsg(db) : generic;
  std::string message =
      std::strcmp(specific, generic) == 0
          ? absl::StrCat(what, ": ", generic)
          : absl::StrCat(what, ": ", specific, " (", generic, ")");
  return absl::Status(CodeFor(rc), message);
}

// ----- One use of a prepared statement -----

// Borrows a cached statement for one execution: binds values, steps it,
// reads columns, and on destruction resets it and clears its bindings so
// the next use starts clean. `what` names the operation in errors.
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
  absl::StatusOr<bool> Step() {
    if (bind_rc_ != SQLITE_OK) return SqliteError(db_, bind_rc_, what_);
    const int rc = sqlite3_step(statement_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    last_rc_ = rc;
    return SqliteError(db_, rc, what_);
  }

  // Runs the statement to completion, ignoring any rows.
  absl::Status Run() {
    while (true) {
      absl::StatusOr<bool> row = Step();
      if (!row.ok()) return row.status();
      if (!*row) return absl::OkStatus();
    }
  }

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

template <typename Message>
absl::Status Parse(std::string_view bytes, Message& message,
                   absl::string_view label) {
  if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(
        absl::StrCat(label, ": the stored ", Message::descriptor()->name(),
                     " message (", bytes.size(), " bytes) does not parse"));
  }
  return absl::OkStatus();
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// ----- Transactions -----

// A transaction on the store's connection, rolled back when it goes out of
// scope uncommitted. REQUIRES: the store's mutex is held throughout.
class SqliteStore::Transaction {
 public:
  explicit Transaction(SqliteStore* store) : store_(store) {}
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  ~Transaction() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    // Some errors (SQLITE_FULL, IOERR) already rolled back: then SQLite is
    // in autocommit mode again and there is nothing to undo.
    if (!open_ || sqlite3_get_autocommit(store_->db_)) return;
    absl::StatusOr<sqlite3_stmt*> rollback = store_->Prepared(kRollback);
    if (rollback.ok()) {
      Query(store_->db_, *rollback, "rolling back").Run().IgnoreError();
    }
  }

  // `begin` is kBegin (writes) or kBeginRead (a consistent read).
  absl::Status Begin(const char* begin,
                     absl::string_view what) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    absl::StatusOr<sqlite3_stmt*> statement = store_->Prepared(begin);
    if (!statement.ok()) return statement.status();
    absl::Status status =
        Query(store_->db_, *statement, absl::StrCat(what, ": begin")).Run();
    open_ = status.ok();
    return status;
  }

  absl::Status Commit(absl::string_view what) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    absl::StatusOr<sqlite3_stmt*> statement = store_->Prepared(kCommit);
    if (!statement.ok()) return statement.status();
    absl::Status status =
        Query(store_->db_, *statement, absl::StrCat(what, ": commit")).Run();
    if (status.ok()) open_ = false;
    return status;
  }

 private:
  SqliteStore* store_;
  bool open_ = false;
};

// ----- Opening -----

void SqliteStore::StatementDeleter::operator()(sqlite3_stmt* statement) const {
  sqlite3_finalize(statement);
}

SqliteStore::SqliteStore(sqlite3* db, std::string path)
    : db_(db), path_(std::move(path)) {}

SqliteStore::~SqliteStore() {
  absl::MutexLock lock(&mu_);
  statements_.clear();
  sqlite3_close_v2(db_);
}

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(
    const std::string& path, const SqliteOptions& options) {
  const std::string context =
      absl::StrCat("opening SQLite database '", path, "'");
  sqlite3* db = nullptr;
  // NOMUTEX: the store's own mutex serializes all use of the connection.
  const int rc = sqlite3_open_v2(
      path.c_str(), &db,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
      nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = SqliteError(db, rc, context);
    sqlite3_close_v2(db);  // Allocated even on most failures.
    return status;
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(db, path));
  absl::Status status = store->Initialize(options);
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat(context, ": ", status.message()));
  }
  return store;
}

absl::StatusOr<std::string> SqliteStore::RunOnce(const char* sql,
                                                 absl::string_view what) {
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql, -1, &raw, nullptr);
  StatementPtr statement(raw);
  if (rc != SQLITE_OK) return SqliteError(db_, rc, what);
  std::string first;
  bool first_row = true;
  Query query(db_, statement.get(), what);
  while (true) {
    absl::StatusOr<bool> row = query.Step();
    if (!row.ok()) return row.status();
    if (!*row) return first;
    if (first_row) {
      const unsigned char* text = sqlite3_column_text(statement.get(), 0);
      if (text != nullptr) first = reinterpret_cast<const char*>(text);
      first_row = false;
    }
  }
}

absl::Status SqliteStore::Initialize(const SqliteOptions& options) {
  absl::MutexLock lock(&mu_);
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, options.busy_timeout_ms);

  // The first read of the file: a non-database fails here.
  absl::StatusOr<std::string> mode =
      RunOnce("PRAGMA journal_mode=WAL", "setting journal_mode=WAL");
  if (!mode.ok()) return mode.status();
  const bool in_memory = path_.empty() || path_ == ":memory:";
  if (*mode != "wal" && !(in_memory && *mode == "memory")) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal_mode=WAL was refused (the mode is \"", *mode,
                     "\"); WAL needs a local file system with shared memory"));
  }
  absl::StatusOr<std::string> synchronous =
      RunOnce(options.durable_full ? "PRAGMA synchronous=FULL"
                                   : "PRAGMA synchronous=NORMAL",
              "setting synchronous");
  if (!synchronous.ok()) return synchronous.status();
  absl::StatusOr<std::string> foreign_keys =
      RunOnce("PRAGMA foreign_keys=ON", "enabling foreign_keys");
  if (!foreign_keys.ok()) return foreign_keys.status();
  foreign_keys = RunOnce("PRAGMA foreign_keys", "reading foreign_keys");
  if (!foreign_keys.ok()) return foreign_keys.status();
  if (*foreign_keys != "1") {
    return absl::FailedPreconditionError(
        "this SQLite library does not enforce foreign keys");
  }
  return Migrate();
}

absl::Status SqliteStore::Migrate() {
  Transaction transaction(this);
  if (absl::Status s = transaction.Begin(kBegin, "migrating the schema");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> created =
      RunOnce(kCreateVersionTable, "creating table schema_version");
  if (!created.ok()) return created.status();

  int64_t version = 0;
  {
    absl::StatusOr<sqlite3_stmt*> statement = Prepared(kSelectVersion);
    if (!statement.ok()) return statement.status();
    Query query(db_, *statement, "reading the schema version");
    absl::StatusOr<bool> row = query.Step();
    if (!row.ok()) return row.status();
    if (*row) version = query.Int(0);
  }
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the schema version is ", version, ", newer than the ", kSchemaVersion,
        " this build of hypertune knows; open it with a newer "
        "hypertuned"));
  }
  for (const Migration& migration : kMigrations) {
    if (migration.version <= version) continue;
    const std::string what =
        absl::StrCat("migrating the schema to version ", migration.version);
    for (const char* sql : migration.statements) {
      absl::StatusOr<std::string> ran = RunOnce(sql, what);
      if (!ran.ok()) return ran.status();
    }
    absl::StatusOr<sqlite3_stmt*> statement = Prepared(kInsertVersion);
    if (!statement.ok()) return statement.status();
    Query query(db_, *statement, what);
    query.BindInt(1, migration.version).BindInt(2, NowMs());
    if (absl::Status s = query.Run(); !s.ok()) return s;
  }
  return transaction.Commit("migrating the schema");
}

absl::StatusOr<sqlite3_stmt*> SqliteStore::Prepared(absl::string_view sql) {
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

absl::StatusOr<int64_t> SqliteStore::StudyId(std::string_view name) {
  absl::StatusOr<sqlite3_stmt*> statement = Prepared(kSelectStudyId);
  if (!statement.ok()) return statement.status();
  const std::string what = absl::StrCat("looking up ", StudyLabel(name));
  Query query(db_, *statement, what);
  query.BindBytes(1, name);
  absl::StatusOr<bool> row = query.Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    return absl::NotFoundError(absl::StrCat(StudyLabel(name), " not found"));
  }
  return query.Int(0);
}

// ----- Studies -----

absl::Status SqliteStore::CreateStudy(const v1::Study& study) {
  const std::string label = StudyLabel(study.name());
  v1::Study stored = study;
  stored.clear_trial_counts();
  absl::StatusOr<std::string> bytes = SerializeForStore(stored, label);
  if (!bytes.ok()) return bytes.status();

  absl::MutexLock lock(&mu_);
  absl::StatusOr<sqlite3_stmt*> statement = Prepared(kInsertStudy);
  if (!statement.ok()) return statement.status();
  Query query(db_, *statement, absl::StrCat("creating ", label));
  query.BindBytes(1, study.name())
      .BindInt(2, study.state())
      .BindInt(3, study.create_time_ms())
      .BindBytes(4, *bytes);
  absl::Status status = query.Run();
  if ((query.last_rc() & 0xff) == SQLITE_CONSTRAINT) {
    return absl::AlreadyExistsError(absl::StrCat(label, " already exists"));
  }
  return status;
}

absl::StatusOr<v1::Study> SqliteStore::GetStudy(std::string_view name) {
  const std::string label = StudyLabel(name);
  absl::MutexLock lock(&mu_);
  absl::StatusOr<sqlite3_stmt*> statement = Prepared(kSelectStudy);
  if (!statement.ok()) return statement.status();
  Query query(db_, *statement, absl::StrCat("reading ", label));
  query.BindBytes(1, name);
  absl::StatusOr<bool> row = query.Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::NotFoundError(absl::StrCat(label, " not found"));
  v1::Study study;
  if (absl::Status s = Parse(query.Bytes(0), study, label); !s.ok()) return s;
  return study;
}

absl::StatusOr<std::vector<v1::Study>> SqliteStore::ListStudies() {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<sqlite3_stmt*> statement = Prepared(kListStudies);
  if (!statement.ok()) return statement.status();
  Query query(db_, *statement, "listing studies");
  std::vector<v1::Study> studies;
  while (true) {
    absl::StatusOr<bool> row = query.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    v1::Study& study = studies.emplace_back();
    if (absl::Status s =
            Parse(query.Bytes(1), study, StudyLabel(query.Bytes(0)));
        !s.ok()) {
      return s;
    }
  }
  return studies;
}

absl::Status SqliteStore::UpdateStudy(const v1::Study& study) {
  const std::string label = StudyLabel(study.name());
  v1::Study stored = study;
  stored.clear_trial_counts();
  absl::StatusOr<std::string> bytes = SerializeForStore(stored, label);
  if (!bytes.ok()) return bytes.status();

  absl::MutexLock lock(&mu_);
  absl::StatusOr<sqlite3_stmt*> statement = Prepared(kUpdateStudy);
  if (!statement.ok()) return statement.status();
  Query query(db_, *statement, absl::StrCat("updating ", label));
  query.BindBytes(1, study.name())
      .BindInt(2, study.state())
      .BindInt(3, study.create_time_ms())
      .BindBytes(4, *bytes);
  if (absl::Status s = query.Run(); !s.ok()) return s;
  if (sqlite3_changes(db_) == 0) {
    return absl::NotFoundError(absl::StrCat(label, " not found"));
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::DeleteStudy(std::string_view name) {
  const std::string label = StudyLabel(name);
  absl::MutexLock lock(&mu_);
  absl::StatusOr<sqlite3_stmt*> statement = Prepared(kDeleteStudy);
  if (!statement.ok()) return statement.status();
  // The trials go with it: ON DELETE CASCADE.
  Query query(db_, *statement, absl::StrCat("deleting ", label));
  query.BindBytes(1, name);
  if (absl::Status s = query.Run(); !s.ok()) return s;
  if (sqlite3_changes(db_) == 0) {
    return absl::NotFoundError(absl::StrCat(label, " not found"));
  }
  return absl::OkStatus();
}

// ----- Trials -----

absl::StatusOr<std::vector<v1::Trial>> SqliteStore::CreateTrials(
    std::string_view study_name, std::vector<v1::Trial> trials) {
  const std::string what =
      absl::StrCat("creating trials in ", StudyLabel(study_name));
  absl::MutexLock lock(&mu_);
  Transaction transaction(this);
  if (absl::Status s = transaction.Begin(kBegin, what); !s.ok()) return s;
  absl::StatusOr<int64_t> study_id = StudyId(study_name);
  if (!study_id.ok()) return study_id.status();

  int64_t last_id = 0;
  {
    absl::StatusOr<sqlite3_stmt*> statement = Prepared(kMaxTrialId);
    if (!statement.ok()) return statement.status();
    Query query(db_, *statement, what);
    query.BindInt(1, *study_id);
    absl::StatusOr<bool> row = query.Step();
    if (!row.ok()) return row.status();
    if (*row) last_id = query.Int(0);
  }

  absl::StatusOr<sqlite3_stmt*> insert = Prepared(kInsertTrial);
  if (!insert.ok()) return insert.status();
  for (v1::Trial& trial : trials) {
    trial.set_study_name(std::string(study_name));
    trial.set_id(++last_id);
    const std::string label = TrialLabel(study_name, trial.id());
    absl::StatusOr<std::string> bytes = SerializeForStore(trial, label);
    if (!bytes.ok()) return bytes.status();
    Query query(db_, *insert, absl::StrCat("creating ", label));
    query.BindInt(1, *study_id)
        .BindInt(2, trial.id())
        .BindInt(3, trial.state())
        .BindBytes(4, trial.client_id())
        .BindBytes(5, *bytes);
    if (absl::Status s = query.Run(); !s.ok()) return s;
  }
  if (absl::Status s = transaction.Commit(what); !s.ok()) return s;
  return trials;
}

absl::StatusOr<v1::Trial> SqliteStore::GetTrial(std::string_view study_name,
                                                int64_t trial_id) {
  const std::string label = TrialLabel(study_name, trial_id);
  absl::MutexLock lock(&mu_);
  absl::StatusOr<sqlite3_stmt*> statement = Prepared(kSelectTrial);
  if (!statement.ok()) return statement.status();
  Query query(db_, *statement, absl::StrCat("reading ", label));
  query.BindBytes(1, study_name).BindInt(2, trial_id);
  absl::StatusOr<bool> row = query.Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    // Say which of the two is missing.
    absl::StatusOr<int64_t> study_id = StudyId(study_name);
    if (!study_id.ok()) return study_id.status();
    return absl::NotFoundError(absl::StrCat(label, " not found"));
  }
  v1::Trial trial;
  if (absl::Status s = Parse(query.Bytes(0), trial, label); !s.ok()) return s;
  return trial;
}

absl::Status SqliteStore::UpdateTrial(const v1::Trial& trial) {
  const std::string label = TrialLabel(trial.study_name(), trial.id());
  absl::StatusOr<std::string> bytes = SerializeForStore(trial, label);
  if (!bytes.ok()) return bytes.status();

  absl::MutexLock lock(&mu_);
  absl::StatusOr<sqlite3_stmt*> statement = Prepared(kUpdateTrial);
  if (!statement.ok()) return statement.status();
  {
    Query query(db_, *statement, absl::StrCat("updating ", label));
    query.BindBytes(1, trial.study_name())
        .BindInt(2, trial.id())
        .BindInt(3, trial.state())
        .BindBytes(4, trial.client_id())
        .BindBytes(5, *bytes);
    if (absl::Status s = query.Run(); !s.ok()) return s;
  }
  if (sqlite3_changes(db_) == 0) {
    absl::StatusOr<int64_t> study_id = StudyId(trial.study_name());
    if (!study_id.ok()) return study_id.status();
    return absl::NotFoundError(absl::StrCat(label, " not found"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Trial>> SqliteStore::ListTrials(
    std::string_view study_name, const TrialQuery& query) {
  if (query.limit < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit: must be >= 0, got ", query.limit));
  }
  std::vector<int> states(query.states.begin(), query.states.end());
  std::sort(states.begin(), states.end());
  states.erase(std::unique(states.begin(), states.end()), states.end());

  // The text depends only on whether there is a client filter and on how
  // many states there are, so each shape is prepared once; the values
  // themselves are bound.
  std::string sql =
      "SELECT trial_id, trial FROM trials "
      "WHERE study_id = ?1 AND trial_id > ?2";
  int next_index = 4;  // ?3 is the limit.
  const int client_index = query.client_id.empty() ? 0 : next_index++;
  if (client_index != 0) {
    absl::StrAppend(&sql, " AND client_id = ?", client_index);
  }
  const int first_state_index = next_index;
  if (!states.empty()) {
    absl::StrAppend(&sql, " AND state IN (");
    for (size_t i = 0; i < states.size(); ++i) {
      absl::StrAppend(&sql, i == 0 ? "?" : ", ?", next_index++);
    }
    absl::StrAppend(&sql, ")");
  }
  absl::StrAppend(&sql, " ORDER BY trial_id LIMIT ?3");

  const std::string what =
      absl::StrCat("listing trials of ", StudyLabel(study_name));
  absl::MutexLock lock(&mu_);
  // One read transaction: the study check and the rows agree.
  Transaction transaction(this);
  if (absl::Status s = transaction.Begin(kBeginRead, what); !s.ok()) return s;
  absl::StatusOr<int64_t> study_id = StudyId(study_name);
  if (!study_id.ok()) return study_id.status();
  absl::StatusOr<sqlite3_stmt*> statement = Prepared(sql);
  if (!statement.ok()) return statement.status();

  std::vector<v1::Trial> trials;
  {
    Query rows(db_, *statement, what);
    rows.BindInt(1, *study_id)
        .BindInt(2, query.after_id)
        .BindInt(3, query.limit == 0 ? -1 : query.limit);
    if (client_index != 0) rows.BindBytes(client_index, query.client_id);
    for (size_t i = 0; i < states.size(); ++i) {
      rows.BindInt(first_state_index + static_cast<int>(i), states[i]);
    }
    while (true) {
      absl::StatusOr<bool> row = rows.Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      v1::Trial& trial = trials.emplace_back();
      if (absl::Status s =
              Parse(rows.Bytes(1), trial, TrialLabel(study_name, rows.Int(0)));
          !s.ok()) {
        return s;
      }
    }
  }
  if (absl::Status s = transaction.Commit(what); !s.ok()) return s;
  return trials;
}

absl::StatusOr<absl::flat_hash_map<v1::Trial::State, int64_t>>
SqliteStore::CountTrials(std::string_view study_name) {
  const std::string what =
      absl::StrCat("counting trials of ", StudyLabel(study_name));
  absl::MutexLock lock(&mu_);
  Transaction transaction(this);
  if (absl::Status s = transaction.Begin(kBeginRead, what); !s.ok()) return s;
  absl::StatusOr<int64_t> study_id = StudyId(study_name);
  if (!study_id.ok()) return study_id.status();
  absl::StatusOr<sqlite3_stmt*> statement = Prepared(kCountTrials);
  if (!statement.ok()) return statement.status();

  absl::flat_hash_map<v1::Trial::State, int64_t> counts;
  {
    Query query(db_, *statement, what);
    query.BindInt(1, *study_id);
    while (true) {
      absl::StatusOr<bool> row = query.Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      counts[static_cast<v1::Trial::State>(query.Int(0))] = query.Int(1);
    }
  }
  if (absl::Status s = transaction.Commit(what); !s.ok()) return s;
  return counts;
}

absl::StatusOr<std::string> SqliteStore::IntegrityCheck() {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<sqlite3_stmt*> statement = Prepared(kIntegrityCheck);
  if (!statement.ok()) return statement.status();
  Query query(db_, *statement, "running integrity_check");
  std::vector<std::string> lines;
  while (true) {
    absl::StatusOr<bool> row = query.Step();
    if (!row.ok()) return row.status();
    if (!*row) break;
    lines.emplace_back(query.Bytes(0));
  }
  return absl::StrJoin(lines, "\n");
}

}  // namespace hypertune::storage
