// The trial state machine (README, "Trial states"): every legal change
// of a trial's state, in one table, and the one function that changes it.
//
//   (new)      -> REQUESTED (queued)  | ACTIVE (granted) | COMPLETED (a known
//                 result: warm start)
//   REQUESTED  -> ACTIVE (granted) | STOPPED (stopped by hand)
//   ACTIVE     -> COMPLETED | INFEASIBLE (its worker finished it)
//              |  STOPPING (early stop decided) | PAUSED (at an ASHA rung)
//              |  REQUESTED (worker lost, retries left) | FAILED (none left)
//   STOPPING   -> STOPPED (finished, or its worker lost) | INFEASIBLE
//   PAUSED     -> ACTIVE (promoted) | STOPPED (by hand, or never promoted)
//   COMPLETED, STOPPED, INFEASIBLE, FAILED: final.
//
// Thread-safe: pure functions.
#ifndef HYPERTUNE_SERVICE_RPC_TRIAL_STATE_H_
#define HYPERTUNE_SERVICE_RPC_TRIAL_STATE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::service {

// Whether `from` -> `to` is a legal change. STATE_UNSPECIFIED as `from` is
// a trial not stored yet. A state to itself is not a change and not legal.
bool IsLegalTransition(v1::Trial::State from, v1::Trial::State to);

// Moves `trial` to state `to` if that is a legal change (INTERNAL naming
// the trial and both states otherwise: a bug of the caller, nothing is
// changed).
absl::Status Transition(v1::Trial& trial, v1::Trial::State to);

// Whether `state` is final: no change leaves it.
bool IsFinal(v1::Trial::State state);

// `trial` finished early, without its worker: STOPPED at `now` for
// `reason`, judged by its last measurement.
absl::Status StopNow(v1::Trial& trial, const std::string& reason, int64_t now);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_TRIAL_STATE_H_
