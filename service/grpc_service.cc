#include "service/grpc_service.h"

#include <string>

namespace hypertune::service {
namespace {

// Copies a successful result into the response, or returns the error.
template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::StatusOr<std::string> GrpcService::Caller(
    const grpc::ServerContext* context) const {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  std::optional<absl::string_view> authorization;
  if (it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  return authorizer_.Authenticate(authorization);
}

absl::Status GrpcService::Admit(const grpc::ServerContext* context,
                                const std::string& name) {
  absl::StatusOr<std::string> caller = Caller(context);
  if (!caller.ok()) return caller.status();
  if (!authorizer_.enabled()) return absl::OkStatus();
  absl::StatusOr<std::string> owner = OwnerOf(name);
  if (absl::IsNotFound(owner.status()) ||
      absl::IsInvalidArgument(owner.status())) {
    return absl::OkStatus();
  }
  if (!owner.ok()) return owner.status();
  return authorizer_.CheckOwner(*caller, *owner, name);
}

absl::StatusOr<std::string> GrpcService::OwnerOf(const std::string& name) {
  uint64_t changes = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = owners_.find(name);
    if (it != owners_.end()) return it->second;
    changes = owner_changes_;
  }
  v1::GetStudyRequest request;
  request.set_name(name);
  absl::StatusOr<v1::Study> study = service_->GetStudy(request);
  if (!study.ok()) return study.status();
  absl::MutexLock lock(&mu_);
  if (owner_changes_ == changes) owners_[name] = study->owner();
  return study->owner();
}

void GrpcService::OwnerChanged(const std::string& name,
                               std::optional<std::string> owner) {
  absl::MutexLock lock(&mu_);
  ++owner_changes_;
  if (owner.has_value()) {
    owners_[name] = *std::move(owner);
  } else {
    owners_.erase(name);
  }
}

grpc::Status GrpcService::CreateStudy(grpc::ServerContext* context,
                                      const v1::CreateStudyRequest* request,
                                      v1::Study* response) {
  absl::StatusOr<std::string> caller = Caller(context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  // The owner is whoever calls, never what the request claims.
  v1::CreateStudyRequest owned = *request;
  owned.mutable_study()->set_owner(*caller);
  absl::StatusOr<v1::Study> created = service_->CreateStudy(owned);
  if (created.ok() && authorizer_.enabled()) {
    OwnerChanged(created->name(), created->owner());
  }
  return Reply(std::move(created), response);
}

grpc::Status GrpcService::GetStudy(grpc::ServerContext* context,
                                   const v1::GetStudyRequest* request,
                                   v1::Study* response) {
  if (absl::Status s = Admit(context, request->name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  return Reply(service_->GetStudy(*request), response);
}

grpc::Status GrpcService::ListStudies(grpc::ServerContext* context,
                                      const v1::ListStudiesRequest* request,
                                      v1::ListStudiesResponse* response) {
  absl::StatusOr<std::string> caller = Caller(context);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::ListStudiesResponse> all = service_->ListStudies(*request);
  if (!all.ok()) return ToGrpcStatus(all.status());
  for (v1::Study& study : *all->mutable_studies()) {
    if (authorizer_.CheckOwner(*caller, study.owner(), study.name()).ok()) {
      *response->add_studies() = std::move(study);
    }
  }
  return grpc::Status::OK;
}

grpc::Status GrpcService::DeleteStudy(grpc::ServerContext* context,
                                      const v1::DeleteStudyRequest* request,
                                      v1::DeleteStudyResponse* response) {
  if (absl::Status s = Admit(context, request->name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::StatusOr<v1::DeleteStudyResponse> deleted =
      service_->DeleteStudy(*request);
  // The name is free again: whoever creates it next owns it.
  if (deleted.ok() && authorizer_.enabled()) {
    OwnerChanged(request->name(), std::nullopt);
  }
  return Reply(std::move(deleted), response);
}

grpc::Status GrpcService::SetStudyState(grpc::ServerContext* context,
                                        const v1::SetStudyStateRequest* request,
                                        v1::Study* response) {
  if (absl::Status s = Admit(context, request->name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  return Reply(service_->SetStudyState(*request), response);
}

grpc::Status GrpcService::SuggestTrials(grpc::ServerContext* context,
                                        const v1::SuggestTrialsRequest* request,
                                        v1::SuggestTrialsResponse* response) {
  if (absl::Status s = Admit(context, request->study_name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  return Reply(service_->SuggestTrials(*request), response);
}

grpc::Status GrpcService::CreateTrial(grpc::ServerContext* context,
                                      const v1::CreateTrialRequest* request,
                                      v1::Trial* response) {
  if (absl::Status s = Admit(context, request->study_name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  return Reply(service_->CreateTrial(*request), response);
}

grpc::Status GrpcService::GetTrial(grpc::ServerContext* context,
                                   const v1::GetTrialRequest* request,
                                   v1::Trial* response) {
  if (absl::Status s = Admit(context, request->study_name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  return Reply(service_->GetTrial(*request), response);
}

grpc::Status GrpcService::ListTrials(grpc::ServerContext* context,
                                     const v1::ListTrialsRequest* request,
                                     v1::ListTrialsResponse* response) {
  if (absl::Status s = Admit(context, request->study_name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  return Reply(service_->ListTrials(*request), response);
}

grpc::Status GrpcService::AddMeasurement(
    grpc::ServerContext* context, const v1::AddMeasurementRequest* request,
    v1::Trial* response) {
  if (absl::Status s = Admit(context, request->study_name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  return Reply(service_->AddMeasurement(*request), response);
}

grpc::Status GrpcService::CompleteTrial(grpc::ServerContext* context,
                                        const v1::CompleteTrialRequest* request,
                                        v1::Trial* response) {
  if (absl::Status s = Admit(context, request->study_name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  return Reply(service_->CompleteTrial(*request), response);
}

grpc::Status GrpcService::ListOptimalTrials(
    grpc::ServerContext* context, const v1::ListOptimalTrialsRequest* request,
    v1::ListOptimalTrialsResponse* response) {
  if (absl::Status s = Admit(context, request->study_name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  return Reply(service_->ListOptimalTrials(*request), response);
}

grpc::Status GrpcService::CheckEarlyStopping(
    grpc::ServerContext* context, const v1::CheckEarlyStoppingRequest* request,
    v1::CheckEarlyStoppingResponse* response) {
  if (absl::Status s = Admit(context, request->study_name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  return Reply(service_->CheckEarlyStopping(*request), response);
}

grpc::Status GrpcService::StopTrial(grpc::ServerContext* context,
                                    const v1::StopTrialRequest* request,
                                    v1::Trial* response) {
  if (absl::Status s = Admit(context, request->study_name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  return Reply(service_->StopTrial(*request), response);
}

grpc::Status GrpcService::Heartbeat(grpc::ServerContext* context,
                                    const v1::HeartbeatRequest* request,
                                    v1::HeartbeatResponse* response) {
  if (absl::Status s = Admit(context, request->study_name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  return Reply(service_->Heartbeat(*request), response);
}

grpc::Status GrpcService::WatchTrials(
    grpc::ServerContext* context, const v1::WatchTrialsRequest* request,
    grpc::ServerWriter<v1::TrialEvent>* writer) {
  if (absl::Status s = Admit(context, request->study_name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  // A failed write means the watcher is gone; so does a cancelled call.
  return ToGrpcStatus(service_->WatchTrials(
      *request,
      [writer](const v1::TrialEvent& event) { return writer->Write(event); },
      [context] { return context->IsCancelled(); }));
}

}  // namespace hypertune::service
