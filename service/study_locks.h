// One mutex per study name, so that read-decide-write sequences on a study
// (suggest, complete) are atomic while different studies proceed in parallel.
//
// Thread-safe. Mutexes live as long as the registry: study names are few.
#ifndef HYPERTUNE_SERVICE_STUDY_LOCKS_H_
#define HYPERTUNE_SERVICE_STUDY_LOCKS_H_

#include <memory>
#include <string>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace hypertune::service {

class StudyLocks {
 public:
  // The mutex of study `name`, created on first use; valid while *this is.
  absl::Mutex& For(const std::string& name) {
    absl::MutexLock lock(&mu_);
    std::unique_ptr<absl::Mutex>& m = locks_[name];
    if (m == nullptr) m = std::make_unique<absl::Mutex>();
    return *m;
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<absl::Mutex>> locks_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_STUDY_LOCKS_H_
