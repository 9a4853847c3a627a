// How many long-lived streams (WatchTrials, HTTP event feeds) a server
// holds open: in all, and per owner, so that one owner's watchers cannot
// take every stream (and the thread each holds) from the others.
//
// Thread-safe.
#ifndef HYPERTUNE_SERVICE_SERVER_STREAM_LIMITS_H_
#define HYPERTUNE_SERVICE_SERVER_STREAM_LIMITS_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace hypertune::service {

class StreamLimits {
 public:
  // `kind` names the streams in errors ("event streams").
  // REQUIRES: total >= 1, per_owner >= 1.
  StreamLimits(int total, int per_owner, std::string kind)
      : total_(total), per_owner_(per_owner), kind_(std::move(kind)) {}

  // Counts a stream of `owner` opened, or RESOURCE_EXHAUSTED saying which
  // limit it would pass, its message prefixed with `what` (the call).
  absl::Status Acquire(const std::string& owner, const std::string& what);
  // REQUIRES: a stream of `owner` that Acquire counted.
  void Release(const std::string& owner);

  // A stream counted while it lives.
  class Hold {
   public:
    Hold(StreamLimits& limits, std::string owner, const std::string& what)
        : limits_(limits),
          owner_(std::move(owner)),
          status_(limits_.Acquire(owner_, what)) {}
    ~Hold() {
      if (status_.ok()) limits_.Release(owner_);
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    // OK when the stream was counted; else why not.
    const absl::Status& status() const { return status_; }
    const std::string& owner() const { return owner_; }

   private:
    StreamLimits& limits_;
    const std::string owner_;
    const absl::Status status_;
  };

 private:
  const int total_;
  const int per_owner_;
  const std::string kind_;
  absl::Mutex mu_;
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, int> by_owner_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_SERVER_STREAM_LIMITS_H_
