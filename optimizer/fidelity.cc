#include "optimizer/fidelity.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "optimizer/early_stopping.h"

namespace hypertune::optimizer {

int MinTrialsAtFidelity(int dim) { return std::max(4, dim + 1); }

SuggestRequest AtOneFidelity(const SuggestRequest& request) {
  if (request.fidelity == nullptr) return request;
  const FidelityHistory& fidelity = *request.fidelity;
  absl::flat_hash_map<int64_t, double> at_rung;
  for (const auto& [id, value] :
       HighestRungObservations(fidelity.rule, fidelity.curves,
                               MinTrialsAtFidelity(request.space->dim()))) {
    at_rung[id] = fidelity.rule.maximize ? value : -value;
  }
  SuggestRequest out = request;
  out.fidelity = nullptr;
  out.metrics = {MetricConfig{}};
  out.history.clear();
  for (const Observation& o : request.history) {
    Observation kept = o;
    if (const auto it = at_rung.find(o.trial_id); it != at_rung.end()) {
      kept.outcome = Outcome::kCompleted;
      kept.values = {it->second};
    } else if (o.outcome == Outcome::kCompleted) {
      continue;  // Another fidelity.
    } else {
      kept.values.clear();
    }
    out.history.push_back(std::move(kept));
  }
  return out;
}

}  // namespace hypertune::optimizer
