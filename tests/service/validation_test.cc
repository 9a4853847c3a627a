#include "service/rpc/validation.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "service/rpc/conversion.h"

namespace hypertune::service {
namespace {

using ::testing::HasSubstr;

v1::Study ValidStudy() {
  v1::Study study;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    name: "valid-study_1.0"
    spec {
      parameters { name: "lr" double_spec { min: 1e-4 max: 1 scale: LOG } }
      parameters { name: "layers" integer_spec { min: 1 max: 8 } }
      parameters { name: "batch" discrete_spec { values: [ 32, 64, 128 ] } }
      parameters { name: "opt" categorical_spec { values: [ "sgd", "adam" ] } }
      metrics { name: "loss" goal: MINIMIZE }
    }
  )pb",
                                                &study);
  return study;
}

// The study, its search space and its algorithm, checked as CreateStudy does.
absl::Status CheckStudy(const v1::Study& study) {
  if (absl::Status s = ValidateStudy(study); !s.ok()) return s;
  return ToSearchSpace(study.spec()).status();
}

TEST(ValidateStudyTest, AcceptsValidStudy) {
  EXPECT_TRUE(CheckStudy(ValidStudy()).ok()) << CheckStudy(ValidStudy());
}

// Issue 48: a recorded metric's goal is informational, with roles or
// without (where the metrics after the first are recorded).
TEST(ValidateStudyTest, ARecordedMetricNeedsNoGoal) {
  v1::Study study = ValidStudy();
  study.mutable_spec()->add_metrics()->set_name("gpu_hours");
  EXPECT_TRUE(CheckStudy(study).ok()) << CheckStudy(study);
  study.mutable_spec()->mutable_metrics(0)->set_role(v1::MetricSpec::OBJECTIVE);
  study.mutable_spec()->mutable_metrics(1)->set_role(v1::MetricSpec::RECORDED);
  EXPECT_TRUE(CheckStudy(study).ok()) << CheckStudy(study);
}

struct BadStudyCase {
  std::string label;
  std::function<void(v1::Study&)> edit;
  std::string field_in_message;
};

v1::ParameterSpec ParseParameter(const std::string& text) {
  v1::ParameterSpec p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

// Replaces the study's parameters with the ones given in text format.
std::function<void(v1::Study&)> WithParameters(std::vector<std::string> texts) {
  return [texts](v1::Study& study) {
    study.mutable_spec()->clear_parameters();
    for (const std::string& t : texts) {
      *study.mutable_spec()->add_parameters() = ParseParameter(t);
    }
  };
}

// Replaces the study's metrics with the ones given in text format.
std::function<void(v1::Study&)> WithMetrics(std::vector<std::string> texts) {
  return [texts](v1::Study& study) {
    study.mutable_spec()->clear_metrics();
    for (const std::string& t : texts) {
      v1::MetricSpec m;
      EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(t, &m)) << t;
      *study.mutable_spec()->add_metrics() = m;
    }
  };
}

// Names the case in test output instead of dumping its bytes.
void PrintTo(const BadStudyCase& c, std::ostream* os) { *os << c.label; }

class BadStudyTest : public ::testing::TestWithParam<BadStudyCase> {};

