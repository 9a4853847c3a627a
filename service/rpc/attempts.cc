#include "service/rpc/attempts.h"

#include <algorithm>
#include <utility>

#include "common/limits.h"

namespace hypertune::service {

void BeginGrant(v1::Trial& trial) {
  if (trial.attempt() == 0) trial.set_attempt(1);
  trial.clear_lease_device_seconds();
  // Why it was lost is its earlier attempt's end_reason now; a running trial
  // has not failed.
  trial.clear_failure_reason();
}

v1::Attempt EndingAttempt(const v1::Trial& trial, const std::string& reason,
                          int64_t now_ms) {
  v1::Attempt ended;
  ended.set_number(std::max(trial.attempt(), 1));
  ended.set_client_id(trial.client_id());
  ended.set_end_reason(reason);
  ended.set_end_time_ms(now_ms);
  double earlier_seconds = 0;
  for (const v1::Attempt& a : trial.earlier_attempts()) {
    earlier_seconds += a.device_seconds();
  }
  ended.set_device_seconds(
      std::max(0.0, trial.device_seconds() - earlier_seconds));
  return ended;
}

void TrimEarlierCurves(v1::Trial& trial) {
  for (v1::Attempt& a : *trial.mutable_earlier_attempts()) {
    if (trial.ByteSizeLong() <= kMaxTrialBytes / 2) break;
    a.clear_measurements();
  }
}

void EndAttempt(v1::Trial& trial, const std::string& reason, int64_t now_ms) {
  const bool resumable = !trial.checkpoint_uri().empty();
  v1::Attempt ended = EndingAttempt(trial, reason, now_ms);
  auto* kept = trial.mutable_measurements();
  auto lost = std::stable_partition(
      kept->begin(), kept->end(), [&](const v1::Measurement& m) {
        return resumable && m.step() <= trial.checkpoint_step();
      });
  for (auto it = lost; it != kept->end(); ++it) {
    *ended.add_measurements() = std::move(*it);
  }
  kept->erase(lost, kept->end());
  *trial.add_earlier_attempts() = std::move(ended);
  TrimEarlierCurves(trial);
  trial.set_attempt(std::max(trial.attempt(), 1) + 1);
  trial.clear_lease_device_seconds();
}

double CountGrantDeviceSeconds(v1::Trial& trial, double grant_total) {
  const double growth = grant_total - trial.lease_device_seconds();
  if (growth <= 0) return 0;
  trial.set_lease_device_seconds(grant_total);
  return growth;
}

bool SetCheckpoint(v1::Trial& trial, const std::string& uri, int64_t step) {
  if (step == 0 && trial.measurements_size() > 0) {
    step = trial.measurements(trial.measurements_size() - 1).step();
  }
  if (uri == trial.checkpoint_uri() && step == trial.checkpoint_step()) {
    return false;
  }
  trial.set_checkpoint_uri(uri);
  trial.set_checkpoint_step(step);
  return true;
}

}  // namespace hypertune::service
