#include "service/server/background_pool.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace hypertune::service {

BackgroundPool::BackgroundPool(int threads) {
  assert(threads >= 1);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

BackgroundPool::~BackgroundPool() {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    for (const StopFlag& stop : running_) *stop = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

void BackgroundPool::Run(StopFlag stop, optimizer::BackgroundJob job) {
  absl::MutexLock lock(&mu_);
  if (closing_) return;
  queue_.push_back({std::move(stop), std::move(job)});
}

optimizer::FitRunner BackgroundPool::RunnerFor(StopFlag stop) {
  return
      [this, stop](optimizer::BackgroundJob job) { Run(stop, std::move(job)); };
}

void BackgroundPool::Work() {
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](BackgroundPool* pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool->mu_) {
            return pool->closing_ || !pool->queue_.empty();
          },
          this));
      if (closing_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      if (*task.stop) continue;
      running_.push_back(task.stop);
    }
    task.job(*task.stop);
    absl::MutexLock lock(&mu_);
    running_.erase(std::find(running_.begin(), running_.end(), task.stop));
  }
}

}  // namespace hypertune::service
