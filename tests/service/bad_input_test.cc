// Bad input over a real loopback server (in-process, temporary SQLite file):
// each malformed or hostile request gets its canonical code, what is stored
// comes back verbatim, and the server keeps serving with its data and its
// schema intact. One case per ctest entry, each on a fresh server.
#include <sqlite3.h>

#include <cmath>
#include <functional>
#include <latch>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "hypertune/v1/hypertune.grpc.pb.h"
#include "service/server.h"
#include "tests/service/test_server.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr char kInjection[] = "x'); DROP TABLE trials;--";

// 10 KB of printable text.
std::string LongString() {
  std::string s;
  while (s.size() < 10 * 1024) s += "abcdefghij";
  return s;
}

// Text with NUL bytes inside (valid UTF-8).
std::string WithNuls() { return std::string("a\0b\0\0c", 6); }

// Bytes that are not UTF-8: a lone continuation byte, an overlong encoding
// and bytes that never occur in UTF-8.
std::string NotUtf8() { return std::string("\x80\xc0\xaf\xfe\xff", 5); }

v1::Study TargetStudy(const std::string& name) {
  v1::Study study;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    spec {
      parameters { name: "x" double_spec { min: 0 max: 1 } }
      parameters { name: "n" integer_spec { min: 1 max: 5 } }
      parameters { name: "act" categorical_spec { values: [ "relu", "tanh" ] } }
      metrics { name: "loss" goal: MINIMIZE }
      algorithm: RANDOM
    })pb", &study);
  study.set_name(name);
  return study;
}

// Trial parameters for TargetStudy.
google::protobuf::RepeatedPtrField<v1::ParameterValue> Params(
    double x, int64_t n, const std::string& act) {
  v1::Trial trial;
  v1::ParameterValue* p = trial.add_parameters();
  p->set_name("x");
  p->set_double_value(x);
  p = trial.add_parameters();
  p->set_name("n");
  p->set_int_value(n);
  p = trial.add_parameters();
  p->set_name("act");
  p->set_string_value(act);
  return trial.parameters();
}

// The schema as sqlite_master lists it, and PRAGMA integrity_check, read
// through a read-only connection of our own beside the server's.
struct DbShape {
  std::vector<std::string> schema;  // "type name sql" per object.
  std::string integrity;
};

DbShape ReadDbShape(const std::string& path) {
  DbShape shape;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) !=
      SQLITE_OK) {
    ADD_FAILURE() << "opening " << path << ": " << sqlite3_errmsg(db);
    sqlite3_close(db);
    return shape;
  }
  auto column = [](sqlite3_stmt* s, int i) {
    const unsigned char* text = sqlite3_column_text(s, i);
    return text == nullptr ? std::string("NULL")
                           : std::string(reinterpret_cast<const char*>(text));
  };
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT type, name, sql FROM sqlite_master ORDER BY name",
                     -1, &stmt, nullptr);
  while (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
    shape.schema.push_back(column(stmt, 0) + " " + column(stmt, 1) + " " +
                           column(stmt, 2));
  }
  sqlite3_finalize(stmt);
  stmt = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &stmt, nullptr);
  if (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
    shape.integrity = column(stmt, 0);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return shape;
}

