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

// Version 2: trials found by state across all studies (ListTrialsInStates).
constexpr const char* kSchemaV2[] = {
    "CREATE INDEX trials_in_state ON trials(state)",
};

// Version 3: the change sequence (WatchTrials). Each trial row carries the
// study-wide sequence number of its latest change; existing trials are
// numbered by id.
constexpr const char* kSchemaV3[] = {
    "ALTER TABLE trials ADD COLUMN sequence INTEGER NOT NULL DEFAULT 0",
    "UPDATE trials SET sequence = trial_id",
    "CREATE INDEX trials_by_sequence ON trials(study_id, sequence)",
};

// Version 4: reads that stay cheap as a study grows. Trial counts by state
// kept by triggers (CountTrials reads a few rows instead of every trial), and
// indexes that find a study's trials in a few states, or a client's, in id
// order.
constexpr const char* kSchemaV4[] = {
    R"sql(CREATE TABLE trial_counts(
      study_id INTEGER NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
      state INTEGER NOT NULL,
      n INTEGER NOT NULL,
      PRIMARY KEY(study_id, state)) WITHOUT ROWID)sql",
    "INSERT INTO trial_counts(study_id, state, n) "
    "SELECT study_id, state, COUNT(*) FROM trials GROUP BY study_id, state",
    R"sql(CREATE TRIGGER trial_counts_insert AFTER INSERT ON trials BEGIN
      INSERT INTO trial_counts(study_id, state, n) VALUES (NEW.study_id, NEW.state, 1)
        ON CONFLICT(study_id, state) DO UPDATE SET n = n + 1;
    END)sql",
    R"sql(CREATE TRIGGER trial_counts_delete AFTER DELETE ON trials BEGIN
      UPDATE trial_counts SET n = n - 1
        WHERE study_id = OLD.study_id AND state = OLD.state;
    END)sql",
    R"sql(CREATE TRIGGER trial_counts_update AFTER UPDATE OF state ON trials
      WHEN OLD.state != NEW.state BEGIN
      UPDATE trial_counts SET n = n - 1
        WHERE study_id = OLD.study_id AND state = OLD.state;
      INSERT INTO trial_counts(study_id, state, n) VALUES (NEW.study_id, NEW.state, 1)
        ON CONFLICT(study_id, state) DO UPDATE SET n = n + 1;
    END)sql",
    "DROP INDEX trials_by_state",
    "CREATE INDEX trials_by_state ON trials(study_id, state, trial_id)",
    "DROP INDEX trials_by_client",
    "CREATE INDEX trials_by_client ON trials(study_id, client_id, trial_id)",
};

struct Migration {
  // The version the file has once `statements` have run.
  int version;
  std::span<const char* const> statements;
};

