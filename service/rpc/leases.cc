#include "service/rpc/leases.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/limits.h"
#include "service/rpc/attempts.h"
#include "service/rpc/status_macros.h"
#include "service/rpc/trial_state.h"
#include "service/server/metrics.h"

namespace hypertune::service {

int64_t Leases::LeaseMs(const v1::Study& study) const {
  return study.spec().lease_seconds() > 0
             ? int64_t{study.spec().lease_seconds()} * 1000
             : context_.options().lease_ms;
}

absl::Status Leases::Grant(const v1::Study& study, v1::Trial& trial,
                           const std::string& client_id, int64_t now) const {
  HT_RETURN_IF_ERROR(Transition(trial, v1::Trial::ACTIVE));
  trial.set_client_id(client_id);
  trial.set_lease_epoch(trial.lease_epoch() + 1);
  trial.set_lease_expire_time_ms(now + LeaseMs(study));
  if (trial.start_time_ms() == 0) trial.set_start_time_ms(now);
  BeginGrant(trial);
  return absl::OkStatus();
}

absl::Status Leases::Release(const v1::Study& study, v1::Trial& trial,
                             const std::string& reason, Loss loss) const {
  if (trial.state() == v1::Trial::STOPPING) {
    // The stop was decided: no one needs to run it again.
    return StopNow(trial, trial.stop_reason(), context_.Now());
  }
  // A worker lost spends the retries; a machine taken away, the
  // preemptions: a spot fleet loses machines without any fault of a trial.
  const v1::StudySpec& spec = study.spec();
  const bool preempted = loss == Loss::kPreempted;
  const int allowed =
      preempted ? (spec.has_max_preemptions() ? spec.max_preemptions()
                                              : kDefaultMaxPreemptions)
                : (spec.has_max_retries() ? spec.max_retries()
                                          : context_.options().max_retries);
  const int count =
      1 + (preempted ? trial.preemption_count() : trial.retry_count());
  const bool retry = count <= allowed;
  // Queued for the next worker, as a new attempt resumed from the
  // checkpoint, or FAILED once the retries are spent.
  HT_RETURN_IF_ERROR(
      Transition(trial, retry ? v1::Trial::REQUESTED : v1::Trial::FAILED));
  if (preempted) {
    trial.set_preemption_count(count);
  } else {
    trial.set_retry_count(count);
  }
  trial.set_lease_expire_time_ms(0);
  if (retry) {
    trial.set_failure_reason(reason);
    EndAttempt(trial, reason, context_.Now());
  } else {
    trial.set_failure_reason(
        preempted
            ? absl::StrFormat(
                  "%s; its worker was preempted %d times (max_preemptions %d)",
                  reason, count, allowed)
            : absl::StrFormat(
                  "%s; the worker was lost %d times (max_retries %d)", reason,
                  count, allowed));
    trial.set_end_time_ms(context_.Now());
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Trial> Leases::ReleaseAndSave(const v1::Study& study,
                                                 const v1::Trial& read,
                                                 const std::string& reason) {
  v1::Trial released = read;
  HT_RETURN_IF_ERROR(Release(study, released, reason, Loss::kWorkerLost));
  HT_RETURN_IF_ERROR(
      context_.SaveTrial(storage::TrialVersion::Of(read), released));
  return released;
}

absl::Status Leases::ExpireIfDue(StudyRuntime& runtime, const std::string& name,
                                 int64_t now) {
  {
    absl::ReaderMutexLock lock(&runtime.mu);
    if (now < runtime.lease_check.earliest_expiry_ms) return absl::OkStatus();
  }
  absl::MutexLock lock(&runtime.mu);
  absl::StatusOr<v1::Study> study = context_.store().GetStudy(name);
  if (!study.ok()) return study.status();
  if (study->state() != v1::Study::ACTIVE) return absl::OkStatus();
  return ExpireLocked(runtime, *study, now);
}

absl::Status Leases::ExpireLocked(StudyRuntime& runtime, const v1::Study& study,
                                  int64_t now) {
  // Expiries only move later (renewals, new grants a full lease from now),
  // so until the earliest one seen no lease can have run out.
  if (runtime.lease_check.study_created_ms == study.create_time_ms() &&
      now < runtime.lease_check.earliest_expiry_ms) {
    return absl::OkStatus();
  }
  storage::TrialQuery running;
  running.states = {v1::Trial::ACTIVE, v1::Trial::STOPPING};
  absl::StatusOr<std::vector<v1::Trial>> trials =
      context_.store().ListTrials(study.name(), running);
  if (!trials.ok()) return trials.status();
  int64_t earliest = std::numeric_limits<int64_t>::max();
  for (v1::Trial& t : *trials) {
    if (t.lease_expire_time_ms() > now) {
      earliest = std::min(earliest, t.lease_expire_time_ms());
      continue;
    }
    HT_RETURN_IF_ERROR(ReleaseAndSave(study, t, "lease expired").status());
    if (context_.options().metrics != nullptr) {
      context_.options().metrics->CountLeaseExpiry(study.name());
    }
  }
  // Trials granted from now on expire a full lease from now at the earliest.
  earliest = std::min(earliest, now + LeaseMs(study));
  runtime.lease_check = {study.create_time_ms(), earliest};
  return absl::OkStatus();
}

absl::Status Leases::ExpireAll() {
  absl::StatusOr<std::vector<v1::Study>> studies =
      context_.store().ListStudies();
  if (!studies.ok()) return studies.status();
  for (const v1::Study& listed : *studies) {
    StudyRuntime& runtime = context_.runtimes().For(listed.name());
    absl::MutexLock lock(&runtime.mu);
    absl::StatusOr<v1::Study> study = context_.store().GetStudy(listed.name());
    if (absl::IsNotFound(study.status())) continue;  // deleted meanwhile
    if (!study.ok()) return study.status();
    HT_RETURN_IF_ERROR(ExpireLocked(runtime, *study, context_.Now()));
  }
  return absl::OkStatus();
}

absl::Status Leases::ExtendOnStart() {
  absl::StatusOr<std::vector<v1::Study>> studies =
      context_.store().ListStudies();
  if (!studies.ok()) return studies.status();
  for (const v1::Study& study : *studies) {
    absl::MutexLock lock(&context_.runtimes().For(study.name()).mu);
    storage::TrialQuery running;
    running.states = {v1::Trial::ACTIVE, v1::Trial::STOPPING};
    absl::StatusOr<std::vector<v1::Trial>> trials =
        context_.store().ListTrials(study.name(), running);
    if (!trials.ok()) return trials.status();
    const int64_t expiry = context_.Now() + LeaseMs(study);
    for (v1::Trial& t : *trials) {
      t.set_lease_expire_time_ms(std::max(t.lease_expire_time_ms(), expiry));
      HT_RETURN_IF_ERROR(context_.store().RenewTrialLease(t));
    }
  }
  return absl::OkStatus();
}

}  // namespace hypertune::service
