// AddMeasurement's cost (issue 48 item 10): a report reads its trial's head
// and latest measurement, never the trial's whole curve nor the study's
// other trials, and early stopping decides from the curves kept in memory
// exactly as from every trial read again.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "optimizer/early_stopping.h"
#include "service/rpc/conversion.h"
#include "service/rpc/curve_cache.h"
#include "service/rpc/study_service.h"
#include "storage/memory_store.h"

namespace hypertune::service {
namespace {

using ::testing::HasSubstr;

// A MemoryStore that counts the reads that cost a whole curve or a whole
// study. (A CurveTrackingStore for its forwarding; its own cache is never
// judged from.)
class CountingStore : public CurveTrackingStore {
 public:
  CountingStore() : CurveTrackingStore(&memory_, &unused_) {}

  absl::StatusOr<v1::Trial> GetTrial(std::string_view study_name,
                                     int64_t trial_id) override {
    ++whole_trials;
    return CurveTrackingStore::GetTrial(study_name, trial_id);
  }
  absl::StatusOr<storage::StudyWithTrial> GetStudyWithTrial(
      std::string_view study_name, int64_t trial_id) override {
    ++whole_trials;
    return CurveTrackingStore::GetStudyWithTrial(study_name, trial_id);
  }
  absl::StatusOr<std::vector<v1::Trial>> ListTrials(
      std::string_view study_name, const storage::TrialQuery& query) override {
    ++listings;
    return CurveTrackingStore::ListTrials(study_name, query);
  }

  int whole_trials = 0;
  int listings = 0;

 private:
  storage::MemoryStore memory_;
  CurveCache unused_;
};

class MeasurementCostTest : public ::testing::Test {
 protected:
  MeasurementCostTest() : service_(&store_, Options()) {}

  ServiceOptions Options() {
    ServiceOptions options;
    options.now_ms = [this] { return now_ms_; };
    options.fit_threads = 0;
    return options;
  }

  void SetUp() override {
    v1::CreateStudyRequest request;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
      study {
        name: "es"
        spec {
          parameters { name: "x" double_spec { min: 0 max: 1 } }
          metrics { name: "loss" goal: MINIMIZE }
          algorithm: RANDOM
          early_stopping { rule: MEDIAN grace_steps: 2 min_trials: 3 }
        }
      })pb",
                                                              &request));
    ASSERT_TRUE(service_.CreateStudy(request).ok());
  }

  // A new trial for a worker of its own (a worker asking again would get
  // the trial it holds).
  v1::Trial Next() {
    v1::SuggestTrialsRequest request;
    request.set_study_name("es");
    request.set_count(1);
    request.set_client_id(absl::StrCat("worker-", ++workers_));
    absl::StatusOr<v1::SuggestTrialsResponse> response =
        service_.SuggestTrials(request);
    EXPECT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response.ok() ? response->trials_size() : 0, 1);
    return response.ok() && response->trials_size() == 1 ? response->trials(0)
                                                         : v1::Trial();
  }

  absl::StatusOr<v1::Trial> Report(const v1::Trial& trial, int64_t step,
                                   double loss) {
    v1::AddMeasurementRequest request;
    request.set_study_name("es");
    request.set_trial_id(trial.id());
    request.set_lease_epoch(trial.lease_epoch());
    request.mutable_measurement()->set_step(step);
    (*request.mutable_measurement()->mutable_metrics())["loss"] = loss;
    return service_.AddMeasurement(request);
  }

  // Runs a trial to `steps` at `loss` a step, and completes it.
  void Finish(int64_t steps, double loss) {
    const v1::Trial trial = Next();
    for (int64_t step = 1; step <= steps; ++step) {
      absl::StatusOr<v1::Trial> reported = Report(trial, step, loss);
      ASSERT_TRUE(reported.ok()) << reported.status();
    }
    v1::CompleteTrialRequest request;
    request.set_study_name("es");
    request.set_trial_id(trial.id());
    request.set_lease_epoch(trial.lease_epoch());
    (*request.mutable_final_measurement()->mutable_metrics())["loss"] = loss;
    ASSERT_TRUE(service_.CompleteTrial(request).ok());
  }

  // What the rule decides for `trial` reporting `loss` at `step`, from
  // every trial of the study read again (as ApplyEarlyStopping did before
  // it kept the curves).
  optimizer::Decision FromEveryTrial(const v1::Trial& trial, int64_t step,
                                     double loss) {
    v1::GetStudyRequest get;
    get.set_name("es");
    absl::StatusOr<v1::Study> study = service_.GetStudy(get);
    EXPECT_TRUE(study.ok()) << study.status();
    absl::StatusOr<std::vector<v1::Trial>> trials = store_.ListTrials("es", {});
    EXPECT_TRUE(trials.ok()) << trials.status();
    for (v1::Trial& t : *trials) {
      if (t.id() != trial.id()) continue;
      v1::Measurement* m = t.add_measurements();
      m->set_step(step);
      (*m->mutable_metrics())["loss"] = loss;
    }
    return optimizer::DecideTrial(ToEarlyStoppingConfig(study->spec()),
                                  ToCurves(study->spec(), *trials), trial.id());
  }

  int64_t now_ms_ = 1'700'000'000'000;
  int workers_ = 0;
  CountingStore store_;
  StudyService service_;
};

