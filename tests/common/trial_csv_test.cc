// The CSV form of trials: RFC 4180 quoting, fixed columns, then parameters
// and metrics by spec.
#include "common/trial_csv.h"

#include <limits>

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace hypertune {
namespace {

TEST(CsvFieldTest, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField(""), "");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(CsvField("cr\r"), "\"cr\r\"");
  EXPECT_EQ(CsvField(" padded"), "\" padded\"");
  EXPECT_EQ(CsvField("inner space"), "inner space");
}

// OWASP's CSV injection advice: a text cell a spreadsheet would run as a
// formula is quoted behind a single quote.
TEST(CsvFieldTest, GuardsTextThatBeginsLikeAFormula) {
  EXPECT_EQ(CsvField("=HYPERLINK(\"http://x\")"),
            "\"'=HYPERLINK(\"\"http://x\"\")\"");
  EXPECT_EQ(CsvField("+1"), "\"'+1\"");
  EXPECT_EQ(CsvField("-1"), "\"'-1\"");
  EXPECT_EQ(CsvField("@SUM(A1)"), "\"'@SUM(A1)\"");
  EXPECT_EQ(CsvField("\tcmd"), "\"'\tcmd\"");
  EXPECT_EQ(CsvField("\rcmd"), "\"'\rcmd\"");
  // A leading quote that a reader would take for the guard is guarded too.
  EXPECT_EQ(CsvField("'=x"), "\"''=x\"");
  EXPECT_EQ(CsvField("''"), "\"'''\"");
  // Elsewhere in the text these characters are harmless.
  EXPECT_EQ(CsvField("a=b-c"), "a=b-c");
  EXPECT_EQ(CsvField("'quoted'"), "'quoted'");
  EXPECT_EQ(CsvField("'"), "'");
}

TEST(DoubleTextTest, KeepsTheSignOfNegativeZero) {
  EXPECT_EQ(DoubleText(-0.0), "-0");
  EXPECT_EQ(DoubleText(0.0), "0");
  EXPECT_EQ(DoubleText(-1.5), "-1.5");
}

TEST(DoubleTextTest, ShortestRoundTrip) {
  EXPECT_EQ(DoubleText(0.1), "0.1");
  EXPECT_EQ(DoubleText(3.0), "3");
  EXPECT_EQ(DoubleText(1e-300), "1e-300");
  EXPECT_EQ(DoubleText(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(DoubleText(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(CsvRowTest, ColumnsFollowTheSpec) {
  v1::Study study;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        name: "s"
        spec {
          parameters {
            name: "lr"
            double_spec { min: 0 max: 1 }
          }
          parameters {
            name: "n"
            integer_spec { min: 1 max: 9 }
          }
          parameters {
            name: "act,x"
            categorical_spec { values: [ "a\"b" ] }
          }
          metrics { name: "loss" goal: MINIMIZE }
          metrics { name: "acc" goal: MAXIMIZE }
        })pb",
      &study));
  v1::Trial trial;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        id: 7
        state: COMPLETED
        client_id: "w,1"
        create_time_ms: 5
        parameters { name: "lr" double_value: 0.25 }
        parameters { name: "n" int_value: 3 }
        parameters { name: "act,x" string_value: "a\"b" }
        measurements {
          step: 4
          metrics { key: "loss" value: 1 }
        }
        final_measurement {
          step: 4
          metrics { key: "loss" value: 0.5 }
        })pb",
      &trial));
  std::string out;
  AppendCsvHeader(study, &out);
  EXPECT_EQ(
      out,
      "id,state,client_id,create_time_ms,start_time_ms,end_time_ms,"
      "retry_count,preemption_count,measurements,last_step,device_seconds,cost,"
      "infeasible_reason,failure_reason,feasible,param:lr,param:n,"
      "\"param:act,x\",metric:loss,metric:acc\r\n");
  out.clear();
  AppendCsvRow(study, trial, &out);
  EXPECT_EQ(
      out,
      "7,COMPLETED,\"w,1\",5,0,0,0,0,1,4,0,0,,,,0.25,3,\"a\"\"b\",0.5,\r\n");
  trial.set_feasible(false);
  out.clear();
  AppendCsvRow(study, trial, &out);
  EXPECT_EQ(out,
            "7,COMPLETED,\"w,1\",5,0,0,0,0,1,4,0,0,,,false,0.25,3,\"a\"\"b\",0."
            "5,\r\n");
}

// Text cells (client id, reasons, category values) are guarded; numbers,
// negative ones and -0 included, stay numbers.
TEST(CsvRowTest, GuardsFormulasInTextButNotNegativeNumbers) {
  v1::Study study;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        name: "s"
        spec {
          parameters {
            name: "x"
            double_spec { min: -2 max: 2 }
          }
          parameters {
            name: "n"
            integer_spec { min: -9 max: 9 }
          }
          parameters {
            name: "act"
            categorical_spec { values: [ "=1+1", "relu" ] }
          }
          metrics { name: "loss" goal: MINIMIZE }
        })pb",
      &study));
  v1::Trial trial;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        id: 3
        state: INFEASIBLE
        client_id: "@host"
        infeasible_reason: "-nan loss"
        failure_reason: "+retry"
        parameters { name: "x" double_value: -1.5 }
        parameters { name: "n" int_value: -4 }
        parameters { name: "act" string_value: "=1+1" }
        final_measurement { metrics { key: "loss" value: -0.0 } }
        device_seconds: -0.0
      )pb",
      &trial));
  std::string out;
  AppendCsvRow(study, trial, &out);
  EXPECT_EQ(out,
            "3,INFEASIBLE,\"'@host\",0,0,0,0,0,0,0,-0,0,\"'-nan loss\","
            "\"'+retry\",,-1.5,-4,\"'=1+1\",-0\r\n");
}

}  // namespace
}  // namespace hypertune
