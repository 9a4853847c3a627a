// A server interceptor that reports requests gRPC could not parse (a proto3
// string field holding invalid UTF-8, truncated bytes) as INVALID_ARGUMENT,
// the canonical code for bad input, instead of the bare INTERNAL with an
// empty message that gRPC's generated handlers answer. Our own handlers
// never answer INTERNAL without a message, so that pair identifies it.
#ifndef HYPERTUNE_SERVICE_GRPC_PARSE_ERROR_INTERCEPTOR_H_
#define HYPERTUNE_SERVICE_GRPC_PARSE_ERROR_INTERCEPTOR_H_

#include <memory>
#include <vector>

#include "grpcpp/support/server_interceptor.h"

namespace hypertune::service {

// For ServerBuilder::experimental().SetInterceptorCreators.
std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
ParseErrorInterceptors();

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_GRPC_PARSE_ERROR_INTERCEPTOR_H_
