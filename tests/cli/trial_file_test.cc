// The files of `hypertune export|import|trials import` (cli/trial_file.h).
#include "cli/trial_file.h"

#include <cmath>

#include "cli/format.h"
#include "cli/json_config.h"
#include "common/trial_csv.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace hypertune::cli {
namespace {

using ::testing::HasSubstr;

v1::Study TestStudy() {
  v1::Study study;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    name: "s"
    spec {
      parameters { name: "lr" double_spec { min: 0.001 max: 1 scale: LOG } }
      parameters { name: "layers" integer_spec { min: 1 max: 8 } }
      parameters { name: "opt" categorical_spec { values: [ "adam", "sgd" ] } }
      metrics { name: "loss" goal: MINIMIZE }
    })pb",
                                                &study);
  return study;
}

TEST(ExportLine, MapsAreOrderedByKeyAndLinesAreStable) {
  v1::Trial trial;
  trial.set_id(3);
  for (const char* name : {"zeta", "alpha", "mid", "beta", "omega"}) {
    (*trial.mutable_final_measurement()->mutable_metrics())[name] = 1.5;
  }
  absl::StatusOr<std::string> line = ExportLine(trial);
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(line->find('\n'), std::string::npos);
  EXPECT_LT(line->find("alpha"), line->find("beta"));
  EXPECT_LT(line->find("mid"), line->find("omega"));
  EXPECT_LT(line->find("omega"), line->find("zeta"));
  EXPECT_THAT(*line, HasSubstr("\"id\":\"3\""));
  v1::Trial parsed;
  ASSERT_TRUE(ParseJsonConfig(*line, "line", &parsed).ok());
  EXPECT_EQ(*ExportLine(parsed), *line);
}

// -0 is a number of its own (a loss of -0.0 printed as 0 is another value):
// the export keeps its sign, in fields and in metric maps.
TEST(ExportLine, KeepsTheSignOfNegativeZero) {
  v1::Trial trial;
  trial.set_id(1);
  trial.set_device_seconds(-0.0);
  trial.add_parameters()->set_name("x");
  trial.mutable_parameters(0)->set_double_value(-0.0);
  (*trial.mutable_final_measurement()->mutable_metrics())["loss"] = -0.0;
  absl::StatusOr<std::string> line = ExportLine(trial);
  ASSERT_TRUE(line.ok());
  EXPECT_THAT(*line, HasSubstr("\"device_seconds\":-0"));
  EXPECT_THAT(*line, HasSubstr("\"double_value\":-0"));
  EXPECT_THAT(*line, HasSubstr("\"loss\":-0"));
  v1::Trial parsed;
  ASSERT_TRUE(ParseJsonConfig(*line, "line", &parsed).ok());
  EXPECT_TRUE(std::signbit(parsed.device_seconds()));
  EXPECT_TRUE(std::signbit(parsed.parameters(0).double_value()));
  EXPECT_TRUE(std::signbit(parsed.final_measurement().metrics().at("loss")));
}

TEST(ParseExportFile, NamesTheLineOfAMalformedTrial) {
  const std::string text =
      "{\"name\":\"s\"}\n{\"id\":\"1\"}\n\n{\"id\": oops}\n";
  absl::StatusOr<ExportFile> file = ParseExportFile(text, "study.jsonl");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(file.status().message()),
              HasSubstr("study.jsonl:4:"));
  file = ParseExportFile("{\"name\":\"s\"}\n{\"id\":\"1\"}\n", "f");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->study.name(), "s");
  ASSERT_EQ(file->trial_lines.size(), 1u);
  EXPECT_EQ(file->trial_lines[0], 2);
}

// 100,000 '[' once overflowed the stack (the JSON library prints and our
// checks walk a value recursively); now a clear error before any parser.
TEST(ParseExportFile, RefusesJsonNestedTooDeepWithItsLine) {
  const std::string text =
      "{\"name\":\"s\"}\n" + std::string(100000, '[') + "\n";
  absl::StatusOr<ExportFile> file = ParseExportFile(text, "deep.jsonl");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(file.status().message()),
              HasSubstr("deep.jsonl:2: JSON nested deeper than 100 levels "
                        "(line 1, column 101)"));
  std::string deep(100000, '[');
  deep += '\n';
  file = ParseExportFile(deep, "deep.jsonl");
  EXPECT_THAT(std::string(file.status().message()), HasSubstr("deep.jsonl:1:"));
  absl::StatusOr<TrialFile> trials =
      ParseTrialFile(std::string(100000, '{') + std::string(100000, '}'),
                     "deep.json", TestStudy());
  EXPECT_EQ(trials.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(trials.status().message()),
              HasSubstr("deep.json:1: JSON nested deeper than 100 levels"));
}

TEST(ParseTrialFile, ReadsTheCliCsv) {
  const std::string text =
      "id,state,lr,layers,opt,loss,acc,step,elapsed_seconds,client_id,"
      "infeasible_reason\n"
      "1,COMPLETED,0.01,3,adam,0.5,0.9,10,12.5,w1,\n"
      "2,INFEASIBLE,0.5,2,sgd,,,,,w1,\"out of memory, again\"\n"
      "3,COMPLETED,0.02,4,\"sgd\",inf,,3,,w2,\n";
  absl::StatusOr<TrialFile> file = ParseTrialFile(text, "t.csv", TestStudy());
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->trials.size(), 2u);
  EXPECT_EQ(file->lines, (std::vector<int>{2, 4}));
  EXPECT_EQ(file->skipped_lines, (std::vector<int>{3}));
  const v1::Trial& t = file->trials[0];
  ASSERT_EQ(t.parameters_size(), 3);
  EXPECT_EQ(t.parameters(0).double_value(), 0.01);
  EXPECT_EQ(t.parameters(1).int_value(), 3);
  EXPECT_EQ(t.parameters(2).string_value(), "adam");
  EXPECT_EQ(t.final_measurement().metrics().at("loss"), 0.5);
  EXPECT_EQ(t.final_measurement().metrics().at("acc"), 0.9);
  EXPECT_EQ(t.final_measurement().step(), 10);
  EXPECT_EQ(t.final_measurement().elapsed_seconds(), 12.5);
  EXPECT_TRUE(
      std::isinf(file->trials[1].final_measurement().metrics().at("loss")));
}

