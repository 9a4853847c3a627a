// `hypertune worker` as a process against an in-process server (loopback,
// temporary SQLite file): a program that fails at once every time (a python3
// without the program's modules) stops the worker after its first trials
// (--early-failures) instead of spending the study's budget.
#include <sys/wait.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "service/server.h"
#include "testing/test_server.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Runs `command` in a shell; its exit status, with its stdout and stderr in
// `out`.
int Shell(const std::string& command, std::string* out) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  out->clear();
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) out->append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `arg` as one word of a POSIX shell.
std::string Quote(const std::string& arg) {
  return absl::StrCat("'", absl::StrReplaceAll(arg, {{"'", "'\\''"}}), "'");
}

class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service::ServerOptions options;
    options.db_path = dir_.File("worker.db");
    options.listen = "127.0.0.1:0";
    auto server = service::Server::Start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ClientOptions client_options;
    client_options.server = server_->address();
    client_options.client_id = "test";
    client_options.heartbeats = false;
    client_ = std::make_unique<Client>(client_options);
  }

  void CreateStudy(const std::string& name, int max_trials) {
    v1::Study study;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
      spec {
        parameters { name: "x" double_spec { min: 0 max: 1 } }
        metrics { name: "loss" goal: MINIMIZE }
        algorithm: RANDOM
      })pb", &study));
    study.set_name(name);
    study.mutable_spec()->set_max_trials(max_trials);
    ASSERT_TRUE(client_->CreateStudy(study).ok());
  }

  // `hypertune worker STUDY FLAGS... -- sh -c SCRIPT`.
  int Worker(const std::string& study, const std::vector<std::string>& flags,
             const std::string& script, std::string* out) {
    std::string command =
        absl::StrCat(HYPERTUNE_CLI_PATH, " --server ", server_->address(),
                     " worker ", study, " --log-dir ",
                     Quote(dir_.File("logs-" + study)));
    for (const std::string& flag : flags) absl::StrAppend(&command, " ", flag);
    absl::StrAppend(&command, " -- sh -c ", Quote(script));
    return Shell(command, out);
  }

  std::vector<v1::Trial> Trials(const std::string& study) {
    auto trials = client_->ListAllTrials(study);
    EXPECT_TRUE(trials.ok()) << trials.status();
    return trials.ok() ? *trials : std::vector<v1::Trial>();
  }

  test::TempDir dir_;
  std::unique_ptr<service::Server> server_;
  std::unique_ptr<Client> client_;
};

constexpr char kMissingModule[] =
    "echo 'ModuleNotFoundError: No module named numpy' >&2; exit 3";

// The review's case: every program exits 3 at once. The worker stops after
// its first 3 trials, says why (the exit status, the log's tail), exits
// non-zero and leaves the study ACTIVE with the last trial queued again, so
// that a fixed program continues the study.
TEST_F(WorkerTest, FirstTrialsFailingAlikeStopTheWorkerEarly) {
  CreateStudy("no-numpy", 10);
  std::string out;
  EXPECT_EQ(Worker("no-numpy", {}, kMissingModule, &out), 1) << out;
  EXPECT_THAT(out, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(out, HasSubstr("the first 3 trials this worker ran (1, 2, 3) "
                             "all failed alike"));
  EXPECT_THAT(out, HasSubstr("exit status 3"));
  EXPECT_THAT(out, HasSubstr("No module named numpy"));
  std::vector<v1::Trial> trials = Trials("no-numpy");
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[0].state(), v1::Trial::INFEASIBLE);
  EXPECT_EQ(trials[1].state(), v1::Trial::INFEASIBLE);
  EXPECT_EQ(trials[2].state(), v1::Trial::REQUESTED);
  EXPECT_THAT(trials[2].failure_reason(), HasSubstr("failed alike"));
  EXPECT_EQ(client_->GetStudy("no-numpy")->state(), v1::Study::ACTIVE);

  // The fixed program runs the given-back trial first, then the budget.
  EXPECT_EQ(Worker("no-numpy", {}, "echo 'hypertune: loss=0.5'", &out), 0)
      << out;
  trials = Trials("no-numpy");
  ASSERT_EQ(trials.size(), 10u);
  EXPECT_EQ(trials[2].state(), v1::Trial::COMPLETED);
  EXPECT_EQ(client_->GetStudy("no-numpy")->state(), v1::Study::COMPLETED);
}

// Failures that differ (each its own exit status) say nothing about the
// program as a whole: no early stop.
TEST_F(WorkerTest, FailuresThatDifferDoNotStopTheWorkerEarly) {
  CreateStudy("differ", 10);
  std::string out;
  EXPECT_EQ(Worker("differ", {"--max-trials", "4"},
                   "exit $((HYPERTUNE_TRIAL_ID + 10))", &out),
            1)
      << out;
  EXPECT_THAT(out, Not(HasSubstr("failed alike")));
  EXPECT_THAT(out, HasSubstr("no trial completed"));
  std::vector<v1::Trial> trials = Trials("differ");
  ASSERT_EQ(trials.size(), 4u);
  for (const v1::Trial& t : trials) {
    EXPECT_EQ(t.state(), v1::Trial::INFEASIBLE) << t.id();
  }
}

// A success among the first trials ends the watch; --early-failures 0
// never starts it.
TEST_F(WorkerTest, EarlyFailuresWatchEndsAtASuccessAndCanBeTurnedOff) {
  CreateStudy("first-ok", 10);
  std::string out;
  EXPECT_EQ(Worker("first-ok", {"--max-trials", "5"},
                   "if [ \"$HYPERTUNE_TRIAL_ID\" = 1 ]; then "
                   "echo 'hypertune: loss=1'; else exit 3; fi",
                   &out),
            0)
      << out;
  EXPECT_THAT(out, Not(HasSubstr("failed alike")));
  EXPECT_EQ(Trials("first-ok").size(), 5u);

  CreateStudy("watch-off", 10);
  EXPECT_EQ(Worker("watch-off", {"--max-trials", "4", "--early-failures", "0"},
                   kMissingModule, &out),
            1)
      << out;
  EXPECT_THAT(out, Not(HasSubstr("failed alike")));
  std::vector<v1::Trial> trials = Trials("watch-off");
  ASSERT_EQ(trials.size(), 4u);
  for (const v1::Trial& t : trials) {
    EXPECT_EQ(t.state(), v1::Trial::INFEASIBLE) << t.id();
  }
}

}  // namespace
}  // namespace hypertune