// A fresh server with two studies: "sentinel" (one COMPLETED and one ACTIVE
// trial) that no case touches and that must stay exactly as it was, and
// "target" (one ACTIVE trial, held by "w1") that cases aim at.
class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.File("bad.db");
    service::ServerOptions options;
    options.db_path = db_;
    options.listen = "127.0.0.1:0";
    auto server = service::Server::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(server_->address(),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::HyperTune::NewStub(channel_);

    ASSERT_TRUE(CreateStudy(TargetStudy("sentinel")).ok());
    v1::SuggestTrialsResponse s1, s2;
    ASSERT_TRUE(Suggest("sentinel", "s1", &s1).ok());
    ASSERT_TRUE(Suggest("sentinel", "s2", &s2).ok());
    ASSERT_EQ(s1.trials_size(), 1);
    v1::CompleteTrialRequest done;
    done.set_study_name("sentinel");
    done.set_trial_id(s1.trials(0).id());
    done.set_lease_epoch(s1.trials(0).lease_epoch());
    (*done.mutable_final_measurement()->mutable_metrics())["loss"] = 0.25;
    v1::Trial completed;
    ASSERT_TRUE(Complete(done, &completed).ok());
    ASSERT_TRUE(GetStudy("sentinel", &sentinel_).ok());
    sentinel_trials_ = ListTrials("sentinel");
    ASSERT_EQ(sentinel_trials_.size(), 2u);

    ASSERT_TRUE(CreateStudy(TargetStudy("target")).ok());
    v1::SuggestTrialsResponse held;
    ASSERT_TRUE(Suggest("target", "w1", &held).ok());
    ASSERT_EQ(held.trials_size(), 1);
    target_trial_ = held.trials(0);

    shape_ = ReadDbShape(db_);
    ASSERT_EQ(shape_.integrity, "ok");
    ASSERT_FALSE(shape_.schema.empty());
  }

  // After each case: a normal call (a write) succeeds, the sentinel study is
  // unchanged and the schema is the same, the file sound.
  void ExpectStillServingAndIntact() {
    v1::Study probe = TargetStudy("probe" + std::to_string(++probes_));
    grpc::Status created = CreateStudy(probe);
    EXPECT_TRUE(created.ok()) << created.error_message();
    v1::Study sentinel;
    ASSERT_TRUE(GetStudy("sentinel", &sentinel).ok());
    EXPECT_TRUE(MessageDifferencer::Equals(sentinel, sentinel_))
        << sentinel.DebugString();
    std::vector<v1::Trial> trials = ListTrials("sentinel");
    ASSERT_EQ(trials.size(), sentinel_trials_.size());
    for (size_t i = 0; i < trials.size(); ++i) {
      EXPECT_TRUE(MessageDifferencer::Equals(trials[i], sentinel_trials_[i]))
          << trials[i].DebugString();
    }
    DbShape now = ReadDbShape(db_);
    EXPECT_EQ(now.integrity, "ok");
    EXPECT_EQ(now.schema, shape_.schema);
  }

  grpc::Status CreateStudy(const v1::Study& study, v1::Study* out = nullptr) {
    grpc::ClientContext ctx;
    v1::CreateStudyRequest request;
    *request.mutable_study() = study;
    v1::Study response;
    return stub_->CreateStudy(&ctx, request, out ? out : &response);
  }
  grpc::Status GetStudy(const std::string& name, v1::Study* out) {
    grpc::ClientContext ctx;
    v1::GetStudyRequest request;
    request.set_name(name);
    return stub_->GetStudy(&ctx, request, out);
  }
  grpc::Status Suggest(const std::string& study, const std::string& client,
                       v1::SuggestTrialsResponse* out) {
    grpc::ClientContext ctx;
    v1::SuggestTrialsRequest request;
    request.set_study_name(study);
    request.set_count(1);
    request.set_client_id(client);
    return stub_->SuggestTrials(&ctx, request, out);
  }
  grpc::Status GetTrial(const std::string& study, int64_t id, v1::Trial* out) {
    grpc::ClientContext ctx;
    v1::GetTrialRequest request;
    request.set_study_name(study);
    request.set_trial_id(id);
    return stub_->GetTrial(&ctx, request, out);
  }
  std::vector<v1::Trial> ListTrials(const std::string& study) {
    grpc::ClientContext ctx;
    v1::ListTrialsRequest request;
    request.set_study_name(study);
    request.set_page_size(1000);
    v1::ListTrialsResponse response;
    grpc::Status status = stub_->ListTrials(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return {response.trials().begin(), response.trials().end()};
  }
  // A measurement of the target trial under its epoch.
  grpc::Status Measure(int64_t step, double loss, v1::Trial* out = nullptr) {
    grpc::ClientContext ctx;
    v1::AddMeasurementRequest request;
    request.set_study_name("target");
    request.set_trial_id(target_trial_.id());
    request.set_lease_epoch(target_trial_.lease_epoch());
    request.mutable_measurement()->set_step(step);
    (*request.mutable_measurement()->mutable_metrics())["loss"] = loss;
    v1::Trial response;
    return stub_->AddMeasurement(&ctx, request, out ? out : &response);
  }
  grpc::Status Complete(const v1::CompleteTrialRequest& request,
                        v1::Trial* out) {
    grpc::ClientContext ctx;
    return stub_->CompleteTrial(&ctx, request, out);
  }
  grpc::Status CreateTrial(const std::string& study, const v1::Trial& trial,
                           v1::Trial* out = nullptr) {
    grpc::ClientContext ctx;
    v1::CreateTrialRequest request;
    request.set_study_name(study);
    *request.mutable_trial() = trial;
    v1::Trial response;
    return stub_->CreateTrial(&ctx, request, out ? out : &response);
  }
  grpc::Status Heartbeat(const std::string& checkpoint_uri) {
    grpc::ClientContext ctx;
    v1::HeartbeatRequest request;
    request.set_study_name("target");
    request.set_trial_id(target_trial_.id());
    request.set_lease_epoch(target_trial_.lease_epoch());
    request.set_client_id("w1");
    request.set_checkpoint_uri(checkpoint_uri);
    v1::HeartbeatResponse response;
    return stub_->Heartbeat(&ctx, request, &response);
  }
  // Sends `bytes` as the request of `method` (e.g. "SuggestTrials") without
  // protobuf on our side, so that any bytes reach the server.
  grpc::Status RawCall(const std::string& method, const std::string& bytes,
                       std::string* response_bytes) {
    grpc::GenericStub generic(channel_);
    grpc::CompletionQueue cq;
    grpc::ClientContext ctx;
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    auto rpc = generic.PrepareUnaryCall(
        &ctx, "/hypertune.v1.HyperTune/" + method, request, &cq);
    rpc->StartCall();
    grpc::ByteBuffer response;
    grpc::Status status;
    rpc->Finish(&response, &status, reinterpret_cast<void*>(1));
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq.Next(&tag, &ok));
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    std::vector<grpc::Slice> slices;
    response_bytes->clear();
    if (status.ok() && response.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        response_bytes->append(reinterpret_cast<const char*>(s.begin()),
                               s.size());
      }
    }
    return status;
  }
  // `message` serialized with the placeholder `marker` (same length as
  // `bytes`, occurring once) replaced by `bytes`: any bytes in a string field.
  static std::string WithBytes(const google::protobuf::Message& message,
                               const std::string& marker,
                               const std::string& bytes) {
    std::string wire = message.SerializeAsString();
    size_t at = wire.find(marker);
    EXPECT_NE(at, std::string::npos);
    EXPECT_EQ(marker.size(), bytes.size());
    EXPECT_EQ(wire.find(marker, at + 1), std::string::npos);
    if (at != std::string::npos) wire.replace(at, marker.size(), bytes);
    return wire;
  }

  test::TempDir dir_;
  std::string db_;
  std::unique_ptr<service::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::HyperTune::Stub> stub_;
  v1::Study sentinel_;
  std::vector<v1::Trial> sentinel_trials_;
  v1::Trial target_trial_;
  DbShape shape_;
  int probes_ = 0;
};

