#include "service/rpc/suggestions.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/limits.h"
#include "common/study_metrics.h"
#include "optimizer/early_stopping.h"
#include "service/rpc/priors.h"
#include "service/rpc/status_macros.h"
#include "service/rpc/trial_state.h"
#include "service/rpc/validation.h"
#include "service/server/metrics.h"

namespace hypertune::service {
namespace {

// Rules with rungs: ASHA and Hyperband.
bool HasRungs(const v1::StudySpec& spec) {
  return spec.early_stopping().rule() == v1::EarlyStoppingSpec::ASHA ||
         spec.early_stopping().rule() == v1::EarlyStoppingSpec::HYPERBAND;
}

// Whether a GRID study is done: its grid had nothing left to propose, and
// no trial of it waits, runs or is paused, none handed out by this batch.
bool GridExhausted(const SuggestionState& state, size_t proposed,
                   const std::vector<v1::SuggestTrialsResponse>& responses) {
  if (state.study.spec().algorithm() != v1::GRID || proposed > 0) return false;
  for (v1::Trial::State s : {v1::Trial::REQUESTED, v1::Trial::ACTIVE,
                             v1::Trial::STOPPING, v1::Trial::PAUSED}) {
    if (state.counts.contains(s) && state.counts.at(s) > 0) return false;
  }
  return std::all_of(
      responses.begin(), responses.end(),
      [](const v1::SuggestTrialsResponse& r) { return r.trials().empty(); });
}

}  // namespace

absl::StatusOr<v1::SuggestTrialsResponse> Suggestions::SuggestTrials(
    const v1::SuggestTrialsRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateStudyName("study_name", request.study_name()));
  if (request.count() < 1 || request.count() > kMaxSuggestCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("count: must be between 1 and ", kMaxSuggestCount,
                     ", got ", request.count()));
  }
  if (absl::Status s = ValidateClientId("client_id", request.client_id());
      !s.ok()) {
    return s;
  }
  absl::StatusOr<StudyRuntime*> found =
      context_.RuntimeOf(request.study_name());
  if (!found.ok()) return found.status();
  StudyRuntime& runtime = **found;
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::SuggestTrialsResponse> response =
      runtime.suggestions.Submit(
          request, caller,
          [&](const std::vector<SuggestQueue::Ticket*>& batch,
              StudyModel& model) {
            ServeSuggestions(runtime, request.study_name(), batch, model);
          });
  if (context_.options().metrics != nullptr) {
    context_.options().metrics->ObserveSuggestSeconds(
        absl::ToDoubleSeconds(absl::Now() - start));
  }
  return response;
}

// A batch of suggestion requests is served in three steps, so that the model
// fit (the slow part) runs without the study's lock and reports keep flowing:
//   1. under the lock, shared: read the study's state, plan the batch
//      (suggestion_plan.h), grant the queued and promoted trials it hands
//      out, snapshot the history;
//   2. without it: one fit proposes all the new points, pending-aware;
//   3. under the lock, shared: store them as ACTIVE trials of their
//      requesters.
// Leases that ran out are expired first, under the lock held exclusively.
void Suggestions::ServeSuggestions(
    StudyRuntime& runtime, const std::string& name,
    const std::vector<SuggestQueue::Ticket*>& batch, StudyModel& model) {
  std::vector<SuggestQueue::Ticket*> requests;
  std::vector<SuggestQueue::Ticket*> partials;
  for (SuggestQueue::Ticket* t : batch) {
    (t->request != nullptr ? requests : partials).push_back(t);
  }
  if (!requests.empty()) ServeRequests(runtime, name, requests, model);
  if (!partials.empty()) ServePartials(runtime, name, partials, model);
}

