// `hypertune worker` as a process against an in-process server (loopback,
// temporary SQLite file), as users run it: killed with kill -9 (its program
// and the program's children go with it, and the trial is resumed
// elsewhere), interrupted (its trials given back as preempted), in a broken
// environment (the trials given back, none infeasible), with programs that
// fail, declare their trial infeasible, pause at a rung, train on a group
// of GPUs or run as several ranks.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "service/server/server.h"
#include "testing/test_server.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The hypertune program under test: $HYPERTUNE_TEST_CLI (another build of
// it, e.g. an older one, to see these tests fail), else this build's.
std::string Cli() {
  const char* other = std::getenv("HYPERTUNE_TEST_CLI");
  return other != nullptr && *other != '\0' ? other : HYPERTUNE_CLI_PATH;
}

// The SDK program of several ranks: $HYPERTUNE_TEST_RANK_PROGRAM (one
// built with another SDK), else this build's.
std::string RankProgram() {
  const char* other = std::getenv("HYPERTUNE_TEST_RANK_PROGRAM");
  return other != nullptr && *other != '\0' ? other
                                            : HYPERTUNE_SDK_RANK_PROGRAM;
}

// Polls `done` every 20 ms for up to `seconds`; returns whether it held.
bool Eventually(const std::function<bool()>& done, int seconds = 30) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// The whole text of `path`; "" if it cannot be read.
std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether process `pid` (not our child) is gone or a zombie.
bool Gone(pid_t pid) {
  std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  return stat.empty() || (paren != std::string::npos &&
                          paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

// Runs `command` in a shell in the background, its output to `out_path`;
// returns its pid (the shell's, which `exec` makes the command's).
pid_t Background(const std::string& command, const std::string& out_path) {
  const std::string line =
      absl::StrCat("exec ", command, " >", test::ShellQuote(out_path), " 2>&1");
  const char* argv[] = {"/bin/sh", "-c", line.c_str(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv),
                  environ) != 0) {
    return -1;
  }
  return pid;
}

// Kills what a test left running should it end early (or should the
// worker under test let them outlive it): processes by pid, SIGKILL.
class KillAtExit {
 public:
  ~KillAtExit() {
    for (pid_t pid : pids_) {
      if (!Gone(pid)) kill(pid, SIGKILL);
      waitpid(pid, nullptr, WNOHANG);
    }
  }
  void Add(pid_t pid) { pids_.push_back(pid); }

 private:
  std::vector<pid_t> pids_;
};

// Waits for our child `pid`: its exit status, 128 + the signal that killed
// it, or -1 if it ran on for a minute (then it is killed).
int Reap(pid_t pid) {
  int status = 0;
  if (!Eventually([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 60)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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

  // `change` edits the spec before it is created.
  void CreateStudy(const std::string& name, int max_trials,
                   const std::function<void(v1::StudySpec&)>& change = {}) {
    v1::Study study;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
      spec {
        parameters { name: "x" double_spec { min: 0 max: 1 } }
        metrics { name: "loss" goal: MINIMIZE }
        algorithm: RANDOM
      })pb",
                                                              &study));
    study.set_name(name);
    study.mutable_spec()->set_max_trials(max_trials);
    if (change) change(*study.mutable_spec());
    auto created = client_->CreateStudy(study);
    ASSERT_TRUE(created.ok()) << created.status();
  }

  // `hypertune worker STUDY FLAGS... -- sh -c SCRIPT`, as a shell command.
  std::string WorkerCommand(const std::string& study,
                            const std::vector<std::string>& flags,
                            const std::string& script) {
    std::string command = absl::StrCat(
        Cli(), " --server ", server_->address(), " worker ", study,
        " --log-dir ", test::ShellQuote(dir_.File("logs-" + study)));
    for (const std::string& flag : flags) absl::StrAppend(&command, " ", flag);
    absl::StrAppend(&command, " -- sh -c ", test::ShellQuote(script));
    return command;
  }

  // Runs the worker to its end: its exit status, its output in `out`.
  int Worker(const std::string& study, const std::vector<std::string>& flags,
             const std::string& script, std::string* out) {
    return test::RunShell(WorkerCommand(study, flags, script), out);
  }

  v1::Trial GetTrial(const std::string& study, int64_t id) {
    auto trial = client_->GetTrial(study, id);
    EXPECT_TRUE(trial.ok()) << trial.status();
    return trial.ok() ? trial->proto() : v1::Trial();
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
// non-zero and leaves the study ACTIVE with those trials queued again, none
// infeasible, so that a fixed program continues the study.
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
  for (const v1::Trial& t : trials) {
    EXPECT_EQ(t.state(), v1::Trial::REQUESTED) << t.id();
    EXPECT_THAT(t.failure_reason(), HasSubstr("environment")) << t.id();
  }
  EXPECT_EQ(client_->GetStudy("no-numpy")->state(), v1::Study::ACTIVE);

  // The fixed program runs the given-back trials first, then the budget.
  EXPECT_EQ(Worker("no-numpy", {}, "echo 'hypertune: loss=0.5'", &out), 0)
      << out;
  trials = Trials("no-numpy");
  ASSERT_EQ(trials.size(), 10u);
  for (const v1::Trial& t : trials) {
    EXPECT_EQ(t.state(), v1::Trial::COMPLETED) << t.id();
  }
  EXPECT_EQ(client_->GetStudy("no-numpy")->state(), v1::Study::COMPLETED);
}

// Issue 46, item 6: a command that does not exist (exit 127) is the
// environment's fault. None of the trials is INFEASIBLE, trial 1 (the
// centre of the space) among them; all wait for a healthy worker, which
// completes them.
TEST_F(WorkerTest, ACommandNotFoundSpendsNoTrial) {
  CreateStudy("no-command", 4,
              [](v1::StudySpec& spec) { spec.set_algorithm(v1::GP_BANDIT); });
  std::string out;
  EXPECT_EQ(Worker("no-command", {}, "hypertune-test-no-such-command", &out), 1)
      << out;
  EXPECT_THAT(out, HasSubstr("exit status 127"));
  std::vector<v1::Trial> trials = Trials("no-command");
  ASSERT_EQ(trials.size(), 3u);
  for (const v1::Trial& t : trials) {
    EXPECT_EQ(t.state(), v1::Trial::REQUESTED) << t.id();
    EXPECT_EQ(t.retry_count(), 0) << t.id();
  }
  EXPECT_EQ(client_->GetStudy("no-command")->state(), v1::Study::ACTIVE);

  EXPECT_EQ(Worker("no-command", {}, "echo 'hypertune: loss=0.5'", &out), 0)
      << out;
  trials = Trials("no-command");
  ASSERT_EQ(trials.size(), 4u);
  for (const v1::Trial& t : trials) {
    EXPECT_EQ(t.state(), v1::Trial::COMPLETED) << t.id();
  }
  EXPECT_EQ(trials[0].attempt(), 2);
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
    // The program's failure, not the parameters': FAILED, not INFEASIBLE.
    EXPECT_EQ(t.state(), v1::Trial::FAILED) << t.id();
    EXPECT_EQ(t.failure_reason(), absl::StrCat("exit status ", t.id() + 10));
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
    EXPECT_EQ(t.state(), v1::Trial::FAILED) << t.id();
    EXPECT_EQ(t.failure_reason(),
              "exit status 3: ModuleNotFoundError: No module named numpy");
  }
}

