// Trial leases end to end over a real in-process server (loopback, temporary
// SQLite file): a worker that vanishes loses its trial to the next worker,
// which resumes it from the checkpoint, while the first is fenced off; and
// `hypertune worker` gives back the trials of programs killed from outside and
// of its own preemption.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "service/server/server.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune {
namespace {

namespace fs = std::filesystem;
using ::testing::EndsWith;
using ::testing::HasSubstr;

// A fresh directory under the system temp dir, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (fs::temp_directory_path() / "hypertune-lease-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string File(const std::string& name) const {
    return (path_ / name).string();
  }

 private:
  fs::path path_;
};

// Polls `done` until it holds or `limit` has passed; returns whether it held.
bool Eventually(const std::function<bool()>& done,
                std::chrono::seconds limit = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

v1::Study OneTrialStudy(const std::string& name, int lease_seconds) {
  v1::Study study;
  google::protobuf::TextFormat::ParseFromString(
      R"pb(
        spec {
          parameters {
            name: "x"
            double_spec { min: 0 max: 1 }
          }
          metrics { name: "loss" goal: MINIMIZE }
          algorithm: QUASI_RANDOM
          max_trials: 1
        })pb",
      &study);
  study.set_name(name);
  study.mutable_spec()->set_lease_seconds(lease_seconds);
  return study;
}

class LeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service::ServerOptions options;
    options.db_path = dir_.File("leases.db");
    options.listen = "127.0.0.1:0";
    auto server = service::Server::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  ClientOptions Options(const std::string& client_id) const {
    ClientOptions options;
    options.server = server_->address();
    options.client_id = client_id;
    return options;
  }

  v1::Trial Stored(const std::string& study, int64_t id) const {
    auto trial = Client(Options("reader")).GetTrial(study, id);
    EXPECT_TRUE(trial.ok()) << trial.status();
    return trial.ok() ? trial->proto() : v1::Trial();
  }

  TempDir dir_;
  std::unique_ptr<service::Server> server_;
};

TEST_F(LeaseTest, AVanishedWorkersTrialResumesElsewhereFromItsCheckpoint) {
  Client admin(Options("admin"));
  ASSERT_TRUE(admin.CreateStudy(OneTrialStudy("resume", 1)).ok());

  // Worker A renews nothing by itself: once it stops calling, it is gone.
  ClientOptions a_options = Options("worker-a");
  a_options.heartbeats = false;
  Client a(a_options);
  auto a_next = a.NextTrial("resume");
  ASSERT_TRUE(a_next.ok() && a_next->has_value()) << a_next.status();
  Trial& a_trial = **a_next;
  EXPECT_EQ(a_trial.lease_epoch(), 1);
  EXPECT_FALSE(a_trial.heartbeating());
  ASSERT_TRUE(a_trial.Report(1, {{"loss", 0.9}}).ok());
  const std::string checkpoint = "file:///ckpt/resume/trial-1/step-1";
  ASSERT_TRUE(a_trial.SetCheckpoint(checkpoint).ok());

  // A dies here. Its lease (1 s) runs out and the trial is queued again.
  ASSERT_TRUE(Eventually([&] {
    return Stored("resume", a_trial.id()).state() == v1::Trial::REQUESTED;
  }));
  v1::Trial queued = Stored("resume", a_trial.id());
  EXPECT_EQ(queued.retry_count(), 1);
  EXPECT_EQ(queued.failure_reason(), "lease expired");
  EXPECT_EQ(queued.checkpoint_uri(), checkpoint);

  Client b(Options("worker-b"));
  auto b_next = b.NextTrial("resume");
  ASSERT_TRUE(b_next.ok() && b_next->has_value()) << b_next.status();
  Trial& b_trial = **b_next;
  EXPECT_EQ(b_trial.id(), a_trial.id());
  EXPECT_EQ(b_trial.lease_epoch(), 2);
  EXPECT_EQ(b_trial.checkpoint_uri(), checkpoint);
  ASSERT_EQ(b_trial.proto().measurements_size(), 1);
  EXPECT_EQ(b_trial.proto().measurements(0).step(), 1);
  EXPECT_TRUE(b_trial.heartbeating());

  // A comes back to life: fenced off by its stale epoch.
  absl::Status late = a_trial.Report(2, {{"loss", 0.7}});
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_EQ(a_trial.lease_status().code(),
            absl::StatusCode::kFailedPrecondition);

  // B holds the trial past a whole lease: its renewals move the expiry on.
  const int64_t granted_until = b_trial.proto().lease_expire_time_ms();
  ASSERT_TRUE(Eventually([&] {
    return Stored("resume", b_trial.id()).lease_expire_time_ms() >
           granted_until + 1000;
  }));
  v1::Trial held = Stored("resume", b_trial.id());
  EXPECT_EQ(held.state(), v1::Trial::ACTIVE);
  EXPECT_EQ(held.lease_epoch(), 2);
  EXPECT_EQ(held.client_id(), "worker-b");

  ASSERT_TRUE(b_trial.Report(2, {{"loss", 0.5}}).ok());
  ASSERT_TRUE(b_trial.Complete({{"loss", 0.4}}).ok());
  EXPECT_FALSE(b_trial.heartbeating());
  v1::Trial done = Stored("resume", b_trial.id());
  EXPECT_EQ(done.state(), v1::Trial::COMPLETED);
  EXPECT_EQ(done.final_measurement().metrics().at("loss"), 0.4);
  ASSERT_EQ(done.measurements_size(), 2);
  EXPECT_EQ(done.measurements(0).metrics().at("loss"), 0.9);  // A's
  EXPECT_EQ(done.measurements(1).metrics().at("loss"), 0.5);  // B's
}

