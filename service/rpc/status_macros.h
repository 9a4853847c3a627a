// RETURN_IF_ERROR for absl::Status, the way Google code spells the common
// "stop at the first error" step.
#ifndef HYPERTUNE_SERVICE_RPC_STATUS_MACROS_H_
#define HYPERTUNE_SERVICE_RPC_STATUS_MACROS_H_

#include "absl/status/status.h"

// Returns the status of `expr` from the enclosing function unless it is OK.
#define HT_RETURN_IF_ERROR(expr)                                \
  do {                                                          \
    if (::absl::Status ht_status_ = (expr); !ht_status_.ok()) { \
      return ht_status_;                                        \
    }                                                           \
  } while (false)

#endif  // HYPERTUNE_SERVICE_RPC_STATUS_MACROS_H_
