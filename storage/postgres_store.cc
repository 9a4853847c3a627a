#include "storage/postgres_store.h"

#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "storage/postgres/connection.h"
#include "storage/postgres/connection_pool.h"
#include "storage/postgres/tables.h"
#include "storage/postgres/url.h"
#include "storage/store_util.h"

namespace hypertune::storage {

using postgres::Connection;

// ----- Opening -----

PostgresStore::PostgresStore(const std::string& url, std::string shown_url,
                             const PostgresOptions& options)
    : shown_url_(std::move(shown_url)),
      pool_(std::make_unique<postgres::ConnectionPool>(url, shown_url_,
                                                       options)) {}

PostgresStore::~PostgresStore() = default;

absl::StatusOr<std::unique_ptr<PostgresStore>> PostgresStore::Open(
    const std::string& url, const PostgresOptions& options) {
  std::string shown_url = postgres::RedactUrl(url);
  if (!postgres::IsPostgresUrl(url)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", shown_url,
        "' is not a PostgreSQL URL (postgresql://USER@HOST/DATABASE)"));
  }
  if (options.max_connections < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_connections: must be >= 1, got ", options.max_connections));
  }
  std::unique_ptr<PostgresStore> store(new PostgresStore(
      postgres::LowerCaseScheme(url), std::move(shown_url), options));
  // Connects now, so that an unreachable server fails here rather than on
  // the first call.
  absl::Status status = store->Use(postgres::Migrate);
  if (!status.ok()) {
    // Connection errors name the URL already.
    if (absl::StrContains(status.message(), store->shown_url_)) return status;
    return absl::Status(
        status.code(),
        absl::StrCat("opening PostgreSQL database '", store->shown_url_,
                     "': ", status.message()));
  }
  return store;
}

absl::Status PostgresStore::Use(
    absl::FunctionRef<absl::Status(Connection&)> use) {
  return pool_->Use(use);
}

// ----- Studies -----

absl::Status PostgresStore::CreateStudy(const v1::Study& study) {
  const std::string what = absl::StrCat("creating ", StudyLabel(study.name()));
  absl::Status status = Use(
      [&](Connection& db) { return postgres::InsertStudy(db, study, what); });
  if (!status.ok()) return status;
  absl::MutexLock lock(&last_trial_ids_mu_);
  last_trial_ids_[study.name()] = 0;
  return absl::OkStatus();
}

absl::StatusOr<v1::Study> PostgresStore::GetStudy(std::string_view name) {
  const std::string what = absl::StrCat("reading ", StudyLabel(name));
  v1::Study study;
  absl::Status status = Use([&](Connection& db) {
    return postgres::LoadStudy(db, name, what, study);
  });
  if (!status.ok()) return status;
  return study;
}

absl::StatusOr<std::vector<v1::Study>> PostgresStore::ListStudies() {
  std::vector<v1::Study> studies;
  absl::Status status =
      Use([&](Connection& db) { return postgres::LoadStudies(db, studies); });
  if (!status.ok()) return status;
  return studies;
}

absl::Status PostgresStore::UpdateStudy(const v1::Study& study) {
  const std::string what = absl::StrCat("updating ", StudyLabel(study.name()));
  return Use(
      [&](Connection& db) { return postgres::SaveStudy(db, study, what); });
}

absl::Status PostgresStore::ModifyStudy(
    std::string_view name, absl::FunctionRef<void(v1::Study&)> modify) {
  const std::string what = absl::StrCat("modifying ", StudyLabel(name));
  return Use([&](Connection& db) {
    return postgres::ModifyStudy(db, name, modify, what);
  });
}

absl::Status PostgresStore::DeleteStudy(std::string_view name) {
  const std::string what = absl::StrCat("deleting ", StudyLabel(name));
  {
    absl::MutexLock lock(&last_trial_ids_mu_);
    last_trial_ids_.erase(std::string(name));
  }
  return Use(
      [&](Connection& db) { return postgres::DeleteStudy(db, name, what); });
}

// ----- Trials -----

absl::StatusOr<std::vector<v1::Trial>> PostgresStore::CreateTrials(
    std::string_view study_name, std::vector<v1::Trial> trials) {
  const std::string what =
      absl::StrCat("creating trials in ", StudyLabel(study_name));
  std::optional<int64_t> guess;
  {
    absl::MutexLock lock(&last_trial_ids_mu_);
    auto known = last_trial_ids_.find(std::string(study_name));
    if (known != last_trial_ids_.end()) guess = known->second;
  }
  absl::StatusOr<int64_t> last_id;
  absl::Status status = Use([&](Connection& db) {
    last_id = postgres::InsertTrials(db, study_name, trials, guess, what);
    return last_id.status();
  });
  if (!status.ok()) return status;
  absl::MutexLock lock(&last_trial_ids_mu_);
  last_trial_ids_[std::string(study_name)] = *last_id;
  return trials;
}

absl::StatusOr<v1::Trial> PostgresStore::GetTrial(std::string_view study_name,
                                                  int64_t trial_id) {
  const std::string what =
      absl::StrCat("reading ", TrialLabel(study_name, trial_id));
  v1::Trial trial;
  absl::Status status = Use([&](Connection& db) {
    return postgres::LoadTrial(db, study_name, trial_id, what, trial);
  });
  if (!status.ok()) return status;
  return trial;
}

absl::StatusOr<TrialHead> PostgresStore::GetTrialHead(
    std::string_view study_name, int64_t trial_id) {
  const std::string what =
      absl::StrCat("reading ", TrialLabel(study_name, trial_id));
  TrialHead head;
  absl::Status status = Use([&](Connection& db) {
    return postgres::LoadTrialHead(db, study_name, trial_id, what, head);
  });
  if (!status.ok()) return status;
  return head;
}

