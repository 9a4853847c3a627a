// StudyService over the in-memory store: the RPC semantics without gRPC.
#include "service/rpc/study_service.h"

#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "storage/memory_store.h"
#include "testing/test_server.h"

namespace hypertune::service {
namespace {

using ::testing::Each;
using ::testing::HasSubstr;

class StudyServiceTest : public ::testing::Test {
 protected:
  StudyServiceTest() : service_(&store_, Options()) {}

  ServiceOptions Options() {
    ServiceOptions options;
    options.now_ms = [this] { return now_ms_; };
    return options;
  }

  // Creates study `name` with max_trials / max_parallel_trials.
  v1::Study Create(const std::string& name, int max_trials, int max_parallel,
                   v1::Algorithm algorithm = v1::QUASI_RANDOM) {
    v1::CreateStudyRequest request;
    google::protobuf::TextFormat::ParseFromString(R"pb(
      study {
        spec {
          parameters { name: "x" double_spec { min: -1 max: 1 } }
          parameters { name: "n" integer_spec { min: 1 max: 100 scale: LOG } }
          parameters { name: "c" categorical_spec { values: [ "a", "b", "c" ] } }
          metrics { name: "loss" goal: MINIMIZE }
          metrics { name: "acc" goal: MAXIMIZE }
        }
      })pb",
                                                  &request);
    request.mutable_study()->set_name(name);
    request.mutable_study()->mutable_spec()->set_max_trials(max_trials);
    request.mutable_study()->mutable_spec()->set_max_parallel_trials(
        max_parallel);
    request.mutable_study()->mutable_spec()->set_algorithm(algorithm);
    auto study = service_.CreateStudy(request);
    EXPECT_TRUE(study.ok()) << study.status();
    return *study;
  }

  absl::StatusOr<v1::SuggestTrialsResponse> Suggest(const std::string& study,
                                                    int count,
                                                    const std::string& client) {
    v1::SuggestTrialsRequest request;
    request.set_study_name(study);
    request.set_count(count);
    request.set_client_id(client);
    return service_.SuggestTrials(request);
  }

  // The trial's current lease epoch, as its owner knows it.
  int64_t Epoch(const std::string& study, int64_t id) {
    v1::GetTrialRequest get;
    get.set_study_name(study);
    get.set_trial_id(id);
    auto trial = service_.GetTrial(get);
    return trial.ok() ? trial->lease_epoch() : 1;
  }

  absl::StatusOr<v1::Trial> Complete(const std::string& study, int64_t id,
                                     double loss) {
    v1::CompleteTrialRequest request;
    request.set_study_name(study);
    request.set_trial_id(id);
    request.set_lease_epoch(Epoch(study, id));
    (*request.mutable_final_measurement()->mutable_metrics())["loss"] = loss;
    return service_.CompleteTrial(request);
  }

  absl::StatusOr<v1::Trial> Report(const std::string& study, int64_t id,
                                   int64_t step, double loss) {
    v1::AddMeasurementRequest request;
    request.set_study_name(study);
    request.set_trial_id(id);
    request.set_lease_epoch(Epoch(study, id));
    request.mutable_measurement()->set_step(step);
    (*request.mutable_measurement()->mutable_metrics())["loss"] = loss;
    return service_.AddMeasurement(request);
  }

  int64_t now_ms_ = 1'700'000'000'000;
  storage::MemoryStore store_;
  StudyService service_;
};

TEST_F(StudyServiceTest, CreateStudyFillsDefaultsAndRefusesDuplicates) {
  v1::Study study = Create("s", 0, 0, v1::ALGORITHM_UNSPECIFIED);
  EXPECT_EQ(study.state(), v1::Study::ACTIVE);
  EXPECT_EQ(study.spec().algorithm(), v1::GP_BANDIT);
  EXPECT_EQ(study.create_time_ms(), now_ms_);
  v1::CreateStudyRequest again;
  *again.mutable_study() = study;
  EXPECT_EQ(service_.CreateStudy(again).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(StudyServiceTest, UnknownAlgorithmIsInvalid) {
  v1::CreateStudyRequest request;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    study {
      name: "odd"
      spec {
        parameters { name: "x" double_spec { min: 0 max: 1 } }
        metrics { name: "y" goal: MAXIMIZE }
      }
    })pb",
                                                &request);
  request.mutable_study()->mutable_spec()->set_algorithm(
      static_cast<v1::Algorithm>(42));
  absl::Status s = service_.CreateStudy(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("study.spec.algorithm"));
}

// The GP bandit through the whole service: on a 2-D quadratic it gets
// close to the optimum within 30 trials, where quasi-random search is far.
TEST_F(StudyServiceTest, GpBanditFindsTheOptimumOfAQuadratic) {
  v1::CreateStudyRequest request;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    study {
      name: "quad"
      spec {
        parameters { name: "a" double_spec { min: -5 max: 5 } }
        parameters { name: "b" double_spec { min: -5 max: 5 } }
        metrics { name: "loss" goal: MINIMIZE }
        algorithm: GP_BANDIT
        seed: 7
      }
    })pb",
                                                &request);
  ASSERT_TRUE(service_.CreateStudy(request).ok());
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 30; ++i) {
    auto r = Suggest("quad", 1, "w");
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->trials_size(), 1);
    const v1::Trial& t = r->trials(0);
    double a = t.parameters(0).double_value();
    double b = t.parameters(1).double_value();
    double loss = (a - 1.3) * (a - 1.3) + 2 * (b + 0.7) * (b + 0.7);
    best = std::min(best, loss);
    ASSERT_TRUE(Complete("quad", t.id(), loss).ok());
  }
  EXPECT_LT(best, 1e-2);
}

TEST_F(StudyServiceTest, SuggestGrantsDenseActiveTrialsWithValidParameters) {
  Create("s", 0, 0);
  auto r = Suggest("s", 3, "w1");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->trials_size(), 3);
  for (int i = 0; i < 3; ++i) {
    const v1::Trial& t = r->trials(i);
    EXPECT_EQ(t.id(), i + 1);
    EXPECT_EQ(t.state(), v1::Trial::ACTIVE);
    EXPECT_EQ(t.client_id(), "w1");
    EXPECT_EQ(t.lease_epoch(), 1);
    EXPECT_EQ(t.start_time_ms(), now_ms_);
    ASSERT_EQ(t.parameters_size(), 3);
    EXPECT_GE(t.parameters(0).double_value(), -1);
    EXPECT_LE(t.parameters(0).double_value(), 1);
    EXPECT_GE(t.parameters(1).int_value(), 1);
    EXPECT_LE(t.parameters(1).int_value(), 100);
  }
}

TEST_F(StudyServiceTest, SameClientGetsItsActiveTrialBack) {
  Create("s", 0, 0);
  auto first = Suggest("s", 1, "w1");
  ASSERT_TRUE(first.ok());
  auto again = Suggest("s", 1, "w1");
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->trials_size(), 1);
  EXPECT_EQ(again->trials(0).id(), first->trials(0).id());
  EXPECT_EQ(again->trials(0).lease_epoch(), first->trials(0).lease_epoch());
  auto other = Suggest("s", 1, "w2");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->trials(0).id(), 2);
}

TEST_F(StudyServiceTest, SameSeedAndHistoryGiveSameSuggestions) {
  Create("a", 0, 0);
  Create("b", 0, 0);
  for (int i = 0; i < 5; ++i) {
    auto ra = Suggest("a", 1, "");
    auto rb = Suggest("b", 1, "");
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_EQ(ra->trials(0).parameters(0).double_value(),
              rb->trials(0).parameters(0).double_value());
  }
}

TEST_F(StudyServiceTest, ParallelLimitAndBudgetCompleteTheStudy) {
  Create("s", 3, 2);
  auto r = Suggest("s", 5, "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->trials_size(), 2);  // parallel limit
  auto full = Suggest("s", 1, "");
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->trials_size(), 0);
  EXPECT_EQ(full->study_state(), v1::Study::ACTIVE);
  ASSERT_TRUE(Complete("s", 1, 0.5).ok());
  auto third = Suggest("s", 5, "");
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->trials_size(), 1);  // budget of 3
  ASSERT_TRUE(Complete("s", 2, 0.5).ok());
  // Budget spent but trial 3 still runs: its worker could yet be lost, so
  // the study stays open and idle workers wait.
  auto waiting = Suggest("s", 1, "");
  ASSERT_TRUE(waiting.ok());
  EXPECT_EQ(waiting->trials_size(), 0);
  EXPECT_EQ(waiting->study_state(), v1::Study::ACTIVE);
  ASSERT_TRUE(Complete("s", 3, 0.1).ok());
  auto done = Suggest("s", 1, "");
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->trials_size(), 0);
  EXPECT_EQ(done->study_state(), v1::Study::COMPLETED);
  v1::GetStudyRequest get;
  get.set_name("s");
  auto study = service_.GetStudy(get);
  ASSERT_TRUE(study.ok());
  EXPECT_EQ(study->state(), v1::Study::COMPLETED);
  EXPECT_EQ(study->trial_counts().at("COMPLETED"), 3);
}

TEST_F(StudyServiceTest, PausedStudySuggestsNothing) {
  Create("s", 0, 0);
  v1::SetStudyStateRequest pause;
  pause.set_name("s");
  pause.set_state(v1::Study::PAUSED);
  ASSERT_TRUE(service_.SetStudyState(pause).ok());
  auto r = Suggest("s", 1, "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->trials_size(), 0);
  EXPECT_EQ(r->study_state(), v1::Study::PAUSED);
  pause.set_state(v1::Study::STATE_UNSPECIFIED);
  EXPECT_EQ(service_.SetStudyState(pause).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StudyServiceTest, RaisingMaxTrialsReopensACompletedStudy) {
  Create("s", 2, 0);
  ASSERT_TRUE(Suggest("s", 2, "").ok());
  ASSERT_TRUE(Complete("s", 1, 0.5).ok());
  ASSERT_TRUE(Complete("s", 2, 0.4).ok());
  auto spent = Suggest("s", 1, "");
  ASSERT_TRUE(spent.ok());
  ASSERT_EQ(spent->study_state(), v1::Study::COMPLETED);

  // At or below the trials created, or negative: refused, naming the field.
  for (int64_t bad : {int64_t{-1}, int64_t{1}, int64_t{2},
                      int64_t{std::numeric_limits<int32_t>::max()} + 1}) {
    absl::Status s = service_.SetMaxTrials("s", bad).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()), HasSubstr("max_trials")) << bad;
  }
  EXPECT_EQ(service_.SetMaxTrials("nope", 5).status().code(),
            absl::StatusCode::kNotFound);

  auto raised = service_.SetMaxTrials("s", 4);
  ASSERT_TRUE(raised.ok()) << raised.status();
  EXPECT_EQ(raised->spec().max_trials(), 4);
  EXPECT_EQ(raised->state(), v1::Study::ACTIVE);
  auto more = Suggest("s", 5, "");
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->trials_size(), 2);  // up to the new budget of 4

  // 0 is unlimited, and raises a limited budget.
  auto unlimited = service_.SetMaxTrials("s", 0);
  ASSERT_TRUE(unlimited.ok()) << unlimited.status();
  EXPECT_EQ(unlimited->spec().max_trials(), 0);
}

