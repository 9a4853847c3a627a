// Trial: typed parameter access and the calls that report on one trial.
#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trainer_sdk/client_core.h"
#include "trainer_sdk/hypertune.h"
#include "trainer_sdk/lease_keeper.h"

namespace hypertune {
namespace {

// The parameter's value as text for error messages.
std::string Describe(const v1::ParameterValue& value) {
  switch (value.value_case()) {
    case v1::ParameterValue::kDoubleValue:
      return absl::StrCat("the number ", value.double_value());
    case v1::ParameterValue::kIntValue:
      return absl::StrCat("the integer ", value.int_value());
    case v1::ParameterValue::kStringValue:
      return absl::StrCat("the category \"", value.string_value(), "\"");
    case v1::ParameterValue::VALUE_NOT_SET:
      break;
  }
  return "unset";
}

absl::Status CheckNoNaN(const Metrics& metrics, const std::string& where) {
  for (const auto& [name, value] : metrics) {
    if (std::isnan(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": metric \"", name, "\" is NaN"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

Trial::Trial(v1::Trial proto) : Trial(nullptr, std::move(proto), nullptr) {}

Trial::Trial(std::shared_ptr<internal::ClientCore> core, v1::Trial proto,
             std::shared_ptr<internal::ClientIdSlot> slot, bool renew,
             int devices)
    : core_(std::move(core)),
      proto_(std::move(proto)),
      slot_(std::move(slot)),
      attached_at_(std::chrono::steady_clock::now()) {
  if (core_ != nullptr) {
    lease_ = std::make_shared<internal::LeaseKeeper>(
        core_, proto_.study_name(), proto_.id(), proto_.lease_epoch(),
        proto_.client_id(),
        devices > 0 ? devices : std::max(1, core_->options().devices),
        attached_at_);
    if (renew) {
      lease_->Start(core_->options().heartbeat_interval,
                    proto_.lease_expire_time_ms());
    }
  }
  if (proto_.start_time_ms() > 0) {
    int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    // Clocks of client and server may disagree a little; never go negative.
    elapsed_at_attach_ =
        std::max<int64_t>(0, now_ms - proto_.start_time_ms()) / 1000.0;
  }
  for (const v1::Measurement& m : proto_.measurements()) {
    last_step_ = std::max(last_step_, m.step());
  }
}

namespace {

absl::StatusOr<const v1::ParameterValue*> Find(const v1::Trial& trial,
                                               std::string_view wanted) {
  absl::string_view name(wanted.data(), wanted.size());
  std::vector<absl::string_view> names;
  for (const v1::ParameterValue& value : trial.parameters()) {
    if (value.name() == name) {
      if (value.value_case() == v1::ParameterValue::VALUE_NOT_SET) {
        return absl::InvalidArgumentError(absl::StrCat(
            "trial ", trial.id(), ": parameter \"", name, "\" has no value"));
      }
      return &value;
    }
    names.push_back(value.name());
  }
  return absl::NotFoundError(absl::StrCat(
      "trial ", trial.id(), " has no parameter \"", name, "\" (it has: ",
      names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
}

absl::Status WrongKind(const v1::Trial& trial, const v1::ParameterValue& value,
                       const char* wanted) {
  return absl::InvalidArgumentError(
      absl::StrCat("trial ", trial.id(), ": parameter \"", value.name(),
                   "\" is ", Describe(value), ", not ", wanted));
}

}  // namespace

absl::StatusOr<double> Trial::Double(std::string_view name) const {
  absl::StatusOr<const v1::ParameterValue*> value = Find(proto_, name);
  if (!value.ok()) return value.status();
  switch ((*value)->value_case()) {
    case v1::ParameterValue::kDoubleValue:
      return (*value)->double_value();
    case v1::ParameterValue::kIntValue:
      return static_cast<double>((*value)->int_value());
    default:
      return WrongKind(proto_, **value, "a number");
  }
}

absl::StatusOr<int64_t> Trial::Int(std::string_view name) const {
  absl::StatusOr<const v1::ParameterValue*> value = Find(proto_, name);
  if (!value.ok()) return value.status();
  switch ((*value)->value_case()) {
    case v1::ParameterValue::kIntValue:
      return (*value)->int_value();
    case v1::ParameterValue::kDoubleValue: {
      // A DISCRETE value such as a batch size of 64.
      double d = (*value)->double_value();
      // 2^63 is exactly representable; anything at or past it overflows.
      constexpr double kLimit = 9223372036854775808.0;
      if (d == std::trunc(d) && d >= -kLimit && d < kLimit) {
        return static_cast<int64_t>(d);
      }
      return WrongKind(proto_, **value, "an integer");
    }
    default:
      return WrongKind(proto_, **value, "an integer");
  }
}

absl::StatusOr<std::string> Trial::String(std::string_view name) const {
  absl::StatusOr<const v1::ParameterValue*> value = Find(proto_, name);
  if (!value.ok()) return value.status();
  if ((*value)->value_case() != v1::ParameterValue::kStringValue) {
    return WrongKind(proto_, **value, "a category");
  }
  return (*value)->string_value();
}

absl::StatusOr<Client> Trial::Attached() const {
  if (core_ != nullptr) return Client(core_);
  return absl::FailedPreconditionError(
      absl::StrCat("trial ", proto_.id(),
                   " is a detached handle (built from a proto, not obtained "
                   "from a Client)"));
}

absl::Status Trial::Usable() const {
  if (absl::Status s = Attached().status(); !s.ok()) return s;
  return lease_->lost();
}

bool Trial::should_stop() const {
  // A rank that does not report stops too once rank 0 has ended the trial
  // (it may read STOPPED or COMPLETED, never STOPPING).
  const bool ended = !reports_ && proto_.state() != v1::Trial::ACTIVE &&
                     proto_.state() != v1::Trial::STATE_UNSPECIFIED;
  return ended || proto_.state() == v1::Trial::STOPPING ||
         proto_.state() == v1::Trial::PAUSED ||
         (lease_ != nullptr && lease_->should_stop());
}

void Trial::Poll() {
  absl::StatusOr<Client> client = Attached();
  if (!client.ok()) return;
  absl::StatusOr<Trial> stored = client->GetTrial(proto_.study_name(), id());
  if (!stored.ok()) return;
  const int64_t epoch = proto_.lease_epoch();
  proto_ = stored->proto();
  proto_.set_lease_epoch(epoch);
}

absl::StatusOr<bool> Trial::ShouldStop() {
  absl::StatusOr<Client> client = Attached();
  if (!client.ok()) return client.status();
  if (!reports_) {
    // The rule is rank 0's to apply; this rank reads what it decided.
    Poll();
    return should_stop();
  }
  absl::StatusOr<v1::CheckEarlyStoppingResponse> response =
      client->CheckEarlyStopping(proto_.study_name(), proto_.id());
  if (!response.ok()) return response.status();
  if (response->should_stop()) {
    proto_.set_state(response->state());
    proto_.set_stop_reason(response->reason());
  }
  return should_stop();
}

void Trial::StopDeviceClock() {
  if (lease_ != nullptr) lease_->StopDeviceClock();
}

bool Trial::heartbeating() const {
  return lease_ != nullptr && lease_->running();
}

double Trial::ElapsedSeconds() const {
  return elapsed_at_attach_ +
         std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       attached_at_)
             .count();
}

absl::Status Trial::Report(int64_t step, const Metrics& metrics) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  absl::StatusOr<Client> client = Attached();
  std::string where = absl::StrCat("trial ", proto_.id(), " step ", step);
  if (metrics.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": no metrics"));
  }
  if (absl::Status s = CheckNoNaN(metrics, where); !s.ok()) return s;
  if (!reports_) {
    Poll();
    last_step_ = std::max(last_step_, step);
    return absl::OkStatus();
  }
  v1::AddMeasurementRequest request;
  request.set_study_name(proto_.study_name());
  request.set_trial_id(proto_.id());
  request.set_lease_epoch(proto_.lease_epoch());
  v1::Measurement* m = request.mutable_measurement();
  m->set_step(step);
  m->set_elapsed_seconds(ElapsedSeconds());
  m->mutable_metrics()->insert(metrics.begin(), metrics.end());
  absl::StatusOr<v1::Trial> response = client->AddMeasurement(request);
  lease_->Observe(response.status());
  if (!response.ok()) return response.status();
  if (response->exploits_size() > proto_.exploits_size()) {
    // PBT: the trial took a donor's checkpoint, curve and parameters; read
    // it whole and go on from the checkpoint's step.
    absl::StatusOr<Trial> whole =
        client->GetTrial(proto_.study_name(), proto_.id());
    if (!whole.ok()) return whole.status();
    proto_ = whole->proto();
    last_step_ = proto_.checkpoint_step();
    untaken_exploit_ = proto_.exploits(proto_.exploits_size() - 1);
    return absl::OkStatus();
  }
  // The answer holds only the measurement this report added (or, for a
  // retry, the one stored at its step): the curve kept here grows by it.
  google::protobuf::RepeatedPtrField<v1::Measurement> curve =
      std::move(*proto_.mutable_measurements());
  for (v1::Measurement& added : *response->mutable_measurements()) {
    const int64_t latest = curve.empty() ? -1 : curve[curve.size() - 1].step();
    if (added.step() > latest) {
      *curve.Add() = std::move(added);
    } else if (added.step() == latest) {
      curve[curve.size() - 1] = std::move(added);
    }  // An earlier step's retry: the curve has it already.
  }
  proto_ = std::move(*response);
  *proto_.mutable_measurements() = std::move(curve);
  last_step_ = std::max(last_step_, step);
  return absl::OkStatus();
}

std::optional<v1::PbtExploit> Trial::TakeExploit() {
  std::optional<v1::PbtExploit> taken = std::move(untaken_exploit_);
  untaken_exploit_.reset();
  return taken;
}

int Trial::latest_exploit() const {
  const int renewed = lease_ != nullptr ? lease_->latest_exploit() : 0;
  return std::max(renewed, proto_.exploits_size());
}

absl::Status Trial::Complete(const Metrics& metrics) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  std::string where = absl::StrCat("trial ", proto_.id(), " final");
  if (metrics.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": no metrics"));
  }
  for (const auto& [name, value] : metrics) {
    if (std::isnan(value)) {
      return MarkInfeasible(absl::StrCat("metric \"", name, "\" is NaN"));
    }
  }
  v1::CompleteTrialRequest request;
  v1::Measurement* m = request.mutable_final_measurement();
  m->set_step(last_step_);
  m->set_elapsed_seconds(ElapsedSeconds());
  m->mutable_metrics()->insert(metrics.begin(), metrics.end());
  return Finish(std::move(request));
}

absl::Status Trial::MarkInfeasible(const std::string& reason) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  v1::CompleteTrialRequest request;
  request.set_infeasible(true);
  request.set_infeasible_reason(reason);
  return Finish(std::move(request));
}

