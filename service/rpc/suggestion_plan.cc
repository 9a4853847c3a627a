#include "service/rpc/suggestion_plan.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <string>

#include "optimizer/early_stopping.h"
#include "optimizer/learning_curve_model.h"
#include "service/rpc/conversion.h"

namespace hypertune::service {
namespace {

// A repeated field's tag and length take at most 6 bytes.
constexpr size_t kFieldOverhead = 6;
// What granting adds to a trial: the client id, a lease epoch, expiry and
// start times.
constexpr size_t kGrantBytes = 48;

bool PausesAtRungs(const v1::StudySpec& spec) {
  const auto rule = spec.early_stopping().rule();
  return (rule == v1::EarlyStoppingSpec::ASHA ||
          rule == v1::EarlyStoppingSpec::HYPERBAND) &&
         spec.early_stopping().pause_at_rungs();
}

// The paused trials to resume, by ASHA's ranking or by the learning-curve
// model (promote_by_model), which also reads each trial's parameters and
// is left in *model.
std::vector<optimizer::Promotion> PromotionsOf(
    const optimizer::EarlyStoppingConfig& rule, const v1::StudySpec& spec,
    const std::vector<v1::Trial>& trials, bool draining,
    std::optional<optimizer::LearningCurveModel>* model) {
  absl::StatusOr<optimizer::SearchSpace> space;
  if (rule.promote_by_model) space = ToSearchSpace(spec);
  if (!rule.promote_by_model || !space.ok()) {
    return optimizer::Promotions(rule, ToCurves(spec, trials), draining);
  }
  const ModelledCurves modelled = ToModelledCurves(spec, *space, trials);
  return optimizer::ModelPromotions(rule, *space, modelled.curves,
                                    modelled.parameters, draining, model);
}

int64_t CountOf(const SuggestionState& state, v1::Trial::State s) {
  auto it = state.counts.find(s);
  return it == state.counts.end() ? 0 : it->second;
}

}  // namespace

bool ResponseBudget::Take(size_t bytes) {
  bytes += kFieldOverhead;
  if (used_ > 0 && used_ + bytes > kMaxResponseBytes) return false;
  used_ += bytes;
  return true;
}

int64_t ResponseBudget::Fits(size_t bytes) const {
  if (used_ >= kMaxResponseBytes) return 0;
  return static_cast<int64_t>((kMaxResponseBytes - used_) /
                              (bytes + kFieldOverhead));
}

size_t NewTrialBytesBound(const v1::Study& study,
                          const std::string& client_id) {
  size_t bytes = 128 + study.name().size() + client_id.size();
  for (const v1::ParameterSpec& p : study.spec().parameters()) {
    size_t value = 16;
    for (const std::string& category : p.categorical_spec().values()) {
      value = std::max(value, category.size() + 8);
    }
    bytes += p.name().size() + value + 8;
  }
  return bytes;
}

SuggestionPlan PlanSuggestions(const SuggestionState& state,
                               const std::vector<SuggestionAsk>& asks) {
  const v1::Study& study = state.study;
  const v1::StudySpec& spec = study.spec();
  SuggestionPlan plan;
  plan.requests.resize(asks.size());

  int64_t created = -state.warm_start_trials;
  for (const auto& [s, n] : state.counts) created += n;
  const int64_t running =
      CountOf(state, v1::Trial::ACTIVE) + CountOf(state, v1::Trial::STOPPING);
  int64_t room = spec.max_parallel_trials() > 0
                     ? spec.max_parallel_trials() - running
                     : std::numeric_limits<int64_t>::max();
  int64_t budget_left = spec.max_trials() > 0
                            ? spec.max_trials() - created
                            : std::numeric_limits<int64_t>::max();
  if (spec.max_device_hours() > 0 &&
      study.device_seconds() >= spec.max_device_hours() * 3600.0) {
    budget_left = 0;  // the device-hours are spent
  }
  const bool active = study.state() == v1::Study::ACTIVE;

  std::deque<v1::Trial> queued(state.queued.begin(), state.queued.end());
  // ASHA's pause mode: paused trials to resume, after the queued ones and
  // before new configurations; all of each rung's best when no new
  // configuration will start (draining).
  std::deque<v1::Trial> promotions;
  const optimizer::EarlyStoppingConfig rule = ToEarlyStoppingConfig(spec);
  if (active && PausesAtRungs(spec) && !state.all_trials.empty()) {
    absl::flat_hash_map<int64_t, const v1::Trial*> by_id;
    for (const v1::Trial& t : state.all_trials) by_id[t.id()] = &t;
    for (const optimizer::Promotion& p :
         PromotionsOf(rule, spec, state.all_trials, budget_left <= 0,
                      &plan.curve_model)) {
      v1::Trial t = *by_id.at(p.trial_id);
      t.set_stop_reason("");
      promotions.push_back(std::move(t));
    }
  }
  absl::flat_hash_map<std::string, std::vector<const v1::Trial*>> held;
  for (const v1::Trial& t : state.running) {
    if (!t.client_id().empty()) held[t.client_id()].push_back(&t);
  }

  bool granted_any = false;
  bool admitted_any = false;
  for (size_t i = 0; i < asks.size(); ++i) {
    if (!asks[i].admitted) continue;
    admitted_any = true;
    const v1::SuggestTrialsRequest& request = *asks[i].request;
    RequestPlan& out = plan.requests[i];
    ResponseBudget bytes;
    if (auto it = held.find(request.client_id());
        !request.client_id().empty() && it != held.end()) {
      for (const v1::Trial* t : it->second) {
        if (static_cast<int>(out.held.size()) == request.count() ||
            !bytes.Take(*t)) {
          break;
        }
        out.held.push_back(*t);
      }
      continue;
    }
    if (!active) continue;
    int64_t wanted = std::min<int64_t>(request.count(), room);
    // Grants from `source` while wanted and while the answer has room; the
    // rest waits for the next call.
    auto grant_from = [&](std::deque<v1::Trial>& source) {
      while (wanted > 0 && !source.empty()) {
        const size_t size = source.front().ByteSizeLong() +
                            request.client_id().size() + kGrantBytes;
        if (!bytes.Take(size)) {
          wanted = 0;
          return;
        }
        out.grants.push_back(std::move(source.front()));
        source.pop_front();
        --wanted;
        --room;
        granted_any = true;
      }
    };
    grant_from(queued);
    grant_from(promotions);
    const int64_t fresh =
        std::min({wanted, budget_left,
                  bytes.Fits(NewTrialBytesBound(study, request.client_id()))});
    if (fresh > 0) {
      out.fresh = static_cast<int>(fresh);
      plan.total_fresh += out.fresh;
      room -= fresh;
      budget_left -= fresh;
    }
  }

  // Budget spent and every trial finished: the study is done. While trials
  // still run, a lost worker's trial may come back to REQUESTED, so idle
  // workers wait instead of leaving.
  plan.completes_study = active && admitted_any && !granted_any &&
                         plan.total_fresh == 0 && budget_left <= 0 &&
                         queued.empty() && running == 0 && promotions.empty();
  if (plan.completes_study && !state.all_trials.empty()) {
    const std::vector<int64_t> ids =
        optimizer::UnpromotableTrials(rule, ToCurves(spec, state.all_trials));
    for (const v1::Trial& t : state.all_trials) {
      if (t.state() == v1::Trial::PAUSED &&
          std::binary_search(ids.begin(), ids.end(), t.id())) {
        plan.unpromotable.push_back(t);
      }
    }
  }
  return plan;
}

}  // namespace hypertune::service
