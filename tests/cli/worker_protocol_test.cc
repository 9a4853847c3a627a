#include "cli/worker/worker_protocol.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hypertune::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

ParameterValues Params() {
  v1::Trial trial;
  auto* lr = trial.add_parameters();
  lr->set_name("lr");
  lr->set_double_value(0.001);
  auto* layers = trial.add_parameters();
  layers->set_name("layers");
  layers->set_int_value(3);
  auto* batch = trial.add_parameters();
  batch->set_name("batch_size");
  batch->set_double_value(64.0);
  auto* opt = trial.add_parameters();
  opt->set_name("optimizer");
  opt->set_string_value("adam");
  return trial.parameters();
}

TEST(ParseMetricsLine, NotAMetricsLine) {
  for (const char* line : {"", "epoch 3 loss 0.2", "hypertune loss=1",
                           "HYPERTUNE: loss=1", "INFO hypertune: loss=1"}) {
    auto parsed = ParseMetricsLine(line);
    ASSERT_TRUE(parsed.ok()) << line;
    EXPECT_FALSE(parsed->has_value()) << line;
  }
}

TEST(ParseMetricsLine, FinalMetrics) {
  auto parsed = ParseMetricsLine("hypertune: loss=0.25 accuracy=0.9\r");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(parsed->has_value());
  EXPECT_FALSE((*parsed)->step.has_value());
  EXPECT_EQ((*parsed)->metrics, (Metrics{{"loss", 0.25}, {"accuracy", 0.9}}));
}

TEST(ParseMetricsLine, StepAnywhereAndBlanks) {
  auto parsed = ParseMetricsLine("  hypertune:\tstep=7   loss=-1.5e-3  ");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(parsed->has_value());
  EXPECT_EQ((*parsed)->step, 7);
  EXPECT_EQ((*parsed)->metrics, (Metrics{{"loss", -1.5e-3}}));
}

