// Conversion of gRPC statuses to absl::Status. The two share their canonical
// codes, so the conversion keeps code and message as they are.
//
// Thread safety: pure functions.
#ifndef HYPERTUNE_TRAINER_SDK_GRPC_STATUS_H_
#define HYPERTUNE_TRAINER_SDK_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace hypertune {

// Returns the absl::Status with the same code and message.
inline absl::Status ToAbslStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace hypertune

#endif  // HYPERTUNE_TRAINER_SDK_GRPC_STATUS_H_
