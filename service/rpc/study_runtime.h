// What hypertuned keeps in memory per study: the locks that make its
// read-decide-write sequences atomic, and the queue that coalesces its
// suggestions and owns its algorithm's model (suggest_queue.h). The
// database stays the source of truth: losing all of this (a restart) costs
// only a model refit.
//
// Thread-safe. Runtimes live as long as the registry: study names are few.
#ifndef HYPERTUNE_SERVICE_RPC_STUDY_RUNTIME_H_
#define HYPERTUNE_SERVICE_RPC_STUDY_RUNTIME_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "hypertune/v1/hypertune.pb.h"
#include "optimizer/suggester.h"
#include "service/rpc/suggest_queue.h"
#include "service/server/background_pool.h"

namespace hypertune::service {

struct StudyRuntime {
  // Held exclusively around every read-decide-write sequence that spans the
  // study (suggestions, lease expiry, study updates), and shared by those
  // that change one trial (reports, completion, heartbeats), which hold
  // their trial's stripe too: reports on different trials then run, and
  // commit, together. Never held during a model fit.
  absl::Mutex mu;
  static constexpr int kTrialStripes = 64;
  absl::Mutex trial_mu[kTrialStripes];
  SuggestQueue suggestions;
  // No lease of the study (incarnation) can run out before
  // earliest_expiry_ms: lease checks before then skip the store.
  struct LeaseCheck {
    int64_t study_created_ms = 0;
    int64_t earliest_expiry_ms = 0;
  };
  LeaseCheck lease_check ABSL_GUARDED_BY(mu);
  // The warm-start trials of study incarnation study_created_ms (-1: not
  // counted yet), which max_trials does not count (study_import.h).
  struct WarmStartCount {
    int64_t study_created_ms = -1;
    int64_t n = 0;
  };
  absl::Mutex warm_start_mu;
  WarmStartCount warm_start ABSL_GUARDED_BY(warm_start_mu);
};

// Holds a study's lock shared and the stripe of one of its trials, for a
// read-decide-write sequence on that trial alone.
class ABSL_SCOPED_LOCKABLE TrialLock {
 public:
  TrialLock(StudyRuntime& runtime, int64_t trial_id)
      ABSL_SHARED_LOCK_FUNCTION(runtime.mu)
      : study_(runtime.mu),
        trial_(runtime.trial_mu[static_cast<uint64_t>(trial_id) %
                                StudyRuntime::kTrialStripes]) {
    study_.ReaderLock();
    trial_.Lock();
  }
  ~TrialLock() ABSL_UNLOCK_FUNCTION() {
    trial_.Unlock();
    study_.ReaderUnlock();
  }
  TrialLock(const TrialLock&) = delete;
  TrialLock& operator=(const TrialLock&) = delete;

 private:
  absl::Mutex& study_;
  absl::Mutex& trial_;
};

class StudyRuntimes {
 public:
  // The runtime of study `name`, created on first use; valid while *this is.
  StudyRuntime& For(const std::string& name) {
    absl::MutexLock lock(&mu_);
    std::unique_ptr<StudyRuntime>& r = runtimes_[name];
    if (r == nullptr) r = std::make_unique<StudyRuntime>();
    return *r;
  }
  // The runtime of study `name` if one was made, else null.
  StudyRuntime* Find(const std::string& name) {
    absl::MutexLock lock(&mu_);
    auto it = runtimes_.find(name);
    return it == runtimes_.end() ? nullptr : it->second.get();
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<StudyRuntime>> runtimes_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_STUDY_RUNTIME_H_
