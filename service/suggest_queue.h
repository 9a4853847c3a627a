// SuggestQueue: coalesces concurrent SuggestTrials calls on one study. The
// first caller to find no batch in progress becomes the leader and serves
// everything queued in one go (one model fit for the whole batch); the others
// wait for their own result. Only the leader runs `serve`, so per-study model
// state touched there needs no other lock.
//
// Thread-safe.
#ifndef HYPERTUNE_SERVICE_SUGGEST_QUEUE_H_
#define HYPERTUNE_SERVICE_SUGGEST_QUEUE_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "hypertune/v1/hypertune.pb.h"
#include "service/access.h"

namespace hypertune::service {

class SuggestQueue {
 public:
  struct Ticket {
    const v1::SuggestTrialsRequest* request;
    const Principal* caller;
    absl::StatusOr<v1::SuggestTrialsResponse> result;
    bool done = false;  // Guarded by the queue's mutex.
  };
  using ServeFn = absl::FunctionRef<void(const std::vector<Ticket*>& batch)>;

  // Queues `request` of `caller` and returns its result once a leader
  // (perhaps this caller) has served it. `serve` must set every ticket's
  // result.
  absl::StatusOr<v1::SuggestTrialsResponse> Submit(
      const v1::SuggestTrialsRequest& request, const Principal& caller,
      ServeFn serve);

 private:
  absl::Mutex mu_;
  absl::CondVar served_;
  std::vector<Ticket*> queued_ ABSL_GUARDED_BY(mu_);
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_SUGGEST_QUEUE_H_