TEST_F(StudyServiceTest, MaxTrialsKeepsAPausedOrHandClosedStudysState) {
  Create("s", 10, 0);
  v1::SetStudyStateRequest pause;
  pause.set_name("s");
  pause.set_state(v1::Study::PAUSED);
  ASSERT_TRUE(service_.SetStudyState(pause).ok());
  auto raised = service_.SetMaxTrials("s", 20);
  ASSERT_TRUE(raised.ok());
  EXPECT_EQ(raised->state(), v1::Study::PAUSED);

  // Closed by hand, then a lower budget: not a raise, so it stays closed.
  pause.set_state(v1::Study::COMPLETED);
  ASSERT_TRUE(service_.SetStudyState(pause).ok());
  auto lowered = service_.SetMaxTrials("s", 15);
  ASSERT_TRUE(lowered.ok());
  EXPECT_EQ(lowered->state(), v1::Study::COMPLETED);
  EXPECT_EQ(lowered->spec().max_trials(), 15);
}

TEST_F(StudyServiceTest, MaxTrialsNeedsWriteAccess) {
  v1::CreateStudyRequest request;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    study {
      name: "alices"
      spec {
        parameters { name: "x" double_spec { min: 0 max: 1 } }
        metrics { name: "y" goal: MAXIMIZE }
        max_trials: 5
      }
    })pb",
                                                &request);
  Principal alice{"alice", true, false};
  Principal bob{"bob", true, false};
  ASSERT_TRUE(service_.CreateStudy(request, alice).ok());
  EXPECT_EQ(service_.SetMaxTrials("alices", 9, bob).status().code(),
            absl::StatusCode::kPermissionDenied);
  auto mine = service_.SetMaxTrials("alices", 9, alice);
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(mine->spec().max_trials(), 9);
}

TEST_F(StudyServiceTest, QueuedTrialsAreGrantedFirstAndValidated) {
  Create("s", 0, 0);
  v1::CreateTrialRequest request;
  request.set_study_name("s");
  google::protobuf::TextFormat::ParseFromString(R"pb(
    parameters { name: "c" string_value: "b" }
    parameters { name: "x" double_value: 0.25 }
    parameters { name: "n" int_value: 7 }
  )pb",
                                                request.mutable_trial());
  auto queued = service_.CreateTrial(request);
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(queued->state(), v1::Trial::REQUESTED);
  EXPECT_EQ(queued->parameters(0).name(), "x");  // canonical order
  auto r = Suggest("s", 2, "w");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->trials_size(), 2);
  EXPECT_EQ(r->trials(0).id(), queued->id());
  EXPECT_EQ(r->trials(0).state(), v1::Trial::ACTIVE);
  EXPECT_EQ(r->trials(0).parameters(0).double_value(), 0.25);

  request.mutable_trial()->mutable_parameters(1)->set_double_value(3);
  absl::Status s = service_.CreateTrial(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"x\""));
}

// A partial configuration (CreateTrialRequest.partial): the given values
// kept, the study's algorithm choosing the rest, every parameter in range.
TEST_F(StudyServiceTest, PartialQueuedTrialsAreCompletedByTheAlgorithm) {
  for (v1::Algorithm algorithm : {v1::QUASI_RANDOM, v1::GP_BANDIT}) {
    const std::string name = v1::Algorithm_Name(algorithm);
    Create(name, 0, 0, algorithm);
    // A history for the GP to learn from.
    for (int i = 0; i < 6; ++i) {
      auto r = Suggest(name, 1, "w");
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_TRUE(Complete(name, r->trials(0).id(), 0.1 * i).ok());
    }
    v1::CreateTrialRequest request;
    request.set_study_name(name);
    request.set_partial(true);
    google::protobuf::TextFormat::ParseFromString(
        R"pb(parameters { name: "c" string_value: "b" })pb",
        request.mutable_trial());
    auto queued = service_.CreateTrial(request);
    ASSERT_TRUE(queued.ok()) << name << ": " << queued.status();
    EXPECT_EQ(queued->state(), v1::Trial::REQUESTED);
    ASSERT_EQ(queued->parameters_size(), 3) << name;
    EXPECT_EQ(queued->parameters(0).name(), "x");
    EXPECT_GE(queued->parameters(0).double_value(), -1);
    EXPECT_LE(queued->parameters(0).double_value(), 1);
    EXPECT_GE(queued->parameters(1).int_value(), 1);
    EXPECT_LE(queued->parameters(1).int_value(), 100);
    EXPECT_EQ(queued->parameters(2).string_value(), "b");
    // Handed out next, as it was stored.
    auto r = Suggest(name, 1, "w2");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->trials(0).id(), queued->id());
    EXPECT_EQ(r->trials(0).parameters(2).string_value(), "b");
  }
}

// The review's case: each partial CreateTrial fitted a model of its own on
// the request thread, outside the suggestion queue, so 32 at once saturated
// the server. They now queue with the study's suggestions and are served a
// batch at a time by one fit of the study's model: concurrent callers that
// read the same history get different points (each fresh suggester used to
// propose the same one from the same history and seed), every given value
// kept.
TEST_F(StudyServiceTest, ConcurrentPartialTrialsShareTheStudysQueue) {
  Create("s", 0, 0, v1::RANDOM);
  constexpr int kCallers = 16;
  std::vector<absl::StatusOr<v1::Trial>> queued(kCallers,
                                                absl::UnknownError("not run"));
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] {
      v1::CreateTrialRequest request;
      request.set_study_name("s");
      request.set_partial(true);
      google::protobuf::TextFormat::ParseFromString(
          R"pb(parameters { name: "c" string_value: "a" })pb",
          request.mutable_trial());
      queued[i] = service_.CreateTrial(request);
    });
  }
  for (std::thread& t : callers) t.join();
  std::set<double> xs;
  for (int i = 0; i < kCallers; ++i) {
    ASSERT_TRUE(queued[i].ok()) << queued[i].status();
    ASSERT_EQ(queued[i]->parameters_size(), 3);
    EXPECT_EQ(queued[i]->parameters(2).string_value(), "a");
    xs.insert(queued[i]->parameters(0).double_value());
  }
  EXPECT_EQ(xs.size(), size_t{kCallers}) << "points proposed twice";
}

TEST_F(StudyServiceTest, PartialTrialsAreRefusedClearly) {
  Create("s", 0, 0);
  v1::CreateTrialRequest request;
  request.set_study_name("s");
  request.set_partial(true);
  google::protobuf::TextFormat::ParseFromString(
      R"pb(parameters { name: "n" int_value: 500 })pb",
      request.mutable_trial());
  absl::Status s = service_.CreateTrial(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("trial.parameters"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"n\""));
  EXPECT_THAT(std::string(s.message()), HasSubstr("outside [1, 100]"));

  google::protobuf::TextFormat::ParseFromString(
      R"pb(parameters { name: "nope" double_value: 1 })pb",
      request.mutable_trial());
  s = service_.CreateTrial(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("unknown parameter \"nope\""));

  // NaN is refused as infinity is, never taken for "choose it".
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
    request.mutable_trial()->Clear();
    v1::ParameterValue* x = request.mutable_trial()->add_parameters();
    x->set_name("x");
    x->set_double_value(bad);
    s = service_.CreateTrial(request).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()), HasSubstr("\"x\"")) << bad;
  }

  // A result names every parameter.
  google::protobuf::TextFormat::ParseFromString(R"pb(
    state: COMPLETED
    parameters { name: "x" double_value: 0.5 }
    final_measurement { metrics { key: "loss" value: 0.9 } }
  )pb",
                                                request.mutable_trial());
  s = service_.CreateTrial(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("partial"));
}

TEST_F(StudyServiceTest, WarmStartTrialNeedsTheObjective) {
  Create("s", 0, 0);
  v1::CreateTrialRequest request;
  request.set_study_name("s");
  google::protobuf::TextFormat::ParseFromString(R"pb(
    state: COMPLETED
    parameters { name: "x" double_value: 0.5 }
    parameters { name: "n" int_value: 2 }
    parameters { name: "c" string_value: "a" }
    final_measurement { metrics { key: "acc" value: 0.9 } }
  )pb",
                                                request.mutable_trial());
  EXPECT_THAT(std::string(service_.CreateTrial(request).status().message()),
              HasSubstr("missing \"loss\""));
  (*request.mutable_trial()
        ->mutable_final_measurement()
        ->mutable_metrics())["loss"] = 0.3;
  auto t = service_.CreateTrial(request);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->state(), v1::Trial::COMPLETED);
  v1::ListOptimalTrialsRequest best;
  best.set_study_name("s");
  auto b = service_.ListOptimalTrials(best);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->trials_size(), 1);
  EXPECT_EQ(b->trials(0).id(), t->id());
}

absl::StatusOr<v1::Study> UpdateOf(StudyService& service,
                                   const std::string& name,
                                   const std::string& spec_text,
                                   std::vector<std::string> paths) {
  v1::UpdateStudyRequest request;
  request.set_name(name);
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      spec_text, request.mutable_spec()));
  for (const std::string& p : paths)
    request.mutable_update_mask()->add_paths(p);
  return service.UpdateStudy(request);
}

TEST_F(StudyServiceTest, RaisingTheBudgetReopensACompletedStudy) {
  Create("s", 2, 0);
  auto r = Suggest("s", 2, "w");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(Complete("s", 1, 0.5).ok());
  ASSERT_TRUE(Complete("s", 2, 0.4).ok());
  auto done = Suggest("s", 1, "w");
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->study_state(), v1::Study::COMPLETED);

  // Resuming would complete it again at once: refused, saying what to do.
  v1::SetStudyStateRequest resume;
  resume.set_name("s");
  resume.set_state(v1::Study::ACTIVE);
  absl::Status refused = service_.SetStudyState(resume).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("hypertune study update s --max-trials N"));

  now_ms_ += 1000;
  auto updated = UpdateOf(service_, "s", "max_trials: 4 lease_seconds: 90",
                          {"max_trials", "lease_seconds"});
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->state(), v1::Study::ACTIVE);
  EXPECT_EQ(updated->spec().max_trials(), 4);
  EXPECT_EQ(updated->spec().lease_seconds(), 90);
  ASSERT_EQ(updated->changes_size(), 1);
  const v1::StudyChange& change = updated->changes(0);
  EXPECT_EQ(change.time_ms(), now_ms_);
  EXPECT_EQ(change.who(), "(auth off)");
  ASSERT_EQ(change.fields_size(), 2);
  EXPECT_EQ(change.fields(0).path(), "max_trials");
  EXPECT_EQ(change.fields(0).before(), "2");
  EXPECT_EQ(change.fields(0).after(), "4");
  EXPECT_EQ(change.fields(1).before(), "0");
  EXPECT_EQ(change.fields(1).after(), "90");
  auto more = Suggest("s", 2, "w");
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(more->trials_size(), 2);

  // The same values again change nothing and record nothing.
  auto again = UpdateOf(service_, "s", "max_trials: 4", {"max_trials"});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->changes_size(), 1);
}

