// CurveCache: the learning curves early stopping reads, kept in memory per
// study, so that judging a report reads no trial of the study: a study's
// curves are read from the store once, on its first judgement, and then
// kept current by every trial write, which reaches the store through
// CurveTrackingStore.
//
// What is kept is exactly what ToCurves and ToModelledCurves
// (conversion.h) make of the stored trials: a judgement from the cache
// decides as one from ListTrials of the whole study would.
//
// A process serves its database alone (leadership.h: a standby serves
// nothing, and a leader that loses the lead exits), so no write escapes the
// cache.
//
// Thread-safe.
#ifndef HYPERTUNE_SERVICE_RPC_CURVE_CACHE_H_
#define HYPERTUNE_SERVICE_RPC_CURVE_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "hypertune/v1/hypertune.pb.h"
#include "optimizer/early_stopping.h"
#include "service/rpc/conversion.h"
#include "storage/study_store.h"

namespace hypertune::service {

class CurveCache {
 public:
  // What early stopping reads of one study.
  struct Curves {
    // ToCurves of the study's trials, by increasing id.
    std::vector<optimizer::TrialCurve> curves;
    // Every trial's parameters, by id (for ToModelledCurves).
    absl::flat_hash_map<int64_t, ParameterValues> parameters;
    // How many trials are REQUESTED.
    int64_t requested = 0;
  };

  // Calls `judge` with the curves of study `study` as stored (read from
  // `store` on the study's first judgement), except that trial `head`
  // (ACTIVE, as read, its own measurements ignored) has its state and,
  // after its stored curve, `appended` (null: nothing). `judge` must not
  // use the cache. Errors are the store's.
  absl::Status Judge(storage::StudyStore& store, const v1::Study& study,
                     const v1::Trial& head, const v1::Measurement* appended,
                     absl::FunctionRef<void(const Curves&)> judge);

  // The hooks of CurveTrackingStore, after each successful write.
  // `trial` is stored as given (whole).
  void Stored(const v1::Trial& trial);
  // `head` is stored with `measurement` appended as its `index`th (from 0).
  void Appended(const v1::Trial& head, const v1::Measurement& measurement,
                int64_t index);
  // Study `name` was created or deleted.
  void Forget(std::string_view name);

 private:
  struct Trial {
    v1::Trial::State state = v1::Trial::STATE_UNSPECIFIED;
    // Stored measurements (with the objective or not): an append is
    // applied once.
    int64_t measurements = 0;
  };
  struct Study {
    absl::Mutex mu;
    bool loaded ABSL_GUARDED_BY(mu) = false;
    // The spec the curves were made with: ToCurves reads its primary
    // objective.
    v1::StudySpec spec ABSL_GUARDED_BY(mu);
    Curves curves ABSL_GUARDED_BY(mu);
    absl::flat_hash_map<int64_t, Trial> trials ABSL_GUARDED_BY(mu);
  };

  // The study's entry, made (not loaded) if absent.
  std::shared_ptr<Study> Entry(const std::string& name);
  // The study's entry if it has one, else null.
  std::shared_ptr<Study> Find(std::string_view name);
  // Reads every trial of `study` into `entry`.
  static absl::Status Load(storage::StudyStore& store, const v1::Study& study,
                           Study& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(entry.mu);
  // Replaces what `entry` holds of `trial` (whole).
  static void Put(Study& entry, const v1::Trial& trial)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(entry.mu);
  // The position of trial `id`'s curve in `curves`, or of where it goes.
  static std::vector<optimizer::TrialCurve>::iterator CurveOf(
      std::vector<optimizer::TrialCurve>& curves, int64_t id);

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Study>> studies_
      ABSL_GUARDED_BY(mu_);
};

// A StudyStore that passes every call to another and tells a CurveCache of
// each trial write that succeeded.
class CurveTrackingStore : public storage::StudyStore {
 public:
  // REQUIRES: both outlive this store.
  CurveTrackingStore(storage::StudyStore* store, CurveCache* cache)
      : store_(store), cache_(cache) {}

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
  absl::StatusOr<storage::StudyWithTrial> GetStudyWithTrial(
      std::string_view study_name, int64_t trial_id) override;
  absl::StatusOr<storage::StudyOverview> GetStudyOverview(
      std::string_view name,
      const std::vector<v1::Trial::State>& states) override;
  absl::Status UpdateTrial(const v1::Trial& trial) override;
  absl::Status UpdateTrialIf(const v1::Trial& trial,
                             const storage::TrialVersion& read) override;
  absl::StatusOr<storage::TrialHead> GetTrialHead(std::string_view study_name,
                                                  int64_t trial_id) override;
  // `head` as GetTrialHead returned it (its count of measurements is the
  // cache's check that the append is applied once) is not known here: the
  // cache is told by AppendMeasurementAt.
  absl::Status AppendMeasurement(const v1::Trial& head,
                                 const v1::Measurement& measurement,
                                 const storage::TrialVersion& read) override;
  // AppendMeasurement of the `index`th measurement (the trial had `index`
  // before), telling the cache where it goes.
  absl::Status AppendMeasurementAt(const v1::Trial& head,
                                   const v1::Measurement& measurement,
                                   const storage::TrialVersion& read,
                                   int64_t index);
  absl::Status RenewTrialLease(const v1::Trial& trial) override;
  absl::StatusOr<std::vector<storage::TrialChange>> ListTrialChanges(
      std::string_view study_name, int64_t after_sequence, int limit) override;
  absl::StatusOr<std::vector<v1::Trial>> ListTrials(
      std::string_view study_name, const storage::TrialQuery& query) override;
  absl::StatusOr<absl::flat_hash_map<v1::Trial::State, int64_t>> CountTrials(
      std::string_view study_name) override;
  absl::StatusOr<std::vector<v1::Trial>> ListTrialsInStates(
      const std::vector<v1::Trial::State>& states) override;
  absl::Status CheckIntegrity() override;
  absl::Status Backup(const std::string& destination_path) override;

 private:
  storage::StudyStore* const store_;
  CurveCache* const cache_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_CURVE_CACHE_H_