// Issue 46, item 7: an exit status is the program's failure (FAILED, with
// its last line), not a verdict on the parameters; a program declares
// those with a line, and a NaN stays infeasible.
TEST_F(WorkerTest, ExitStatusFailsAndOnlyTheParametersMakeInfeasible) {
  CreateStudy("exits", 3);
  std::string out;
  EXPECT_EQ(Worker("exits", {"--early-failures", "0"},
                   "case $HYPERTUNE_TRIAL_ID in "
                   "1) echo 'Traceback...' >&2; echo 'KeyError: lr' >&2; "
                   "exit 1;; "
                   "2) echo 'hypertune: infeasible=CUDA out of memory'; "
                   "exit 1;; "
                   "*) echo 'hypertune: loss=nan';; esac",
                   &out),
            1)
      << out;
  std::vector<v1::Trial> trials = Trials("exits");
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[0].state(), v1::Trial::FAILED);
  EXPECT_EQ(trials[0].failure_reason(), "exit status 1: KeyError: lr");
  EXPECT_EQ(trials[1].state(), v1::Trial::INFEASIBLE);
  EXPECT_EQ(trials[1].infeasible_reason(), "CUDA out of memory");
  EXPECT_EQ(trials[2].state(), v1::Trial::INFEASIBLE);
  EXPECT_EQ(trials[2].infeasible_reason(), "metric \"loss\" is NaN");
}

