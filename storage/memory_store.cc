#include "storage/memory_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/store_util.h"

namespace hypertune::storage {

namespace {

// Whether `trial` passes `query`'s state and client filters.
bool Matches(const v1::Trial& trial, const TrialQuery& query) {
  if (!query.states.empty() &&
      std::find(query.states.begin(), query.states.end(), trial.state()) ==
          query.states.end()) {
    return false;
  }
  return query.client_id.empty() || trial.client_id() == query.client_id;
}

// Refuses what SqliteStore would refuse (a message that does not
// round-trip), so both stores accept the same input.
absl::Status CheckStorable(const google::protobuf::Message& message,
                           absl::string_view label) {
  return SerializeForStore(message, label).status();
}

}  // namespace

absl::StatusOr<MemoryStore::Entry*> MemoryStore::Find(std::string_view name) {
  auto it = studies_.find(name);
  if (it == studies_.end()) {
    return StudyNotFound(name);
  }
  return &it->second;
}

absl::Status MemoryStore::CreateStudy(const v1::Study& study) {
  if (absl::Status s = CheckStorable(study, StudyLabel(study.name()));
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = studies_.try_emplace(study.name());
  if (!inserted) {
    return absl::AlreadyExistsError(
        absl::StrCat(StudyLabel(study.name()), " already exists"));
  }
  it->second.study = study;
  it->second.study.clear_trial_counts();
  return absl::OkStatus();
}

absl::StatusOr<v1::Study> MemoryStore::GetStudy(std::string_view name) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> entry = Find(name);
  if (!entry.ok()) return entry.status();
  return (*entry)->study;
}

absl::StatusOr<std::vector<v1::Study>> MemoryStore::ListStudies() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Study> studies;
  studies.reserve(studies_.size());
  for (const auto& [name, entry] : studies_) studies.push_back(entry.study);
  return studies;
}

absl::Status MemoryStore::UpdateStudy(const v1::Study& study) {
  if (absl::Status s = CheckStorable(study, StudyLabel(study.name()));
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> entry = Find(study.name());
  if (!entry.ok()) return entry.status();
  (*entry)->study = study;
  (*entry)->study.clear_trial_counts();
  return absl::OkStatus();
}

absl::Status MemoryStore::ModifyStudy(
    std::string_view name, absl::FunctionRef<void(v1::Study&)> modify) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> entry = Find(name);
  if (!entry.ok()) return entry.status();
  v1::Study study = (*entry)->study;
  modify(study);
  if (absl::Status s = CheckStorable(study, StudyLabel(name)); !s.ok()) {
    return s;
  }
  (*entry)->study = std::move(study);
  (*entry)->study.clear_trial_counts();
  return absl::OkStatus();
}

absl::Status MemoryStore::DeleteStudy(std::string_view name) {
  absl::MutexLock lock(&mu_);
  auto it = studies_.find(name);
  if (it == studies_.end()) {
    return StudyNotFound(name);
  }
  studies_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Trial>> MemoryStore::CreateTrials(
    std::string_view study_name, std::vector<v1::Trial> trials) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> entry = Find(study_name);
  if (!entry.ok()) return entry.status();
  auto& stored = (*entry)->trials;
  int64_t next_id = stored.empty() ? 1 : stored.rbegin()->first + 1;
  // All or nothing, like SqliteStore's transaction: check every trial first.
  for (v1::Trial& trial : trials) {
    trial.set_study_name(std::string(study_name));
    trial.set_id(next_id++);
    if (absl::Status s =
            CheckStorable(trial, TrialLabel(study_name, trial.id()));
        !s.ok()) {
      return s;
    }
  }
  for (const v1::Trial& trial : trials) {
    stored.emplace(trial.id(), trial);
    RecordChange(**entry, trial.id());
  }
  return trials;
}

absl::StatusOr<v1::Trial> MemoryStore::GetTrial(std::string_view study_name,
                                                int64_t trial_id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> entry = Find(study_name);
  if (!entry.ok()) return entry.status();
  auto it = (*entry)->trials.find(trial_id);
  if (it == (*entry)->trials.end()) {
    return TrialNotFound(study_name, trial_id);
  }
  return it->second;
}

