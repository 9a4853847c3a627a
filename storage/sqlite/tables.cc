#include "storage/sqlite/tables.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "storage/store_util.h"

namespace hypertune::storage::sqlite {

namespace {

// ----- Statements (fixed text; values only ever arrive as bindings) -----

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
    "INSERT INTO trials(study_id, trial_id, state, client_id, trial, sequence, "
    "lease_epoch, measurements, measurement_bytes) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
constexpr char kSelectTrial[] =
    "SELECT t.study_id, t.trial, t.measurements, t.measurement_bytes "
    "FROM trials t JOIN studies s ON s.id = t.study_id "
    "WHERE s.name = ?1 AND t.trial_id = ?2";
// Measurement rows: ?1 the study's row id, ?2 the trial's id.
constexpr char kSelectMeasurements[] =
    "SELECT data FROM measurements WHERE study_id = ?1 AND trial_id = ?2 "
    "ORDER BY idx";
constexpr char kSelectMeasurement[] =
    "SELECT data FROM measurements "
    "WHERE study_id = ?1 AND trial_id = ?2 AND idx = ?3";
constexpr char kInsertMeasurement[] =
    "INSERT INTO measurements(study_id, trial_id, idx, data) "
    "VALUES (?1, ?2, ?3, ?4)";
constexpr char kDeleteMeasurementsFrom[] =
    "DELETE FROM measurements "
    "WHERE study_id = ?1 AND trial_id = ?2 AND idx >= ?3";
constexpr char kSelectTrialVersion[] =
    "SELECT t.state, t.lease_epoch FROM trials t "
    "JOIN studies s ON s.id = t.study_id "
    "WHERE s.name = ?1 AND t.trial_id = ?2";
// The trial updates bind the same values: ?1 the study's name, ?2 the
// trial's id, ?3..?6 its state, client id, message and lease epoch; ?7 and
// ?8, the lease epoch and state the caller read, only for a conditional
// update (unbound, they are NULL and check nothing); ?9 and ?10 its number
// of measurements and their bytes. The stored version is compared in the
// WHERE clause, so the message is never read back. Each returns the study's
// row id (for the measurement rows).
//
// Updates take the next number of the study's change sequence.
constexpr char kUpdateTrial[] =
    "UPDATE trials SET state = ?3, client_id = ?4, trial = ?5, "
    "lease_epoch = ?6, measurements = ?9, measurement_bytes = ?10, sequence = "
    "(SELECT MAX(sequence) + 1 FROM trials WHERE study_id = "
    "(SELECT id FROM studies WHERE name = ?1)) "
    "WHERE study_id = (SELECT id FROM studies WHERE name = ?1) "
    "AND trial_id = ?2 AND (?7 IS NULL OR (lease_epoch = ?7 AND state = ?8)) "
    "RETURNING study_id";
// kUpdateTrial when neither state nor client_id changes, else no change:
// rewriting an indexed column rewrites its index entries, even to the same
// value.
constexpr char kUpdateTrialMessage[] =
    "UPDATE trials SET trial = ?5, lease_epoch = ?6, measurements = ?9, "
    "measurement_bytes = ?10, sequence = "
    "(SELECT MAX(sequence) + 1 FROM trials WHERE study_id = "
    "(SELECT id FROM studies WHERE name = ?1)) "
    "WHERE study_id = (SELECT id FROM studies WHERE name = ?1) "
    "AND trial_id = ?2 AND state = ?3 AND client_id = ?4 "
    "AND (?7 IS NULL OR (lease_epoch = ?7 AND state = ?8)) "
    "RETURNING study_id";
// Lease renewals: kUpdateTrialMessage without recording a change.
constexpr char kRenewTrialLease[] =
    "UPDATE trials SET trial = ?5, lease_epoch = ?6, measurements = ?9, "
    "measurement_bytes = ?10 "
    "WHERE study_id = (SELECT id FROM studies WHERE name = ?1) "
    "AND trial_id = ?2 AND state = ?3 AND client_id = ?4 "
    "AND (?7 IS NULL OR (lease_epoch = ?7 AND state = ?8)) "
    "RETURNING study_id";
// The number of measurements a trial row has.
constexpr char kSelectMeasurementCount[] =
    "SELECT t.measurements FROM trials t JOIN studies s ON s.id = t.study_id "
    "WHERE s.name = ?1 AND t.trial_id = ?2";
// AppendMeasurement: kUpdateTrialMessage and kUpdateTrial (always
// conditional) adding one measurement of ?9 bytes; return the study's row
// id and the new number of measurements.
constexpr char kAppendToTrialMessage[] =
    "UPDATE trials SET trial = ?5, lease_epoch = ?6, "
    "measurements = measurements + 1, "
    "measurement_bytes = measurement_bytes + ?9, sequence = "
    "(SELECT MAX(sequence) + 1 FROM trials WHERE study_id = "
    "(SELECT id FROM studies WHERE name = ?1)) "
    "WHERE study_id = (SELECT id FROM studies WHERE name = ?1) "
    "AND trial_id = ?2 AND state = ?3 AND client_id = ?4 "
    "AND lease_epoch = ?7 AND state = ?8 "
    "RETURNING study_id, measurements";
constexpr char kAppendToTrial[] =
    "UPDATE trials SET state = ?3, client_id = ?4, trial = ?5, "
    "lease_epoch = ?6, measurements = measurements + 1, "
    "measurement_bytes = measurement_bytes + ?9, sequence = "
    "(SELECT MAX(sequence) + 1 FROM trials WHERE study_id = "
    "(SELECT id FROM studies WHERE name = ?1)) "
    "WHERE study_id = (SELECT id FROM studies WHERE name = ?1) "
    "AND trial_id = ?2 AND lease_epoch = ?7 AND state = ?8 "
    "RETURNING study_id, measurements";
constexpr char kListTrialChanges[] =
    "SELECT trial_id, sequence, trial, measurements FROM trials "
    "WHERE study_id = ?1 AND sequence > ?2 ORDER BY sequence LIMIT ?3";
constexpr char kCountTrials[] =
    "SELECT state, n FROM trial_counts WHERE study_id = ?1 AND n > 0";
constexpr char kIntegrityCheck[] = "PRAGMA integrity_check";

// ----- Helpers -----

// Steps `query`, bound to a study's name, to the study's row; NOT_FOUND if
// there is none.
absl::Status StepToStudyRow(Query& query, std::string_view name) {
  absl::StatusOr<bool> row = query.Step();
  if (!row.ok()) return row.status();
  if (!*row) return StudyNotFound(name);
  return absl::OkStatus();
}

// NOT_FOUND for a trial that no row matched: naming the study if it is
// missing, else the trial.
absl::Status TrialNotFound(Connection& db, std::string_view study_name,
                           int64_t trial_id) {
  absl::StatusOr<int64_t> study_id = StudyId(db, study_name);
  if (!study_id.ok()) return study_id.status();
  return storage::TrialNotFound(study_name, trial_id);
}

// Why an update of `trial` changed no row: NOT_FOUND naming the study or
// the trial, or ABORTED naming the version the caller `read` (null for an
// unconditional update) and the stored one.
absl::Status WhyNotUpdated(Connection& db, const v1::Trial& trial,
                           const TrialVersion* read, const std::string& what) {
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kSelectTrialVersion);
  if (!statement.ok()) return statement.status();
  Query query(db.db(), *statement, what);
  query.BindBytes(1, trial.study_name()).BindInt(2, trial.id());
  absl::StatusOr<bool> row = query.Step();
  if (!row.ok()) return row.status();
  if (!*row) return TrialNotFound(db, trial.study_name(), trial.id());
  const TrialVersion stored{static_cast<v1::Trial::State>(query.Int(0)),
                            query.Int(1)};
  if (read != nullptr) {
    if (absl::Status s =
            CheckVersion(trial.study_name(), trial.id(), stored, *read);
        !s.ok()) {
      return s;
    }
  }
  return absl::InternalError(
      absl::StrCat(what, ": the trial's row matched but was not updated"));
}

// Parses the trial of study row `study_id` whose row holds the message
// `head` and `measurements` measurement rows into `trial`.
absl::Status ParseTrialRow(Connection& db, int64_t study_id, int64_t trial_id,
                           std::string_view head, int64_t measurements,
                           const std::string& label, v1::Trial& trial) {
  if (measurements == 0) return ParseStored(head, trial, label);
  // One parse of the head followed by each measurement's bytes.
  std::string bytes(head);
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kSelectMeasurements);
  if (!statement.ok()) return statement.status();
  Query rows(db.db(), *statement, absl::StrCat("reading ", label));
  rows.BindInt(1, study_id).BindInt(2, trial_id);
  absl::Status status = rows.ForEachRow([&] {
    const std::string_view data = rows.Bytes(0);
    bytes.append(data.data(), data.size());
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return ParseStored(bytes, trial, label);
}

// Inserts measurement rows `first`.. of `stored` for trial `trial_id` of
// study row `study_id`.
absl::Status InsertMeasurements(Connection& db, int64_t study_id,
                                int64_t trial_id, const StoredTrial& stored,
                                size_t first, const std::string& what) {
  if (first >= stored.measurements.size()) return absl::OkStatus();
  absl::StatusOr<sqlite3_stmt*> insert = db.Prepared(kInsertMeasurement);
  if (!insert.ok()) return insert.status();
  for (size_t i = first; i < stored.measurements.size(); ++i) {
    Query row(db.db(), *insert, what);
    row.BindInt(1, study_id)
        .BindInt(2, trial_id)
        .BindInt(3, static_cast<int64_t>(i))
        .BindBytes(4, stored.measurements[i]);
    if (absl::Status s = row.Run(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Makes the measurement rows of a trial that had `before` of them those of
// `stored`. Rows already there are kept when the last one kept is still
// the same: measurements are only ever appended, or all moved away (to
// earlier_attempts), so a report rewrites nothing it already stored.
absl::Status SyncMeasurements(Connection& db, int64_t study_id,
                              int64_t trial_id, int64_t before,
                              const StoredTrial& stored,
                              const std::string& what) {
  int64_t keep =
      std::min(before, static_cast<int64_t>(stored.measurements.size()));
  if (keep > 0) {
    absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kSelectMeasurement);
    if (!statement.ok()) return statement.status();
    Query last(db.db(), *statement, what);
    last.BindInt(1, study_id).BindInt(2, trial_id).BindInt(3, keep - 1);
    absl::StatusOr<bool> row = last.Step();
    if (!row.ok()) return row.status();
    if (!*row || last.Bytes(0) != stored.measurements[keep - 1]) keep = 0;
  }
  if (keep < before) {
    absl::StatusOr<sqlite3_stmt*> statement =
        db.Prepared(kDeleteMeasurementsFrom);
    if (!statement.ok()) return statement.status();
    Query erase(db.db(), *statement, what);
    erase.BindInt(1, study_id).BindInt(2, trial_id).BindInt(3, keep);
    if (absl::Status s = erase.Run(); !s.ok()) return s;
  }
  return InsertMeasurements(db, study_id, trial_id, stored,
                            static_cast<size_t>(keep), what);
}

// Binds the studies row of kInsertStudy and kUpdateStudy: name, state,
// create time and the stored form `bytes`.
void BindStudyRow(Query& query, const v1::Study& study,
                  std::string_view bytes) {
  query.BindBytes(1, study.name())
      .BindInt(2, study.state())
      .BindInt(3, study.create_time_ms())
      .BindBytes(4, bytes);
}

// States a trial holds only while work on it is queued or running; a study
// has few trials in them at any time.
bool IsLiveState(int state) {
  return state == v1::Trial::REQUESTED || state == v1::Trial::ACTIVE ||
         state == v1::Trial::STOPPING || state == v1::Trial::PAUSED;
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

// ----- Studies -----

absl::StatusOr<int64_t> StudyId(Connection& db, std::string_view name) {
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kSelectStudyId);
  if (!statement.ok()) return statement.status();
  const std::string what = absl::StrCat("looking up ", StudyLabel(name));
  Query query(db.db(), *statement, what);
  query.BindBytes(1, name);
  if (absl::Status s = StepToStudyRow(query, name); !s.ok()) return s;
  return query.Int(0);
}

absl::StatusOr<std::string> StudyBytes(const v1::Study& study) {
  v1::Study stored = study;
  stored.clear_trial_counts();
  return SerializeForStore(stored, StudyLabel(study.name()));
}

absl::Status InsertStudy(Connection& db, const v1::Study& study,
                         std::string_view bytes, const std::string& what) {
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kInsertStudy);
  if (!statement.ok()) return statement.status();
  Query query(db.db(), *statement, what);
  BindStudyRow(query, study, bytes);
  absl::Status status = query.Run();
  if ((query.last_rc() & 0xff) == SQLITE_CONSTRAINT) {
    return absl::AlreadyExistsError(
        absl::StrCat(StudyLabel(study.name()), " already exists"));
  }
  return status;
}

absl::Status LoadStudy(Connection& db, std::string_view name,
                       const std::string& what, v1::Study& study) {
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kSelectStudy);
  if (!statement.ok()) return statement.status();
  Query query(db.db(), *statement, what);
  query.BindBytes(1, name);
  if (absl::Status s = StepToStudyRow(query, name); !s.ok()) return s;
  return ParseStored(query.Bytes(0), study, StudyLabel(name));
}

absl::Status SaveStudy(Connection& db, const v1::Study& study,
                       const std::string& what) {
  absl::StatusOr<std::string> bytes = StudyBytes(study);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kUpdateStudy);
  if (!statement.ok()) return statement.status();
  Query query(db.db(), *statement, what);
  BindStudyRow(query, study, *bytes);
  if (absl::Status s = query.Run(); !s.ok()) return s;
  if (db.Changes() == 0) {
    return StudyNotFound(study.name());
  }
  return absl::OkStatus();
}

absl::Status DeleteStudy(Connection& db, std::string_view name,
                         const std::string& what) {
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kDeleteStudy);
  if (!statement.ok()) return statement.status();
  // The trials go with it: ON DELETE CASCADE.
  Query query(db.db(), *statement, what);
  query.BindBytes(1, name);
  if (absl::Status s = query.Run(); !s.ok()) return s;
  if (db.Changes() == 0) {
    return StudyNotFound(name);
  }
  return absl::OkStatus();
}

absl::Status LoadStudies(Connection& db, std::vector<v1::Study>& studies) {
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kListStudies);
  if (!statement.ok()) return statement.status();
  Query rows(db.db(), *statement, "listing studies");
  return rows.ForEachRow([&] {
    return ParseStored(rows.Bytes(1), studies.emplace_back(),
                       StudyLabel(rows.Bytes(0)));
  });
}

