// OptunaGrpcService: Optuna's storage protocol (optuna.StorageService, what
// Optuna's GrpcStorageProxy calls) on hypertuned's port, beside
// hypertune.v1. Each call is refused while this server does not serve its
// database (a standby: UNAVAILABLE naming the leader, as hypertune.v1's
// calls are), authenticated as hypertune.v1's calls are, then handed to
// OptunaStorage (optuna_storage.h), whose errors become gRPC codes here.
//
// Thread-safe, as OptunaStorage.
#ifndef HYPERTUNE_SERVICE_OPTUNA_OPTUNA_GRPC_SERVICE_H_
#define HYPERTUNE_SERVICE_OPTUNA_OPTUNA_GRPC_SERVICE_H_

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "optuna/optuna_storage.grpc.pb.h"
#include "service/optuna/optuna_storage.h"
#include "service/server/auth.h"
#include "storage/study_store.h"

namespace hypertune::service {

class OptunaGrpcService final : public optuna::StorageService::Service {
 public:
  // `serving`: OK while this server serves its database, else the error to
  // answer with; null: always serving. REQUIRES: `store` outlives this.
  OptunaGrpcService(storage::StudyStore* store, Authorizer authorizer,
                    std::function<absl::Status()> serving = nullptr);

#define HT_OPTUNA_RPC(Method)                                 \
  grpc::Status Method(grpc::ServerContext* context,           \
                      const optuna::Method##Request* request, \
                      optuna::Method##Reply* reply) override;
  HT_OPTUNA_RPC(CreateNewStudy)
  HT_OPTUNA_RPC(DeleteStudy)
  HT_OPTUNA_RPC(SetStudyUserAttribute)
  HT_OPTUNA_RPC(SetStudySystemAttribute)
  HT_OPTUNA_RPC(GetStudyIdFromName)
  HT_OPTUNA_RPC(GetStudyNameFromId)
  HT_OPTUNA_RPC(GetStudyDirections)
  HT_OPTUNA_RPC(GetStudyUserAttributes)
  HT_OPTUNA_RPC(GetStudySystemAttributes)
  HT_OPTUNA_RPC(GetAllStudies)
  HT_OPTUNA_RPC(CreateNewTrial)
  HT_OPTUNA_RPC(SetTrialParameter)
  HT_OPTUNA_RPC(GetTrialIdFromStudyIdTrialNumber)
  HT_OPTUNA_RPC(SetTrialStateValues)
  HT_OPTUNA_RPC(SetTrialIntermediateValue)
  HT_OPTUNA_RPC(SetTrialUserAttribute)
  HT_OPTUNA_RPC(SetTrialSystemAttribute)
  HT_OPTUNA_RPC(GetTrial)
  HT_OPTUNA_RPC(GetTrials)
#undef HT_OPTUNA_RPC

 private:
  template <typename Request, typename Reply>
  using Method = absl::StatusOr<Reply> (OptunaStorage::*)(const Request&,
                                                          const Principal&);
  // Checks serving and the caller, runs `method` and copies its reply.
  template <typename Request, typename Reply>
  grpc::Status Serve(const grpc::ServerContext* context,
                     Method<Request, Reply> method, const Request& request,
                     Reply* reply);

  OptunaStorage storage_;
  const Authorizer authorizer_;
  const std::function<absl::Status()> serving_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_OPTUNA_OPTUNA_GRPC_SERVICE_H_
