// The server's one Optuna mapping (service/rpc/optuna_space.h), its info
// (server_info.h) and metric roles, against the fixtures every client runs
// (testing/fixtures/README.md). Each Optuna space is inferred with the
// trials' parameters in the fixture's (alphabetical) order, reversed and
// shuffled, and with the trials reversed: the answer must not change.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/limits.h"
#include "service/rpc/optuna_space.h"
#include "service/rpc/server_info.h"
#include "service/rpc/validation.h"

namespace hypertune::service {
namespace {

using Json = nlohmann::json;

const std::filesystem::path kFixtures =
    std::filesystem::path(HYPERTUNE_SOURCE_DIR) / "testing" / "fixtures";

Json ReadJson(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return Json::parse(text.str());
}

template <typename Message>
Message FromJson(const Json& json) {
  Message message;
  const auto status =
      google::protobuf::util::JsonStringToMessage(json.dump(), &message);
  EXPECT_TRUE(status.ok()) << status << " in " << json.dump();
  return message;
}

// A spec as the server writes it: a linear scale left unset.
v1::ParameterSpec Normalized(v1::ParameterSpec spec) {
  if (spec.has_double_spec() && spec.double_spec().scale() == v1::LINEAR) {
    spec.mutable_double_spec()->clear_scale();
  }
  if (spec.has_integer_spec() && spec.integer_spec().scale() == v1::LINEAR) {
    spec.mutable_integer_spec()->clear_scale();
  }
  return spec;
}

void ExpectAnswer(const Json& expected,
                  const v1::InferOptunaSpaceResponse& answer,
                  const std::vector<int>& trial_order,
                  const std::string& variant) {
  SCOPED_TRACE(variant);
  const Json& parameters = expected.at("parameters");
  ASSERT_EQ(answer.parameters_size(), static_cast<int>(parameters.size()));
  for (int i = 0; i < answer.parameters_size(); ++i) {
    const v1::ParameterSpec want =
        Normalized(FromJson<v1::ParameterSpec>(parameters[i]));
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
        want, answer.parameters(i).spec()))
        << "parameter " << i << ": want " << want.ShortDebugString()
        << "\n got " << answer.parameters(i).spec().ShortDebugString();
    EXPECT_EQ(answer.parameters(i).optuna_name(),
              expected.at("optuna_names")[i].get<std::string>());
  }
  std::set<std::string> left_out;
  for (const auto& l : answer.left_out()) left_out.insert(l.optuna_name());
  EXPECT_EQ(left_out, expected.at("left_out").get<std::set<std::string>>());
  ASSERT_EQ(answer.trials_size(), static_cast<int>(trial_order.size()));
  for (size_t i = 0; i < trial_order.size(); ++i) {
    EXPECT_EQ(answer.trials(static_cast<int>(i)).kept(),
              expected.at("kept")[trial_order[i]].get<bool>())
        << "trial " << trial_order[i] << ": "
        << answer.trials(static_cast<int>(i)).reason();
  }
}

TEST(OptunaSpaceTest, FixturesInEveryOrder) {
  int fixtures = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(kFixtures / "optuna_spaces")) {
    if (entry.path().extension() != ".json") continue;
    ++fixtures;
    SCOPED_TRACE(entry.path().filename().string());
    const Json fixture = ReadJson(entry.path());
    const v1::InferOptunaSpaceRequest request =
        FromJson<v1::InferOptunaSpaceRequest>(fixture.at("request"));
    std::vector<int> in_order(request.trials_size());
    for (int i = 0; i < request.trials_size(); ++i) in_order[i] = i;

    auto infer = [&](const v1::InferOptunaSpaceRequest& r,
                     const std::vector<int>& order,
                     const std::string& variant) {
      absl::StatusOr<v1::InferOptunaSpaceResponse> answer = InferOptunaSpace(r);
      ASSERT_TRUE(answer.ok()) << variant << ": " << answer.status();
      ExpectAnswer(fixture.at("expected"), *answer, order, variant);
    };
    infer(request, in_order, "as given");

    v1::InferOptunaSpaceRequest reversed = request;
    for (v1::OptunaTrial& t : *reversed.mutable_trials()) {
      std::reverse(t.mutable_params()->begin(), t.mutable_params()->end());
    }
    infer(reversed, in_order, "parameters reversed");

    std::mt19937 rng(7);
    for (int round = 0; round < 5; ++round) {
      v1::InferOptunaSpaceRequest shuffled = request;
      for (v1::OptunaTrial& t : *shuffled.mutable_trials()) {
        std::shuffle(t.mutable_params()->begin(), t.mutable_params()->end(),
                     rng);
      }
      infer(shuffled, in_order, "parameters shuffled");
    }

    v1::InferOptunaSpaceRequest trials_reversed = request;
    std::reverse(trials_reversed.mutable_trials()->begin(),
                 trials_reversed.mutable_trials()->end());
    std::vector<int> reversed_order(in_order.rbegin(), in_order.rend());
    infer(trials_reversed, reversed_order, "trials reversed");
  }
  EXPECT_GE(fixtures, 3);
}

