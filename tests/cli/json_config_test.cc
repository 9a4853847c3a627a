// A person's JSON config: errors that say where (line and column, the
// field's path) and what (the valid enum names, the nearest field name).
#include "cli/json_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::cli {
namespace {

using ::testing::HasSubstr;

std::string Error(std::string_view json) {
  v1::Study study;
  absl::Status s = ParseJsonConfig(json, "study.json", &study);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << json;
  return std::string(s.message());
}

TEST(ParseJsonConfig, ASyntaxErrorHasItsLineAndColumn) {
  EXPECT_THAT(Error("{\n  \"name\": \"s\",\n  \"spec\": {,}\n}\n"),
              HasSubstr("study.json: not valid JSON (line 3, column 12)"));
  EXPECT_THAT(Error("{\"name\": \"s\""),
              HasSubstr("study.json: not valid JSON (line 1, column 13)"));
}

TEST(ParseJsonConfig, RefusesNestingPastTheLimitWithItsLine) {
  // Inside a field, past the limit: an error, not a stack overflow.
  const std::string deep =
      "{\"name\": \"s\",\n \"spec\": " + std::string(100000, '[') +
      std::string(100000, ']') + "}";
  EXPECT_THAT(Error(deep),
              HasSubstr("study.json: JSON nested deeper than 100 levels "
                        "(line 2, column 109)"));
  EXPECT_THAT(Error(std::string(100000, '[')),
              HasSubstr("nested deeper than 100 levels (line 1, column 101)"));
}

TEST(JsonTooDeepAt, CountsArraysAndObjectsOutsideStrings) {
  EXPECT_EQ(JsonTooDeepAt("[[{}]]", 3), std::nullopt);
  EXPECT_EQ(JsonTooDeepAt("[[{}]]", 2), 2u);
  EXPECT_EQ(JsonTooDeepAt("[\"[[[\\\"[[\"]", 1), std::nullopt);
  EXPECT_EQ(JsonTooDeepAt("[][][]", 1), std::nullopt);
}

TEST(ParseJsonConfig, AnEnumTypoListsTheValidNames) {
  std::string message = Error(R"({"spec": {"metrics": [
      {"name": "loss", "goal": "MINIMISE"}]}})");
  EXPECT_THAT(message,
              HasSubstr("spec.metrics[0] (\"loss\").goal: unknown Goal"));
  EXPECT_THAT(message, HasSubstr("\"MINIMISE\" (one of MAXIMIZE, MINIMIZE)"));
  EXPECT_THAT(
      Error(R"({"spec": {"algorithm": "BAYES"}})"),
      HasSubstr("(one of RANDOM, QUASI_RANDOM, GP_BANDIT, TPE, GRID, PBT)"));
}

TEST(ParseJsonConfig, AnUnknownFieldSuggestsTheNearest) {
  EXPECT_THAT(Error(R"({"spec": {"max_trial": 3}})"),
              HasSubstr("spec.max_trial: unknown field \"max_trial\" (did you "
                        "mean \"max_trials\"?)"));
  EXPECT_THAT(Error(R"({"spec": {"parameters": [{"name": "lr",
                    "double_spec": {"min": 0, "maks": 1}}]}})"),
              HasSubstr("spec.parameters[0] (\"lr\").double_spec.maks: unknown "
                        "field \"maks\" (did you mean \"max\"?)"));
  EXPECT_THAT(Error(R"({"nmae": "x"})"), HasSubstr("did you mean \"name\"?"));
  EXPECT_THAT(Error(R"({"spec": {"zzzzzzzzzz": 1}})"),
              HasSubstr("unknown field \"zzzzzzzzzz\" (known: parameters,"));
}

TEST(ParseJsonConfig, WrongTypesNameTheField) {
  EXPECT_THAT(
      Error(R"({"spec": {"max_trials": 1.5}})"),
      HasSubstr("spec.max_trials: expected an integer, got number 1.5"));
  EXPECT_THAT(Error(R"({"spec": {"parameters": {"name": "x"}}})"),
              HasSubstr("spec.parameters: expected a list, got object"));
  EXPECT_THAT(Error(R"({"name": 3})"),
              HasSubstr("name: expected a string, got number 3"));
  EXPECT_THAT(Error("[1, 2]"), HasSubstr("expected a JSON object"));
}