// The CSV export guards text that begins like a formula (service/
// trial_csv.h); reading it back gives the text as it was, and -0 stays -0.
TEST(ParseTrialFile, ReadsBackGuardedCategoriesAndNegativeZero) {
  v1::Study study;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    name: "s"
    spec {
      parameters { name: "x" double_spec { min: -1 max: 1 } }
      parameters {
        name: "op"
        categorical_spec { values: [ "=1+1", "'=x", "-relu", "''", "'a,b" ] }
      }
      metrics { name: "loss" goal: MINIMIZE }
    })pb",
                                                            &study));
  std::string csv;
  AppendCsvHeader(study, &csv);
  const std::vector<std::string> categories = {"=1+1", "'=x", "-relu", "''",
                                               "'a,b"};
  for (const std::string& category : categories) {
    v1::Trial trial;
    trial.set_state(v1::Trial::COMPLETED);
    trial.add_parameters()->set_name("x");
    trial.mutable_parameters(0)->set_double_value(-0.0);
    trial.add_parameters()->set_name("op");
    trial.mutable_parameters(1)->set_string_value(category);
    (*trial.mutable_final_measurement()->mutable_metrics())["loss"] = -0.0;
    AppendCsvRow(study, trial, &csv);
  }
  absl::StatusOr<TrialFile> file = ParseTrialFile(csv, "t.csv", study);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->trials.size(), categories.size());
  for (size_t i = 0; i < categories.size(); ++i) {
    const v1::Trial& t = file->trials[i];
    EXPECT_EQ(t.parameters(1).string_value(), categories[i]);
    EXPECT_TRUE(std::signbit(t.parameters(0).double_value()));
    EXPECT_TRUE(std::signbit(t.final_measurement().metrics().at("loss")));
  }
}

TEST(ParseTrialFile, ReadsPrefixedColumns) {
  const std::string text =
      "id,state,client_id,param:lr,param:layers,param:opt,metric:loss\n"
      "1,COMPLETED,w,0.1,2,sgd,0.25\n";
  absl::StatusOr<TrialFile> file = ParseTrialFile(text, "t.csv", TestStudy());
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->trials.size(), 1u);
  EXPECT_EQ(file->trials[0].final_measurement().metrics().at("loss"), 0.25);
}

TEST(ParseTrialFile, CsvErrorsNameTheLineAndField) {
  absl::StatusOr<TrialFile> file =
      ParseTrialFile("lr,layers,opt,loss\n0.1,2,adam,0.5\n0.1,two,adam,0.5\n",
                     "t.csv", TestStudy());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(file.status().message()),
              HasSubstr("t.csv:3: layers: \"two\" is not an integer"));
  file = ParseTrialFile("lr,layers,opt,loss\n0.1,2,adam,lots\n", "t.csv",
                        TestStudy());
  EXPECT_THAT(std::string(file.status().message()),
              HasSubstr("t.csv:2: loss: \"lots\" is not a number"));
  file = ParseTrialFile("lr,loss\n0.1\n", "t.csv", TestStudy());
  EXPECT_THAT(std::string(file.status().message()), HasSubstr("t.csv:2:"));
}

TEST(ParseTrialFile, ReadsTheCliJsonDocumentAndJsonLines) {
  const std::string document =
      "{\"trials\": [\n"
      "{\n  \"id\": \"1\",\n  \"state\": \"COMPLETED\",\n"
      "  \"parameters\": [{\"name\": \"lr\", \"double_value\": 0.1}],\n"
      "  \"final_measurement\": {\"metrics\": {\"loss\": 1}}\n},\n"
      "{\n  \"id\": \"2\",\n  \"state\": \"ACTIVE\"\n},\n"
      "{\n  \"id\": \"3\",\n  \"state\": \"COMPLETED\",\n"
      "  \"final_measurement\": {\"metrics\": {\"loss\": 2}}\n}\n]}\n";
  absl::StatusOr<TrialFile> file =
      ParseTrialFile(document, "t.json", TestStudy());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->lines, (std::vector<int>{2, 12}));
  EXPECT_EQ(file->skipped_lines, (std::vector<int>{8}));
  EXPECT_EQ(file->trials[0].parameters(0).double_value(), 0.1);

  file = ParseTrialFile(
      "{\"final_measurement\": {\"metrics\": {\"loss\": 1}}}\n"
      "{\"final_measurement\": {\"metrics\": {\"loss\": oops}}}\n",
      "t.jsonl", TestStudy());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(file.status().message()), HasSubstr("t.jsonl:2:"));
}

TEST(AtFileLine, TurnsATrialIndexIntoItsLine) {
  absl::Status s = AtFileLine(
      absl::InvalidArgumentError("trials[2].parameters: \"x\" is out of range"),
      "f.csv", [](int i) { return i * 10; });
  EXPECT_EQ(s.message(), "f.csv:20: parameters: \"x\" is out of range");
  s = AtFileLine(absl::NotFoundError("study \"s\" not found"), "f.csv",
                 [](int i) { return i; });
  EXPECT_EQ(s.message(), "study \"s\" not found");
}

}  // namespace
}  // namespace hypertune::cli
