#include "service/rpc/change_notifier.h"

namespace hypertune::service {

void ChangeNotifier::Notify() {
  absl::MutexLock lock(&mu_);
  ++generation_;
}

uint64_t ChangeNotifier::generation() {
  absl::MutexLock lock(&mu_);
  return generation_;
}

uint64_t ChangeNotifier::WaitForChange(uint64_t seen, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return generation_ != seen;
  };
  mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
  return generation_;
}

}  // namespace hypertune::service
