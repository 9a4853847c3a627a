// PlanSuggestions: who gets which trials, within which limits, and when a
// study is done; pure, so each case states the study and checks the plan.
#include "service/rpc/suggestion_plan.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace hypertune::service {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

v1::Study Study(const std::string& spec_text) {
  v1::Study study;
  study.set_name("s");
  study.set_state(v1::Study::ACTIVE);
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      spec_text, study.mutable_spec()));
  v1::ParameterSpec* x = study.mutable_spec()->add_parameters();
  x->set_name("x");
  x->mutable_double_spec()->set_max(1);
  if (study.spec().metrics_size() == 0) {
    v1::MetricSpec* m = study.mutable_spec()->add_metrics();
    m->set_name("acc");
    m->set_goal(v1::MetricSpec::MAXIMIZE);
  }
  return study;
}

v1::Trial Trial(int64_t id, v1::Trial::State state,
                const std::string& client = "") {
  v1::Trial t;
  t.set_study_name("s");
  t.set_id(id);
  t.set_state(state);
  t.set_client_id(client);
  return t;
}

v1::SuggestTrialsRequest Ask(const std::string& client, int count) {
  v1::SuggestTrialsRequest request;
  request.set_study_name("s");
  request.set_client_id(client);
  request.set_count(count);
  return request;
}

// The state of `study` holding `trials` (counts, queue and running filled
// in from them; every trial when `all` is set).
SuggestionState StateOf(const v1::Study& study,
                        const std::vector<v1::Trial>& trials,
                        bool all = false) {
  SuggestionState state;
  state.study = study;
  for (const v1::Trial& t : trials) {
    ++state.counts[t.state()];
    if (t.state() == v1::Trial::REQUESTED) state.queued.push_back(t);
    if (t.state() == v1::Trial::ACTIVE || t.state() == v1::Trial::STOPPING) {
      state.running.push_back(t);
    }
  }
  if (all) state.all_trials = trials;
  return state;
}

std::vector<int64_t> Ids(const std::vector<v1::Trial>& trials) {
  std::vector<int64_t> ids;
  for (const v1::Trial& t : trials) ids.push_back(t.id());
  return ids;
}

TEST(PlanSuggestionsTest, AWorkerAskingAgainGetsBackWhatItHolds) {
  const v1::Study study = Study("max_trials: 10");
  const SuggestionState state =
      StateOf(study, {Trial(1, v1::Trial::ACTIVE, "w1"),
                      Trial(2, v1::Trial::STOPPING, "w1"),
                      Trial(3, v1::Trial::REQUESTED)});
  const v1::SuggestTrialsRequest again = Ask("w1", 1);
  const v1::SuggestTrialsRequest twice = Ask("w1", 5);
  SuggestionPlan plan = PlanSuggestions(state, {{&again}});
  EXPECT_THAT(Ids(plan.requests[0].held), ElementsAre(1));
  EXPECT_THAT(plan.requests[0].grants, IsEmpty());
  EXPECT_EQ(plan.total_fresh, 0);
  plan = PlanSuggestions(state, {{&twice}});
  EXPECT_THAT(Ids(plan.requests[0].held), ElementsAre(1, 2));
  EXPECT_EQ(plan.requests[0].fresh, 0);
}

TEST(PlanSuggestionsTest, QueuedTrialsComeBeforeNewOnes) {
  const v1::Study study = Study("max_trials: 10");
  const SuggestionState state = StateOf(
      study, {Trial(1, v1::Trial::COMPLETED), Trial(2, v1::Trial::REQUESTED),
              Trial(3, v1::Trial::REQUESTED)});
  const v1::SuggestTrialsRequest first = Ask("a", 1);
  const v1::SuggestTrialsRequest second = Ask("b", 3);
  const SuggestionPlan plan = PlanSuggestions(state, {{&first}, {&second}});
  EXPECT_THAT(Ids(plan.requests[0].grants), ElementsAre(2));
  EXPECT_EQ(plan.requests[0].fresh, 0);
  EXPECT_THAT(Ids(plan.requests[1].grants), ElementsAre(3));
  EXPECT_EQ(plan.requests[1].fresh, 2);
  EXPECT_EQ(plan.total_fresh, 2);
  EXPECT_FALSE(plan.completes_study);
}

TEST(PlanSuggestionsTest, TheParallelLimitAndTheBudgetHoldAcrossTheBatch) {
  const v1::Study study = Study("max_trials: 4 max_parallel_trials: 3");
  const SuggestionState state = StateOf(
      study, {Trial(1, v1::Trial::ACTIVE, "w0"), Trial(2, v1::Trial::FAILED)});
  const v1::SuggestTrialsRequest a = Ask("a", 1), b = Ask("b", 5),
                                 c = Ask("c", 1);
  SuggestionPlan plan = PlanSuggestions(state, {{&a}, {&b}, {&c}});
  // Room for 2 more running; 2 of the 4 trials are left to create.
  EXPECT_EQ(plan.requests[0].fresh, 1);
  EXPECT_EQ(plan.requests[1].fresh, 1);
  EXPECT_EQ(plan.requests[2].fresh, 0);
  EXPECT_FALSE(plan.completes_study);  // trial 1 still runs

  const v1::Study unlimited_parallel = Study("max_trials: 4");
  plan = PlanSuggestions(
      StateOf(unlimited_parallel,
              {Trial(1, v1::Trial::ACTIVE, "w0"), Trial(2, v1::Trial::FAILED)}),
      {{&b}});
  EXPECT_EQ(plan.requests[0].fresh, 2);
}

