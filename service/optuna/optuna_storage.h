// OptunaStorage: the logic of Optuna's storage protocol
// (proto/optuna_storage.proto, the service Optuna's GrpcStorageProxy
// calls) over hypertune's store, on the protocol's messages and
// absl::Status, without gRPC (optuna_grpc_service.h adapts it).
//
// A study created here is a *store-only* hypertune study: its attribute
// `optuna.storage` is "grpc", it has Optuna's semantics (parameters set one
// at a time and added mid-run, states written without a lease) and only
// such studies are served here. What maps to what:
//   - a study's id is its attribute `optuna.study_id` (1, 2, ... in the
//     order of creation); its algorithm GP_BANDIT (used only once the study
//     is switched to hypertune.optuna.Sampler), max_retries 0; directions are
//     the goals of its metrics `value` (one objective) or `value_0`, `value_1`,
//     ... (several), each an OBJECTIVE; Optuna's study attributes are the JSON
//     objects in the attributes `optuna.user_attrs` and `optuna.system_attrs`.
//   - a trial's id is study_id * 2^32 + its hypertune id, its number that
//     id - 1. WAITING is REQUESTED, RUNNING is ACTIVE with no lease expiry
//     (client_id "optuna"), COMPLETE is COMPLETED, PRUNED is STOPPED, FAIL
//     is FAILED; read back, INFEASIBLE is FAIL and STOPPING or PAUSED are
//     RUNNING. Values are the final measurement's metrics, intermediate
//     values the measurements of the first metric. Optuna's parameters (in
//     its internal representation) and distributions are kept exactly in
//     the trial attributes `optuna.params` and `optuna.distributions`, its
//     attributes in `optuna.user_attrs` and `optuna.system_attrs` (JSON
//     objects of the JSON texts sent), all within ValidateAttributes'
//     limits; the parameters are also the trial's hypertune parameters,
//     in a space that grows with each new parameter and range
//     (InferOptunaSpace's mapping), so that hypertune's tools and samplers
//     see them. A trial without those attributes (added by hypertune's
//     samplers after a switch) is read with Optuna parameters made from
//     its hypertune ones.
//
// Errors, as Optuna's own servicer gives them: NOT_FOUND for an unknown
// study or trial, ALREADY_EXISTS for a taken name, FAILED_PRECONDITION for
// a write to a finished trial, INVALID_ARGUMENT naming the field for bad
// input (nothing is stored then), PERMISSION_DENIED per access.h.
//
// Thread-safe: writes are serialized by one mutex (the store serializes
// them anyway); trial writes are conditional on the version read
// (UpdateTrialIf), so a hypertune-side write in between is ABORTED, never
// lost.
#ifndef HYPERTUNE_SERVICE_OPTUNA_OPTUNA_STORAGE_H_
#define HYPERTUNE_SERVICE_OPTUNA_OPTUNA_STORAGE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "hypertune/v1/hypertune.pb.h"
#include "optuna/optuna_storage.pb.h"
#include "service/rpc/access.h"
#include "storage/study_store.h"

namespace hypertune::service {

// The largest answer (GetTrials of a whole study): Optuna's protocol has
// no pages, and GrpcStorageProxy receives answers of any size, so the
// server lets this service's answers pass kMaxResponseBytes up to here.
inline constexpr size_t kOptunaMaxReplyBytes = size_t{64} << 20;

// The attribute that marks a store-only study, and its value.
inline constexpr char kOptunaStorageAttribute[] = "optuna.storage";
inline constexpr char kOptunaStorageGrpc[] = "grpc";

class OptunaStorage {
 public:
  // `now_ms`: the clock in unix milliseconds (default: the system clock).
  // REQUIRES: `store` outlives this.
  explicit OptunaStorage(storage::StudyStore* store,
                         std::function<int64_t()> now_ms = nullptr);