// ----- Trials -----

absl::Status InsertTrials(Connection& db, std::string_view study_name,
                          std::vector<v1::Trial>& trials,
                          const std::string& what) {
  absl::StatusOr<int64_t> study_id = StudyId(db, study_name);
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
    // Ids are known only here, so the trials are serialized here.
    const std::string label = TrialLabel(study_name, trial.id());
    absl::StatusOr<StoredTrial> stored = SplitTrial(trial, label);
    if (!stored.ok()) return stored.status();
    const std::string creating = absl::StrCat("creating ", label);
    {
      Query query(db.db(), *insert, creating);
      query.BindInt(1, *study_id)
          .BindInt(2, trial.id())
          .BindInt(3, trial.state())
          .BindBytes(4, trial.client_id())
          .BindBytes(5, stored->head)
          .BindInt(6, ++last_sequence)
          .BindInt(7, trial.lease_epoch())
          .BindInt(8, static_cast<int64_t>(stored->measurements.size()))
          .BindInt(9, stored->measurement_bytes);
      if (absl::Status s = query.Run(); !s.ok()) return s;
    }
    if (absl::Status s =
            InsertMeasurements(db, *study_id, trial.id(), *stored, 0, creating);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status LoadTrial(Connection& db, std::string_view study_name,
                       int64_t trial_id, const std::string& what,
                       v1::Trial& trial) {
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kSelectTrial);
  if (!statement.ok()) return statement.status();
  Query query(db.db(), *statement, what);
  query.BindBytes(1, study_name).BindInt(2, trial_id);
  absl::StatusOr<bool> row = query.Step();
  if (!row.ok()) return row.status();
  // Say which of the two is missing.
  if (!*row) return TrialNotFound(db, study_name, trial_id);
  return ParseTrialRow(db, query.Int(0), trial_id, query.Bytes(1), query.Int(2),
                       TrialLabel(study_name, trial_id), trial);
}

absl::Status LoadTrialHead(Connection& db, std::string_view study_name,
                           int64_t trial_id, const std::string& what,
                           TrialHead& head) {
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kSelectTrial);
  if (!statement.ok()) return statement.status();
  Query query(db.db(), *statement, what);
  query.BindBytes(1, study_name).BindInt(2, trial_id);
  absl::StatusOr<bool> row = query.Step();
  if (!row.ok()) return row.status();
  if (!*row) return TrialNotFound(db, study_name, trial_id);
  const std::string label = TrialLabel(study_name, trial_id);
  if (absl::Status s = ParseStored(query.Bytes(1), head.trial, label);
      !s.ok()) {
    return s;
  }
  head.measurements = query.Int(2);
  head.measurement_bytes = query.Int(3);
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
  const int64_t rows = query.Int(2);
  if (rows == 0) return absl::OkStatus();
  absl::StatusOr<sqlite3_stmt*> latest = db.Prepared(kSelectMeasurement);
  if (!latest.ok()) return latest.status();
  Query last(db.db(), *latest, what);
  last.BindInt(1, query.Int(0)).BindInt(2, trial_id).BindInt(3, rows - 1);
  row = last.Step();
  if (!row.ok()) return row.status();
  v1::Trial wrapper;
  if (!*row) {
    return absl::DataLossError(absl::StrCat(
        label, ": its latest measurement (row ", rows - 1, ") is missing"));
  }
  if (absl::Status s = ParseStored(last.Bytes(0), wrapper, label); !s.ok()) {
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

absl::Status UpdateTrial(Connection& db, const v1::Trial& trial,
                         const StoredTrial& stored, const TrialVersion* read,
                         bool record_change, const std::string& what) {
  // The measurement rows there are now (none for a missing trial: the
  // update then matches nothing).
  int64_t before = 0;
  {
    absl::StatusOr<sqlite3_stmt*> statement =
        db.Prepared(kSelectMeasurementCount);
    if (!statement.ok()) return statement.status();
    Query query(db.db(), *statement, what);
    query.BindBytes(1, trial.study_name()).BindInt(2, trial.id());
    absl::StatusOr<bool> row = query.Step();
    if (!row.ok()) return row.status();
    if (*row) before = query.Int(0);
  }
  // Returns whether `sql` (kUpdateTrialMessage, kRenewTrialLease or
  // kUpdateTrial) changed the row, and then stores the measurement rows.
  auto run = [&](const char* sql) -> absl::StatusOr<bool> {
    absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(sql);
    if (!statement.ok()) return statement.status();
    int64_t study_id = 0;
    {
      Query query(db.db(), *statement, what);
      query.BindBytes(1, trial.study_name())
          .BindInt(2, trial.id())
          .BindInt(3, trial.state())
          .BindBytes(4, trial.client_id())
          .BindBytes(5, stored.head)
          .BindInt(6, trial.lease_epoch())
          .BindInt(9, static_cast<int64_t>(stored.measurements.size()))
          .BindInt(10, stored.measurement_bytes);
      if (read != nullptr) {
        query.BindInt(7, read->lease_epoch).BindInt(8, read->state);
      }
      absl::StatusOr<bool> row = query.Step();
      if (!row.ok()) return row.status();
      if (!*row) return false;
      study_id = query.Int(0);
    }
    if (absl::Status s =
            SyncMeasurements(db, study_id, trial.id(), before, stored, what);
        !s.ok()) {
      return s;
    }
    return true;
  };
  // Most updates (reports) keep the state and the client: then only the
  // message changes and no index needs rewriting. A conditional update
  // that changes the state it read cannot match there.
  if (read == nullptr || read->state == trial.state()) {
    absl::StatusOr<bool> changed =
        run(record_change ? kUpdateTrialMessage : kRenewTrialLease);
    if (!changed.ok()) return changed.status();
    if (*changed) return absl::OkStatus();
  }
  absl::StatusOr<bool> changed = run(kUpdateTrial);
  if (!changed.ok()) return changed.status();
  if (*changed) return absl::OkStatus();
  return WhyNotUpdated(db, trial, read, what);
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
  // Returns whether `sql` (kAppendToTrialMessage or kAppendToTrial) changed
  // the row, and then stores the measurement's row.
  auto run = [&](const char* sql) -> absl::StatusOr<bool> {
    absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(sql);
    if (!statement.ok()) return statement.status();
    int64_t study_id = 0;
    int64_t measurements = 0;
    {
      Query query(db.db(), *statement, what);
      query.BindBytes(1, head.study_name())
          .BindInt(2, head.id())
          .BindInt(3, head.state())
          .BindBytes(4, head.client_id())
          .BindBytes(5, head_bytes)
          .BindInt(6, head.lease_epoch())
          .BindInt(7, read.lease_epoch)
          .BindInt(8, read.state)
          .BindInt(9, static_cast<int64_t>(measurement.size()));
      absl::StatusOr<bool> row = query.Step();
      if (!row.ok()) return row.status();
      if (!*row) return false;
      study_id = query.Int(0);
      measurements = query.Int(1);
    }
    absl::StatusOr<sqlite3_stmt*> insert = db.Prepared(kInsertMeasurement);
    if (!insert.ok()) return insert.status();
    Query row(db.db(), *insert, what);
    row.BindInt(1, study_id)
        .BindInt(2, head.id())
        .BindInt(3, measurements - 1)
        .BindBytes(4, measurement);
    if (absl::Status s = row.Run(); !s.ok()) return s;
    return true;
  };
  // As in UpdateTrial: a report that keeps the state and the client
  // rewrites no index.
  if (read.state == head.state()) {
    absl::StatusOr<bool> changed = run(kAppendToTrialMessage);
    if (!changed.ok()) return changed.status();
    if (*changed) return absl::OkStatus();
  }
  absl::StatusOr<bool> changed = run(kAppendToTrial);
  if (!changed.ok()) return changed.status();
  if (*changed) return absl::OkStatus();
  return WhyNotUpdated(db, head, &read, what);
}

absl::Status LoadTrials(Connection& db, int64_t study_id,
                        std::string_view study_name, const TrialQuery& query,
                        const std::string& what,
                        std::vector<v1::Trial>& trials) {
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
  std::string sql =
      absl::StrCat("SELECT trial_id, trial, measurements FROM trials", index,
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

  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(sql);
  if (!statement.ok()) return statement.status();
  Query rows(db.db(), *statement, what);
  rows.BindInt(1, study_id)
      .BindInt(2, query.after_id)
      .BindInt(3, query.limit == 0 ? -1 : query.limit);
  if (client_index != 0) rows.BindBytes(client_index, query.client_id);
  for (size_t i = 0; i < states.size(); ++i) {
    rows.BindInt(first_state_index + static_cast<int>(i), states[i]);
  }
  return rows.ForEachRow([&] {
    return ParseTrialRow(db, study_id, rows.Int(0), rows.Bytes(1), rows.Int(2),
                         TrialLabel(study_name, rows.Int(0)),
                         trials.emplace_back());
  });
}

absl::Status LoadTrialChanges(Connection& db, int64_t study_id,
                              std::string_view study_name,
                              int64_t after_sequence, int limit,
                              const std::string& what,
                              std::vector<TrialChange>& changes) {
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kListTrialChanges);
  if (!statement.ok()) return statement.status();
  Query rows(db.db(), *statement, what);
  rows.BindInt(1, study_id)
      .BindInt(2, after_sequence)
      .BindInt(3, limit == 0 ? -1 : limit);
  return rows.ForEachRow([&] {
    TrialChange& change = changes.emplace_back();
    change.sequence = rows.Int(1);
    return ParseTrialRow(db, study_id, rows.Int(0), rows.Bytes(2), rows.Int(3),
                         TrialLabel(study_name, rows.Int(0)), change.trial);
  });
}

absl::Status CountTrials(
    Connection& db, int64_t study_id, const std::string& what,
    absl::flat_hash_map<v1::Trial::State, int64_t>& counts) {
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kCountTrials);
  if (!statement.ok()) return statement.status();
  Query rows(db.db(), *statement, what);
  rows.BindInt(1, study_id);
  return rows.ForEachRow([&] {
    counts[static_cast<v1::Trial::State>(rows.Int(0))] = rows.Int(1);
    return absl::OkStatus();
  });
}

absl::Status LoadTrialsInStates(Connection& db,
                                const std::vector<v1::Trial::State>& states,
                                std::vector<v1::Trial>& trials) {
  const std::vector<int> distinct = DistinctStates(states);
  // One text per number of states; the trials_in_state index finds the rows.
  std::string sql =
      "SELECT s.name, t.trial_id, t.trial, t.study_id, t.measurements "
      "FROM trials t "
      "JOIN studies s ON s.id = t.study_id";
  if (!distinct.empty()) {
    absl::StrAppend(&sql, " WHERE ");
    AppendInList(sql, "t.state", 1, distinct.size());
  }
  absl::StrAppend(&sql, " ORDER BY s.name, t.trial_id");

  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(sql);
  if (!statement.ok()) return statement.status();
  Query rows(db.db(), *statement, "listing trials by state");
  for (size_t i = 0; i < distinct.size(); ++i) {
    rows.BindInt(static_cast<int>(i) + 1, distinct[i]);
  }
  return rows.ForEachRow([&] {
    return ParseTrialRow(db, rows.Int(3), rows.Int(1), rows.Bytes(2),
                         rows.Int(4), TrialLabel(rows.Bytes(0), rows.Int(1)),
                         trials.emplace_back());
  });
}

// ----- The file -----

absl::StatusOr<std::string> IntegrityReport(Connection& db) {
  absl::StatusOr<sqlite3_stmt*> statement = db.Prepared(kIntegrityCheck);
  if (!statement.ok()) return statement.status();
  Query rows(db.db(), *statement, "running integrity_check");
  std::vector<std::string> lines;
  absl::Status status = rows.ForEachRow([&] {
    lines.emplace_back(rows.Bytes(0));
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return absl::StrJoin(lines, "\n");
}

}  // namespace hypertune::storage::sqlite
