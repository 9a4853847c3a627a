// The compact trial form (service/http/dashboard_view.h) of what only some
// trials carry: PBT's exploits, in the documented shape and spec order.

#include "service/http/dashboard_view.h"

#include <gtest/gtest.h>

#include <string>

#include "google/protobuf/text_format.h"
#include "nlohmann/json.hpp"

namespace hypertune::service {
namespace {

using json = nlohmann::json;

template <typename T>
T Parse(const std::string& text) {
  T message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message));
  return message;
}

const v1::Study kStudy = Parse<v1::Study>(R"pb(
  name: "pbt"
  spec {
    algorithm: PBT
    parameters { name: "lr" double_spec { min: 0.001 max: 1 } }
    parameters {
      name: "opt"
      categorical_spec { values: "adam" values: "sgd" }
    }
    metrics { name: "acc" goal: MAXIMIZE }
  }
)pb");

json Compact(const v1::Trial& trial) {
  std::string out;
  AppendCompactTrial(kStudy, trial, &out);
  return json::parse(out);
}

TEST(CompactTrialTest, ExploitsInSpecOrder) {
  // Values out of the spec's order, and one parameter missing before.
  const json c = Compact(Parse<v1::Trial>(R"pb(
    id: 5
    state: ACTIVE
    parameters { name: "opt" string_value: "sgd" }
    parameters { name: "lr" double_value: 0.024 }
    exploits {
      number: 1
      step: 4
      time_ms: 99
      donor_trial_id: 2
      checkpoint_uri: "file:///ckpt/2"
      checkpoint_step: 3
      parameters_before { name: "lr" double_value: 0.01 }
      parameters { name: "opt" string_value: "sgd" }
      parameters { name: "lr" double_value: 0.024 }
      value: 0.5
      donor_value: 0.8
    }
  )pb"));
  EXPECT_EQ(c["params"], json::parse(R"([0.024, "sgd"])"));
  ASSERT_EQ(c["exploits"].size(), 1u);
  EXPECT_EQ(c["exploits"][0], json::parse(R"({
      "step": 4, "donor": 2, "checkpoint_step": 3, "time_ms": 99,
      "value": 0.5, "donor_value": 0.8,
      "params_before": [0.01, null], "params": [0.024, "sgd"]})"));
}

TEST(CompactTrialTest, NoExploitsNoKey) {
  const json c = Compact(Parse<v1::Trial>(R"pb(
    id: 1 state: ACTIVE parameters { name: "lr" double_value: 0.5 }
  )pb"));
  EXPECT_EQ(c["params"], json::parse(R"([0.5, null])"));
  EXPECT_FALSE(c.contains("exploits"));
}

}  // namespace
}  // namespace hypertune::service
