// ImportStudy under kill -9 of the server, as a user meets it: hypertuned as
// a process, `hypertune import` of an export file, the server SIGKILLed
// while the trials are being stored and started again on the same file and
// address. The review found a partial ACTIVE study left behind (3,000 to
// 49,000 of 60,000 trials) and the CLI's retry failing with ALREADY_EXISTS.
//
// The kill is tied to progress (the study seen IMPORTING), not to time.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "hypertune/v1/hypertune.grpc.pb.h"
#include "testing/test_server.h"

extern char** environ;

namespace hypertune {
namespace {

using ::testing::HasSubstr;

constexpr int kTrials = 30'000;

v1::Study ExportedStudy(const std::string& name) {
  v1::Study study;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    state: PAUSED
    create_time_ms: 1700000000000
    spec {
      parameters { name: "x" double_spec { min: 0 max: 1 } }
      metrics { name: "loss" goal: MINIMIZE }
      algorithm: RANDOM
    })pb",
                                                &study);
  study.set_name(name);
  return study;
}

// What `hypertune export` writes: the study, then each trial, a JSON line
// each.
std::string WriteExport(const test::TempDir& dir, const v1::Study& study) {
  const std::string path = dir.File("export.jsonl");
  std::ofstream out(path);
  std::string line;
  (void)google::protobuf::util::MessageToJsonString(study, &line);
  out << line << "\n";
  for (int id = 1; id <= kTrials; ++id) {
    v1::Trial trial;
    trial.set_id(id);
    trial.set_state(v1::Trial::COMPLETED);
    v1::ParameterValue* x = trial.add_parameters();
    x->set_name("x");
    x->set_double_value(id / (kTrials + 1.0));
    (*trial.mutable_final_measurement()->mutable_metrics())["loss"] = id;
    for (int step = 1; step <= 5; ++step) {
      v1::Measurement* m = trial.add_measurements();
      m->set_step(step);
      (*m->mutable_metrics())["loss"] = id + 1.0 / step;
    }
    line.clear();
    (void)google::protobuf::util::MessageToJsonString(trial, &line);
    out << line << "\n";
  }
  return path;
}

class ImportKillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<int> port = test::PickFreePort();
    ASSERT_TRUE(port.ok()) << port.status();
    options_.program = HYPERTUNED_PATH;
    options_.db_path = dir_.File("import.db");
    options_.listen = absl::StrCat("127.0.0.1:", *port);
    StartServer();
  }

  void StartServer() {
    auto server = test::ServerProcess::Start(options_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::HyperTune::NewStub(grpc::CreateChannel(
        server_->address(), grpc::InsecureChannelCredentials()));
  }

  // Polls until study `name` is stored IMPORTING, then SIGKILLs the server
  // (false if the import was seen ending first).
  bool KillWhileImporting(const std::string& name) {
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < give_up) {
      grpc::ClientContext context;
      v1::ListStudiesRequest request;
      v1::ListStudiesResponse response;
      if (stub_->ListStudies(&context, request, &response).ok()) {
        for (const v1::Study& study : response.studies()) {
          if (study.name() != name) continue;
          if (study.state() != v1::Study::IMPORTING) return false;
          server_->Kill(SIGKILL);
          return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

  grpc::Status GetStudy(const std::string& name, v1::Study* study) {
    grpc::ClientContext context;
    v1::GetStudyRequest request;
    request.set_name(name);
    return stub_->GetStudy(&context, request, study);
  }

  test::TempDir dir_;
  test::ServerProcessOptions options_;
  std::unique_ptr<test::ServerProcess> server_;
  std::unique_ptr<v1::HyperTune::Stub> stub_;
};

// A raw stream (no retry): the server killed mid-import keeps nothing of
// it once it starts again, and the name is free.
TEST_F(ImportKillTest, AKilledImportLeavesNothing) {
  const v1::Study study = ExportedStudy("big");
  std::thread client([&] {
    grpc::ClientContext context;
    v1::Study response;
    auto writer = stub_->ImportStudy(&context, &response);
    v1::ImportStudyRequest message;
    *message.mutable_study() = study;
    for (int id = 1; id <= kTrials; ++id) {
      v1::Trial* trial = message.add_trials();
      trial->set_id(id);
      trial->set_state(v1::Trial::COMPLETED);
      v1::ParameterValue* x = trial->add_parameters();
      x->set_name("x");
      x->set_double_value(0.5);
      (*trial->mutable_final_measurement()->mutable_metrics())["loss"] = id;
      if (id % 1000 == 0) {
        if (!writer->Write(message)) break;
        message.Clear();
      }
    }
    writer->WritesDone();
    writer->Finish().ok();  // the server dies under it
  });
  const bool killed = KillWhileImporting("big");
  client.join();
  ASSERT_TRUE(killed) << "the import was not seen IMPORTING";
  StartServer();
  v1::Study stored;
  EXPECT_EQ(GetStudy("big", &stored).error_code(), grpc::StatusCode::NOT_FOUND)
      << "state " << v1::Study::State_Name(stored.state()) << ", trials "
      << stored.trial_counts().size();
}

// `hypertune import` as a user runs it: its retry after the server comes
// back lands the whole study, in the state exported.
TEST_F(ImportKillTest, TheCliRetryLandsTheWholeStudy) {
  const std::string path = WriteExport(dir_, ExportedStudy("big"));
  const std::string out = dir_.File("import.out");
  const std::vector<std::string> argv = {HYPERTUNE_CLI_PATH, "--server",
                                         options_.listen, "import", path};
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, out.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
  pid_t cli = 0;
  ASSERT_EQ(posix_spawn(&cli, args[0], &files, nullptr, args.data(), environ),
            0);
  posix_spawn_file_actions_destroy(&files);

  const bool killed = KillWhileImporting("big");
  if (killed) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    StartServer();
  }
  int status = 0;
  ASSERT_EQ(waitpid(cli, &status, 0), cli);
  std::stringstream printed;
  printed << std::ifstream(out).rdbuf();
  ASSERT_TRUE(killed) << "the import was not seen IMPORTING: " << printed.str();
  ASSERT_TRUE(WIFEXITED(status)) << printed.str();
  EXPECT_EQ(WEXITSTATUS(status), 0) << printed.str();
  EXPECT_THAT(printed.str(),
              HasSubstr(absl::StrCat("with ", kTrials, " trials")));
  v1::Study stored;
  ASSERT_TRUE(GetStudy("big", &stored).ok());
  EXPECT_EQ(stored.state(), v1::Study::PAUSED);
  EXPECT_EQ(stored.trial_counts().at("COMPLETED"), kTrials);
}

}  // namespace
}  // namespace hypertune
