// Cost-aware studies and transfer from earlier studies through
// StudyService: validation of the spec fields, and that costs and prior
// studies reach the optimizer.
#include <cmath>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "service/rpc/study_service.h"
#include "storage/memory_store.h"

namespace hypertune::service {
namespace {

using ::testing::HasSubstr;

class CostTransferTest : public ::testing::Test {
 protected:
  CostTransferTest() : service_(&store_, ServiceOptions()) {}

  // A study over x, y in [-2, 2] minimizing "loss", recording "cost", with
  // the server's default algorithm (GP_BANDIT); `extra` is text-format
  // appended to its spec.
  absl::StatusOr<v1::Study> Create(const std::string& name,
                                   const std::string& extra = "",
                                   bool with_z = false) {
    v1::CreateStudyRequest request;
    const bool parsed = google::protobuf::TextFormat::ParseFromString(
        absl::StrCat(R"pb(
          study {
            spec {
              parameters { name: "x" double_spec { min: -2 max: 2 } }
              parameters { name: "y" double_spec { min: -2 max: 2 } }
              metrics { name: "loss" goal: MINIMIZE }
              metrics { name: "cost" goal: MINIMIZE }
              )pb",
                     with_z ? R"pb(parameters {
                                     name: "z"
                                     double_spec { min: 0 max: 1 }
                                   })pb"
                            : "",
                     extra, "}}"),
        &request);
    EXPECT_TRUE(parsed) << extra;
    request.mutable_study()->set_name(name);
    return service_.CreateStudy(request);
  }

  // A known result: COMPLETED with loss and cost.
  void AddResult(const std::string& study, double x, double y, double loss,
                 double cost = 1) {
    AddMetrics(study, x, y, {{"loss", loss}, {"cost", cost}});
  }

  // A known result: COMPLETED with these metrics.
  void AddMetrics(const std::string& study, double x, double y,
                  const std::map<std::string, double>& metrics) {
    v1::CreateTrialRequest request;
    request.set_study_name(study);
    v1::Trial& t = *request.mutable_trial();
    t.set_state(v1::Trial::COMPLETED);
    v1::ParameterValue* px = t.add_parameters();
    px->set_name("x");
    px->set_double_value(x);
    v1::ParameterValue* py = t.add_parameters();
    py->set_name("y");
    py->set_double_value(y);
    for (const auto& [name, value] : metrics) {
      (*t.mutable_final_measurement()->mutable_metrics())[name] = value;
    }
    ASSERT_TRUE(service_.CreateTrial(request).ok());
  }

  // The parameters of the next suggestion of `study` for `client`.
  std::pair<double, double> Next(const std::string& study,
                                 const std::string& client = "w") {
    v1::SuggestTrialsRequest request;
    request.set_study_name(study);
    request.set_count(1);
    request.set_client_id(client);
    absl::StatusOr<v1::SuggestTrialsResponse> r =
        service_.SuggestTrials(request);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok() || r->trials_size() != 1) return {NAN, NAN};
    return {r->trials(0).parameters(0).double_value(),
            r->trials(0).parameters(1).double_value()};
  }

  storage::MemoryStore store_;
  StudyService service_;
};