TEST_P(BadStudyTest, NamesTheFieldWithInvalidArgument) {
  const BadStudyCase& c = GetParam();
  v1::Study study = ValidStudy();
  c.edit(study);
  absl::Status s = CheckStudy(study);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
      << c.label << ": " << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(c.field_in_message))
      << c.label;
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadStudyTest,
    ::testing::Values(
        BadStudyCase{"empty_name", [](v1::Study& s) { s.set_name(""); },
                     "study.name"},
        BadStudyCase{"name_with_space", [](v1::Study& s) { s.set_name("a b"); },
                     "study.name"},
        BadStudyCase{
            "sql_name",
            [](v1::Study& s) { s.set_name("x'); DROP TABLE trials;--"); },
            "study.name"},
        BadStudyCase{"no_parameters",
                     [](v1::Study& s) { s.mutable_spec()->clear_parameters(); },
                     "study.spec.parameters"},
        BadStudyCase{"no_metrics",
                     [](v1::Study& s) { s.mutable_spec()->clear_metrics(); },
                     "study.spec.metrics"},
        BadStudyCase{
            "log_min_zero",
            WithParameters(
                {R"pb(name: "lr" double_spec { min: 0 max: 1 scale: LOG })pb"}),
            "parameters[0]"},
        BadStudyCase{
            "log_min_negative_integer",
            WithParameters(
                {R"pb(name: "n" integer_spec { min: -1 max: 4 scale: LOG })pb"}),
            "parameters[0]"},
        BadStudyCase{
            "min_above_max",
            WithParameters({R"pb(name: "x" double_spec { min: 2 max: 1 })pb"}),
            "parameters[0]"},
        BadStudyCase{
            "double_min_equals_max",
            WithParameters({R"pb(name: "x" double_spec { min: 1 max: 1 })pb"}),
            "parameters[0].double_spec"},
        BadStudyCase{
            "integer_min_equals_max",
            WithParameters({R"pb(name: "n" integer_spec { min: 4 max: 4 })pb"}),
            "one value"},
        BadStudyCase{"no_kind", WithParameters({R"pb(name: "x")pb"}),
                     "parameters[0]"},
        BadStudyCase{
            "empty_parameter_name",
            WithParameters({R"pb(name: "" double_spec { min: 0 max: 1 })pb"}),
            "parameters[0].name"},
        BadStudyCase{"parameter_name_with_braces",
                     WithParameters(
                         {R"pb(name: "{x}" double_spec { min: 0 max: 1 })pb"}),
                     "parameters[0].name"},
        BadStudyCase{
            "duplicate_parameter",
            WithParameters({R"pb(name: "x" double_spec { min: 0 max: 1 })pb",
                            R"pb(name: "x" double_spec { min: 0 max: 1 })pb"}),
            "parameters[1]"},
        BadStudyCase{"empty_categories",
                     WithParameters({R"pb(name: "c" categorical_spec {})pb"}),
                     "parameters[0]"},
        BadStudyCase{"empty_discrete",
                     WithParameters({R"pb(name: "d" discrete_spec {})pb"}),
                     "parameters[0]"},
        BadStudyCase{"goal_unspecified",
                     [](v1::Study& s) {
                       s.mutable_spec()->mutable_metrics(0)->clear_goal();
                     },
                     "metrics[0].goal"},
        BadStudyCase{"duplicate_metric",
                     [](v1::Study& s) {
                       *s.mutable_spec()->add_metrics() = s.spec().metrics(0);
                     },
                     "metrics[1]"},
        BadStudyCase{"unknown_role",
                     [](v1::Study& s) {
                       s.mutable_spec()->mutable_metrics(0)->set_role(
                           static_cast<v1::MetricSpec::Role>(9));
                     },
                     "metrics[0].role"},
        BadStudyCase{"no_objective",
                     [](v1::Study& s) {
                       s.mutable_spec()->mutable_metrics(0)->set_role(
                           v1::MetricSpec::RECORDED);
                     },
                     "no metric has role OBJECTIVE"},
        BadStudyCase{"objective_without_goal",
                     WithMetrics({R"pb(name: "a" role: OBJECTIVE)pb"}),
                     "metrics[0].goal"},
        BadStudyCase{"bound_on_an_objective", WithMetrics({R"pb(name: "a" goal: MAXIMIZE role: OBJECTIVE
                                       upper_bound: 1)pb"}),
                     "not a CONSTRAINT"},
        BadStudyCase{
            "constraint_without_bounds",
            WithMetrics({R"pb(name: "a" goal: MAXIMIZE role: OBJECTIVE)pb",
                         R"pb(name: "mem" role: CONSTRAINT)pb"}),
            "metrics[1]"},
        BadStudyCase{
            "constraint_bounds_crossed",
            WithMetrics({R"pb(name: "a" goal: MAXIMIZE role: OBJECTIVE)pb",
                         R"pb(name: "mem" role: CONSTRAINT
                                       lower_bound: 2 upper_bound: 1)pb"}),
            "metrics[1]"},
        BadStudyCase{
            "constraint_bound_infinite",
            WithMetrics({R"pb(name: "a" goal: MAXIMIZE role: OBJECTIVE)pb",
                         R"pb(name: "mem" role: CONSTRAINT
                                       upper_bound: inf)pb"}),
            "metrics[1].upper_bound"},
        BadStudyCase{"negative_max_trials",
                     [](v1::Study& s) { s.mutable_spec()->set_max_trials(-1); },
                     "study.spec.max_trials"},
        BadStudyCase{
            "negative_parallel",
            [](v1::Study& s) { s.mutable_spec()->set_max_parallel_trials(-3); },
            "study.spec.max_parallel_trials"}),
    [](const ::testing::TestParamInfo<BadStudyCase>& info) {
      return info.param.label;
    });

// A root of 1,000 categories and `children` doubles below it, child k
// active under `per_child` categories from k on.
v1::Study WideConditionalStudy(int children, int per_child) {
  v1::Study study = ValidStudy();
  v1::StudySpec& spec = *study.mutable_spec();
  spec.clear_parameters();
  v1::ParameterSpec& root = *spec.add_parameters();
  root.set_name("root");
  for (int c = 0; c < 1000; ++c) {
    root.mutable_categorical_spec()->add_values(absl::StrCat("c", c));
  }
  for (int k = 0; k < children; ++k) {
    v1::ParameterSpec& child = *spec.add_parameters();
    child.set_name(absl::StrCat("x", k));
    child.mutable_double_spec()->set_max(1);
    child.set_parent("root");
    for (int c = 0; c < per_child; ++c) {
      child.add_parent_categories(absl::StrCat("c", (k + c) % 1000));
    }
  }
  return study;
}

TEST(ValidateStudyTest, RefusesConditionsPastTheLimitNamingTheParameter) {
  // 499 children under 20 categories each: 9,980 conditions, within.
  const v1::Study within = WideConditionalStudy(499, 20);
  EXPECT_TRUE(CheckStudy(within).ok()) << CheckStudy(within);
  // Under 21 each the total passes 10,000 at child 476 (parameters[477]).
  const absl::Status s = CheckStudy(WideConditionalStudy(499, 21));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("study.spec.parameters[477].parent_categories"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("limit of ", kMaxParentValuesPerStudy)));
}

TEST(ValidateStudyTest, NaNBoundsAreRefused) {
  v1::Study study = ValidStudy();
  study.mutable_spec()->mutable_parameters(0)->mutable_double_spec()->set_max(
      std::nan(""));
  absl::Status s = CheckStudy(study);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("parameters[0]"));
}