TEST_F(MeasurementCostTest, AReportReadsNeitherItsCurveNorTheOtherTrials) {
  for (int i = 0; i < 3; ++i) Finish(5, 0.9);
  const v1::Trial trial = Next();
  // The study's first judgement reads its trials once.
  ASSERT_TRUE(Report(trial, 1, 0.5).ok());
  store_.whole_trials = 0;
  store_.listings = 0;
  for (int64_t step = 2; step <= 200; ++step) {
    absl::StatusOr<v1::Trial> reported = Report(trial, step, 0.5);
    ASSERT_TRUE(reported.ok()) << reported.status();
    ASSERT_EQ(reported->state(), v1::Trial::ACTIVE);
    // The answer carries this report alone.
    ASSERT_EQ(reported->measurements_size(), 1);
    EXPECT_EQ(reported->measurements(0).step(), step);
  }
  EXPECT_EQ(store_.whole_trials, 0);
  EXPECT_EQ(store_.listings, 0);
  // The whole curve is there for GetTrial.
  v1::GetTrialRequest get;
  get.set_study_name("es");
  get.set_trial_id(trial.id());
  absl::StatusOr<v1::Trial> whole = service_.GetTrial(get);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->measurements_size(), 200);
}

TEST_F(MeasurementCostTest, KeptCurvesFollowOtherTrialsAndDecideAsBefore) {
  for (int i = 0; i < 3; ++i) Finish(5, 0.9);
  const v1::Trial judged = Next();
  for (int64_t step = 1; step <= 5; ++step) {
    // Better than every finished trial: it goes on, as from every trial.
    EXPECT_EQ(FromEveryTrial(judged, step, 0.5).action,
              optimizer::Action::kContinue);
    absl::StatusOr<v1::Trial> reported = Report(judged, step, 0.5);
    ASSERT_TRUE(reported.ok()) << reported.status();
    EXPECT_EQ(reported->state(), v1::Trial::ACTIVE);
  }
  // Trials finished since (written by CompleteTrial, not by the judged
  // trial's reports) move the median below it.
  store_.listings = 0;
  for (int i = 0; i < 5; ++i) Finish(8, 0.1);
  EXPECT_EQ(store_.listings, 0);
  const optimizer::Decision expected = FromEveryTrial(judged, 6, 0.5);
  ASSERT_EQ(expected.action, optimizer::Action::kStop);
  absl::StatusOr<v1::Trial> reported = Report(judged, 6, 0.5);
  ASSERT_TRUE(reported.ok()) << reported.status();
  EXPECT_EQ(reported->state(), v1::Trial::STOPPING);
  EXPECT_EQ(reported->stop_reason(), expected.reason);
  EXPECT_THAT(reported->stop_reason(), HasSubstr("median"));
}

TEST_F(MeasurementCostTest, TheSizeLimitsCountTheStoredCurve) {
  const v1::Trial trial = Next();
  // Measurements of about 26 KiB each (199 metrics of 120-byte names):
  // about the 40th would pass 1 MiB.
  auto bulky = [&](int64_t step) {
    v1::AddMeasurementRequest request;
    request.set_study_name("es");
    request.set_trial_id(trial.id());
    request.set_lease_epoch(trial.lease_epoch());
    request.mutable_measurement()->set_step(step);
    (*request.mutable_measurement()->mutable_metrics())["loss"] = 0.5;
    for (int i = 0; i < 199; ++i) {
      (*request.mutable_measurement()
            ->mutable_metrics())[absl::StrCat(std::string(110, 'm'), "_", i)] =
          i;
    }
    return service_.AddMeasurement(request);
  };
  int64_t step = 1;
  absl::Status status;
  for (; step <= 100; ++step) {
    status = bulky(step).status();
    if (!status.ok()) break;
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("over the limit of 1048576"));
  v1::GetTrialRequest get;
  get.set_study_name("es");
  get.set_trial_id(trial.id());
  absl::StatusOr<v1::Trial> whole = service_.GetTrial(get);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->measurements_size(), step - 1);
  EXPECT_LE(whole->ByteSizeLong(), 1u << 20);
  // One more measurement's worth would have passed it.
  EXPECT_GT(whole->ByteSizeLong() + whole->measurements(0).ByteSizeLong(),
            1u << 20);
}

}  // namespace
}  // namespace hypertune::service