TEST_F(CostTransferTest, FieldsAreValidatedNamingTheField) {
  auto expect = [&](const std::string& name, const std::string& extra,
                    absl::StatusCode code, const std::string& text) {
    const absl::Status s = Create(name, extra).status();
    EXPECT_EQ(s.code(), code) << extra << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(text)) << extra;
  };
  expect("a", "cost_aware: true algorithm: TPE",
         absl::StatusCode::kInvalidArgument, "study.spec.cost_aware");
  expect("b", "cost_metric: \"cost\"", absl::StatusCode::kInvalidArgument,
         "study.spec.cost_metric: needs cost_aware");
  expect("c", "cost_aware: true cost_metric: \"nope\"",
         absl::StatusCode::kInvalidArgument, "\"nope\" is not one of");
  expect("d", "cost_aware: true cost_metric: \"loss\"",
         absl::StatusCode::kInvalidArgument, "is an objective or a constraint");
  expect("e", "prior_studies: \"missing\"", absl::StatusCode::kNotFound,
         "study.spec.prior_studies[0]");
  expect("f", "prior_studies: \"f\"", absl::StatusCode::kInvalidArgument,
         "its own prior");
  expect("g", "prior_studies: \"bad name!\"",
         absl::StatusCode::kInvalidArgument, "study.spec.prior_studies[0]");
  expect("h",
         "cost_aware: true cost_metric: \"mem\" metrics { name: \"acc\" "
         "goal: MAXIMIZE role: OBJECTIVE } metrics { name: \"mem\" role: "
         "CONSTRAINT upper_bound: 4 }",
         absl::StatusCode::kInvalidArgument, "is an objective or a constraint");
  ASSERT_TRUE(Create("old").ok());
  expect("i", "prior_studies: \"old\" prior_studies: \"old\"",
         absl::StatusCode::kInvalidArgument, "listed twice");
  expect("j",
         "prior_studies: \"old\" parameters { name: \"opt\" "
         "categorical_spec { values: [\"sgd\", \"adam\"] } } parameters { "
         "name: \"momentum\" double_spec { min: 0 max: 1 } parent: \"opt\" "
         "parent_categories: \"sgd\" }",
         absl::StatusCode::kInvalidArgument, "conditional");
  // Nothing was stored for the refused ones.
  EXPECT_FALSE(store_.GetStudy("a").ok());
  EXPECT_TRUE(Create("ok",
                     "cost_aware: true cost_metric: \"cost\" "
                     "prior_studies: \"old\"")
                  .ok());
  // Cost-aware search and transfer take several objectives and constraints.
  EXPECT_TRUE(Create("several",
                     "cost_aware: true cost_metric: \"cost\" prior_studies: "
                     "\"old\" metrics { name: \"acc\" goal: MAXIMIZE role: "
                     "OBJECTIVE } metrics { name: \"loss2\" goal: MINIMIZE "
                     "role: OBJECTIVE } metrics { name: \"mem\" role: "
                     "CONSTRAINT upper_bound: 4 }")
                  .ok());
}

// Loss (x - 0.6)^2 + (y + 1.1)^2 on the earlier study, scaled and shifted.
double EarlierLoss(double x, double y) {
  return 3 * (std::pow(x - 0.6, 2) + std::pow(y + 1.1, 2)) + 5;
}

TEST_F(CostTransferTest, APriorStudysOptimumIsWhereTheSecondTrialGoes) {
  ASSERT_TRUE(Create("earlier").ok());
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) {
      const double x = -2 + 0.8 * i, y = -2 + 0.8 * j;
      AddResult("earlier", x, y, EarlierLoss(x, y));
    }
  }
  // With an extra parameter z the earlier study lacks: the prior covers
  // x and y.
  ASSERT_TRUE(Create("later", "prior_studies: \"earlier\"", true).ok());
  ASSERT_TRUE(Create("cold", "", true).ok());
  // The initial design's centre first, with the prior or without.
  for (const std::string study : {"later", "cold"}) {
    const auto [x, y] = Next(study);
    EXPECT_NEAR(x, 0, 1e-9);
    EXPECT_NEAR(y, 0, 1e-9);
  }
  // Then the prior's best guess instead of a Sobol point.
  const auto [x, y] = Next("later", "w2");
  EXPECT_LT(std::hypot(x - 0.6, y + 1.1), 0.5) << x << ", " << y;
  const auto [cx, cy] = Next("cold", "w2");
  EXPECT_GT(std::hypot(cx - 0.6, cy + 1.1), 0.5) << cx << ", " << cy;
  // A prior study deleted later is skipped, not an error.
  v1::DeleteStudyRequest del;
  del.set_name("earlier");
  ASSERT_TRUE(service_.DeleteStudy(del).ok());
  ASSERT_TRUE(Create("after", "prior_studies: \"cold\"").ok());
  store_.DeleteStudy("cold").IgnoreError();
  EXPECT_FALSE(std::isnan(Next("after").first));
}

