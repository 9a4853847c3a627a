#include "storage/sqlite/schema.h"

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hypertune/v1/hypertune.pb.h"
#include "storage/sqlite/tables.h"

namespace hypertune::storage::sqlite {

namespace {

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
    ("INSERT INTO trial_counts(study_id, state, n) "
     "SELECT study_id, state, COUNT(*) FROM trials GROUP BY study_id, state"),
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

// Version 5: conditional trial updates (UpdateTrialIf, RenewTrialLease)
// compare the lease epoch in their WHERE clause instead of reading and
// parsing the stored message. Existing rows take it from their message
// (BackfillLeaseEpochs).
constexpr const char* kSchemaV5[] = {
    "ALTER TABLE trials ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0",
};

// Version 6: a report costs the same however long the trial's curve is.
// Each measurement is a row of its own, stored as the bytes it takes in its
// trial's message (the repeated field's tag, length and value), so that a
// trial reads back as its row's message followed by its measurements' bytes,
// parsed once; the trial row keeps the rest, with how many measurements
// there are and their size. Existing unfinished trials are split
// (SplitMeasurements); finished ones keep their curve in their message
// (tables.h: KeepsCurveInline).
constexpr const char* kSchemaV6[] = {
    R"sql(CREATE TABLE measurements(
      study_id INTEGER NOT NULL,
      trial_id INTEGER NOT NULL,
      idx INTEGER NOT NULL,
      data BLOB NOT NULL,
      PRIMARY KEY(study_id, trial_id, idx),
      FOREIGN KEY(study_id, trial_id) REFERENCES trials(study_id, trial_id)
        ON DELETE CASCADE) WITHOUT ROWID)sql",
    "ALTER TABLE trials ADD COLUMN measurements INTEGER NOT NULL DEFAULT 0",
    ("ALTER TABLE trials ADD COLUMN measurement_bytes INTEGER NOT NULL "
     "DEFAULT 0"),
};

constexpr char kSelectTrialMessages[] =
    "SELECT study_id, trial_id, trial FROM trials";
constexpr char kSetLeaseEpoch[] =
    "UPDATE trials SET lease_epoch = ?3 WHERE study_id = ?1 AND trial_id = ?2";