// Applied in order, each once; append, never edit a released step.
constexpr Migration kMigrations[] = {
    {1, kSchemaV1},
    {2, kSchemaV2},
    {3, kSchemaV3},
    {4, kSchemaV4},
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
// Each write of a batch runs inside one, so that it can be undone alone.
constexpr char kSavepoint[] = "SAVEPOINT write";
constexpr char kRollbackToSavepoint[] = "ROLLBACK TO write";
constexpr char kReleaseSavepoint[] = "RELEASE write";

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

// Two subqueries: each MAX is then one index lookup, where a single SELECT
// of both would scan the study's trials.
constexpr char kMaxTrialIdAndSequence[] =
    "SELECT (SELECT COALESCE(MAX(trial_id), 0) FROM trials WHERE study_id = "
    "?1), "
    "(SELECT COALESCE(MAX(sequence), 0) FROM trials WHERE study_id = ?1)";
constexpr char kInsertTrial[] =
    "INSERT INTO trials(study_id, trial_id, state, client_id, trial, sequence) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
constexpr char kSelectTrial[] =
    "SELECT t.trial FROM trials t JOIN studies s ON s.id = t.study_id "
    "WHERE s.name = ?1 AND t.trial_id = ?2";
// Updates take the next number of the study's change sequence.
constexpr char kUpdateTrial[] =
    "UPDATE trials SET state = ?3, client_id = ?4, trial = ?5, sequence = "
    "(SELECT MAX(sequence) + 1 FROM trials WHERE study_id = "
    "(SELECT id FROM studies WHERE name = ?1)) "
    "WHERE study_id = (SELECT id FROM studies WHERE name = ?1) "
    "AND trial_id = ?2";
// kUpdateTrial when neither state nor client_id changes, else no change:
// rewriting an indexed column rewrites its index entries, even to the same
// value.
constexpr char kUpdateTrialMessage[] =
    "UPDATE trials SET trial = ?5, sequence = "
    "(SELECT MAX(sequence) + 1 FROM trials WHERE study_id = "
    "(SELECT id FROM studies WHERE name = ?1)) "
    "WHERE study_id = (SELECT id FROM studies WHERE name = ?1) "
    "AND trial_id = ?2 AND state = ?3 AND client_id = ?4";
// Lease renewals: the message only, no change recorded.
constexpr char kRenewTrialLease[] =
    "UPDATE trials SET trial = ?5 "
    "WHERE study_id = (SELECT id FROM studies WHERE name = ?1) "
    "AND trial_id = ?2 AND state = ?3 AND client_id = ?4";
constexpr char kListTrialChanges[] =
    "SELECT trial_id, sequence, trial FROM trials "
    "WHERE study_id = ?1 AND sequence > ?2 ORDER BY sequence LIMIT ?3";
constexpr char kCountTrials[] =
    "SELECT state, n FROM trial_counts WHERE study_id = ?1 AND n > 0";
constexpr char kIntegrityCheck[] = "PRAGMA integrity_check";

// States a trial holds only while work on it is queued or running; a study
// has few trials in them at any time.
bool IsLiveState(int state) {
  return state == v1::Trial::REQUESTED || state == v1::Trial::ACTIVE ||
         state == v1::Trial::STOPPING || state == v1::Trial::PAUSED;
}

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

// Returns `states` sorted and without repeats, as SQLite stores them; one
// statement text then serves every order of the same states.
std::vector<int> DistinctStates(const std::vector<v1::Trial::State>& states) {
  std::vector<int> distinct(states.begin(), states.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  return distinct;
}

// Appends "`column` IN (?i, ?i+1, ...)" with `count` parameters numbered
// from `first_index`.
void AppendInList(std::string& sql, absl::string_view column, int first_index,
                  size_t count) {
  absl::StrAppend(&sql, column, " IN (");
  for (size_t i = 0; i < count; ++i) {
    absl::StrAppend(&sql, i == 0 ? "?" : ", ?", first_index + i);
  }
  absl::StrAppend(&sql, ")");
}

}  // namespace

// ----- Connections -----

// One SQLite connection and its cached statements. Not thread-safe: one
// user at a time (the committer, or the read that borrowed it).
class SqliteStore::Connection {
 public:
  // Opens `path` with SQLite `flags`; errors start with `context`.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const std::string& path, int flags, int busy_timeout_ms,
      absl::string_view context) {
    sqlite3* db = nullptr;
    // NOMUTEX: a connection has one user at a time.
    const int rc = sqlite3_open_v2(path.c_str(), &db,
                                   flags | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      absl::Status status = SqliteError(db, rc, context);
      sqlite3_close_v2(db);  // Allocated even on most failures.
      return status;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, busy_timeout_ms);
    return std::unique_ptr<Connection>(new Connection(db));
  }

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    statements_.clear();  // Finalized before the connection closes.
    sqlite3_close_v2(db_);
  }

  class Transaction;

  sqlite3* db() const { return db_; }

  // Returns the cached statement for `sql`, preparing it on first use.
  // REQUIRES: `sql` is fixed text, never built from values.
  absl::StatusOr<sqlite3_stmt*> Prepared(absl::string_view sql) {
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

  // Runs the cached statement `sql`, which takes no values (BEGIN, COMMIT,
  // SAVEPOINT...). `what` names the step in errors.
  absl::Status Execute(const char* sql, absl::string_view what) {
    absl::StatusOr<sqlite3_stmt*> statement = Prepared(sql);
    if (!statement.ok()) return statement.status();
    return Query(db_, *statement, what).Run();
  }

  // Prepares, runs to completion and finalizes one statement without
  // caching it (pragmas, migrations); returns the first row's first column
  // as text ("" without rows). `what` names the step in errors.
  // REQUIRES: `sql` is fixed text.
  absl::StatusOr<std::string> RunOnce(const char* sql, absl::string_view what) {
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

  // Returns the row id of the named study, or NOT_FOUND.
  absl::StatusOr<int64_t> StudyId(std::string_view name) {
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
class SqliteStore::Connection::Transaction {
 public:
  explicit Transaction(Connection& connection) : connection_(connection) {}
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  ~Transaction() {
    // Some errors (SQLITE_FULL, IOERR) already rolled back: then SQLite is
    // in autocommit mode again and there is nothing to undo.
    if (!open_ || sqlite3_get_autocommit(connection_.db())) return;
    connection_.Execute(kRollback, "rolling back").IgnoreError();
  }

  // `begin` is kBegin (writes) or kBeginRead (a consistent read).
  absl::Status Begin(const char* begin, absl::string_view what) {
    absl::Status status =
        connection_.Execute(begin, absl::StrCat(what, ": begin"));
    open_ = status.ok();
    return status;
  }

  absl::Status Commit(absl::string_view what) {
    absl::Status status =
        connection_.Execute(kCommit, absl::StrCat(what, ": commit"));
    if (status.ok()) open_ = false;
    return status;
  }

 private:
  Connection& connection_;
  bool open_ = false;
};

// ----- The write queue -----

// One write call waiting in the queue. Lives on its caller's stack, which
// stays blocked in Submit until the write is done.
struct SqliteStore::Write {
  Write(absl::string_view what,
        absl::FunctionRef<absl::Status(Connection&)> apply)
      : what(what), apply(apply) {}

  // Wakes the waiting caller. It may return (and destroy the write) as soon
  // as this has released `mu`.
  void MarkDone() {
    absl::MutexLock lock(&mu);
    done = true;
  }

  void AwaitDone() { absl::MutexLock lock(&mu, absl::Condition(&done)); }

  // Names the write in errors that befall its whole batch.
  const absl::string_view what;
  // Runs the write's statements inside the batch's transaction; returns its
  // own status.
  const absl::FunctionRef<absl::Status(Connection&)> apply;
  // Set by the committer before MarkDone.
  absl::Status status;
  // Each write has its own lock, so waking one caller never makes the
  // others or the committer wait.
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
};

absl::Status SqliteStore::Submit(Write& write) {
  bool commit;
  {
    absl::MutexLock lock(&queue_mu_);
    queue_.push_back(&write);
    commit = committer_ == Committer::kNone;
    if (commit) committer_ = Committer::kCaller;
  }
  if (!commit) {
    write.AwaitDone();
    return std::move(write.status);
  }
  // No commit was in progress: commit this write, with any that arrived
  // meanwhile, without waking another thread.
  std::vector<Write*> batch;
  if (TakeBatch(batch)) {
    CommitBatch(batch);
    absl::MutexLock lock(&queue_mu_);
    RecordBatch(batch.size());
    if (queue_.empty()) {
      committer_ = Committer::kNone;
    } else {
      // Writes are piling up: the drainer takes over, so that this caller
      // returns now and the committer's role stays on one busy thread.
      committer_ = Committer::kDrainer;
      drain_.Signal();
    }
  }
  for (Write* other : batch) {
    if (other != &write) other->MarkDone();
  }
  return std::move(write.status);
}

bool SqliteStore::TakeBatch(std::vector<Write*>& batch) {
  batch.clear();
  absl::MutexLock lock(&queue_mu_);
  while (paused_) resumed_.Wait(&queue_mu_);
  if (queue_.empty()) {
    committer_ = Committer::kNone;
    return false;
  }
  const size_t count =
      std::min(queue_.size(), static_cast<size_t>(kMaxBatchWrites));
  batch.assign(queue_.begin(), queue_.begin() + count);
  queue_.erase(queue_.begin(), queue_.begin() + count);
  return true;
}

void SqliteStore::RecordBatch(size_t size) {
  ++stats_.batches;
  stats_.writes += static_cast<int64_t>(size);
  stats_.largest_batch =
      std::max(stats_.largest_batch, static_cast<int64_t>(size));
}

void SqliteStore::Drain() {
  std::vector<Write*> batch;
  while (true) {
    {
      absl::MutexLock lock(&queue_mu_);
      while (committer_ != Committer::kDrainer && !closing_) {
        drain_.Wait(&queue_mu_);
      }
      if (committer_ != Committer::kDrainer) return;  // Closing.
    }
    // Commit until the queue is empty, which gives the role back.
    while (TakeBatch(batch)) {
      CommitBatch(batch);
      {
        absl::MutexLock lock(&queue_mu_);
        RecordBatch(batch.size());
      }
      for (Write* write : batch) write->MarkDone();
    }
  }
}

void SqliteStore::CommitBatch(const std::vector<Write*>& batch) {
  absl::MutexLock lock(&writer_mu_);
  Connection& db = *writer_;

  // Rolls back and gives `error` to every write that has not failed on its
  // own: nothing of the batch is committed.
  auto fail_batch = [&](const absl::Status& error) {
    if (!sqlite3_get_autocommit(db.db())) {
      db.Execute(kRollback, "rolling back the batch").IgnoreError();
    }
    for (Write* write : batch) {
      if (write->status.ok()) {
        write->status = absl::Status(
            error.code(), absl::StrCat(write->what, ": ", error.message()));
      }
    }
  };

  if (absl::Status s = db.Execute(kBegin, "beginning the write transaction");
      !s.ok()) {
    return fail_batch(s);
  }
  // A write alone needs no savepoint: if it fails, the transaction is rolled
  // back instead.
  const bool savepoints = batch.size() > 1;
  for (Write* write : batch) {
    if (savepoints) {
      if (absl::Status s = db.Execute(kSavepoint, "opening a savepoint");
          !s.ok()) {
        return fail_batch(s);
      }
    }
    write->status = write->apply(db);
    if (sqlite3_get_autocommit(db.db())) {
      // The write's error (I/O, disk full, out of memory) ended the whole
      // transaction, undoing the writes before it too.
      return fail_batch(absl::Status(
          write->status.ok() ? absl::StatusCode::kInternal
                             : write->status.code(),
          absl::StrCat("another write of the same transaction failed: ",
                       write->status.ok() ? "transaction ended"
                                          : write->status.message())));
    }
    if (!savepoints) continue;
    if (!write->status.ok()) {
      if (absl::Status s =
              db.Execute(kRollbackToSavepoint, "rolling back a failed write");
          !s.ok()) {
        return fail_batch(s);
      }
    }
    if (absl::Status s = db.Execute(kReleaseSavepoint, "releasing a savepoint");
        !s.ok()) {
      return fail_batch(s);
    }
  }
  if (!savepoints && !batch.front()->status.ok()) {
    db.Execute(kRollback, "rolling back a failed write").IgnoreError();
    return;
  }
  if (absl::Status s = db.Execute(kCommit, "committing the write transaction");
      !s.ok()) {
    fail_batch(s);
  }
}

void SqliteStore::PauseCommitsForTesting() {
  absl::MutexLock lock(&queue_mu_);
  paused_ = true;
}

void SqliteStore::ResumeCommitsForTesting() {
  absl::MutexLock lock(&queue_mu_);
  paused_ = false;
  resumed_.SignalAll();
}

void SqliteStore::AwaitQueuedWritesForTesting(int count) {
  auto queued = [this, count]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
    return queue_.size() >= static_cast<size_t>(count);
  };
  absl::MutexLock lock(&queue_mu_);
  queue_mu_.Await(absl::Condition(&queued));
}

SqliteStore::CommitStats SqliteStore::GetCommitStats() const {
  absl::MutexLock lock(&queue_mu_);
  return stats_;
}

// ----- Reads -----

absl::Status SqliteStore::Read(
    absl::FunctionRef<absl::Status(Connection&)> read) {
  if (single_connection_) {
    absl::MutexLock lock(&writer_mu_);
    return read(*writer_);
  }
  std::unique_ptr<Connection> connection;
  {
    absl::MutexLock lock(&pool_mu_);
    while (idle_readers_.empty() &&
           open_readers_ >= options_.max_read_connections) {
      reader_freed_.Wait(&pool_mu_);
    }
    if (idle_readers_.empty()) {
      ++open_readers_;  // Opened below, outside the lock.
    } else {
      connection = std::move(idle_readers_.back());
      idle_readers_.pop_back();
    }
  }
  if (connection == nullptr) {
    absl::StatusOr<std::unique_ptr<Connection>> opened = Connection::Open(
        path_, SQLITE_OPEN_READONLY, options_.busy_timeout_ms,
        absl::StrCat("opening a read connection to SQLite database '", path_,
                     "'"));
    if (!opened.ok()) {
      absl::MutexLock lock(&pool_mu_);
      --open_readers_;
      reader_freed_.Signal();
      return opened.status();
    }
    connection = *std::move(opened);
  }
  absl::Status status = read(*connection);
  absl::MutexLock lock(&pool_mu_);
  // Most recently used first: its statements are warm.
  idle_readers_.push_back(std::move(connection));
  reader_freed_.Signal();
  return status;
}

// ----- Opening -----

SqliteStore::SqliteStore(std::unique_ptr<Connection> writer, std::string path,
                         SqliteOptions options)
    : path_(std::move(path)),
      options_(options),
      single_connection_(path_.empty() || path_ == ":memory:"),
      writer_(std::move(writer)),
      drainer_([this] { Drain(); }) {}

SqliteStore::~SqliteStore() {
  {
    absl::MutexLock lock(&queue_mu_);
    closing_ = true;
    drain_.Signal();
  }
  drainer_.join();
  // Readers first: the writer's close then checkpoints the WAL alone.
  absl::MutexLock lock(&pool_mu_);
  idle_readers_.clear();
}

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(
    const std::string& path, const SqliteOptions& options) {
  if (options.max_read_connections < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_read_connections: must be >= 1, got ",
                     options.max_read_connections));
  }
  const std::string context =
      absl::StrCat("opening SQLite database '", path, "'");
  absl::StatusOr<std::unique_ptr<Connection>> writer =
      Connection::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                       options.busy_timeout_ms, context);
  if (!writer.ok()) return writer.status();
  std::unique_ptr<SqliteStore> store(
      new SqliteStore(*std::move(writer), path, options));
  absl::Status status = store->Initialize();
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat(context, ": ", status.message()));
  }
  // Opens the first read connection now, so that a file readers cannot use
  // fails here rather than on the first read.
  status = store->Read([](Connection&) { return absl::OkStatus(); });
  if (!status.ok()) return status;
  return store;
}

