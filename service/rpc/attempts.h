// A trial's attempts (DESIGN.md, "Attempts"): the first grant begins attempt
// 1, and each grant after a loss (lease expired, given back, preempted)
// begins the next. Trial.measurements is always the current attempt's curve:
// one resumed from a checkpoint keeps the steps up to the checkpoint's, one
// without starts afresh, and what it does not keep moves to
// Trial.earlier_attempts, to be shown, never to be the trial's result.
//
// Device-seconds are reported as running totals per grant (heartbeats, then
// the completion), so a worker that vanishes loses at most one heartbeat
// interval and a report sent twice counts once.
//
// Thread-safe: pure functions on a trial the caller holds under its lock.
#ifndef HYPERTUNE_SERVICE_RPC_ATTEMPTS_H_
#define HYPERTUNE_SERVICE_RPC_ATTEMPTS_H_

#include <cstdint>
#include <string>

#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::service {

// `trial` is granted (first grant, after a loss, or promoted from a pause):
// attempt 1 if it had none, a new grant's device-seconds count from 0, and
// the loss that queued it (kept in earlier_attempts) is no longer its
// failure_reason.
void BeginGrant(v1::Trial& trial);

// `trial` lost its worker (`reason`, at `now_ms`) and will be granted again:
// the measurements past its checkpoint_step (all of them without a
// checkpoint) move to earlier_attempts as attempt `attempt`, and attempt
// goes up by one. Earlier curves are dropped, oldest first, while the trial
// takes over half of kMaxTrialBytes (their summaries stay).
void EndAttempt(v1::Trial& trial, const std::string& reason, int64_t now_ms);

// The record of `trial`'s current attempt ending now (`now_ms`) for
// `reason`: its number, client, reason, time and the device-seconds it used
// (those the trial has beyond its earlier attempts'), no measurements.
v1::Attempt EndingAttempt(const v1::Trial& trial, const std::string& reason,
                          int64_t now_ms);

// Clears the curves of `trial`'s earlier attempts, oldest first, while the
// trial takes over half of kMaxTrialBytes: they are for show and give way
// before they could leave the current curve no room (their summaries stay).
void TrimEarlierCurves(v1::Trial& trial);

// The grant holding `trial` has used `grant_total` device-seconds in all:
// returns the growth over what it reported before (never negative: a late
// or repeated report adds nothing), and records the new total.
// REQUIRES: grant_total is finite and >= 0.
double CountGrantDeviceSeconds(v1::Trial& trial, double grant_total);

// Records checkpoint `uri`, holding `step` (0: the latest measured step).
// Returns whether the trial changed. REQUIRES: !uri.empty(), step >= 0.
bool SetCheckpoint(v1::Trial& trial, const std::string& uri, int64_t step);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_ATTEMPTS_H_
