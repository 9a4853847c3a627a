// The CSV form of trials: RFC 4180 quoting, fixed columns, then parameters
// and metrics by spec.
#include "service/trial_csv.h"

#include <limits>

#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace hypertune::service {
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

TEST(FormatDoubleTest, ShortestRoundTrip) {
  EXPECT_EQ(FormatDouble(0.1), "0.1");
  EXPECT_EQ(FormatDouble(3), "3");
  EXPECT_EQ(FormatDouble(1e-300), "1e-300");
  EXPECT_EQ(FormatDouble(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(FormatDouble(-std::numeric_limits<double>::infinity()), "-inf");
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
  EXPECT_EQ(out,
            "id,state,client_id,create_time_ms,start_time_ms,end_time_ms,"
            "retry_count,measurements,last_step,device_seconds,cost,"
            "infeasible_reason,failure_reason,feasible,param:lr,param:n,"
            "\"param:act,x\",metric:loss,metric:acc\r\n");
  out.clear();
  AppendCsvRow(study, trial, &out);
  EXPECT_EQ(out,
            "7,COMPLETED,\"w,1\",5,0,0,0,1,4,0,0,,,,0.25,3,\"a\"\"b\",0.5,\r\n");
  trial.set_feasible(false);
  out.clear();
  AppendCsvRow(study, trial, &out);
  EXPECT_EQ(out,
            "7,COMPLETED,\"w,1\",5,0,0,0,1,4,0,0,,,false,0.25,3,\"a\"\"b\",0.5,\r\n");
}

}  // namespace
}  // namespace hypertune::service
