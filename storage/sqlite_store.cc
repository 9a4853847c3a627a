#include "storage/sqlite_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/sqlite/backup.h"
#include "storage/sqlite/connection.h"
#include "storage/sqlite/tables.h"
#include "storage/store_util.h"

namespace hypertune::storage {

// ----- Opening -----

namespace {

// Whether `path` names a private in-memory database (one per connection).
bool InMemory(const std::string& path) {
  return path.empty() || path == ":memory:";
}

}  // namespace

SqliteStore::SqliteStore(std::unique_ptr<sqlite::FileLock> lock,
                         std::unique_ptr<Connection> writer,
                         const std::string& path, const SqliteOptions& options)
    : path_(path),
      busy_timeout_ms_(options.busy_timeout_ms),
      single_connection_(InMemory(path)),
      lock_(std::move(lock)),
      writer_(std::move(writer)),
      readers_(single_connection_ ? nullptr
                                  : std::make_unique<sqlite::ReadPool>(
                                        path, options.max_read_connections,
                                        options.busy_timeout_ms)) {}

SqliteStore::~SqliteStore() = default;

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(
    const std::string& path, const SqliteOptions& options) {
  if (options.max_read_connections < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_read_connections: must be >= 1, got ",
                     options.max_read_connections));
  }
  const std::string context =
      absl::StrCat("opening SQLite database '", path, "'");
  // Locked before SQLite touches the file: a file that another store
  // serves is neither configured nor migrated here.
  std::unique_ptr<sqlite::FileLock> lock;
  if (!InMemory(path)) {
    absl::StatusOr<std::unique_ptr<sqlite::FileLock>> locked =
        sqlite::FileLock::Acquire(path);
    if (!locked.ok()) {
      // "In use" names the file already; other failures get the context.
      if (locked.status().code() == absl::StatusCode::kFailedPrecondition) {
        return locked.status();
      }
      return absl::Status(
          locked.status().code(),
          absl::StrCat(context, ": ", locked.status().message()));
    }
    lock = *std::move(locked);
  }
  absl::StatusOr<std::unique_ptr<Connection>> writer =
      Connection::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                       options.busy_timeout_ms, context);
  if (!writer.ok()) return writer.status();
  std::unique_ptr<SqliteStore> store(
      new SqliteStore(std::move(lock), *std::move(writer), path, options));
  absl::Status status = store->Initialize(options);
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

absl::Status SqliteStore::Initialize(const SqliteOptions& options) {
  return writer_.Use([&](Connection& db) -> absl::Status {
    if (absl::Status s = sqlite::ConfigureWriter(db, options.durable_full,
                                                 single_connection_);
        !s.ok()) {
      return s;
    }
    return sqlite::Migrate(db);
  });
}

// ----- Reads -----

absl::Status SqliteStore::Read(
    absl::FunctionRef<absl::Status(Connection&)> read) {
  if (single_connection_) return writer_.Use(read);
  return readers_->Read(read);
}

absl::Status SqliteStore::ReadTogether(
    const std::string& what,
    absl::FunctionRef<absl::Status(Connection&)> read) {
  return Read([&](Connection& db) -> absl::Status {
    sqlite::Transaction transaction(db);
    if (absl::Status s = transaction.Begin(sqlite::kBeginRead, what); !s.ok()) {
      return s;
    }
    if (absl::Status s = read(db); !s.ok()) return s;
    return transaction.Commit(what);
  });
}

absl::Status SqliteStore::ReadStudy(
    std::string_view study_name, const std::string& what,
    absl::FunctionRef<absl::Status(Connection&, int64_t)> read) {
  return Read([&](Connection& db) -> absl::Status {
    // One read transaction: the study check and the rows agree.
    sqlite::Transaction transaction(db);
    if (absl::Status s = transaction.Begin(sqlite::kBeginRead, what); !s.ok()) {
      return s;
    }
    absl::StatusOr<int64_t> study_id = sqlite::StudyId(db, study_name);
    if (!study_id.ok()) return study_id.status();
    if (absl::Status s = read(db, *study_id); !s.ok()) return s;
    return transaction.Commit(what);
  });
}

// ----- Studies -----