absl::Status SqliteStore::Initialize() {
  absl::MutexLock lock(&writer_mu_);
  Connection& db = *writer_;
  // The first read of the file: a non-database fails here.
  absl::StatusOr<std::string> mode =
      db.RunOnce("PRAGMA journal_mode=WAL", "setting journal_mode=WAL");
  if (!mode.ok()) return mode.status();
  if (*mode != "wal" && !(single_connection_ && *mode == "memory")) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal_mode=WAL was refused (the mode is \"", *mode,
                     "\"); WAL needs a local file system with shared memory"));
  }
  absl::StatusOr<std::string> synchronous =
      db.RunOnce(options_.durable_full ? "PRAGMA synchronous=FULL"
                                       : "PRAGMA synchronous=NORMAL",
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
  return Migrate(db);
}

absl::Status SqliteStore::Migrate(Connection& db) {
  Connection::Transaction transaction(db);
  if (absl::Status s = transaction.Begin(kBegin, "migrating the schema");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> created =
      db.RunOnce(kCreateVersionTable, "creating table schema_version");
  if (!created.ok()) return created.status();

  int64_t version = 0;
  {
    absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kSelectVersion);
    if (!statement.ok()) return statement.status();
    Query query(db.db(), *statement, "reading the schema version");
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
      absl::StatusOr<std::string> ran = db.RunOnce(sql, what);
      if (!ran.ok()) return ran.status();
    }
    absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kInsertVersion);
    if (!statement.ok()) return statement.status();
    Query query(db.db(), *statement, what);
    query.BindInt(1, migration.version).BindInt(2, NowMs());
    if (absl::Status s = query.Run(); !s.ok()) return s;
  }
  return transaction.Commit("migrating the schema");
}