TEST_F(LeaseTest, GivenBackATrialGoesToTheNextWorkerAtOnce) {
  Client admin(Options("admin"));
  ASSERT_TRUE(admin.CreateStudy(OneTrialStudy("give-back", 60)).ok());
  Client a(Options("worker-a"));
  auto a_next = a.NextTrial("give-back");
  ASSERT_TRUE(a_next.ok() && a_next->has_value()) << a_next.status();
  ASSERT_TRUE((*a_next)->SetCheckpoint("file:///ckpt/g").ok());
  ASSERT_TRUE((*a_next)->GiveBack("worker preempted").ok());
  EXPECT_FALSE((*a_next)->heartbeating());

  v1::Trial queued = Stored("give-back", (*a_next)->id());
  EXPECT_EQ(queued.state(), v1::Trial::REQUESTED);
  EXPECT_EQ(queued.failure_reason(), "worker preempted");
  EXPECT_EQ(queued.retry_count(), 1);

  auto b_next = Client(Options("worker-b")).NextTrial("give-back");
  ASSERT_TRUE(b_next.ok() && b_next->has_value()) << b_next.status();
  EXPECT_EQ((*b_next)->id(), (*a_next)->id());
  EXPECT_EQ((*b_next)->lease_epoch(), 2);
  EXPECT_EQ((*b_next)->checkpoint_uri(), "file:///ckpt/g");
}

// `hypertune worker` as a child process.
class WorkerProcess {
 public:
  // `flags` go between the study and "--". With `output`, the worker's
  // stdout and stderr go to that file.
  WorkerProcess(const std::string& server, const std::string& study,
                const std::string& log_dir,
                const std::vector<std::string>& command,
                const std::vector<std::string>& flags = {"--max-trials", "1"},
                const std::string& output = "") {
    std::vector<std::string> args = {
        HYPERTUNE_CLI_PATH, "--server", server, "worker", study,
        "--log-dir",        log_dir};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    pid_ = fork();
    if (pid_ == 0) {
      if (!output.empty()) {
        const int fd = open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
      }
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~WorkerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait();
    }
  }
  void Signal(int signal) { kill(pid_, signal); }
  // Reaps the worker; returns its wait status.
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
};

TEST_F(LeaseTest, WorkerGivesBackTheTrialOfAProgramKilledFromOutside) {
  Client admin(Options("admin"));
  ASSERT_TRUE(admin.CreateStudy(OneTrialStudy("killed", 60)).ok());
  const std::string logs = dir_.File("logs");
  WorkerProcess worker(server_->address(), "killed", logs,
                       {"sh", "-c", "echo working; kill -KILL $$"});
  int status = worker.Wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  // The one trial it ran did not complete.
  EXPECT_EQ(WEXITSTATUS(status), 1);

  v1::Trial trial = Stored("killed", 1);
  EXPECT_EQ(trial.state(), v1::Trial::REQUESTED);
  EXPECT_EQ(trial.failure_reason(), "killed by signal 9");
  EXPECT_EQ(trial.retry_count(), 1);
  EXPECT_TRUE(fs::path(trial.log_path()).is_absolute()) << trial.log_path();
  EXPECT_THAT(trial.log_path(), EndsWith("trial-1.log"));
  EXPECT_TRUE(fs::exists(trial.log_path()));
}