// One row of the table: the call under test, the codes it may get, a part of
// its error message, and (when it succeeds) a check of what was stored.
class BadInputCaseTest;
struct BadInputCase {
  std::string name;
  std::function<grpc::Status(BadInputCaseTest&)> call;
  std::set<grpc::StatusCode> codes;
  std::string message_part;
  std::function<void(BadInputCaseTest&)> check_stored;
};

// Exposes the fixture's helpers to the table's lambdas.
class BadInputCaseTest : public BadInputTest,
                         public ::testing::WithParamInterface<BadInputCase> {
 public:
  using BadInputTest::CreateStudy;
  using BadInputTest::CreateTrial;
  using BadInputTest::GetStudy;
  using BadInputTest::GetTrial;
  using BadInputTest::Heartbeat;
  using BadInputTest::Measure;
  using BadInputTest::RawCall;
  using BadInputTest::Suggest;
  using BadInputTest::WithBytes;
  using BadInputTest::stub_;
  using BadInputTest::target_trial_;
};

TEST_P(BadInputCaseTest, GetsItsCodeAndTheServerKeepsServing) {
  const BadInputCase& c = GetParam();
  grpc::Status status = c.call(*this);
  EXPECT_TRUE(c.codes.contains(status.error_code()))
      << "got code " << status.error_code() << ": " << status.error_message();
  if (!c.message_part.empty()) {
    EXPECT_THAT(status.error_message(), HasSubstr(c.message_part));
  }
  if (status.ok() && c.check_stored) c.check_stored(*this);
  ExpectStillServingAndIntact();
}