// Issue 47 item 9: each trial is counted once in the worker's summary, in
// the bucket of its latest outcome, and the buckets add up to the total
// (before: "6/3 done (3 given back or left)" for 3 trials that each were
// killed once, given back and run again). `hypertune watch` then shows the
// COMPLETED trials without the kill of their first attempt (format_test's
// TrialEventLine test has a trial whose stale reason is still stored).
TEST_F(WorkerTest, ATrialRunTwiceIsCountedOnceAndWatchKeepsReasonsInPlace) {
  CreateStudy("twice", 3);
  std::string out;
  ASSERT_EQ(Worker("twice", {"--early-failures", "0"},
                   "if [ \"$HYPERTUNE_ATTEMPT\" = 1 ]; then kill -9 $$; fi; "
                   "echo 'hypertune: loss=0.5'",
                   &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("given back to the queue: killed by signal 9"));
  EXPECT_THAT(out, HasSubstr("worker done (study budget spent): twice: 3/3 "
                             "trials: 3 completed; best loss=0.5"))
      << out;
  for (const v1::Trial& trial : Trials("twice")) {
    EXPECT_EQ(trial.state(), v1::Trial::COMPLETED) << trial.id();
    EXPECT_EQ(trial.attempt(), 2) << trial.id();
  }

  const std::string watched = dir_.File("watch.out");
  KillAtExit cleanup;
  const pid_t watch = Background(
      absl::StrCat(Cli(), " --server ", server_->address(), " watch twice"),
      watched);
  ASSERT_GT(watch, 0);
  cleanup.Add(watch);
  auto count = [](const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos;
         at = text.find(what, at + 1)) {
      ++n;
    }
    return n;
  };
  ASSERT_TRUE(Eventually([&] {
    return count(ReadFile(watched), " COMPLETED") == 3;
  })) << ReadFile(watched);
  kill(watch, SIGKILL);
  Reap(watch);
  // The replay gives each trial's latest state: COMPLETED, with its result
  // and no reason; the kill belongs to attempt 1 (trial get shows it there).
  const std::string lines = ReadFile(watched);
  const std::vector<std::string> split =
      absl::StrSplit(lines, '\n', absl::SkipEmpty());
  EXPECT_EQ(split.size(), 3u) << lines;
  for (const std::string& line : split) {
    EXPECT_THAT(line, testing::MatchesRegex("#[0-9]+ trial [1-3] COMPLETED "
                                            "step 0 loss=0.5"));
  }
  for (int64_t id = 1; id <= 3; ++id) {
    const v1::Trial trial = GetTrial("twice", id);
    ASSERT_EQ(trial.earlier_attempts_size(), 1) << id;
    EXPECT_EQ(trial.earlier_attempts(0).end_reason(), "killed by signal 9");
  }
}

