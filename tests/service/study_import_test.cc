// Importing studies and warm-start results (study_import.h) on StudyService
// over the in-memory store.
#include "service/rpc/study_import.h"

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "service/rpc/study_service.h"
#include "storage/memory_store.h"

namespace hypertune::service {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

class StudyImportTest : public ::testing::Test {
 protected:
  StudyImportTest() : service_(&store_, Options()) {}

  ServiceOptions Options() {
    ServiceOptions options;
    options.now_ms = [this] { return now_ms_; };
    return options;
  }

  v1::Study Create(const std::string& name, int max_trials, double x_min = -1) {
    v1::CreateStudyRequest request;
    google::protobuf::TextFormat::ParseFromString(R"pb(
      study {
        spec {
          parameters { name: "x" double_spec { min: -1 max: 1 } }
          parameters { name: "c" categorical_spec { values: [ "a", "b" ] } }
          metrics { name: "loss" goal: MINIMIZE }
          algorithm: RANDOM
        }
      })pb",
                                                  &request);
    request.mutable_study()->set_name(name);
    request.mutable_study()->mutable_spec()->set_max_trials(max_trials);
    request.mutable_study()
        ->mutable_spec()
        ->mutable_parameters(0)
        ->mutable_double_spec()
        ->set_min(x_min);
    auto study = service_.CreateStudy(request);
    EXPECT_TRUE(study.ok()) << study.status();
    return *study;
  }

  std::vector<v1::Trial> Suggest(const std::string& study, int count) {
    v1::SuggestTrialsRequest request;
    request.set_study_name(study);
    request.set_count(count);
    request.set_client_id("w");
    auto response = service_.SuggestTrials(request);
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return {};
    last_study_state_ = response->study_state();
    return {response->trials().begin(), response->trials().end()};
  }

  void Complete(const v1::Trial& trial, double loss) {
    v1::CompleteTrialRequest request;
    request.set_study_name(trial.study_name());
    request.set_trial_id(trial.id());
    request.set_lease_epoch(trial.lease_epoch());
    request.set_device_seconds(3.5);
    (*request.mutable_final_measurement()->mutable_metrics())["loss"] = loss;
    ASSERT_TRUE(service_.CompleteTrial(request).ok());
  }

  std::vector<v1::Trial> Trials(const std::string& study) {
    v1::ListTrialsRequest request;
    request.set_study_name(study);
    request.set_page_size(1000);
    auto response = service_.ListTrials(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return {response->trials().begin(), response->trials().end()};
  }

  static v1::Trial Result(double x, const std::string& c, double loss) {
    v1::Trial trial;
    v1::ParameterValue* p = trial.add_parameters();
    p->set_name("x");
    p->set_double_value(x);
    p = trial.add_parameters();
    p->set_name("c");
    p->set_string_value(c);
    (*trial.mutable_final_measurement()->mutable_metrics())["loss"] = loss;
    return trial;
  }

  int64_t now_ms_ = 1'700'000'000'000;
  storage::MemoryStore store_;
  StudyService service_;
  v1::Study::State last_study_state_ = v1::Study::STATE_UNSPECIFIED;
};

// Export (GetStudy + ListTrials) then import under a new name: every trial
// as it was, but the running one queued again without its lease.
TEST_F(StudyImportTest, ImportKeepsStudyAndTrialsExactly) {
  Create("orig", 0);
  std::vector<v1::Trial> granted = Suggest("orig", 3);
  ASSERT_EQ(granted.size(), 3u);
  Complete(granted[0], 0.25);
  v1::AddMeasurementRequest report;
  report.set_study_name("orig");
  report.set_trial_id(granted[1].id());
  report.set_lease_epoch(granted[1].lease_epoch());
  report.mutable_measurement()->set_step(2);
  (*report.mutable_measurement()->mutable_metrics())["loss"] = 0.5;
  ASSERT_TRUE(service_.AddMeasurement(report).ok());
  v1::CompleteTrialRequest infeasible;
  infeasible.set_study_name("orig");
  infeasible.set_trial_id(granted[2].id());
  infeasible.set_lease_epoch(granted[2].lease_epoch());
  infeasible.set_infeasible(true);
  infeasible.set_infeasible_reason("out of memory");
  ASSERT_TRUE(service_.CompleteTrial(infeasible).ok());

  v1::GetStudyRequest get;
  get.set_name("orig");
  v1::Study study = *service_.GetStudy(get);
  std::vector<v1::Trial> trials = Trials("orig");
  study.set_name("copy");
  now_ms_ += 60'000;
  auto imported = service_.ImportStudy(study, trials);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->create_time_ms(), study.create_time_ms());
  EXPECT_EQ(imported->device_seconds(), 3.5);
  EXPECT_EQ(imported->trial_counts().at("REQUESTED"), 1);

