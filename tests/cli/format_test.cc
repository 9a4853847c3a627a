#include "cli/format.h"

#include <cmath>

#include "cli/args.h"
#include "cli/json_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hypertune::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(FormatTable, AlignsColumns) {
  EXPECT_EQ(FormatTable({{"ID", "STATE", "loss"},
                         {"1", "COMPLETED", "0.5"},
                         {"12", "ACTIVE", ""}}),
            "ID  STATE      loss\n"
            "1   COMPLETED  0.5\n"
            "12  ACTIVE\n");
}

v1::Study TwoParamStudy() {
  v1::Study study;
  study.set_name("s");
  auto* lr = study.mutable_spec()->add_parameters();
  lr->set_name("lr");
  lr->mutable_double_spec()->set_min(1e-5);
  lr->mutable_double_spec()->set_max(1);
  auto* opt = study.mutable_spec()->add_parameters();
  opt->set_name("opt");
  opt->mutable_categorical_spec()->add_values("adam");
  auto* loss = study.mutable_spec()->add_metrics();
  loss->set_name("loss");
  loss->set_goal(v1::MetricSpec::MINIMIZE);
  return study;
}

std::vector<v1::Trial> Trials() {
  v1::Trial done;
  done.set_id(1);
  done.set_state(v1::Trial::COMPLETED);
  done.set_client_id("host-1");
  // Parameters in another order than the study's: columns follow the study.
  auto* opt = done.add_parameters();
  opt->set_name("opt");
  opt->set_string_value("a,b");
  auto* lr = done.add_parameters();
  lr->set_name("lr");
  lr->set_double_value(0.1 + 0.2);
  auto* m = done.add_measurements();
  m->set_step(3);
  (*m->mutable_metrics())["loss"] = 0.9;
  done.mutable_final_measurement()->set_step(3);
  done.mutable_final_measurement()->set_elapsed_seconds(1.5);
  (*done.mutable_final_measurement()->mutable_metrics())["loss"] = 0.25;
  (*done.mutable_final_measurement()->mutable_metrics())["acc"] = 0.75;

  v1::Trial bad;
  bad.set_id(2);
  bad.set_state(v1::Trial::INFEASIBLE);
  bad.set_infeasible_reason("exit status 1");
  auto* lr2 = bad.add_parameters();
  lr2->set_name("lr");
  lr2->set_double_value(1e-5);
  return {done, bad};
}

TEST(TrialGrid, ColumnsFollowTheStudy) {
  v1::Study study = TwoParamStudy();
  Grid grid = TrialGrid(&study, Trials());
  ASSERT_EQ(grid.size(), 3u);
  EXPECT_THAT(grid[0], ElementsAre("ID", "STATE", "lr", "opt", "loss", "acc",
                                   "STEP", "REASON"));
  EXPECT_THAT(grid[2], ElementsAre("2", "INFEASIBLE", "1e-05", "", "", "", "",
                                   "exit status 1"));
}

TEST(TrialGrid, FeasibleColumnWhereTheStudyHasConstraints) {
  v1::Study study = TwoParamStudy();
  v1::MetricSpec& loss = *study.mutable_spec()->mutable_metrics(0);
  loss.set_role(v1::MetricSpec::OBJECTIVE);
  v1::MetricSpec& memory = *study.mutable_spec()->add_metrics();
  memory.set_name("memory");
  memory.set_role(v1::MetricSpec::CONSTRAINT);
  memory.set_upper_bound(16);
  std::vector<v1::Trial> trials = Trials();
  trials[0].set_feasible(false);
  Grid grid = TrialGrid(&study, trials);
  EXPECT_THAT(grid[0], ElementsAre("ID", "STATE", "lr", "opt", "loss", "memory",
                                   "acc", "STEP", "FEASIBLE", "REASON"));
  EXPECT_EQ(grid[1][8], "no");
  EXPECT_EQ(grid[2][8], "");
  std::string detail = FormatTable(StudyDetailGrid(study));
  EXPECT_THAT(detail, HasSubstr("objective            loss (MINIMIZE)\n"));
  EXPECT_THAT(detail, HasSubstr("constraint           memory <= 16\n"));
}

