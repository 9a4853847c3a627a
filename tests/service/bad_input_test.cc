// Bad input over a real loopback server (in-process, temporary SQLite file):
// each malformed or hostile request gets its canonical code, what is stored
// comes back verbatim, and the server keeps serving with its data and its
// schema intact. One case per ctest entry, each on a fresh server.
#include <sqlite3.h>

#include <cmath>
#include <functional>
#include <latch>
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
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "hypertune/v1/hypertune.grpc.pb.h"
#include "service/server/server.h"
#include "testing/test_server.h"
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
    })pb",
                                                &study);
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
  using BadInputTest::stub_;
  using BadInputTest::Suggest;
  using BadInputTest::target_trial_;
  using BadInputTest::WithBytes;
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
       {Code::INVALID_ARGUMENT},
       "NaN",
       nullptr});
  add({"PlusInfinityMetricIsKept",
       [](BadInputCaseTest& t) { return t.Measure(1, kInf); },
       {Code::OK},
       "",
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
       {Code::OK},
       "",
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
       {Code::INVALID_ARGUMENT},
       "below the latest",
       nullptr});
  add({"SameStepOtherMetrics",
       [](BadInputCaseTest& t) {
         EXPECT_TRUE(t.Measure(2, 0.5).ok());
         return t.Measure(2, 0.6);
       },
       {Code::INVALID_ARGUMENT},
       "already recorded",
       nullptr});

  // ----- Attributes -----
  // A completion with `attributes`.
  auto complete_with = [](BadInputCaseTest& t,
                          std::map<std::string, std::string> attributes) {
    v1::CompleteTrialRequest request;
    request.set_study_name("target");
    request.set_trial_id(t.target_trial_.id());
    request.set_lease_epoch(t.target_trial_.lease_epoch());
    (*request.mutable_final_measurement()->mutable_metrics())["loss"] = 0.5;
    request.mutable_attributes()->insert(attributes.begin(), attributes.end());
    v1::Trial out;
    grpc::ClientContext ctx;
    return t.stub_->CompleteTrial(&ctx, request, &out);
  };
  add({"AttributesAreKept",
       [complete_with](BadInputCaseTest& t) {
         return complete_with(
             t, {{"git_commit", "4f2a9c1"}, {"model", "s3://bucket/model.pt"}});
       },
       {Code::OK},
       "",
       [](BadInputCaseTest& t) {
         v1::Trial trial;
         ASSERT_TRUE(t.GetTrial("target", t.target_trial_.id(), &trial).ok());
         EXPECT_EQ(trial.attributes().at("git_commit"), "4f2a9c1");
         EXPECT_EQ(trial.attributes().at("model"), "s3://bucket/model.pt");
       }});
  // Keys are names: they become CSV columns and dashboard labels.
  add({"AttributeKeyIsNotAName",
       [complete_with](BadInputCaseTest& t) {
         return complete_with(t, {{"git commit", "4f2a9c1"}});
       },
       {Code::INVALID_ARGUMENT},
       "attributes[\"git commit\"] (key)",
       nullptr});
  add({"TooManyAttributes",
       [complete_with](BadInputCaseTest& t) {
         std::map<std::string, std::string> many;
         for (int i = 0; i <= kMaxAttributes; ++i) {
           many[absl::StrCat("k", i)] = "v";
         }
         return complete_with(t, many);
       },
       {Code::INVALID_ARGUMENT},
       "attributes: 65 entries; at most 64",
       nullptr});
  add({"AttributeValueTooLong",
       [complete_with](BadInputCaseTest& t) {
         return complete_with(
             t, {{"log", std::string(kMaxAttributeValueBytes + 1, 'x')}});
       },
       {Code::INVALID_ARGUMENT},
       "attributes[\"log\"]",
       nullptr});
  add({"AttributeWithEmptyKey",
       [complete_with](BadInputCaseTest& t) {
         return complete_with(t, {{"", "v"}});
       },
       {Code::INVALID_ARGUMENT},
       "a key must not be empty",
       nullptr});
  add({"StudyAttributeValueTooLong",
       [](BadInputCaseTest& t) {
         v1::Study study = TargetStudy("noted");
         (*study.mutable_attributes())["note"] =
             std::string(kMaxAttributeValueBytes + 1, 'x');
         v1::Study out;
         return t.CreateStudy(study, &out);
       },
       {Code::INVALID_ARGUMENT},
       "study.attributes[\"note\"]",
       nullptr});

  // ----- Parameters -----
  add({"DoubleOutsideItsRange",
       [](BadInputCaseTest& t) {
         v1::Trial trial;
         *trial.mutable_parameters() = Params(7, 2, "relu");
         return t.CreateTrial("target", trial);
       },
       {Code::INVALID_ARGUMENT},
       "\"x\"",
       nullptr});
  add({"IntegerOutsideItsRange",
       [](BadInputCaseTest& t) {
         v1::Trial trial;
         *trial.mutable_parameters() = Params(0.5, 9, "relu");
         return t.CreateTrial("target", trial);
       },
       {Code::INVALID_ARGUMENT},
       "\"n\"",
       nullptr});
  add({"InfiniteParameter",
       [](BadInputCaseTest& t) {
         v1::Trial trial;
         *trial.mutable_parameters() = Params(kInf, 2, "relu");
         return t.CreateTrial("target", trial);
       },
       {Code::INVALID_ARGUMENT},
       "\"x\"",
       nullptr});
  add({"UnknownCategory",
       [](BadInputCaseTest& t) {
         v1::Trial trial;
         *trial.mutable_parameters() = Params(0.5, 2, "sigmoid");
         return t.CreateTrial("target", trial);
       },
       {Code::INVALID_ARGUMENT},
       "unknown category",
       nullptr});

  // ----- Names and ids -----
  add({"UnknownStudy",
       [](BadInputCaseTest& t) {
         v1::SuggestTrialsResponse out;
         return t.Suggest("nope", "w1", &out);
       },
       {Code::NOT_FOUND},
       "nope",
       nullptr});
  add({"UnknownTrial",
       [](BadInputCaseTest& t) {
         v1::Trial out;
         return t.GetTrial("target", 999, &out);
       },
       {Code::NOT_FOUND},
       "999",
       nullptr});
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
       {Code::NOT_FOUND},
       "999",
       nullptr});
  add({"DuplicateStudy",
       [](BadInputCaseTest& t) { return t.CreateStudy(TargetStudy("target")); },
       {Code::ALREADY_EXISTS},
       "target",
       nullptr});
  add({"SqlInStudyName",
       [](BadInputCaseTest& t) {
         return t.CreateStudy(TargetStudy(kInjection));
       },
       {Code::INVALID_ARGUMENT},
       "study.name",
       nullptr});
  add({"SqlInLookedUpStudyName",
       [](BadInputCaseTest& t) {
         v1::Study out;
         return t.GetStudy(kInjection, &out);
       },
       {Code::INVALID_ARGUMENT},
       "name",
       nullptr});
  add({"TenKilobyteStudyName",
       [](BadInputCaseTest& t) {
         return t.CreateStudy(TargetStudy(LongString()));
       },
       {Code::INVALID_ARGUMENT},
       "study.name",
       nullptr});
  add({"NulInStudyName",
       [](BadInputCaseTest& t) {
         return t.CreateStudy(TargetStudy(std::string("ab\0cd", 5)));
       },
       {Code::INVALID_ARGUMENT},
       "study.name",
       nullptr});
  add({"SqlInMetricName",
       [](BadInputCaseTest& t) {
         v1::Study study = TargetStudy("m");
         study.mutable_spec()->mutable_metrics(0)->set_name(kInjection);
         return t.CreateStudy(study);
       },
       {Code::INVALID_ARGUMENT},
       "metrics[0]",
       nullptr});
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
       {Code::INVALID_ARGUMENT},
       "metrics",
       nullptr});
  // A misspelt objective: early stopping would never see the trial's curve.
  add({"MeasurementWithoutTheObjective",
       [](BadInputCaseTest& t) {
         grpc::ClientContext ctx;
         v1::AddMeasurementRequest request;
         request.set_study_name("target");
         request.set_trial_id(t.target_trial_.id());
         request.set_lease_epoch(t.target_trial_.lease_epoch());
         request.mutable_measurement()->set_step(7);
         (*request.mutable_measurement()->mutable_metrics())["los"] = 1;
         v1::Trial out;
         return t.stub_->AddMeasurement(&ctx, request, &out);
       },
       {Code::INVALID_ARGUMENT},
       "objective \"loss\"",
       nullptr});

  // ----- Free text, stored verbatim -----
  // Categories, client ids and checkpoint URIs are the caller's text: SQL,
  // NUL bytes and text of the field's longest length are data like any
  // other.
  struct Text {
    std::string label;
    std::string category, client_id, uri;
  };
  for (const Text& text :
       std::vector<Text>{{"Sql", kInjection, kInjection, kInjection},
                         {"Longest", std::string(kMaxCategoryBytes, 'c'),
                          std::string(kMaxClientIdBytes, 'i'),
                          std::string(kMaxUriBytes, 'u')},
                         {"Nul", WithNuls(), WithNuls(), WithNuls()}}) {
    const std::string& label = text.label;
    std::string value = text.category;
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
         {Code::OK},
         "",
         [value](BadInputCaseTest& t) {
           v1::Study study;
           ASSERT_TRUE(t.GetStudy("cats", &study).ok());
           EXPECT_EQ(study.spec().parameters(2).categorical_spec().values(2),
                     value);
           v1::Trial trial;
           ASSERT_TRUE(t.GetTrial("cats", 1, &trial).ok());
           EXPECT_EQ(trial.parameters(2).string_value(), value);
         }});
    value = text.client_id;
    add({label + "ClientIdIsStoredVerbatim",
         [value](BadInputCaseTest& t) {
           v1::SuggestTrialsResponse out;
           return t.Suggest("target", value, &out);
         },
         {Code::OK},
         "",
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
    value = text.uri;
    add({label + "CheckpointUriIsStoredVerbatim",
         [value](BadInputCaseTest& t) { return t.Heartbeat(value); },
         {Code::OK},
         "",
         [value](BadInputCaseTest& t) {
           v1::Trial trial;
           ASSERT_TRUE(t.GetTrial("target", t.target_trial_.id(), &trial).ok());
           EXPECT_EQ(trial.checkpoint_uri(), value);
         }});
  }

  // ----- Limits (common/limits.h): refused naming the field and limit -----
  add({"CategoryOverItsLimit",
       [](BadInputCaseTest& t) {
         v1::Study study = TargetStudy("cats");
         study.mutable_spec()
             ->mutable_parameters(2)
             ->mutable_categorical_spec()
             ->add_values(std::string(kMaxCategoryBytes + 1, 'c'));
         return t.CreateStudy(study);
       },
       {Code::INVALID_ARGUMENT},
       "categorical_spec.values[2]: 1025 bytes, over the limit",
       nullptr});
  add({"ClientIdOverItsLimit",
       [](BadInputCaseTest& t) {
         v1::SuggestTrialsResponse out;
         return t.Suggest("target", std::string(kMaxClientIdBytes + 1, 'i'),
                          &out);
       },
       {Code::INVALID_ARGUMENT},
       "client_id: 257 bytes, over the limit",
       nullptr});
  add({"CheckpointUriOverItsLimit",
       [](BadInputCaseTest& t) {
         return t.Heartbeat(std::string(kMaxUriBytes + 1, 'u'));
       },
       {Code::INVALID_ARGUMENT},
       "checkpoint_uri: 4097 bytes, over the limit",
       nullptr});
  add({"InfeasibleReasonOverItsLimit",
       [](BadInputCaseTest& t) {
         v1::CompleteTrialRequest request;
         request.set_study_name("target");
         request.set_trial_id(t.target_trial_.id());
         request.set_lease_epoch(t.target_trial_.lease_epoch());
         request.set_infeasible(true);
         request.set_infeasible_reason(std::string(kMaxReasonBytes + 1, 'r'));
         v1::Trial out;
         grpc::ClientContext ctx;
         return t.stub_->CompleteTrial(&ctx, request, &out);
       },
       {Code::INVALID_ARGUMENT},
       "infeasible_reason: 4097 bytes",
       nullptr});
  // The outside review's 100k metric names in one measurement.
  add({"HundredThousandMetricsInOneMeasurement",
       [](BadInputCaseTest& t) {
         grpc::ClientContext ctx;
         v1::AddMeasurementRequest request;
         request.set_study_name("target");
         request.set_trial_id(t.target_trial_.id());
         request.set_lease_epoch(t.target_trial_.lease_epoch());
         request.mutable_measurement()->set_step(1);
         auto& metrics = *request.mutable_measurement()->mutable_metrics();
         for (int i = 0; i < 100'000; ++i) metrics["m" + std::to_string(i)] = i;
         v1::Trial out;
         return t.stub_->AddMeasurement(&ctx, request, &out);
       },
       {Code::INVALID_ARGUMENT},
       "100000 metrics, over the limit of 200",
       nullptr});
  add({"TooManyParameters",
       [](BadInputCaseTest& t) {
         v1::Study study = TargetStudy("wide");
         for (int i = 0; i < kMaxParameters; ++i) {
           v1::ParameterSpec* p = study.mutable_spec()->add_parameters();
           p->set_name("p" + std::to_string(i));
           p->mutable_double_spec()->set_max(1);
         }
         return t.CreateStudy(study);
       },
       {Code::INVALID_ARGUMENT},
       "503 parameters, over the limit of 500",
       nullptr});

  // ----- Validation gaps of the outside review -----
  auto spec_case = [&](const std::string& name,
                       std::function<void(v1::StudySpec&)> edit,
                       const std::string& message) {
    add({name,
         [edit](BadInputCaseTest& t) {
           v1::Study study = TargetStudy("edited");
           edit(*study.mutable_spec());
           return t.CreateStudy(study);
         },
         {Code::INVALID_ARGUMENT},
         message,
         nullptr});
  };
  for (int64_t max :
       {int64_t{4611686018427387904}, std::numeric_limits<int64_t>::max()}) {
    // Once pinned a core forever (the bracket count overflowed).
    spec_case(
        absl::StrCat("HyperbandMaxResource", max),
        [max](v1::StudySpec& spec) {
          auto* es = spec.mutable_early_stopping();
          es->set_rule(v1::EarlyStoppingSpec::HYPERBAND);
          es->set_min_resource(1);
          es->set_max_resource(max);
          es->set_reduction_factor(2);
        },
        "early_stopping.max_resource: must be <= 2^53");
  }
  spec_case(
      "AshaReductionFactorOfTenToThe300",
      [](v1::StudySpec& spec) {
        auto* es = spec.mutable_early_stopping();
        es->set_rule(v1::EarlyStoppingSpec::ASHA);
        es->set_max_resource(81);
        es->set_reduction_factor(1e300);
      },
      "early_stopping.reduction_factor: must be in [2, ");
  spec_case(
      "NegativeLeaseSeconds",
      [](v1::StudySpec& spec) { spec.set_lease_seconds(-5); },
      "study.spec.lease_seconds: must be from 1 to 86400");
  spec_case(
      "LeaseSecondsOfTwoToThe31",
      [](v1::StudySpec& spec) { spec.set_lease_seconds(2147483647); },
      "study.spec.lease_seconds: must be from 1 to 86400");
  spec_case(
      "NegativeMaxRetries",
      [](v1::StudySpec& spec) { spec.set_max_retries(-1); },
      "study.spec.max_retries: must be from 0 to 1000, got -1");
  spec_case(
      "UnknownScale",
      [](v1::StudySpec& spec) {
        spec.mutable_parameters(0)->mutable_double_spec()->set_scale(
            static_cast<v1::Scale>(99));
      },
      "double_spec.scale: unknown scale 99 (one of LINEAR, LOG)");
  spec_case(
      "UnknownAlgorithm",
      [](v1::StudySpec& spec) {
        spec.set_algorithm(static_cast<v1::Algorithm>(99));
      },
      "study.spec.algorithm: unknown algorithm 99");
  spec_case(
      "UnknownGoal",
      [](v1::StudySpec& spec) {
        spec.mutable_metrics(0)->set_goal(
            static_cast<v1::MetricSpec::Goal>(99));
      },
      "goal: must be MAXIMIZE or MINIMIZE, got 99");
  spec_case(
      "UnknownEarlyStoppingRule",
      [](v1::StudySpec& spec) {
        spec.mutable_early_stopping()->set_rule(
            static_cast<v1::EarlyStoppingSpec::Rule>(99));
      },
      "early_stopping.rule: unknown rule 99 (one of MEDIAN");
  spec_case(
      "DoubleRangeOfInfiniteWidth",
      [](v1::StudySpec& spec) {
        auto* x = spec.mutable_parameters(0)->mutable_double_spec();
        x->set_min(-1.7e308);
        x->set_max(1.7e308);
      },
      "the width max - min must be finite");
  for (const char* name : {".", "..", "-dash", "_under", ".hidden"}) {
    add({absl::StrCat("StudyNamed", std::string(name) == "."    ? "Dot"
                                    : std::string(name) == ".." ? "DotDot"
                                                                : name + 1),
         [name](BadInputCaseTest& t) {
           return t.CreateStudy(TargetStudy(name));
         },
         {Code::INVALID_ARGUMENT},
         "must begin with a letter or a digit",
         nullptr});
  }

  // ----- Size -----
  add({"FiveMebibyteMessage",
       [](BadInputCaseTest& t) {
         return t.Heartbeat(std::string(5 << 20, 'x'));
       },
       {Code::RESOURCE_EXHAUSTED},
       "",
       nullptr});
  add({"GarbageBytes",
       [](BadInputCaseTest& t) {
         std::string response;
         return t.RawCall("GetStudy", std::string("\xff\xff\xff\xff\x0f", 5),
                          &response);
       },
       // Not a protobuf message at all. gRPC refuses it before any handler
       // runs with a bare INTERNAL ("error parsing request proto"), which
       // the server reports as the bad input it is.
       {Code::INVALID_ARGUMENT},
       "",
       nullptr});
  // Imports (study_import.h): an ImportStudy stream of `messages`.
  auto import_study = [](BadInputCaseTest& t,
                         std::vector<v1::ImportStudyRequest> messages) {
    grpc::ClientContext ctx;
    v1::Study out;
    auto writer = t.stub_->ImportStudy(&ctx, &out);
    for (const v1::ImportStudyRequest& m : messages) writer->Write(m);
    writer->WritesDone();
    return writer->Finish();
  };
  add({"ImportOntoAnExistingName",
       [import_study](BadInputCaseTest& t) {
         v1::ImportStudyRequest m;
         *m.mutable_study() = TargetStudy("target");
         return import_study(t, {m});
       },
       {Code::ALREADY_EXISTS},
       "target",
       nullptr});
  add({"ImportWithAGapInTrialIds",
       [import_study](BadInputCaseTest& t) {
         v1::ImportStudyRequest m;
         *m.mutable_study() = TargetStudy("imported");
         v1::Trial* trial = m.add_trials();
         trial->set_id(2);
         trial->set_state(v1::Trial::REQUESTED);
         *trial->mutable_parameters() = Params(0.5, 2, "relu");
         return import_study(t, {m});
       },
       {Code::INVALID_ARGUMENT},
       "trials[0].id",
       nullptr});
  add({"ImportStreamWithoutTheStudy",
       [import_study](BadInputCaseTest& t) {
         v1::ImportStudyRequest m;
         m.add_trials()->set_id(1);
         return import_study(t, {m});
       },
       {Code::INVALID_ARGUMENT},
       "study",
       nullptr});
  add({"WarmStartResultOutsideTheSpace",
       [](BadInputCaseTest& t) {
         grpc::ClientContext ctx;
         v1::ImportTrialsRequest request;
         request.set_study_name("target");
         v1::Trial* trial = request.add_trials();
         *trial->mutable_parameters() = Params(7, 2, "relu");
         (*trial->mutable_final_measurement()->mutable_metrics())["loss"] = 1;
         v1::ImportTrialsResponse out;
         return t.stub_->ImportTrials(&ctx, request, &out);
       },
       {Code::INVALID_ARGUMENT},
       "trials[0].parameters",
       nullptr});
  add({"WarmStartFromAnUnknownStudy",
       [](BadInputCaseTest& t) {
         grpc::ClientContext ctx;
         v1::ImportTrialsRequest request;
         request.set_study_name("target");
         request.add_from_studies("nowhere");
         v1::ImportTrialsResponse out;
         return t.stub_->ImportTrials(&ctx, request, &out);
       },
       {Code::NOT_FOUND},
       "nowhere",
       nullptr});
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

// A measurement of `trial` under its epoch with 200 metrics whose names are
// 100 characters long: about 23 KB.
v1::AddMeasurementRequest BulkyMeasurement(const v1::Trial& trial,
                                           int64_t step) {
  v1::AddMeasurementRequest request;
  request.set_study_name(trial.study_name());
  request.set_trial_id(trial.id());
  request.set_lease_epoch(trial.lease_epoch());
  request.mutable_measurement()->set_step(step);
  auto& metrics = *request.mutable_measurement()->mutable_metrics();
  metrics["loss"] = 1.0 / step;
  for (int i = 1; i < kMaxMetricsPerMeasurement; ++i) {
    metrics[absl::StrCat("m", std::string(96, 'x'), i)] = i;
  }
  return request;
}

// A trial grows to its size limit and no further, and every acknowledged
// write is answered, and the trial read back, within gRPC's default 4 MiB
// receive limit (this fixture's channel keeps the default): the outside
// review's client got RESOURCE_EXHAUSTED for writes that had committed.
TEST_F(BadInputTest, ATrialStopsGrowingAtItsSizeLimit) {
  int accepted = 0;
  grpc::Status refused;
  for (int64_t step = 1; step <= 100; ++step) {
    grpc::ClientContext ctx;
    v1::Trial out;
    grpc::Status status = stub_->AddMeasurement(
        &ctx, BulkyMeasurement(target_trial_, step), &out);
    if (!status.ok()) {
      refused = status;
      break;
    }
    ++accepted;
  }
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << refused.error_message();
  EXPECT_THAT(refused.error_message(),
              HasSubstr("over the limit of 1048576 per trial"));
  EXPECT_GT(accepted, 30);
  v1::Trial stored;
  ASSERT_TRUE(GetTrial("target", target_trial_.id(), &stored).ok());
  EXPECT_EQ(stored.measurements_size(), accepted);
  EXPECT_LE(stored.ByteSizeLong(), kMaxTrialBytes);
  ExpectStillServingAndIntact();
}

// Lists of large trials and studies come in pages that a default client
// can receive.
TEST_F(BadInputTest, PagesOfLargeTrialsAndStudiesFitTheDefaultReceiveLimit) {
  ASSERT_TRUE(CreateStudy(TargetStudy("big")).ok());
  constexpr int kTrials = 6;
  for (int t = 0; t < kTrials; ++t) {
    v1::SuggestTrialsResponse granted;
    ASSERT_TRUE(Suggest("big", absl::StrCat("w", t), &granted).ok());
    ASSERT_EQ(granted.trials_size(), 1);
    for (int64_t step = 1; step <= 38; ++step) {  // ~880 KB
      grpc::ClientContext ctx;
      v1::Trial out;
      ASSERT_TRUE(stub_
                      ->AddMeasurement(
                          &ctx, BulkyMeasurement(granted.trials(0), step), &out)
                      .ok());
    }
  }
  std::set<int64_t> seen;
  v1::ListTrialsRequest request;
  request.set_study_name("big");
  request.set_page_size(1000);
  int pages = 0;
  do {
    grpc::ClientContext ctx;
    v1::ListTrialsResponse page;
    grpc::Status status = stub_->ListTrials(&ctx, request, &page);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_GT(page.trials_size(), 0);
    for (const v1::Trial& t : page.trials()) seen.insert(t.id());
    request.set_page_token(page.next_page_token());
    ++pages;
  } while (!request.page_token().empty());
  EXPECT_EQ(seen.size(), static_cast<size_t>(kTrials));
  EXPECT_GT(pages, 1);

  // Studies near their size limit: 1000 categories of 900 bytes.
  for (int i = 0; i < 6; ++i) {
    v1::Study study = TargetStudy(absl::StrCat("wide", i));
    auto* values =
        study.mutable_spec()->mutable_parameters(2)->mutable_categorical_spec();
    for (int k = values->values_size(); k < kMaxValuesPerParameter; ++k) {
      values->add_values(absl::StrCat(k, std::string(900, 'v')));
    }
    grpc::Status status = CreateStudy(study);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  std::set<std::string> names;
  v1::ListStudiesRequest list;
  pages = 0;
  do {
    grpc::ClientContext ctx;
    v1::ListStudiesResponse page;
    grpc::Status status = stub_->ListStudies(&ctx, list, &page);
    ASSERT_TRUE(status.ok()) << status.error_message();
    for (const v1::Study& study : page.studies()) names.insert(study.name());
    list.set_page_token(page.next_page_token());
    ++pages;
  } while (!list.page_token().empty());
  EXPECT_EQ(names.size(), 9u);  // sentinel, target, big, wide0-5
  EXPECT_GT(pages, 1);
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
    ASSERT_TRUE(results[w].ok())
        << "worker " << w << ": " << results[w].status();
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