using Code = grpc::StatusCode;

std::vector<BadInputCase> Cases() {
  std::vector<BadInputCase> cases;
  auto add = [&](BadInputCase c) { cases.push_back(std::move(c)); };

  // ----- Metrics -----
  add({"NaNMetric",
       [](BadInputCaseTest& t) { return t.Measure(1, std::nan("")); },
       {Code::INVALID_ARGUMENT}, "NaN", nullptr});
  add({"PlusInfinityMetricIsKept",
       [](BadInputCaseTest& t) { return t.Measure(1, kInf); },
       {Code::OK}, "",
       [](BadInputCaseTest& t) {
         v1::Trial trial;
         ASSERT_TRUE(t.GetTrial("target", t.target_trial_.id(), &trial).ok());
         ASSERT_EQ(trial.measurements_size(), 1);
         EXPECT_EQ(trial.measurements(0).metrics().at("loss"), kInf);
       }});
  add({"MinusInfinityFinalMetricIsKept",
       [](BadInputCaseTest& t) {
         v1::CompleteTrialRequest request;
         request.set_study_name("target");
         request.set_trial_id(t.target_trial_.id());
         request.set_lease_epoch(t.target_trial_.lease_epoch());
         (*request.mutable_final_measurement()->mutable_metrics())["loss"] =
             -kInf;
         v1::Trial out;
         grpc::ClientContext ctx;
         return t.stub_->CompleteTrial(&ctx, request, &out);
       },
       {Code::OK}, "",
       [](BadInputCaseTest& t) {
         v1::Trial trial;
         ASSERT_TRUE(t.GetTrial("target", t.target_trial_.id(), &trial).ok());
         EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
         EXPECT_EQ(trial.final_measurement().metrics().at("loss"), -kInf);
         // The best of a MINIMIZE study is the -Infinity one.
         grpc::ClientContext ctx;
         v1::ListOptimalTrialsRequest request;
         request.set_study_name("target");
         v1::ListOptimalTrialsResponse best;
         ASSERT_TRUE(t.stub_->ListOptimalTrials(&ctx, request, &best).ok());
         ASSERT_EQ(best.trials_size(), 1);
         EXPECT_EQ(best.trials(0).id(), t.target_trial_.id());
       }});
  add({"StepGoingBackwards",
       [](BadInputCaseTest& t) {
         EXPECT_TRUE(t.Measure(5, 0.5).ok());
         return t.Measure(3, 0.4);
       },
       {Code::INVALID_ARGUMENT}, "below the latest", nullptr});
  add({"SameStepOtherMetrics",
       [](BadInputCaseTest& t) {
         EXPECT_TRUE(t.Measure(2, 0.5).ok());
         return t.Measure(2, 0.6);
       },
       {Code::INVALID_ARGUMENT}, "already recorded", nullptr});

  // ----- Parameters -----
  add({"DoubleOutsideItsRange",
       [](BadInputCaseTest& t) {
         v1::Trial trial;
         *trial.mutable_parameters() = Params(7, 2, "relu");
         return t.CreateTrial("target", trial);
       },
       {Code::INVALID_ARGUMENT}, "\"x\"", nullptr});
  add({"IntegerOutsideItsRange",
       [](BadInputCaseTest& t) {
         v1::Trial trial;
         *trial.mutable_parameters() = Params(0.5, 9, "relu");
         return t.CreateTrial("target", trial);
       },
       {Code::INVALID_ARGUMENT}, "\"n\"", nullptr});
  add({"InfiniteParameter",
       [](BadInputCaseTest& t) {
         v1::Trial trial;
         *trial.mutable_parameters() = Params(kInf, 2, "relu");
         return t.CreateTrial("target", trial);
       },
       {Code::INVALID_ARGUMENT}, "\"x\"", nullptr});
  add({"UnknownCategory",
       [](BadInputCaseTest& t) {
         v1::Trial trial;
         *trial.mutable_parameters() = Params(0.5, 2, "sigmoid");
         return t.CreateTrial("target", trial);
       },
       {Code::INVALID_ARGUMENT}, "unknown category", nullptr});

  // ----- Names and ids -----
  add({"UnknownStudy",
       [](BadInputCaseTest& t) {
         v1::SuggestTrialsResponse out;
         return t.Suggest("nope", "w1", &out);
       },
       {Code::NOT_FOUND}, "nope", nullptr});
  add({"UnknownTrial",
       [](BadInputCaseTest& t) {
         v1::Trial out;
         return t.GetTrial("target", 999, &out);
       },
       {Code::NOT_FOUND}, "999", nullptr});
  add({"MeasurementOfUnknownTrial",
       [](BadInputCaseTest& t) {
         grpc::ClientContext ctx;
         v1::AddMeasurementRequest request;
         request.set_study_name("target");
         request.set_trial_id(999);
         request.set_lease_epoch(1);
         request.mutable_measurement()->set_step(1);
         (*request.mutable_measurement()->mutable_metrics())["loss"] = 1;
         v1::Trial out;
         return t.stub_->AddMeasurement(&ctx, request, &out);
       },
       {Code::NOT_FOUND}, "999", nullptr});
  add({"DuplicateStudy",
       [](BadInputCaseTest& t) { return t.CreateStudy(TargetStudy("target")); },
       {Code::ALREADY_EXISTS}, "target", nullptr});
  add({"SqlInStudyName",
       [](BadInputCaseTest& t) { return t.CreateStudy(TargetStudy(kInjection)); },
       {Code::INVALID_ARGUMENT}, "study.name", nullptr});
  add({"SqlInLookedUpStudyName",
       [](BadInputCaseTest& t) {
         v1::Study out;
         return t.GetStudy(kInjection, &out);
       },
       {Code::INVALID_ARGUMENT}, "name", nullptr});
  add({"TenKilobyteStudyName",
       [](BadInputCaseTest& t) {
         return t.CreateStudy(TargetStudy(LongString()));
       },
       {Code::INVALID_ARGUMENT}, "study.name", nullptr});
  add({"NulInStudyName",
       [](BadInputCaseTest& t) {
         return t.CreateStudy(TargetStudy(std::string("ab\0cd", 5)));
       },
       {Code::INVALID_ARGUMENT}, "study.name", nullptr});
  add({"SqlInMetricName",
       [](BadInputCaseTest& t) {
         v1::Study study = TargetStudy("m");
         study.mutable_spec()->mutable_metrics(0)->set_name(kInjection);
         return t.CreateStudy(study);
       },
       {Code::INVALID_ARGUMENT}, "metrics[0]", nullptr});
  add({"SqlInMeasurementMetricName",
       [](BadInputCaseTest& t) {
         grpc::ClientContext ctx;
         v1::AddMeasurementRequest request;
         request.set_study_name("target");
         request.set_trial_id(t.target_trial_.id());
         request.set_lease_epoch(t.target_trial_.lease_epoch());
         (*request.mutable_measurement()->mutable_metrics())[kInjection] = 1;
         v1::Trial out;
         return t.stub_->AddMeasurement(&ctx, request, &out);
       },
       {Code::INVALID_ARGUMENT}, "metrics", nullptr});

  // ----- Free text, stored verbatim -----
  // Categories, client ids and checkpoint URIs are the caller's text: SQL,
  // 10 KB and NUL bytes are data like any other.
  for (const auto& [label, value] :
       std::vector<std::pair<std::string, std::string>>{
           {"Sql", kInjection},
           {"TenKilobyte", LongString()},
           {"Nul", WithNuls()}}) {
    add({label + "CategoryIsStoredVerbatim",
         [value](BadInputCaseTest& t) {
           v1::Study study = TargetStudy("cats");
           auto* values = study.mutable_spec()
                              ->mutable_parameters(2)
                              ->mutable_categorical_spec();
           values->add_values(value);
           grpc::Status s = t.CreateStudy(study);
           if (!s.ok()) return s;
           v1::Trial trial;
           *trial.mutable_parameters() = Params(0.5, 2, value);
           return t.CreateTrial("cats", trial);
         },
         {Code::OK}, "",
         [value](BadInputCaseTest& t) {
           v1::Study study;
           ASSERT_TRUE(t.GetStudy("cats", &study).ok());
           EXPECT_EQ(study.spec().parameters(2).categorical_spec().values(2),
                     value);
           v1::Trial trial;
           ASSERT_TRUE(t.GetTrial("cats", 1, &trial).ok());
           EXPECT_EQ(trial.parameters(2).string_value(), value);
         }});
    add({label + "ClientIdIsStoredVerbatim",
         [value](BadInputCaseTest& t) {
           v1::SuggestTrialsResponse out;
           return t.Suggest("target", value, &out);
         },
         {Code::OK}, "",
         [value](BadInputCaseTest& t) {
           v1::Trial trial;
           ASSERT_TRUE(t.GetTrial("target", 2, &trial).ok());
           EXPECT_EQ(trial.client_id(), value);
           // Asking again under that id gives the same trial back.
           v1::SuggestTrialsResponse again;
           ASSERT_TRUE(t.Suggest("target", value, &again).ok());
           ASSERT_EQ(again.trials_size(), 1);
           EXPECT_EQ(again.trials(0).id(), 2);
         }});
    add({label + "CheckpointUriIsStoredVerbatim",
         [value](BadInputCaseTest& t) { return t.Heartbeat(value); },
         {Code::OK}, "",
         [value](BadInputCaseTest& t) {
           v1::Trial trial;
           ASSERT_TRUE(t.GetTrial("target", t.target_trial_.id(), &trial).ok());
           EXPECT_EQ(trial.checkpoint_uri(), value);
         }});
  }

  // ----- Size -----
  add({"FiveMebibyteMessage",
       [](BadInputCaseTest& t) {
         return t.Heartbeat(std::string(5 << 20, 'x'));
       },
       {Code::RESOURCE_EXHAUSTED}, "", nullptr});
  add({"GarbageBytes",
       [](BadInputCaseTest& t) {
         std::string response;
         return t.RawCall("GetStudy", std::string("\xff\xff\xff\xff\x0f", 5),
                          &response);
       },
       // Not a protobuf message at all. gRPC refuses it before any handler
       // runs with a bare INTERNAL ("error parsing request proto"), which
       // the server reports as the bad input it is.
       {Code::INVALID_ARGUMENT}, "", nullptr});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadInputCaseTest, ::testing::ValuesIn(Cases()),
    [](const ::testing::TestParamInfo<BadInputCase>& info) {
      return info.param.name;
    });

