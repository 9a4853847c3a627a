// Integration tests over a real server: gRPC on a loopback port, a temporary
// SQLite file, the SDK as the client.
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "hypertune/v1/hypertune.grpc.pb.h"
#include "service/server/server.h"
#include "storage/open_store.h"
#include "testing/test_server.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune {
namespace {

using test::TempDir;
using ::testing::HasSubstr;

v1::Study QuadraticStudy(const std::string& name, int max_trials,
                         int parallel) {
  v1::Study study;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    spec {
      parameters { name: "x" double_spec { min: -2 max: 2 } }
      parameters { name: "lr" double_spec { min: 1e-4 max: 1 scale: LOG } }
      parameters { name: "depth" integer_spec { min: 1 max: 6 } }
      parameters { name: "act" categorical_spec { values: [ "relu", "tanh" ] } }
      metrics { name: "loss" goal: MINIMIZE }
      algorithm: QUASI_RANDOM
    })pb",
                                                &study);
  study.set_name(name);
  study.mutable_spec()->set_max_trials(max_trials);
  study.mutable_spec()->set_max_parallel_trials(parallel);
  return study;
}

// The toy objective the workers compute, so the test can recompute it.
double Loss(const v1::Trial& trial) {
  std::map<std::string, v1::ParameterValue> p;
  for (const auto& v : trial.parameters()) p[v.name()] = v;
  return std::pow(p["x"].double_value() - 0.5, 2) +
         std::pow(std::log10(p["lr"].double_value()) + 2, 2) +
         0.1 * static_cast<double>(p["depth"].int_value()) +
         (p["act"].string_value() == "tanh" ? 0.0 : 0.3);
}

std::unique_ptr<service::Server> StartServer(const std::string& db) {
  service::ServerOptions options;
  options.db_path = db;
  options.listen = "127.0.0.1:0";
  auto server = service::Server::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

Client MakeClient(const std::string& address, const std::string& id) {
  ClientOptions options;
  options.server = address;
  options.client_id = id;
  return Client(options);
}

// Runs trials of `study` until the study completes: 2 reports, then Complete.
void WorkerLoop(const Client& client, const std::string& study, int* done) {
  while (true) {
    auto next = client.NextTrial(study);
    ASSERT_TRUE(next.ok()) << next.status();
    if (!next->has_value()) return;
    Trial& trial = **next;
    double loss = Loss(trial.proto());
    ASSERT_TRUE(trial.Report(1, {{"loss", loss + 1}}).ok());
    ASSERT_TRUE(trial.Report(2, {{"loss", loss + 0.5}}).ok());
    ASSERT_TRUE(trial.Complete({{"loss", loss}}).ok());
    ++*done;
  }
}

std::vector<v1::Trial> AllTrials(const Client& client,
                                 const std::string& study) {
  auto trials = client.ListAllTrials(study);
  EXPECT_TRUE(trials.ok()) << trials.status();
  return trials.ok() ? *trials : std::vector<v1::Trial>{};
}

TEST(ServerIntegrationTest, EightWorkersRunFortyTrialsAndRestartKeepsHistory) {
  TempDir dir;
  const std::string db = dir.File("study.db");
  auto server = StartServer(db);
  ASSERT_NE(server, nullptr);
  Client admin = MakeClient(server->address(), "admin");
  ASSERT_TRUE(admin.CreateStudy(QuadraticStudy("forty", 40, 8)).ok());

  std::vector<int> done(8, 0);
  std::vector<std::thread> workers;
  for (int w = 0; w < 8; ++w) {
    workers.emplace_back([&, w] {
      Client client =
          MakeClient(server->address(), "worker-" + std::to_string(w));
      WorkerLoop(client, "forty", &done[w]);
    });
  }
  for (std::thread& t : workers) t.join();

  int total = 0;
  for (int d : done) total += d;
  EXPECT_EQ(total, 40);
  std::vector<v1::Trial> trials = AllTrials(admin, "forty");
  ASSERT_EQ(trials.size(), 40u);
  for (size_t i = 0; i < trials.size(); ++i) {
    const v1::Trial& t = trials[i];
    EXPECT_EQ(t.id(), static_cast<int64_t>(i + 1));
    EXPECT_EQ(t.state(), v1::Trial::COMPLETED);
    EXPECT_EQ(t.final_measurement().metrics().at("loss"), Loss(t));
    ASSERT_EQ(t.measurements_size(), 2);
    EXPECT_EQ(t.measurements(1).step(), 2);
  }
  auto study = admin.GetStudy("forty");
  ASSERT_TRUE(study.ok());
  EXPECT_EQ(study->state(), v1::Study::COMPLETED);
  auto best = admin.ListOptimalTrials("forty");
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->trials_size(), 1);
  for (const v1::Trial& t : trials) {
    EXPECT_LE(best->trials(0).final_measurement().metrics().at("loss"),
              t.final_measurement().metrics().at("loss"));
  }

  // A new server on the same file serves the same history.
  server.reset();
  server = StartServer(db);
  ASSERT_NE(server, nullptr);
  Client after = MakeClient(server->address(), "admin");
  std::vector<v1::Trial> reloaded = AllTrials(after, "forty");
  ASSERT_EQ(reloaded.size(), trials.size());
  for (size_t i = 0; i < trials.size(); ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(trials[i],
                                                                   reloaded[i]))
        << "trial " << i + 1 << " changed across the restart";
  }
}

