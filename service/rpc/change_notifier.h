// ChangeNotifier: wakes the watchers of trial changes (WatchTrials) when the
// service has written a trial. A counter of writes and a condition variable;
// watchers then read what changed from the store, so a missed wake-up costs
// at most one timeout, never an event.
//
// Thread-safe.
#ifndef HYPERTUNE_SERVICE_RPC_CHANGE_NOTIFIER_H_
#define HYPERTUNE_SERVICE_RPC_CHANGE_NOTIFIER_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hypertune::service {

class ChangeNotifier {
 public:
  // Called after each trial write.
  void Notify() ABSL_LOCKS_EXCLUDED(mu_);

  // The number of writes so far.
  uint64_t generation() ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until generation() differs from `seen` or `timeout` passes;
  // returns generation().
  uint64_t WaitForChange(uint64_t seen, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_CHANGE_NOTIFIER_H_
