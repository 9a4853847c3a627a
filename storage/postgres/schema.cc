#include "storage/postgres/schema.h"

#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hypertune/v1/hypertune.pb.h"
#include "storage/postgres/connection.h"
#include "storage/postgres/tables.h"
#include "storage/store_util.h"

namespace hypertune::storage::postgres {

namespace {

// Version 1: studies and trials, each row holding its serialized message
// beside the columns that lookups and conditional updates compare. Names
// and client ids are bytea so that any bytes (NUL included) compare exactly
// and sort like std::string. They are unique or indexed through their
// sha256, since a btree entry holds at most about 2.7 kB and a name may be
// longer. Each study keeps the last trial id and change sequence number it
// gave out: taking the next ones locks the study's row, which orders the
// study's writes.
constexpr const char* kSchemaV1[] = {
    R"sql(CREATE TABLE studies(
      id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      name BYTEA NOT NULL,
      state INTEGER NOT NULL,
      create_time_ms BIGINT NOT NULL,
      last_trial_id BIGINT NOT NULL DEFAULT 0,
      last_sequence BIGINT NOT NULL DEFAULT 0,
      study BYTEA NOT NULL))sql",
    "CREATE UNIQUE INDEX studies_by_name ON studies(sha256(name))",
    R"sql(CREATE TABLE trials(
      study_id BIGINT NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
      trial_id BIGINT NOT NULL,
      state INTEGER NOT NULL,
      client_id BYTEA NOT NULL,
      lease_epoch BIGINT NOT NULL,
      sequence BIGINT NOT NULL,
      trial BYTEA NOT NULL,
      PRIMARY KEY(study_id, trial_id)))sql",
    "CREATE INDEX trials_by_state ON trials(study_id, state, trial_id)",
    ("CREATE INDEX trials_by_client ON trials(study_id, sha256(client_id), "
     "trial_id)"),
    "CREATE INDEX trials_by_sequence ON trials(study_id, sequence)",
    "CREATE INDEX trials_in_state ON trials(state)",
};

// Version 2: a trial's write in one round trip. The function takes the
// study's next change sequence number (locking the study's row), then
// writes the trial, if `read_state` is NULL or while it still has the
// lease epoch and state the caller read. A write that misses gives its
// number back, which is safe because the study's row stays locked until
// the transaction ends: the sequence has no gaps.
constexpr const char* kSchemaV2[] = {
    R"sql(CREATE FUNCTION hypertune_update_trial(
      in_study_name BYTEA, in_trial_id BIGINT, new_state BIGINT,
      new_client_id BYTEA, new_lease_epoch BIGINT, new_trial BYTEA,
      read_lease_epoch BIGINT, read_state BIGINT)
    RETURNS BOOLEAN LANGUAGE plpgsql AS $$
    DECLARE
      the_study BIGINT;
      taken BIGINT;
    BEGIN
      UPDATE studies SET last_sequence = last_sequence + 1
        WHERE sha256(name) = sha256(in_study_name) AND name = in_study_name
        RETURNING id, last_sequence INTO the_study, taken;
      IF NOT FOUND THEN
        RETURN FALSE;
      END IF;
      UPDATE trials SET state = new_state, client_id = new_client_id,
          lease_epoch = new_lease_epoch, trial = new_trial, sequence = taken
        WHERE study_id = the_study AND trial_id = in_trial_id
          AND (read_state IS NULL
               OR (lease_epoch = read_lease_epoch AND state = read_state));
      IF FOUND THEN
        RETURN TRUE;
      END IF;
      UPDATE studies SET last_sequence = last_sequence - 1
        WHERE id = the_study;
      RETURN FALSE;
    END $$)sql",
};