void Suggestions::ServeRequests(StudyRuntime& runtime, const std::string& name,
                                const std::vector<SuggestQueue::Ticket*>& batch,
                                StudyModel& model) {
  auto fail_all = [&](const absl::Status& status) {
    for (SuggestQueue::Ticket* t : batch) t->result = status;
  };
  const int64_t now = context_.Now();
  if (absl::Status s = leases_.ExpireIfDue(runtime, name, now); !s.ok()) {
    return fail_all(s);
  }

  SuggestionState state;
  std::vector<SuggestionAsk> asks(batch.size());
  std::vector<absl::Status> access(batch.size());
  SuggestionPlan plan;
  std::vector<v1::SuggestTrialsResponse> responses(batch.size());
  std::vector<v1::Trial> snapshot;
  {
    // Shared: this writes only trials that no report can touch (queued,
    // paused, new ones), and the queue's leadership keeps other batches out.
    absl::ReaderMutexLock lock(&runtime.mu);
    if (absl::Status s = LoadSuggestionState(name, state); !s.ok()) {
      return fail_all(s);
    }
    if (state.study.spec().max_trials() > 0 &&
        state.counts.contains(v1::Trial::COMPLETED)) {
      absl::StatusOr<int64_t> warm =
          context_.WarmStartTrials(runtime, state.study);
      if (!warm.ok()) return fail_all(warm.status());
      state.warm_start_trials = *warm;
    }
    // Checked on the row read under the lock, as every other call does.
    for (size_t i = 0; i < batch.size(); ++i) {
      access[i] = CheckAccess(*batch[i]->caller, state.study, Access::kWrite);
      asks[i] = {batch[i]->request, access[i].ok()};
    }
    plan = PlanSuggestions(state, asks);
    for (size_t i = 0; i < batch.size(); ++i) {
      v1::SuggestTrialsResponse& response = responses[i];
      response.set_study_state(state.study.state());
      for (v1::Trial& t : plan.requests[i].held) {
        *response.add_trials() = std::move(t);
      }
      for (const v1::Trial& t : plan.requests[i].grants) {
        v1::Trial granted = t;
        if (absl::Status s = leases_.Grant(state.study, granted,
                                           batch[i]->request->client_id(), now);
            !s.ok()) {
          return fail_all(s);
        }
        if (absl::Status s =
                context_.SaveTrial(storage::TrialVersion::Of(t), granted);
            !s.ok()) {
          return fail_all(s);
        }
        *response.add_trials() = std::move(granted);
      }
    }
    if (plan.completes_study) {
      if (absl::Status s = CompleteStudy(state.study, plan.unpromotable, now);
          !s.ok()) {
        return fail_all(s);
      }
      for (v1::SuggestTrialsResponse& response : responses) {
        if (response.trials().empty()) {
          response.set_study_state(v1::Study::COMPLETED);
        }
      }
    }
    if (plan.total_fresh > 0) {
      if (absl::Status s = PrepareSuggester(model, state.study); !s.ok()) {
        return fail_all(s);
      }
      if (model.suggester->UsesHistory()) {
        absl::StatusOr<std::vector<v1::Trial>> trials =
            context_.store().ListTrials(name, {});
        if (!trials.ok()) return fail_all(trials.status());
        snapshot = *std::move(trials);
      }
    }
  }

  absl::Status proposal_error;
  if (plan.total_fresh > 0) {
    proposal_error = ProposeAndStore(runtime, model, state, snapshot, batch,
                                     plan, responses);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!access[i].ok()) {
      batch[i]->result = access[i];
    } else if (!proposal_error.ok() && plan.requests[i].fresh > 0 &&
               responses[i].trials().empty()) {
      // A request that got nothing because the proposal failed sees why;
      // the others keep what they were granted.
      batch[i]->result = proposal_error;
    } else {
      batch[i]->result = std::move(responses[i]);
    }
  }
}

