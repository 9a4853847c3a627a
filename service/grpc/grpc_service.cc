#include "service/grpc/grpc_service.h"

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/limits.h"
#include "service/rpc/optuna_space.h"
#include "service/rpc/server_info.h"
#include "service/rpc/study_import.h"

namespace hypertune::service {
namespace {

// Copies a successful result into the response, or returns the error.
template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

// Whose stream it is: the owner with auth on, else the client's address
// without its port (each connection has a port of its own).
std::string StreamOwner(const Principal& caller,
                        const grpc::ServerContextBase& context) {
  if (caller.checked) return caller.owner;
  const std::string peer = context.peer();
  const size_t port = peer.rfind(':');
  return port == std::string::npos ? peer : peer.substr(0, port);
}

// Cancels a call that goes `idle` without Progress(): a client stream that
// stalls gives its place back instead of holding it for as long as its
// connection lives.
class ProgressWatchdog {
 public:
  ProgressWatchdog(grpc::ServerContext* context, absl::Duration idle)
      : context_(context), idle_(idle), thread_([this] { Watch(); }) {}
  ~ProgressWatchdog() {
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
    }
    thread_.join();
  }
  ProgressWatchdog(const ProgressWatchdog&) = delete;
  ProgressWatchdog& operator=(const ProgressWatchdog&) = delete;

  void Progress() {
    absl::MutexLock lock(&mu_);
    last_ = absl::Now();
  }
  // Stops watching; true if the call was cancelled for its silence.
  bool Stop() {
    absl::MutexLock lock(&mu_);
    done_ = true;
    return fired_;
  }

 private:
  void Watch() {
    absl::MutexLock lock(&mu_);
    while (!done_) {
      const absl::Time deadline = last_ + idle_;
      if (absl::Now() >= deadline) {
        fired_ = true;
        context_->TryCancel();
        return;
      }
      mu_.AwaitWithDeadline(absl::Condition(&done_), deadline);
    }
  }