  std::vector<v1::Trial> copied = Trials("copy");
  ASSERT_EQ(copied.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    v1::Trial expected = trials[i];
    expected.set_study_name("copy");
    if (expected.state() == v1::Trial::ACTIVE) {
      expected.set_state(v1::Trial::REQUESTED);
      expected.set_lease_expire_time_ms(0);
    }
    EXPECT_TRUE(MessageDifferencer::Equals(copied[i], expected))
        << copied[i].DebugString() << "\nvs\n"
        << expected.DebugString();
  }
  // The queued one goes to the next worker under a new epoch.
  std::vector<v1::Trial> again = Suggest("copy", 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].id(), trials[1].id());
  EXPECT_EQ(again[0].lease_epoch(), trials[1].lease_epoch() + 1);
}

// What a server killed mid-import leaves: the study stored IMPORTING with
// part of its trials. The next start removes it, and only it; the name is
// free for the import's retry.
TEST_F(StudyImportTest, AnImportCutShortIsRemovedAtStart) {
  Create("kept", 0);
  v1::GetStudyRequest get;
  get.set_name("kept");
  v1::Study cut = *service_.GetStudy(get);
  cut.set_name("cut");
  cut.set_state(v1::Study::IMPORTING);
  cut.clear_trial_counts();
  ASSERT_TRUE(store_.CreateStudy(cut).ok());
  v1::Trial half;
  half.set_state(v1::Trial::REQUESTED);
  ASSERT_TRUE(store_.CreateTrials("cut", {half}).ok());

  ASSERT_TRUE(service_.RecoverOnStart().ok());
  EXPECT_TRUE(absl::IsNotFound(store_.GetStudy("cut").status()));
  EXPECT_EQ(store_.GetStudy("kept")->state(), v1::Study::ACTIVE);
  cut.set_state(v1::Study::ACTIVE);
  EXPECT_TRUE(service_.ImportStudy(cut, {}).ok());
}

// A whole import is never seen IMPORTING once it answers: it has the state
// it was exported in.
TEST_F(StudyImportTest, AnImportTakesItsExportedStateWhenDone) {
  Create("orig", 0);
  v1::GetStudyRequest get;
  get.set_name("orig");
  v1::Study study = *service_.GetStudy(get);
  study.set_name("copy");
  study.set_state(v1::Study::PAUSED);
  auto imported = service_.ImportStudy(study, {});
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(imported->state(), v1::Study::PAUSED);
  EXPECT_EQ(store_.GetStudy("copy")->state(), v1::Study::PAUSED);
  // IMPORTING is the server's own: an export naming it is refused.
  study.set_name("copy2");
  study.set_state(v1::Study::IMPORTING);
  EXPECT_TRUE(
      absl::IsInvalidArgument(service_.ImportStudy(study, {}).status()));
}

TEST_F(StudyImportTest, ImportRefusesATakenName) {
  v1::Study study = Create("taken", 0);
  absl::Status s = service_.ImportStudy(study, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
}

TEST_F(StudyImportTest, ImportRefusesBadTrialsNamingThem) {
  v1::Study study = Create("src", 0);
  study.set_name("dst");
  v1::Trial first = Result(0.5, "a", 1);
  first.set_id(1);
  first.set_state(v1::Trial::COMPLETED);
  v1::Trial gap = first;
  gap.set_id(3);
  absl::Status s = service_.ImportStudy(study, {first, gap}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("trials[1].id"));

  v1::Trial outside = Result(7, "a", 1);
  outside.set_id(2);
  outside.set_state(v1::Trial::COMPLETED);
  s = service_.ImportStudy(study, {first, outside}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("trials[1].parameters"));

  v1::Trial no_objective = first;
  no_objective.set_id(2);
  no_objective.mutable_final_measurement()->clear_metrics();
  s = service_.ImportStudy(study, {first, no_objective}).status();
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("trials[1].final_measurement.metrics"));
  // Nothing was created by the refused imports.
  v1::GetStudyRequest get;
  get.set_name("dst");
  EXPECT_EQ(service_.GetStudy(get).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(StudyImportTest,
       StoppingTrialsAreStoppedAndFailedOnesMayLackParameters) {
  v1::Study study = Create("src", 0);
  study.set_name("dst");
  v1::Trial stopping = Result(0.5, "a", 1);
  stopping.clear_final_measurement();
  stopping.set_id(1);
  stopping.set_state(v1::Trial::STOPPING);
  v1::Measurement& m = *stopping.add_measurements();
  m.set_step(4);
  (*m.mutable_metrics())["loss"] = 0.75;
  v1::Trial failed;
  failed.set_id(2);
  failed.set_state(v1::Trial::FAILED);
  v1::ParameterValue* p = failed.add_parameters();
  p->set_name("x");
  p->set_double_value(0.1);
  ASSERT_TRUE(service_.ImportStudy(study, {stopping, failed}).ok());
  std::vector<v1::Trial> trials = Trials("dst");
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].state(), v1::Trial::STOPPED);
  EXPECT_EQ(trials[0].final_measurement().metrics().at("loss"), 0.75);
  EXPECT_EQ(trials[0].end_time_ms(), now_ms_);
  EXPECT_EQ(trials[1].state(), v1::Trial::FAILED);
  EXPECT_EQ(trials[1].parameters_size(), 1);
}