TEST_F(StudyServiceTest, ASearchSpaceMayOnlyGrow) {
  Create("s", 0, 0);
  v1::CreateTrialRequest known;
  known.set_study_name("s");
  google::protobuf::TextFormat::ParseFromString(R"pb(
    state: COMPLETED
    parameters { name: "x" double_value: 0.9 }
    parameters { name: "n" int_value: 50 }
    parameters { name: "c" string_value: "b" }
    final_measurement { metrics { key: "loss" value: 0.3 } }
  )pb",
                                                known.mutable_trial());
  auto t = service_.CreateTrial(known);
  ASSERT_TRUE(t.ok()) << t.status();

  const std::string wider = R"pb(
    parameters { name: "x" double_spec { min: -2 max: 2 } }
    parameters { name: "n" integer_spec { min: 1 max: 200 scale: LOG } }
    parameters { name: "c" categorical_spec { values: [ "a", "b", "c", "d" ] } }
  )pb";
  auto grown = UpdateOf(service_, "s", wider, {"parameters"});
  ASSERT_TRUE(grown.ok()) << grown.status();
  EXPECT_EQ(grown->spec().parameters(2).categorical_spec().values_size(), 4);
  // Recorded per changed parameter, as its domain and what was added.
  ASSERT_EQ(grown->changes(0).fields_size(), 3);
  EXPECT_EQ(grown->changes(0).fields(0).path(), "parameters");
  EXPECT_EQ(grown->changes(0).fields(0).before(), "x: [-1, 1]");
  EXPECT_EQ(grown->changes(0).fields(0).after(), "x: [-2, 2]");
  EXPECT_EQ(grown->changes(0).fields(2).before(), "c: 3 categories");
  EXPECT_EQ(grown->changes(0).fields(2).after(),
            "c: 4 categories; added \"d\"");
  auto r = Suggest("s", 1, "w");  // the model follows the new space
  ASSERT_TRUE(r.ok()) << r.status();

  struct Bad {
    std::string spec;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {R"pb(parameters { name: "x" double_spec { min: -0.5 max: 0.5 } }
            parameters { name: "n" integer_spec { min: 1 max: 200 scale: LOG } }
            parameters { name: "c" categorical_spec { values: [ "a", "b", "c", "d" ] } })pb",
       absl::StatusCode::kFailedPrecondition,
       absl::StrCat("trials outside it: ", t->id())},
      {R"pb(parameters { name: "x" double_spec { min: -2 max: 2 } }
            parameters { name: "n" integer_spec { min: 1 max: 200 scale: LOG } }
            parameters { name: "c" categorical_spec { values: [ "a", "c", "d" ] } })pb",
       absl::StatusCode::kFailedPrecondition, "parameters[2] (\"c\")"},
      {R"pb(parameters { name: "y" double_spec { min: -2 max: 2 } }
            parameters { name: "n" integer_spec { min: 1 max: 200 scale: LOG } }
            parameters { name: "c" categorical_spec { values: [ "a", "b", "c", "d" ] } })pb",
       absl::StatusCode::kFailedPrecondition, "\"x\" cannot become \"y\""},
      {R"pb(parameters { name: "x" double_spec { min: -2 max: 2 } })pb",
       absl::StatusCode::kFailedPrecondition, "removing parameter \"n\""},
      {R"pb(parameters { name: "x" double_spec { min: -2 max: 2 } }
            parameters { name: "n" integer_spec { min: 1 max: 200 } }
            parameters { name: "c" categorical_spec { values: [ "a", "b", "c", "d" ] } })pb",
       absl::StatusCode::kFailedPrecondition, "kind, scale"},
  };
  for (const Bad& b : bad) {
    absl::Status s = UpdateOf(service_, "s", b.spec, {"parameters"}).status();
    EXPECT_EQ(s.code(), b.code) << b.spec << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(b.message)) << b.spec;
  }
  absl::Status unknown = UpdateOf(service_, "s", "seed: 3", {"seed"}).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.message()),
              HasSubstr("\"seed\" cannot be updated"));
  absl::Status too_long =
      UpdateOf(service_, "s", "lease_seconds: 100000", {"lease_seconds"})
          .status();
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_long.message()), HasSubstr("lease_seconds"));
  auto after = service_.GetStudy([] {
    v1::GetStudyRequest g;
    g.set_name("s");
    return g;
  }());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->changes_size(), 1);  // the refusals changed nothing
  EXPECT_EQ(after->spec().parameters(0).double_spec().max(), 2);
}

// The review's case: a 1.0 MB study of two parameters with 500 long
// categories each, updated to 501, stored a 3 MB row (the record held both
// lists whole) that no read could answer. The record now names what changed;
// the stored study, record included, stays under the limit, and an update
// that would pass it is refused up front.
TEST_F(StudyServiceTest, AnUpdateKeepsTheStudyUnderItsSizeLimit) {
  auto categories = [](char tag, int n) {
    std::string text;
    for (int i = 0; i < n; ++i) {
      absl::StrAppend(&text, i ? ", " : "", "\"", std::string(1, tag), i,
                      std::string(990, tag), "\"");
    }
    return text;
  };
  auto space = [&](int first) {
    return absl::StrCat("parameters { name: \"a\" categorical_spec { values: [",
                        categories('a', first),
                        "] } } parameters { name: \"b\" "
                        "categorical_spec { values: [",
                        categories('b', 500), "] } }");
  };
  v1::CreateStudyRequest create;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      absl::StrCat("study { name: \"big\" spec { ", space(500),
                   " metrics { name: \"loss\" goal: MINIMIZE } } }"),
      &create));
  ASSERT_TRUE(service_.CreateStudy(create).ok());
  Create("small", 0, 0);

  auto grown = UpdateOf(service_, "big", space(501), {"parameters"});
  ASSERT_TRUE(grown.ok()) << grown.status();
  EXPECT_LE(grown->ByteSizeLong(), kMaxStudyBytes);
  ASSERT_EQ(grown->changes(0).fields_size(), 1);
  EXPECT_EQ(grown->changes(0).fields(0).before(), "a: 500 categories");
  EXPECT_THAT(grown->changes(0).fields(0).after(),
              HasSubstr("a: 501 categories; added \"a500"));
  EXPECT_LE(grown->changes(0).fields(0).after().size(),
            kMaxChangeTextBytes + 64);

  // 60 more values would pass 1 MiB: refused, nothing changed.
  absl::Status over =
      UpdateOf(service_, "big", space(561), {"parameters"}).status();
  EXPECT_EQ(over.code(), absl::StatusCode::kInvalidArgument) << over;
  EXPECT_THAT(std::string(over.message()),
              HasSubstr(absl::StrCat("over the limit of ", kMaxStudyBytes)));
  v1::GetStudyRequest get;
  get.set_name("big");
  auto after = service_.GetStudy(get);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->spec().parameters(0).categorical_spec().values_size(), 501);
  EXPECT_EQ(after->changes_size(), 1);

  auto list = service_.ListStudies(v1::ListStudiesRequest());
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->studies_size(), 2);
  EXPECT_LE(list->ByteSizeLong(), kMaxResponseBytes);
}

// A row stored before the record counted (a change 8 MB long) is answered
// cut to the limit, so that it never breaks a list or a read.
TEST_F(StudyServiceTest, AnOversizedStoredStudyIsAnsweredWithinTheLimit) {
  v1::Study study = Create("legacy", 0, 0);
  study.clear_trial_counts();
  for (int i = 0; i < 2; ++i) {
    v1::StudyChange::Field* field = study.add_changes()->add_fields();
    field->set_path("parameters");
    field->set_before(std::string(4 << 20, 'x'));
    field->set_after(std::string(4 << 20, 'y'));
  }
  ASSERT_TRUE(store_.UpdateStudy(study).ok());
  v1::GetStudyRequest get;
  get.set_name("legacy");
  auto read = service_.GetStudy(get);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_LE(read->ByteSizeLong(), kMaxStudyBytes);
  EXPECT_THAT(read->changes(0).fields(0).before(), HasSubstr("cut from"));
  auto list = service_.ListStudies(v1::ListStudiesRequest());
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->studies_size(), 1);
  EXPECT_LE(list->ByteSizeLong(), kMaxResponseBytes);
}

// The review's cases of bad input to UpdateStudy: each INVALID_ARGUMENT
// naming the field and the problem.
TEST_F(StudyServiceTest, UpdateStudyNamesEachBadField) {
  Create("plain", 0, 0);  // no early stopping
  for (const char* path :
       {"early_stopping.max_resource", "early_stopping.min_trials",
        "early_stopping.grace_steps"}) {
    absl::Status s = UpdateOf(service_, "plain", "", {path}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(absl::StrCat("\"", path, "\" does not apply")));
    EXPECT_THAT(std::string(s.message()), HasSubstr("no early-stopping rule"));
  }
  v1::CreateStudyRequest median;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    study {
      name: "median"
      spec {
        parameters { name: "x" double_spec { min: 0 max: 1 } }
        metrics { name: "loss" goal: MINIMIZE }
        early_stopping { rule: MEDIAN }
      }
    })pb",
                                                            &median));
  ASSERT_TRUE(service_.CreateStudy(median).ok());
  absl::Status asha_field =
      UpdateOf(service_, "median", "early_stopping { max_resource: 9 }",
               {"early_stopping.max_resource"})
          .status();
  EXPECT_EQ(asha_field.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(asha_field.message()), HasSubstr("MEDIAN"));
  EXPECT_TRUE(UpdateOf(service_, "median", "early_stopping { min_trials: 5 }",
                       {"early_stopping.min_trials"})
                  .ok());
  // Model-based promotions: ASHA's and HYPERBAND's only, and only with
  // pause_at_rungs.
  absl::Status model_on_median =
      UpdateOf(service_, "median", "early_stopping { promote_by_model: true }",
               {"early_stopping.promote_by_model"})
          .status();
  EXPECT_EQ(model_on_median.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(model_on_median.message()), HasSubstr("MEDIAN"));
  v1::CreateStudyRequest asha;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    study {
      name: "asha"
      spec {
        parameters { name: "x" double_spec { min: 0 max: 1 } }
        metrics { name: "loss" goal: MINIMIZE }
        early_stopping { rule: ASHA max_resource: 9 }
      }
    })pb",
                                                            &asha));
  ASSERT_TRUE(service_.CreateStudy(asha).ok());
  absl::Status no_pause =
      UpdateOf(service_, "asha", "early_stopping { promote_by_model: true }",
               {"early_stopping.promote_by_model"})
          .status();
  EXPECT_EQ(no_pause.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_pause.message()),
              HasSubstr("early_stopping.promote_by_model: needs "
                        "pause_at_rungs"));

  absl::Status nan = UpdateOf(service_, "plain", R"pb(
      parameters { name: "x" double_spec { min: -1 max: nan } }
      parameters { name: "n" integer_spec { min: 1 max: 100 scale: LOG } }
      parameters { name: "c" categorical_spec { values: [ "a", "b", "c" ] } })pb",
                              {"parameters"})
                         .status();
  EXPECT_EQ(nan.code(), absl::StatusCode::kInvalidArgument) << nan;
  EXPECT_THAT(std::string(nan.message()), HasSubstr("parameters[0]"));
  EXPECT_THAT(std::string(nan.message()), HasSubstr("nan"));

  v1::CreateStudyRequest twice;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    study {
      name: "conditional"
      spec {
        parameters { name: "opt" categorical_spec { values: [ "sgd", "adam" ] } }
        parameters {
          name: "momentum" double_spec { min: 0 max: 1 }
          parent: "opt" parent_categories: [ "sgd", "adam", "sgd" ]
        }
        metrics { name: "loss" goal: MINIMIZE }
      }
    })pb",
                                                            &twice));
  absl::Status repeated = service_.CreateStudy(twice).status();
  EXPECT_EQ(repeated.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(repeated.message()),
              HasSubstr("parameters[1].parent_categories[2]: \"sgd\" is "
                        "listed twice"));

  v1::CreateStudyRequest keyed;
  keyed.mutable_study()->set_name("keyed");
  *keyed.mutable_study()->mutable_spec() = median.study().spec();
  (*keyed.mutable_study()->mutable_attributes())["bad key"] = "v";
  absl::Status key = service_.CreateStudy(keyed).status();
  EXPECT_EQ(key.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(key.message()),
              HasSubstr("study.attributes[\"bad key\"]"));
}

