#include "service/optuna/optuna_grpc_service.h"

#include <optional>
#include <string>
#include <utility>

#include "service/grpc/grpc_service.h"

namespace hypertune::service {

OptunaGrpcService::OptunaGrpcService(storage::StudyStore* store,
                                     Authorizer authorizer,
                                     std::function<absl::Status()> serving)
    : storage_(store),
      authorizer_(std::move(authorizer)),
      serving_(std::move(serving)) {}

template <typename Request, typename Reply>
grpc::Status OptunaGrpcService::Serve(const grpc::ServerContext* context,
                                      Method<Request, Reply> method,
                                      const Request& request, Reply* reply) {
  if (serving_) {
    if (absl::Status serving = serving_(); !serving.ok()) {
      return ToGrpcStatus(serving);
    }
  }
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  std::optional<absl::string_view> authorization;
  if (it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  absl::StatusOr<Principal> caller = authorizer_.Authenticate(authorization);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<Reply> result = (storage_.*method)(request, *caller);
  if (!result.ok()) return ToGrpcStatus(result.status());
  *reply = *std::move(result);
  return grpc::Status::OK;
}

#define HT_OPTUNA_RPC(Method)                                               \
  grpc::Status OptunaGrpcService::Method(                                   \
      grpc::ServerContext* context, const optuna::Method##Request* request, \
      optuna::Method##Reply* reply) {                                       \
    return Serve(context, &OptunaStorage::Method, *request, reply);         \
  }
HT_OPTUNA_RPCS(HT_OPTUNA_RPC)
#undef HT_OPTUNA_RPC

}  // namespace hypertune::service
