// ConnectionPool: the threads that serve the HTTP server's connections, one
// connection per thread at a time (httplib's model). Unlike a fixed pool it
// starts a thread whenever a connection arrives and none is idle, up to
// `max_threads`, so connections that are slow or silent (an idle client,
// a dashboard's event stream) never make a ready request wait behind them;
// threads idle for a while end. Past max_threads connections queue.
//
// Thread-safe: enqueue may be called from any thread; shutdown once, after
// the last enqueue.
#ifndef HYPERTUNE_SERVICE_HTTP_CONNECTION_POOL_H_
#define HYPERTUNE_SERVICE_HTTP_CONNECTION_POOL_H_

#include <deque>
#include <functional>
#include <list>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "httplib.h"

namespace hypertune::service {

class ConnectionPool final : public httplib::TaskQueue {
 public:
  // REQUIRES: max_threads >= 1.
  ConnectionPool(int max_threads, absl::Duration idle_timeout);
  ~ConnectionPool() override;

  // Runs `task` on an idle thread, a new one, or (at max_threads) the next
  // thread to become free.
  void enqueue(std::function<void()> task) override;
  // Runs what is queued, then returns once every thread has ended.
  void shutdown() override;

  // Threads alive now, for tests and /metrics.
  int threads() const;

 private:
  using Threads = std::list<std::thread>;
  // Serves tasks until idle for idle_timeout or stopping; then hands its
  // own handle (`self`) to exited_ for joining.
  void Work(Threads::iterator self);
  // Joins the threads that have ended. REQUIRES: mu_ not held.
  void JoinExited();

  const int max_threads_;
  const absl::Duration idle_timeout_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  Threads running_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> exited_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_HTTP_CONNECTION_POOL_H_