// A spot fleet loses machines: a trial given back by preempted workers
// goes on past max_retries (preemptions spend max_preemptions), while a
// worker that fails spends the retries as before; both are counted.
TEST_F(StudyServiceTest, PreemptionsDoNotSpendTheRetries) {
  Create("spot", 0, 0);  // max_retries: the default 2
  auto give_back = [&](int64_t id, bool preempted) {
    EXPECT_TRUE(Suggest("spot", 1, "w").ok());
    v1::CompleteTrialRequest request;
    request.set_study_name("spot");
    request.set_trial_id(id);
    request.set_lease_epoch(Epoch("spot", id));
    request.set_worker_failed(true);
    request.set_preempted(preempted);
    return service_.CompleteTrial(request);
  };
  for (int i = 0; i < 5; ++i) {
    auto back = give_back(1, /*preempted=*/true);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->state(), v1::Trial::REQUESTED);
    EXPECT_EQ(back->preemption_count(), i + 1);
    EXPECT_EQ(back->retry_count(), 0);
    EXPECT_EQ(back->failure_reason(), "worker preempted");
  }
  for (int i = 0; i < 2; ++i) {
    auto back = give_back(1, /*preempted=*/false);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->state(), v1::Trial::REQUESTED);
    EXPECT_EQ(back->retry_count(), i + 1);
  }
  auto failed = give_back(1, /*preempted=*/false);
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->state(), v1::Trial::FAILED);
  EXPECT_EQ(failed->preemption_count(), 5);
  EXPECT_THAT(failed->failure_reason(), HasSubstr("max_retries 2"));

  // max_preemptions bounds them in turn.
  ASSERT_TRUE(
      UpdateOf(service_, "spot", "max_preemptions: 1", {"max_preemptions"})
          .ok());
  auto once = give_back(2, /*preempted=*/true);
  ASSERT_TRUE(once.ok()) << once.status();
  EXPECT_EQ(once->state(), v1::Trial::REQUESTED);
  auto twice = give_back(2, /*preempted=*/true);
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_EQ(twice->state(), v1::Trial::FAILED);
  EXPECT_THAT(twice->failure_reason(), HasSubstr("max_preemptions 1"));

  v1::CompleteTrialRequest alone;
  alone.set_study_name("spot");
  alone.set_trial_id(3);
  alone.set_lease_epoch(1);
  alone.set_preempted(true);
  absl::Status s = service_.CompleteTrial(alone).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("preempted: only with worker_failed"));
  absl::Status bound =
      UpdateOf(service_, "spot", "max_preemptions: -1", {"max_preemptions"})
          .status();
  EXPECT_EQ(bound.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bound.message()), HasSubstr("max_preemptions"));
}

// The review's trap: one trial reporting loss=inf (minimized) made every
// later GP_BANDIT suggestion the same point. The model now sees inf as the
// worst value seen, so the study keeps exploring and converges as the
// finite one does.
TEST_F(StudyServiceTest, AnInfiniteResultDoesNotDerailTheSearch) {
  auto run = [&](const std::string& name, bool with_inf) {
    v1::CreateStudyRequest request;
    google::protobuf::TextFormat::ParseFromString(R"pb(
      study {
        spec {
          parameters { name: "x" double_spec { min: 0 max: 1 } }
          parameters { name: "y" double_spec { min: 0 max: 1 } }
          metrics { name: "loss" goal: MINIMIZE }
          algorithm: GP_BANDIT
          seed: 11
        }
      })pb",
                                                  &request);
    request.mutable_study()->set_name(name);
    EXPECT_TRUE(service_.CreateStudy(request).ok());
    std::set<std::pair<double, double>> points;
    double best = std::numeric_limits<double>::infinity();
    for (int i = 0; i < 20; ++i) {
      auto r = Suggest(name, 1, "w");
      EXPECT_TRUE(r.ok() && r->trials_size() == 1);
      if (!r.ok() || r->trials_size() != 1)
        return std::make_pair(best, points.size());
      const v1::Trial& t = r->trials(0);
      const double x = t.parameters(0).double_value();
      const double y = t.parameters(1).double_value();
      points.insert({x, y});
      double loss = (x - 0.3) * (x - 0.3) + (y - 0.7) * (y - 0.7);
      if (with_inf && i == 2) loss = std::numeric_limits<double>::infinity();
      EXPECT_TRUE(Complete(name, t.id(), loss).ok());
      if (std::isfinite(loss)) best = std::min(best, loss);
    }
    return std::make_pair(best, points.size());
  };
  const auto [finite_best, finite_points] = run("finite", false);
  const auto [inf_best, inf_points] = run("inf", true);
  EXPECT_EQ(inf_points, 20u);  // no point proposed twice
  EXPECT_LT(inf_best, 0.01);
  EXPECT_LT(finite_best, 0.01);
  // The inf trial stays stored as reported.
  v1::GetTrialRequest get;
  get.set_study_name("inf");
  get.set_trial_id(3);
  auto third = service_.GetTrial(get);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->final_measurement().metrics().at("loss"),
            std::numeric_limits<double>::infinity());
  (void)finite_points;
}

TEST_F(StudyServiceTest, BackupIsAnAdminsCallAndNeedsSqlite) {
  Principal bob;
  bob.owner = "bob";
  bob.checked = true;
  v1::BackupRequest request;
  request.set_destination_path("copy.db");
  EXPECT_EQ(service_.Backup(request, bob).status().code(),
            absl::StatusCode::kPermissionDenied);
  Principal admin = bob;
  admin.admin = true;
  absl::Status no_folder = service_.Backup(request, admin).status();
  EXPECT_EQ(no_folder.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(no_folder.message()), HasSubstr("--backup-dir"));

  test::TempDir dir;
  ServiceOptions options = Options();
  options.backup_dir = dir.path().string();
  StudyService with_folder(&store_, options);
  absl::Status memory = with_folder.Backup(request, admin).status();
  EXPECT_EQ(memory.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(memory.message()), HasSubstr("SQLite"));
  request.clear_destination_path();
  EXPECT_EQ(with_folder.Backup(request, admin).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Two objectives (accuracy up, latency down) under a memory constraint.
v1::CreateStudyRequest TwoObjectivesOneConstraint(v1::Algorithm algorithm) {
  v1::CreateStudyRequest request;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    study {
      name: "mo"
      spec {
        parameters { name: "x" double_spec { min: 0 max: 1 } }
        parameters { name: "y" double_spec { min: 0 max: 1 } }
        metrics { name: "acc" goal: MAXIMIZE role: OBJECTIVE }
        metrics { name: "latency" goal: MINIMIZE role: OBJECTIVE }
        metrics { name: "memory" role: CONSTRAINT upper_bound: 10 }
        metrics { name: "note" }
      }
    })pb",
                                                &request);
  request.mutable_study()->mutable_spec()->set_algorithm(algorithm);
  return request;
}

TEST_F(StudyServiceTest, OptimalTrialsAreTheFeasibleParetoFront) {
  ASSERT_TRUE(
      service_.CreateStudy(TwoObjectivesOneConstraint(v1::RANDOM)).ok());
  // {acc, latency, memory}: 1 and 2 trade off, 3 is dominated by 1, 4 would
  // dominate everything but breaks the memory constraint.
  const std::vector<std::array<double, 3>> results = {
      {0.9, 5, 4}, {0.8, 2, 8}, {0.85, 6, 1}, {0.99, 1, 11}};
  std::vector<int64_t> ids;
  for (const auto& [acc, latency, memory] : results) {
    v1::CreateTrialRequest request;
    request.set_study_name("mo");
    v1::Trial& t = *request.mutable_trial();
    t.set_state(v1::Trial::COMPLETED);
    for (const char* name : {"x", "y"}) {
      v1::ParameterValue& p = *t.add_parameters();
      p.set_name(name);
      p.set_double_value(acc / 2);
    }
    auto& metrics = *t.mutable_final_measurement()->mutable_metrics();
    metrics["acc"] = acc;
    metrics["latency"] = latency;
    auto missing = service_.CreateTrial(request);
    EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(missing.status().message()),
                HasSubstr("missing \"memory\""));
    metrics["memory"] = memory;
    auto created = service_.CreateTrial(request);
    ASSERT_TRUE(created.ok()) << created.status();
    EXPECT_EQ(created->feasible(), memory <= 10);
    ids.push_back(created->id());
  }
  v1::ListOptimalTrialsRequest best;
  best.set_study_name("mo");
  auto front = service_.ListOptimalTrials(best);
  ASSERT_TRUE(front.ok()) << front.status();
  std::set<int64_t> front_ids;
  for (const v1::Trial& t : front->trials()) front_ids.insert(t.id());
  EXPECT_EQ(front_ids, (std::set<int64_t>{ids[0], ids[1]}));

  // The engine models every objective and the constraint: it proposes.
  auto r = Suggest("mo", 2, "w");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->trials_size(), 2);
}