absl::Status Suggestions::LoadSuggestionState(const std::string& name,
                                              SuggestionState& state) {
  absl::StatusOr<storage::StudyOverview> overview =
      context_.store().GetStudyOverview(
          name, {v1::Trial::REQUESTED, v1::Trial::ACTIVE, v1::Trial::STOPPING});
  if (!overview.ok()) return overview.status();
  state.study = std::move(overview->study);
  state.counts = std::move(overview->counts);
  for (v1::Trial& t : overview->trials) {
    (t.state() == v1::Trial::REQUESTED ? state.queued : state.running)
        .push_back(std::move(t));
  }
  auto count_of = [&](v1::Trial::State s) {
    auto it = state.counts.find(s);
    return it == state.counts.end() ? int64_t{0} : it->second;
  };
  if (HasRungs(state.study.spec()) &&
      state.study.spec().early_stopping().pause_at_rungs() &&
      count_of(v1::Trial::PAUSED) > 0 &&
      state.study.state() == v1::Study::ACTIVE) {
    absl::StatusOr<std::vector<v1::Trial>> all =
        context_.store().ListTrials(name, {});
    if (!all.ok()) return all.status();
    state.all_trials = *std::move(all);
  }
  return absl::OkStatus();
}

absl::Status Suggestions::CompleteStudy(
    const v1::Study& study, const std::vector<v1::Trial>& unpromotable,
    int64_t now) {
  for (const v1::Trial& paused : unpromotable) {
    v1::Trial stopped = paused;
    HT_RETURN_IF_ERROR(StopNow(
        stopped, absl::StrCat(paused.stop_reason(), "; not promoted"), now));
    HT_RETURN_IF_ERROR(
        context_.SaveTrial(storage::TrialVersion::Of(paused), stopped));
  }
  // Modified in place: completions may be adding to its cost meanwhile.
  return context_.store().ModifyStudy(study.name(), [](v1::Study& stored) {
    stored.set_state(v1::Study::COMPLETED);
  });
}

absl::Status Suggestions::ProposeAndStore(
    StudyRuntime& runtime, StudyModel& model, const SuggestionState& state,
    const std::vector<v1::Trial>& snapshot,
    const std::vector<SuggestQueue::Ticket*>& batch, const SuggestionPlan& plan,
    std::vector<v1::SuggestTrialsResponse>& responses) {
  const v1::Study& study = state.study;
  int64_t created = 0;
  for (const auto& [s, n] : state.counts) created += n;
  absl::StatusOr<std::vector<v1::Trial>> proposed = ProposeTrials(
      *model.suggester, model.priors, study, snapshot, plan.total_fresh,
      created, plan.curve_model ? &*plan.curve_model : nullptr);
  if (!proposed.ok()) return proposed.status();

  absl::ReaderMutexLock lock(&runtime.mu);
  // The fit ran without the lock: the study may have been deleted (and a
  // study of the same name made, perhaps by another owner) or given away
  // meanwhile.
  absl::StatusOr<v1::Study> current = context_.store().GetStudy(study.name());
  if (!current.ok()) return current.status();
  if (current->create_time_ms() != study.create_time_ms()) {
    return absl::NotFoundError(
        absl::StrCat("study \"", study.name(),
                     "\" was deleted while its trials were proposed"));
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    if (plan.requests[i].fresh == 0) continue;
    HT_RETURN_IF_ERROR(
        CheckAccess(*batch[i]->caller, *current, Access::kWrite));
  }
  const int64_t now = context_.Now();
  // GRID may propose fewer than planned (its grid running out): the
  // requests then share what there is, in order.
  std::vector<int> fresh(batch.size());
  size_t left = proposed->size();
  for (size_t i = 0; i < batch.size(); ++i) {
    fresh[i] = static_cast<int>(
        std::min<size_t>(left, static_cast<size_t>(plan.requests[i].fresh)));
    left -= fresh[i];
  }
  size_t next = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    for (int k = 0; k < fresh[i]; ++k) {
      v1::Trial& t = (*proposed)[next++];
      t.set_create_time_ms(now);
      HT_RETURN_IF_ERROR(
          leases_.Grant(study, t, batch[i]->request->client_id(), now));
    }
  }
  if (GridExhausted(state, proposed->size(), responses)) {
    HT_RETURN_IF_ERROR(CompleteStudy(study, {}, now));
    for (v1::SuggestTrialsResponse& response : responses) {
      if (response.trials().empty()) {
        response.set_study_state(v1::Study::COMPLETED);
      }
    }
  }
  if (proposed->empty()) return absl::OkStatus();
  // One transaction for the whole batch; ids follow request order.
  absl::StatusOr<std::vector<v1::Trial>> stored =
      context_.SaveNewTrials(study.name(), *std::move(proposed));
  if (!stored.ok()) return stored.status();
  next = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    for (int k = 0; k < fresh[i]; ++k) {
      *responses[i].add_trials() = std::move((*stored)[next++]);
    }
  }
  return absl::OkStatus();
}

