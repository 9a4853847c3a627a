// What hypertuned keeps in memory per study: the mutex that makes a study's
// read-decide-write sequences atomic, the queue that coalesces its
// suggestions, and its algorithm's model, which only the queue's leader
// touches. The database stays the source of truth: losing all of this (a
// restart) costs only a model refit.
//
// Thread-safe. Runtimes live as long as the registry: study names are few.
#ifndef HYPERTUNE_SERVICE_STUDY_RUNTIME_H_
#define HYPERTUNE_SERVICE_STUDY_RUNTIME_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "hypertune/v1/hypertune.pb.h"
#include "optimizer/suggester.h"
#include "service/suggest_queue.h"

namespace hypertune::service {

struct StudyRuntime {
  // Held around every read-decide-write sequence on the study's rows; never
  // during a model fit.
  absl::Mutex mu;
  SuggestQueue suggestions;
  // The model and the study incarnation it was built for (a study deleted
  // and created again under the same name gets a new one). Touched only
  // by the suggestion leader.
  std::unique_ptr<optimizer::Suggester> suggester;
  int64_t suggester_study_created_ms = 0;
  // No lease of the study (incarnation) can run out before
  // earliest_expiry_ms: lease checks before then skip the store.
  struct LeaseCheck {
    int64_t study_created_ms = 0;
    int64_t earliest_expiry_ms = 0;
  };
  LeaseCheck lease_check ABSL_GUARDED_BY(mu);
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

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<StudyRuntime>> runtimes_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_STUDY_RUNTIME_H_