TEST(ParseMetricsLine, InfinityAndNaN) {
  auto parsed =
      ParseMetricsLine("hypertune: a=inf b=-Infinity c=NaN d=+2 step=0");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const Metrics& m = (*parsed)->metrics;
  EXPECT_EQ(m.at("a"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(m.at("b"), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(m.at("c")));
  EXPECT_EQ(m.at("d"), 2.0);
  EXPECT_EQ((*parsed)->step, 0);
}

TEST(ParseMetricsLine, MalformedLinesNameTheProblem) {
  struct Case {
    const char* line;
    const char* message;
  };
  for (const Case& c : {
           Case{"hypertune:", "no name=value metric"},
           Case{"hypertune: step=3", "no name=value metric"},
           Case{"hypertune: loss", "\"loss\" is not name=value"},
           Case{"hypertune: =3", "\"=3\" is not name=value"},
           Case{"hypertune: loss=abc",
                "metric \"loss\": \"abc\" is not a number"},
           Case{"hypertune: loss=", "metric \"loss\": \"\" is not a number"},
           Case{"hypertune: loss=1.5x", "is not a number"},
           Case{"hypertune: loss=0x10", "is not a number"},
           Case{"hypertune: loss=1e999", "out of the range"},
           Case{"hypertune: loss=1 loss=2", "metric \"loss\" appears twice"},
           Case{"hypertune: loss=1 step=1.5", "step \"1.5\" is not an integer"},
           Case{"hypertune: loss=1 step=-1", "step \"-1\" is not an integer"},
           Case{"hypertune: loss=1 step=1 step=2", "step appears twice"},
           Case{"hypertune: lo$s=1", "a metric name has"},
       }) {
    auto parsed = ParseMetricsLine(c.line);
    ASSERT_FALSE(parsed.ok()) << c.line;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(c.message))
        << c.line;
  }
}

TEST(ParseDirectiveLine, InfeasibleTakesTheRestOfTheLine) {
  auto parsed =
      ParseDirectiveLine("hypertune: infeasible=CUDA out of memory\r");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(parsed->has_value());
  EXPECT_EQ((*parsed)->kind, DirectiveLine::Kind::kInfeasible);
  EXPECT_EQ((*parsed)->value, "CUDA out of memory");
  parsed = ParseDirectiveLine("  hypertune:\tinfeasible=");
  ASSERT_TRUE(parsed.ok() && parsed->has_value());
  EXPECT_EQ((*parsed)->value, "");
}

TEST(ParseDirectiveLine, CheckpointWithAndWithoutItsStep) {
  auto parsed = ParseDirectiveLine("hypertune: checkpoint=s3://b/t7/e3 step=3");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(parsed->has_value());
  EXPECT_EQ((*parsed)->kind, DirectiveLine::Kind::kCheckpoint);
  EXPECT_EQ((*parsed)->value, "s3://b/t7/e3");
  EXPECT_EQ((*parsed)->step, 3);
  parsed = ParseDirectiveLine("hypertune: checkpoint=/ckpt/t7");
  ASSERT_TRUE(parsed.ok() && parsed->has_value());
  EXPECT_EQ((*parsed)->value, "/ckpt/t7");
  EXPECT_EQ((*parsed)->step, 0);
}

TEST(ParseDirectiveLine, MetricsAndOtherLinesAreNoDirectives) {
  for (const char* line : {"", "checkpoint=/x", "hypertune: loss=1 step=2",
                           "hypertune: infeasible_rate=1"}) {
    auto parsed = ParseDirectiveLine(line);
    ASSERT_TRUE(parsed.ok()) << line;
    EXPECT_FALSE(parsed->has_value()) << line;
  }
}

TEST(ParseDirectiveLine, MalformedCheckpointsNameTheProblem) {
  for (const char* line :
       {"hypertune: checkpoint=", "hypertune: checkpoint=/c step=x",
        "hypertune: checkpoint=/c step=-1", "hypertune: checkpoint=/c loss=1",
        "hypertune: checkpoint=/c step=1 step=2"}) {
    auto parsed = ParseDirectiveLine(line);
    ASSERT_FALSE(parsed.ok()) << line;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(ParseMetricAssignments, ParsesAList) {
  auto metrics = ParseMetricAssignments({"loss=0.5", "acc=1", "ppl=inf"});
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(*metrics,
            (Metrics{{"loss", 0.5},
                     {"acc", 1.0},
                     {"ppl", std::numeric_limits<double>::infinity()}}));
}

TEST(ParseMetricAssignments, RefusesBadOnes) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  for (const Case& c : {
           Case{{}, "no METRIC=VALUE given"},
           Case{{"loss"}, "\"loss\" is not name=value"},
           Case{{"loss=fast"}, "metric \"loss\": \"fast\" is not a number"},
           Case{{"loss=nan"}, "NaN cannot be recorded"},
           Case{{"loss=1", "loss=2"}, "metric \"loss\" is given twice"},
       }) {
    auto metrics = ParseMetricAssignments(c.args);
    ASSERT_FALSE(metrics.ok());
    EXPECT_EQ(metrics.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(metrics.status().message()), HasSubstr(c.message));
  }
}

TEST(DoubleText, ShortestRoundTrip) {
  EXPECT_EQ(DoubleText(0.1), "0.1");
  EXPECT_EQ(DoubleText(64.0), "64");
  EXPECT_EQ(DoubleText(1e-5), "1e-05");
  EXPECT_EQ(DoubleText(-2.5), "-2.5");
  double third = 1.0 / 3.0;
  EXPECT_EQ(std::stod(DoubleText(third)), third);
  EXPECT_EQ(DoubleText(third), "0.3333333333333333");
}

TEST(SubstituteParameters, ReplacesKnownNamesOnly) {
  ParameterValues params = Params();
  EXPECT_EQ(SubstituteParameters("--lr={lr}", params), "--lr=0.001");
  EXPECT_EQ(SubstituteParameters("{layers}", params), "3");
  EXPECT_EQ(SubstituteParameters("{batch_size}", params), "64");
  EXPECT_EQ(SubstituteParameters("opt-{optimizer}.cfg", params),
            "opt-adam.cfg");
  EXPECT_EQ(SubstituteParameters("{lr}/{layers}/{lr}", params),
            "0.001/3/0.001");
  // Unknown names, empty braces and unclosed braces stay as they are.
  EXPECT_EQ(SubstituteParameters("{x}", params), "{x}");
  EXPECT_EQ(SubstituteParameters("{}", params), "{}");
  EXPECT_EQ(SubstituteParameters("{lr", params), "{lr");
  EXPECT_EQ(SubstituteParameters("a}{lr}{", params), "a}0.001{");
  EXPECT_EQ(SubstituteParameters("{{lr}}", params), "{0.001}");
  EXPECT_EQ(SubstituteParameters("plain", params), "plain");
}

TEST(ParametersJson, TypesAndOrder) {
  std::string json = ParametersJson(Params());
  EXPECT_EQ(json,
            R"({"lr":0.001,"layers":3,"batch_size":64.0,"optimizer":"adam"})");
  auto parsed = nlohmann::json::parse(json);
  EXPECT_TRUE(parsed["layers"].is_number_integer());
  EXPECT_TRUE(parsed["lr"].is_number_float());
  EXPECT_EQ(parsed["lr"].get<double>(), 0.001);
}

TEST(ParametersJson, ShortestRoundTripDoubles) {
  v1::Trial trial;
  auto* p = trial.add_parameters();
  p->set_name("x");
  p->set_double_value(0.1 + 0.2);  // 0.30000000000000004
  auto* big = trial.add_parameters();
  big->set_name("n");
  big->set_int_value(int64_t{1} << 53);
  std::string json = ParametersJson(trial.parameters());
  EXPECT_EQ(json, R"({"x":0.30000000000000004,"n":9007199254740992})");
  EXPECT_EQ(nlohmann::json::parse(json)["x"].get<double>(), 0.1 + 0.2);
}

TEST(ParametersJson, EmptyAndEscaped) {
  EXPECT_EQ(ParametersJson({}), "{}");
  v1::Trial trial;
  auto* p = trial.add_parameters();
  p->set_name("act");
  p->set_string_value("say \"hi\"");
  EXPECT_EQ(ParametersJson(trial.parameters()), R"({"act":"say \"hi\""})");
}

TEST(Placeholders, OnlyParameterLikeNamesInBraces) {
  EXPECT_THAT(Placeholders("--lr={lr} --n={layers}"),
              ElementsAre("lr", "layers"));
  EXPECT_THAT(Placeholders("{{lr}}"), ElementsAre("lr"));
  EXPECT_THAT(Placeholders("{\"a\": 1} {} { x } {1abc} ${HOME}"), IsEmpty());
  EXPECT_THAT(Placeholders("no braces"), IsEmpty());
}

TEST(CheckPlaceholders, NamesTheUnknownOneAndTheParameters) {
  v1::StudySpec spec;
  spec.add_parameters()->set_name("lr");
  spec.add_parameters()->set_name("layers");
  EXPECT_TRUE(
      CheckPlaceholders({"train.py", "--lr={lr}", "{layers}"}, spec).ok());
  absl::Status s =
      CheckPlaceholders({"train.py", "--lr={lr}", "--bs={batch}"}, spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("{batch} in argument 2"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("its parameters: lr, layers"));
}

}  // namespace
}  // namespace hypertune::cli