TEST(TrialGrid, TableIsShortAndWorksWithoutAStudy) {
  Grid grid = TrialGrid(nullptr, Trials());
  EXPECT_THAT(grid[0], ElementsAre("ID", "STATE", "opt", "lr", "acc", "loss",
                                   "STEP", "REASON"));
  EXPECT_THAT(grid[1], ElementsAre("1", "COMPLETED", "a,b", "0.3", "0.75",
                                   "0.25", "3", ""));
}

TEST(StudyGrids, ListAndDetail) {
  v1::Study study = TwoParamStudy();
  study.set_state(v1::Study::ACTIVE);
  study.mutable_spec()->set_algorithm(v1::QUASI_RANDOM);
  study.mutable_spec()->set_max_trials(30);
  (*study.mutable_trial_counts())["COMPLETED"] = 5;
  (*study.mutable_trial_counts())["ACTIVE"] = 2;
  study.set_create_time_ms(1700000000000);
  Grid list = StudyListGrid({study});
  EXPECT_THAT(list[1],
              ElementsAre("s", "ACTIVE", "QUASI_RANDOM", "loss (MINIMIZE)",
                          "7/30", "2", "2023-11-14 22:13:20"));
  std::string detail = FormatTable(StudyDetailGrid(study));
  EXPECT_THAT(detail,
              HasSubstr("parameter            lr: double [1e-05, 1]\n"));
  EXPECT_THAT(detail,
              HasSubstr("parameter            opt: categorical {adam}\n"));
  EXPECT_THAT(detail,
              HasSubstr("trials               7 (ACTIVE=2 COMPLETED=5)\n"));
  EXPECT_THAT(detail, HasSubstr("max_parallel_trials  unlimited\n"));
}

TEST(ParseFormat, AllowedNamesOnly) {
  EXPECT_EQ(
      *ParseFormat(std::nullopt, OutputFormat::kTable, {OutputFormat::kTable}),
      OutputFormat::kTable);
  EXPECT_EQ(*ParseFormat("CSV", OutputFormat::kTable,
                         {OutputFormat::kTable, OutputFormat::kCsv}),
            OutputFormat::kCsv);
  auto bad = ParseFormat("csv", OutputFormat::kTable,
                         {OutputFormat::kTable, OutputFormat::kJson});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(IsUsageError(bad.status()));
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("not one of table, json"));
}

TEST(ParseTrialStates, NamesAndLists) {
  auto states = ParseTrialStates({"completed,INFEASIBLE", "Active"});
  ASSERT_TRUE(states.ok()) << states.status();
  EXPECT_THAT(*states, ElementsAre(v1::Trial::COMPLETED, v1::Trial::INFEASIBLE,
                                   v1::Trial::ACTIVE));
  auto bad = ParseTrialStates({"done"});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(IsUsageError(bad.status()));
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("\"done\" is not one of REQUESTED, ACTIVE"));
  EXPECT_FALSE(ParseTrialStates({"STATE_UNSPECIFIED"}).ok());
}

TEST(Json, SnakeCaseFieldNamesAndRoundTrip) {
  v1::Trial trial;
  trial.set_study_name("s");
  trial.set_id(3);
  trial.set_lease_epoch(2);
  trial.set_state(v1::Trial::ACTIVE);
  absl::StatusOr<std::string> json = ToJson(trial);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"study_name\": \"s\""));
  // int64 as a number, not protobuf's quoted string (issue 47 item 9).
  EXPECT_THAT(*json, HasSubstr("\"lease_epoch\": 2"));
  EXPECT_THAT(*json, HasSubstr("\"id\": 3"));
  EXPECT_THAT(*json, HasSubstr("\"state\": \"ACTIVE\""));
  EXPECT_EQ(json->back(), '\n');
  v1::Trial back;
  ASSERT_TRUE(ParseJsonConfig(*json, "trial.json", &back).ok());
  EXPECT_EQ(back.SerializeAsString(), trial.SerializeAsString());
}

