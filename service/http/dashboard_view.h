// What the dashboard reads in bulk, in a compact form: each trial as the
// study page needs it (a few hundred bytes instead of the full message's
// kilobytes with every metric of every measurement), and the parameter
// importances of a study. dashboard/README.md documents both forms.
//
// Compact trial:
//   {"id", "state", "params": [spec order; null when absent],
//    "metrics": [spec order: the result measurement's (final, else last)
//                of a COMPLETED or STOPPED trial; null otherwise],
//    "curve": [[step, objective] per intermediate measurement with it],
//    "reason": the state's reason (INFEASIBLE: infeasible_reason;
//              STOPPING, STOPPED, PAUSED: stop_reason; COMPLETED: "";
//              otherwise failure_reason),
//    "create_time_ms", "start_time_ms", "end_time_ms", "device_seconds",
//    "cost", "measurements": the number of intermediate measurements (of
//    the current attempt), "attempt": only when above 1,
//    "exploits": PBT's exploits, oldest first, only when there are any:
//                [{"step", "donor", "checkpoint_step", "time_ms", "value",
//                  "donor_value", "params_before", "params"}], params in
//                spec order as above}
// Integers are JSON numbers (ids and times stay below 2^53); non-finite
// doubles are "Infinity", "-Infinity", "NaN" as in the protobuf mapping.
//
// Pure functions; thread-safe.
#ifndef HYPERTUNE_SERVICE_HTTP_DASHBOARD_VIEW_H_
#define HYPERTUNE_SERVICE_HTTP_DASHBOARD_VIEW_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"
#include "storage/study_store.h"

namespace hypertune::service {

// Appends `trial` of `study` in the compact form.
void AppendCompactTrial(const v1::Study& study, const v1::Trial& trial,
                        std::string* out);

// A page of the change feed as ChangesPageJson (replies.h) writes it, each
// trial in the compact form.
std::string CompactChangesPageJson(
    const v1::Study& study, const std::vector<storage::TrialChange>& changes,
    int64_t after, bool more);

// The fANOVA importances (optimizer/importance.h) of `study`'s parameters
// for `metric` (one of its spec's metrics; empty: its first objective) over
// `completed` trials (the caller passes COMPLETED ones only; others are
// skipped too), as
//   {"method": "fanova", "objective": the metric, "trials": the trials used,
//    "trees",
//    "varying_trees", "conditional": whether some trial lacks a parameter,
//    "parameters": [{"name", "importance", "stddev", "trials"}],
//    "message": why there are none, when there are none}.
// An infinite value counts as the worst finite one seen (by the metric's
// goal), as the optimizer treats an objective. Trials without the metric
// are left out, and so is a parameter's value that no longer fits the
// space. INVALID_ARGUMENT naming "metric" when the spec has no such metric.
// Conditional parameters: a parameter's importance is measured over the
// trials where it is present (its "trials"), in a forest over the
// parameters present in all of those trials; an inactive parameter is
// never filled in with a made-up value. Shares of parameters measured over
// different trials need not sum to 1.
absl::StatusOr<std::string> ImportanceJson(
    const v1::Study& study, const std::vector<v1::Trial>& completed,
    const std::string& metric = "");

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_HTTP_DASHBOARD_VIEW_H_