// Issue 46, item 1: kill -9 of the worker takes its program and the
// program's child along (before, they ran on and the program's next print
// met a broken pipe). The lease then runs out, and another worker resumes
// the trial from its checkpoint as attempt 2, which completes; the device
// time of both attempts counts.
TEST_F(WorkerTest, AKilledWorkersProgramDiesAndItsTrialIsResumedElsewhere) {
  CreateStudy("kill9", 1,
              [](v1::StudySpec& spec) { spec.set_lease_seconds(2); });
  const std::string pids = dir_.File("kill9-");
  const std::string script = absl::StrCat(
      "if [ -e ", pids, "program ]; then ",
      "echo \"attempt=$HYPERTUNE_ATTEMPT ",
      "checkpoint=$HYPERTUNE_CHECKPOINT_URI@$HYPERTUNE_CHECKPOINT_STEP\"; ",
      "echo 'hypertune: loss=0.5'; exit 0; fi; ",
      "echo 'hypertune: loss=0.9 step=1'; ",
      "echo 'hypertune: checkpoint=file:///ckpt/1 step=1'; ",
      "sleep 1000 & echo $! >", pids, "child; ", "echo $$ >", pids,
      "program.tmp; mv ", pids, "program.tmp ", pids, "program; wait");
  KillAtExit cleanup;
  const pid_t worker =
      Background(WorkerCommand("kill9", {}, script), dir_.File("kill9.out"));
  ASSERT_GT(worker, 0);
  cleanup.Add(worker);
  ASSERT_TRUE(Eventually([&] { return !ReadFile(pids + "program").empty(); }))
      << ReadFile(dir_.File("kill9.out"));
  const pid_t program = std::stoi(ReadFile(pids + "program"));
  const pid_t child = std::stoi(ReadFile(pids + "child"));
  cleanup.Add(program);
  cleanup.Add(child);
  // A renewal has counted some of attempt 1's device time, and the
  // checkpoint line is recorded.
  EXPECT_TRUE(Eventually(
      [&] {
        v1::Trial t = GetTrial("kill9", 1);
        return t.device_seconds() > 0 &&
               t.checkpoint_uri() == "file:///ckpt/1" &&
               t.checkpoint_step() == 1;
      },
      10));

  ASSERT_EQ(kill(worker, SIGKILL), 0);
  EXPECT_EQ(Reap(worker), 128 + SIGKILL);
  EXPECT_TRUE(Eventually([&] { return Gone(program) && Gone(child); }, 10))
      << "the program (" << program << ") or its child (" << child
      << ") outlived the worker";
  const double first_attempt = GetTrial("kill9", 1).device_seconds();

  // The next worker waits for the lease to run out, then resumes it.
  std::string out;
  EXPECT_EQ(Worker("kill9", {}, script, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("attempt=2 checkpoint=file:///ckpt/1@1"));
  const v1::Trial trial = GetTrial("kill9", 1);
  EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
  EXPECT_EQ(trial.attempt(), 2);
  EXPECT_EQ(trial.retry_count(), 1);
  EXPECT_GT(trial.device_seconds(), first_attempt);
  ASSERT_EQ(trial.earlier_attempts_size(), 1);
  EXPECT_GT(trial.earlier_attempts(0).device_seconds(), 0);
  EXPECT_EQ(Trials("kill9").size(), 1u);
}

// Issue 46, item 3: Ctrl-C (SIGINT) or a scheduler's SIGTERM to the worker
// gives its running trial back as preempted (no retry spent, not failed),
// with the device time it used, and its program ends.
TEST_F(WorkerTest, AnInterruptedWorkerGivesItsTrialBackAsPreempted) {
  for (int signal : {SIGINT, SIGTERM}) {
    const std::string study = absl::StrCat("signal-", signal);
    CreateStudy(study, 1);
    const std::string pid_file = dir_.File(study + ".pid");
    KillAtExit cleanup;
    const pid_t worker = Background(
        WorkerCommand(study, {},
                      absl::StrCat("echo $$ >", pid_file, ".tmp; mv ", pid_file,
                                   ".tmp ", pid_file, "; sleep 1000")),
        dir_.File(study + ".out"));
    ASSERT_GT(worker, 0);
    cleanup.Add(worker);
    ASSERT_TRUE(Eventually([&] { return !ReadFile(pid_file).empty(); }));
    const pid_t program = std::stoi(ReadFile(pid_file));
    cleanup.Add(program);
    ASSERT_EQ(kill(worker, signal), 0);
    EXPECT_EQ(Reap(worker), 130) << ReadFile(dir_.File(study + ".out"));
    EXPECT_TRUE(Gone(program));
    const v1::Trial trial = GetTrial(study, 1);
    EXPECT_EQ(trial.state(), v1::Trial::REQUESTED) << signal;
    EXPECT_EQ(trial.preemption_count(), 1) << signal;
    EXPECT_EQ(trial.retry_count(), 0) << signal;
    EXPECT_GT(trial.device_seconds(), 0) << signal;
  }
}

// Issue 46, item 5: a trial paused at an ASHA rung counts the time its
// program ran (before, 0 s): at least half the 2 s it slept before its first
// report (the worker's clock starts once the program is started), at most
// the worker's whole run.
TEST_F(WorkerTest, ATrialPausedAtARungCountsItsDeviceTime) {
  CreateStudy("paused", 4, [](v1::StudySpec& spec) {
    v1::EarlyStoppingSpec* rule = spec.mutable_early_stopping();
    rule->set_rule(v1::EarlyStoppingSpec::ASHA);
    rule->set_min_resource(1);
    rule->set_max_resource(4);
    rule->set_reduction_factor(2);
    rule->set_pause_at_rungs(true);
  });
  std::string out;
  const auto start = std::chrono::steady_clock::now();
  // A worker whose trials paused has not failed: it exits 0.
  EXPECT_EQ(
      Worker("paused", {"--max-trials", "1"},
             "sleep 2; echo 'hypertune: loss=1 step=1'; sleep 1000", &out),
      0)
      << out;
  EXPECT_THAT(out, HasSubstr("1 paused at a rung"));
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  const v1::Trial trial = GetTrial("paused", 1);
  EXPECT_EQ(trial.state(), v1::Trial::PAUSED) << out;
  EXPECT_GE(trial.device_seconds(), 1.0) << out;
  EXPECT_LE(trial.device_seconds(), wall);
}

// Issue 46, item 9: --gpus-per-trial 2 gives each trial a pair of GPUs,
// and its device-seconds count both.
TEST_F(WorkerTest, GpuGroupsGiveATrialSeveralDevices) {
  CreateStudy("gpus", 2);
  std::string out;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Worker("gpus", {"--gpus", "0,1,2,3", "--gpus-per-trial", "2"},
                   "echo \"visible=$CUDA_VISIBLE_DEVICES\"; sleep 1; "
                   "echo 'hypertune: loss=1'",
                   &out),
            0)
      << out;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_THAT(out, HasSubstr("visible=0,1"));
  EXPECT_THAT(out, HasSubstr("visible=2,3"));
  for (const v1::Trial& t : Trials("gpus")) {
    EXPECT_EQ(t.state(), v1::Trial::COMPLETED) << t.id();
    // Two devices for the program's second of sleep (the worker's clock
    // starts once the program is spawned, a little after its own).
    EXPECT_GE(t.device_seconds(), 2 * 0.9) << t.id();
    EXPECT_LE(t.device_seconds(), 2 * wall) << t.id();
  }
  // Groups must divide the GPUs.
  EXPECT_EQ(Worker("gpus", {"--gpus", "0,1,2", "--gpus-per-trial", "2"}, "true",
                   &out),
            2)
      << out;
}