TEST_F(StudyServiceTest, ACompletedTrialNeedsEveryObjectiveAndConstraint) {
  ASSERT_TRUE(
      service_.CreateStudy(TwoObjectivesOneConstraint(v1::GP_BANDIT)).ok());
  auto r = Suggest("mo", 1, "w");
  ASSERT_TRUE(r.ok()) << r.status();
  v1::CompleteTrialRequest request;
  request.set_study_name("mo");
  request.set_trial_id(r->trials(0).id());
  request.set_lease_epoch(r->trials(0).lease_epoch());
  (*request.mutable_final_measurement()->mutable_metrics())["acc"] = 0.5;
  (*request.mutable_final_measurement()->mutable_metrics())["memory"] = 3;
  absl::Status s = service_.CompleteTrial(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("missing \"latency\""));
  (*request.mutable_final_measurement()->mutable_metrics())["latency"] = 7;
  auto done = service_.CompleteTrial(request);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), v1::Trial::COMPLETED);
  EXPECT_TRUE(done->feasible());
}

TEST_F(StudyServiceTest, MeasurementsAreIdempotentAndOrdered) {
  Create("s", 0, 0);
  ASSERT_TRUE(Suggest("s", 1, "w").ok());
  ASSERT_TRUE(Report("s", 1, 1, 0.9).ok());
  auto retry = Report("s", 1, 1, 0.9);
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(retry->measurements_size(), 1);
  EXPECT_EQ(Report("s", 1, 1, 0.8).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(Report("s", 1, 3, 0.7).ok());
  absl::Status back = Report("s", 1, 2, 0.6).status();
  EXPECT_EQ(back.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(back.message()), HasSubstr("measurement.step"));
  // A retry of an earlier step (its answer lost) is the stored one again.
  auto earlier = Report("s", 1, 1, 0.9);
  ASSERT_TRUE(earlier.ok()) << earlier.status();
  ASSERT_EQ(earlier->measurements_size(), 1);
  EXPECT_EQ(earlier->measurements(0).step(), 1);
  EXPECT_EQ(Report("s", 1, 1, 0.5).status().code(),
            absl::StatusCode::kInvalidArgument);
  // The answer holds only the measurement added; GetTrial has the curve.
  auto inf = Report("s", 1, 4, std::numeric_limits<double>::infinity());
  ASSERT_TRUE(inf.ok());
  ASSERT_EQ(inf->measurements_size(), 1);
  EXPECT_EQ(inf->measurements(0).step(), 4);
  EXPECT_EQ(inf->measurements(0).metrics().at("loss"),
            std::numeric_limits<double>::infinity());
  v1::GetTrialRequest get;
  get.set_study_name("s");
  get.set_trial_id(1);
  absl::StatusOr<v1::Trial> whole = service_.GetTrial(get);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->measurements_size(), 3);
  EXPECT_EQ(whole->measurements(2).metrics().at("loss"),
            std::numeric_limits<double>::infinity());
  EXPECT_EQ(Report("s", 1, 5, std::nan("")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StudyServiceTest, CompleteIsIdempotentAndFinal) {
  Create("s", 0, 0);
  ASSERT_TRUE(Suggest("s", 1, "w").ok());
  ASSERT_TRUE(Complete("s", 1, 0.5).ok());
  auto again = Complete("s", 1, 0.5);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->state(), v1::Trial::COMPLETED);
  EXPECT_EQ(Complete("s", 1, 0.4).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Report("s", 1, 9, 0.1).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(StudyServiceTest, CompleteUsesLastMeasurementOrMarksInfeasible) {
  Create("s", 0, 0);
  ASSERT_TRUE(Suggest("s", 2, "w").ok());
  ASSERT_TRUE(Report("s", 1, 1, 0.7).ok());
  v1::CompleteTrialRequest request;
  request.set_study_name("s");
  request.set_trial_id(1);
  request.set_lease_epoch(1);
  auto t = service_.CompleteTrial(request);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->final_measurement().metrics().at("loss"), 0.7);

  request.set_trial_id(2);
  EXPECT_THAT(std::string(service_.CompleteTrial(request).status().message()),
              HasSubstr("missing \"loss\""));
  request.set_lease_epoch(1);
  request.set_infeasible(true);
  request.set_infeasible_reason("out of memory");
  auto bad = service_.CompleteTrial(request);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->state(), v1::Trial::INFEASIBLE);
  EXPECT_EQ(bad->infeasible_reason(), "out of memory");
}

TEST_F(StudyServiceTest, StaleEpochIsRefused) {
  Create("s", 0, 0);
  ASSERT_TRUE(Suggest("s", 1, "w").ok());
  v1::AddMeasurementRequest request;
  request.set_study_name("s");
  request.set_trial_id(1);
  request.set_lease_epoch(7);
  request.mutable_measurement()->set_step(1);
  (*request.mutable_measurement()->mutable_metrics())["loss"] = 1;
  EXPECT_EQ(service_.AddMeasurement(request).status().code(),
            absl::StatusCode::kFailedPrecondition);
  request.set_lease_epoch(0);
  EXPECT_EQ(service_.AddMeasurement(request).status().code(),
            absl::StatusCode::kInvalidArgument);
  request.set_lease_epoch(1);
  EXPECT_TRUE(service_.AddMeasurement(request).ok());
}

class LeaseTest : public StudyServiceTest {
 protected:
  // A study with 10-s leases and one retry.
  void SetUp() override {
    v1::Study study = Create("s", 0, 0);
    study.mutable_spec()->set_lease_seconds(10);
    study.mutable_spec()->set_max_retries(1);
    v1::DeleteStudyRequest del;
    del.set_name("s");
    ASSERT_TRUE(service_.DeleteStudy(del).ok());
    v1::CreateStudyRequest create;
    *create.mutable_study() = study;
    ASSERT_TRUE(service_.CreateStudy(create).ok());
  }

  v1::Trial Get(int64_t id) {
    v1::GetTrialRequest get;
    get.set_study_name("s");
    get.set_trial_id(id);
    auto trial = service_.GetTrial(get);
    EXPECT_TRUE(trial.ok()) << trial.status();
    return *trial;
  }

  // A heartbeat of trial `id` of "s" under lease `epoch`.
  static v1::HeartbeatRequest BeatRequest(int64_t id, int64_t epoch) {
    v1::HeartbeatRequest beat;
    beat.set_study_name("s");
    beat.set_trial_id(id);
    beat.set_lease_epoch(epoch);
    return beat;
  }

  absl::StatusOr<v1::HeartbeatResponse> Beat(int64_t id, int64_t epoch,
                                             const std::string& checkpoint) {
    v1::HeartbeatRequest beat = BeatRequest(id, epoch);
    beat.set_checkpoint_uri(checkpoint);
    return service_.Heartbeat(beat);
  }
};

TEST_F(LeaseTest, ExpiredTrialIsRequeuedWithItsCheckpointThenFails) {
  ASSERT_TRUE(Suggest("s", 1, "w1").ok());
  ASSERT_TRUE(Report("s", 1, 1, 0.9).ok());
  ASSERT_TRUE(Beat(1, 1, "file:///ckpt/1").ok());
  now_ms_ += 10'001;
  ASSERT_TRUE(service_.ExpireLeases().ok());
  v1::Trial requeued = Get(1);
  EXPECT_EQ(requeued.state(), v1::Trial::REQUESTED);
  EXPECT_EQ(requeued.retry_count(), 1);
  EXPECT_EQ(requeued.checkpoint_uri(), "file:///ckpt/1");
  EXPECT_EQ(requeued.measurements_size(), 1);

  // The lost worker is fenced off; the next one resumes the same trial.
  EXPECT_EQ(Beat(1, 1, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto next = Suggest("s", 1, "w2");
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->trials_size(), 1);
  EXPECT_EQ(next->trials(0).id(), 1);
  EXPECT_EQ(next->trials(0).lease_epoch(), 2);
  EXPECT_EQ(next->trials(0).checkpoint_uri(), "file:///ckpt/1");
  v1::CompleteTrialRequest zombie;
  zombie.set_study_name("s");
  zombie.set_trial_id(1);
  zombie.set_lease_epoch(1);
  (*zombie.mutable_final_measurement()->mutable_metrics())["loss"] = 0.1;
  EXPECT_EQ(service_.CompleteTrial(zombie).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Get(1).state(), v1::Trial::ACTIVE);

  // Lost again: past max_retries it fails, out of the model.
  now_ms_ += 10'001;
  auto after = Suggest("s", 1, "w3");
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->trials_size(), 1);
  EXPECT_EQ(after->trials(0).id(), 2);
  v1::Trial failed = Get(1);
  EXPECT_EQ(failed.state(), v1::Trial::FAILED);
  EXPECT_THAT(failed.failure_reason(), HasSubstr("lease expired"));
  EXPECT_THAT(failed.failure_reason(), HasSubstr("2 times"));
}

TEST_F(LeaseTest, AHandedOverTrialWithoutCheckpointStartsAfresh) {
  ASSERT_TRUE(Suggest("s", 1, "w1").ok());
  EXPECT_EQ(Get(1).attempt(), 1);
  ASSERT_TRUE(Report("s", 1, 1, 0.9).ok());
  ASSERT_TRUE(Report("s", 1, 2, 0.8).ok());
  now_ms_ += 10'001;
  ASSERT_TRUE(service_.ExpireLeases().ok());

  auto next = Suggest("s", 1, "w2");
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->trials_size(), 1);
  const v1::Trial& handed = next->trials(0);
  EXPECT_EQ(handed.attempt(), 2);
  EXPECT_EQ(handed.measurements_size(), 0);
  ASSERT_EQ(handed.earlier_attempts_size(), 1);
  const v1::Attempt& first = handed.earlier_attempts(0);
  EXPECT_EQ(first.number(), 1);
  EXPECT_EQ(first.client_id(), "w1");
  EXPECT_EQ(first.end_reason(), "lease expired");
  ASSERT_EQ(first.measurements_size(), 2);
  EXPECT_EQ(first.measurements(1).step(), 2);

  // The new attempt reports step 1 again, with another value: its own curve.
  ASSERT_TRUE(Report("s", 1, 1, 0.7).ok());
  auto done = Complete("s", 1, 0.6);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), v1::Trial::COMPLETED);
  ASSERT_EQ(done->measurements_size(), 1);
  EXPECT_EQ(done->measurements(0).metrics().at("loss"), 0.7);
  EXPECT_EQ(done->earlier_attempts(0).measurements(0).metrics().at("loss"),
            0.9);
}

