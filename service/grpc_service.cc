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

grpc::Status NotBuiltYet(const std::string& what) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      what + " is not built yet in this version of hypertuned");
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

grpc::Status GrpcService::CreateStudy(grpc::ServerContext*,
                                      const v1::CreateStudyRequest* request,
                                      v1::Study* response) {
  return Reply(service_->CreateStudy(*request), response);
}

grpc::Status GrpcService::GetStudy(grpc::ServerContext*,
                                   const v1::GetStudyRequest* request,
                                   v1::Study* response) {
  return Reply(service_->GetStudy(*request), response);
}

grpc::Status GrpcService::ListStudies(grpc::ServerContext*,
                                      const v1::ListStudiesRequest* request,
                                      v1::ListStudiesResponse* response) {
  return Reply(service_->ListStudies(*request), response);
}

grpc::Status GrpcService::DeleteStudy(grpc::ServerContext*,
                                      const v1::DeleteStudyRequest* request,
                                      v1::DeleteStudyResponse* response) {
  return Reply(service_->DeleteStudy(*request), response);
}

grpc::Status GrpcService::SetStudyState(grpc::ServerContext*,
                                        const v1::SetStudyStateRequest* request,
                                        v1::Study* response) {
  return Reply(service_->SetStudyState(*request), response);
}

grpc::Status GrpcService::SuggestTrials(grpc::ServerContext*,
                                        const v1::SuggestTrialsRequest* request,
                                        v1::SuggestTrialsResponse* response) {
  return Reply(service_->SuggestTrials(*request), response);
}

grpc::Status GrpcService::CreateTrial(grpc::ServerContext*,
                                      const v1::CreateTrialRequest* request,
                                      v1::Trial* response) {
  return Reply(service_->CreateTrial(*request), response);
}

grpc::Status GrpcService::GetTrial(grpc::ServerContext*,
                                   const v1::GetTrialRequest* request,
                                   v1::Trial* response) {
  return Reply(service_->GetTrial(*request), response);
}

grpc::Status GrpcService::ListTrials(grpc::ServerContext*,
                                     const v1::ListTrialsRequest* request,
                                     v1::ListTrialsResponse* response) {
  return Reply(service_->ListTrials(*request), response);
}

grpc::Status GrpcService::AddMeasurement(
    grpc::ServerContext*, const v1::AddMeasurementRequest* request,
    v1::Trial* response) {
  return Reply(service_->AddMeasurement(*request), response);
}

grpc::Status GrpcService::CompleteTrial(grpc::ServerContext*,
                                        const v1::CompleteTrialRequest* request,
                                        v1::Trial* response) {
  return Reply(service_->CompleteTrial(*request), response);
}

grpc::Status GrpcService::ListOptimalTrials(
    grpc::ServerContext*, const v1::ListOptimalTrialsRequest* request,
    v1::ListOptimalTrialsResponse* response) {
  return Reply(service_->ListOptimalTrials(*request), response);
}

grpc::Status GrpcService::CheckEarlyStopping(
    grpc::ServerContext*, const v1::CheckEarlyStoppingRequest*,
    v1::CheckEarlyStoppingResponse*) {
  return NotBuiltYet("CheckEarlyStopping (early-stopping rules)");
}

grpc::Status GrpcService::StopTrial(grpc::ServerContext*,
                                    const v1::StopTrialRequest*, v1::Trial*) {
  return NotBuiltYet("StopTrial (early stopping)");
}

grpc::Status GrpcService::Heartbeat(grpc::ServerContext*,
                                    const v1::HeartbeatRequest* request,
                                    v1::HeartbeatResponse* response) {
  return Reply(service_->Heartbeat(*request), response);
}

grpc::Status GrpcService::WatchTrials(grpc::ServerContext*,
                                      const v1::WatchTrialsRequest*,
                                      grpc::ServerWriter<v1::TrialEvent>*) {
  return NotBuiltYet("WatchTrials (the trial event stream)");
}

}  // namespace hypertune::service