TEST(OptunaSpaceTest, RefusesWhatItCannotMap) {
  v1::InferOptunaSpaceRequest request;
  EXPECT_EQ(InferOptunaSpace(request).status().code(),
            absl::StatusCode::kInvalidArgument);
  request.add_distributions("{\"name\": \"CategoricalDistribution\"}");
  request.add_distributions(
      "{\"name\": \"FloatDistribution\", \"attributes\": {\"low\": 0, "
      "\"high\": 1}}");
  request.add_distributions(
      "{\"name\": \"CategoricalDistribution\", \"attributes\": {\"choices\": "
      "[1, \"1\"]}}");
  v1::OptunaTrial& t = *request.add_trials();
  t.set_number(0);
  t.set_state("COMPLETE");
  t.add_params()->set_name("x");  // distribution 0: no attributes
  absl::StatusOr<v1::InferOptunaSpaceResponse> answer =
      InferOptunaSpace(request);
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(answer.status().message().find("parameter \"x\""),
            std::string::npos);
  t.mutable_params(0)->set_distribution(2);  // two choices read "1"
  EXPECT_EQ(InferOptunaSpace(request).status().code(),
            absl::StatusCode::kInvalidArgument);
  t.mutable_params(0)->set_distribution(1);
  t.set_state("ZOMBIE");
  EXPECT_EQ(InferOptunaSpace(request).status().code(),
            absl::StatusCode::kInvalidArgument);
  t.set_state("COMPLETE");
  t.mutable_params(0)->set_distribution(3);  // no such distribution
  EXPECT_EQ(InferOptunaSpace(request).status().code(),
            absl::StatusCode::kInvalidArgument);
  t.mutable_params(0)->set_distribution(1);
  ASSERT_TRUE(InferOptunaSpace(request).ok());
  // An unreadable value leaves its trial out, saying why.
  t.mutable_params(0)->set_problem("the stored value is NULL");
  answer = InferOptunaSpace(request);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_FALSE(answer->trials(0).kept());
  EXPECT_EQ(answer->trials(0).reason(), "the stored value is NULL");
}

// A study that validation takes, but for its one parameter's name.
v1::Study StudyWithParameter(const std::string& name) {
  v1::Study study;
  study.set_name("s");
  v1::ParameterSpec& p = *study.mutable_spec()->add_parameters();
  p.set_name(name);
  p.mutable_double_spec()->set_min(0);
  p.mutable_double_spec()->set_max(1);
  v1::MetricSpec& m = *study.mutable_spec()->add_metrics();
  m.set_name("m");
  m.set_goal(v1::MetricSpec::MAXIMIZE);
  return study;
}

TEST(ServerInfoTest, IdentifierFixtureAgreesWithValidationAndPattern) {
  const Json fixture = ReadJson(kFixtures / "identifiers.json");
  EXPECT_EQ(fixture.at("pattern").get<std::string>(), kIdentifierPattern);
  EXPECT_EQ(ServerInfoAnswer().identifier_pattern(), kIdentifierPattern);
  const std::regex pattern(kIdentifierPattern, std::regex::ECMAScript);
  for (const std::string name : fixture.at("valid")) {
    EXPECT_TRUE(std::regex_match(name, pattern)) << name;
    EXPECT_TRUE(ValidateStudy(StudyWithParameter(name)).ok()) << name;
  }
  for (const std::string name : fixture.at("invalid")) {
    EXPECT_FALSE(std::regex_match(name, pattern)) << name;
    EXPECT_FALSE(ValidateStudy(StudyWithParameter(name)).ok()) << name;
  }
}

TEST(ServerInfoTest, LimitsAreTheServers) {
  const v1::ServerInfo info = ServerInfoAnswer();
  EXPECT_FALSE(info.version().empty());
  EXPECT_EQ(info.limits().max_values_per_parameter(), kMaxValuesPerParameter);
  EXPECT_EQ(info.limits().max_attribute_value_bytes(),
            static_cast<int64_t>(kMaxAttributeValueBytes));
  EXPECT_EQ(info.limits().max_attributes(), kMaxAttributes);
  EXPECT_EQ(info.limits().max_name_bytes(),
            static_cast<int64_t>(kMaxNameBytes));
  EXPECT_EQ(info.limits().max_parameters(), kMaxParameters);
  EXPECT_EQ(info.limits().max_category_bytes(),
            static_cast<int64_t>(kMaxCategoryBytes));
}

TEST(ServerInfoTest, MetricRolesFixture) {
  const Json fixture = ReadJson(kFixtures / "metric_roles.json");
  for (const Json& c : fixture.at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    v1::Study study = StudyWithParameter("x");
    study.mutable_spec()->clear_metrics();
    for (const Json& m : c.at("metrics")) {
      *study.mutable_spec()->add_metrics() = FromJson<v1::MetricSpec>(m);
    }
    EXPECT_TRUE(ValidateStudy(study).ok()) << ValidateStudy(study);
    PublishMetricRoles(study);
    std::vector<std::string> roles;
    for (int role : study.metric_roles()) {
      roles.push_back(
          v1::MetricSpec::Role_Name(static_cast<v1::MetricSpec::Role>(role)));
    }
    EXPECT_EQ(roles, c.at("roles").get<std::vector<std::string>>());
  }
}

}  // namespace
}  // namespace hypertune::service
