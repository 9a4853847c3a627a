// The gRPC face of hypertuned: each RPC authenticates its caller, checks that
// the study it names is the caller's, calls StudyService and converts its
// absl::Status to a grpc::Status (the codes are identical) — the one place
// where errors become gRPC codes.
//
// Ownership (auth on): CreateStudy records the caller as the study's owner;
// a call naming another owner's study is PERMISSION_DENIED, one naming a
// study that does not exist NOT_FOUND (as without auth); ListStudies shows
// the caller's studies only. A study created while auth was off has no owner
// and stays open to every caller. Owners are cached by study name; the cache
// follows this server's CreateStudy and DeleteStudy, the only ways an owner
// changes.
//
// Thread-safe, as StudyService is; the owner cache has its own mutex.
#ifndef HYPERTUNE_SERVICE_GRPC_SERVICE_H_
#define HYPERTUNE_SERVICE_GRPC_SERVICE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "hypertune/v1/hypertune.grpc.pb.h"
#include "service/auth.h"
#include "service/study_service.h"

namespace hypertune::service {

grpc::Status ToGrpcStatus(const absl::Status& status);

class GrpcService final : public v1::HyperTune::Service {
 public:
  // `authorizer` decides who may call (default: everyone, no owners).
  // REQUIRES: `service` outlives *this.
  explicit GrpcService(StudyService* service,
                       Authorizer authorizer = Authorizer())
      : service_(service), authorizer_(std::move(authorizer)) {}

  grpc::Status CreateStudy(grpc::ServerContext*, const v1::CreateStudyRequest*,
                           v1::Study*) override;
  grpc::Status GetStudy(grpc::ServerContext*, const v1::GetStudyRequest*,
                        v1::Study*) override;
  grpc::Status ListStudies(grpc::ServerContext*, const v1::ListStudiesRequest*,
                           v1::ListStudiesResponse*) override;
  grpc::Status DeleteStudy(grpc::ServerContext*, const v1::DeleteStudyRequest*,
                           v1::DeleteStudyResponse*) override;
  grpc::Status SetStudyState(grpc::ServerContext*,
                             const v1::SetStudyStateRequest*,
                             v1::Study*) override;
  grpc::Status SuggestTrials(grpc::ServerContext*,
                             const v1::SuggestTrialsRequest*,
                             v1::SuggestTrialsResponse*) override;
  grpc::Status CreateTrial(grpc::ServerContext*, const v1::CreateTrialRequest*,
                           v1::Trial*) override;
  grpc::Status GetTrial(grpc::ServerContext*, const v1::GetTrialRequest*,
                        v1::Trial*) override;
  grpc::Status ListTrials(grpc::ServerContext*, const v1::ListTrialsRequest*,
                          v1::ListTrialsResponse*) override;
  grpc::Status AddMeasurement(grpc::ServerContext*,
                              const v1::AddMeasurementRequest*,
                              v1::Trial*) override;
  grpc::Status CompleteTrial(grpc::ServerContext*,
                             const v1::CompleteTrialRequest*,
                             v1::Trial*) override;
  grpc::Status CheckEarlyStopping(grpc::ServerContext*,
                                  const v1::CheckEarlyStoppingRequest*,
                                  v1::CheckEarlyStoppingResponse*) override;
  grpc::Status StopTrial(grpc::ServerContext*, const v1::StopTrialRequest*,
                         v1::Trial*) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse*) override;
  grpc::Status ListOptimalTrials(grpc::ServerContext*,
                                 const v1::ListOptimalTrialsRequest*,
                                 v1::ListOptimalTrialsResponse*) override;
  grpc::Status WatchTrials(grpc::ServerContext*, const v1::WatchTrialsRequest*,
                           grpc::ServerWriter<v1::TrialEvent>*) override;

 private:
  // The owner the call acts as ("" with auth off), or UNAUTHENTICATED.
  absl::StatusOr<std::string> Caller(const grpc::ServerContext* context) const;
  // Authenticates the call and checks that study `name`, if it exists, may be
  // touched by the caller. A study that does not exist (or an invalid name)
  // is left for the service to report, with the request's own field names.
  absl::Status Admit(const grpc::ServerContext* context,
                     const std::string& name);
  // The owner of study `name`, from the cache or the service.
  absl::StatusOr<std::string> OwnerOf(const std::string& name);
  // Records that study `name` now belongs to `owner` (nullopt: deleted).
  void OwnerChanged(const std::string& name,
                    std::optional<std::string> owner);

  StudyService* const service_;
  const Authorizer authorizer_;

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> owners_ ABSL_GUARDED_BY(mu_);
  // Counts OwnerChanged calls, so that a lookup that raced with one is not
  // cached (it may have read the owner of a study deleted meanwhile).
  uint64_t owner_changes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_GRPC_SERVICE_H_