// Copies each stored trial's lease epoch into its lease_epoch column.
absl::Status BackfillLeaseEpochs(Connection& db, const std::string& what) {
  struct Epoch {
    int64_t study_id;
    int64_t trial_id;
    int64_t lease_epoch;
  };
  // Collected first: the rows are not updated under the scan that reads
  // them.
  std::vector<Epoch> epochs;
  {
    absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kSelectTrialMessages);
    if (!statement.ok()) return statement.status();
    Query rows(db.db(), *statement, what);
    absl::Status status = rows.ForEachRow([&] {
      const std::string_view bytes = rows.Bytes(2);
      v1::Trial trial;
      // A message that does not parse keeps 0: reading that trial reports
      // DATA_LOSS as before, rather than the whole file failing to open.
      if (trial.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) &&
          trial.lease_epoch() != 0) {
        epochs.push_back({rows.Int(0), rows.Int(1), trial.lease_epoch()});
      }
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
  }
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kSetLeaseEpoch);
  if (!statement.ok()) return statement.status();
  for (const Epoch& epoch : epochs) {
    Query update(db.db(), *statement, what);
    update.BindInt(1, epoch.study_id)
        .BindInt(2, epoch.trial_id)
        .BindInt(3, epoch.lease_epoch);
    if (absl::Status s = update.Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

constexpr char kSetTrialHead[] =
    "UPDATE trials SET trial = ?3, measurements = ?4, measurement_bytes = ?5 "
    "WHERE study_id = ?1 AND trial_id = ?2";
constexpr char kInsertMeasurementRow[] =
    "INSERT INTO measurements(study_id, trial_id, idx, data) "
    "VALUES (?1, ?2, ?3, ?4)";

// Moves the measurements of each stored unfinished trial out of its message
// into rows of their own (kSchemaV6).
absl::Status SplitMeasurements(Connection& db, const std::string& what) {
  struct Split {
    int64_t study_id;
    int64_t trial_id;
    StoredTrial rows;
  };
  // Collected first: the rows are not updated under the scan that reads
  // them. Only unfinished trials with measurements are kept.
  std::vector<Split> splits;
  {
    absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kSelectTrialMessages);
    if (!statement.ok()) return statement.status();
    Query rows(db.db(), *statement, what);
    absl::Status status = rows.ForEachRow([&] {
      const std::string_view bytes = rows.Bytes(2);
      v1::Trial trial;
      // A message that does not parse stays as it is: reading that trial
      // reports DATA_LOSS as before.
      if (!trial.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) ||
          trial.measurements_size() == 0 || KeepsCurveInline(trial.state())) {
        return absl::OkStatus();
      }
      absl::StatusOr<StoredTrial> split = SplitTrial(trial, what);
      if (!split.ok()) return split.status();
      splits.push_back({rows.Int(0), rows.Int(1), *std::move(split)});
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
  }
  absl::StatusOr<sqlite3_stmt*> head = db.Prepared(kSetTrialHead);
  if (!head.ok()) return head.status();
  absl::StatusOr<sqlite3_stmt*> insert = db.Prepared(kInsertMeasurementRow);
  if (!insert.ok()) return insert.status();
  for (const Split& split : splits) {
    {
      Query update(db.db(), *head, what);
      update.BindInt(1, split.study_id)
          .BindInt(2, split.trial_id)
          .BindBytes(3, split.rows.head)
          .BindInt(4, static_cast<int64_t>(split.rows.measurements.size()))
          .BindInt(5, split.rows.measurement_bytes);
      if (absl::Status s = update.Run(); !s.ok()) return s;
    }
    for (size_t i = 0; i < split.rows.measurements.size(); ++i) {
      Query row(db.db(), *insert, what);
      row.BindInt(1, split.study_id)
          .BindInt(2, split.trial_id)
          .BindInt(3, static_cast<int64_t>(i))
          .BindBytes(4, split.rows.measurements[i]);
      if (absl::Status s = row.Run(); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

struct Migration {
  // The version the file has once the step has run.
  int version;
  std::span<const char* const> statements;
  // Runs after `statements` where rows need C++ (parsing messages); null if
  // none. `what` names the step in errors.
  absl::Status (*fill)(Connection& db, const std::string& what) = nullptr;
};

// Applied in order, each once; append, never edit a released step.
constexpr Migration kMigrations[] = {
    {1, kSchemaV1},
    {2, kSchemaV2},
    {3, kSchemaV3},
    {4, kSchemaV4},
    {5, kSchemaV5, BackfillLeaseEpochs},
    {6, kSchemaV6, SplitMeasurements},
};
static_assert(std::size(kMigrations) == kSchemaVersion &&
                  kMigrations[std::size(kMigrations) - 1].version ==
                      kSchemaVersion,
              "kSchemaVersion must be the last migration's version");

constexpr char kDropBackupMarker[] = "DROP TABLE IF EXISTS hypertune_backup";
constexpr char kCreateVersionTable[] =
    "CREATE TABLE IF NOT EXISTS schema_version("
    "version INTEGER PRIMARY KEY, applied_time_ms INTEGER NOT NULL)";
constexpr char kSelectVersion[] =
    "SELECT COALESCE(MAX(version), 0) FROM schema_version";
constexpr char kInsertVersion[] =
    "INSERT INTO schema_version(version, applied_time_ms) VALUES (?1, ?2)";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The file's schema version; 0 for a new file.
absl::StatusOr<int64_t> ReadVersion(Connection& db) {
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kSelectVersion);
  if (!statement.ok()) return statement.status();
  Query query(db.db(), *statement, "reading the schema version");
  absl::StatusOr<bool> row = query.Step();
  if (!row.ok()) return row.status();
  return *row ? query.Int(0) : 0;
}

// Runs one migration and records it.
absl::Status Apply(Connection& db, const Migration& migration) {
  const std::string what =
      absl::StrCat("migrating the schema to version ", migration.version);
  for (const char* sql : migration.statements) {
    absl::StatusOr<std::string> ran = db.RunOnce(sql, what);
    if (!ran.ok()) return ran.status();
  }
  if (migration.fill != nullptr) {
    if (absl::Status s = migration.fill(db, what); !s.ok()) return s;
  }
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kInsertVersion);
  if (!statement.ok()) return statement.status();
  Query query(db.db(), *statement, what);
  query.BindInt(1, migration.version).BindInt(2, NowMs());
  return query.Run();
}

}  // namespace

absl::Status Migrate(Connection& db) {
  Transaction transaction(db);
  if (absl::Status s = transaction.Begin(kBegin, "migrating the schema");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> created =
      db.RunOnce(kCreateVersionTable, "creating table schema_version");
  if (!created.ok()) return created.status();
  absl::StatusOr<int64_t> version = ReadVersion(db);
  if (!version.ok()) return version.status();
  if (*version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the schema version is ", *version, ", newer than the ", kSchemaVersion,
        " this build of hypertune knows; open it with a newer "
        "hypertuned"));
  }
  for (const Migration& migration : kMigrations) {
    if (migration.version <= *version) continue;
    if (absl::Status s = Apply(db, migration); !s.ok()) return s;
  }
  // A backup restored and served is live: no later backup may replace it.
  if (absl::StatusOr<std::string> unmarked =
          db.RunOnce(kDropBackupMarker, "unmarking a restored backup");
      !unmarked.ok()) {
    return unmarked.status();
  }
  return transaction.Commit("migrating the schema");
}

}  // namespace hypertune::storage::sqlite
