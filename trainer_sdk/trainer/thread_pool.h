// ThreadPool: a fixed set of worker threads running one parallel loop at a
// time, for the CPU ops. The caller participates, so a pool of T threads
// starts T - 1 workers.
//
// Determinism: ParallelFor hands out task indices dynamically, so callers
// make each task's output depend only on its index (fixed chunking), never
// on which thread ran it.
//
// Thread safety: ParallelFor may be called from one thread at a time; it
// must not be called from inside a task (nested calls run serially).
#ifndef HYPERTUNE_TRAINER_SDK_TRAINER_THREAD_POOL_H_
#define HYPERTUNE_TRAINER_SDK_TRAINER_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hypertune::train {

class ThreadPool {
 public:
  // REQUIRES: threads >= 1.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return int(workers_.size()) + 1; }

  // Runs fn(i) for every i in [0, tasks), returns when all are done.
  void ParallelFor(int tasks, const std::function<void(int)>& fn);

 private:
  void WorkerLoop();
  void RunTasks();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  // Guarded by mu_.
  const std::function<void(int)>* fn_ = nullptr;
  int tasks_ = 0;
  long generation_ = 0;
  int busy_workers_ = 0;
  bool stop_ = false;
  std::atomic<int> next_{0};
  bool in_loop_ = false;
};

// Runs fn(i) for i in [0, tasks) on `pool`, or serially when pool is null
// or there is a single task.
void ParallelFor(ThreadPool* pool, int tasks,
                 const std::function<void(int)>& fn);

}  // namespace hypertune::train

#endif  // HYPERTUNE_TRAINER_SDK_TRAINER_THREAD_POOL_H_