// ----- Studies -----

namespace {

// The stored form of `study`: trial_counts are derived on read, never kept.
absl::StatusOr<std::string> StudyBytes(const v1::Study& study,
                                       const std::string& label) {
  v1::Study stored = study;
  stored.clear_trial_counts();
  return SerializeForStore(stored, label);
}

// Binds the studies row of kInsertStudy and kUpdateStudy: name, state,
// create time and the stored form `bytes`.
void BindStudyRow(Query& query, const v1::Study& study,
                  const std::string& bytes) {
  query.BindBytes(1, study.name())
      .BindInt(2, study.state())
      .BindInt(3, study.create_time_ms())
      .BindBytes(4, bytes);
}

}  // namespace

absl::Status SqliteStore::CreateStudy(const v1::Study& study) {
  const std::string label = StudyLabel(study.name());
  absl::StatusOr<std::string> bytes = StudyBytes(study, label);
  if (!bytes.ok()) return bytes.status();

  const std::string what = absl::StrCat("creating ", label);
  auto apply = [&](Connection& db) -> absl::Status {
    absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kInsertStudy);
    if (!statement.ok()) return statement.status();
    Query query(db.db(), *statement, what);
    BindStudyRow(query, study, *bytes);
    absl::Status status = query.Run();
    if ((query.last_rc() & 0xff) == SQLITE_CONSTRAINT) {
      return absl::AlreadyExistsError(absl::StrCat(label, " already exists"));
    }
    return status;
  };
  Write write(what, apply);
  return Submit(write);
}

