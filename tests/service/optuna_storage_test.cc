// Optuna's storage protocol (service/optuna/) over a real hypertuned: a
// client made from proto/optuna_storage.proto's stubs plays the calls
// Optuna's GrpcStorageProxy makes, and hypertune's own API reads what they
// stored.
#include <atomic>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "hypertune/v1/hypertune.grpc.pb.h"
#include "optuna/optuna_storage.grpc.pb.h"
#include "service/optuna/optuna_storage.h"
#include "service/server/server.h"
#include "storage/memory_store.h"
#include "testing/test_server.h"

namespace hypertune {
namespace {

using test::TempDir;
using ::testing::HasSubstr;

constexpr char kFloat[] =
    R"({"name": "FloatDistribution", "attributes": {"step": null, "low": -5.0, "high": 5.0, "log": false}})";
constexpr char kWiderFloat[] =
    R"({"name": "FloatDistribution", "attributes": {"step": null, "low": -10.0, "high": 5.0, "log": false}})";
constexpr char kLogFloat[] =
    R"({"name": "FloatDistribution", "attributes": {"step": null, "low": 0.001, "high": 1.0, "log": true}})";
constexpr char kInt[] =
    R"({"name": "IntDistribution", "attributes": {"log": false, "step": 1, "low": 1, "high": 8}})";
constexpr char kCategorical[] =
    R"({"name": "CategoricalDistribution", "attributes": {"choices": ["relu", "tanh"]}})";

std::unique_ptr<service::Server> StartServer(service::ServerOptions options) {
  options.listen = "127.0.0.1:0";
  auto server = service::Server::Start(std::move(options));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

class OptunaStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service::ServerOptions options;
    options.db_path = dir_.File("optuna.db");
    server_ = StartServer(options);
    ASSERT_NE(server_, nullptr);
    auto channel = grpc::CreateChannel(server_->address(),
                                       grpc::InsecureChannelCredentials());
    optuna_ = optuna::StorageService::NewStub(channel);
    hypertune_ = v1::HyperTune::NewStub(channel);
  }

  // Calls `method` and returns its status; the reply lands in `reply`.
  template <typename Request, typename Reply>
  grpc::Status Call(grpc::Status (optuna::StorageService::Stub::*method)(
                        grpc::ClientContext*, const Request&, Reply*),
                    const Request& request, Reply* reply) {
    grpc::ClientContext context;
    return (optuna_.get()->*method)(&context, request, reply);
  }

