// MemoryStore: a StudyStore held in process memory, for tests.
//
// Same semantics as SqliteStore (both pass one typed test suite), nothing
// persists. Thread-safe: one mutex guards everything, so each call is atomic.
#ifndef HYPERTUNE_STORAGE_MEMORY_STORE_H_
#define HYPERTUNE_STORAGE_MEMORY_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/study_store.h"

namespace hypertune::storage {

class MemoryStore : public StudyStore {
 public:
  MemoryStore() = default;
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  absl::Status CreateStudy(const v1::Study& study) override;
  absl::StatusOr<v1::Study> GetStudy(std::string_view name) override;
  absl::StatusOr<std::vector<v1::Study>> ListStudies() override;
  absl::Status UpdateStudy(const v1::Study& study) override;
  absl::Status ModifyStudy(std::string_view name,
                           absl::FunctionRef<void(v1::Study&)> modify) override;
  absl::Status DeleteStudy(std::string_view name) override;
  absl::StatusOr<std::vector<v1::Trial>> CreateTrials(
      std::string_view study_name, std::vector<v1::Trial> trials) override;
  absl::StatusOr<v1::Trial> GetTrial(std::string_view study_name,
                                     int64_t trial_id) override;
  absl::Status UpdateTrial(const v1::Trial& trial) override;
  absl::Status UpdateTrialIf(const v1::Trial& trial,
                             const TrialVersion& read) override;
  absl::Status RenewTrialLease(const v1::Trial& trial) override;
  absl::StatusOr<std::vector<TrialChange>> ListTrialChanges(
      std::string_view study_name, int64_t after_sequence, int limit) override;
  absl::StatusOr<std::vector<v1::Trial>> ListTrials(
      std::string_view study_name, const TrialQuery& query) override;
  absl::StatusOr<absl::flat_hash_map<v1::Trial::State, int64_t>> CountTrials(
      std::string_view study_name) override;
  absl::StatusOr<std::vector<v1::Trial>> ListTrialsInStates(
      const std::vector<v1::Trial::State>& states) override;
  // Always OK: nothing is stored outside the process's own memory.
  absl::Status CheckIntegrity() override;
  // Always FAILED_PRECONDITION: there is no database file to copy.
  absl::Status Backup(const std::string& destination_path) override;

 private:
  struct Entry {
    v1::Study study;
    // By id; ids are dense from 1, the next one is the largest + 1.
    std::map<int64_t, v1::Trial> trials;
    // The change sequence: trial id by the sequence of its latest change,
    // and each trial's latest sequence.
    std::map<int64_t, int64_t> trial_by_sequence;
    std::map<int64_t, int64_t> sequence_of_trial;
    int64_t last_sequence = 0;
  };
  // Records a change of trial `id` in `entry`'s change sequence.
  static void RecordChange(Entry& entry, int64_t id);
  // Replaces the trial if `read` is null or its version is still `*read`,
  // recording the change or not.
  absl::Status Replace(const v1::Trial& trial, const TrialVersion* read,
                       bool record_change);

  // Returns the study's entry, or NOT_FOUND.
  absl::StatusOr<Entry*> Find(std::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  // By name; std::less<> allows lookup by string_view.
  std::map<std::string, Entry, std::less<>> studies_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hypertune::storage

#endif  // HYPERTUNE_STORAGE_MEMORY_STORE_H_