absl::Status SqliteStore::CreateStudy(const v1::Study& study) {
  absl::StatusOr<std::string> bytes = sqlite::StudyBytes(study);
  if (!bytes.ok()) return bytes.status();
  const std::string what = absl::StrCat("creating ", StudyLabel(study.name()));
  return writer_.Write(what, [&](Connection& db) {
    return sqlite::InsertStudy(db, study, *bytes, what);
  });
}

absl::StatusOr<v1::Study> SqliteStore::GetStudy(std::string_view name) {
  const std::string what = absl::StrCat("reading ", StudyLabel(name));
  v1::Study study;
  absl::Status status = Read(
      [&](Connection& db) { return sqlite::LoadStudy(db, name, what, study); });
  if (!status.ok()) return status;
  return study;
}

absl::StatusOr<std::vector<v1::Study>> SqliteStore::ListStudies() {
  std::vector<v1::Study> studies;
  absl::Status status =
      Read([&](Connection& db) { return sqlite::LoadStudies(db, studies); });
  if (!status.ok()) return status;
  return studies;
}

absl::Status SqliteStore::UpdateStudy(const v1::Study& study) {
  const std::string what = absl::StrCat("updating ", StudyLabel(study.name()));
  return writer_.Write(
      what, [&](Connection& db) { return sqlite::SaveStudy(db, study, what); });
}

absl::Status SqliteStore::ModifyStudy(
    std::string_view name, absl::FunctionRef<void(v1::Study&)> modify) {
  const std::string what = absl::StrCat("modifying ", StudyLabel(name));
  // Read and written inside the batch's transaction: no other write can
  // come in between.
  return writer_.Write(what, [&](Connection& db) -> absl::Status {
    v1::Study study;
    if (absl::Status s = sqlite::LoadStudy(db, name, what, study); !s.ok()) {
      return s;
    }
    modify(study);
    return sqlite::SaveStudy(db, study, what);
  });
}

absl::Status SqliteStore::DeleteStudy(std::string_view name) {
  const std::string what = absl::StrCat("deleting ", StudyLabel(name));
  return writer_.Write(what, [&](Connection& db) {
    return sqlite::DeleteStudy(db, name, what);
  });
}

// ----- Trials -----

absl::StatusOr<std::vector<v1::Trial>> SqliteStore::CreateTrials(
    std::string_view study_name, std::vector<v1::Trial> trials) {
  const std::string what =
      absl::StrCat("creating trials in ", StudyLabel(study_name));
  absl::Status status = writer_.Write(what, [&](Connection& db) {
    return sqlite::InsertTrials(db, study_name, trials, what);
  });
  if (!status.ok()) return status;
  return trials;
}

absl::StatusOr<v1::Trial> SqliteStore::GetTrial(std::string_view study_name,
                                                int64_t trial_id) {
  const std::string what =
      absl::StrCat("reading ", TrialLabel(study_name, trial_id));
  v1::Trial trial;
  absl::Status status = ReadTogether(what, [&](Connection& db) {
    return sqlite::LoadTrial(db, study_name, trial_id, what, trial);
  });
  if (!status.ok()) return status;
  return trial;
}

absl::StatusOr<TrialHead> SqliteStore::GetTrialHead(std::string_view study_name,
                                                    int64_t trial_id) {
  const std::string what =
      absl::StrCat("reading ", TrialLabel(study_name, trial_id));
  TrialHead head;
  absl::Status status = ReadTogether(what, [&](Connection& db) {
    return sqlite::LoadTrialHead(db, study_name, trial_id, what, head);
  });
  if (!status.ok()) return status;
  return head;
}

absl::Status SqliteStore::AppendMeasurement(const v1::Trial& head,
                                            const v1::Measurement& measurement,
                                            const TrialVersion& read) {
  // Serialized before queueing, as in ReplaceTrial.
  absl::StatusOr<StoredAppend> stored = PrepareAppend(head, measurement);
  if (!stored.ok()) return stored.status();
  return writer_.Write(stored->what, [&](Connection& db) {
    return sqlite::AppendMeasurement(db, stored->head, stored->head_bytes,
                                     stored->measurement, read, stored->what);
  });
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
  // Serialized before queueing: the committer's time is the scarce one.
  absl::StatusOr<StoredTrial> stored = SplitTrial(trial, label);
  if (!stored.ok()) return stored.status();
  const std::string what = absl::StrCat("updating ", label);
  return writer_.Write(what, [&](Connection& db) {
    return sqlite::UpdateTrial(db, trial, *stored, read, record_change, what);
  });
}