// Strings that are not UTF-8, sent as raw bytes: proto3 `string` fields must
// hold UTF-8, so the request is either refused as INVALID_ARGUMENT or (were
// the server lenient) stored verbatim; anything else is a wrong code.
TEST_F(BadInputTest, NotUtf8ClientIdIsRefusedAsInvalidArgumentOrKept) {
  v1::SuggestTrialsRequest request;
  request.set_study_name("target");
  request.set_count(1);
  request.set_client_id("QQQQQ");
  std::string response_bytes;
  grpc::Status status = RawCall(
      "SuggestTrials", WithBytes(request, "QQQQQ", NotUtf8()), &response_bytes);
  EXPECT_TRUE(status.ok() ||
              status.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
      << "got code " << status.error_code() << ": \"" << status.error_message()
      << "\"";
  EXPECT_TRUE(status.ok() || !status.error_message().empty());
  if (status.ok()) {
    std::vector<v1::Trial> trials = ListTrials("target");
    ASSERT_EQ(trials.size(), 2u);
    EXPECT_EQ(trials[1].client_id(), NotUtf8());
  }
  ExpectStillServingAndIntact();
}

TEST_F(BadInputTest, NotUtf8StudyNameIsRefusedAsInvalidArgument) {
  v1::CreateStudyRequest request;
  *request.mutable_study() = TargetStudy("QQQQQ");
  std::string response_bytes;
  grpc::Status status = RawCall(
      "CreateStudy", WithBytes(request, "QQQQQ", NotUtf8()), &response_bytes);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << status.error_message();
  EXPECT_FALSE(status.error_message().empty());
  ExpectStillServingAndIntact();
}

// A well-formed request sent through RawCall works, so the two tests above
// test the bytes, not the raw path.
TEST_F(BadInputTest, RawCallOfAValidRequestSucceeds) {
  v1::SuggestTrialsRequest request;
  request.set_study_name("target");
  request.set_count(1);
  request.set_client_id("QQQQQ");
  std::string response_bytes;
  grpc::Status status = RawCall(
      "SuggestTrials", WithBytes(request, "QQQQQ", "raw-1"), &response_bytes);
  ASSERT_TRUE(status.ok()) << status.error_message();
  v1::SuggestTrialsResponse response;
  ASSERT_TRUE(response.ParseFromString(response_bytes));
  ASSERT_EQ(response.trials_size(), 1);
  EXPECT_EQ(response.trials(0).client_id(), "raw-1");
  ExpectStillServingAndIntact();
}

// 32 workers, each with its own connection and client id, released together
// by a barrier: 32 distinct trials, no errors.
TEST_F(BadInputTest, ThirtyTwoWorkersAtOnceGetDistinctTrials) {
  constexpr int kWorkers = 32;
  ASSERT_TRUE(CreateStudy(TargetStudy("crowd")).ok());
  std::latch start(kWorkers);
  std::vector<absl::StatusOr<v1::SuggestTrialsResponse>> results(
      kWorkers, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      start.arrive_and_wait();
      ClientOptions options;
      options.server = server_->address();
      options.client_id = "crowd-" + std::to_string(w);
      options.heartbeats = false;
      Client client(options);
      results[w] = client.Suggest("crowd", 1);
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<int64_t> ids;
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(results[w].ok()) << "worker " << w << ": " << results[w].status();
    ASSERT_EQ(results[w]->trials_size(), 1) << "worker " << w;
    EXPECT_EQ(results[w]->trials(0).client_id(), "crowd-" + std::to_string(w));
    ids.insert(results[w]->trials(0).id());
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kWorkers));
  std::vector<v1::Trial> trials = ListTrials("crowd");
  ASSERT_EQ(trials.size(), static_cast<size_t>(kWorkers));
  for (const v1::Trial& t : trials) {
    EXPECT_EQ(t.state(), v1::Trial::ACTIVE);
    EXPECT_EQ(t.lease_epoch(), 1);
  }
  ExpectStillServingAndIntact();
}

}  // namespace
}  // namespace hypertune