// Issue 48: another owner's results never reach a study through its priors,
// whichever path stored the prior and whatever happened to the name since.
TEST_F(CostTransferTest, APriorIsReadOnlyAsTheStudyItsCreatorCouldRead) {
  const Principal alice{"alice", /*checked=*/true, /*admin=*/false};
  const Principal bob{"bob", true, false};
  auto create = [&](const std::string& name, const std::string& extra,
                    const Principal& who) {
    v1::CreateStudyRequest request;
    EXPECT_TRUE(
        google::protobuf::TextFormat::ParseFromString(absl::StrCat(R"pb(study { spec {
              parameters { name: "x" double_spec { min: -2 max: 2 } }
              parameters { name: "y" double_spec { min: -2 max: 2 } }
              metrics { name: "loss" goal: MINIMIZE } )pb",
                                                                   extra, "}}"),
                                                      &request));
    request.mutable_study()->set_name(name);
    return service_.CreateStudy(request, who);
  };
  auto fill = [&](const std::string& name, const Principal& who) {
    for (int i = 0; i < 6; ++i) {
      for (int j = 0; j < 6; ++j) {
        const double x = -2 + 0.8 * i, y = -2 + 0.8 * j;
        v1::CreateTrialRequest request;
        request.set_study_name(name);
        v1::Trial& t = *request.mutable_trial();
        t.set_state(v1::Trial::COMPLETED);
        t.add_parameters()->set_name("x");
        t.mutable_parameters(0)->set_double_value(x);
        t.add_parameters()->set_name("y");
        t.mutable_parameters(1)->set_double_value(y);
        (*t.mutable_final_measurement()->mutable_metrics())["loss"] =
            EarlierLoss(x, y);
        ASSERT_TRUE(service_.CreateTrial(request, who).ok());
      }
    }
  };
  // The second suggestion: near the prior's optimum (0.6, -1.1) only if
  // the prior was read.
  auto learned = [&](const std::string& name, const Principal& who) {
    std::pair<double, double> second;
    for (const std::string client : {"w1", "w2"}) {
      v1::SuggestTrialsRequest request;
      request.set_study_name(name);
      request.set_count(1);
      request.set_client_id(client);
      auto r = service_.SuggestTrials(request, who);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok() || r->trials_size() != 1) return false;
      second = {r->trials(0).parameters(0).double_value(),
                r->trials(0).parameters(1).double_value()};
    }
    return std::hypot(second.first - 0.6, second.second + 1.1) < 0.5;
  };
  ASSERT_TRUE(create("hers", "", alice).ok());
  fill("hers", alice);

  // Import: refused as CreateStudy is.
  v1::Study imported;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(name: "stolen"
           spec {
             parameters { name: "x" double_spec { min: -2 max: 2 } }
             parameters { name: "y" double_spec { min: -2 max: 2 } }
             metrics { name: "loss" goal: MINIMIZE }
             prior_studies: "hers"
           })pb",
      &imported));
  auto stolen = service_.ImportStudy(imported, {}, bob);
  EXPECT_EQ(stolen.status().code(), absl::StatusCode::kPermissionDenied)
      << stolen.status();
  EXPECT_THAT(stolen.status().message(),
              HasSubstr("study.spec.prior_studies[0]"));
  EXPECT_EQ(create("stolen", "prior_studies: \"hers\"", bob).status().code(),
            absl::StatusCode::kPermissionDenied);

  // A name reused: bob's own prior deleted, alice's study created under it.
  ASSERT_TRUE(create("p", "", bob).ok());
  auto bound = create("his", "prior_studies: \"p\"", bob);
  ASSERT_TRUE(bound.ok()) << bound.status();
  ASSERT_EQ(bound->prior_bindings_size(), 1);
  EXPECT_EQ(bound->prior_bindings(0).owner(), "bob");
  v1::DeleteStudyRequest del;
  del.set_name("p");
  ASSERT_TRUE(service_.DeleteStudy(del, bob).ok());
  ASSERT_TRUE(create("p", "", alice).ok());
  fill("p", alice);
  EXPECT_FALSE(learned("his", bob));

  // Her own study with her prior learns from it (the check is no blanket
  // refusal).
  ASSERT_TRUE(create("hers-too", "prior_studies: \"p\"", alice).ok());
  EXPECT_TRUE(learned("hers-too", alice));
}