TEST(ParseJsonConfig, ValidConfigsParseInBothNamingStyles) {
  v1::Study study;
  ASSERT_TRUE(ParseJsonConfig(R"({"name": "s", "spec": {
      "parameters": [{"name": "lr", "doubleSpec": {"min": 1e-4, "max": 1,
                      "scale": "LOG"}}],
      "metrics": [{"name": "loss", "goal": 2}],
      "max_trials": "20", "maxParallelTrials": 4}})",
                              "study.json", &study)
                  .ok());
  EXPECT_EQ(study.spec().max_trials(), 20);
  EXPECT_EQ(study.spec().max_parallel_trials(), 4);
  EXPECT_EQ(study.spec().parameters(0).double_spec().scale(), v1::LOG);
  EXPECT_EQ(study.spec().metrics(0).goal(), v1::MetricSpec::MINIMIZE);
}

// Issue 47 item 9: three typos took three runs to find, one per run.
TEST(ParseJsonConfig, ListsEveryProblemInOneAnswer) {
  const std::string message = Error(R"({"nmae": "s", "spec": {
      "parameters": [{"name": "lr", "double_spec": {"min": 0, "maks": 1}}],
      "metrics": [{"name": "loss", "goal": "MINIMISE"}],
      "max_trial": 3}})");
  EXPECT_THAT(message, HasSubstr("study.json: 4 problems:\n"));
  EXPECT_THAT(message, HasSubstr("\n  nmae: unknown field \"nmae\" (did you "
                                 "mean \"name\"?)"));
  EXPECT_THAT(message, HasSubstr("\n  spec.parameters[0] (\"lr\").double_spec."
                                 "maks: unknown field \"maks\" (did you mean "
                                 "\"max\"?)"));
  EXPECT_THAT(message, HasSubstr("\n  spec.metrics[0] (\"loss\").goal: "
                                 "unknown Goal string \"MINIMISE\""));
  EXPECT_THAT(message, HasSubstr("\n  spec.max_trial: unknown field "
                                 "\"max_trial\" (did you mean "
                                 "\"max_trials\"?)"));
  // In the order of the text.
  EXPECT_LT(message.find("nmae:"), message.find("maks:"));
  EXPECT_LT(message.find("maks:"), message.find("goal:"));
  EXPECT_LT(message.find("goal:"), message.find("max_trial:"));
}

TEST(ParseJsonConfig, AKeyGivenTwiceIsRefusedNamingBoth) {
  EXPECT_EQ(Error(R"({"spec": {"maxTrials": 3, "max_trials": 4}})"),
            "study.json: spec: \"maxTrials\" and \"max_trials\" both set "
            "max_trials; keep one");
  EXPECT_EQ(Error(R"({"spec": {"max_trials": 3, "max_trials": 4}})"),
            "study.json: spec: \"max_trials\" is given twice; keep one");
  EXPECT_EQ(Error(R"({"name": "a", "name": "b"})"),
            "study.json: \"name\" is given twice; keep one");
  // Inside a list, and both ways at once.
  const std::string message = Error(R"({"spec": {"parameters": [
      {"name": "x", "categorical_spec": {"values": ["a"]}},
      {"name": "y", "name": "z", "doubleSpec": {"min": 0, "max": 1},
       "double_spec": {"min": 0, "max": 2}}]}})");
  EXPECT_THAT(message, HasSubstr("2 problems"));
  EXPECT_THAT(message, HasSubstr("spec.parameters[1]: \"name\" is given "
                                 "twice; keep one"));
  EXPECT_THAT(message, HasSubstr("spec.parameters[1] (\"z\"): \"doubleSpec\" "
                                 "and \"double_spec\" both set double_spec"));
}

TEST(ParseJsonConfig, TwoMembersOfAOneofAreRefused) {
  EXPECT_THAT(Error(R"({"spec": {"parameters": [{"name": "x",
                    "double_spec": {"min": 0, "max": 1},
                    "integer_spec": {"min": 0, "max": 1}}]}})"),
              HasSubstr("spec.parameters[0] (\"x\"): \"double_spec\" and "
                        "\"integer_spec\" are both set, but only one of kind "
                        "may be"));
}