// The review's broken objective: a script that cannot even start (here a
// misspelt module) used to burn all 20 trials of a study in seconds, with
// the worker exiting 0 and the study COMPLETED. The worker now stops after
// 5 such trials in a row, exits non-zero and shows the last log's tail.
TEST_F(LeaseTest, WorkerStopsAfterTrialsWhoseProgramFailsToRun) {
  Client admin(Options("admin"));
  v1::Study study = OneTrialStudy("crash", 60);
  study.mutable_spec()->set_max_trials(20);
  ASSERT_TRUE(admin.CreateStudy(study).ok());
  const std::string output = dir_.File("worker.out");
  WorkerProcess worker(
      server_->address(), "crash", dir_.File("logs"),
      {"sh", "-c",
       "echo \"ModuleNotFoundError: No module named 'torhc'\" >&2; exit 1"},
      // Past the first trials' early stop: the consecutive-failure rule.
      {"--early-failures", "0"}, output);
  int status = worker.Wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  std::ifstream file(output);
  const std::string printed((std::istreambuf_iterator<char>(file)), {});
  EXPECT_THAT(printed, HasSubstr("5 trials in a row failed to run"));
  EXPECT_THAT(printed, HasSubstr("No module named 'torhc'"));
  auto trials = admin.ListAllTrials("crash");
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 5u);
  // A non-zero exit is the program's failure, not the parameters': FAILED,
  // which the optimizer leaves out (the early-failure watch, on by default,
  // would have given them back instead).
  for (const v1::Trial& t : *trials) {
    EXPECT_EQ(t.state(), v1::Trial::FAILED) << t.id();
  }
  EXPECT_EQ(admin.GetStudy("crash")->state(), v1::Study::ACTIVE);
}

// A `{placeholder}` that names no parameter is refused before any trial is
// taken (it used to be passed through literally and burn a trial).
TEST_F(LeaseTest, WorkerRefusesAnUnknownPlaceholderBeforeTakingATrial) {
  Client admin(Options("admin"));
  ASSERT_TRUE(admin.CreateStudy(OneTrialStudy("typo", 60)).ok());
  const std::string output = dir_.File("typo.out");
  WorkerProcess worker(server_->address(), "typo", dir_.File("logs"),
                       {"echo", "--x={x}", "--lr={learning_rate}"}, {}, output);
  int status = worker.Wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
  std::ifstream file(output);
  const std::string printed((std::istreambuf_iterator<char>(file)), {});
  EXPECT_THAT(printed, HasSubstr("{learning_rate}"));
  EXPECT_THAT(printed, HasSubstr("not a parameter of the study"));
  EXPECT_TRUE(admin.ListAllTrials("typo")->empty());
}

