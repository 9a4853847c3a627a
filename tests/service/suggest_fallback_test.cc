// A suggestion that falls back from its algorithm's own method is counted
// per study, algorithm and reason on /metrics (not only logged).
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "service/rpc/study_service.h"
#include "service/server/metrics.h"
#include "storage/memory_store.h"

namespace hypertune::service {
namespace {

using ::testing::HasSubstr;

TEST(SuggestFallback, AnExhaustedSpaceIsCountedByStudyAlgorithmAndReason) {
  storage::MemoryStore store;
  Metrics metrics;
  ServiceOptions options;
  options.metrics = &metrics;
  StudyService service(&store, options);
  v1::CreateStudyRequest create;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    study {
      name: "tiny"
      spec {
        parameters { name: "k" integer_spec { min: 1 max: 3 } }
        metrics { name: "loss" goal: MINIMIZE }
        algorithm: GP_BANDIT
        seed: 3
      }
    })pb",
                                                            &create));
  ASSERT_TRUE(service.CreateStudy(create).ok());
  const std::vector<std::string> labels = {"tiny", "GP_BANDIT",
                                           "space_exhausted"};
  for (int i = 0; i < 5; ++i) {
    // The space holds 3 points: the first 3 suggestions are its own.
    EXPECT_EQ(metrics.suggest_fallbacks().Value(labels), i <= 3 ? 0 : i - 3)
        << "before suggestion " << i + 1;
    v1::SuggestTrialsRequest suggest;
    suggest.set_study_name("tiny");
    suggest.set_count(1);
    suggest.set_client_id("w");
    absl::StatusOr<v1::SuggestTrialsResponse> got =
        service.SuggestTrials(suggest);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->trials_size(), 1);
    const v1::Trial& trial = got->trials(0);
    v1::CompleteTrialRequest complete;
    complete.set_study_name("tiny");
    complete.set_trial_id(trial.id());
    complete.set_lease_epoch(trial.lease_epoch());
    (*complete.mutable_final_measurement()->mutable_metrics())["loss"] =
        static_cast<double>(trial.parameters(0).int_value());
    ASSERT_TRUE(service.CompleteTrial(complete).ok());
  }
  EXPECT_EQ(metrics.suggest_fallbacks().Value(labels), 2);
  std::string out;
  metrics.Render(&out,
                 [](const std::string& study) { return study == "tiny"; });
  EXPECT_THAT(out, HasSubstr("hypertune_suggest_fallbacks_total{study=\"tiny\","
                             "algorithm=\"GP_BANDIT\",reason=\"space_"
                             "exhausted\"} 2\n"));
  std::string others;
  metrics.Render(&others, [](const std::string&) { return false; });
  EXPECT_THAT(others, ::testing::Not(HasSubstr("study=\"tiny\"")));
}

}  // namespace
}  // namespace hypertune::service