// Issue 47 item 9: `study create` echoed "create_time_ms": "1733..." and
// "trial_counts": {"COMPLETED": "3"}. Every int64 and uint64, however deep
// (a message in a list, a map's values), is a number; strings that look
// like numbers stay strings, and the text parses back to the same message.
TEST(Json, IntegersAreNumbersAtAnyDepth) {
  v1::Study study = TwoParamStudy();
  study.set_create_time_ms(1733000000123);
  study.mutable_spec()->set_seed(18446744073709551615u);
  (*study.mutable_trial_counts())["COMPLETED"] = 3;
  study.mutable_spec()
      ->mutable_parameters(1)
      ->mutable_categorical_spec()
      ->add_values("42");
  auto* n = study.mutable_spec()->add_parameters();
  n->set_name("n");
  n->mutable_integer_spec()->set_min(-5);
  n->mutable_integer_spec()->set_max(7);
  study.add_changes()->set_time_ms(12);
  (*study.mutable_attributes())["commit"] = "123";
  for (bool multiline : {true, false}) {
    absl::StatusOr<std::string> json =
        multiline ? ToJson(study) : ToJsonLine(study);
    ASSERT_TRUE(json.ok()) << json.status();
    const std::string colon = multiline ? ": " : ":";
    for (const std::string& member :
         {"\"create_time_ms\"" + colon + "1733000000123",
          "\"seed\"" + colon + "18446744073709551615",
          "\"COMPLETED\"" + colon + "3", "\"min\"" + colon + "-5",
          "\"max\"" + colon + "7", "\"time_ms\"" + colon + "12",
          "\"commit\"" + colon + "\"123\"", std::string("\"42\"")}) {
      EXPECT_THAT(*json, HasSubstr(member)) << *json;
    }
    EXPECT_THAT(*json, Not(HasSubstr(colon + "\"3\"")));
    v1::Study back;
    ASSERT_TRUE(ParseJsonConfig(*json, "study.json", &back).ok()) << *json;
    EXPECT_EQ(back.SerializeAsString(), study.SerializeAsString());
  }
  v1::TrialEvent event;
  event.set_sequence(9);
  event.mutable_trial()->set_id(4);
  absl::StatusOr<std::string> line = ToJsonLine(event);
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(*line, R"({"sequence":9,"trial":{"id":4}})");
}

// Issue 47 item 9: `hypertune watch` said "(killed by signal 9)" of a
// COMPLETED trial: a reason is shown only where it explains the state.
TEST(TrialEventLine, ShowsOnlyTheReasonOfTheTrialsState) {
  v1::TrialEvent event;
  event.set_sequence(7);
  v1::Trial& trial = *event.mutable_trial();
  trial.set_id(3);
  trial.set_state(v1::Trial::COMPLETED);
  trial.set_failure_reason("killed by signal 9");
  trial.set_stop_reason("paused at rung 1");
  trial.mutable_final_measurement()->set_step(4);
  (*trial.mutable_final_measurement()->mutable_metrics())["loss"] = 0.25;
  EXPECT_EQ(TrialEventLine(event, "loss"),
            "#7 trial 3 COMPLETED step 4 loss=0.25");
  trial.set_state(v1::Trial::REQUESTED);
  trial.clear_final_measurement();
  EXPECT_EQ(TrialEventLine(event, "loss"),
            "#7 trial 3 REQUESTED (killed by signal 9)");
  trial.set_state(v1::Trial::PAUSED);
  EXPECT_EQ(TrialEventLine(event, "loss"),
            "#7 trial 3 PAUSED (paused at rung 1)");
  trial.set_state(v1::Trial::ACTIVE);
  EXPECT_EQ(TrialEventLine(event, "loss"), "#7 trial 3 ACTIVE");
  trial.set_state(v1::Trial::INFEASIBLE);
  trial.set_infeasible_reason("out of memory");
  EXPECT_EQ(TrialEventLine(event, "loss"),
            "#7 trial 3 INFEASIBLE (out of memory)");
  trial.set_state(v1::Trial::FAILED);
  EXPECT_EQ(StateReason(trial), "killed by signal 9");
  trial.set_state(v1::Trial::STOPPED);
  EXPECT_EQ(StateReason(trial), "paused at rung 1");
}