  int64_t CreateStudy(const std::string& name,
                      std::initializer_list<optuna::StudyDirection> dirs) {
    optuna::CreateNewStudyRequest request;
    request.set_study_name(name);
    for (auto d : dirs) request.add_directions(d);
    optuna::CreateNewStudyReply reply;
    grpc::Status s =
        Call(&optuna::StorageService::Stub::CreateNewStudy, request, &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return reply.study_id();
  }

  int64_t CreateRunningTrial(int64_t study_id) {
    optuna::CreateNewTrialRequest request;
    request.set_study_id(study_id);
    request.set_template_trial_is_none(true);
    optuna::CreateNewTrialReply reply;
    grpc::Status s =
        Call(&optuna::StorageService::Stub::CreateNewTrial, request, &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return reply.trial_id();
  }

  grpc::Status SetParam(int64_t trial_id, const std::string& name, double value,
                        const std::string& distribution) {
    optuna::SetTrialParameterRequest request;
    request.set_trial_id(trial_id);
    request.set_param_name(name);
    request.set_param_value_internal(value);
    request.set_distribution(distribution);
    optuna::SetTrialParameterReply reply;
    return Call(&optuna::StorageService::Stub::SetTrialParameter, request,
                &reply);
  }

  grpc::Status Report(int64_t trial_id, int64_t step, double value) {
    optuna::SetTrialIntermediateValueRequest request;
    request.set_trial_id(trial_id);
    request.set_step(step);
    request.set_intermediate_value(value);
    optuna::SetTrialIntermediateValueReply reply;
    return Call(&optuna::StorageService::Stub::SetTrialIntermediateValue,
                request, &reply);
  }

  grpc::Status Finish(int64_t trial_id, optuna::TrialState state,
                      std::initializer_list<double> values,
                      bool* updated = nullptr) {
    optuna::SetTrialStateValuesRequest request;
    request.set_trial_id(trial_id);
    request.set_state(state);
    for (double v : values) request.add_values(v);
    optuna::SetTrialStateValuesReply reply;
    grpc::Status s = Call(&optuna::StorageService::Stub::SetTrialStateValues,
                          request, &reply);
    if (updated != nullptr) *updated = reply.trial_updated();
    return s;
  }

  optuna::Trial GetTrial(int64_t trial_id) {
    optuna::GetTrialRequest request;
    request.set_trial_id(trial_id);
    optuna::GetTrialReply reply;
    grpc::Status s =
        Call(&optuna::StorageService::Stub::GetTrial, request, &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return reply.trial();
  }

  v1::Study HypertuneStudy(const std::string& name) {
    v1::GetStudyRequest request;
    request.set_name(name);
    v1::Study study;
    grpc::ClientContext context;
    grpc::Status s = hypertune_->GetStudy(&context, request, &study);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return study;
  }

  std::vector<v1::Trial> HypertuneTrials(const std::string& name) {
    v1::ListTrialsRequest request;
    request.set_study_name(name);
    v1::ListTrialsResponse response;
    grpc::ClientContext context;
    grpc::Status s = hypertune_->ListTrials(&context, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return {response.trials().begin(), response.trials().end()};
  }

  TempDir dir_;
  std::unique_ptr<service::Server> server_;
  std::unique_ptr<optuna::StorageService::Stub> optuna_;
  std::unique_ptr<v1::HyperTune::Stub> hypertune_;
};

TEST_F(OptunaStorageTest, AnOptunaRunIsStoredAndReadBackExactly) {
  const int64_t study_id = CreateStudy("optuna-run", {optuna::MINIMIZE});
  ASSERT_GT(study_id, 0);
  {
    optuna::GetStudyIdFromNameRequest request;
    request.set_study_name("optuna-run");
    optuna::GetStudyIdFromNameReply reply;
    ASSERT_TRUE(
        Call(&optuna::StorageService::Stub::GetStudyIdFromName, request, &reply)
            .ok());
    EXPECT_EQ(reply.study_id(), study_id);
  }
  {
    optuna::SetStudyUserAttributeRequest request;
    request.set_study_id(study_id);
    request.set_key("team");
    request.set_value("\"vision\"");
    optuna::SetStudyUserAttributeReply reply;
    ASSERT_TRUE(Call(&optuna::StorageService::Stub::SetStudyUserAttribute,
                     request, &reply)
                    .ok());
  }

  const int64_t first = CreateRunningTrial(study_id);
  ASSERT_TRUE(SetParam(first, "x", 1.25, kFloat).ok());
  ASSERT_TRUE(SetParam(first, "layers", 3, kInt).ok());
  ASSERT_TRUE(SetParam(first, "act", 1, kCategorical).ok());
  ASSERT_TRUE(Report(first, 0, 4.0).ok());
  ASSERT_TRUE(Report(first, 2, 2.0).ok());
  ASSERT_TRUE(Report(first, 1, 3.0).ok());
  ASSERT_TRUE(Report(first, 2, 1.5).ok());  // Optuna overwrites a step
  {
    optuna::SetTrialUserAttributeRequest request;
    request.set_trial_id(first);
    request.set_key("note");
    request.set_value("[1, 2]");
    optuna::SetTrialUserAttributeReply reply;
    ASSERT_TRUE(Call(&optuna::StorageService::Stub::SetTrialUserAttribute,
                     request, &reply)
                    .ok());
  }
  bool updated = false;
  ASSERT_TRUE(Finish(first, optuna::COMPLETE, {0.75}, &updated).ok());
  EXPECT_TRUE(updated);

  const optuna::Trial got = GetTrial(first);
  EXPECT_EQ(got.trial_id(), first);
  EXPECT_EQ(got.number(), 0);
  EXPECT_EQ(got.state(), optuna::COMPLETE);
  ASSERT_EQ(got.values_size(), 1);
  EXPECT_EQ(got.values(0), 0.75);
  EXPECT_EQ(got.params().at("x"), 1.25);
  EXPECT_EQ(got.params().at("layers"), 3);
  EXPECT_EQ(got.params().at("act"), 1);
  EXPECT_EQ(got.distributions().at("act"), kCategorical);
  EXPECT_EQ(got.user_attributes().at("note"), "[1, 2]");
  EXPECT_EQ((std::map<int64_t, double>(got.intermediate_values().begin(),
                                       got.intermediate_values().end())),
            (std::map<int64_t, double>{{0, 4.0}, {1, 3.0}, {2, 1.5}}));
  EXPECT_FALSE(got.datetime_start().empty());
  EXPECT_FALSE(got.datetime_complete().empty());

  // A second trial adds a parameter mid-run and widens a range.
  const int64_t second = CreateRunningTrial(study_id);
  ASSERT_TRUE(SetParam(second, "x", -7.5, kWiderFloat).ok());
  ASSERT_TRUE(SetParam(second, "lr", 0.01, kLogFloat).ok());
  ASSERT_TRUE(Finish(second, optuna::PRUNED, {}).ok());
  EXPECT_EQ(GetTrial(second).state(), optuna::PRUNED);
  EXPECT_EQ(GetTrial(second).number(), 1);

  // hypertune sees one study with its space grown and both trials.
  const v1::Study study = HypertuneStudy("optuna-run");
  EXPECT_EQ(study.attributes().at("optuna.storage"), "grpc");
  ASSERT_EQ(study.spec().metrics_size(), 1);
  EXPECT_EQ(study.spec().metrics(0).name(), "value");
  EXPECT_EQ(study.spec().metrics(0).goal(), v1::MetricSpec::MINIMIZE);
  std::map<std::string, v1::ParameterSpec> space;
  for (const auto& p : study.spec().parameters()) space[p.name()] = p;
  ASSERT_EQ(space.size(), 4u);
  EXPECT_EQ(space["x"].double_spec().min(), -10.0);
  EXPECT_EQ(space["x"].double_spec().max(), 5.0);
  EXPECT_EQ(space["layers"].integer_spec().max(), 8);
  EXPECT_EQ(space["lr"].double_spec().scale(), v1::LOG);
  EXPECT_EQ(space["act"].categorical_spec().values(1), "tanh");

  const std::vector<v1::Trial> trials = HypertuneTrials("optuna-run");
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].state(), v1::Trial::COMPLETED);
  EXPECT_EQ(trials[0].final_measurement().metrics().at("value"), 0.75);
  ASSERT_EQ(trials[0].measurements_size(), 3);
  EXPECT_EQ(trials[0].measurements(2).metrics().at("value"), 1.5);
  std::map<std::string, v1::ParameterValue> values;
  for (const auto& v : trials[0].parameters()) values[v.name()] = v;
  EXPECT_EQ(values["x"].double_value(), 1.25);
  EXPECT_EQ(values["layers"].int_value(), 3);
  EXPECT_EQ(values["act"].string_value(), "tanh");
  EXPECT_EQ(trials[1].state(), v1::Trial::STOPPED);
}

TEST_F(OptunaStorageTest, AWaitingTrialIsTakenOnce) {
  const int64_t study_id = CreateStudy("enqueued", {optuna::MAXIMIZE});
  optuna::CreateNewTrialRequest request;
  request.set_study_id(study_id);
  optuna::Trial& t = *request.mutable_template_trial();
  t.set_state(optuna::WAITING);
  (*t.mutable_system_attributes())["fixed_params"] = R"({"x": 2.0})";
  optuna::CreateNewTrialReply created;
  ASSERT_TRUE(
      Call(&optuna::StorageService::Stub::CreateNewTrial, request, &created)
          .ok());
  EXPECT_EQ(GetTrial(created.trial_id()).state(), optuna::WAITING);
  EXPECT_EQ(HypertuneTrials("enqueued").at(0).state(), v1::Trial::REQUESTED);

  bool updated = false;
  ASSERT_TRUE(Finish(created.trial_id(), optuna::RUNNING, {}, &updated).ok());
  EXPECT_TRUE(updated);
  // A second process that wanted the same WAITING trial is told no.
  ASSERT_TRUE(Finish(created.trial_id(), optuna::RUNNING, {}, &updated).ok());
  EXPECT_FALSE(updated);
  const optuna::Trial running = GetTrial(created.trial_id());
  EXPECT_EQ(running.state(), optuna::RUNNING);
  EXPECT_EQ(running.system_attributes().at("fixed_params"), R"({"x": 2.0})");
}

TEST_F(OptunaStorageTest, GetTrialsReturnsNewAndNamedTrialsOnly) {
  const int64_t study_id = CreateStudy("paged", {optuna::MINIMIZE});
  const int64_t a = CreateRunningTrial(study_id);
  const int64_t b = CreateRunningTrial(study_id);
  const int64_t c = CreateRunningTrial(study_id);
  ASSERT_TRUE(Finish(b, optuna::COMPLETE, {1.0}).ok());
  optuna::GetTrialsRequest request;
  request.set_study_id(study_id);
  request.set_trial_id_greater_than(b);
  request.add_included_trial_ids(a);
  optuna::GetTrialsReply reply;
  ASSERT_TRUE(
      Call(&optuna::StorageService::Stub::GetTrials, request, &reply).ok());
  ASSERT_EQ(reply.trials_size(), 2);
  EXPECT_EQ(reply.trials(0).trial_id(), a);
  EXPECT_EQ(reply.trials(1).trial_id(), c);

  request.Clear();
  request.set_study_id(study_id);
  request.set_trial_id_greater_than(-1);
  ASSERT_TRUE(
      Call(&optuna::StorageService::Stub::GetTrials, request, &reply).ok());
  EXPECT_EQ(reply.trials_size(), 3);
}

TEST_F(OptunaStorageTest, SeveralObjectivesAreSeveralMetrics) {
  const int64_t study_id =
      CreateStudy("pareto", {optuna::MINIMIZE, optuna::MAXIMIZE});
  const int64_t trial = CreateRunningTrial(study_id);
  ASSERT_TRUE(Finish(trial, optuna::COMPLETE, {1.0, -2.0}).ok());
  const optuna::Trial got = GetTrial(trial);
  ASSERT_EQ(got.values_size(), 2);
  EXPECT_EQ(got.values(1), -2.0);
  // A trial added whole (Optuna's add_trial) keeps its times.
  optuna::CreateNewTrialRequest added;
  added.set_study_id(study_id);
  optuna::Trial& t = *added.mutable_template_trial();
  t.set_state(optuna::COMPLETE);
  t.add_values(3.0);
  t.add_values(4.0);
  t.set_datetime_start("2024-01-02 03:04:05.678000");
  t.set_datetime_complete("2024-01-02 03:05:00.001000");
  optuna::CreateNewTrialReply created;
  ASSERT_TRUE(
      Call(&optuna::StorageService::Stub::CreateNewTrial, added, &created)
          .ok());
  const optuna::Trial whole = GetTrial(created.trial_id());
  EXPECT_EQ(whole.datetime_start(), "2024-01-02 03:04:05.678000");
  EXPECT_EQ(whole.datetime_complete(), "2024-01-02 03:05:00.001000");
  EXPECT_EQ(whole.values(1), 4.0);
  const v1::Study study = HypertuneStudy("pareto");
  ASSERT_EQ(study.spec().metrics_size(), 2);
  EXPECT_EQ(study.spec().metrics(1).name(), "value_1");
  EXPECT_EQ(study.spec().metrics(1).goal(), v1::MetricSpec::MAXIMIZE);
  optuna::GetStudyDirectionsRequest request;
  request.set_study_id(study_id);
  optuna::GetStudyDirectionsReply reply;
  ASSERT_TRUE(
      Call(&optuna::StorageService::Stub::GetStudyDirections, request, &reply)
          .ok());
  ASSERT_EQ(reply.directions_size(), 2);
  EXPECT_EQ(reply.directions(1), optuna::MAXIMIZE);
}

TEST_F(OptunaStorageTest, BadInputIsRefusedByNameAndStoresNothing) {
  const int64_t study_id = CreateStudy("strict", {optuna::MINIMIZE});
  {
    optuna::CreateNewStudyRequest request;
    request.set_study_name("strict");
    request.add_directions(optuna::MINIMIZE);
    optuna::CreateNewStudyReply reply;
    EXPECT_EQ(
        Call(&optuna::StorageService::Stub::CreateNewStudy, request, &reply)
            .error_code(),
        grpc::StatusCode::ALREADY_EXISTS);
    request.set_study_name("has a space");
    grpc::Status s =
        Call(&optuna::StorageService::Stub::CreateNewStudy, request, &reply);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("study_name"));
  }
  {
    optuna::GetStudyNameFromIdRequest request;
    request.set_study_id(study_id + 100);
    optuna::GetStudyNameFromIdReply reply;
    EXPECT_EQ(
        Call(&optuna::StorageService::Stub::GetStudyNameFromId, request, &reply)
            .error_code(),
        grpc::StatusCode::NOT_FOUND);
  }
  const int64_t trial = CreateRunningTrial(study_id);
  ASSERT_TRUE(SetParam(trial, "x", 1.0, kFloat).ok());
  const optuna::Trial before = GetTrial(trial);

  grpc::Status s = SetParam(trial, "y", 1.0, "{not json");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("distribution"));
  s = SetParam(trial, "x", 2.0, kInt);  // another kind for the same name
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("\"x\""));
  s = SetParam(trial, "z", std::nan(""), kFloat);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("param_value_internal"));
  s = Report(trial, 3, std::nan(""));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("intermediate_value"));
  s = Finish(trial, optuna::COMPLETE, {1.0, 2.0});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("values"));
  s = Finish(trial, static_cast<optuna::TrialState>(9), {});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("state"));

  const optuna::Trial after = GetTrial(trial);
  EXPECT_EQ(after.SerializeAsString(), before.SerializeAsString());
  EXPECT_EQ(HypertuneStudy("strict").spec().parameters_size(), 1);

  ASSERT_TRUE(Finish(trial, optuna::FAIL, {}).ok());
  s = Report(trial, 1, 1.0);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  s = SetParam(trial, "w", 1.0, kFloat);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  s = Finish(trial, optuna::COMPLETE, {1.0});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(HypertuneTrials("strict").at(0).state(), v1::Trial::FAILED);

  optuna::GetTrialRequest request;
  request.set_trial_id(trial + 1000);
  optuna::GetTrialReply reply;
  EXPECT_EQ(Call(&optuna::StorageService::Stub::GetTrial, request, &reply)
                .error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(OptunaStorageTest, OnlyStudiesMadeThroughThisDoorAreServed) {
  v1::CreateStudyRequest create;
  v1::Study& native = *create.mutable_study();
  native.set_name("native");
  auto* p = native.mutable_spec()->add_parameters();
  p->set_name("x");
  p->mutable_double_spec()->set_max(1);
  auto* m = native.mutable_spec()->add_metrics();
  m->set_name("loss");
  m->set_goal(v1::MetricSpec::MINIMIZE);
  v1::Study created;
  grpc::ClientContext context;
  ASSERT_TRUE(hypertune_->CreateStudy(&context, create, &created).ok());
  CreateStudy("door", {optuna::MINIMIZE});

  optuna::GetStudyIdFromNameRequest request;
  request.set_study_name("native");
  optuna::GetStudyIdFromNameReply reply;
  grpc::Status s =
      Call(&optuna::StorageService::Stub::GetStudyIdFromName, request, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("hypertune study"));

  optuna::GetAllStudiesReply all;
  ASSERT_TRUE(Call(&optuna::StorageService::Stub::GetAllStudies,
                   optuna::GetAllStudiesRequest(), &all)
                  .ok());
  ASSERT_EQ(all.studies_size(), 1);
  EXPECT_EQ(all.studies(0).study_name(), "door");

  optuna::DeleteStudyRequest del;
  del.set_study_id(all.studies(0).study_id());
  optuna::DeleteStudyReply deleted;
  ASSERT_TRUE(
      Call(&optuna::StorageService::Stub::DeleteStudy, del, &deleted).ok());
  EXPECT_EQ(Call(&optuna::StorageService::Stub::DeleteStudy, del, &deleted)
                .error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(OptunaStorageTest, AStudyLargerThanOneHypertuneAnswerIsReadWhole) {
  // Optuna's protocol has no pages: GetTrials answers with the whole study,
  // past hypertune's 4 MiB answers (each trial: 10,000 reported steps).
  const int64_t study_id = CreateStudy("long-curves", {optuna::MINIMIZE});
  constexpr int kTrials = 32;
  constexpr int kSteps = 10'000;
  for (int i = 0; i < kTrials; ++i) {
    optuna::CreateNewTrialRequest request;
    request.set_study_id(study_id);
    optuna::Trial& t = *request.mutable_template_trial();
    t.set_state(optuna::COMPLETE);
    t.add_values(i);
    for (int step = 0; step < kSteps; ++step) {
      (*t.mutable_intermediate_values())[step] = 1.0 / (step + 1.0) + i;
    }
    optuna::CreateNewTrialReply reply;
    ASSERT_TRUE(
        Call(&optuna::StorageService::Stub::CreateNewTrial, request, &reply)
            .ok());
  }
  optuna::GetTrialsRequest request;
  request.set_study_id(study_id);
  request.set_trial_id_greater_than(-1);
  optuna::GetTrialsReply reply;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);  // as GrpcStorageProxy's channel
  auto stub = optuna::StorageService::NewStub(grpc::CreateCustomChannel(
      server_->address(), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext context;
  grpc::Status s = stub->GetTrials(&context, request, &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GT(reply.ByteSizeLong(), kMaxResponseBytes);
  ASSERT_EQ(reply.trials_size(), kTrials);
  EXPECT_EQ(reply.trials(kTrials - 1).intermediate_values_size(), kSteps);
  EXPECT_EQ(reply.trials(kTrials - 1).intermediate_values().at(kSteps - 1),
            1.0 / kSteps + (kTrials - 1));
  // A template without times finished now.
  EXPECT_FALSE(reply.trials(0).datetime_complete().empty());
}

// The logic without gRPC, on the memory store: Optuna processes racing on
// one study (each thread creates, parameterizes and finishes its trials)
// get distinct trials numbered densely, each with its own values.
TEST(OptunaStorageLogic, ConcurrentWritersGetDenseNumbers) {
  storage::MemoryStore store;
  int64_t now = 1'000;
  service::OptunaStorage door(&store, [&now] { return now; });
  const service::Principal caller;
  optuna::CreateNewStudyRequest create;
  create.set_study_name("race");
  create.add_directions(optuna::MINIMIZE);
  absl::StatusOr<optuna::CreateNewStudyReply> study =
      door.CreateNewStudy(create, caller);
  ASSERT_TRUE(study.ok()) << study.status();
  constexpr int kThreads = 8;
  constexpr int kEach = 25;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        optuna::CreateNewTrialRequest request;
        request.set_study_id(study->study_id());
        request.set_template_trial_is_none(true);
        auto created = door.CreateNewTrial(request, caller);
        if (!created.ok()) {
          ++failures;
          continue;
        }
        optuna::SetTrialParameterRequest param;
        param.set_trial_id(created->trial_id());
        param.set_param_name("x");
        param.set_param_value_internal(t + i / 100.0);
        param.set_distribution(kFloat);
        optuna::SetTrialStateValuesRequest finish;
        finish.set_trial_id(created->trial_id());
        finish.set_state(optuna::COMPLETE);
        finish.add_values(t * 100 + i);
        if (!door.SetTrialParameter(param, caller).ok() ||
            !door.SetTrialStateValues(finish, caller).ok()) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  optuna::GetTrialsRequest request;
  request.set_study_id(study->study_id());
  request.set_trial_id_greater_than(-1);
  absl::StatusOr<optuna::GetTrialsReply> all = door.GetTrials(request, caller);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->trials_size(), kThreads * kEach);
  std::set<double> values;
  for (int i = 0; i < all->trials_size(); ++i) {
    const optuna::Trial& trial = all->trials(i);
    EXPECT_EQ(trial.number(), i);
    EXPECT_EQ(trial.state(), optuna::COMPLETE);
    ASSERT_EQ(trial.values_size(), 1);
    values.insert(trial.values(0));
    // Each trial's parameter is the one its own thread set.
    EXPECT_EQ(std::floor(trial.params().at("x")),
              std::floor(trial.values(0) / 100));
  }
  EXPECT_EQ(values.size(), static_cast<size_t>(kThreads * kEach));
}

TEST(OptunaStorageAuth, TokensAndOwnersApplyAsOnHypertunesOwnApi) {
  TempDir dir;
  const std::string tokens = dir.File("tokens");
  std::ofstream(tokens) << "tok-alice-0123456789 alice\n"
                        << "tok-bob-0123456789 bob\n";
  service::ServerOptions options;
  options.db_path = dir.File("auth.db");
  options.auth_token_file = tokens;
  std::unique_ptr<service::Server> server = StartServer(options);
  ASSERT_NE(server, nullptr);
  auto stub = optuna::StorageService::NewStub(grpc::CreateChannel(
      server->address(), grpc::InsecureChannelCredentials()));
  auto as = [](grpc::ClientContext& context, const std::string& token) {
    if (!token.empty()) {
      context.AddMetadata("authorization", "Bearer " + token);
    }
  };
  optuna::CreateNewStudyRequest create;
  create.set_study_name("alices");
  create.add_directions(optuna::MINIMIZE);
  optuna::CreateNewStudyReply created;
  {
    grpc::ClientContext context;
    EXPECT_EQ(stub->CreateNewStudy(&context, create, &created).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    as(context, "tok-alice-0123456789");
    ASSERT_TRUE(stub->CreateNewStudy(&context, create, &created).ok());
  }
  optuna::CreateNewTrialRequest trial;
  trial.set_study_id(created.study_id());
  trial.set_template_trial_is_none(true);
  optuna::CreateNewTrialReply reply;
  {
    grpc::ClientContext context;
    as(context, "tok-bob-0123456789");
    EXPECT_EQ(stub->CreateNewTrial(&context, trial, &reply).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    grpc::ClientContext context;
    as(context, "tok-alice-0123456789");
    EXPECT_TRUE(stub->CreateNewTrial(&context, trial, &reply).ok());
  }
}

}  // namespace
}  // namespace hypertune
