#include "trainer_sdk/lease_keeper.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/random/random.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "trainer_sdk/grpc_status.h"

namespace hypertune::internal {
namespace {

// The trial is no longer ours: another worker holds it, or it is finished
// or gone.
bool LeaseLostBy(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition ||
         status.code() == absl::StatusCode::kNotFound;
}

// Failures that a later renewal may not meet.
bool Transient(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::chrono::milliseconds RenewalInterval(int64_t expire_ms, int64_t now_ms) {
  return std::max(std::chrono::milliseconds((expire_ms - now_ms) / 3),
                  kMinRenewalInterval);
}

LeaseKeeper::LeaseKeeper(std::shared_ptr<ClientCore> core, std::string study,
                         int64_t trial_id, int64_t epoch, std::string client_id,
                         int devices,
                         std::chrono::steady_clock::time_point held_since)
    : core_(std::move(core)),
      study_(std::move(study)),
      trial_id_(trial_id),
      epoch_(epoch),
      client_id_(std::move(client_id)),
      devices_(devices),
      held_since_(held_since) {}

double LeaseKeeper::DeviceSeconds() const {
  const double stopped = stopped_at_.load();
  if (stopped >= 0) return stopped;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       held_since_)
             .count() *
         devices_;
}

void LeaseKeeper::StopDeviceClock() {
  double running = -1.0;
  stopped_at_.compare_exchange_strong(running, DeviceSeconds());
}

LeaseKeeper::~LeaseKeeper() { Stop(); }

void LeaseKeeper::Start(std::chrono::milliseconds fixed_interval,
                        int64_t expire_ms) {
  absl::MutexLock join_lock(&join_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (started_ || Done()) return;
    started_ = true;
    running_ = true;
  }
  thread_ = std::thread(
      [this, fixed_interval, expire_ms] { Loop(fixed_interval, expire_ms); });
}

void LeaseKeeper::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (in_flight_ != nullptr) in_flight_->TryCancel();
  }
  absl::MutexLock join_lock(&join_mu_);
  if (thread_.joinable()) thread_.join();
}

void LeaseKeeper::Settle() {
  Stop();
  absl::MutexLock lock(&mu_);
  lost_ = absl::OkStatus();
}

bool LeaseKeeper::running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

absl::Status LeaseKeeper::lost() const {
  absl::MutexLock lock(&mu_);
  return lost_;
}

bool LeaseKeeper::should_stop() const {
  absl::MutexLock lock(&mu_);
  return should_stop_;
}

int LeaseKeeper::latest_exploit() const {
  absl::MutexLock lock(&mu_);
  return latest_exploit_;
}

void LeaseKeeper::Observe(const absl::Status& status) {
  if (!LeaseLostBy(status)) return;
  absl::MutexLock lock(&mu_);
  if (lost_.ok()) lost_ = status;
}

v1::HeartbeatRequest LeaseKeeper::Request() const {
  v1::HeartbeatRequest request;
  request.set_study_name(study_);
  request.set_trial_id(trial_id_);
  request.set_lease_epoch(epoch_);
  request.set_client_id(client_id_);
  request.set_device_seconds(DeviceSeconds());
  return request;
}

absl::StatusOr<v1::HeartbeatResponse> LeaseKeeper::Renew(
    const std::string& checkpoint_uri, const std::string& log_path,
    int64_t checkpoint_step) {
  if (absl::Status s = lost(); !s.ok()) return s;
  v1::HeartbeatRequest request = Request();
  request.set_checkpoint_uri(checkpoint_uri);
  if (!checkpoint_uri.empty()) request.set_checkpoint_step(checkpoint_step);
  request.set_log_path(log_path);
  v1::HeartbeatResponse response;
  absl::Status status = core_->Call(
      "Heartbeat", Retry::kIdempotent, [&](grpc::ClientContext& context) {
        return core_->stub().Heartbeat(&context, request, &response);
      });
  Observe(status);
  if (!status.ok()) return status;
  absl::MutexLock lock(&mu_);
  should_stop_ = response.should_stop();
  latest_exploit_ =
      std::max(latest_exploit_, response.latest_exploit().number());
  return response;
}

void LeaseKeeper::Loop(std::chrono::milliseconds fixed_interval,
                       int64_t expire_ms) {
  const ClientOptions& options = core_->options();
  absl::BitGen bitgen;
  int failures = 0;
  auto until_renewal = [&] {
    return fixed_interval.count() > 0
               ? fixed_interval
               : RenewalInterval(expire_ms, absl::ToUnixMillis(absl::Now()));
  };
  std::chrono::milliseconds interval = until_renewal();
  std::chrono::milliseconds wait = interval;
  mu_.Lock();
  while (true) {
    mu_.AwaitWithTimeout(absl::Condition(this, &LeaseKeeper::Done),
                         absl::FromChrono(wait));
    if (Done()) break;
    grpc::ClientContext context;
    // A channel that cannot be set up: the trial's own calls say why.
    if (!core_->PrepareContext(context, options.call_timeout).ok()) break;
    v1::HeartbeatResponse response;
    // Each renewal carries the device-seconds used until now.
    const v1::HeartbeatRequest request = Request();
    in_flight_ = &context;
    mu_.Unlock();
    absl::Status status =
        ToAbslStatus(core_->stub().Heartbeat(&context, request, &response));
    mu_.Lock();
    in_flight_ = nullptr;
    if (status.ok()) {
      should_stop_ = response.should_stop();
      latest_exploit_ =
          std::max(latest_exploit_, response.latest_exploit().number());
      failures = 0;
      expire_ms = response.lease_expire_time_ms();
      interval = until_renewal();
      wait = interval;
      continue;
    }
    if (stopping_) break;
    if (LeaseLostBy(status)) {
      if (lost_.ok()) lost_ = status;
      break;
    }
    // Renewing cannot work (e.g. UNAUTHENTICATED): the lease runs out, and
    // the trial's own calls report why.
    if (!Transient(status.code())) break;
    wait = std::min(interval, BackoffDelay(++failures, options.initial_backoff,
                                           options.max_backoff,
                                           absl::Uniform(bitgen, 0.5, 1.0)));
  }
  running_ = false;
  mu_.Unlock();
}

}  // namespace hypertune::internal
