// Every write a worker makes to its trial goes through one fence
// (StudyService::MutateTrial): after its lease ran out and the trial went
// to another worker, none of the lost worker's calls changes the trial.
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "service/rpc/study_service.h"
#include "storage/memory_store.h"

namespace hypertune::service {
namespace {

using ::testing::HasSubstr;

class TrialFencingTest : public ::testing::Test {
 protected:
  TrialFencingTest() : service_(&store_, Options()) {}

  ServiceOptions Options() {
    ServiceOptions options;
    options.now_ms = [this] { return now_ms_; };
    return options;
  }

  void SetUp() override {
    v1::CreateStudyRequest create;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
      study {
        name: "s"
        spec {
          parameters { name: "x" double_spec { min: 0 max: 1 } }
          metrics { name: "loss" goal: MINIMIZE }
          lease_seconds: 10
          max_retries: 3
        }
      })pb",
                                                              &create));
    ASSERT_TRUE(service_.CreateStudy(create).ok());
    // Worker 1 gets trial 1 under epoch 1 and loses it; worker 2 gets it
    // under epoch 2.
    ASSERT_EQ(Suggest("w1").lease_epoch(), 1);
    now_ms_ += 10'001;
    ASSERT_TRUE(service_.ExpireLeases().ok());
    ASSERT_EQ(Suggest("w2").lease_epoch(), 2);
  }

  v1::Trial Suggest(const std::string& client) {
    v1::SuggestTrialsRequest request;
    request.set_study_name("s");
    request.set_count(1);
    request.set_client_id(client);
    absl::StatusOr<v1::SuggestTrialsResponse> got =
        service_.SuggestTrials(request);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() && got->trials_size() == 1 ? got->trials(0) : v1::Trial();
  }

  v1::Trial Stored() {
    v1::GetTrialRequest get;
    get.set_study_name("s");
    get.set_trial_id(1);
    absl::StatusOr<v1::Trial> trial = service_.GetTrial(get);
    EXPECT_TRUE(trial.ok()) << trial.status();
    return trial.ok() ? *trial : v1::Trial();
  }

  int64_t now_ms_ = 1'700'000'000'000;
  storage::MemoryStore store_;
  StudyService service_;
};

TEST_F(TrialFencingTest, NoCallOfTheLostWorkerChangesTheTrial) {
  const v1::Trial before = Stored();
  auto complete = [](auto&& set) {
    v1::CompleteTrialRequest r;
    r.set_study_name("s");
    r.set_trial_id(1);
    r.set_lease_epoch(1);
    set(r);
    return r;
  };
  const std::vector<std::pair<std::string, std::function<absl::Status()>>>
      calls = {
          {"AddMeasurement",
           [&] {
             v1::AddMeasurementRequest r;
             r.set_study_name("s");
             r.set_trial_id(1);
             r.set_lease_epoch(1);
             r.mutable_measurement()->set_step(1);
             (*r.mutable_measurement()->mutable_metrics())["loss"] = 0.5;
             return service_.AddMeasurement(r).status();
           }},
          {"Heartbeat",
           [&] {
             v1::HeartbeatRequest r;
             r.set_study_name("s");
             r.set_trial_id(1);
             r.set_lease_epoch(1);
             r.set_checkpoint_uri("file:///zombie");
             r.set_device_seconds(5);
             return service_.Heartbeat(r).status();
           }},
          {"CompleteTrial (result)",
           [&] {
             return service_
                 .CompleteTrial(complete([](v1::CompleteTrialRequest& r) {
                   (*r.mutable_final_measurement()->mutable_metrics())["loss"] =
                       0.1;
                 }))
                 .status();
           }},
          {"CompleteTrial (infeasible)",
           [&] {
             return service_
                 .CompleteTrial(complete([](v1::CompleteTrialRequest& r) {
                   r.set_infeasible(true);
                 }))
                 .status();
           }},
          {"CompleteTrial (failed)",
           [&] {
             return service_
                 .CompleteTrial(complete(
                     [](v1::CompleteTrialRequest& r) { r.set_failed(true); }))
                 .status();
           }},
          {"CompleteTrial (worker_failed)",
           [&] {
             return service_
                 .CompleteTrial(complete([](v1::CompleteTrialRequest& r) {
                   r.set_worker_failed(true);
                   r.set_device_seconds(3);
                 }))
                 .status();
           }},
      };
  for (const auto& [name, call] : calls) {
    const absl::Status status = call();
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition)
        << name << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr("epoch 2, not 1")) << name;
    EXPECT_TRUE(
        google::protobuf::util::MessageDifferencer::Equals(Stored(), before))
        << name << " changed the trial:\n"
        << Stored().DebugString();
  }
  // The trial's worker writes as before.
  v1::AddMeasurementRequest report;
  report.set_study_name("s");
  report.set_trial_id(1);
  report.set_lease_epoch(2);
  report.mutable_measurement()->set_step(1);
  (*report.mutable_measurement()->mutable_metrics())["loss"] = 0.5;
  EXPECT_TRUE(service_.AddMeasurement(report).ok());
}

TEST_F(TrialFencingTest, AFinishedTrialAnswersItsRetryAndRefusesAnotherResult) {
  v1::CompleteTrialRequest done;
  done.set_study_name("s");
  done.set_trial_id(1);
  done.set_lease_epoch(2);
  (*done.mutable_final_measurement()->mutable_metrics())["loss"] = 0.25;
  absl::StatusOr<v1::Trial> first = service_.CompleteTrial(done);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->state(), v1::Trial::COMPLETED);
  absl::StatusOr<v1::Trial> retry = service_.CompleteTrial(done);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(
      google::protobuf::util::MessageDifferencer::Equals(*retry, *first));
  (*done.mutable_final_measurement()->mutable_metrics())["loss"] = 0.5;
  EXPECT_EQ(service_.CompleteTrial(done).status().code(),
            absl::StatusCode::kFailedPrecondition);
  done.set_failed(true);
  done.clear_final_measurement();
  EXPECT_THAT(service_.CompleteTrial(done).status().message(),
              HasSubstr("is already COMPLETED"));
  EXPECT_EQ(Stored().final_measurement().metrics().at("loss"), 0.25);
}

}  // namespace
}  // namespace hypertune::service