TEST(ValidateStudyNameTest, BeginsWithALetterOrDigit) {
  for (const char* good : {"a", "Z9", "9lives", "a.b-c_d", "x..y"}) {
    EXPECT_TRUE(ValidateStudyName("name", good).ok()) << good;
  }
  for (const char* bad : {".", "..", "-dash", "_x", ".hidden", "a/b", ""}) {
    absl::Status s = ValidateStudyName("name", bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()), HasSubstr("name")) << bad;
  }
}

TEST(ValidateTrialSizeTest, CountsMeasurementsAndBytes) {
  v1::Trial trial;
  trial.set_id(7);
  for (int i = 0; i < kMaxMeasurementsPerTrial; ++i) {
    trial.add_measurements()->set_step(i);
  }
  EXPECT_TRUE(ValidateTrialSize("measurement", trial).ok());
  trial.add_measurements()->set_step(kMaxMeasurementsPerTrial);
  absl::Status s = ValidateTrialSize("measurement", trial);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("measurement: trial 7 would hold 10001 measurements, "
                        "over the limit of 10000 per trial"));
  v1::Trial big;
  big.set_checkpoint_uri(std::string(kMaxTrialBytes, 'u'));
  EXPECT_THAT(std::string(ValidateTrialSize("x", big).message()),
              HasSubstr("over the limit of 1048576 per trial"));
}

TEST(ValidateMeasurementTest, RefusesNaNAcceptsInfinity) {
  v1::Measurement m;
  (*m.mutable_metrics())["loss"] = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(ValidateMeasurement("measurement", m, true).ok());
  (*m.mutable_metrics())["acc"] = std::nan("");
  absl::Status s = ValidateMeasurement("measurement", m, true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("measurement.metrics[\"acc\"]"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("NaN"));
}

TEST(ValidateMeasurementTest, RefusesNegativeStepAndEmptyMetrics) {
  v1::Measurement m;
  EXPECT_EQ(ValidateMeasurement("measurement", m, true).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateMeasurement("measurement", m, false).ok());
  m.set_step(-1);
  (*m.mutable_metrics())["loss"] = 1;
  absl::Status s = ValidateMeasurement("measurement", m, true);
  EXPECT_THAT(std::string(s.message()), HasSubstr("measurement.step"));
}

TEST(ConversionTest, AssignmentRoundTripsThroughParameterValues) {
  v1::Study study = ValidStudy();
  auto space = ToSearchSpace(study.spec());
  ASSERT_TRUE(space.ok()) << space.status();
  optimizer::Assignment a = {0.01, 3, 64, 1};
  ParameterValues values = ToParameterValues(*space, a);
  ASSERT_EQ(values.size(), 4);
  EXPECT_EQ(values[1].int_value(), 3);
  EXPECT_EQ(values[3].string_value(), "adam");
  auto back = ToAssignment("trial.parameters", *space, values);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, a);
}

