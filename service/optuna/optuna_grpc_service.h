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

// The protocol's 19 methods, for X-macros (here and in the .cc).
#define HT_OPTUNA_RPCS(X)             \
  X(CreateNewStudy)                   \
  X(DeleteStudy)                      \
  X(SetStudyUserAttribute)            \
  X(SetStudySystemAttribute)          \
  X(GetStudyIdFromName)               \
  X(GetStudyNameFromId)               \
  X(GetStudyDirections)               \
  X(GetStudyUserAttributes)           \
  X(GetStudySystemAttributes)         \
  X(GetAllStudies)                    \
  X(CreateNewTrial)                   \
  X(SetTrialParameter)                \
  X(GetTrialIdFromStudyIdTrialNumber) \
  X(SetTrialStateValues)              \
  X(SetTrialIntermediateValue)        \
  X(SetTrialUserAttribute)            \
  X(SetTrialSystemAttribute)          \
  X(GetTrial)                         \
  X(GetTrials)

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
  HT_OPTUNA_RPCS(HT_OPTUNA_RPC)
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