void MemoryStore::RecordChange(Entry& entry, int64_t id) {
  auto [it, inserted] = entry.sequence_of_trial.try_emplace(id, 0);
  if (!inserted) entry.trial_by_sequence.erase(it->second);
  it->second = ++entry.last_sequence;
  entry.trial_by_sequence.emplace(it->second, id);
}

absl::Status MemoryStore::UpdateTrial(const v1::Trial& trial) {
  return Replace(trial, nullptr, /*record_change=*/true);
}

absl::Status MemoryStore::UpdateTrialIf(const v1::Trial& trial,
                                        const TrialVersion& read) {
  return Replace(trial, &read, /*record_change=*/true);
}

absl::Status MemoryStore::RenewTrialLease(const v1::Trial& trial) {
  const TrialVersion same = TrialVersion::Of(trial);
  return Replace(trial, &same, /*record_change=*/false);
}

absl::Status MemoryStore::Replace(const v1::Trial& trial,
                                  const TrialVersion* read,
                                  bool record_change) {
  if (absl::Status s =
          CheckStorable(trial, TrialLabel(trial.study_name(), trial.id()));
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> entry = Find(trial.study_name());
  if (!entry.ok()) return entry.status();
  auto it = (*entry)->trials.find(trial.id());
  if (it == (*entry)->trials.end()) {
    return TrialNotFound(trial.study_name(), trial.id());
  }
  if (read != nullptr) {
    if (absl::Status s = CheckVersion(trial.study_name(), trial.id(),
                                      TrialVersion::Of(it->second), *read);
        !s.ok()) {
      return s;
    }
  }
  it->second = trial;
  if (record_change) RecordChange(**entry, trial.id());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TrialChange>> MemoryStore::ListTrialChanges(
    std::string_view study_name, int64_t after_sequence, int limit) {
  if (absl::Status s = CheckLimit(limit); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> entry = Find(study_name);
  if (!entry.ok()) return entry.status();
  std::vector<TrialChange> changes;
  const auto& by_sequence = (*entry)->trial_by_sequence;
  for (auto it = by_sequence.upper_bound(after_sequence);
       it != by_sequence.end(); ++it) {
    if (limit > 0 && changes.size() >= static_cast<size_t>(limit)) break;
    changes.push_back({it->first, (*entry)->trials.at(it->second)});
  }
  return changes;
}

absl::StatusOr<std::vector<v1::Trial>> MemoryStore::ListTrials(
    std::string_view study_name, const TrialQuery& query) {
  if (absl::Status s = CheckLimit(query.limit); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> entry = Find(study_name);
  if (!entry.ok()) return entry.status();
  std::vector<v1::Trial> result;
  const auto& stored = (*entry)->trials;
  for (auto it = stored.upper_bound(query.after_id); it != stored.end(); ++it) {
    if (query.limit > 0 && result.size() >= static_cast<size_t>(query.limit)) {
      break;
    }
    if (Matches(it->second, query)) result.push_back(it->second);
  }
  return result;
}

absl::StatusOr<absl::flat_hash_map<v1::Trial::State, int64_t>>
MemoryStore::CountTrials(std::string_view study_name) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Entry*> entry = Find(study_name);
  if (!entry.ok()) return entry.status();
  absl::flat_hash_map<v1::Trial::State, int64_t> counts;
  for (const auto& [id, trial] : (*entry)->trials) ++counts[trial.state()];
  return counts;
}

absl::StatusOr<std::vector<v1::Trial>> MemoryStore::ListTrialsInStates(
    const std::vector<v1::Trial::State>& states) {
  TrialQuery query;
  query.states = states;
  absl::MutexLock lock(&mu_);
  std::vector<v1::Trial> result;
  // studies_ is ordered by name and each study's trials by id.
  for (const auto& [name, entry] : studies_) {
    for (const auto& [id, trial] : entry.trials) {
      if (Matches(trial, query)) result.push_back(trial);
    }
  }
  return result;
}

absl::Status MemoryStore::CheckIntegrity() { return absl::OkStatus(); }

absl::Status MemoryStore::Backup(const std::string& destination_path) {
  return absl::FailedPreconditionError(
      absl::StrCat("cannot back up to '", destination_path,
                   "': backup needs the SQLite store; this store keeps its "
                   "studies in memory only"));
}

}  // namespace hypertune::storage