// Version 3: a report costs the same however long the trial's curve is.
// An unfinished trial's measurements are rows of table measurements, each
// the bytes it takes in the trial's message (the repeated field's tag,
// length and value), so that the trial row's message followed by its rows
// in order parses as the whole trial; the row counts them and their bytes.
// A finished trial keeps its curve in its message (tables.h:
// KeepsCurveInline). Existing unfinished trials are split
// (SplitMeasurements).
//
// hypertune_write_trial replaces hypertune_update_trial (dropped, so that
// a server of an older build, which would write a curve into the message
// beside its rows, fails its writes instead): it also moves the curve,
// keeping the rows already stored while the last one kept is unchanged
// (measurements are only appended, or all moved away), and without
// `record_change` it takes no sequence number and no study lock (lease
// renewals). hypertune_append_measurement stores a trial's head and one
// measurement row, fenced like a conditional write.
constexpr const char* kSchemaV3[] = {
    R"sql(CREATE TABLE measurements(
      study_id BIGINT NOT NULL,
      trial_id BIGINT NOT NULL,
      idx BIGINT NOT NULL,
      data BYTEA NOT NULL,
      PRIMARY KEY(study_id, trial_id, idx),
      FOREIGN KEY(study_id, trial_id) REFERENCES trials(study_id, trial_id)
        ON DELETE CASCADE))sql",
    "ALTER TABLE trials ADD COLUMN measurements BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE trials ADD COLUMN measurement_bytes BIGINT NOT NULL "
    "DEFAULT 0",
    "DROP FUNCTION hypertune_update_trial(BYTEA, BIGINT, BIGINT, BYTEA, "
    "BIGINT, BYTEA, BIGINT, BIGINT)",
    R"sql(CREATE FUNCTION hypertune_write_trial(
      in_study_name BYTEA, in_trial_id BIGINT, new_state BIGINT,
      new_client_id BYTEA, new_lease_epoch BIGINT, new_trial BYTEA,
      read_lease_epoch BIGINT, read_state BIGINT, record_change BOOLEAN,
      new_measurements BYTEA[], new_measurement_bytes BIGINT)
    RETURNS BOOLEAN LANGUAGE plpgsql AS $$
    DECLARE
      the_study BIGINT;
      taken BIGINT;
      before BIGINT;
      keep BIGINT;
      total BIGINT := cardinality(new_measurements);
    BEGIN
      IF record_change THEN
        UPDATE studies SET last_sequence = last_sequence + 1
          WHERE sha256(name) = sha256(in_study_name) AND name = in_study_name
          RETURNING id, last_sequence INTO the_study, taken;
      ELSE
        SELECT id INTO the_study FROM studies
          WHERE sha256(name) = sha256(in_study_name) AND name = in_study_name;
      END IF;
      IF NOT FOUND THEN
        RETURN FALSE;
      END IF;
      -- Locked first, so that its row count is still right when the rows
      -- are moved.
      SELECT measurements INTO before FROM trials
        WHERE study_id = the_study AND trial_id = in_trial_id
          AND (read_state IS NULL
               OR (lease_epoch = read_lease_epoch AND state = read_state))
        FOR UPDATE;
      IF NOT FOUND THEN
        IF record_change THEN
          UPDATE studies SET last_sequence = last_sequence - 1
            WHERE id = the_study;
        END IF;
        RETURN FALSE;
      END IF;
      UPDATE trials SET state = new_state, client_id = new_client_id,
          lease_epoch = new_lease_epoch, trial = new_trial,
          measurements = total, measurement_bytes = new_measurement_bytes,
          sequence = COALESCE(taken, sequence)
        WHERE study_id = the_study AND trial_id = in_trial_id;
      keep := LEAST(before, total);
      IF keep > 0 AND (SELECT data FROM measurements
                       WHERE study_id = the_study AND trial_id = in_trial_id
                         AND idx = keep - 1)
                      IS DISTINCT FROM new_measurements[keep] THEN
        keep := 0;
      END IF;
      IF keep < before THEN
        DELETE FROM measurements
          WHERE study_id = the_study AND trial_id = in_trial_id
            AND idx >= keep;
      END IF;
      IF keep < total THEN
        INSERT INTO measurements(study_id, trial_id, idx, data)
          SELECT the_study, in_trial_id, keep + u.n - 1, u.data
          FROM unnest(new_measurements[keep + 1 : total])
            WITH ORDINALITY AS u(data, n);
      END IF;
      RETURN TRUE;
    END $$)sql",
    R"sql(CREATE FUNCTION hypertune_append_measurement(
      in_study_name BYTEA, in_trial_id BIGINT, new_state BIGINT,
      new_client_id BYTEA, new_lease_epoch BIGINT, new_trial BYTEA,
      read_lease_epoch BIGINT, read_state BIGINT, new_measurement BYTEA)
    RETURNS BOOLEAN LANGUAGE plpgsql AS $$
    DECLARE
      the_study BIGINT;
      taken BIGINT;
      total BIGINT;
    BEGIN
      UPDATE studies SET last_sequence = last_sequence + 1
        WHERE sha256(name) = sha256(in_study_name) AND name = in_study_name
        RETURNING id, last_sequence INTO the_study, taken;
      IF NOT FOUND THEN
        RETURN FALSE;
      END IF;
      UPDATE trials SET state = new_state, client_id = new_client_id,
          lease_epoch = new_lease_epoch, trial = new_trial,
          measurements = measurements + 1,
          measurement_bytes = measurement_bytes + length(new_measurement),
          sequence = taken
        WHERE study_id = the_study AND trial_id = in_trial_id
          AND lease_epoch = read_lease_epoch AND state = read_state
        RETURNING measurements INTO total;
      IF NOT FOUND THEN
        UPDATE studies SET last_sequence = last_sequence - 1
          WHERE id = the_study;
        RETURN FALSE;
      END IF;
      INSERT INTO measurements(study_id, trial_id, idx, data)
        VALUES (the_study, in_trial_id, total - 1, new_measurement);
      RETURN TRUE;
    END $$)sql",
};