  grpc::ServerContext* const context_;
  const absl::Duration idle_;
  absl::Mutex mu_;
  absl::Time last_ ABSL_GUARDED_BY(mu_) = absl::Now();
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool fired_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the rest is set
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::StatusOr<Principal> GrpcService::Caller(
    const grpc::ServerContextBase* context) const {
  if (serving_) {
    if (absl::Status serving = serving_(); !serving.ok()) return serving;
  }
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  std::optional<absl::string_view> authorization;
  if (it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  return authorizer_.Authenticate(authorization);
}

template <typename Request, typename Response>
grpc::Status GrpcService::Serve(const grpc::ServerContext* context,
                                ServiceMethod<Request, Response> method,
                                const Request& request, Response* response) {
  absl::StatusOr<Principal> caller = Caller(context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return Reply((service_->*method)(request, *caller), response);
}

grpc::Status GrpcService::CreateStudy(grpc::ServerContext* context,
                                      const v1::CreateStudyRequest* request,
                                      v1::Study* response) {
  return Serve(context, &StudyService::CreateStudy, *request, response);
}

grpc::Status GrpcService::GetStudy(grpc::ServerContext* context,
                                   const v1::GetStudyRequest* request,
                                   v1::Study* response) {
  return Serve(context, &StudyService::GetStudy, *request, response);
}

grpc::Status GrpcService::ListStudies(grpc::ServerContext* context,
                                      const v1::ListStudiesRequest* request,
                                      v1::ListStudiesResponse* response) {
  return Serve(context, &StudyService::ListStudies, *request, response);
}

grpc::Status GrpcService::DeleteStudy(grpc::ServerContext* context,
                                      const v1::DeleteStudyRequest* request,
                                      v1::DeleteStudyResponse* response) {
  return Serve(context, &StudyService::DeleteStudy, *request, response);
}

grpc::Status GrpcService::SetStudyState(grpc::ServerContext* context,
                                        const v1::SetStudyStateRequest* request,
                                        v1::Study* response) {
  return Serve(context, &StudyService::SetStudyState, *request, response);
}

grpc::Status GrpcService::UpdateStudy(grpc::ServerContext* context,
                                      const v1::UpdateStudyRequest* request,
                                      v1::Study* response) {
  return Serve(context, &StudyService::UpdateStudy, *request, response);
}

grpc::Status GrpcService::Backup(grpc::ServerContext* context,
                                 const v1::BackupRequest* request,
                                 v1::BackupResponse* response) {
  return Serve(context, &StudyService::Backup, *request, response);
}

grpc::Status GrpcService::SuggestTrials(grpc::ServerContext* context,
                                        const v1::SuggestTrialsRequest* request,
                                        v1::SuggestTrialsResponse* response) {
  return Serve(context, &StudyService::SuggestTrials, *request, response);
}

grpc::Status GrpcService::CreateTrial(grpc::ServerContext* context,
                                      const v1::CreateTrialRequest* request,
                                      v1::Trial* response) {
  return Serve(context, &StudyService::CreateTrial, *request, response);
}

grpc::Status GrpcService::GetTrial(grpc::ServerContext* context,
                                   const v1::GetTrialRequest* request,
                                   v1::Trial* response) {
  return Serve(context, &StudyService::GetTrial, *request, response);
}

grpc::Status GrpcService::ListTrials(grpc::ServerContext* context,
                                     const v1::ListTrialsRequest* request,
                                     v1::ListTrialsResponse* response) {
  return Serve(context, &StudyService::ListTrials, *request, response);
}

grpc::Status GrpcService::AddMeasurement(
    grpc::ServerContext* context, const v1::AddMeasurementRequest* request,
    v1::Trial* response) {
  return Serve(context, &StudyService::AddMeasurement, *request, response);
}

grpc::Status GrpcService::CompleteTrial(grpc::ServerContext* context,
                                        const v1::CompleteTrialRequest* request,
                                        v1::Trial* response) {
  return Serve(context, &StudyService::CompleteTrial, *request, response);
}

grpc::Status GrpcService::CheckEarlyStopping(
    grpc::ServerContext* context, const v1::CheckEarlyStoppingRequest* request,
    v1::CheckEarlyStoppingResponse* response) {
  return Serve(context, &StudyService::CheckEarlyStopping, *request, response);
}

grpc::Status GrpcService::StopTrial(grpc::ServerContext* context,
                                    const v1::StopTrialRequest* request,
                                    v1::Trial* response) {
  return Serve(context, &StudyService::StopTrial, *request, response);
}

grpc::Status GrpcService::Heartbeat(grpc::ServerContext* context,
                                    const v1::HeartbeatRequest* request,
                                    v1::HeartbeatResponse* response) {
  return Serve(context, &StudyService::Heartbeat, *request, response);
}

grpc::Status GrpcService::ListOptimalTrials(
    grpc::ServerContext* context, const v1::ListOptimalTrialsRequest* request,
    v1::ListOptimalTrialsResponse* response) {
  return Serve(context, &StudyService::ListOptimalTrials, *request, response);
}

grpc::Status GrpcService::SetStudyOwner(grpc::ServerContext* context,
                                        const v1::SetStudyOwnerRequest* request,
                                        v1::Study* response) {
  absl::StatusOr<Principal> caller = Caller(context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  // A typo would lock everyone but the admin out of the study.
  if (!authorizer_.IsKnownOwner(request->owner())) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("owner: no token of the server's token file belongs to \"",
                     request->owner(), "\"")));
  }
  return Reply(service_->SetStudyOwner(*request, *caller), response);
}

grpc::ServerWriteReactor<v1::TrialEvent>* GrpcService::WatchTrials(
    grpc::CallbackServerContext* context,
    const v1::WatchTrialsRequest* request) {
  absl::StatusOr<Principal> caller = Caller(context);
  if (!caller.ok()) return WatchStreams::Refuse(caller.status());
  auto stream = std::make_unique<StreamLimits::Hold>(
      watch_limits_, StreamOwner(*caller, *context), "WatchTrials");
  if (!stream->status().ok()) return WatchStreams::Refuse(stream->status());
  return watch_streams_.Open(*request, *caller, std::move(stream));
}

grpc::Status GrpcService::ImportStudy(
    grpc::ServerContext* context,
    grpc::ServerReader<v1::ImportStudyRequest>* reader, v1::Study* response) {
  absl::StatusOr<Principal> caller = Caller(context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  // An import holds its trials (serialized) until they are stored.
  StreamLimits::Hold slot(import_limits_, StreamOwner(*caller, *context),
                          "ImportStudy");
  if (!slot.status().ok()) return ToGrpcStatus(slot.status());
  // A failed Read() ends the stream as the client's WritesDone() does;
  // only the context tells a cancelled or timed-out client apart.
  auto abandoned = [context] {
    return context->IsCancelled() ||
           context->deadline() <= std::chrono::system_clock::now();
  };
  absl::StatusOr<ImportedStudy> imported;
  {
    ProgressWatchdog watchdog(context, import_idle_timeout_);
    imported = ReadImportStream([&](v1::ImportStudyRequest& message) {
      const bool read = reader->Read(&message);
      watchdog.Progress();
      return read;
    });
    if (watchdog.Stop()) {
      // The client sees only CANCELLED: a cancelled call carries no message.
      std::cerr << "hypertuned: ImportStudy from " << context->peer()
                << " cancelled: no message for "
                << absl::FormatDuration(import_idle_timeout_)
                << "; nothing was stored\n";
      return grpc::Status::CANCELLED;
    }
  }
  if (!imported.ok()) return ToGrpcStatus(imported.status());
  return Reply(service_->ImportStudy(*std::move(imported), *caller, abandoned),
               response);
}

grpc::Status GrpcService::ImportTrials(grpc::ServerContext* context,
                                       const v1::ImportTrialsRequest* request,
                                       v1::ImportTrialsResponse* response) {
  return Serve(context, &StudyService::ImportTrials, *request, response);
}

grpc::Status GrpcService::InferOptunaSpace(
    grpc::ServerContext* context, const v1::InferOptunaSpaceRequest* request,
    v1::InferOptunaSpaceResponse* response) {
  absl::StatusOr<Principal> caller = Caller(context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  return Reply(hypertune::service::InferOptunaSpace(*request), response);
}

grpc::Status GrpcService::GetServerInfo(grpc::ServerContext* context,
                                        const v1::GetServerInfoRequest*,
                                        v1::ServerInfo* response) {
  absl::StatusOr<Principal> caller = Caller(context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  *response = ServerInfoAnswer();
  return grpc::Status::OK;
}

}  // namespace hypertune::service