TEST(ConversionTest, BadParameterValuesNameTheParameter) {
  auto space = ToSearchSpace(ValidStudy().spec());
  ASSERT_TRUE(space.ok());
  ParameterValues good = ToParameterValues(*space, {0.01, 3, 64, 1});

  ParameterValues out_of_range = good;
  out_of_range[0].set_double_value(5.0);
  auto s = ToAssignment("trial.parameters", *space, out_of_range).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("lr"));

  ParameterValues bad_category = good;
  bad_category[3].set_string_value("rmsprop");
  s = ToAssignment("trial.parameters", *space, bad_category).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("unknown category"));

  ParameterValues unknown = good;
  v1::ParameterValue* extra = unknown.Add();
  extra->set_name("momentum");
  extra->set_double_value(0.9);
  s = ToAssignment("trial.parameters", *space, unknown).status();
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("unknown parameter \"momentum\""));

  ParameterValues missing = good;
  missing.RemoveLast();
  s = ToAssignment("trial.parameters", *space, missing).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"opt\" is missing"));

  ParameterValues not_in_set = good;
  not_in_set[2].set_double_value(100);
  s = ToAssignment("trial.parameters", *space, not_in_set).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("batch"));
}

TEST(ConversionTest, HistoryMaximizesAndSkipsFailed) {
  v1::Study study = ValidStudy();
  auto space = ToSearchSpace(study.spec());
  ASSERT_TRUE(space.ok());
  std::vector<v1::Trial> trials(4);
  for (v1::Trial& t : trials) {
    *t.mutable_parameters() = ToParameterValues(*space, {0.01, 3, 64, 1});
  }
  trials[0].set_state(v1::Trial::COMPLETED);
  (*trials[0].mutable_final_measurement()->mutable_metrics())["loss"] = 2.5;
  trials[1].set_state(v1::Trial::FAILED);
  trials[2].set_state(v1::Trial::INFEASIBLE);
  trials[3].set_state(v1::Trial::ACTIVE);
  auto history = ToHistory(study.spec(), *space, trials);
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history[0].outcome, optimizer::Outcome::kCompleted);
  ASSERT_EQ(history[0].values.size(), 1u);
  EXPECT_DOUBLE_EQ(history[0].values[0], -2.5);  // MINIMIZE becomes maximize
  EXPECT_EQ(history[1].outcome, optimizer::Outcome::kInfeasible);
  EXPECT_EQ(history[2].outcome, optimizer::Outcome::kPending);
}

TEST(ValidateStudyTest, ObjectivesAndConstraintsByRole) {
  v1::Study study = ValidStudy();
  study.mutable_spec()->clear_metrics();
  google::protobuf::TextFormat::MergeFromString(R"pb(
    metrics { name: "acc" goal: MAXIMIZE role: OBJECTIVE }
    metrics { name: "latency" goal: MINIMIZE role: OBJECTIVE }
    metrics { name: "memory" role: CONSTRAINT upper_bound: 16 }
    metrics { name: "params" }
  )pb",
                                                study.mutable_spec());
  ASSERT_TRUE(CheckStudy(study).ok()) << CheckStudy(study);
  StudyMetrics metrics(study.spec());
  ASSERT_EQ(metrics.objectives().size(), 2u);
  EXPECT_TRUE(metrics.multi_objective());
  EXPECT_EQ(metrics.primary().name, "acc");
  EXPECT_FALSE(metrics.objectives()[1].maximize);
  ASSERT_EQ(metrics.constraints().size(), 1u);
  EXPECT_EQ(metrics.constraints()[0].upper, 16);
  EXPECT_EQ(metrics.RequiredNames(),
            (std::vector<std::string>{"acc", "latency", "memory"}));

  v1::Measurement m;
  (*m.mutable_metrics())["acc"] = 0.9;
  (*m.mutable_metrics())["latency"] = 3;
  EXPECT_EQ(metrics.Missing(m), "memory");
  EXPECT_FALSE(metrics.Feasible(m).has_value());
  (*m.mutable_metrics())["memory"] = 20;
  EXPECT_FALSE(metrics.Missing(m).has_value());
  EXPECT_EQ(metrics.Feasible(m), false);
  (*m.mutable_metrics())["memory"] = 16;  // bounds are inclusive
  EXPECT_EQ(metrics.Feasible(m), true);
  EXPECT_EQ(ModelValues(metrics, m), (std::vector<double>{0.9, -3, 16}));
}

TEST(ValidateStudyTest, WithoutRolesTheFirstMetricIsTheObjective) {
  v1::Study study = ValidStudy();
  google::protobuf::TextFormat::ParseFromString(
      R"pb(name: "acc" goal: MAXIMIZE)pb", study.mutable_spec()->add_metrics());
  StudyMetrics metrics(study.spec());
  ASSERT_EQ(metrics.objectives().size(), 1u);
  EXPECT_EQ(metrics.primary().name, "loss");
  EXPECT_TRUE(metrics.constraints().empty());
}

}  // namespace
}  // namespace hypertune::service
