// How a batch of coalesced SuggestTrials requests on one study is served,
// decided from what the study holds, with no I/O: which trials each request
// gets back or is granted, how many new ones to propose for it, and whether
// the study is done. StudyService reads the state under the study's lock,
// plans, and carries the plan out.
//
// The order, per request: a worker asking again gets back what it already
// holds (as Vizier); otherwise queued trials (enqueued by hand, or back
// from a lost worker) first, then ASHA promotions, then new trials, within
// the parallel limit, the trial budget (max_trials, max_device_hours) and
// an answer's size (limits.h). When the budget is spent and nothing runs,
// waits or can be promoted, the study completes (its paused trials that no
// promotion will resume are stopped first).
//
// Thread-safe: pure functions.
#ifndef HYPERTUNE_SERVICE_RPC_SUGGESTION_PLAN_H_
#define HYPERTUNE_SERVICE_RPC_SUGGESTION_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/limits.h"
#include "hypertune/v1/hypertune.pb.h"
#include "optimizer/learning_curve_model.h"

namespace hypertune::service {

// What the study holds when the batch is served.
struct SuggestionState {
  v1::Study study;
  // Trials by state.
  absl::flat_hash_map<v1::Trial::State, int64_t> counts;
  // Of those, warm-start results, which max_trials does not count.
  int64_t warm_start_trials = 0;
  // REQUESTED trials, by id.
  std::vector<v1::Trial> queued;
  // ACTIVE and STOPPING trials.
  std::vector<v1::Trial> running;
  // Every trial, when the study pauses trials at ASHA rungs and some are
  // PAUSED (promotions are decided on the whole study); else empty.
  std::vector<v1::Trial> all_trials;
};

// One request of the batch.
struct SuggestionAsk {
  const v1::SuggestTrialsRequest* request = nullptr;
  // Whether its caller may change the study (access.h); a refused request
  // is planned nothing.
  bool admitted = true;
};

struct RequestPlan {
  // Trials the asking client holds already, handed back as they are.
  std::vector<v1::Trial> held;
  // Queued or paused trials to grant to the asking client, in order.
  std::vector<v1::Trial> grants;
  // New trials to propose for it.
  int fresh = 0;
};

struct SuggestionPlan {
  // One per ask, in order.
  std::vector<RequestPlan> requests;
  int total_fresh = 0;
  // The study is done: stop `unpromotable`, then mark it COMPLETED.
  bool completes_study = false;
  std::vector<v1::Trial> unpromotable;
  // promote_by_model: the learning-curve model the promotions were chosen
  // with, which the proposal of the fresh trials starts from.
  std::optional<optimizer::LearningCurveModel> curve_model;
};

// Plans `asks` on `state`.
SuggestionPlan PlanSuggestions(const SuggestionState& state,
                               const std::vector<SuggestionAsk>& asks);

// Counts the bytes of an answer being built, so that lists end before the
// answer would pass kMaxResponseBytes. The first item always fits: no item
// is larger than a quarter of the limit.
class ResponseBudget {
 public:
  // Whether an item of `bytes` (serialized) still fits; if so, it is
  // counted.
  bool Take(size_t bytes);
  bool Take(const google::protobuf::Message& item) {
    return Take(item.ByteSizeLong());
  }
  // How many more items of at most `bytes` each fit.
  int64_t Fits(size_t bytes) const;

 private:
  size_t used_ = 0;
};

// An upper bound on the bytes of a trial newly proposed for `study` and
// granted to `client_id`: its parameters, ids, times and lease.
size_t NewTrialBytesBound(const v1::Study& study, const std::string& client_id);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_SUGGESTION_PLAN_H_