// Warm-start results feed the history but leave max_trials to new trials.
TEST_F(StudyImportTest, WarmStartTrialsDoNotCountAgainstMaxTrials) {
  Create("warm", 2);
  v1::ImportTrialsRequest request;
  request.set_study_name("warm");
  *request.add_trials() = Result(0.1, "a", 3);
  *request.add_trials() = Result(-0.5, "b", 2);
  *request.add_trials() = Result(0.9, "a", 1);
  auto response = service_.ImportTrials(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->imported(), 3);
  EXPECT_EQ(response->first_trial_id(), 1);
  for (const v1::Trial& t : Trials("warm")) {
    EXPECT_EQ(t.state(), v1::Trial::COMPLETED);
    EXPECT_TRUE(t.warm_start());
  }
  std::vector<v1::Trial> fresh = Suggest("warm", 5);
  ASSERT_EQ(fresh.size(), 2u);
  EXPECT_EQ(fresh[0].id(), 4);
  for (const v1::Trial& t : fresh) Complete(t, 0.5);
  EXPECT_TRUE(Suggest("warm", 1).empty());
  EXPECT_EQ(last_study_state_, v1::Study::COMPLETED);
}

TEST_F(StudyImportTest, WarmStartCountSurvivesARestartOfTheService) {
  Create("warm", 1);
  v1::ImportTrialsRequest request;
  request.set_study_name("warm");
  *request.add_trials() = Result(0.1, "a", 3);
  ASSERT_TRUE(service_.ImportTrials(request).ok());
  StudyService restarted(&store_, Options());
  v1::SuggestTrialsRequest suggest;
  suggest.set_study_name("warm");
  suggest.set_count(3);
  suggest.set_client_id("w");
  auto response = restarted.SuggestTrials(suggest);
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->trials_size(), 1);
}

TEST_F(StudyImportTest, ImportTrialsRefusesABadResultNamingIt) {
  Create("warm", 0);
  v1::ImportTrialsRequest request;
  request.set_study_name("warm");
  *request.add_trials() = Result(0.1, "a", 3);
  *request.add_trials() = Result(0.1, "zzz", 3);
  absl::Status s = service_.ImportTrials(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("trials[1].parameters"));
  EXPECT_TRUE(Trials("warm").empty());
}

// study create --warm-start-from: the COMPLETED trials that fit are copied.
TEST_F(StudyImportTest, WarmStartFromStudiesCopiesTrialsThatFit) {
  Create("old", 0);
  std::vector<v1::Trial> granted = Suggest("old", 8);
  ASSERT_EQ(granted.size(), 8u);
  int inside = 0;
  for (size_t i = 0; i + 1 < granted.size(); ++i) {
    Complete(granted[i], static_cast<double>(i));
    if (granted[i].parameters(0).double_value() >= 0) ++inside;
  }
  Create("new", 0, /*x_min=*/0);
  v1::ImportTrialsRequest request;
  request.set_study_name("new");
  request.add_from_studies("old");
  auto response = service_.ImportTrials(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->imported(), inside);
  EXPECT_EQ(response->skipped(), 7 - inside);
  for (const v1::Trial& t : Trials("new")) {
    EXPECT_TRUE(t.warm_start());
    EXPECT_GE(t.parameters(0).double_value(), 0);
  }
  request.set_from_studies(0, "missing");
  EXPECT_EQ(service_.ImportTrials(request).status().code(),
            absl::StatusCode::kNotFound);
  request.set_from_studies(0, "new");
  EXPECT_EQ(service_.ImportTrials(request).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReadImportStream, TheFirstMessageCarriesTheStudy) {
  std::vector<v1::ImportStudyRequest> messages(3);
  messages[0].mutable_study()->set_name("s");
  messages[1].add_trials()->set_id(1);
  messages[2].add_trials()->set_id(2);
  auto feed = [&messages](size_t skip) {
    size_t next = skip;
    return ReadImportStream([&](v1::ImportStudyRequest& m) {
      if (next == messages.size()) return false;
      m = messages[next++];
      return true;
    });
  };
  auto read = feed(0);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->study.name(), "s");
  EXPECT_EQ(read->trials.size(), 2u);
  EXPECT_EQ(feed(1).status().code(), absl::StatusCode::kInvalidArgument);
  messages[2].mutable_study()->set_name("t");
  EXPECT_EQ(feed(0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hypertune::service