absl::Status SqliteStore::LoadStudyRow(Connection& db, std::string_view name,
                                       const std::string& label,
                                       const std::string& what,
                                       v1::Study& study) {
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kSelectStudy);
  if (!statement.ok()) return statement.status();
  Query query(db.db(), *statement, what);
  query.BindBytes(1, name);
  absl::StatusOr<bool> row = query.Step();
  if (!row.ok()) return row.status();
  if (!*row) return absl::NotFoundError(absl::StrCat(label, " not found"));
  return Parse(query.Bytes(0), study, label);
}

absl::Status SqliteStore::SaveStudyRow(Connection& db, const v1::Study& study,
                                       const std::string& label,
                                       const std::string& what) {
  absl::StatusOr<std::string> bytes = StudyBytes(study, label);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kUpdateStudy);
  if (!statement.ok()) return statement.status();
  Query query(db.db(), *statement, what);
  BindStudyRow(query, study, *bytes);
  if (absl::Status s = query.Run(); !s.ok()) return s;
  if (sqlite3_changes(db.db()) == 0) {
    return absl::NotFoundError(absl::StrCat(label, " not found"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Study> SqliteStore::GetStudy(std::string_view name) {
  const std::string label = StudyLabel(name);
  const std::string what = absl::StrCat("reading ", label);
  v1::Study study;
  absl::Status status = Read([&](Connection& db) {
    return LoadStudyRow(db, name, label, what, study);
  });
  if (!status.ok()) return status;
  return study;
}

absl::StatusOr<std::vector<v1::Study>> SqliteStore::ListStudies() {
  std::vector<v1::Study> studies;
  absl::Status status = Read([&](Connection& db) -> absl::Status {
    absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kListStudies);
    if (!statement.ok()) return statement.status();
    Query query(db.db(), *statement, "listing studies");
    while (true) {
      absl::StatusOr<bool> row = query.Step();
      if (!row.ok()) return row.status();
      if (!*row) return absl::OkStatus();
      v1::Study& study = studies.emplace_back();
      if (absl::Status s =
              Parse(query.Bytes(1), study, StudyLabel(query.Bytes(0)));
          !s.ok()) {
        return s;
      }
    }
  });
  if (!status.ok()) return status;
  return studies;
}

absl::Status SqliteStore::UpdateStudy(const v1::Study& study) {
  const std::string label = StudyLabel(study.name());
  const std::string what = absl::StrCat("updating ", label);
  auto apply = [&](Connection& db) {
    return SaveStudyRow(db, study, label, what);
  };
  Write write(what, apply);
  return Submit(write);
}

absl::Status SqliteStore::ModifyStudy(
    std::string_view name, absl::FunctionRef<void(v1::Study&)> modify) {
  const std::string label = StudyLabel(name);
  const std::string what = absl::StrCat("modifying ", label);
  // Read and written inside the batch's transaction: no other write can
  // come in between.
  auto apply = [&](Connection& db) -> absl::Status {
    v1::Study study;
    if (absl::Status s = LoadStudyRow(db, name, label, what, study); !s.ok()) {
      return s;
    }
    modify(study);
    return SaveStudyRow(db, study, label, what);
  };
  Write write(what, apply);
  return Submit(write);
}

absl::Status SqliteStore::DeleteStudy(std::string_view name) {
  const std::string label = StudyLabel(name);
  const std::string what = absl::StrCat("deleting ", label);
  auto apply = [&](Connection& db) -> absl::Status {
    absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kDeleteStudy);
    if (!statement.ok()) return statement.status();
    // The trials go with it: ON DELETE CASCADE.
    Query query(db.db(), *statement, what);
    query.BindBytes(1, name);
    if (absl::Status s = query.Run(); !s.ok()) return s;
    if (sqlite3_changes(db.db()) == 0) {
      return absl::NotFoundError(absl::StrCat(label, " not found"));
    }
    return absl::OkStatus();
  };
  Write write(what, apply);
  return Submit(write);
}

// ----- Trials -----

absl::StatusOr<std::vector<v1::Trial>> SqliteStore::CreateTrials(
    std::string_view study_name, std::vector<v1::Trial> trials) {
  const std::string what =
      absl::StrCat("creating trials in ", StudyLabel(study_name));
  // Ids are known only inside the batch, so the trials are serialized there.
  auto apply = [&](Connection& db) -> absl::Status {
    absl::StatusOr<int64_t> study_id = db.StudyId(study_name);
    if (!study_id.ok()) return study_id.status();

    int64_t last_id = 0;
    int64_t last_sequence = 0;
    {
      absl::StatusOr<sqlite3_stmt*> statement =
          db.Prepared(kMaxTrialIdAndSequence);
      if (!statement.ok()) return statement.status();
      Query query(db.db(), *statement, what);
      query.BindInt(1, *study_id);
      absl::StatusOr<bool> row = query.Step();
      if (!row.ok()) return row.status();
      if (*row) {
        last_id = query.Int(0);
        last_sequence = query.Int(1);
      }
    }

    absl::StatusOr<sqlite3_stmt*> insert = db.Prepared(kInsertTrial);
    if (!insert.ok()) return insert.status();
    for (v1::Trial& trial : trials) {
      trial.set_study_name(std::string(study_name));
      trial.set_id(++last_id);
      const std::string label = TrialLabel(study_name, trial.id());
      absl::StatusOr<std::string> bytes = SerializeForStore(trial, label);
      if (!bytes.ok()) return bytes.status();
      Query query(db.db(), *insert, absl::StrCat("creating ", label));
      query.BindInt(1, *study_id)
          .BindInt(2, trial.id())
          .BindInt(3, trial.state())
          .BindBytes(4, trial.client_id())
          .BindBytes(5, *bytes)
          .BindInt(6, ++last_sequence);
      if (absl::Status s = query.Run(); !s.ok()) return s;
    }
    return absl::OkStatus();
  };
  Write write(what, apply);
  if (absl::Status s = Submit(write); !s.ok()) return s;
  return trials;
}

absl::Status SqliteStore::ReadStudy(
    std::string_view study_name, const std::string& what,
    absl::FunctionRef<absl::Status(Connection&, int64_t)> read) {
  return Read([&](Connection& db) -> absl::Status {
    // One read transaction: the study check and the rows agree.
    Connection::Transaction transaction(db);
    if (absl::Status s = transaction.Begin(kBeginRead, what); !s.ok()) {
      return s;
    }
    absl::StatusOr<int64_t> study_id = db.StudyId(study_name);
    if (!study_id.ok()) return study_id.status();
    if (absl::Status s = read(db, *study_id); !s.ok()) return s;
    return transaction.Commit(what);
  });
}

absl::Status SqliteStore::LoadTrialRow(Connection& db,
                                       std::string_view study_name,
                                       int64_t trial_id,
                                       const std::string& label,
                                       const std::string& what,
                                       v1::Trial& trial) {
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kSelectTrial);
  if (!statement.ok()) return statement.status();
  Query query(db.db(), *statement, what);
  query.BindBytes(1, study_name).BindInt(2, trial_id);
  absl::StatusOr<bool> row = query.Step();
  if (!row.ok()) return row.status();
  if (!*row) {
    // Say which of the two is missing.
    absl::StatusOr<int64_t> study_id = db.StudyId(study_name);
    if (!study_id.ok()) return study_id.status();
    return absl::NotFoundError(absl::StrCat(label, " not found"));
  }
  return Parse(query.Bytes(0), trial, label);
}

