#include "service/http/connection_pool.h"

#include <utility>

namespace hypertune::service {

ConnectionPool::ConnectionPool(int max_threads, absl::Duration idle_timeout)
    : max_threads_(max_threads), idle_timeout_(idle_timeout) {}

ConnectionPool::~ConnectionPool() { shutdown(); }

void ConnectionPool::enqueue(std::function<void()> task) {
  JoinExited();
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
  if (idle_ < static_cast<int>(tasks_.size()) &&
      static_cast<int>(running_.size()) < max_threads_) {
    running_.emplace_front();
    Threads::iterator self = running_.begin();
    *self = std::thread([this, self] { Work(self); });
  }
}

void ConnectionPool::Work(Threads::iterator self) {
  absl::MutexLock lock(&mu_);
  while (true) {
    ++idle_;
    const bool woken = mu_.AwaitWithTimeout(
        absl::Condition(
            +[](ConnectionPool* pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool->mu_) {
              return pool->stopping_ || !pool->tasks_.empty();
            },
            this),
        idle_timeout_);
    --idle_;
    if (tasks_.empty() && (stopping_ || !woken)) break;
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    mu_.Unlock();
    task();
    mu_.Lock();
  }
  // Joined by whoever next calls JoinExited: a thread cannot join itself.
  exited_.push_back(std::move(*self));
  running_.erase(self);
}

void ConnectionPool::JoinExited() {
  std::vector<std::thread> exited;
  {
    absl::MutexLock lock(&mu_);
    exited.swap(exited_);
  }
  for (std::thread& t : exited) t.join();
}

void ConnectionPool::shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    mu_.Await(absl::Condition(
        +[](ConnectionPool* pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool->mu_) {
          return pool->running_.empty();
        },
        this));
  }
  JoinExited();
}

int ConnectionPool::threads() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(running_.size());
}

}  // namespace hypertune::service
