#include "storage/postgres/tables.h"

#include <algorithm>
#include <optional>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "storage/store_util.h"

namespace hypertune::storage::postgres {

namespace {

// ----- Statements (fixed text; values only ever arrive as parameters) -----

// A study found by name: the unique index is on the name's sha256 (see
// schema.cc), the second test is the exact one.
#define HT_STUDY_NAMED(s, n) \
  "sha256(" s "name) = sha256(" n ") AND " s "name = " n

// A trial row's whole message: its own, followed by its measurement rows
// in order (StoredTrial). NULL for a NULL row.
#define HT_TRIAL_MESSAGE(t)                                        \
  "CASE WHEN " t "measurements = 0 THEN " t "trial ELSE " t        \
  "trial || "                                                      \
  "COALESCE((SELECT string_agg(m.data, ''::BYTEA ORDER BY m.idx) " \
  "FROM measurements m WHERE m.study_id = " t                      \
  "study_id "                                                      \
  "AND m.trial_id = " t "trial_id), ''::BYTEA) END"

constexpr char kInsertStudy[] =
    "INSERT INTO studies(name, state, create_time_ms, study) "
    "VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING";
constexpr char kSelectStudy[] =
    "SELECT study FROM studies WHERE " HT_STUDY_NAMED("", "$1");
constexpr char kSelectStudyForUpdate[] =
    "SELECT study FROM studies WHERE " HT_STUDY_NAMED("", "$1") " FOR UPDATE";
constexpr char kSelectStudyLastTrialId[] =
    "SELECT last_trial_id FROM studies WHERE " HT_STUDY_NAMED("", "$1");
constexpr char kListStudies[] = "SELECT name, study FROM studies ORDER BY name";
constexpr char kUpdateStudy[] =
    "UPDATE studies SET state = $2, create_time_ms = $3, study = $4 "
    "WHERE " HT_STUDY_NAMED("", "$1");
constexpr char kDeleteStudy[] =
    "DELETE FROM studies WHERE " HT_STUDY_NAMED("", "$1");

// Takes $2 trial ids and as many sequence numbers; returns the study's id
// and the last of each taken. Locks the study's row.
constexpr char kTakeTrialIds[] =
    "UPDATE studies SET last_trial_id = last_trial_id + $2, "
    "last_sequence = last_sequence + $2 "
    "WHERE " HT_STUDY_NAMED("", "$1") " RETURNING id, last_trial_id, "
                                      "last_sequence";
// One row if the study exists; its trial's columns are NULL if the trial
// does not.
constexpr char kSelectTrial[] =
    "SELECT s.id, " HT_TRIAL_MESSAGE("t.") " FROM studies s "
    "LEFT JOIN trials t "
    "ON t.study_id = s.id AND t.trial_id = $2 "
    "WHERE " HT_STUDY_NAMED("s.", "$1");
// The trial's message without its measurement rows, their count and size,
// and the latest of them.
constexpr char kSelectTrialHead[] =
    "SELECT s.id, t.trial, t.measurements, t.measurement_bytes, m.data "
    "FROM studies s LEFT JOIN trials t "
    "ON t.study_id = s.id AND t.trial_id = $2 "
    "LEFT JOIN measurements m ON m.study_id = s.id AND m.trial_id = $2 "
    "AND m.idx = t.measurements - 1 "
    "WHERE " HT_STUDY_NAMED("s.", "$1");
constexpr char kSelectStudyWithTrial[] =
    "SELECT s.study, " HT_TRIAL_MESSAGE("t.") " FROM studies s "
    "LEFT JOIN trials t "
    "ON t.study_id = s.id AND t.trial_id = $2 "
    "WHERE " HT_STUDY_NAMED("s.", "$1");
constexpr char kSelectTrialVersion[] =
    "SELECT s.id, t.state, t.lease_epoch FROM studies s LEFT JOIN trials t "
    "ON t.study_id = s.id AND t.trial_id = $2 "
    "WHERE " HT_STUDY_NAMED("s.", "$1");
// Replaces a trial under its study's next change sequence number (see
// schema.cc): $1 the study's name, $2 the trial's id, $3..$6 its state,
// client id, lease epoch and message, $7 and $8 the lease epoch and state
// the caller read, or NULL for an unconditional write, $9 and $10 its
// measurement rows and their size. True if written.
constexpr char kUpdateTrial[] =
    "SELECT hypertune_write_trial($1, $2, $3, $4, $5, $6, $7, $8, true, $9, "
    "$10)::INT4";
// Lease renewals: no sequence number, so no lock on the study's row. The
// trial's own lease epoch and state ($5, $3), which a renewal keeps, are
// the version compared; $7 and $8 its measurement rows and their size.
constexpr char kRenewTrialLease[] =
    "SELECT hypertune_write_trial($1, $2, $3, $4, $5, $6, $5, $3, false, $7, "
    "$8)::INT4";
// As kUpdateTrial, always conditional, for a head ($6) and one measurement
// row ($9) appended.
constexpr char kAppendMeasurement[] =
    "SELECT hypertune_append_measurement($1, $2, $3, $4, $5, $6, $7, $8, "
    "$9)::INT4";
// A trial row's counts and measurement rows, for a trial that has none.
constexpr char kSetTrialCounts[] =
    "UPDATE trials SET trial = $3, measurements = $4, measurement_bytes = $5 "
    "WHERE study_id = $1 AND trial_id = $2";
constexpr char kInsertMeasurementRows[] =
    "INSERT INTO measurements(study_id, trial_id, idx, data) "
    "SELECT $1, $2, u.n - 1, u.data FROM unnest($3::BYTEA[]) "
    "WITH ORDINALITY AS u(data, n)";
// The reads below return one row with NULL trial columns for a study with
// no matching trials, and no row for a missing study.
constexpr char kListTrialChanges[] =
    "SELECT s.id, t.trial_id, t.sequence, t.trial FROM studies s "
    "LEFT JOIN LATERAL (SELECT tt.trial_id, tt.sequence, "
    HT_TRIAL_MESSAGE("tt.") " AS trial FROM trials tt "
    "WHERE tt.study_id = s.id AND tt.sequence > $2 ORDER BY tt.sequence "
    "LIMIT $3) t "
    "ON true WHERE " HT_STUDY_NAMED("s.", "$1");
constexpr char kCountTrials[] =
    "SELECT s.id, c.state, c.n FROM studies s "
    "LEFT JOIN LATERAL (SELECT state, COUNT(*) AS n FROM trials "
    "WHERE study_id = s.id GROUP BY state) c "
    "ON true WHERE " HT_STUDY_NAMED("s.", "$1");
// A study's message and per-state counts (rows with a NULL trial id, the
// first), then its trials whose state is in $2 by id.
constexpr char kStudyOverview[] =
    "SELECT s.study, c.state, c.n, NULL::INT8, NULL::BYTEA FROM studies s "
    "LEFT JOIN LATERAL (SELECT state, COUNT(*) AS n FROM trials "
    "WHERE study_id = s.id GROUP BY state) c "
    "ON true WHERE " HT_STUDY_NAMED("s.", "$1") " UNION ALL "
    "SELECT NULL, NULL, NULL, t.trial_id, " HT_TRIAL_MESSAGE("t.") " "
    "FROM studies s "
    "JOIN trials t ON t.study_id = s.id AND t.state = ANY($2) "
    "WHERE " HT_STUDY_NAMED("s.", "$1") " ORDER BY 4 NULLS FIRST";

// Integrity: per study, its counters beside what its trials hold.
constexpr char kStudyTotals[] =
    "SELECT s.id, s.name, s.state, s.study, s.last_trial_id, s.last_sequence, "
    "COUNT(t.trial_id), COALESCE(MAX(t.trial_id), 0), "
    "COALESCE(MAX(t.sequence), 0), COUNT(DISTINCT t.sequence) "
    "FROM studies s LEFT JOIN trials t ON t.study_id = s.id "
    "GROUP BY s.id ORDER BY s.name";
// Integrity: a study's trials, a page at a time, with their measurement
// rows' count and size beside the counts their row keeps.
constexpr char kTrialRows[] =
    "SELECT t.trial_id, t.state, t.client_id, t.lease_epoch, "
    HT_TRIAL_MESSAGE("t.") ", t.measurements, t.measurement_bytes, "
    "(SELECT COUNT(*) FROM measurements m WHERE m.study_id = t.study_id "
    "AND m.trial_id = t.trial_id), "
    "(SELECT COALESCE(SUM(length(m.data)), 0)::INT8 FROM measurements m "
    "WHERE m.study_id = t.study_id AND m.trial_id = t.trial_id) "
    "FROM trials t "
    "WHERE t.study_id = $1 AND t.trial_id > $2 ORDER BY t.trial_id LIMIT $3";
constexpr int kIntegrityPage = 500;
constexpr size_t kMaxProblems = 10;

// For the statements built at run time (LoadTrials, LoadTrialsInStates).
constexpr char kTrialMessageOfTt[] = HT_TRIAL_MESSAGE("tt.");
constexpr char kTrialMessageOfT[] = HT_TRIAL_MESSAGE("t.");

#undef HT_STUDY_NAMED
#undef HT_TRIAL_MESSAGE

// ----- Helpers -----

// Trials inserted per statement: few round trips for a batch, and few
// statement texts (one per row count) prepared on each connection.
constexpr size_t kTrialsPerInsert = 64;

// Inserts `rows` trials in one statement: $1 the study's id, then per trial
// its id, state, client id, lease epoch, sequence number and message.
std::string InsertTrialsSql(size_t rows) {
  std::string sql =
      "INSERT INTO trials(study_id, trial_id, state, client_id, lease_epoch, "
      "sequence, trial) VALUES ";
  for (size_t row = 0, next = 2; row < rows; ++row, next += 6) {
    absl::StrAppend(&sql, row == 0 ? "" : ", ", "($1, $", next, ", $", next + 1,
                    ", $", next + 2, ", $", next + 3, ", $", next + 4, ", $",
                    next + 5, ")");
  }
  return sql;
}

// Inserts `rows` trials in one statement that also takes their ids and
// sequence numbers, if $3 is still the study's last trial id: $1 the
// study's name, $2 the number of rows, then per trial its state, client
// id, lease epoch and message (which holds its id, $3 + 1, $3 + 2, ...).
// Inserts nothing if the study has another last trial id (or none).
std::string InsertTrialsAfterSql(size_t rows) {
  std::string sql =
      "WITH s AS (UPDATE studies SET last_trial_id = last_trial_id + $2, "
      "last_sequence = last_sequence + $2 "
      "WHERE sha256(name) = sha256($1) AND name = $1 AND last_trial_id = $3 "
      "RETURNING id, last_sequence - $2 AS before) "
      "INSERT INTO trials(study_id, trial_id, state, client_id, lease_epoch, "
      "sequence, trial) "
      "SELECT s.id, $3 + v.k, v.state, v.client_id, v.lease_epoch, "
      "s.before + v.k, v.trial FROM s, (VALUES ";
  for (size_t row = 0, next = 4; row < rows; ++row, next += 4) {
    absl::StrAppend(&sql, row == 0 ? "" : ", ", "($", next, ", $", next + 1,
                    ", $", next + 2, ", $", next + 3, ", ", row + 1, ")");
  }
  absl::StrAppend(&sql, ") v(state, client_id, lease_epoch, trial, k)");
  return sql;
}

// Gives `trials` the study's name and the ids after `last_id`, and puts
// their stored forms into `stored`.
absl::Status NumberTrials(std::string_view study_name, int64_t last_id,
                          std::span<v1::Trial> trials,
                          std::vector<StoredTrial>& stored) {
  stored.resize(trials.size());
  for (size_t i = 0; i < trials.size(); ++i) {
    v1::Trial& trial = trials[i];
    trial.set_study_name(std::string(study_name));
    trial.set_id(last_id + static_cast<int64_t>(i) + 1);
    absl::StatusOr<StoredTrial> split =
        SplitTrial(trial, TrialLabel(study_name, trial.id()));
    if (!split.ok()) return split.status();
    stored[i] = *std::move(split);
  }
  return absl::OkStatus();
}

// Whether any of `stored` has measurement rows.
bool AnyRows(const std::vector<StoredTrial>& stored) {
  return std::any_of(stored.begin(), stored.end(), [](const StoredTrial& s) {
    return !s.measurements.empty();
  });
}

// InsertTrials in one statement, if the study's last trial id is still
// `last_id` and none of the trials has measurement rows: whether it was.
absl::StatusOr<bool> InsertTrialsAfter(Connection& db,
                                       std::string_view study_name,
                                       int64_t last_id,
                                       std::vector<v1::Trial>& trials,
                                       const std::string& what) {
  std::vector<StoredTrial> bytes;
  if (absl::Status s = NumberTrials(study_name, last_id, trials, bytes);
      !s.ok()) {
    return s;
  }
  // Unfinished trials created with a curve need a transaction.
  if (AnyRows(bytes)) return false;
  Params params;
  params.Bytes(study_name)
      .Int(static_cast<int64_t>(trials.size()))
      .Int(last_id);
  for (size_t i = 0; i < trials.size(); ++i) {
    params.Int(trials[i].state())
        .Bytes(trials[i].client_id())
        .Int(trials[i].lease_epoch())
        .Bytes(bytes[i].head);
  }
  absl::StatusOr<Result> inserted =
      db.Run(InsertTrialsAfterSql(trials.size()), params, what);
  if (!inserted.ok()) return inserted.status();
  return inserted->affected() != 0;
}

// The stored form of `study`: trial_counts are derived on read, never kept.
absl::StatusOr<std::string> StudyBytes(const v1::Study& study) {
  v1::Study stored = study;
  stored.clear_trial_counts();
  return SerializeForStore(stored, StudyLabel(study.name()));
}

// The parameters of the studies row: name, state, create time, message.
Params StudyRow(const v1::Study& study, std::string_view bytes) {
  Params params;
  params.Bytes(study.name())
      .Int(study.state())
      .Int(study.create_time_ms())
      .Bytes(bytes);
  return params;
}

// Why a write of `trial` changed no row, as kSelectTrialVersion finds it
// now: NOT_FOUND naming the study or the trial, or ABORTED naming the
// version the caller `read` and the stored one.
absl::Status WhyNotUpdated(Connection& db, const v1::Trial& trial,
                           const TrialVersion& read, const std::string& what) {
  absl::StatusOr<Result> row =
      db.Run(kSelectTrialVersion,
             Params().Bytes(trial.study_name()).Int(trial.id()), what);
  if (!row.ok()) return row.status();
  if (row->rows() == 0) return StudyNotFound(trial.study_name());
  if (row->IsNull(0, 1)) return TrialNotFound(trial.study_name(), trial.id());
  const TrialVersion stored{static_cast<v1::Trial::State>(row->Int(0, 1)),
                            row->Int(0, 2)};
  if (absl::Status s =
          CheckVersion(trial.study_name(), trial.id(), stored, read);
      !s.ok()) {
    return s;
  }
  // The write missed a version that is gone again by this read, which
  // holds no lock: the trial changed twice in between.
  return absl::AbortedError(
      absl::StrCat(TrialLabel(trial.study_name(), trial.id()),
                   " changed while it was being written; read it again"));
}

// Returns `states` sorted and without repeats: one statement text then
// serves every order of the same states.
std::vector<int> DistinctStates(const std::vector<v1::Trial::State>& states) {
  std::vector<int> distinct(states.begin(), states.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  return distinct;
}

// LIMIT's value: NULL (no limit) for 0.
Params& Limit(Params& params, int limit) {
  return limit == 0 ? params.Null() : params.Int(limit);
}

}  // namespace

// ----- Studies -----

absl::Status InsertStudy(Connection& db, const v1::Study& study,
                         const std::string& what) {
  absl::StatusOr<std::string> bytes = StudyBytes(study);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<Result> inserted =
      db.Run(kInsertStudy, StudyRow(study, *bytes), what);
  if (!inserted.ok()) return inserted.status();
  if (inserted->affected() == 0) {
    return absl::AlreadyExistsError(
        absl::StrCat(StudyLabel(study.name()), " already exists"));
  }
  return absl::OkStatus();
}

absl::Status LoadStudy(Connection& db, std::string_view name,
                       const std::string& what, v1::Study& study) {
  absl::StatusOr<Result> row = db.Run(kSelectStudy, Params().Bytes(name), what);
  if (!row.ok()) return row.status();
  if (row->rows() == 0) return StudyNotFound(name);
  return ParseStored(row->Bytes(0, 0), study, StudyLabel(name));
}

absl::Status SaveStudy(Connection& db, const v1::Study& study,
                       const std::string& what) {
  absl::StatusOr<std::string> bytes = StudyBytes(study);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<Result> updated =
      db.Run(kUpdateStudy, StudyRow(study, *bytes), what);
  if (!updated.ok()) return updated.status();
  if (updated->affected() == 0) return StudyNotFound(study.name());
  return absl::OkStatus();
}

absl::Status ModifyStudy(Connection& db, std::string_view name,
                         absl::FunctionRef<void(v1::Study&)> modify,
                         const std::string& what) {
  Transaction transaction(db);
  if (absl::Status s = transaction.Begin(what); !s.ok()) return s;
  absl::StatusOr<Result> row =
      db.Run(kSelectStudyForUpdate, Params().Bytes(name), what);
  if (!row.ok()) return row.status();
  if (row->rows() == 0) return StudyNotFound(name);
  v1::Study study;
  if (absl::Status s = ParseStored(row->Bytes(0, 0), study, StudyLabel(name));
      !s.ok()) {
    return s;
  }
  modify(study);
  if (absl::Status s = SaveStudy(db, study, what); !s.ok()) return s;
  return transaction.Commit(what);
}

absl::Status DeleteStudy(Connection& db, std::string_view name,
                         const std::string& what) {
  // The trials and their measurement rows go with it: ON DELETE CASCADE.
  absl::StatusOr<Result> deleted =
      db.Run(kDeleteStudy, Params().Bytes(name), what);
  if (!deleted.ok()) return deleted.status();
  if (deleted->affected() == 0) return StudyNotFound(name);
  return absl::OkStatus();
}

absl::Status LoadStudies(Connection& db, std::vector<v1::Study>& studies) {
  absl::StatusOr<Result> rows =
      db.Run(kListStudies, Params(), "listing studies");
  if (!rows.ok()) return rows.status();
  for (int i = 0; i < rows->rows(); ++i) {
    if (absl::Status s = ParseStored(rows->Bytes(i, 1), studies.emplace_back(),
                                     StudyLabel(rows->Bytes(i, 0)));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// ----- Trials -----

absl::Status StoreMeasurementRows(Connection& db, int64_t study_id,
                                  int64_t trial_id, const StoredTrial& stored,
                                  const std::string& what) {
  absl::StatusOr<Result> head =
      db.Run(kSetTrialCounts,
             Params()
                 .Int(study_id)
                 .Int(trial_id)
                 .Bytes(stored.head)
                 .Int(static_cast<int64_t>(stored.measurements.size()))
                 .Int(stored.measurement_bytes),
             what);
  if (!head.ok()) return head.status();
  absl::StatusOr<Result> inserted = db.Run(
      kInsertMeasurementRows,
      Params().Int(study_id).Int(trial_id).ByteArrays(stored.measurements),
      what);
  return inserted.status();
}

absl::StatusOr<int64_t> InsertTrials(Connection& db,
                                     std::string_view study_name,
                                     std::vector<v1::Trial>& trials,
                                     std::optional<int64_t> last_id,
                                     const std::string& what) {
  if (trials.empty()) {
    absl::StatusOr<Result> row =
        db.Run(kSelectStudyLastTrialId, Params().Bytes(study_name), what);
    if (!row.ok()) return row.status();
    if (row->rows() == 0) return StudyNotFound(study_name);
    return row->Int(0, 0);
  }
  const int64_t count = static_cast<int64_t>(trials.size());
  if (last_id.has_value() && trials.size() <= kTrialsPerInsert) {
    absl::StatusOr<bool> inserted =
        InsertTrialsAfter(db, study_name, *last_id, trials, what);
    if (!inserted.ok()) return inserted.status();
    if (*inserted) return *last_id + count;
  }
  Transaction transaction(db);
  if (absl::Status s = transaction.Begin(what); !s.ok()) return s;
  absl::StatusOr<Result> taken =
      db.Run(kTakeTrialIds, Params().Bytes(study_name).Int(count), what);
  if (!taken.ok()) return taken.status();
  if (taken->rows() == 0) return StudyNotFound(study_name);
  const int64_t study_id = taken->Int(0, 0);
  const int64_t last_taken = taken->Int(0, 1);
  int64_t sequence = taken->Int(0, 2) - count;
  // Ids are known only here, so the trials are serialized here.
  std::vector<StoredTrial> bytes;
  if (absl::Status s =
          NumberTrials(study_name, last_taken - count, trials, bytes);
      !s.ok()) {
    return s;
  }
  for (size_t first = 0; first < trials.size(); first += kTrialsPerInsert) {
    const size_t rows = std::min(kTrialsPerInsert, trials.size() - first);
    Params params;
    params.Int(study_id);
    for (size_t i = first; i < first + rows; ++i) {
      const v1::Trial& trial = trials[i];
      params.Int(trial.id())
          .Int(trial.state())
          .Bytes(trial.client_id())
          .Int(trial.lease_epoch())
          .Int(++sequence)
          .Bytes(bytes[i].head);
    }
    absl::StatusOr<Result> inserted =
        db.Run(InsertTrialsSql(rows), params, what);
    if (!inserted.ok()) return inserted.status();
  }
  for (size_t i = 0; i < trials.size(); ++i) {
    if (bytes[i].measurements.empty()) continue;
    if (absl::Status s =
            StoreMeasurementRows(db, study_id, trials[i].id(), bytes[i], what);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = transaction.Commit(what); !s.ok()) return s;
  return last_taken;
}

absl::Status LoadTrial(Connection& db, std::string_view study_name,
                       int64_t trial_id, const std::string& what,
                       v1::Trial& trial) {
  absl::StatusOr<Result> row =
      db.Run(kSelectTrial, Params().Bytes(study_name).Int(trial_id), what);
  if (!row.ok()) return row.status();
  if (row->rows() == 0) return StudyNotFound(study_name);
  if (row->IsNull(0, 1)) return TrialNotFound(study_name, trial_id);
  return ParseStored(row->Bytes(0, 1), trial, TrialLabel(study_name, trial_id));
}

absl::Status LoadTrialHead(Connection& db, std::string_view study_name,
                           int64_t trial_id, const std::string& what,
                           TrialHead& head) {
  absl::StatusOr<Result> row =
      db.Run(kSelectTrialHead, Params().Bytes(study_name).Int(trial_id), what);
  if (!row.ok()) return row.status();
  if (row->rows() == 0) return StudyNotFound(study_name);
  if (row->IsNull(0, 1)) return TrialNotFound(study_name, trial_id);
  const std::string label = TrialLabel(study_name, trial_id);
  if (absl::Status s = ParseStored(row->Bytes(0, 1), head.trial, label);
      !s.ok()) {
    return s;
  }
  const int64_t rows = row->Int(0, 2);
  head.measurements = rows;
  head.measurement_bytes = row->Int(0, 3);
  head.latest.reset();
  if (head.trial.measurements_size() > 0) {
    // A finished trial's curve, kept in its message (KeepsCurveInline).
    const int64_t whole = static_cast<int64_t>(head.trial.ByteSizeLong());
    head.latest = head.trial.measurements(head.trial.measurements_size() - 1);
    head.measurements += head.trial.measurements_size();
    head.trial.clear_measurements();
    head.measurement_bytes +=
        whole - static_cast<int64_t>(head.trial.ByteSizeLong());
  }
  if (rows == 0) return absl::OkStatus();
  if (row->IsNull(0, 4)) {
    return absl::DataLossError(absl::StrCat(
        label, ": its latest measurement (row ", rows - 1, ") is missing"));
  }
  v1::Trial wrapper;
  if (absl::Status s = ParseStored(row->Bytes(0, 4), wrapper, label); !s.ok()) {
    return s;
  }
  if (wrapper.measurements_size() != 1) {
    return absl::DataLossError(
        absl::StrCat(label, ": a stored measurement row holds ",
                     wrapper.measurements_size(), " measurements"));
  }
  head.latest = std::move(*wrapper.mutable_measurements(0));
  return absl::OkStatus();
}

absl::Status LoadStudyWithTrial(Connection& db, std::string_view study_name,
                                int64_t trial_id, const std::string& what,
                                StudyWithTrial& read) {
  absl::StatusOr<Result> row = db.Run(
      kSelectStudyWithTrial, Params().Bytes(study_name).Int(trial_id), what);
  if (!row.ok()) return row.status();
  if (row->rows() == 0) return StudyNotFound(study_name);
  if (absl::Status s =
          ParseStored(row->Bytes(0, 0), read.study, StudyLabel(study_name));
      !s.ok()) {
    return s;
  }
  if (row->IsNull(0, 1)) {
    read.trial = TrialNotFound(study_name, trial_id);
    return absl::OkStatus();
  }
  v1::Trial trial;
  if (absl::Status s = ParseStored(row->Bytes(0, 1), trial,
                                   TrialLabel(study_name, trial_id));
      !s.ok()) {
    return s;
  }
  read.trial = std::move(trial);
  return absl::OkStatus();
}

absl::Status LoadStudyOverview(Connection& db, std::string_view study_name,
                               const std::vector<v1::Trial::State>& states,
                               const std::string& what,
                               StudyOverview& overview) {
  absl::StatusOr<Result> rows =
      db.Run(kStudyOverview,
             Params().Bytes(study_name).Ints(DistinctStates(states)), what);
  if (!rows.ok()) return rows.status();
  if (rows->rows() == 0) return StudyNotFound(study_name);
  if (absl::Status s = ParseStored(rows->Bytes(0, 0), overview.study,
                                   StudyLabel(study_name));
      !s.ok()) {
    return s;
  }
  for (int i = 0; i < rows->rows(); ++i) {
    if (rows->IsNull(i, 3)) {
      if (rows->IsNull(i, 1)) continue;  // a study without trials
      overview.counts[static_cast<v1::Trial::State>(rows->Int(i, 1))] =
          rows->Int(i, 2);
      continue;
    }
    if (absl::Status s =
            ParseStored(rows->Bytes(i, 4), overview.trials.emplace_back(),
                        TrialLabel(study_name, rows->Int(i, 3)));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status UpdateTrial(Connection& db, const v1::Trial& trial,
                         const StoredTrial& stored, const TrialVersion* read,
                         const std::string& what) {
  Params params;
  params.Bytes(trial.study_name())
      .Int(trial.id())
      .Int(trial.state())
      .Bytes(trial.client_id())
      .Int(trial.lease_epoch())
      .Bytes(stored.head);
  if (read != nullptr) {
    params.Int(read->lease_epoch).Int(read->state);
  } else {
    params.Null().Null();
  }
  params.ByteArrays(stored.measurements).Int(stored.measurement_bytes);
  absl::StatusOr<Result> updated = db.Run(kUpdateTrial, params, what);
  if (!updated.ok()) return updated.status();
  if (updated->Int(0, 0) != 0) return absl::OkStatus();
  // An unconditional update misses only a trial (or study) that is absent.
  return WhyNotUpdated(db, trial,
                       read != nullptr ? *read : TrialVersion::Of(trial), what);
}

absl::Status RenewTrialLease(Connection& db, const v1::Trial& trial,
                             const StoredTrial& stored,
                             const std::string& what) {
  absl::StatusOr<Result> updated = db.Run(kRenewTrialLease,
                                          Params()
                                              .Bytes(trial.study_name())
                                              .Int(trial.id())
                                              .Int(trial.state())
                                              .Bytes(trial.client_id())
                                              .Int(trial.lease_epoch())
                                              .Bytes(stored.head)
                                              .ByteArrays(stored.measurements)
                                              .Int(stored.measurement_bytes),
                                          what);
  if (!updated.ok()) return updated.status();
  if (updated->Int(0, 0) != 0) return absl::OkStatus();
  return WhyNotUpdated(db, trial, TrialVersion::Of(trial), what);
}

absl::Status AppendMeasurement(Connection& db, const v1::Trial& head,
                               std::string_view head_bytes,
                               std::string_view measurement,
                               const TrialVersion& read,
                               const std::string& what) {
  if (KeepsCurveInline(read.state) || KeepsCurveInline(head.state())) {
    // Its message holds its curve: a head written over it would lose it.
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": measurements are appended only to an unfinished trial, not a ",
        v1::Trial::State_Name(KeepsCurveInline(read.state) ? read.state
                                                           : head.state()),
        " one"));
  }
  absl::StatusOr<Result> appended = db.Run(kAppendMeasurement,
                                           Params()
                                               .Bytes(head.study_name())
                                               .Int(head.id())
                                               .Int(head.state())
                                               .Bytes(head.client_id())
                                               .Int(head.lease_epoch())
                                               .Bytes(head_bytes)
                                               .Int(read.lease_epoch)
                                               .Int(read.state)
                                               .Bytes(measurement),
                                           what);
  if (!appended.ok()) return appended.status();
  if (appended->Int(0, 0) != 0) return absl::OkStatus();
  return WhyNotUpdated(db, head, read, what);
}

absl::Status LoadTrials(Connection& db, std::string_view study_name,
                        const TrialQuery& query, const std::string& what,
                        std::vector<v1::Trial>& trials) {
  const std::vector<int> states = DistinctStates(query.states);
  // The text depends only on which filters there are, so each shape is
  // prepared once; the values themselves are parameters.
  std::string filters;
  Params params;
  params.Bytes(study_name).Int(query.after_id);
  Limit(params, query.limit);
  int next = 4;
  if (!query.client_id.empty()) {
    absl::StrAppend(&filters, " AND sha256(tt.client_id) = sha256($", next,
                    ") AND tt.client_id = $", next);
    params.Bytes(query.client_id);
    ++next;
  }
  if (!states.empty()) {
    absl::StrAppend(&filters, " AND tt.state = ANY($", next, ")");
    params.Ints(states);
  }
  const std::string sql = absl::StrCat(
      "SELECT s.id, t.trial_id, t.trial FROM studies s "
      "LEFT JOIN LATERAL (SELECT tt.trial_id, ",
      kTrialMessageOfTt,
      " AS trial FROM trials tt "
      "WHERE tt.study_id = s.id AND tt.trial_id > $2",
      filters,
      " ORDER BY tt.trial_id LIMIT $3) t ON true "
      "WHERE sha256(s.name) = sha256($1) AND s.name = $1");
  absl::StatusOr<Result> rows = db.Run(sql, params, what);
  if (!rows.ok()) return rows.status();
  if (rows->rows() == 0) return StudyNotFound(study_name);
  for (int i = 0; i < rows->rows(); ++i) {
    if (rows->IsNull(i, 1)) continue;
    if (absl::Status s = ParseStored(rows->Bytes(i, 2), trials.emplace_back(),
                                     TrialLabel(study_name, rows->Int(i, 1)));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status LoadTrialChanges(Connection& db, std::string_view study_name,
                              int64_t after_sequence, int limit,
                              const std::string& what,
                              std::vector<TrialChange>& changes) {
  Params params;
  params.Bytes(study_name).Int(after_sequence);
  Limit(params, limit);
  absl::StatusOr<Result> rows = db.Run(kListTrialChanges, params, what);
  if (!rows.ok()) return rows.status();
  if (rows->rows() == 0) return StudyNotFound(study_name);
  for (int i = 0; i < rows->rows(); ++i) {
    if (rows->IsNull(i, 1)) continue;
    TrialChange& change = changes.emplace_back();
    change.sequence = rows->Int(i, 2);
    if (absl::Status s = ParseStored(rows->Bytes(i, 3), change.trial,
                                     TrialLabel(study_name, rows->Int(i, 1)));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CountTrials(
    Connection& db, std::string_view study_name, const std::string& what,
    absl::flat_hash_map<v1::Trial::State, int64_t>& counts) {
  absl::StatusOr<Result> rows =
      db.Run(kCountTrials, Params().Bytes(study_name), what);
  if (!rows.ok()) return rows.status();
  if (rows->rows() == 0) return StudyNotFound(study_name);
  for (int i = 0; i < rows->rows(); ++i) {
    if (rows->IsNull(i, 1)) continue;
    counts[static_cast<v1::Trial::State>(rows->Int(i, 1))] = rows->Int(i, 2);
  }
  return absl::OkStatus();
}

absl::Status LoadTrialsInStates(Connection& db,
                                const std::vector<v1::Trial::State>& states,
                                std::vector<v1::Trial>& trials) {
  const std::vector<int> distinct = DistinctStates(states);
  Params params;
  std::string sql =
      absl::StrCat("SELECT s.name, t.trial_id, ", kTrialMessageOfT,
                   " FROM trials t JOIN studies s ON s.id = t.study_id");
  if (!distinct.empty()) {
    absl::StrAppend(&sql, " WHERE t.state = ANY($1)");
    params.Ints(distinct);
  }
  absl::StrAppend(&sql, " ORDER BY s.name, t.trial_id");
  absl::StatusOr<Result> rows = db.Run(sql, params, "listing trials by state");
  if (!rows.ok()) return rows.status();
  for (int i = 0; i < rows->rows(); ++i) {
    if (absl::Status s =
            ParseStored(rows->Bytes(i, 2), trials.emplace_back(),
                        TrialLabel(rows->Bytes(i, 0), rows->Int(i, 1)));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// ----- The database -----

absl::StatusOr<std::vector<std::string>> IntegrityProblems(Connection& db) {
  constexpr char kWhat[] = "checking integrity";
  std::vector<std::string> problems;
  auto add = [&](std::string problem) {
    if (problems.size() < kMaxProblems) problems.push_back(std::move(problem));
  };
  // One snapshot for every page.
  Transaction transaction(db);
  if (absl::Status s = transaction.Begin(
          kWhat, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<Result> studies = db.Run(kStudyTotals, Params(), kWhat);
  if (!studies.ok()) return studies.status();
  for (int i = 0; i < studies->rows(); ++i) {
    const int64_t study_id = studies->Int(i, 0);
    const std::string name(studies->Bytes(i, 1));
    const std::string label = StudyLabel(name);
    v1::Study study;
    if (absl::Status s = ParseStored(studies->Bytes(i, 3), study, label);
        !s.ok()) {
      add(std::string(s.message()));
    } else if (study.name() != name || study.state() != studies->Int(i, 2)) {
      add(absl::StrCat(label,
                       ": the name or state column disagrees with "
                       "the stored message"));
    }
    const int64_t last_trial_id = studies->Int(i, 4);
    const int64_t last_sequence = studies->Int(i, 5);
    const int64_t count = studies->Int(i, 6);
    const int64_t max_id = studies->Int(i, 7);
    const int64_t max_sequence = studies->Int(i, 8);
    const int64_t distinct_sequences = studies->Int(i, 9);
    if (count != max_id || max_id != last_trial_id) {
      add(absl::StrCat(label, ": ", count, " trials, the highest id ", max_id,
                       ", the last id given out ", last_trial_id,
                       "; ids must be 1 to the last given out"));
    }
    if (max_sequence > last_sequence || distinct_sequences != count) {
      add(absl::StrCat(label, ": the change sequence is damaged (", count,
                       " trials with ", distinct_sequences,
                       " distinct numbers, the highest ", max_sequence,
                       ", the last given out ", last_sequence, ")"));
    }
    for (int64_t after = 0;;) {
      absl::StatusOr<Result> rows =
          db.Run(kTrialRows,
                 Params().Int(study_id).Int(after).Int(kIntegrityPage), kWhat);
      if (!rows.ok()) return rows.status();
      for (int r = 0; r < rows->rows(); ++r) {
        after = rows->Int(r, 0);
        const std::string trial_label = TrialLabel(name, after);
        v1::Trial trial;
        const int64_t counted = rows->Int(r, 5);
        const int64_t counted_bytes = rows->Int(r, 6);
        const int64_t measurement_rows = rows->Int(r, 7);
        const int64_t measurement_row_bytes = rows->Int(r, 8);
        if (counted != measurement_rows ||
            counted_bytes != measurement_row_bytes) {
          add(absl::StrCat(trial_label, ": its row counts ", counted,
                           " measurements of ", counted_bytes, " bytes, but ",
                           measurement_rows, " rows of ", measurement_row_bytes,
                           " bytes are stored"));
        }
        if (absl::Status s = ParseStored(rows->Bytes(r, 4), trial, trial_label);
            !s.ok()) {
          add(std::string(s.message()));
        } else if (KeepsCurveInline(trial.state()) && measurement_rows > 0) {
          add(absl::StrCat(trial_label, ": it is ",
                           v1::Trial::State_Name(trial.state()),
                           " but has measurement rows"));
        } else if (trial.study_name() != name || trial.id() != after ||
                   trial.state() != rows->Int(r, 1) ||
                   trial.client_id() != rows->Bytes(r, 2) ||
                   trial.lease_epoch() != rows->Int(r, 3)) {
          add(absl::StrCat(trial_label,
                           ": the columns (study, id, state, client id, "
                           "lease epoch) disagree with the stored message"));
        }
      }
      if (rows->rows() < kIntegrityPage) break;
    }
  }
  if (absl::Status s = transaction.Commit(kWhat); !s.ok()) return s;
  return problems;
}

}  // namespace hypertune::storage::postgres