absl::Status Suggestions::PrepareSuggester(StudyModel& model,
                                           const v1::Study& study) {
  if (model.suggester != nullptr &&
      model.study_created_ms == study.create_time_ms()) {
    return absl::OkStatus();
  }
  absl::StatusOr<optimizer::Algorithm> algorithm =
      ToOptimizerAlgorithm(study.spec().algorithm());
  if (!algorithm.ok()) return algorithm.status();
  absl::StatusOr<std::vector<optimizer::PriorStudy>> priors = LoadPriors(study);
  if (!priors.ok()) return priors.status();
  *model.stop = true;  // the last incarnation's fits
  model = StudyModel();
  model.priors = *std::move(priors);
  model.suggester = optimizer::MakeSuggester(
      *algorithm, context_.fits() ? context_.fits()->RunnerFor(model.stop)
                                  : optimizer::FitRunner());
  model.study_created_ms = study.create_time_ms();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<optimizer::PriorStudy>> Suggestions::LoadPriors(
    const v1::Study& study) {
  absl::StatusOr<optimizer::SearchSpace> space = ToSearchSpace(study.spec());
  if (!space.ok()) return space.status();
  std::vector<optimizer::PriorStudy> priors;
  for (int i = 0; i < study.spec().prior_studies_size(); ++i) {
    const std::string& name = study.spec().prior_studies(i);
    absl::StatusOr<v1::Study> prior = context_.store().GetStudy(name);
    // Deleted since: the study goes on without it.
    if (absl::IsNotFound(prior.status())) continue;
    if (!prior.ok()) return prior.status();
    // Another study now under that name, or another owner's: not the prior
    // its creator was allowed to read.
    if (!IsBoundPrior(study, i, *prior)) continue;
    absl::StatusOr<std::vector<v1::Trial>> trials =
        context_.store().ListTrials(name, {});
    if (!trials.ok()) return trials.status();
    priors.push_back(
        ToPriorStudy(*space, study.spec(), prior->spec(), *trials));
  }
  return priors;
}

absl::StatusOr<v1::Trial> Suggestions::CreatePartialTrial(
    StudyRuntime& runtime, const std::string& name, const v1::Trial& given,
    const Principal& caller) {
  absl::StatusOr<v1::SuggestTrialsResponse> created =
      runtime.suggestions.SubmitPartial(
          given, caller,
          [&](const std::vector<SuggestQueue::Ticket*>& batch,
              StudyModel& model) {
            ServeSuggestions(runtime, name, batch, model);
          });
  if (!created.ok()) return created.status();
  return created->trials(0);
}

// One proposal per partial trial, from one fit of the study's own model
// (this is its queue's leader), each completing the values given; stored
// before the next batch is served, so that it sees them.
void Suggestions::ServePartials(StudyRuntime& runtime, const std::string& name,
                                const std::vector<SuggestQueue::Ticket*>& batch,
                                StudyModel& model) {
  auto fail_all = [&](const absl::Status& status) {
    for (SuggestQueue::Ticket* t : batch) t->result = status;
  };
  v1::Study study;
  std::vector<v1::Trial> snapshot;
  {
    absl::ReaderMutexLock lock(&runtime.mu);
    absl::StatusOr<v1::Study> loaded = context_.store().GetStudy(name);
    if (!loaded.ok()) return fail_all(loaded.status());
    study = *std::move(loaded);
    absl::StatusOr<std::vector<v1::Trial>> trials =
        context_.store().ListTrials(name, {});
    if (!trials.ok()) return fail_all(trials.status());
    snapshot = *std::move(trials);
    if (absl::Status s = PrepareSuggester(model, study); !s.ok()) {
      return fail_all(s);
    }
  }
  absl::StatusOr<optimizer::SearchSpace> space = ToSearchSpace(study.spec());
  if (!space.ok()) return fail_all(space.status());
  // Each checked on its own: one caller's mistake is not another's.
  std::vector<SuggestQueue::Ticket*> valid;
  std::vector<optimizer::Assignment> fixed;
  for (SuggestQueue::Ticket* t : batch) {
    if (absl::Status s = CheckAccess(*t->caller, study, Access::kWrite);
        !s.ok()) {
      t->result = s;
      continue;
    }
    absl::StatusOr<optimizer::Assignment> given = ToPartialAssignment(
        "trial.parameters", *space, t->partial->parameters());
    if (!given.ok()) {
      t->result = given.status();
      continue;
    }
    valid.push_back(t);
    fixed.push_back(*std::move(given));
  }
  if (valid.empty()) return;
  absl::StatusOr<std::vector<v1::Trial>> proposed = ProposeTrials(
      *model.suggester, model.priors, study, snapshot,
      static_cast<int>(valid.size()), static_cast<int64_t>(snapshot.size()));
  if (!proposed.ok()) {
    for (SuggestQueue::Ticket* t : valid) t->result = proposed.status();
    return;
  }
  std::vector<SuggestQueue::Ticket*> completed_tickets;
  std::vector<v1::Trial> completed;
  for (size_t i = 0; i < valid.size(); ++i) {
    if (i >= proposed->size()) {  // GRID, its grid run out
      valid[i]->result = absl::FailedPreconditionError(absl::StrCat(
          "study \"", name,
          "\": its grid has no point left to complete the trial with"));
      continue;
    }
    absl::StatusOr<optimizer::Assignment> proposal =
        ToAssignment("proposal", *space, (*proposed)[i].parameters());
    if (!proposal.ok()) {
      valid[i]->result = proposal.status();
      continue;
    }
    absl::StatusOr<optimizer::Assignment> whole =
        space->Complete(fixed[i], *proposal);
    if (!whole.ok()) {
      valid[i]->result = absl::InvalidArgumentError(
          absl::StrCat("trial.parameters: ", whole.status().message()));
      continue;
    }
    v1::Trial trial = *valid[i]->partial;
    *trial.mutable_parameters() = ToParameterValues(*space, *whole);
    completed_tickets.push_back(valid[i]);
    completed.push_back(std::move(trial));
  }
  if (completed.empty()) return;
  // The fit ran without the lock: stored only into the study it was made
  // for, still this caller's to write.
  absl::MutexLock lock(&runtime.mu);
  auto fail_completed = [&](const absl::Status& status) {
    for (SuggestQueue::Ticket* t : completed_tickets) t->result = status;
  };
  absl::StatusOr<v1::Study> current = context_.store().GetStudy(name);
  if (!current.ok()) return fail_completed(current.status());
  if (current->create_time_ms() != study.create_time_ms()) {
    return fail_completed(absl::NotFoundError(absl::StrCat(
        "study \"", name, "\" was deleted while its trial was completed")));
  }
  // The spec may have changed meanwhile (UpdateStudy).
  absl::StatusOr<optimizer::SearchSpace> now_space =
      ToSearchSpace(current->spec());
  if (!now_space.ok()) return fail_completed(now_space.status());
  const int64_t now = context_.Now();
  for (size_t i = 0; i < completed.size(); ++i) {
    completed[i].set_create_time_ms(now);
    if (absl::Status s = CheckAccess(*completed_tickets[i]->caller, *current,
                                     Access::kWrite);
        !s.ok()) {
      return fail_completed(s);
    }
    absl::StatusOr<optimizer::Assignment> x =
        ToAssignment("trial.parameters", *now_space, completed[i].parameters());
    if (!x.ok()) return fail_completed(x.status());
    *completed[i].mutable_parameters() = ToParameterValues(*now_space, *x);
  }
  absl::StatusOr<std::vector<v1::Trial>> stored =
      context_.SaveNewTrials(name, std::move(completed));
  if (!stored.ok()) return fail_completed(stored.status());
  for (size_t i = 0; i < completed_tickets.size(); ++i) {
    v1::SuggestTrialsResponse response;
    *response.add_trials() = std::move((*stored)[i]);
    completed_tickets[i]->result = std::move(response);
  }
}

absl::StatusOr<std::vector<v1::Trial>> Suggestions::ProposeTrials(
    optimizer::Suggester& suggester,
    const std::vector<optimizer::PriorStudy>& priors, const v1::Study& study,
    const std::vector<v1::Trial>& snapshot, int count, int64_t trials_created,
    const optimizer::LearningCurveModel* curve_model) {
  absl::StatusOr<optimizer::SearchSpace> space = ToSearchSpace(study.spec());
  if (!space.ok()) return space.status();
  optimizer::SuggestRequest request;
  request.space = &*space;
  optimizer::FidelityHistory fidelity;
  if (HasRungs(study.spec())) {
    // Model-based multi-fidelity: the optimizer fits one rung of the
    // learning curves (optimizer/fidelity.h), of the primary objective.
    fidelity = {ToEarlyStoppingConfig(study.spec()),
                ToCurves(study.spec(), snapshot), curve_model};
    request.fidelity = &fidelity;
    request.history = ToHistory(study.spec(), *space, snapshot,
                                /*primary_only=*/true);
    request.metrics = {{optimizer::MetricRole::kObjective}};
  } else {
    request.history = ToHistory(study.spec(), *space, snapshot);
    request.metrics = ToMetricConfigs(StudyMetrics(study.spec()));
  }
  request.trials_created = trials_created;
  request.count = count;
  request.seed = study.spec().seed();
  if (study.spec().cost_aware()) {
    // The budget is in device-hours: a horizon only when cost is time.
    const bool device_time = study.spec().cost_metric().empty();
    request.cost = {
        .enabled = true,
        .budget = device_time ? study.spec().max_device_hours() * 3600.0 : 0,
        .spent = device_time ? study.device_seconds() : 0,
        .max_trials = study.spec().max_trials()};
  }
  request.priors = &priors;
  absl::StatusOr<std::vector<optimizer::Assignment>> points =
      suggester.Suggest(request);
  if (!points.ok()) return points.status();
  if (const std::string reason(suggester.last_fallback_reason());
      !reason.empty()) {
    const std::string algorithm = v1::Algorithm_Name(study.spec().algorithm());
    std::cerr << "hypertuned: study \"" << study.name() << "\": " << algorithm
              << " fell back from its own method for part of a batch of "
              << count << " (" << reason << ")\n";
    if (context_.options().metrics != nullptr) {
      context_.options().metrics->CountSuggestFallback(study.name(), algorithm,
                                                       reason);
    }
  }

  std::vector<v1::Trial> proposed(points->size());
  for (size_t i = 0; i < points->size(); ++i) {
    *proposed[i].mutable_parameters() = ToParameterValues(*space, (*points)[i]);
  }
  return proposed;
}
}  // namespace hypertune::service