  absl::StatusOr<optuna::CreateNewStudyReply> CreateNewStudy(
      const optuna::CreateNewStudyRequest& request, const Principal& caller);
  absl::StatusOr<optuna::DeleteStudyReply> DeleteStudy(
      const optuna::DeleteStudyRequest& request, const Principal& caller);
  absl::StatusOr<optuna::SetStudyUserAttributeReply> SetStudyUserAttribute(
      const optuna::SetStudyUserAttributeRequest& request,
      const Principal& caller);
  absl::StatusOr<optuna::SetStudySystemAttributeReply> SetStudySystemAttribute(
      const optuna::SetStudySystemAttributeRequest& request,
      const Principal& caller);
  absl::StatusOr<optuna::GetStudyIdFromNameReply> GetStudyIdFromName(
      const optuna::GetStudyIdFromNameRequest& request,
      const Principal& caller);
  absl::StatusOr<optuna::GetStudyNameFromIdReply> GetStudyNameFromId(
      const optuna::GetStudyNameFromIdRequest& request,
      const Principal& caller);
  absl::StatusOr<optuna::GetStudyDirectionsReply> GetStudyDirections(
      const optuna::GetStudyDirectionsRequest& request,
      const Principal& caller);
  absl::StatusOr<optuna::GetStudyUserAttributesReply> GetStudyUserAttributes(
      const optuna::GetStudyUserAttributesRequest& request,
      const Principal& caller);
  absl::StatusOr<optuna::GetStudySystemAttributesReply>
  GetStudySystemAttributes(
      const optuna::GetStudySystemAttributesRequest& request,
      const Principal& caller);
  // The store-only studies `caller` may read.
  absl::StatusOr<optuna::GetAllStudiesReply> GetAllStudies(
      const optuna::GetAllStudiesRequest& request, const Principal& caller);
  absl::StatusOr<optuna::CreateNewTrialReply> CreateNewTrial(
      const optuna::CreateNewTrialRequest& request, const Principal& caller);
  absl::StatusOr<optuna::SetTrialParameterReply> SetTrialParameter(
      const optuna::SetTrialParameterRequest& request, const Principal& caller);
  absl::StatusOr<optuna::GetTrialIdFromStudyIdTrialNumberReply>
  GetTrialIdFromStudyIdTrialNumber(
      const optuna::GetTrialIdFromStudyIdTrialNumberRequest& request,
      const Principal& caller);
  absl::StatusOr<optuna::SetTrialStateValuesReply> SetTrialStateValues(
      const optuna::SetTrialStateValuesRequest& request,
      const Principal& caller);
  absl::StatusOr<optuna::SetTrialIntermediateValueReply>
  SetTrialIntermediateValue(
      const optuna::SetTrialIntermediateValueRequest& request,
      const Principal& caller);
  absl::StatusOr<optuna::SetTrialUserAttributeReply> SetTrialUserAttribute(
      const optuna::SetTrialUserAttributeRequest& request,
      const Principal& caller);
  absl::StatusOr<optuna::SetTrialSystemAttributeReply> SetTrialSystemAttribute(
      const optuna::SetTrialSystemAttributeRequest& request,
      const Principal& caller);
  absl::StatusOr<optuna::GetTrialReply> GetTrial(
      const optuna::GetTrialRequest& request, const Principal& caller);
  absl::StatusOr<optuna::GetTrialsReply> GetTrials(
      const optuna::GetTrialsRequest& request, const Principal& caller);

 private:
  // The store-only study of `study_id`, if `caller` may `access` it.
  absl::StatusOr<v1::Study> LoadStudy(int64_t study_id, const Principal& caller,
                                      Access access);
  // The study of that name (NOT_FOUND unless it is store-only).
  absl::StatusOr<v1::Study> LoadStudyByName(const std::string& name,
                                            const Principal& caller,
                                            Access access);
  // Sets one key of the JSON object in study attribute `attribute`.
  absl::Status SetStudyAttribute(int64_t study_id, const std::string& key,
                                 const std::string& value,
                                 const char* attribute,
                                 const Principal& caller);
  // Loads trial `trial_id` with its study for a write (the trial must not
  // be finished), lets `change` change it, checks the result's limits and
  // stores it if the stored one is still what was read.
  absl::Status WriteTrial(
      int64_t trial_id, const Principal& caller,
      const std::function<absl::Status(v1::Study& study, v1::Trial& trial)>&
          change);
  // Sets one key of the JSON object in trial attribute `attribute`.
  absl::Status SetTrialAttribute(int64_t trial_id, const std::string& key,
                                 const std::string& value,
                                 const char* attribute,
                                 const Principal& caller);
  // The name of the study with `study_id`, from ids_ or the store (the ids
  // are read again on a miss). NOT_FOUND if none.
  absl::StatusOr<std::string> StudyName(int64_t study_id);
  int64_t Now() const;

  storage::StudyStore* const store_;
  const std::function<int64_t()> now_ms_;
  // Serializes writes.
  absl::Mutex write_mu_;
  // Study ids to names, as last read.
  absl::Mutex ids_mu_;
  absl::flat_hash_map<int64_t, std::string> ids_ ABSL_GUARDED_BY(ids_mu_);
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_OPTUNA_OPTUNA_STORAGE_H_
