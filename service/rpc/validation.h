// Request validation for hypertuned: pure checks on API messages that need no
// stored state, the limits of limits.h among them. Each returns OK or
// INVALID_ARGUMENT whose message names the offending field
// (`study.spec.metrics[0].goal: ...`) and, for a limit, the limit.
#ifndef HYPERTUNE_SERVICE_RPC_VALIDATION_H_
#define HYPERTUNE_SERVICE_RPC_VALIDATION_H_

#include <string>

#include "absl/status/status.h"
#include "common/limits.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::service {

// A study name: 1-128 characters of letters, digits and "._-", beginning
// with a letter or digit (so never "." or "..", nor taken for a CLI flag).
absl::Status ValidateStudyName(const std::string& field,
                               const std::string& name);

// An owner name (auth.h): as a study name.
absl::Status ValidateOwner(const std::string& field, const std::string& owner);

// A worker's client id: at most kMaxClientIdBytes bytes of any text.
absl::Status ValidateClientId(const std::string& field, const std::string& id);

// Free text (a reason, a URI, a path): at most `max_bytes` bytes.
absl::Status ValidateText(const std::string& field, const std::string& text,
                          size_t max_bytes);

// A trial about to be stored: at most kMaxMeasurementsPerTrial measurements
// and kMaxTrialBytes serialized; `field` names what made it grow.
absl::Status ValidateTrialSize(const std::string& field,
                               const v1::Trial& trial);

// Study or trial attributes: at most kMaxAttributes, each key a name (as a
// metric's), each value at most kMaxAttributeValueBytes of UTF-8 text.
absl::Status ValidateAttributes(
    const std::string& field,
    const google::protobuf::Map<std::string, std::string>& attributes);

// A trial id: at least 1.
absl::Status ValidateTrialId(const std::string& field, int64_t id);

// The parts of a study that the search space does not check: its name,
// parameter and metric names, enum values, the limits, budgets, lease
// settings and early-stopping rule. Parameter ranges are checked when the
// search space is built (see conversion.h).
absl::Status ValidateStudy(const v1::Study& study);

// The early-stopping rule of `spec`: known, with usable fields; ASHA and
// HYPERBAND need max_resource and forbid tuning "epochs".
absl::Status ValidateEarlyStopping(const v1::StudySpec& spec);

// A measurement: non-negative step and elapsed time, at most
// kMaxMetricsPerMeasurement named metrics, no NaN (+-Infinity is allowed).
// `require_metrics`: at least one metric.
absl::Status ValidateMeasurement(const std::string& field,
                                 const v1::Measurement& measurement,
                                 bool require_metrics);

// Device-seconds reported by a worker for one grant: 0 to
// kMaxGrantDeviceSeconds.
absl::Status ValidateDeviceSeconds(const std::string& field, double seconds);

// A heartbeat's checkpoint_step: >= 0, and only with a checkpoint_uri.
absl::Status ValidateCheckpointStep(const v1::HeartbeatRequest& request);

// The fields of a worker's heartbeat but its address (study, trial, epoch):
// client id, checkpoint, log path, device-seconds.
absl::Status ValidateHeartbeat(const v1::HeartbeatRequest& request);

// The fields of a CompleteTrial request but its address: the final
// measurement, device-seconds, reasons, attributes, and the outcome flags
// (at most one of infeasible, worker_failed and failed; preempted only with
// worker_failed).
absl::Status ValidateCompleteTrial(const v1::CompleteTrialRequest& request);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_VALIDATION_H_