TEST(PlanSuggestionsTest, SpentDeviceHoursStopNewTrials) {
  v1::Study study = Study("max_device_hours: 1");
  study.set_device_seconds(3600);
  const v1::SuggestTrialsRequest a = Ask("a", 2);
  const SuggestionPlan plan =
      PlanSuggestions(StateOf(study, {Trial(1, v1::Trial::COMPLETED)}), {{&a}});
  EXPECT_EQ(plan.total_fresh, 0);
  EXPECT_TRUE(plan.completes_study);
}

TEST(PlanSuggestionsTest, TheStudyCompletesOnceTheBudgetIsSpentAndAllEnded) {
  const v1::Study study = Study("max_trials: 2");
  const v1::SuggestTrialsRequest a = Ask("a", 1);
  EXPECT_TRUE(PlanSuggestions(StateOf(study, {Trial(1, v1::Trial::COMPLETED),
                                              Trial(2, v1::Trial::FAILED)}),
                              {{&a}})
                  .completes_study);
  // A running trial may still come back to the queue: not yet.
  EXPECT_FALSE(
      PlanSuggestions(StateOf(study, {Trial(1, v1::Trial::COMPLETED),
                                      Trial(2, v1::Trial::ACTIVE, "w")}),
                      {{&a}})
          .completes_study);
  // Nor when the only caller may not change the study.
  EXPECT_FALSE(PlanSuggestions(StateOf(study, {Trial(1, v1::Trial::COMPLETED),
                                               Trial(2, v1::Trial::FAILED)}),
                               {{&a, /*admitted=*/false}})
                   .completes_study);
}

TEST(PlanSuggestionsTest, RefusedCallersAndPausedStudiesGetNothing) {
  const v1::Study study = Study("max_trials: 10");
  const v1::SuggestTrialsRequest a = Ask("a", 2), b = Ask("b", 2);
  SuggestionPlan plan =
      PlanSuggestions(StateOf(study, {Trial(1, v1::Trial::REQUESTED)}),
                      {{&a, /*admitted=*/false}, {&b}});
  EXPECT_THAT(plan.requests[0].grants, IsEmpty());
  EXPECT_EQ(plan.requests[0].fresh, 0);
  EXPECT_THAT(Ids(plan.requests[1].grants), ElementsAre(1));
  EXPECT_EQ(plan.requests[1].fresh, 1);

  v1::Study paused = study;
  paused.set_state(v1::Study::PAUSED);
  plan = PlanSuggestions(StateOf(paused, {Trial(1, v1::Trial::REQUESTED)}),
                         {{&b}});
  EXPECT_THAT(plan.requests[0].grants, IsEmpty());
  EXPECT_EQ(plan.total_fresh, 0);
  EXPECT_FALSE(plan.completes_study);
}

TEST(PlanSuggestionsTest, AnAnswerStaysUnderTheResponseLimit) {
  const v1::Study study = Study("max_trials: 100");
  std::vector<v1::Trial> queued;
  for (int64_t id = 1; id <= 8; ++id) {
    v1::Trial t = Trial(id, v1::Trial::REQUESTED);
    t.set_checkpoint_uri(std::string(900 << 10, 'c'));  // ~900 KB each
    queued.push_back(t);
  }
  const v1::SuggestTrialsRequest a = Ask("a", 8);
  const SuggestionPlan plan = PlanSuggestions(StateOf(study, queued), {{&a}});
  size_t bytes = 0;
  for (const v1::Trial& t : plan.requests[0].grants) bytes += t.ByteSizeLong();
  EXPECT_EQ(plan.requests[0].grants.size(), 4u);
  EXPECT_LE(bytes, kMaxResponseBytes);
  // The answer is full: no new trials ride along.
  EXPECT_EQ(plan.requests[0].fresh, 0);
}

// ASHA in pause mode: the best of three paused at the first rung (eta 3)
// resumes before any new configuration; once the budget is spent and
// nothing runs, the others are stopped as the study completes.
TEST(PlanSuggestionsTest, PromotionsComeBeforeNewTrialsAndTheRestStopAtTheEnd) {
  const v1::Study study = Study(R"pb(
    max_trials: 3
    early_stopping {
      rule: ASHA min_resource: 1 max_resource: 9 reduction_factor: 3
      pause_at_rungs: true
    })pb");
  std::vector<v1::Trial> trials;
  for (auto [id, acc] :
       std::vector<std::pair<int64_t, double>>{{1, 0.5}, {2, 0.9}, {3, 0.4}}) {
    v1::Trial t = Trial(id, v1::Trial::PAUSED);
    v1::Measurement* m = t.add_measurements();
    m->set_step(1);
    (*m->mutable_metrics())["acc"] = acc;
    trials.push_back(t);
  }
  const v1::SuggestTrialsRequest a = Ask("a", 2);
  SuggestionPlan plan =
      PlanSuggestions(StateOf(study, trials, /*all=*/true), {{&a}});
  // Draining (no new configurations): each rung keeps its best.
  EXPECT_THAT(Ids(plan.requests[0].grants), ElementsAre(2));
  EXPECT_EQ(plan.total_fresh, 0);
  EXPECT_FALSE(plan.completes_study);

  // Trial 2 went on and completed: 1 and 3 are never promoted.
  trials[1].set_state(v1::Trial::COMPLETED);
  plan = PlanSuggestions(StateOf(study, trials, /*all=*/true), {{&a}});
  EXPECT_TRUE(plan.completes_study);
  EXPECT_THAT(Ids(plan.unpromotable), ElementsAre(1, 3));
}

}  // namespace
}  // namespace hypertune::service