TEST_F(CostTransferTest, ACostAwareStudyPrefersCheapTrials) {
  // Loss depends on y only; cost rises 100-fold along x.
  for (const std::string name : {"blind", "aware"}) {
    ASSERT_TRUE(Create(name, name == "aware"
                                 ? "cost_aware: true cost_metric: \"cost\""
                                 : "")
                    .ok());
    for (const double x : {-1.8, 0.0, 1.8}) {
      for (const double y : {-1.6, -0.8, 0.0, 0.8, 1.6}) {
        // The best result so far is a dear trial's, by a hair.
        AddResult(name, x, y, std::pow(y - 0.3, 2) + 1e-3 * (1.8 - x),
                  std::pow(10.0, 1 + x / 2));
      }
    }
  }
  const double blind_x = Next("blind").first;
  const double aware_x = Next("aware").first;
  EXPECT_LT(aware_x, blind_x - 1.0) << aware_x << " vs " << blind_x;
}

// Model-based multi-fidelity through the service: with ASHA the optimizer
// fits the learning curves' highest rung that enough trials reached
// (optimizer/fidelity.h), not the trials' results.
TEST_F(CostTransferTest, WithRungsTheModelFitsTheCurvesAtOneRung) {
  ASSERT_TRUE(Create("asha",
                     "early_stopping { rule: ASHA min_resource: 1 "
                     "max_resource: 9 reduction_factor: 3 }")
                  .ok());
  // At step 1 the loss is least near x = 0.8; the final results, of another
  // fidelity, say x = -1.
  for (const double x : {-1.8, -1.0, -0.2, 0.4, 1.2, 1.9}) {
    v1::CreateTrialRequest request;
    request.set_study_name("asha");
    v1::Trial& t = *request.mutable_trial();
    t.set_state(v1::Trial::COMPLETED);
    for (const char* name : {"x", "y"}) {
      v1::ParameterValue* p = t.add_parameters();
      p->set_name(name);
      p->set_double_value(name[0] == 'x' ? x : 0.0);
    }
    v1::Measurement* m = t.add_measurements();
    m->set_step(1);
    (*m->mutable_metrics())["loss"] = std::pow(x - 0.8, 2);
    (*t.mutable_final_measurement()->mutable_metrics())["loss"] =
        std::pow(x + 1, 2);
    ASSERT_TRUE(service_.CreateTrial(request).ok());
  }
  const double next_x = Next("asha").first;
  // Measured: 1.59 (rung 1), -1.0 with the results instead.
  EXPECT_GT(next_x, 0.4) << next_x;
}

TEST_F(CostTransferTest, ACostAwareConstrainedStudyPrefersCheapTrials) {
  // As above, with "acc" the objective and a constraint mem <= 1 that the
  // optimum (y = 0.3) meets.
  const std::string metrics =
      "metrics { name: \"acc\" goal: MAXIMIZE role: OBJECTIVE } "
      "metrics { name: \"mem\" role: CONSTRAINT upper_bound: 1 }";
  for (const std::string name : {"blind", "aware"}) {
    ASSERT_TRUE(Create(name, absl::StrCat(name == "aware"
                                              ? "cost_aware: true cost_metric: "
                                                "\"cost\" "
                                              : "",
                                          metrics))
                    .ok());
    for (const double x : {-1.8, 0.0, 1.8}) {
      for (const double y : {-1.6, -0.8, 0.0, 0.8, 1.6}) {
        AddMetrics(name, x, y,
                   {{"acc", -std::pow(y - 0.3, 2) - 1e-3 * (1.8 - x)},
                    {"mem", y},
                    {"cost", std::pow(10.0, 1 + x / 2)}});
      }
    }
  }
  const double blind_x = Next("blind").first;
  const double aware_x = Next("aware").first;
  EXPECT_LT(aware_x, blind_x - 1.0) << aware_x << " vs " << blind_x;
}

}  // namespace
}  // namespace hypertune::service