absl::StatusOr<v1::Trial> SqliteStore::GetTrial(std::string_view study_name,
                                                int64_t trial_id) {
  const std::string label = TrialLabel(study_name, trial_id);
  const std::string what = absl::StrCat("reading ", label);
  v1::Trial trial;
  absl::Status status = Read([&](Connection& db) {
    return LoadTrialRow(db, study_name, trial_id, label, what, trial);
  });
  if (!status.ok()) return status;
  return trial;
}

absl::Status SqliteStore::UpdateTrial(const v1::Trial& trial) {
  return ReplaceTrial(trial, nullptr, /*record_change=*/true);
}

absl::Status SqliteStore::UpdateTrialIf(const v1::Trial& trial,
                                        const TrialVersion& read) {
  return ReplaceTrial(trial, &read, /*record_change=*/true);
}

absl::Status SqliteStore::RenewTrialLease(const v1::Trial& trial) {
  const TrialVersion same = TrialVersion::Of(trial);
  return ReplaceTrial(trial, &same, /*record_change=*/false);
}

absl::Status SqliteStore::ReplaceTrial(const v1::Trial& trial,
                                       const TrialVersion* read,
                                       bool record_change) {
  const std::string label = TrialLabel(trial.study_name(), trial.id());
  absl::StatusOr<std::string> bytes = SerializeForStore(trial, label);
  if (!bytes.ok()) return bytes.status();

  const std::string what = absl::StrCat("updating ", label);
  // Returns whether `sql` (kUpdateTrialMessage or kUpdateTrial) changed the
  // row.
  auto run = [&](Connection& db, const char* sql) -> absl::StatusOr<bool> {
    absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(sql);
    if (!statement.ok()) return statement.status();
    Query query(db.db(), *statement, what);
    query.BindBytes(1, trial.study_name())
        .BindInt(2, trial.id())
        .BindInt(3, trial.state())
        .BindBytes(4, trial.client_id())
        .BindBytes(5, *bytes);
    if (absl::Status s = query.Run(); !s.ok()) return s;
    return sqlite3_changes(db.db()) != 0;
  };
  auto apply = [&](Connection& db) -> absl::Status {
    if (read != nullptr) {
      // Inside the batch's transaction: no write comes in between.
      v1::Trial stored;
      if (absl::Status s = LoadTrialRow(db, trial.study_name(), trial.id(),
                                        label, what, stored);
          !s.ok()) {
        return s;
      }
      if (absl::Status s = CheckVersion(stored, *read); !s.ok()) return s;
    }
    // Most updates (reports) keep the state and the client: then only the
    // message changes and no index needs rewriting.
    absl::StatusOr<bool> changed =
        run(db, record_change ? kUpdateTrialMessage : kRenewTrialLease);
    if (!changed.ok()) return changed.status();
    if (*changed) return absl::OkStatus();
    changed = run(db, kUpdateTrial);
    if (!changed.ok()) return changed.status();
    if (!*changed) {
      absl::StatusOr<int64_t> study_id = db.StudyId(trial.study_name());
      if (!study_id.ok()) return study_id.status();
      return absl::NotFoundError(absl::StrCat(label, " not found"));
    }
    return absl::OkStatus();
  };
  Write write(what, apply);
  return Submit(write);
}