// A second server on a served port would take half its connections (gRPC
// and httplib both default to SO_REUSEPORT): it must refuse to start.
TEST(ServerIntegrationTest, AServedPortIsRefused) {
  TempDir dir;
  service::ServerOptions first_options;
  first_options.db_path = dir.File("first.db");
  first_options.listen = "127.0.0.1:0";
  first_options.http_listen = "127.0.0.1:0";
  auto first = service::Server::Start(first_options);
  ASSERT_TRUE(first.ok()) << first.status();

  service::ServerOptions grpc_taken;
  grpc_taken.db_path = dir.File("second.db");
  grpc_taken.listen = (*first)->address();
  auto second = service::Server::Start(grpc_taken);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("cannot bind " + (*first)->address()));
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("another hypertuned"));

  service::ServerOptions http_taken;
  http_taken.db_path = dir.File("third.db");
  http_taken.listen = "127.0.0.1:0";
  http_taken.http_listen = (*first)->http_address();
  auto third = service::Server::Start(http_taken);
  ASSERT_FALSE(third.ok());
  EXPECT_THAT(std::string(third.status().message()),
              HasSubstr("http: cannot bind " + (*first)->http_address()));
}

// Two servers on one database file would each think they own it.
TEST(ServerIntegrationTest, ADatabaseHeldByAnotherServerIsRefused) {
  TempDir dir;
  auto first = StartServer(dir.File("one.db"));
  ASSERT_NE(first, nullptr);
  service::ServerOptions options;
  options.db_path = dir.File("one.db");
  options.listen = "127.0.0.1:0";
  auto second = service::Server::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("another hypertuned holds it"));
  first.reset();
  EXPECT_NE(StartServer(dir.File("one.db")), nullptr);
}