TEST_F(LeaseTest, AHandedOverTrialContinuesFromItsCheckpointsStep) {
  ASSERT_TRUE(Suggest("s", 1, "w1").ok());
  ASSERT_TRUE(Report("s", 1, 1, 0.9).ok());
  ASSERT_TRUE(Report("s", 1, 2, 0.8).ok());
  // The checkpoint holds the latest measured step unless told otherwise.
  ASSERT_TRUE(Beat(1, 1, "ckpt/1").ok());
  EXPECT_EQ(Get(1).checkpoint_step(), 2);
  ASSERT_TRUE(Report("s", 1, 3, 0.75).ok());
  v1::CompleteTrialRequest gone;
  gone.set_study_name("s");
  gone.set_trial_id(1);
  gone.set_lease_epoch(1);
  gone.set_worker_failed(true);
  gone.set_preempted(true);
  gone.set_failure_reason("interrupted");
  auto released = service_.CompleteTrial(gone);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(released->state(), v1::Trial::REQUESTED);
  EXPECT_EQ(released->attempt(), 2);
  ASSERT_EQ(released->measurements_size(), 2);
  EXPECT_EQ(released->measurements(1).step(), 2);
  ASSERT_EQ(released->earlier_attempts_size(), 1);
  ASSERT_EQ(released->earlier_attempts(0).measurements_size(), 1);
  EXPECT_EQ(released->earlier_attempts(0).measurements(0).step(), 3);

  auto next = Suggest("s", 1, "w2");
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->trials_size(), 1);
  EXPECT_EQ(next->trials(0).checkpoint_step(), 2);
  // Step 2 again with the same metrics is a retry; step 3 is this attempt's.
  ASSERT_TRUE(Report("s", 1, 2, 0.8).ok());
  EXPECT_TRUE(Report("s", 1, 3, 0.7).ok());

  // An explicit step, and the same path moving along.
  v1::HeartbeatRequest beat = BeatRequest(1, 2);
  beat.set_checkpoint_uri("ckpt/1");
  beat.set_checkpoint_step(3);
  ASSERT_TRUE(service_.Heartbeat(beat).ok());
  EXPECT_EQ(Get(1).checkpoint_step(), 3);
  beat.set_checkpoint_step(-1);
  EXPECT_EQ(service_.Heartbeat(beat).status().code(),
            absl::StatusCode::kInvalidArgument);
  beat.set_checkpoint_step(3);
  beat.clear_checkpoint_uri();
  EXPECT_EQ(service_.Heartbeat(beat).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(LeaseTest, DeviceSecondsCountEveryGrantOnce) {
  ASSERT_TRUE(Suggest("s", 1, "w1").ok());
  v1::HeartbeatRequest beat = BeatRequest(1, 1);
  for (double total : {5.0, 5.0, 3.0, 12.0}) {  // a repeat, a late one
    beat.set_device_seconds(total);
    ASSERT_TRUE(service_.Heartbeat(beat).ok());
  }
  EXPECT_DOUBLE_EQ(Get(1).device_seconds(), 12);
  // The worker vanishes: what its heartbeats reported stays counted.
  now_ms_ += 10'001;
  ASSERT_TRUE(service_.ExpireLeases().ok());
  v1::Trial lost = Get(1);
  EXPECT_DOUBLE_EQ(lost.device_seconds(), 12);
  ASSERT_EQ(lost.earlier_attempts_size(), 1);
  EXPECT_DOUBLE_EQ(lost.earlier_attempts(0).device_seconds(), 12);

  // The next grant counts from 0 again; its completion adds what its
  // heartbeats did not.
  ASSERT_TRUE(Suggest("s", 1, "w2").ok());
  beat.set_lease_epoch(2);
  beat.set_device_seconds(4);
  ASSERT_TRUE(service_.Heartbeat(beat).ok());
  v1::CompleteTrialRequest done;
  done.set_study_name("s");
  done.set_trial_id(1);
  done.set_lease_epoch(2);
  done.set_device_seconds(10);
  (*done.mutable_final_measurement()->mutable_metrics())["loss"] = 0.5;
  auto completed = service_.CompleteTrial(done);
  ASSERT_TRUE(completed.ok()) << completed.status();
  EXPECT_DOUBLE_EQ(completed->device_seconds(), 22);
  ASSERT_TRUE(service_.CompleteTrial(done).ok());  // a retry adds nothing
  v1::GetStudyRequest get;
  get.set_name("s");
  auto study = service_.GetStudy(get);
  ASSERT_TRUE(study.ok());
  EXPECT_DOUBLE_EQ(study->device_seconds(), 22);

  // Past 1,024 devices for a year a report is refused, so totals stay finite.
  for (double bad : {std::numeric_limits<double>::infinity(), 1e308, -1.0}) {
    beat.set_device_seconds(bad);
    auto refused = service_.Heartbeat(beat);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(refused.status().message(), HasSubstr("device_seconds"));
  }
  done.set_device_seconds(1e308);
  EXPECT_EQ(service_.CompleteTrial(done).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The program a worker runs may settle its trial itself (through the SDK);
// the worker's last total for that grant, sent after, still counts, once.
TEST_F(LeaseTest, AGrantsLastDeviceSecondsCountAfterItsTrialIsSettled) {
  ASSERT_TRUE(Suggest("s", 1, "w").ok());
  v1::HeartbeatRequest beat = BeatRequest(1, 1);
  beat.set_device_seconds(4);
  ASSERT_TRUE(service_.Heartbeat(beat).ok());
  ASSERT_TRUE(Complete("s", 1, 0.5).ok());  // the program, with no time
  beat.set_device_seconds(6);
  auto late = service_.Heartbeat(beat);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_TRUE(late->should_stop());
  EXPECT_EQ(late->state(), v1::Trial::COMPLETED);
  ASSERT_TRUE(service_.Heartbeat(beat).ok());  // sent twice
  EXPECT_DOUBLE_EQ(Get(1).device_seconds(), 6);
  v1::GetStudyRequest get;
  get.set_name("s");
  EXPECT_DOUBLE_EQ(service_.GetStudy(get)->device_seconds(), 6);
  // Another grant's worker is still refused.
  beat.set_lease_epoch(2);
  EXPECT_EQ(service_.Heartbeat(beat).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(LeaseTest, AFailedTrialIsFinalAndNeverRetried) {
  ASSERT_TRUE(Suggest("s", 1, "w").ok());
  v1::CompleteTrialRequest failed;
  failed.set_study_name("s");
  failed.set_trial_id(1);
  failed.set_lease_epoch(1);
  failed.set_failed(true);
  failed.set_failure_reason("ValueError: bad shape");
  failed.set_device_seconds(3);
  auto ended = service_.CompleteTrial(failed);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->state(), v1::Trial::FAILED);
  EXPECT_EQ(ended->failure_reason(), "ValueError: bad shape");
  EXPECT_DOUBLE_EQ(ended->device_seconds(), 3);
  EXPECT_EQ(ended->lease_expire_time_ms(), 0);
  ASSERT_TRUE(service_.CompleteTrial(failed).ok());  // a retry
  failed.set_failure_reason("another");
  EXPECT_EQ(service_.CompleteTrial(failed).status().code(),
            absl::StatusCode::kFailedPrecondition);
  failed.set_infeasible(true);
  EXPECT_EQ(service_.CompleteTrial(failed).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Never handed out again.
  auto next = Suggest("s", 1, "w2");
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->trials_size(), 1);
  EXPECT_EQ(next->trials(0).id(), 2);
}

TEST_F(LeaseTest, ReportsAndHeartbeatsRenewTheLease) {
  ASSERT_TRUE(Suggest("s", 1, "w").ok());
  now_ms_ += 8'000;
  auto beat = Beat(1, 1, "");
  ASSERT_TRUE(beat.ok());
  EXPECT_EQ(beat->lease_expire_time_ms(), now_ms_ + 10'000);
  EXPECT_FALSE(beat->should_stop());
  now_ms_ += 8'000;
  ASSERT_TRUE(Report("s", 1, 1, 0.5).ok());
  now_ms_ += 8'000;
  ASSERT_TRUE(service_.ExpireLeases().ok());
  EXPECT_EQ(Get(1).state(), v1::Trial::ACTIVE);
  now_ms_ += 3'000;
  ASSERT_TRUE(service_.ExpireLeases().ok());
  EXPECT_EQ(Get(1).state(), v1::Trial::REQUESTED);
}

TEST_F(LeaseTest, RestartExtendsEveryRunningLease) {
  ASSERT_TRUE(Suggest("s", 2, "w").ok());
  now_ms_ += 60'000;  // the server was down for a minute
  ASSERT_TRUE(service_.ExtendLeasesOnStart().ok());
  ASSERT_TRUE(service_.ExpireLeases().ok());
  EXPECT_EQ(Get(1).state(), v1::Trial::ACTIVE);
  EXPECT_EQ(Get(2).lease_expire_time_ms(), now_ms_ + 10'000);
  EXPECT_EQ(Get(2).lease_epoch(), 1);
}

TEST_F(LeaseTest, PreemptedWorkerGivesTheTrialBack) {
  ASSERT_TRUE(Suggest("s", 1, "w").ok());
  v1::CompleteTrialRequest gone;
  gone.set_study_name("s");
  gone.set_trial_id(1);
  gone.set_lease_epoch(1);
  gone.set_worker_failed(true);
  gone.set_failure_reason("preempted (SIGTERM from the spot scheduler)");
  auto released = service_.CompleteTrial(gone);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(released->state(), v1::Trial::REQUESTED);
  EXPECT_EQ(released->failure_reason(),
            "preempted (SIGTERM from the spot scheduler)");
  gone.set_infeasible(true);
  EXPECT_EQ(service_.CompleteTrial(gone).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StudyServiceTest, ListTrialsPagesAndFilters) {
  Create("s", 0, 0);
  ASSERT_TRUE(Suggest("s", 25, "").ok());
  for (int id = 1; id <= 25; id += 2) ASSERT_TRUE(Complete("s", id, id).ok());
  v1::ListTrialsRequest request;
  request.set_study_name("s");
  request.set_page_size(4);
  std::set<int64_t> seen;
  int pages = 0;
  do {
    auto page = service_.ListTrials(request);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const v1::Trial& t : page->trials()) {
      EXPECT_TRUE(seen.insert(t.id()).second);
    }
    request.set_page_token(page->next_page_token());
    ++pages;
  } while (!request.page_token().empty());
  EXPECT_EQ(seen.size(), 25u);
  EXPECT_EQ(pages, 7);

  request.clear_page_token();
  request.set_page_size(0);
  request.add_states(v1::Trial::COMPLETED);
  auto completed = service_.ListTrials(request);
  ASSERT_TRUE(completed.ok());
  EXPECT_EQ(completed->trials_size(), 13);

  request.set_page_token("not-a-token");
  EXPECT_EQ(service_.ListTrials(request).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StudyServiceTest, BestTrialFollowsTheGoal) {
  Create("s", 0, 0);
  ASSERT_TRUE(Suggest("s", 3, "").ok());
  ASSERT_TRUE(Complete("s", 1, 0.5).ok());
  ASSERT_TRUE(Complete("s", 2, 0.2).ok());
  ASSERT_TRUE(Complete("s", 3, 0.9).ok());
  v1::ListOptimalTrialsRequest request;
  request.set_study_name("s");
  auto best = service_.ListOptimalTrials(request);
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->trials_size(), 1);
  EXPECT_EQ(best->trials(0).id(), 2);  // loss is minimized
}

TEST_F(StudyServiceTest, UnknownStudyAndTrialAreNotFound) {
  EXPECT_EQ(Suggest("nope", 1, "").status().code(),
            absl::StatusCode::kNotFound);
  Create("s", 0, 0);
  EXPECT_EQ(Complete("s", 99, 1).status().code(), absl::StatusCode::kNotFound);
  v1::DeleteStudyRequest del;
  del.set_name("s");
  ASSERT_TRUE(service_.DeleteStudy(del).ok());
  EXPECT_EQ(service_.DeleteStudy(del).status().code(),
            absl::StatusCode::kNotFound);
}

// ----- Early stopping -----

class EarlyStoppingTest : public StudyServiceTest {
 protected:
  // A 1-parameter study minimizing "loss" under `rule` (text format of an
  // EarlyStoppingSpec), QUASI_RANDOM, one trial at a time.
  void CreateWithRule(const std::string& rule, int max_trials) {
    v1::CreateStudyRequest request;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
      study {
        name: "es"
        spec {
          parameters { name: "x" double_spec { min: 0 max: 1 } }
          metrics { name: "loss" goal: MINIMIZE }
          algorithm: QUASI_RANDOM
          max_parallel_trials: 1
        }
      })pb",
                                                              &request));
    request.mutable_study()->mutable_spec()->set_max_trials(max_trials);
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
        rule,
        request.mutable_study()->mutable_spec()->mutable_early_stopping()));
    auto study = service_.CreateStudy(request);
    ASSERT_TRUE(study.ok()) << study.status();
  }

  // The one trial the worker gets next (asserting there is one).
  v1::Trial Next() {
    auto response = Suggest("es", 1, "w");
    EXPECT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response.ok() ? response->trials_size() : 0, 1);
    return response.ok() && response->trials_size() == 1 ? response->trials(0)
                                                         : v1::Trial();
  }

  v1::Trial Get(int64_t id) {
    v1::GetTrialRequest get;
    get.set_study_name("es");
    get.set_trial_id(id);
    auto trial = service_.GetTrial(get);
    EXPECT_TRUE(trial.ok()) << trial.status();
    return trial.ok() ? *trial : v1::Trial();
  }

  // Runs the next trial to the end with loss `loss` at steps 1..steps.
  int64_t RunToEnd(int steps, double loss) {
    v1::Trial t = Next();
    for (int step = 1; step <= steps; ++step) {
      EXPECT_TRUE(Report("es", t.id(), step, loss).ok());
    }
    EXPECT_TRUE(Complete("es", t.id(), loss).ok());
    return t.id();
  }
};

