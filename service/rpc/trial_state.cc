#include "service/rpc/trial_state.h"

#include <utility>

#include "absl/strings/str_format.h"

namespace hypertune::service {
namespace {

using State = v1::Trial::State;

// The table of trial_state.h's header.
constexpr std::pair<State, State> kLegal[] = {
    {v1::Trial::STATE_UNSPECIFIED, v1::Trial::REQUESTED},
    {v1::Trial::STATE_UNSPECIFIED, v1::Trial::ACTIVE},
    {v1::Trial::STATE_UNSPECIFIED, v1::Trial::COMPLETED},
    {v1::Trial::REQUESTED, v1::Trial::ACTIVE},
    {v1::Trial::REQUESTED, v1::Trial::STOPPED},
    {v1::Trial::ACTIVE, v1::Trial::COMPLETED},
    {v1::Trial::ACTIVE, v1::Trial::INFEASIBLE},
    {v1::Trial::ACTIVE, v1::Trial::STOPPING},
    {v1::Trial::ACTIVE, v1::Trial::PAUSED},
    {v1::Trial::ACTIVE, v1::Trial::REQUESTED},
    {v1::Trial::ACTIVE, v1::Trial::FAILED},
    {v1::Trial::STOPPING, v1::Trial::STOPPED},
    {v1::Trial::STOPPING, v1::Trial::INFEASIBLE},
    {v1::Trial::PAUSED, v1::Trial::ACTIVE},
    {v1::Trial::PAUSED, v1::Trial::STOPPED},
};

}  // namespace

bool IsLegalTransition(State from, State to) {
  for (const auto& [legal_from, legal_to] : kLegal) {
    if (legal_from == from && legal_to == to) return true;
  }
  return false;
}

absl::Status Transition(v1::Trial& trial, State to) {
  if (IsLegalTransition(trial.state(), to)) {
    trial.set_state(to);
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrFormat(
      "trial %d of study \"%s\": %s -> %s is not a legal change of state",
      trial.id(), trial.study_name(), v1::Trial::State_Name(trial.state()),
      v1::Trial::State_Name(to)));
}

bool IsFinal(State state) {
  return state == v1::Trial::COMPLETED || state == v1::Trial::STOPPED ||
         state == v1::Trial::INFEASIBLE || state == v1::Trial::FAILED;
}

absl::Status StopNow(v1::Trial& trial, const std::string& reason, int64_t now) {
  if (absl::Status s = Transition(trial, v1::Trial::STOPPED); !s.ok()) return s;
  trial.set_stop_reason(reason);
  trial.set_lease_expire_time_ms(0);
  trial.set_end_time_ms(now);
  if (trial.measurements_size() > 0) {
    *trial.mutable_final_measurement() =
        trial.measurements(trial.measurements_size() - 1);
  }
  return absl::OkStatus();
}

}  // namespace hypertune::service