// An online backup under 16 working workers: the copy passes SQLite's
// integrity check, holds every trial acknowledged before the backup
// started, and serves as a database of its own.
TEST(ServerIntegrationTest, ABackupUnderLoadHoldsEveryAcknowledgedTrial) {
  TempDir dir;
  auto server = StartServer(dir.File("live.db"));
  ASSERT_NE(server, nullptr);
  Client admin = MakeClient(server->address(), "admin");
  ASSERT_TRUE(admin.CreateStudy(QuadraticStudy("busy", 0, 0)).ok());

  absl::Mutex mu;
  std::vector<int64_t> acknowledged;
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < 16; ++w) {
    workers.emplace_back([&, w] {
      Client client = MakeClient(server->address(), absl::StrCat("w", w));
      while (!stop) {
        auto next = client.NextTrial("busy");
        if (!next.ok() || !next->has_value()) return;
        Trial& trial = **next;
        if (!trial.Report(1, {{"loss", Loss(trial.proto()) + 1}}).ok()) return;
        if (!trial.Complete({{"loss", Loss(trial.proto())}}).ok()) return;
        absl::MutexLock lock(&mu);
        acknowledged.push_back(trial.id());
      }
    });
  }
  auto enough = [&] {
    absl::MutexLock lock(&mu);
    return acknowledged.size() >= 40;
  };
  while (!enough()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::vector<int64_t> before;
  {
    absl::MutexLock lock(&mu);
    before = acknowledged;
  }
  auto backup = admin.Backup(dir.File("copy.db"));
  ASSERT_TRUE(backup.ok()) << backup.status();
  EXPECT_GT(backup->bytes(), 0);
  EXPECT_EQ(backup->destination_path(), dir.File("copy.db"));
  stop = true;
  for (std::thread& t : workers) t.join();

  {
    storage::StoreOptions options;
    options.path = dir.File("copy.db");
    auto copy = storage::OpenStore(options);
    ASSERT_TRUE(copy.ok()) << copy.status();
    EXPECT_TRUE((*copy)->CheckIntegrity().ok());
  }
  auto restored = StartServer(dir.File("copy.db"));
  ASSERT_NE(restored, nullptr);
  Client reader = MakeClient(restored->address(), "reader");
  std::map<int64_t, v1::Trial> copied;
  for (const v1::Trial& t : AllTrials(reader, "busy")) copied[t.id()] = t;
  for (int64_t id : before) {
    ASSERT_TRUE(copied.contains(id)) << "trial " << id << " is missing";
    EXPECT_EQ(copied[id].state(), v1::Trial::COMPLETED) << id;
  }
  // The live database kept serving: it holds more than the copy.
  EXPECT_GE(AllTrials(admin, "busy").size(), copied.size());
}

