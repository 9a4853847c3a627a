// BackgroundPool: a few threads that run jobs off the request path (the GP's
// large hyperparameter fits, optimizer/gp_bandit_suggester.h), each with a
// stop flag its owner can raise (StopFlag), so that a deleted study's work
// ends early and queued work never starts.
//
// Thread-safe. The destructor raises every flag it holds, runs no further
// job and joins the threads.
#ifndef HYPERTUNE_SERVICE_SERVER_BACKGROUND_POOL_H_
#define HYPERTUNE_SERVICE_SERVER_BACKGROUND_POOL_H_

#include <atomic>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "optimizer/suggester.h"

namespace hypertune::service {

// Raised once; shared by the jobs of one owner (a study's suggester).
using StopFlag = std::shared_ptr<std::atomic<bool>>;

class BackgroundPool {
 public:
  // REQUIRES: threads >= 1
  explicit BackgroundPool(int threads);
  ~BackgroundPool();
  BackgroundPool(const BackgroundPool&) = delete;
  BackgroundPool& operator=(const BackgroundPool&) = delete;

  // Runs job(*stop) on a pool thread, in the order given; not at all if
  // `stop` is raised before its turn.
  void Run(StopFlag stop, optimizer::BackgroundJob job);

  // A runner for a suggester whose jobs all stop with `stop`.
  optimizer::FitRunner RunnerFor(StopFlag stop);

 private:
  struct Task {
    StopFlag stop;
    optimizer::BackgroundJob job;
  };
  void Work();

  absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  // The flags of the jobs running now, raised when the pool goes.
  std::vector<StopFlag> running_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_SERVER_BACKGROUND_POOL_H_