std::string StudyError(std::string_view json) {
  v1::Study study;
  absl::Status s = ParseStudyConfig(json, "study.json", &study);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << json;
  return std::string(s.message());
}

TEST(ParseStudyConfig, ListsWhatTheStudyLacksWithItsTypos) {
  const std::string message = StudyError(R"({"spec": {
      "parameters": [
        {"name": "lr", "double_spec": {"min": 0.1, "max": 0.01}},
        {"name": "n", "integer_spec": {"min": 0, "max": 8, "scale": "LOG"}},
        {"name": "width"},
        {"double_spec": {"min": 1}}],
      "metrics": [{"name": "loss"}, {"goal": "MINIMIZE"}],
      "max_trail": 5}})");
  EXPECT_THAT(message, HasSubstr("study.json: 9 problems:\n"));
  for (const char* problem :
       {"\n  spec.max_trail: unknown field \"max_trail\" (did you mean "
        "\"max_trials\"?)",
        "\n  name: missing: the study's name",
        "\n  spec.parameters[0] (\"lr\").double_spec: min 0.1 exceeds max "
        "0.01",
        "\n  spec.parameters[1] (\"n\").integer_spec: a LOG scale needs "
        "min > 0, got 0",
        "\n  spec.parameters[2] (\"width\"): missing: one of double_spec, "
        "integer_spec, discrete_spec or categorical_spec",
        "\n  spec.parameters[3].name: missing",
        "\n  spec.parameters[3].double_spec.max: missing",
        "\n  spec.metrics[0] (\"loss\").goal: missing: MINIMIZE or MAXIMIZE",
        "\n  spec.metrics[1].name: missing"}) {
    EXPECT_THAT(message, HasSubstr(problem));
  }
  EXPECT_EQ(StudyError(R"({"name": "s"})"),
            "study.json: spec: missing: the parameters, metrics and budget");
  EXPECT_THAT(StudyError(R"({"name": "s", "spec": {"parameters": [],
                         "metrics": [{"name": "m", "role": "RECORDED"}]}})"),
              HasSubstr("spec.parameters: missing: at least one parameter"));
  EXPECT_THAT(StudyError(R"({"name": "s", "spec": {"parameters": [
                {"name": "x", "discrete_spec": {"values": [1]}}]}})"),
              HasSubstr("spec.metrics: missing: at least one metric"));
}

TEST(ParseStudyConfig, OnlyObjectivesNeedAGoal) {
  v1::Study study;
  EXPECT_TRUE(ParseStudyConfig(R"({"name": "s", "spec": {
      "parameters": [{"name": "x", "categoricalSpec": {"values": ["a"]}}],
      "metrics": [{"name": "loss", "goal": "MINIMIZE"}, {"name": "t"}]}})",
                               "study.json", &study)
                  .ok());
  EXPECT_THAT(StudyError(R"({"name": "s", "spec": {
      "parameters": [{"name": "x", "categoricalSpec": {"values": ["a"]}}],
      "metrics": [{"name": "t", "role": "RECORDED"},
                  {"name": "loss", "role": "OBJECTIVE"}]}})"),
              HasSubstr("spec.metrics[1] (\"loss\").goal: missing"));
}

TEST(ParseStudyConfig, TheExamplesAreWholeStudies) {
  for (const char* path :
       {"examples/study.json", "examples/shell/study.json",
        "examples/accuracy_vs_size.json", "examples/fashion_mnist/study.json",
        "examples/pytorch_fashion_mnist/study.json"}) {
    std::ifstream file(std::filesystem::path(HYPERTUNE_SOURCE_DIR) / path);
    std::stringstream text;
    text << file.rdbuf();
    ASSERT_FALSE(text.str().empty()) << path;
    v1::Study study;
    absl::Status status = ParseStudyConfig(text.str(), path, &study);
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(EditDistance, CountsEditsAndTranspositions) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("seed", "seeds"), 1);
  EXPECT_EQ(EditDistance("goal", "gaol"), 1);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

}  // namespace
}  // namespace hypertune::cli