// Issue 46, item 9: an SDK program run as two ranks (torchrun-style) under
// the worker. Only rank 0 reports; rank 1 still learns of the stop.
TEST_F(WorkerTest, OnlyRankZeroReportsAndEveryRankLearnsOfAStop) {
  CreateStudy("ranks", 1);
  KillAtExit cleanup;
  const pid_t worker = Background(
      WorkerCommand("ranks", {},
                    absl::StrCat("RANK=1 ", RankProgram(), " & RANK=0 ",
                                 RankProgram(), "; wait")),
      dir_.File("ranks.out"));
  ASSERT_GT(worker, 0);
  cleanup.Add(worker);
  ASSERT_TRUE(Eventually([&] {
    auto trial = client_->GetTrial("ranks", 1);
    return trial.ok() && trial->proto().measurements_size() >= 3;
  })) << ReadFile(dir_.File("ranks.out"));
  ASSERT_TRUE(client_->StopTrial("ranks", 1, "enough").ok());
  EXPECT_EQ(Reap(worker), 0) << ReadFile(dir_.File("ranks.out"));
  const std::string out = ReadFile(dir_.File("ranks.out"));
  EXPECT_THAT(out, HasSubstr("rank 0 stopped at step"));
  EXPECT_THAT(out, HasSubstr("(reports: 1)"));
  EXPECT_THAT(out, HasSubstr("rank 1 stopped at step"));
  EXPECT_THAT(out, HasSubstr("(reports: 0)"));
  const v1::Trial trial = GetTrial("ranks", 1);
  EXPECT_EQ(trial.state(), v1::Trial::STOPPED);
  for (const v1::Measurement& m : trial.measurements()) {
    // Rank 0's values (1/step), never rank 1's (2/step).
    EXPECT_DOUBLE_EQ(m.metrics().at("loss"), 1.0 / m.step()) << m.step();
  }
}