// Two objectives and a constraint through `hypertune worker`: every result
// carries all three, feasibility is recorded, and the optimal trials are a
// feasible Pareto front. A program that leaves one out is infeasible.
TEST_F(LeaseTest, WorkerRunsAStudyWithTwoObjectivesAndAConstraint) {
  Client admin(Options("admin"));
  v1::Study study;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    name: "front"
    spec {
      parameters { name: "x" double_spec { min: 0 max: 1 } }
      parameters { name: "y" double_spec { min: 0 max: 1 } }
      metrics { name: "acc" goal: MAXIMIZE role: OBJECTIVE }
      metrics { name: "latency" goal: MINIMIZE role: OBJECTIVE }
      metrics { name: "memory" role: CONSTRAINT upper_bound: 1.2 }
      algorithm: GP_BANDIT
      max_trials: 12
      seed: 3
    })pb",
                                                            &study));
  ASSERT_TRUE(admin.CreateStudy(study).ok());
  WorkerProcess worker(
      server_->address(), "front", dir_.File("logs"),
      {"sh", "-c",
       R"(awk -v x="$1" -v y="$2" 'BEGIN { printf("hypertune: acc=%.6f latency=%.6f memory=%.6f\n", x, 1 - x + y, x + y) }')",
       "sh", "{x}", "{y}"},
      {});
  int status = worker.Wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);

  auto trials = admin.ListAllTrials("front");
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 12u);
  for (const v1::Trial& t : *trials) {
    ASSERT_EQ(t.state(), v1::Trial::COMPLETED) << t.infeasible_reason();
    const auto& m = t.final_measurement().metrics();
    ASSERT_TRUE(m.contains("acc") && m.contains("latency") &&
                m.contains("memory"));
    ASSERT_TRUE(t.has_feasible());
    EXPECT_EQ(t.feasible(), m.at("memory") <= 1.2) << t.id();
  }
  auto front = admin.ListOptimalTrials("front");
  ASSERT_TRUE(front.ok()) << front.status();
  ASSERT_GT(front->trials_size(), 0);
  for (const v1::Trial& a : front->trials()) {
    EXPECT_TRUE(a.feasible());
    for (const v1::Trial& b : *trials) {
      if (!b.feasible()) continue;
      const auto& ma = a.final_measurement().metrics();
      const auto& mb = b.final_measurement().metrics();
      const bool dominated =
          mb.at("acc") >= ma.at("acc") &&
          mb.at("latency") <= ma.at("latency") &&
          (mb.at("acc") > ma.at("acc") || mb.at("latency") < ma.at("latency"));
      EXPECT_FALSE(dominated) << "trial " << b.id() << " dominates " << a.id();
    }
  }

  v1::Study partial = study;
  partial.set_name("partial");
  partial.mutable_spec()->set_max_trials(1);
  ASSERT_TRUE(admin.CreateStudy(partial).ok());
  WorkerProcess lacking(server_->address(), "partial", dir_.File("logs"),
                        {"echo", "hypertune: acc=0.5 memory=0.1"}, {});
  lacking.Wait();
  v1::Trial t = Stored("partial", 1);
  EXPECT_EQ(t.state(), v1::Trial::INFEASIBLE);
  EXPECT_THAT(t.infeasible_reason(), HasSubstr("did not report \"latency\""));
}

TEST_F(LeaseTest, WorkerRunsOneTrialPerGpuPinnedToIt) {
  Client admin(Options("admin"));
  v1::Study study = OneTrialStudy("gpus", 60);
  study.mutable_spec()->set_max_trials(6);
  ASSERT_TRUE(admin.CreateStudy(study).ok());
  // Each program reports the GPU it sees as its loss.
  WorkerProcess worker(
      server_->address(), "gpus", dir_.File("gpu-logs"),
      {"sh", "-c", "echo hypertune: loss=$CUDA_VISIBLE_DEVICES"},
      {"--gpus", "3,5"});
  int status = worker.Wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  auto trials = admin.ListAllTrials("gpus");
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 6u);
  std::set<double> seen;
  for (const v1::Trial& t : *trials) {
    ASSERT_EQ(t.state(), v1::Trial::COMPLETED) << "trial " << t.id();
    seen.insert(t.final_measurement().metrics().at("loss"));
  }
  EXPECT_EQ(seen, (std::set<double>{3, 5}));
}

TEST_F(LeaseTest, APreemptedWorkerGivesItsTrialsBack) {
  Client admin(Options("admin"));
  ASSERT_TRUE(admin.CreateStudy(OneTrialStudy("preempted", 60)).ok());
  WorkerProcess worker(server_->address(), "preempted", dir_.File("logs"),
                       {"sleep", "60"});
  // The log path is recorded just before the program starts.
  ASSERT_TRUE(Eventually([&] {
    auto trials = admin.ListAllTrials("preempted");
    return trials.ok() && !trials->empty() && !(*trials)[0].log_path().empty();
  }));
  worker.Signal(SIGTERM);  // A spot preemption notice.
  int status = worker.Wait();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 130);

  v1::Trial trial = Stored("preempted", 1);
  EXPECT_EQ(trial.state(), v1::Trial::REQUESTED);
  EXPECT_EQ(trial.failure_reason(), "worker preempted");
  // The machine was taken, not the trial's fault: no retry spent.
  EXPECT_EQ(trial.preemption_count(), 1);
  EXPECT_EQ(trial.retry_count(), 0);
}

}  // namespace
}  // namespace hypertune