absl::Status PostgresStore::AppendMeasurement(
    const v1::Trial& head, const v1::Measurement& measurement,
    const TrialVersion& read) {
  absl::StatusOr<StoredAppend> stored = PrepareAppend(head, measurement);
  if (!stored.ok()) return stored.status();
  return Use([&](Connection& db) {
    return postgres::AppendMeasurement(db, stored->head, stored->head_bytes,
                                       stored->measurement, read, stored->what);
  });
}

absl::StatusOr<StudyWithTrial> PostgresStore::GetStudyWithTrial(
    std::string_view study_name, int64_t trial_id) {
  const std::string what =
      absl::StrCat("reading ", TrialLabel(study_name, trial_id));
  StudyWithTrial read;
  absl::Status status = Use([&](Connection& db) {
    return postgres::LoadStudyWithTrial(db, study_name, trial_id, what, read);
  });
  if (!status.ok()) return status;
  return read;
}

absl::StatusOr<StudyOverview> PostgresStore::GetStudyOverview(
    std::string_view name, const std::vector<v1::Trial::State>& states) {
  // The shared refusal.
  if (states.empty()) return StudyStore::GetStudyOverview(name, states);
  const std::string what = absl::StrCat("reading ", StudyLabel(name));
  StudyOverview overview;
  absl::Status status = Use([&](Connection& db) {
    return postgres::LoadStudyOverview(db, name, states, what, overview);
  });
  if (!status.ok()) return status;
  return overview;
}

absl::Status PostgresStore::UpdateTrial(const v1::Trial& trial) {
  return ReplaceTrial(trial, nullptr);
}

absl::Status PostgresStore::UpdateTrialIf(const v1::Trial& trial,
                                          const TrialVersion& read) {
  return ReplaceTrial(trial, &read);
}

absl::Status PostgresStore::ReplaceTrial(const v1::Trial& trial,
                                         const TrialVersion* read) {
  const std::string label = TrialLabel(trial.study_name(), trial.id());
  absl::StatusOr<StoredTrial> stored = SplitTrial(trial, label);
  if (!stored.ok()) return stored.status();
  const std::string what = absl::StrCat("updating ", label);
  return Use([&](Connection& db) {
    return postgres::UpdateTrial(db, trial, *stored, read, what);
  });
}

absl::Status PostgresStore::RenewTrialLease(const v1::Trial& trial) {
  const std::string label = TrialLabel(trial.study_name(), trial.id());
  absl::StatusOr<StoredTrial> stored = SplitTrial(trial, label);
  if (!stored.ok()) return stored.status();
  const std::string what = absl::StrCat("renewing the lease of ", label);
  return Use([&](Connection& db) {
    return postgres::RenewTrialLease(db, trial, *stored, what);
  });
}

absl::StatusOr<std::vector<v1::Trial>> PostgresStore::ListTrials(
    std::string_view study_name, const TrialQuery& query) {
  if (absl::Status s = CheckLimit(query.limit); !s.ok()) return s;
  const std::string what =
      absl::StrCat("listing trials of ", StudyLabel(study_name));
  std::vector<v1::Trial> trials;
  absl::Status status = Use([&](Connection& db) {
    return postgres::LoadTrials(db, study_name, query, what, trials);
  });
  if (!status.ok()) return status;
  return trials;
}

absl::StatusOr<std::vector<TrialChange>> PostgresStore::ListTrialChanges(
    std::string_view study_name, int64_t after_sequence, int limit) {
  if (absl::Status s = CheckLimit(limit); !s.ok()) return s;
  const std::string what =
      absl::StrCat("listing trial changes of ", StudyLabel(study_name));
  std::vector<TrialChange> changes;
  absl::Status status = Use([&](Connection& db) {
    return postgres::LoadTrialChanges(db, study_name, after_sequence, limit,
                                      what, changes);
  });
  if (!status.ok()) return status;
  return changes;
}

absl::StatusOr<absl::flat_hash_map<v1::Trial::State, int64_t>>
PostgresStore::CountTrials(std::string_view study_name) {
  const std::string what =
      absl::StrCat("counting trials of ", StudyLabel(study_name));
  absl::flat_hash_map<v1::Trial::State, int64_t> counts;
  absl::Status status = Use([&](Connection& db) {
    return postgres::CountTrials(db, study_name, what, counts);
  });
  if (!status.ok()) return status;
  return counts;
}

absl::StatusOr<std::vector<v1::Trial>> PostgresStore::ListTrialsInStates(
    const std::vector<v1::Trial::State>& states) {
  std::vector<v1::Trial> trials;
  absl::Status status = Use([&](Connection& db) {
    return postgres::LoadTrialsInStates(db, states, trials);
  });
  if (!status.ok()) return status;
  return trials;
}

// ----- The database -----

absl::Status PostgresStore::CheckIntegrity() {
  absl::StatusOr<std::vector<std::string>> problems;
  absl::Status status = Use([&](Connection& db) {
    problems = postgres::IntegrityProblems(db);
    return problems.status();
  });
  if (!status.ok()) return status;
  if (problems->empty()) return absl::OkStatus();
  return absl::DataLossError(
      absl::StrCat("PostgreSQL database '", shown_url_,
                   "' is damaged: ", absl::StrJoin(*problems, "; ")));
}

absl::Status PostgresStore::Backup(const std::string& destination_path) {
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot back up to '", destination_path,
      "': backup needs the SQLite store; this store keeps its studies in "
      "PostgreSQL database '",
      shown_url_, "': back that up with pg_dump, or keep a streaming standby"));
}

}  // namespace hypertune::storage