// Issue 51 item 1: a PBT study run by `hypertune worker --parallel 4` with
// an unchanged program (it prints its metrics and checkpoints, and resumes
// from HYPERTUNE_CHECKPOINT_URI). A bottom member's program is restarted
// with the explored parameters and the top member's checkpoint, which it
// really reads (the file names its writer); the lineage is stored with the
// trial and shown by `hypertune trials`.
TEST_F(WorkerTest, APbtBottomMemberRestartsFromTheTopMembersCheckpoint) {
  CreateStudy("pbt", 4, [](v1::StudySpec& spec) {
    spec.set_algorithm(v1::PBT);
    spec.mutable_parameters(0)->mutable_double_spec()->set_min(0.1);
    spec.mutable_metrics(0)->set_name("acc");
    spec.mutable_metrics(0)->set_goal(v1::MetricSpec::MAXIMIZE);
    v1::PbtSpec& pbt = *spec.mutable_pbt();
    pbt.set_population_size(4);
    pbt.set_perturbation_interval(2);
    pbt.set_min_ready_members(4);
    pbt.set_resample_probability(0);
  });
  const std::string ckpt = dir_.File("pbt-ckpt");
  // acc is x at every step: the ranking is x's.
  const std::string script = absl::StrCat(
      "mkdir -p ", ckpt, "; s=$((HYPERTUNE_CHECKPOINT_STEP + 1)); ",
      "if [ -n \"$HYPERTUNE_CHECKPOINT_URI\" ]; then ",
      "f=$(echo \"$HYPERTUNE_CHECKPOINT_URI\" | sed s,file://,,); ",
      "echo \"restored $(cat $f) as trial $HYPERTUNE_TRIAL_ID x={x}\"; fi; ",
      "while [ $s -le 8 ]; do ", "c=", ckpt, "/$HYPERTUNE_TRIAL_ID-$s; ",
      "echo \"trial=$HYPERTUNE_TRIAL_ID step=$s\" > $c; ",
      "echo \"hypertune: checkpoint=file://$c step=$s\"; ",
      "echo \"hypertune: acc={x} step=$s\"; sleep 0.3; s=$((s + 1)); done; ",
      "echo 'hypertune: acc={x}'");
  std::string out;
  ASSERT_EQ(Worker("pbt", {"--parallel", "4"}, script, &out), 0) << out;

  int exploits = 0;
  for (const v1::Trial& trial : Trials("pbt")) {
    EXPECT_EQ(trial.state(), v1::Trial::COMPLETED) << trial.id();
    for (const v1::PbtExploit& e : trial.exploits()) {
      ++exploits;
      SCOPED_TRACE(absl::StrCat("trial ", trial.id(), " exploit ", e.number()));
      EXPECT_NE(e.donor_trial_id(), trial.id());
      EXPECT_GE(e.donor_value(), e.value());  // equal: ties rank by id
      // The checkpoint file is named by its writer and step: the donor, or
      // the member whose checkpoint the donor took in turn.
      const std::string prefix = absl::StrCat("file://", ckpt, "/");
      ASSERT_TRUE(absl::StartsWith(e.checkpoint_uri(), prefix));
      const std::vector<std::string> writer_step =
          absl::StrSplit(e.checkpoint_uri().substr(prefix.size()), '-');
      ASSERT_EQ(writer_step.size(), 2u);
      EXPECT_EQ(writer_step[1], absl::StrCat(e.checkpoint_step()));
      // Its program was restarted on that checkpoint (it read the file),
      // with the explored x.
      ASSERT_EQ(e.parameters_size(), 1);
      EXPECT_THAT(out,
                  HasSubstr(absl::StrCat("restored trial=", writer_step[0],
                                         " step=", e.checkpoint_step(),
                                         " as trial ", trial.id(), " x=")));
      EXPECT_THAT(
          out, HasSubstr(absl::StrCat("trial ", trial.id(), " exploited trial ",
                                      e.donor_trial_id())));
    }
    if (trial.exploits_size() > 0) {
      const v1::PbtExploit& last = trial.exploits(trial.exploits_size() - 1);
      EXPECT_DOUBLE_EQ(trial.parameters(0).double_value(),
                       last.parameters(0).double_value());
      bool moved = false;
      for (const v1::Attempt& a : trial.earlier_attempts()) {
        moved |= absl::StrContains(a.end_reason(), "exploited trial");
      }
      EXPECT_TRUE(moved);
    }
  }
  EXPECT_GT(exploits, 0) << out;

  // The lineage in the trials table: donor@step.
  std::string table;
  ASSERT_EQ(test::RunShell(absl::StrCat(Cli(), " --server ", server_->address(),
                                        " trials pbt"),
                           &table),
            0)
      << table;
  EXPECT_THAT(table, HasSubstr("EXPLOITED (donor@step)"));
  for (const v1::Trial& trial : Trials("pbt")) {
    for (const v1::PbtExploit& e : trial.exploits()) {
      EXPECT_THAT(table,
                  HasSubstr(absl::StrCat(e.donor_trial_id(), "@", e.step())));
    }
  }
}