// JSON readers take "-0" for the integer 0: the CLI's JSON writes -0.0, and
// reads a person's -0 as -0.0 too.
TEST(Json, NegativeZeroKeepsItsSign) {
  EXPECT_EQ(KeepNegativeZero(R"({"a":-0,"b":[-0],"c":-0.5,"d":-0e1,"e":"-0"})"),
            R"({"a":-0.0,"b":[-0.0],"c":-0.5,"d":-0e1,"e":"-0"})");
  EXPECT_EQ(KeepNegativeZero("-0"), "-0.0");
  EXPECT_EQ(KeepNegativeZero(R"({"s":"a\"-0"})"), R"({"s":"a\"-0"})");
  v1::Study study;
  study.mutable_spec()->add_parameters()->set_name("x");
  study.mutable_spec()->mutable_parameters(0)->mutable_double_spec()->set_min(
      -0.0);
  study.mutable_spec()->mutable_parameters(0)->mutable_double_spec()->set_max(
      1);
  absl::StatusOr<std::string> json = ToJson(study);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"min\": -0.0"));
  v1::Study back;
  ASSERT_TRUE(ParseJsonConfig(*json, "study.json", &back).ok());
  EXPECT_TRUE(std::signbit(back.spec().parameters(0).double_spec().min()));
  // A person's -0, for a double and for an integer field.
  ASSERT_TRUE(ParseJsonConfig(R"({"spec": {"parameters": [{"name": "x",
      "double_spec": {"min": -0, "max": 1}}], "max_trials": -0}})",
                              "study.json", &back)
                  .ok());
  EXPECT_TRUE(std::signbit(back.spec().parameters(0).double_spec().min()));
  EXPECT_EQ(back.spec().max_trials(), 0);
}

TEST(Json, ParseErrorsNameTheSource) {
  v1::Study study;
  absl::Status bad_field =
      ParseJsonConfig(R"({"nmae": "x"})", "study.json", &study);
  EXPECT_EQ(bad_field.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_field.message()), HasSubstr("study.json"));
  EXPECT_THAT(std::string(bad_field.message()), HasSubstr("nmae"));
  absl::Status bad_json = ParseJsonConfig("{", "cfg.json", &study);
  EXPECT_THAT(std::string(bad_json.message()), HasSubstr("cfg.json"));
}

TEST(Json, ExampleStudyConfigsParse) {
  struct Example {
    const char* path;
    v1::Algorithm algorithm;
    const char* first_metric;
  };
  const Example kExamples[] = {
      {"examples/study.json", v1::GP_BANDIT, "loss"},
      {"examples/shell/study.json", v1::QUASI_RANDOM, "loss"},
      {"examples/accuracy_vs_size.json", v1::GP_BANDIT, "val_accuracy"}};
  for (const auto& [path, algorithm, first_metric] : kExamples) {
    std::string full = std::string(HYPERTUNE_SOURCE_DIR) + "/" + path;
    FILE* f = std::fopen(full.c_str(), "r");
    ASSERT_NE(f, nullptr) << full;
    std::string text;
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), f)) > 0;) {
      text.append(buffer, n);
    }
    std::fclose(f);
    v1::Study study;
    absl::Status status = ParseJsonConfig(text, path, &study);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(study.spec().metrics(0).name(), first_metric);
    EXPECT_EQ(study.spec().algorithm(), algorithm) << path;
  }
}

}  // namespace
}  // namespace hypertune::cli