// Each malformed request gets its code; the server keeps serving.
TEST(ServerIntegrationTest, MalformedRequestsGetTheirCodes) {
  TempDir dir;
  auto server = StartServer(dir.File("bad.db"));
  ASSERT_NE(server, nullptr);
  auto stub = v1::HyperTune::NewStub(grpc::CreateChannel(
      server->address(), grpc::InsecureChannelCredentials()));
  auto call_create = [&](const v1::Study& study) {
    grpc::ClientContext ctx;
    v1::CreateStudyRequest request;
    *request.mutable_study() = study;
    v1::Study response;
    return stub->CreateStudy(&ctx, request, &response);
  };
  ASSERT_TRUE(call_create(QuadraticStudy("s", 0, 0)).ok());
  {
    grpc::ClientContext ctx;
    v1::SuggestTrialsRequest request;
    request.set_study_name("s");
    request.set_count(1);
    v1::SuggestTrialsResponse response;
    ASSERT_TRUE(stub->SuggestTrials(&ctx, request, &response).ok());
  }

  struct Case {
    std::string label;
    std::function<grpc::Status()> call;
    grpc::StatusCode code;
    std::string message_part;
  };
  v1::Study log_zero = QuadraticStudy("logzero", 0, 0);
  log_zero.mutable_spec()
      ->mutable_parameters(1)
      ->mutable_double_spec()
      ->set_min(0);
  v1::Study unnamed = QuadraticStudy("", 0, 0);
  std::vector<Case> cases = {
      {"unknown study",
       [&] {
         grpc::ClientContext ctx;
         v1::GetStudyRequest r;
         r.set_name("nope");
         v1::Study out;
         return stub->GetStudy(&ctx, r, &out);
       },
       grpc::StatusCode::NOT_FOUND, "nope"},
      {"duplicate name", [&] { return call_create(QuadraticStudy("s", 0, 0)); },
       grpc::StatusCode::ALREADY_EXISTS, "s"},
      {"log scale with min <= 0", [&] { return call_create(log_zero); },
       grpc::StatusCode::INVALID_ARGUMENT, "parameters[1]"},
      {"empty name", [&] { return call_create(unnamed); },
       grpc::StatusCode::INVALID_ARGUMENT, "study.name"},
      {"NaN metric",
       [&] {
         grpc::ClientContext ctx;
         v1::AddMeasurementRequest r;
         r.set_study_name("s");
         r.set_trial_id(1);
         r.mutable_measurement()->set_step(1);
         (*r.mutable_measurement()->mutable_metrics())["loss"] = std::nan("");
         v1::Trial out;
         return stub->AddMeasurement(&ctx, r, &out);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "NaN"},
      {"parameter outside its range",
       [&] {
         grpc::ClientContext ctx;
         v1::CreateTrialRequest r;
         r.set_study_name("s");
         google::protobuf::TextFormat::ParseFromString(R"pb(
           parameters { name: "x" double_value: 7 }
           parameters { name: "lr" double_value: 0.1 }
           parameters { name: "depth" int_value: 2 }
           parameters { name: "act" string_value: "relu" }
         )pb",
                                                       r.mutable_trial());
         v1::Trial out;
         return stub->CreateTrial(&ctx, r, &out);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "\"x\""},
      {"unknown parameter",
       [&] {
         grpc::ClientContext ctx;
         v1::CreateTrialRequest r;
         r.set_study_name("s");
         google::protobuf::TextFormat::ParseFromString(R"pb(
           parameters { name: "x" double_value: 1 }
           parameters { name: "lr" double_value: 0.1 }
           parameters { name: "depth" int_value: 2 }
           parameters { name: "act" string_value: "relu" }
           parameters { name: "momentum" double_value: 0.9 }
         )pb",
                                                       r.mutable_trial());
         v1::Trial out;
         return stub->CreateTrial(&ctx, r, &out);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "unknown parameter \"momentum\""},
      {"unknown trial",
       [&] {
         grpc::ClientContext ctx;
         v1::GetTrialRequest r;
         r.set_study_name("s");
         r.set_trial_id(999);
         v1::Trial out;
         return stub->GetTrial(&ctx, r, &out);
       },
       grpc::StatusCode::NOT_FOUND, "999"},
      {"early-stopping check of a missing trial",
       [&] {
         grpc::ClientContext ctx;
         v1::CheckEarlyStoppingRequest r;
         r.set_study_name("s");
         r.set_trial_id(999);
         v1::CheckEarlyStoppingResponse out;
         return stub->CheckEarlyStopping(&ctx, r, &out);
       },
       grpc::StatusCode::NOT_FOUND, "999"},
      {"stopping a trial without an id",
       [&] {
         grpc::ClientContext ctx;
         v1::StopTrialRequest r;
         r.set_study_name("s");
         v1::Trial out;
         return stub->StopTrial(&ctx, r, &out);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "trial_id"},
      {"heartbeat with a stale epoch",
       [&] {
         grpc::ClientContext ctx;
         v1::HeartbeatRequest r;
         r.set_study_name("s");
         r.set_trial_id(1);
         r.set_lease_epoch(5);
         v1::HeartbeatResponse out;
         return stub->Heartbeat(&ctx, r, &out);
       },
       grpc::StatusCode::FAILED_PRECONDITION, "epoch"},
  };
  for (const Case& c : cases) {
    grpc::Status s = c.call();
    EXPECT_EQ(s.error_code(), c.code) << c.label << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(c.message_part)) << c.label;
    // Still serving, and the stored study is intact.
    grpc::ClientContext ctx;
    v1::GetStudyRequest r;
    r.set_name("s");
    v1::Study out;
    ASSERT_TRUE(stub->GetStudy(&ctx, r, &out).ok()) << "after " << c.label;
    EXPECT_EQ(out.trial_counts().at("ACTIVE"), 1) << "after " << c.label;
  }
}

// WatchTrials over gRPC: a watcher that disconnects and resumes from the last
// sequence it saw ends up with every trial as stored, each change seen once.
TEST(ServerIntegrationTest, WatchTrialsResumesAfterADisconnectWithoutGaps) {
  TempDir dir;
  std::unique_ptr<service::Server> server = StartServer(dir.File("watch.db"));
  ASSERT_NE(server, nullptr);
  Client client = MakeClient(server->address(), "watcher");
  ASSERT_TRUE(client.CreateStudy(QuadraticStudy("w", 12, 0)).ok());

  std::map<int64_t, v1::Trial> seen;  // latest state by trial id
  std::set<int64_t> sequences;
  int64_t last = 0;
  auto watch_until = [&](const std::function<bool()>& enough) {
    return client.WatchTrials("w", last, [&](const v1::TrialEvent& event) {
      EXPECT_TRUE(sequences.insert(event.sequence()).second)
          << "sequence " << event.sequence() << " seen twice";
      EXPECT_GT(event.sequence(), last);
      last = event.sequence();
      seen[event.trial().id()] = event.trial();
      return !enough();
    });
  };

  // Half the study, then a watcher that leaves once it has seen 6 trials.
  int done = 0;
  for (int i = 0; i < 6; ++i) {
    auto trial = client.NextTrial("w");
    ASSERT_TRUE(trial.ok() && trial->has_value());
    ASSERT_TRUE((*trial)->Complete({{"loss", Loss((*trial)->proto())}}).ok());
    ++done;
  }
  ASSERT_TRUE(watch_until([&] { return seen.size() >= 6; }).ok());

  // While it is away the rest of the study runs; another watcher, live,
  // sees the changes as they happen.
  std::map<int64_t, v1::Trial> live;
  std::thread live_watcher([&] {
    absl::Status s = client.WatchTrials("w", 0, [&](const v1::TrialEvent& e) {
      live[e.trial().id()] = e.trial();
      int completed = 0;
      for (const auto& [id, t] : live)
        completed += t.state() == v1::Trial::COMPLETED;
      return completed < 12;
    });
    EXPECT_TRUE(s.ok()) << s;
  });
  WorkerLoop(client, "w", &done);
  live_watcher.join();
  EXPECT_EQ(live.size(), 12u);

  // Resumed: the first watcher catches up.
  ASSERT_TRUE(watch_until([&] {
                int completed = 0;
                for (const auto& [id, t] : seen) {
                  completed += t.state() == v1::Trial::COMPLETED;
                }
                return completed >= 12;
              }).ok());
  auto stored = client.ListAllTrials("w");
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(seen.size(), stored->size());
  for (const v1::Trial& t : *stored) {
    ASSERT_TRUE(seen.count(t.id())) << "trial " << t.id();
    EXPECT_EQ(seen[t.id()].state(), t.state()) << "trial " << t.id();
    EXPECT_EQ(seen[t.id()].measurements_size(), t.measurements_size());
    EXPECT_GT(t.device_seconds(), 0) << "trial " << t.id();
  }
  // The SDK billed each attempt's wall time; the study sums them.
  auto study = client.GetStudy("w");
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_GT(study->device_seconds(), 0);
  server->Shutdown();
}

// hypertuned as a separate process on a free port, so that it can be killed
// with SIGKILL.
std::unique_ptr<test::ServerProcess> StartServerProcess(const std::string& db) {
  test::ServerProcessOptions options;
  options.program = HYPERTUNED_PATH;
  options.db_path = db;
  auto server = test::ServerProcess::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

TEST(ServerIntegrationTest, KillNineLosesNoAcknowledgedCompletion) {
  TempDir dir;
  const std::string db = dir.File("kill.db");
  std::map<int64_t, double> acknowledged;
  {
    auto server = StartServerProcess(db);
    ASSERT_NE(server, nullptr);
    Client client = MakeClient(server->address(), "w");
    ASSERT_TRUE(client.CreateStudy(QuadraticStudy("k", 0, 0)).ok());
    for (int i = 0; i < 15; ++i) {
      auto next = client.NextTrial("k");
      ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
      Trial& trial = **next;
      double loss = Loss(trial.proto());
      ASSERT_TRUE(trial.Complete({{"loss", loss}}).ok());
      acknowledged[trial.id()] = loss;
    }
    // One more in flight when the server dies.
    ASSERT_TRUE(client.NextTrial("k").ok());
    int status = server->Kill(SIGKILL);
    ASSERT_TRUE(WIFSIGNALED(status));
  }
  auto restarted = StartServerProcess(db);
  ASSERT_NE(restarted, nullptr);
  Client client = MakeClient(restarted->address(), "reader");
  std::vector<v1::Trial> trials = AllTrials(client, "k");
  ASSERT_EQ(trials.size(), 16u);
  for (const auto& [id, loss] : acknowledged) {
    const v1::Trial& t = trials[id - 1];
    EXPECT_EQ(t.state(), v1::Trial::COMPLETED);
    EXPECT_EQ(t.final_measurement().metrics().at("loss"), loss);
  }
  EXPECT_EQ(trials.back().state(), v1::Trial::ACTIVE);
  // SIGTERM shuts down cleanly.
  int status = restarted->Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace hypertune
