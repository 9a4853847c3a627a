// The gRPC face of hypertuned: each RPC authenticates its caller, calls
// StudyService on its behalf (which checks, under the study's lock, that the
// caller may touch the study: access.h) and converts its absl::Status to a
// grpc::Status (the codes are identical) — the one place where a handler's
// errors become gRPC codes. Requests that gRPC cannot parse never reach a
// handler: parse_error_interceptor.h gives those theirs.
//
// Thread-safe, as StudyService is.
#ifndef HYPERTUNE_SERVICE_GRPC_GRPC_SERVICE_H_
#define HYPERTUNE_SERVICE_GRPC_GRPC_SERVICE_H_

#include <functional>
#include <utility>

#include "absl/time/time.h"

#include "common/limits.h"
#include "hypertune/v1/hypertune.grpc.pb.h"
#include "service/grpc/watch_streams.h"
#include "service/rpc/study_service.h"
#include "service/server/auth.h"
#include "service/server/stream_limits.h"

namespace hypertune::service {

grpc::Status ToGrpcStatus(const absl::Status& status);

// WatchTrials is served by gRPC's callback API (watch_streams.h): an idle
// stream holds no thread; every other call is synchronous.
class GrpcService final : public v1::HyperTune::WithCallbackMethod_WatchTrials<
                              v1::HyperTune::Service> {
 public:
  // `authorizer` decides who may call (default: everyone, no owners).
  // `serving`: OK while this server serves its database, else the error
  // every call answers (a standby's UNAVAILABLE naming the leader:
  // leadership.h); null: always serving.
  // REQUIRES: `service` outlives *this.
  // `import_idle_timeout`: how long an ImportStudy stream may go without a
  // message before it is cancelled.
  explicit GrpcService(
      StudyService* service, Authorizer authorizer = Authorizer(),
      std::function<absl::Status()> serving = nullptr,
      absl::Duration import_idle_timeout = absl::Seconds(kImportIdleSeconds))
      : service_(service),
        authorizer_(std::move(authorizer)),
        serving_(std::move(serving)),
        import_idle_timeout_(import_idle_timeout) {}

  grpc::Status CreateStudy(grpc::ServerContext*, const v1::CreateStudyRequest*,
                           v1::Study*) override;
  grpc::Status GetStudy(grpc::ServerContext*, const v1::GetStudyRequest*,
                        v1::Study*) override;
  grpc::Status ListStudies(grpc::ServerContext*, const v1::ListStudiesRequest*,
                           v1::ListStudiesResponse*) override;
  grpc::Status DeleteStudy(grpc::ServerContext*, const v1::DeleteStudyRequest*,
                           v1::DeleteStudyResponse*) override;
  grpc::Status SetStudyOwner(grpc::ServerContext*,
                             const v1::SetStudyOwnerRequest*,
                             v1::Study*) override;
  grpc::Status SetStudyState(grpc::ServerContext*,
                             const v1::SetStudyStateRequest*,
                             v1::Study*) override;
  grpc::Status UpdateStudy(grpc::ServerContext*, const v1::UpdateStudyRequest*,
                           v1::Study*) override;
  grpc::Status Backup(grpc::ServerContext*, const v1::BackupRequest*,
                      v1::BackupResponse*) override;
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
  grpc::ServerWriteReactor<v1::TrialEvent>* WatchTrials(
      grpc::CallbackServerContext* context,
      const v1::WatchTrialsRequest* request) override;
  grpc::Status ImportStudy(grpc::ServerContext*,
                           grpc::ServerReader<v1::ImportStudyRequest>*,
                           v1::Study*) override;
  grpc::Status ImportTrials(grpc::ServerContext*,
                            const v1::ImportTrialsRequest*,
                            v1::ImportTrialsResponse*) override;
  // optuna_space.h and server_info.h: answers that need no study.
  grpc::Status InferOptunaSpace(grpc::ServerContext*,
                                const v1::InferOptunaSpaceRequest*,
                                v1::InferOptunaSpaceResponse*) override;
  grpc::Status GetServerInfo(grpc::ServerContext*,
                             const v1::GetServerInfoRequest*,
                             v1::ServerInfo*) override;

 private:
  template <typename Request, typename Response>
  using ServiceMethod = absl::StatusOr<Response> (StudyService::*)(
      const Request&, const Principal&);

  // The principal the call acts as, or UNAUTHENTICATED.
  absl::StatusOr<Principal> Caller(
      const grpc::ServerContextBase* context) const;
  // A unary RPC: authenticates, then `method` on the caller's behalf.
  template <typename Request, typename Response>
  grpc::Status Serve(const grpc::ServerContext* context,
                     ServiceMethod<Request, Response> method,
                     const Request& request, Response* response);

  StudyService* const service_;
  const Authorizer authorizer_;
  const std::function<absl::Status()> serving_;
  const absl::Duration import_idle_timeout_;
  // ImportStudy streams being read or stored, in all and per owner: each
  // holds its trials, serialized, until they are stored.
  StreamLimits import_limits_{kMaxConcurrentImports,
                              kMaxConcurrentImportsPerOwner, "imports"};
  StreamLimits watch_limits_{kMaxWatchStreams, kMaxWatchStreamsPerOwner,
                             "watch streams"};
  WatchStreams watch_streams_{service_};
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_GRPC_GRPC_SERVICE_H_
