// A gRPC server interceptor that records every call's method, status code
// and latency (from the call's start to its status being sent) in Metrics,
// for /metrics.
//
// Thread-safe: one interceptor per call; Metrics is thread-safe.
#ifndef HYPERTUNE_SERVICE_GRPC_RPC_METRICS_INTERCEPTOR_H_
#define HYPERTUNE_SERVICE_GRPC_RPC_METRICS_INTERCEPTOR_H_

#include <memory>

#include "grpcpp/support/server_interceptor.h"
#include "service/server/metrics.h"

namespace hypertune::service {

// For ServerBuilder::experimental().SetInterceptorCreators.
// REQUIRES: `metrics` outlives the server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
RpcMetricsInterceptorFactory(Metrics* metrics);

// "SuggestTrials" for "/hypertune.v1.HyperTune/SuggestTrials": the part
// after the last slash.
std::string ShortMethodName(const char* full_method);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_GRPC_RPC_METRICS_INTERCEPTOR_H_
