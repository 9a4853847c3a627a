#include "service/grpc/rpc_metrics_interceptor.h"

#include <chrono>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace hypertune::service {
namespace {

using grpc::experimental::InterceptionHookPoints;

class RpcMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(Metrics* metrics, std::string method)
      : metrics_(metrics),
        method_(std::move(method)),
        start_(std::chrono::steady_clock::now()) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      const double seconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - start_)
                                 .count();
      metrics_->ObserveRpc(
          method_,
          absl::StatusCodeToString(
              static_cast<absl::StatusCode>(status.error_code())),
          seconds);
    }
    methods->Proceed();
  }

 private:
  Metrics* const metrics_;
  const std::string method_;
  const std::chrono::steady_clock::time_point start_;
};

class Factory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(Metrics* metrics) : metrics_(metrics) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcMetricsInterceptor(metrics_, ShortMethodName(info->method()));
  }

 private:
  Metrics* const metrics_;
};

}  // namespace

std::string ShortMethodName(const char* full_method) {
  if (full_method == nullptr) return "unknown";
  const char* slash = std::strrchr(full_method, '/');
  return slash == nullptr ? full_method : slash + 1;
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
RpcMetricsInterceptorFactory(Metrics* metrics) {
  return std::make_unique<Factory>(metrics);
}

}  // namespace hypertune::service
