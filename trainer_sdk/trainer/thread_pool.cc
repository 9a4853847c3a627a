#include "trainer_sdk/trainer/thread_pool.h"

namespace hypertune::train {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunTasks() {
  while (true) {
    int i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= tasks_) return;
    (*fn_)(i);
  }
}

void ThreadPool::WorkerLoop() {
  long seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    RunTasks();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--busy_workers_ == 0) done_cv_.notify_one();
    }
  }
}

void ThreadPool::ParallelFor(int tasks, const std::function<void(int)>& fn) {
  if (tasks <= 0) return;
  if (workers_.empty() || tasks == 1 || in_loop_) {
    for (int i = 0; i < tasks; ++i) fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_loop_ = true;
    fn_ = &fn;
    tasks_ = tasks;
    next_.store(0, std::memory_order_relaxed);
    busy_workers_ = int(workers_.size());
    ++generation_;
  }
  start_cv_.notify_all();
  RunTasks();
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return busy_workers_ == 0; });
  fn_ = nullptr;
  in_loop_ = false;
}

void ParallelFor(ThreadPool* pool, int tasks,
                 const std::function<void(int)>& fn) {
  if (pool == nullptr || tasks <= 1) {
    for (int i = 0; i < tasks; ++i) fn(i);
    return;
  }
  pool->ParallelFor(tasks, fn);
}

}  // namespace hypertune::train
