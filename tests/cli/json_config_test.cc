// A person's JSON config: errors that say where (line and column, the
// field's path) and what (the valid enum names, the nearest field name).
#include "cli/json_config.h"

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
  const std::string deep = "{\"name\": \"s\",\n \"spec\": " +
                           std::string(100000, '[') + std::string(100000, ']') +
                           "}";
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
  EXPECT_THAT(message, HasSubstr("spec.metrics[0] (\"loss\").goal: unknown Goal"));
  EXPECT_THAT(message, HasSubstr("\"MINIMISE\" (one of MAXIMIZE, MINIMIZE)"));
  EXPECT_THAT(Error(R"({"spec": {"algorithm": "BAYES"}})"),
              HasSubstr("(one of RANDOM, QUASI_RANDOM, GP_BANDIT, TPE)"));
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
  EXPECT_THAT(Error(R"({"spec": {"max_trials": 1.5}})"),
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

TEST(EditDistance, CountsEditsAndTranspositions) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("seed", "seeds"), 1);
  EXPECT_EQ(EditDistance("goal", "gaol"), 1);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

}  // namespace
}  // namespace hypertune::cli
