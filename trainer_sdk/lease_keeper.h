// LeaseKeeper: the lease on one trial as the SDK holds it. It renews the
// lease from a background thread (one Heartbeat attempt per period, retried
// sooner after a transient failure) and keeps what renewals and other calls
// learn: whether the server asks the trial to stop early, and whether the
// lease is lost (FAILED_PRECONDITION or NOT_FOUND: the trial went to another
// worker, or someone finished or deleted it), after which renewals stop.
//
// The keeper holds the ClientCore, so the channel outlives the thread; the
// destructor stops and joins the thread (cancelling a renewal in flight).
//
// Thread safety: every method may be called from any thread.
#ifndef HYPERTUNE_TRAINER_SDK_LEASE_KEEPER_H_
#define HYPERTUNE_TRAINER_SDK_LEASE_KEEPER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "hypertune/v1/hypertune.pb.h"
#include "trainer_sdk/client_core.h"

namespace hypertune::internal {

// The shortest wait between renewals.
inline constexpr std::chrono::milliseconds kMinRenewalInterval{100};

// How long to wait before renewing a lease that runs out at `expire_ms` on
// the server's clock, seen at `now_ms` on ours: a third of what is left, so
// that two renewals may fail before it runs out, and at least
// kMinRenewalInterval (a lease that looks run out is renewed soon, not
// never). The server owns the lease's length; the trial and each renewal
// carry its expiry. Clocks that disagree by less than twice the lease keep
// it.
std::chrono::milliseconds RenewalInterval(int64_t expire_ms, int64_t now_ms);

class LeaseKeeper {
 public:
  // The lease on trial `trial_id` of `study` granted under `epoch` to
  // `client_id`, held since `held_since` by a program using `devices`
  // devices: every renewal carries the device-seconds used since then.
  // REQUIRES: `core` is not null, devices >= 1.
  LeaseKeeper(std::shared_ptr<ClientCore> core, std::string study,
              int64_t trial_id, int64_t epoch, std::string client_id,
              int devices, std::chrono::steady_clock::time_point held_since);
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Starts renewing from a background thread: every `fixed_interval` if it
  // is positive, else by RenewalInterval from the lease's expiry,
  // `expire_ms` at first and then each renewal's. Does nothing if it was
  // started before or the lease is lost.
  void Start(std::chrono::milliseconds fixed_interval, int64_t expire_ms);
  // Stops renewing and joins the thread. Idempotent.
  void Stop();
  // Stops renewing once the server has accepted the trial's end: a renewal
  // it refused meanwhile (the trial no longer running) was that end's
  // doing, not a lost lease, and is forgotten.
  void Settle();
  // Whether the background thread runs (started, not stopped, lease held).
  bool running() const;

  // One renewal now, with the Client's retries, recording `checkpoint_uri`
  // (which holds `checkpoint_step`; 0 = the latest measured step) and
  // `log_path` on the trial where not empty. Returns the server's answer or
  // its error, which Observe() has seen.
  absl::StatusOr<v1::HeartbeatResponse> Renew(
      const std::string& checkpoint_uri = "", const std::string& log_path = "",
      int64_t checkpoint_step = 0);

  // The device-seconds used since the lease was taken: wall seconds times
  // the devices (HeartbeatRequest/CompleteTrialRequest.device_seconds).
  // Frozen by StopDeviceClock.
  double DeviceSeconds() const;
  // The devices are idle from now on (the program ended, the lease is
  // still held): DeviceSeconds stays at its value now. Idempotent.
  void StopDeviceClock();

  // Takes note of the outcome of a call on the trial: one saying the lease
  // is lost stops the renewals and is returned by lost() from then on.
  void Observe(const absl::Status& status);

  // OK while the lease may still be ours, else the error that showed it lost.
  absl::Status lost() const;
  // Whether the last renewal asked the trial to stop early.
  bool should_stop() const;
  // PBT: the number of the trial's latest exploit as renewals saw it (0:
  // none).
  int latest_exploit() const;

 private:
  v1::HeartbeatRequest Request() const;
  void Loop(std::chrono::milliseconds fixed_interval, int64_t expire_ms);
  bool Done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !lost_.ok();
  }

  const std::shared_ptr<ClientCore> core_;
  const std::string study_;
  const int64_t trial_id_;
  const int64_t epoch_;
  const std::string client_id_;
  const int devices_;
  const std::chrono::steady_clock::time_point held_since_;
  // DeviceSeconds once StopDeviceClock ran; negative before.
  std::atomic<double> stopped_at_{-1.0};

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool should_stop_ ABSL_GUARDED_BY(mu_) = false;
  int latest_exploit_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status lost_ ABSL_GUARDED_BY(mu_);
  // The background renewal in flight, cancelled by Stop().
  grpc::ClientContext* in_flight_ ABSL_GUARDED_BY(mu_) = nullptr;

  // Serializes joins of thread_ (Stop may run on several threads at once).
  absl::Mutex join_mu_;
  std::thread thread_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace hypertune::internal

#endif  // HYPERTUNE_TRAINER_SDK_LEASE_KEEPER_H_