TEST_F(EarlyStoppingTest, MedianStopsAPoorTrialWhichItsWorkerThenFinishes) {
  CreateWithRule("rule: MEDIAN min_trials: 3", 0);
  for (int i = 0; i < 3; ++i) RunToEnd(3, 1.0);

  v1::Trial good = Next();
  auto reported = Report("es", good.id(), 1, 0.5);
  ASSERT_TRUE(reported.ok()) << reported.status();
  EXPECT_EQ(reported->state(), v1::Trial::ACTIVE);
  ASSERT_TRUE(Complete("es", good.id(), 0.5).ok());

  v1::Trial poor = Next();
  reported = Report("es", poor.id(), 1, 5.0);
  ASSERT_TRUE(reported.ok()) << reported.status();
  EXPECT_EQ(reported->state(), v1::Trial::STOPPING);
  EXPECT_THAT(reported->stop_reason(), HasSubstr("median"));

  // The worker hears it from a heartbeat and from CheckEarlyStopping.
  v1::HeartbeatRequest beat;
  beat.set_study_name("es");
  beat.set_trial_id(poor.id());
  beat.set_lease_epoch(poor.lease_epoch());
  auto heard = service_.Heartbeat(beat);
  ASSERT_TRUE(heard.ok()) << heard.status();
  EXPECT_TRUE(heard->should_stop());
  v1::CheckEarlyStoppingRequest check;
  check.set_study_name("es");
  check.set_trial_id(poor.id());
  auto checked = service_.CheckEarlyStopping(check);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_TRUE(checked->should_stop());
  EXPECT_EQ(checked->state(), v1::Trial::STOPPING);
  EXPECT_THAT(checked->reason(), HasSubstr("median"));

  // Completing it makes it STOPPED; late reports are refused.
  auto done = Complete("es", poor.id(), 5.0);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), v1::Trial::STOPPED);
  auto late = Report("es", poor.id(), 2, 4.0);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(EarlyStoppingTest, StoppingTrialWhoseWorkerVanishesEndsStopped) {
  CreateWithRule("rule: MEDIAN min_trials: 1", 0);
  RunToEnd(2, 1.0);
  v1::Trial poor = Next();
  auto reported = Report("es", poor.id(), 1, 9.0);
  ASSERT_TRUE(reported.ok()) << reported.status();
  ASSERT_EQ(reported->state(), v1::Trial::STOPPING);
  now_ms_ += 61'000;  // past the lease
  ASSERT_TRUE(service_.ExpireLeases().ok());
  v1::Trial after = Get(poor.id());
  EXPECT_EQ(after.state(), v1::Trial::STOPPED);
  EXPECT_EQ(after.final_measurement().metrics().at("loss"), 9.0);
}

TEST_F(EarlyStoppingTest, AshaPausesAtRungsAndPromotesBeforeNewTrials) {
  CreateWithRule(
      "rule: ASHA min_resource: 1 max_resource: 9 reduction_factor: 3 "
      "pause_at_rungs: true",
      3);
  // Three trials reach rung 1; each pauses there (its checkpoint kept).
  const double losses[] = {0.5, 0.2, 0.9};
  for (double loss : losses) {
    v1::Trial t = Next();
    v1::HeartbeatRequest beat;
    beat.set_study_name("es");
    beat.set_trial_id(t.id());
    beat.set_lease_epoch(t.lease_epoch());
    beat.set_checkpoint_uri(absl::StrCat("ckpt-", t.id()));
    ASSERT_TRUE(service_.Heartbeat(beat).ok());
    auto reported = Report("es", t.id(), 1, loss);
    ASSERT_TRUE(reported.ok()) << reported.status();
    EXPECT_EQ(reported->state(), v1::Trial::PAUSED) << "trial " << t.id();
    // The worker wrapping up: its heartbeat says stop, its completion
    // leaves the pause alone.
    auto heard = service_.Heartbeat(beat);
    ASSERT_TRUE(heard.ok()) << heard.status();
    EXPECT_TRUE(heard->should_stop());
    EXPECT_EQ(heard->state(), v1::Trial::PAUSED);
    v1::CompleteTrialRequest finish;
    finish.set_study_name("es");
    finish.set_trial_id(t.id());
    finish.set_lease_epoch(t.lease_epoch());
    finish.set_device_seconds(7);
    (*finish.mutable_final_measurement()->mutable_metrics())["loss"] = loss;
    auto finished = service_.CompleteTrial(finish);
    ASSERT_TRUE(finished.ok()) << finished.status();
    EXPECT_EQ(finished->state(), v1::Trial::PAUSED);
    // The segment that ran up to the pause is counted.
    EXPECT_DOUBLE_EQ(finished->device_seconds(), 7);
  }

  // The best of rung 1 (trial 2) is promoted: same id, a new epoch, its
  // checkpoint.
  v1::Trial promoted = Next();
  EXPECT_EQ(promoted.id(), 2);
  EXPECT_EQ(promoted.state(), v1::Trial::ACTIVE);
  EXPECT_EQ(promoted.lease_epoch(), 2);
  EXPECT_EQ(promoted.checkpoint_uri(), "ckpt-2");
  auto reported = Report("es", 2, 2, 0.15);
  ASSERT_TRUE(reported.ok()) << reported.status();
  EXPECT_EQ(reported->state(), v1::Trial::ACTIVE);
  reported = Report("es", 2, 3, 0.1);
  ASSERT_TRUE(reported.ok()) << reported.status();
  EXPECT_EQ(reported->state(), v1::Trial::PAUSED);  // rung 3

  // The budget is spent: the best of each rung still runs to the end.
  promoted = Next();
  EXPECT_EQ(promoted.id(), 2);
  for (int step = 4; step <= 9; ++step) {
    reported = Report("es", 2, step, 0.1 - 0.01 * step);
    ASSERT_TRUE(reported.ok()) << reported.status();
    EXPECT_EQ(reported->state(), v1::Trial::ACTIVE) << "step " << step;
  }
  ASSERT_TRUE(Complete("es", 2, 0.01).ok());

  // Then the rest are stopped and the study is done.
  auto last = Suggest("es", 1, "w");
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->trials_size(), 0);
  EXPECT_EQ(last->study_state(), v1::Study::COMPLETED);
  for (int64_t id : {1, 3}) {
    v1::Trial t = Get(id);
    EXPECT_EQ(t.state(), v1::Trial::STOPPED) << "trial " << id;
    EXPECT_THAT(t.stop_reason(), HasSubstr("not promoted"));
  }
  EXPECT_EQ(Get(2).state(), v1::Trial::COMPLETED);
}

