// Leases: a granted trial is its worker's until its lease runs out. A
// running trial whose lease ran out goes back to REQUESTED, as a new attempt
// that resumes from its checkpoint (service/rpc/attempts.h), while it has
// retries left, else it is FAILED.
//
// Thread-safe; each method says which study lock it needs.
#ifndef HYPERTUNE_SERVICE_RPC_LEASES_H_
#define HYPERTUNE_SERVICE_RPC_LEASES_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"
#include "service/rpc/study_context.h"
#include "service/rpc/study_runtime.h"

namespace hypertune::service {

class Leases {
 public:
  // REQUIRES: `context` outlives *this.
  explicit Leases(StudyContext& context) : context_(context) {}

  // How long `study`'s leases last.
  int64_t LeaseMs(const v1::Study& study) const;
  // Grants `trial` to `client_id`: ACTIVE, a new lease epoch and expiry.
  absl::Status Grant(const v1::Study& study, v1::Trial& trial,
                     const std::string& client_id, int64_t now) const;

  // How a trial lost its worker: the worker itself (its lease ran out, it
  // failed), which spends max_retries, or its machine, taken away with
  // notice (a spot preemption), which spends max_preemptions.
  enum class Loss { kWorkerLost, kPreempted };
  // The worker holding `trial` is gone (`reason`, `loss`): back to
  // REQUESTED, ending its attempt, while that loss's allowance remains, else
  // FAILED (STOPPING ones are STOPPED).
  absl::Status Release(const v1::Study& study, v1::Trial& trial,
                       const std::string& reason, Loss loss) const;
  // Release of the trial read as `read`, saved; returns it as stored.
  absl::StatusOr<v1::Trial> ReleaseAndSave(const v1::Study& study,
                                           const v1::Trial& read,
                                           const std::string& reason);

  // Expires the run-out leases of active study `name` if any may have run
  // out, taking runtime.mu exclusively only then.
  absl::Status ExpireIfDue(StudyRuntime& runtime, const std::string& name,
                           int64_t now) ABSL_LOCKS_EXCLUDED(runtime.mu);
  // Expires the run-out leases of `study`, whose runtime is `runtime`.
  absl::Status ExpireLocked(StudyRuntime& runtime, const v1::Study& study,
                            int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(runtime.mu);
  // ExpireLocked for every study; a sweeper calls it periodically.
  absl::Status ExpireAll();
  // Gives every running trial a full lease from now: server downtime never
  // costs a worker its trial.
  absl::Status ExtendOnStart();

 private:
  StudyContext& context_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_LEASES_H_