// The C++ SDK's side of PBT: Report takes the exploit (TakeExploit hands it
// out once), the handle then holds the donor's checkpoint and the new
// parameters, and latest_exploit() counts it.
TEST_F(WorkerTest, TheSdkTakesAPbtExploitAtTheReport) {
  CreateStudy("sdk-pbt", 4, [](v1::StudySpec& spec) {
    spec.set_algorithm(v1::PBT);
    spec.mutable_parameters(0)->mutable_double_spec()->set_min(0.1);
    v1::PbtSpec& pbt = *spec.mutable_pbt();
    pbt.set_population_size(4);
    pbt.set_perturbation_interval(2);
    pbt.set_min_ready_members(4);
    pbt.set_resample_probability(0);
  });
  std::vector<Trial> members;
  for (int i = 0; i < 4; ++i) {
    auto next = client_->NextTrial("sdk-pbt");
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
    members.push_back(**std::move(next));
  }
  // loss is x at every step: the largest x is the bottom member.
  auto x = [](const Trial& t) { return *t.Double("x"); };
  std::vector<std::pair<double, int64_t>> taken;
  for (int64_t step = 1; step <= 2; ++step) {
    for (Trial& t : members) {
      const double before = x(t);
      ASSERT_TRUE(t.Report(step, {{"loss", before}}).ok());
      std::optional<v1::PbtExploit> e = t.TakeExploit();
      if (!e.has_value()) {
        ASSERT_TRUE(
            t.SetCheckpoint(absl::StrCat("mem://", t.id(), "-", step), step)
                .ok());
        continue;
      }
      EXPECT_FALSE(t.TakeExploit().has_value());  // once
      EXPECT_EQ(t.latest_exploit(), e->number());
      EXPECT_EQ(t.checkpoint_uri(), e->checkpoint_uri());
      EXPECT_EQ(t.checkpoint_step(), e->checkpoint_step());
      EXPECT_DOUBLE_EQ(x(t), e->parameters(0).double_value());
      EXPECT_LE(e->donor_value(), e->value());  // MINIMIZE; ties by id
      taken.emplace_back(before, t.id());
    }
  }
  ASSERT_FALSE(taken.empty());
  double largest = 0;
  for (const v1::Trial& t : Trials("sdk-pbt")) {
    largest = std::max(largest,
                       t.exploits_size() > 0
                           ? t.exploits(0).parameters_before(0).double_value()
                           : t.parameters(0).double_value());
  }
  EXPECT_DOUBLE_EQ(taken[0].first, largest);  // the worst exploited first
}

}  // namespace
}  // namespace hypertune
