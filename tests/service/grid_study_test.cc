// GRID studies through StudyService: refused grids name why, every point is
// handed out once across concurrent askers and a grown space, and the
// study completes once its grid is exhausted and nothing runs.
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "service/rpc/study_service.h"
#include "storage/memory_store.h"

namespace hypertune::service {
namespace {

using ::testing::HasSubstr;

v1::CreateStudyRequest Create(const std::string& spec_text) {
  v1::CreateStudyRequest create;
  create.mutable_study()->set_name("grid");
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      spec_text, create.mutable_study()->mutable_spec()));
  return create;
}

constexpr char kSpec[] = R"pb(
  parameters {
    name: "lr"
    double_spec { min: 0.001 max: 0.1 scale: LOG grid_points: 3 }
  }
  parameters {
    name: "opt"
    categorical_spec { values: "sgd" values: "adam" }
  }
  metrics { name: "loss" goal: MINIMIZE }
  algorithm: GRID
  seed: 5
)pb";

absl::StatusOr<v1::SuggestTrialsResponse> Ask(StudyService& service,
                                              const std::string& client,
                                              int count) {
  v1::SuggestTrialsRequest suggest;
  suggest.set_study_name("grid");
  suggest.set_count(count);
  suggest.set_client_id(client);
  return service.SuggestTrials(suggest);
}

void Complete(StudyService& service, const v1::Trial& trial) {
  v1::CompleteTrialRequest complete;
  complete.set_study_name("grid");
  complete.set_trial_id(trial.id());
  complete.set_lease_epoch(trial.lease_epoch());
  (*complete.mutable_final_measurement()->mutable_metrics())["loss"] = 1.0;
  ASSERT_TRUE(service.CompleteTrial(complete).ok());
}

// lr and opt of `trial`, as text.
std::string Point(const v1::Trial& trial) {
  std::string point;
  for (const v1::ParameterValue& v : trial.parameters()) {
    point += v.name() + "=" +
             (v.has_string_value() ? v.string_value()
                                   : std::to_string(v.double_value())) +
             " ";
  }
  return point;
}

TEST(GridStudy, RefusesADoubleWithoutGridPointsAndAnOversizedGrid) {
  storage::MemoryStore store;
  StudyService service(&store, ServiceOptions());
  absl::Status missing = service
                             .CreateStudy(Create(R"pb(
                               parameters {
                                 name: "lr"
                                 double_spec { min: 0 max: 1 }
                               }
                               metrics { name: "loss" goal: MINIMIZE }
                               algorithm: GRID
                             )pb"))
                             .status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.message(),
              HasSubstr("study.spec.parameters[0] (\"lr\").grid_points"));

  absl::Status huge = service
                          .CreateStudy(Create(R"pb(
                            parameters {
                              name: "a"
                              integer_spec { min: 1 max: 1000 }
                            }
                            parameters {
                              name: "b"
                              integer_spec { min: 1 max: 1001 }
                            }
                            metrics { name: "loss" goal: MINIMIZE }
                            algorithm: GRID
                          )pb"))
                          .status();
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(huge.message(), HasSubstr("at most 1000000 points"));

  absl::Status negative = service
                              .CreateStudy(Create(R"pb(
                                parameters {
                                  name: "lr"
                                  double_spec { min: 0 max: 1 grid_points: -2 }
                                }
                                metrics { name: "loss" goal: MINIMIZE }
                              )pb"))
                              .status();
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.message(), HasSubstr("grid_points must be between 0"));
}

TEST(GridStudy, EveryPointOnceAcrossWorkersAndAGrownSpaceThenCompletes) {
  storage::MemoryStore store;
  StudyService service(&store, ServiceOptions());
  ASSERT_TRUE(service.CreateStudy(Create(kSpec)).ok());

  // 3 x 2 = 6 points: two workers asking for 4 each get 4 and 2.
  absl::StatusOr<v1::SuggestTrialsResponse> a = Ask(service, "a", 4);
  absl::StatusOr<v1::SuggestTrialsResponse> b = Ask(service, "b", 4);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(a->trials_size(), 4);
  EXPECT_EQ(b->trials_size(), 2);
  std::set<std::string> points;
  for (const auto* r : {&*a, &*b}) {
    for (const v1::Trial& t : r->trials()) {
      EXPECT_TRUE(points.insert(Point(t)).second) << Point(t);
    }
  }
  EXPECT_EQ(points.size(), 6u);

  // Nothing left while trials run: the study waits, still ACTIVE.
  absl::StatusOr<v1::SuggestTrialsResponse> none = Ask(service, "c", 1);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->trials_size(), 0);
  EXPECT_EQ(none->study_state(), v1::Study::ACTIVE);

  // A third category adds its 3 points, and only those.
  v1::UpdateStudyRequest update;
  update.set_name("grid");
  *update.mutable_spec() = Create(kSpec).study().spec();
  update.mutable_spec()
      ->mutable_parameters(1)
      ->mutable_categorical_spec()
      ->add_values("lion");
  update.mutable_update_mask()->add_paths("parameters");
  ASSERT_TRUE(service.UpdateStudy(update).ok());
  absl::StatusOr<v1::SuggestTrialsResponse> grown = Ask(service, "c", 5);
  ASSERT_TRUE(grown.ok());
  ASSERT_EQ(grown->trials_size(), 3);
  for (const v1::Trial& t : grown->trials()) {
    EXPECT_THAT(Point(t), HasSubstr("opt=lion"));
    EXPECT_TRUE(points.insert(Point(t)).second) << Point(t);
  }

  for (const auto* r : {&*a, &*b, &*grown}) {
    for (const v1::Trial& t : r->trials()) Complete(service, t);
  }
  absl::StatusOr<v1::SuggestTrialsResponse> done = Ask(service, "a", 1);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->trials_size(), 0);
  EXPECT_EQ(done->study_state(), v1::Study::COMPLETED);
  v1::GetStudyRequest get;
  get.set_name("grid");
  EXPECT_EQ(service.GetStudy(get)->state(), v1::Study::COMPLETED);
}

}  // namespace
}  // namespace hypertune::service