absl::StatusOr<std::vector<v1::Trial>> SqliteStore::ListTrials(
    std::string_view study_name, const TrialQuery& query) {
  if (absl::Status s = CheckLimit(query.limit); !s.ok()) return s;
  const std::vector<int> states = DistinctStates(query.states);

  // The text depends only on whether there is a client filter and on how
  // many states there are, so each shape is prepared once; the values
  // themselves are bound.
  // A client's trials, and trials in the states of running work, are few:
  // find them by index, not by scanning the study in id order (which the
  // planner would otherwise pick for the ORDER BY).
  const char* index = "";
  if (!query.client_id.empty()) {
    index = " INDEXED BY trials_by_client";
  } else if (!states.empty() &&
             std::all_of(states.begin(), states.end(), IsLiveState)) {
    index = " INDEXED BY trials_by_state";
  }
  std::string sql = absl::StrCat("SELECT trial_id, trial FROM trials", index,
                                 " WHERE study_id = ?1 AND trial_id > ?2");
  int next_index = 4;  // ?3 is the limit.
  const int client_index = query.client_id.empty() ? 0 : next_index++;
  if (client_index != 0) {
    absl::StrAppend(&sql, " AND client_id = ?", client_index);
  }
  const int first_state_index = next_index;
  if (!states.empty()) {
    absl::StrAppend(&sql, " AND ");
    AppendInList(sql, "state", first_state_index, states.size());
  }
  absl::StrAppend(&sql, " ORDER BY trial_id LIMIT ?3");

  const std::string what =
      absl::StrCat("listing trials of ", StudyLabel(study_name));
  std::vector<v1::Trial> trials;
  absl::Status status = ReadStudy(
      study_name, what, [&](Connection& db, int64_t study_id) -> absl::Status {
        absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(sql);
        if (!statement.ok()) return statement.status();
        {
          Query rows(db.db(), *statement, what);
          rows.BindInt(1, study_id)
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
            if (absl::Status s = Parse(rows.Bytes(1), trial,
                                       TrialLabel(study_name, rows.Int(0)));
                !s.ok()) {
              return s;
            }
          }
        }
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return trials;
}

absl::StatusOr<std::vector<TrialChange>> SqliteStore::ListTrialChanges(
    std::string_view study_name, int64_t after_sequence, int limit) {
  if (absl::Status s = CheckLimit(limit); !s.ok()) return s;
  const std::string what =
      absl::StrCat("listing trial changes of ", StudyLabel(study_name));
  std::vector<TrialChange> changes;
  absl::Status status = ReadStudy(
      study_name, what, [&](Connection& db, int64_t study_id) -> absl::Status {
        absl::StatusOr<sqlite3_stmt*> statement =
            db.Prepared(kListTrialChanges);
        if (!statement.ok()) return statement.status();
        {
          Query rows(db.db(), *statement, what);
          rows.BindInt(1, study_id)
              .BindInt(2, after_sequence)
              .BindInt(3, limit == 0 ? -1 : limit);
          while (true) {
            absl::StatusOr<bool> row = rows.Step();
            if (!row.ok()) return row.status();
            if (!*row) break;
            TrialChange& change = changes.emplace_back();
            change.sequence = rows.Int(1);
            if (absl::Status s = Parse(rows.Bytes(2), change.trial,
                                       TrialLabel(study_name, rows.Int(0)));
                !s.ok()) {
              return s;
            }
          }
        }
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return changes;
}

absl::StatusOr<absl::flat_hash_map<v1::Trial::State, int64_t>>
SqliteStore::CountTrials(std::string_view study_name) {
  const std::string what =
      absl::StrCat("counting trials of ", StudyLabel(study_name));
  absl::flat_hash_map<v1::Trial::State, int64_t> counts;
  absl::Status status = ReadStudy(
      study_name, what, [&](Connection& db, int64_t study_id) -> absl::Status {
        absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kCountTrials);
        if (!statement.ok()) return statement.status();
        {
          Query query(db.db(), *statement, what);
          query.BindInt(1, study_id);
          while (true) {
            absl::StatusOr<bool> row = query.Step();
            if (!row.ok()) return row.status();
            if (!*row) break;
            counts[static_cast<v1::Trial::State>(query.Int(0))] = query.Int(1);
          }
        }
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return counts;
}

absl::StatusOr<std::vector<v1::Trial>> SqliteStore::ListTrialsInStates(
    const std::vector<v1::Trial::State>& states) {
  const std::vector<int> distinct = DistinctStates(states);
  // One text per number of states; the trials_in_state index finds the rows.
  std::string sql =
      "SELECT s.name, t.trial_id, t.trial FROM trials t "
      "JOIN studies s ON s.id = t.study_id";
  if (!distinct.empty()) {
    absl::StrAppend(&sql, " WHERE ");
    AppendInList(sql, "t.state", 1, distinct.size());
  }
  absl::StrAppend(&sql, " ORDER BY s.name, t.trial_id");

  std::vector<v1::Trial> trials;
  absl::Status status = Read([&](Connection& db) -> absl::Status {
    absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(sql);
    if (!statement.ok()) return statement.status();
    Query rows(db.db(), *statement, "listing trials by state");
    for (size_t i = 0; i < distinct.size(); ++i) {
      rows.BindInt(static_cast<int>(i) + 1, distinct[i]);
    }
    while (true) {
      absl::StatusOr<bool> row = rows.Step();
      if (!row.ok()) return row.status();
      if (!*row) return absl::OkStatus();
      v1::Trial& trial = trials.emplace_back();
      if (absl::Status s = Parse(rows.Bytes(2), trial,
                                 TrialLabel(rows.Bytes(0), rows.Int(1)));
          !s.ok()) {
        return s;
      }
    }
  });
  if (!status.ok()) return status;
  return trials;
}

absl::StatusOr<std::string> SqliteStore::IntegrityCheck() {
  std::vector<std::string> lines;
  absl::Status status = Read([&](Connection& db) -> absl::Status {
    absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kIntegrityCheck);
    if (!statement.ok()) return statement.status();
    Query query(db.db(), *statement, "running integrity_check");
    while (true) {
      absl::StatusOr<bool> row = query.Step();
      if (!row.ok()) return row.status();
      if (!*row) return absl::OkStatus();
      lines.emplace_back(query.Bytes(0));
    }
  });
  if (!status.ok()) return status;
  return absl::StrJoin(lines, "\n");
}

}  // namespace hypertune::storage