TEST_F(EarlyStoppingTest, StopTrialByHand) {
  CreateWithRule("", 0);
  v1::Trial running = Next();
  v1::CreateTrialRequest queue;
  queue.set_study_name("es");
  auto* x = queue.mutable_trial()->add_parameters();
  x->set_name("x");
  x->set_double_value(0.5);
  auto queued = service_.CreateTrial(queue);
  ASSERT_TRUE(queued.ok()) << queued.status();

  v1::StopTrialRequest stop;
  stop.set_study_name("es");
  stop.set_trial_id(running.id());
  auto stopped = service_.StopTrial(stop);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->state(), v1::Trial::STOPPING);
  EXPECT_EQ(stopped->stop_reason(), "stopped by request");
  stopped = service_.StopTrial(stop);  // a retry
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->state(), v1::Trial::STOPPING);

  stop.set_trial_id(queued->id());
  stop.set_reason("not needed");
  stopped = service_.StopTrial(stop);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->state(), v1::Trial::STOPPED);
  EXPECT_EQ(stopped->stop_reason(), "not needed");

  ASSERT_TRUE(Complete("es", running.id(), 1.0).ok());
  stop.set_trial_id(RunToEnd(1, 1.0));
  EXPECT_EQ(service_.StopTrial(stop).status().code(),
            absl::StatusCode::kFailedPrecondition);
  stop.set_trial_id(99);
  EXPECT_EQ(service_.StopTrial(stop).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(EarlyStoppingTest, BadRulesAreRefusedNamingTheField) {
  struct Case {
    std::string rule;
    std::string field;
  };
  const Case cases[] = {
      {"rule: ASHA", "study.spec.early_stopping.max_resource"},
      {"rule: ASHA max_resource: 9 reduction_factor: 1.5",
       "early_stopping.reduction_factor"},
      {"rule: MEDIAN pause_at_rungs: true",
       "study.spec.early_stopping.pause_at_rungs"},
      {"rule: PERCENTILE percentile: 150", "early_stopping.percentile"},
  };
  for (const Case& c : cases) {
    v1::CreateStudyRequest request;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
      study {
        name: "bad"
        spec {
          parameters { name: "x" double_spec { min: 0 max: 1 } }
          metrics { name: "loss" goal: MINIMIZE }
        }
      })pb",
                                                              &request));
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
        c.rule,
        request.mutable_study()->mutable_spec()->mutable_early_stopping()));
    absl::Status s = service_.CreateStudy(request).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.rule;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.field)) << c.rule;
  }
  // ASHA owns the epochs.
  v1::CreateStudyRequest request;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    study {
      name: "bad"
      spec {
        parameters { name: "epochs" integer_spec { min: 1 max: 9 } }
        metrics { name: "loss" goal: MINIMIZE }
        early_stopping { rule: ASHA max_resource: 9 }
      }
    })pb",
                                                            &request));
  absl::Status s = service_.CreateStudy(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"epochs\""));
}

// ----- Cost -----

TEST_F(StudyServiceTest, DeviceHoursAreCostedAndCapTheStudy) {
  v1::CreateStudyRequest request;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    study {
      name: "spot"
      spec {
        parameters { name: "x" double_spec { min: 0 max: 1 } }
        metrics { name: "loss" goal: MINIMIZE }
        algorithm: QUASI_RANDOM
        price_per_device_hour: 2.5
        max_device_hours: 1
      }
    })pb",
                                                            &request));
  ASSERT_TRUE(service_.CreateStudy(request).ok());
  auto complete = [&](int64_t id, double device_seconds, bool worker_failed) {
    v1::CompleteTrialRequest done;
    done.set_study_name("spot");
    done.set_trial_id(id);
    done.set_lease_epoch(Epoch("spot", id));
    done.set_device_seconds(device_seconds);
    if (worker_failed) {
      done.set_worker_failed(true);
    } else {
      (*done.mutable_final_measurement()->mutable_metrics())["loss"] = 1;
    }
    return service_.CompleteTrial(done);
  };

  auto first = Suggest("spot", 2, "w");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->trials_size(), 2);
  // A preempted attempt's device time counts too.
  ASSERT_TRUE(complete(1, 1800, /*worker_failed=*/true).ok());
  auto done = complete(2, 1200, false);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_DOUBLE_EQ(done->device_seconds(), 1200);
  EXPECT_DOUBLE_EQ(done->cost(), 2.5 / 3);
  v1::GetStudyRequest get;
  get.set_name("spot");
  auto study = service_.GetStudy(get);
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_DOUBLE_EQ(study->device_seconds(), 3000);
  EXPECT_DOUBLE_EQ(study->cost(), 2.5 * 3000 / 3600);
  // A retry of the completion is not billed twice.
  ASSERT_TRUE(complete(2, 1200, false).ok());

  // Trial 1 again (from the queue), then the hour is spent: no new trials,
  // and the study completes once nothing runs.
  auto again = Suggest("spot", 1, "w");
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->trials_size(), 1);
  EXPECT_EQ(again->trials(0).id(), 1);
  auto billed = complete(1, 900, false);
  ASSERT_TRUE(billed.ok()) << billed.status();
  EXPECT_DOUBLE_EQ(billed->device_seconds(), 2700);
  auto last = Suggest("spot", 1, "w");
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->trials_size(), 0);
  EXPECT_EQ(last->study_state(), v1::Study::COMPLETED);

  EXPECT_EQ(complete(1, -1, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  request.mutable_study()->set_name("bad-price");
  request.mutable_study()->mutable_spec()->set_price_per_device_hour(-1);
  absl::Status s = service_.CreateStudy(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("price_per_device_hour"));
}

TEST_F(StudyServiceTest, ConcurrentWorkersLoseNoReportAndNoCost) {
  // Reports and completions on different trials run side by side (only the
  // trial's own lock is exclusive); the study's cost still adds up exactly.
  Create("many", 32, 0, v1::RANDOM);
  constexpr int kWorkers = 8;
  std::vector<int> failures(kWorkers, 0);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      const std::string client = "w" + std::to_string(w);
      for (int round = 0; round < 4; ++round) {
        auto got = Suggest("many", 1, client);
        if (!got.ok() || got->trials_size() != 1) {
          ++failures[w];
          return;
        }
        const int64_t id = got->trials(0).id();
        for (int step = 1; step <= 3; ++step) {
          if (!Report("many", id, step, 1.0 / step).ok()) ++failures[w];
        }
        v1::CompleteTrialRequest done;
        done.set_study_name("many");
        done.set_trial_id(id);
        done.set_lease_epoch(got->trials(0).lease_epoch());
        done.set_device_seconds(10);
        if (!service_.CompleteTrial(done).ok()) ++failures[w];
      }
    });
  }
  for (std::thread& t : workers) t.join();
  EXPECT_THAT(failures, Each(0));

  v1::GetStudyRequest get;
  get.set_name("many");
  auto study = service_.GetStudy(get);
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_DOUBLE_EQ(study->device_seconds(), 32 * 10);
  EXPECT_EQ(study->trial_counts().at("COMPLETED"), 32);
  v1::ListTrialsRequest list;
  list.set_study_name("many");
  auto trials = service_.ListTrials(list);
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->trials_size(), 32);
  for (const v1::Trial& t : trials->trials()) {
    EXPECT_EQ(t.measurements_size(), 3) << t.id();
    EXPECT_DOUBLE_EQ(t.final_measurement().metrics().at("loss"), 1.0 / 3)
        << t.id();
  }
}

// ----- WatchTrials -----

// The review's case: a watch stream held a batch of up to 500 trials of
// any size for as long as its reader did not read (64 slow streams on 300
// trials of ~240 KB took the server to 4.6 GB). A batch now holds about
// 1 MiB of trials (always at least one), says when it was cut short, and
// the next read resumes after the last change delivered.
TEST_F(StudyServiceTest, AWatchBatchIsBoundedInBytesAndResumes) {
  Create("big", 0, 0);
  constexpr int kTrials = 12;
  for (int i = 0; i < kTrials; ++i) {
    v1::CreateTrialRequest request;
    request.set_study_name("big");
    google::protobuf::TextFormat::ParseFromString(R"pb(
      parameters { name: "x" double_value: 0.5 }
      parameters { name: "n" int_value: 3 }
      parameters { name: "c" string_value: "a" }
    )pb",
                                                  request.mutable_trial());
    for (int a = 0; a < 60; ++a) {
      (*request.mutable_trial()->mutable_attributes())[absl::StrCat("a", a)] =
          std::string(4000, 'x');
    }
    ASSERT_TRUE(service_.CreateTrial(request).ok());
  }
  v1::WatchTrialsRequest request;
  request.set_study_name("big");
  absl::StatusOr<StudyService::Watch> watch = service_.OpenWatch(request, {});
  ASSERT_TRUE(watch.ok()) << watch.status();
  std::vector<int64_t> seen;
  int batches = 0;
  while (true) {
    absl::StatusOr<StudyService::WatchBatch> batch =
        service_.ReadWatch(*watch, {});
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (batch->changes.empty()) break;
    ++batches;
    size_t bytes = 0;
    for (const storage::TrialChange& change : batch->changes) {
      bytes += change.trial.ByteSizeLong();
      seen.push_back(change.trial.id());
      watch->after = change.sequence;
    }
    EXPECT_EQ(bytes, batch->bytes);
    EXPECT_LE(batch->bytes, StudyService::kWatchBatchBytes);
    EXPECT_EQ(batch->full, seen.size() < size_t{kTrials});
  }
  EXPECT_GT(batches, 2);
  ASSERT_EQ(seen.size(), size_t{kTrials});
  for (int i = 0; i < kTrials; ++i) EXPECT_EQ(seen[i], i + 1);
}

TEST_F(StudyServiceTest, WatchTrialsStreamsChangesAndResumesWithoutGaps) {
  Create("w", 0, 0);
  auto first = Suggest("w", 2, "a");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(Report("w", 1, 1, 0.5).ok());

  // Reads what is there, then stops (emit returns false at `limit`).
  auto watch = [&](int64_t after, size_t limit) {
    std::vector<v1::TrialEvent> events;
    v1::WatchTrialsRequest request;
    request.set_study_name("w");
    request.set_after_sequence(after);
    absl::Status s = service_.WatchTrials(
        request,
        [&](const v1::TrialEvent& e) {
          events.push_back(e);
          return events.size() < limit;
        },
        [&] { return events.size() >= limit; });
    EXPECT_TRUE(s.ok()) << s;
    return events;
  };
  std::vector<v1::TrialEvent> events = watch(0, 2);
  ASSERT_EQ(events.size(), 2u);
  // Trial 2 as created, then trial 1 as measured (its latest change).
  EXPECT_EQ(events[0].trial().id(), 2);
  EXPECT_EQ(events[1].trial().id(), 1);
  EXPECT_EQ(events[1].trial().measurements_size(), 1);
  EXPECT_LT(events[0].sequence(), events[1].sequence());

  // Resuming after the last sequence seen gets only what changed since.
  const int64_t seen = events[1].sequence();
  ASSERT_TRUE(Complete("w", 2, 0.25).ok());
  events = watch(seen, 1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].trial().id(), 2);
  EXPECT_EQ(events[0].trial().state(), v1::Trial::COMPLETED);
  EXPECT_GT(events[0].sequence(), seen);

  // A watcher waiting for a change is woken by it.
  std::vector<v1::TrialEvent> live;
  std::thread watcher([&] { live = watch(events[0].sequence(), 1); });
  ASSERT_TRUE(Complete("w", 1, 0.75).ok());
  watcher.join();
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].trial().id(), 1);
  EXPECT_EQ(live[0].trial().state(), v1::Trial::COMPLETED);

  v1::WatchTrialsRequest missing;
  missing.set_study_name("nope");
  EXPECT_EQ(service_
                .WatchTrials(
                    missing, [](const v1::TrialEvent&) { return true; },
                    [] { return false; })
                .code(),
            absl::StatusCode::kNotFound);
  v1::WatchTrialsRequest negative;
  negative.set_study_name("w");
  negative.set_after_sequence(-1);
  EXPECT_EQ(service_
                .WatchTrials(
                    negative, [](const v1::TrialEvent&) { return true; },
                    [] { return false; })
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hypertune::service
