// Suggestions: how a study's algorithm proposes its trials. SuggestTrials
// requests on one study are coalesced (suggest_queue.h) and served a batch
// at a time: plan the batch (suggestion_plan.h), hand out queued and
// promoted trials, fit the model without the study's lock, store the new
// trials granted to their requesters. The service's other calls know none
// of this; they share only the StudyContext.
//
// Thread-safe.
#ifndef HYPERTUNE_SERVICE_RPC_SUGGESTIONS_H_
#define HYPERTUNE_SERVICE_RPC_SUGGESTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"
#include "optimizer/suggester.h"
#include "service/rpc/access.h"
#include "service/rpc/conversion.h"
#include "service/rpc/leases.h"
#include "service/rpc/study_context.h"
#include "service/rpc/study_runtime.h"
#include "service/rpc/suggestion_plan.h"

namespace hypertune::service {

class Suggestions {
 public:
  // REQUIRES: `context` and `leases` outlive *this.
  Suggestions(StudyContext& context, Leases& leases)
      : context_(context), leases_(leases) {}

  // The SuggestTrials RPC: the study's run-out leases are expired first.
  absl::StatusOr<v1::SuggestTrialsResponse> SuggestTrials(
      const v1::SuggestTrialsRequest& request, const Principal& caller);
  // Queues a partial configuration (CreateTrialRequest.partial) of study
  // `name`: `given` (REQUESTED, with its attributes) completed by the
  // study's algorithm from the history so far and stored, in the study's
  // suggestion queue, so that a study fits one model at a time (without its
  // lock) however many callers ask, and the next batch sees these trials.
  // Returns the trial as stored.
  absl::StatusOr<v1::Trial> CreatePartialTrial(StudyRuntime& runtime,
                                               const std::string& name,
                                               const v1::Trial& given,
                                               const Principal& caller)
      ABSL_LOCKS_EXCLUDED(runtime.mu);

 private:
  // Serves a batch of coalesced tickets on study `name` (SuggestTrials
  // requests, then partial trials), setting each ticket's result, with the
  // study's `model`, which the queue hands its leader alone: the model's
  // fits run without the study's lock.
  void ServeSuggestions(StudyRuntime& runtime, const std::string& name,
                        const std::vector<SuggestQueue::Ticket*>& batch,
                        StudyModel& model) ABSL_LOCKS_EXCLUDED(runtime.mu);
  // ServeSuggestions' two kinds of ticket.
  void ServeRequests(StudyRuntime& runtime, const std::string& name,
                     const std::vector<SuggestQueue::Ticket*>& batch,
                     StudyModel& model) ABSL_LOCKS_EXCLUDED(runtime.mu);
  void ServePartials(StudyRuntime& runtime, const std::string& name,
                     const std::vector<SuggestQueue::Ticket*>& batch,
                     StudyModel& model) ABSL_LOCKS_EXCLUDED(runtime.mu);
  // What PlanSuggestions needs of study `name`. REQUIRES: runtime.mu held.
  absl::Status LoadSuggestionState(const std::string& name,
                                   SuggestionState& state);
  // Stops the paused trials no promotion will resume, then marks the study
  // COMPLETED. REQUIRES: runtime.mu held.
  absl::Status CompleteStudy(const v1::Study& study,
                             const std::vector<v1::Trial>& unpromotable,
                             int64_t now);
  // Proposes plan.total_fresh new trials from `model` without the lock,
  // then, under it (shared), stores them granted to their requesters and
  // adds them to `responses`.
  absl::Status ProposeAndStore(
      StudyRuntime& runtime, StudyModel& model, const SuggestionState& state,
      const std::vector<v1::Trial>& snapshot,
      const std::vector<SuggestQueue::Ticket*>& batch,
      const SuggestionPlan& plan,
      std::vector<v1::SuggestTrialsResponse>& responses)
      ABSL_LOCKS_EXCLUDED(runtime.mu);
  // Makes `model` the model of `study`'s current incarnation, with its
  // prior studies' trials.
  absl::Status PrepareSuggester(StudyModel& model, const v1::Study& study);
  // `count` new trials (parameters only) from `suggester`, given the
  // history in `snapshot` (and, promote_by_model, the learning-curve model
  // already fitted on it, or null). REQUIRES: no other call uses `suggester`
  // meanwhile (the study's own: its queue's leader, without the study's
  // lock, since a fit may take a while).
  absl::StatusOr<std::vector<v1::Trial>> ProposeTrials(
      optimizer::Suggester& suggester,
      const std::vector<optimizer::PriorStudy>& priors, const v1::Study& study,
      const std::vector<v1::Trial>& snapshot, int count, int64_t trials_created,
      const optimizer::LearningCurveModel* curve_model = nullptr);
  // The earlier studies the study transfers from (spec.prior_studies).
  absl::StatusOr<std::vector<optimizer::PriorStudy>> LoadPriors(
      const v1::Study& study);

  StudyContext& context_;
  Leases& leases_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_SUGGESTIONS_H_