absl::StatusOr<std::vector<v1::Trial>> SqliteStore::ListTrials(
    std::string_view study_name, const TrialQuery& query) {
  if (absl::Status s = CheckLimit(query.limit); !s.ok()) return s;
  const std::string what =
      absl::StrCat("listing trials of ", StudyLabel(study_name));
  std::vector<v1::Trial> trials;
  absl::Status status =
      ReadStudy(study_name, what, [&](Connection& db, int64_t study_id) {
        return sqlite::LoadTrials(db, study_id, study_name, query, what,
                                  trials);
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
  absl::Status status =
      ReadStudy(study_name, what, [&](Connection& db, int64_t study_id) {
        return sqlite::LoadTrialChanges(db, study_id, study_name,
                                        after_sequence, limit, what, changes);
      });
  if (!status.ok()) return status;
  return changes;
}

absl::StatusOr<absl::flat_hash_map<v1::Trial::State, int64_t>>
SqliteStore::CountTrials(std::string_view study_name) {
  const std::string what =
      absl::StrCat("counting trials of ", StudyLabel(study_name));
  absl::flat_hash_map<v1::Trial::State, int64_t> counts;
  absl::Status status =
      ReadStudy(study_name, what, [&](Connection& db, int64_t study_id) {
        return sqlite::CountTrials(db, study_id, what, counts);
      });
  if (!status.ok()) return status;
  return counts;
}

absl::StatusOr<std::vector<v1::Trial>> SqliteStore::ListTrialsInStates(
    const std::vector<v1::Trial::State>& states) {
  std::vector<v1::Trial> trials;
  absl::Status status =
      ReadTogether("listing trials by state", [&](Connection& db) {
        return sqlite::LoadTrialsInStates(db, states, trials);
      });
  if (!status.ok()) return status;
  return trials;
}

// ----- The file -----

absl::StatusOr<std::string> SqliteStore::IntegrityCheck() {
  absl::StatusOr<std::string> report;
  absl::Status status = Read([&](Connection& db) {
    report = sqlite::IntegrityReport(db);
    return report.status();
  });
  if (!status.ok()) return status;
  return report;
}

absl::Status SqliteStore::CheckIntegrity() {
  absl::StatusOr<std::string> report = IntegrityCheck();
  if (!report.ok()) return report.status();
  if (*report == "ok") return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("SQLite database '", path_,
                                          "' is damaged: PRAGMA "
                                          "integrity_check says: ",
                                          *report));
}

absl::Status SqliteStore::Backup(const std::string& destination_path) {
  if (absl::Status s = sqlite::CheckBackupDestination(path_, destination_path);
      !s.ok()) {
    return s;
  }
  // An in-memory database has no other connection to read it: the writer's
  // own copies it, holding writes back meanwhile.
  if (single_connection_) {
    return writer_.Use([&](Connection& db) {
      return sqlite::CopyDatabase(db, destination_path);
    });
  }
  // A connection of its own, so that the pool's readers are not held up for
  // the length of the copy.
  absl::StatusOr<std::unique_ptr<Connection>> source =
      Connection::Open(path_, SQLITE_OPEN_READONLY, busy_timeout_ms_,
                       absl::StrCat("backing up SQLite database '", path_,
                                    "': opening a read connection"));
  if (!source.ok()) return source.status();
  return sqlite::CopyDatabase(**source, destination_path);
}

SqliteStore::CommitStats SqliteStore::GetCommitStats() const {
  return writer_.GetCommitStats();
}

void SqliteStore::PauseCommitsForTesting() { writer_.PauseCommitsForTesting(); }

void SqliteStore::ResumeCommitsForTesting() {
  writer_.ResumeCommitsForTesting();
}

void SqliteStore::AwaitQueuedWritesForTesting(int count) {
  writer_.AwaitQueuedWritesForTesting(count);
}

}  // namespace hypertune::storage
