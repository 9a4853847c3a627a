// Population-based training as the service runs it (docs/pbt.md): when a
// member of a PBT study reports a step that crosses its next perturbation
// interval, it is judged against the population (optimizer/pbt.h); a member
// in the bottom quantile takes a top member's checkpoint and explored
// parameters, in place: it keeps its id, its parameters change, its
// checkpoint becomes the donor's, its curve becomes the donor's up to that
// checkpoint (its own moves to earlier_attempts), and the exploit is
// appended to Trial.exploits (lineage and parameter schedule, stored with
// the trial). Its worker learns it from the AddMeasurement answer or the
// next heartbeat (HeartbeatResponse.latest_exploit).
//
// Thread-safe: pure functions on trials the caller holds under the member's
// lock.
#ifndef HYPERTUNE_SERVICE_RPC_PBT_H_
#define HYPERTUNE_SERVICE_RPC_PBT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::service {

// Whether `spec` runs PBT.
bool IsPbt(const v1::StudySpec& spec);

// Whether `member`'s report of `step`, after a latest step `previous_step`
// (-1 for a first report), crosses a multiple of the study's perturbation
// interval, at least one interval past the checkpoint its latest exploit
// loaded (so that a member is judged again only once it trained that long
// on its new parameters).
// REQUIRES: IsPbt(spec)
bool PbtDue(const v1::StudySpec& spec, const v1::Trial& member,
            int64_t previous_step, int64_t step);

// INVALID_ARGUMENT naming the field for a PBT study whose settings do not
// hold (docs/pbt.md); OK for any other algorithm.
absl::Status ValidatePbt(const v1::StudySpec& spec);

// Judges `member` (its whole curve, the due report included) against
// `population` (the study's trials as stored; the member's own entry is
// ignored) at `now_ms`: returns whether it exploited, having then changed
// `member` as this header describes. A donor gives a checkpoint of its own
// training: a member that exploited gives none until it saved one an
// interval past the checkpoint it loaded. Deterministic in the study's
// seed, the member's id, its step and its exploits so far.
// REQUIRES: IsPbt(study.spec())
absl::StatusOr<bool> JudgePbtMember(const v1::Study& study,
                                    const std::vector<v1::Trial>& population,
                                    v1::Trial& member, int64_t now_ms);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_PBT_H_
