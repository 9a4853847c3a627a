#include "storage/postgres/schema.h"

#include <span>
#include <string>

#include "absl/strings/str_cat.h"
#include "storage/postgres/connection.h"

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
    "CREATE INDEX trials_by_client ON trials(study_id, sha256(client_id), "
    "trial_id)",
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

struct Migration {
  // The version the database has once the step has run.
  int version;
  std::span<const char* const> statements;
};

// Applied in order, each once; append, never edit a released step.
constexpr Migration kMigrations[] = {
    {1, kSchemaV1},
    {2, kSchemaV2},
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
  absl::StatusOr<Result> recorded =
      db.Run(kInsertVersion, Params().Int(migration.version), what);
  return recorded.status();
}

}  // namespace

absl::Status Migrate(Connection& db) {
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
    if (migration.version <= current) continue;
    if (absl::Status s = Apply(db, migration); !s.ok()) return s;
  }
  return transaction.Commit(kWhat);
}

}  // namespace hypertune::storage::postgres