absl::Status Trial::GiveBack(const std::string& reason, bool preempted) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  v1::CompleteTrialRequest request;
  request.set_worker_failed(true);
  request.set_failure_reason(reason);
  request.set_preempted(preempted);
  return Finish(std::move(request));
}

absl::Status Trial::Finish(v1::CompleteTrialRequest request) {
  // Another rank reports the trial's end.
  if (!reports_) return absl::OkStatus();
  absl::StatusOr<Client> client = Attached();
  if (!client.ok()) return client.status();
  request.set_study_name(proto_.study_name());
  request.set_trial_id(proto_.id());
  request.set_lease_epoch(proto_.lease_epoch());
  // The device time since this handle took the trial (the server counts
  // what the renewals did not already report).
  request.set_device_seconds(lease_->DeviceSeconds());
  if (paused() && !request.infeasible()) {
    // Paused at a rung: it is resumed from its checkpoint when promoted
    // (perhaps by another worker already), so there is nothing to settle
    // but the time it ran, which the server counts (or, promoted already,
    // refuses: a few seconds lost).
    v1::CompleteTrialRequest count;
    count.set_study_name(request.study_name());
    count.set_trial_id(request.trial_id());
    count.set_lease_epoch(request.lease_epoch());
    count.set_device_seconds(request.device_seconds());
    client->CompleteTrial(count).IgnoreError();
    lease_->Stop();
    if (slot_ != nullptr) slot_->Release();
    return absl::OkStatus();
  }
  absl::StatusOr<v1::Trial> response = client->CompleteTrial(request);
  lease_->Observe(response.status());
  if (response.ok()) {
    lease_->Settle();
  } else if (lease_->lost().ok()) {
    // Other errors keep the lease renewed, so that the caller may try again.
    return response.status();
  } else {
    lease_->Stop();
  }
  // Either way the trial is no longer this caller's to run.
  if (slot_ != nullptr) slot_->Release();
  if (!response.ok()) return response.status();
  proto_ = std::move(*response);
  return absl::OkStatus();
}

absl::StatusOr<bool> Trial::Heartbeat(const std::string& checkpoint_uri,
                                      int64_t checkpoint_step) {
  if (absl::Status s = Usable(); !s.ok()) return s;
  if (!reports_) {
    Poll();
    return should_stop();
  }
  absl::StatusOr<v1::HeartbeatResponse> response =
      lease_->Renew(checkpoint_uri, "", checkpoint_step);
  if (!response.ok()) return response.status();
  proto_.set_lease_expire_time_ms(response->lease_expire_time_ms());
  if (!checkpoint_uri.empty()) {
    proto_.set_checkpoint_uri(checkpoint_uri);
    proto_.set_checkpoint_step(checkpoint_step > 0 ? checkpoint_step
                                                   : last_step_);
  }
  return response->should_stop();
}

absl::Status Trial::SetCheckpoint(const std::string& uri, int64_t step) {
  if (uri.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("trial ", proto_.id(), ": checkpoint uri is empty"));
  }
  if (step < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trial ", proto_.id(), ": checkpoint step ", step, " is negative"));
  }
  // Another rank records the checkpoint.
  if (!reports_) return Usable();
  return Heartbeat(uri, step).status();
}

}  // namespace hypertune