constexpr char kSelectUnfinishedTrials[] =
    "SELECT study_id, trial_id, trial FROM trials WHERE NOT state = ANY($1) "
    "ORDER BY study_id, trial_id";

// Moves the measurements of each stored unfinished trial out of its message
// into rows of their own (kSchemaV3).
absl::Status SplitMeasurements(Connection& db, const std::string& what) {
  std::vector<int> finished;
  for (int state = v1::Trial::State_MIN; state <= v1::Trial::State_MAX;
       ++state) {
    if (v1::Trial::State_IsValid(state) &&
        KeepsCurveInline(static_cast<v1::Trial::State>(state))) {
      finished.push_back(state);
    }
  }
  absl::StatusOr<Result> rows =
      db.Run(kSelectUnfinishedTrials, Params().Ints(finished), what);
  if (!rows.ok()) return rows.status();
  for (int i = 0; i < rows->rows(); ++i) {
    const std::string_view bytes = rows->Bytes(i, 2);
    v1::Trial trial;
    // A message that does not parse stays as it is: reading that trial
    // reports DATA_LOSS as before.
    if (!trial.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) ||
        trial.measurements_size() == 0) {
      continue;
    }
    absl::StatusOr<StoredTrial> split =
        SplitTrial(trial, TrialLabel(trial.study_name(), trial.id()));
    if (!split.ok()) return split.status();
    if (absl::Status s = StoreMeasurementRows(db, rows->Int(i, 0),
                                              rows->Int(i, 1), *split, what);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

struct Migration {
  // The version the database has once the step has run.
  int version;
  std::span<const char* const> statements;
  // Run after the statements, for what SQL alone cannot do; may be null.
  absl::Status (*then)(Connection& db, const std::string& what) = nullptr;
};

// Applied in order, each once; append, never edit a released step.
constexpr Migration kMigrations[] = {
    {1, kSchemaV1},
    {2, kSchemaV2},
    {3, kSchemaV3, SplitMeasurements},
};
static_assert(std::size(kMigrations) == kSchemaVersion &&
                  kMigrations[std::size(kMigrations) - 1].version ==
                      kSchemaVersion,
              "kSchemaVersion must be the last migration's version");

// Held until the migrating transaction ends; any fixed number that other
// users of the database do not take ("hypt" in ASCII).
constexpr char kLockMigrations[] = "SELECT pg_advisory_xact_lock(1752789108)";
constexpr char kCreateVersionTable[] =
    "CREATE TABLE IF NOT EXISTS schema_version("
    "version INTEGER PRIMARY KEY, "
    "applied_time TIMESTAMPTZ NOT NULL DEFAULT now())";
constexpr char kSelectVersion[] =
    "SELECT COALESCE(MAX(version), 0)::BIGINT FROM schema_version";
constexpr char kInsertVersion[] =
    "INSERT INTO schema_version(version) VALUES ($1)";

// Runs one migration and records it.
absl::Status Apply(Connection& db, const Migration& migration) {
  const std::string what =
      absl::StrCat("migrating the schema to version ", migration.version);
  for (const char* sql : migration.statements) {
    absl::StatusOr<std::string> ran = db.Execute(sql, what);
    if (!ran.ok()) return ran.status();
  }
  if (migration.then != nullptr) {
    if (absl::Status s = migration.then(db, what); !s.ok()) return s;
  }
  absl::StatusOr<Result> recorded =
      db.Run(kInsertVersion, Params().Int(migration.version), what);
  return recorded.status();
}

}  // namespace

absl::Status Migrate(Connection& db) { return MigrateTo(db, kSchemaVersion); }

absl::Status MigrateTo(Connection& db, int target) {
  constexpr char kWhat[] = "migrating the schema";
  Transaction transaction(db);
  if (absl::Status s = transaction.Begin(kWhat); !s.ok()) return s;
  if (absl::StatusOr<std::string> s = db.Execute(kLockMigrations, kWhat);
      !s.ok()) {
    return s.status();
  }
  absl::StatusOr<std::string> created =
      db.Execute(kCreateVersionTable, "creating table schema_version");
  if (!created.ok()) return created.status();
  absl::StatusOr<Result> version =
      db.Run(kSelectVersion, Params(), "reading the schema version");
  if (!version.ok()) return version.status();
  const int64_t current = version->Int(0, 0);
  if (current > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the schema version is ", current, ", newer than the ", kSchemaVersion,
        " this build of hypertune knows; open it with a newer hypertuned"));
  }
  for (const Migration& migration : kMigrations) {
    if (migration.version <= current || migration.version > target) continue;
    if (absl::Status s = Apply(db, migration); !s.ok()) return s;
  }
  return transaction.Commit(kWhat);
}

}  // namespace hypertune::storage::postgres
