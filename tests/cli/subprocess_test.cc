#include "cli/worker/subprocess.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hypertune::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Output {
  std::vector<std::string> out;
  std::vector<std::string> err;
  int ticks = 0;
};

ProgramExit RunProgram(
    SubprocessOptions options, Output* output,
    const std::function<void(Subprocess&)>& on_tick = nullptr) {
  auto process = Subprocess::Start(options);
  EXPECT_TRUE(process.ok()) << process.status();
  if (!process.ok()) return {};
  Subprocess& p = **process;
  return p.Wait([&](std::string_view line) { output->out.emplace_back(line); },
                [&](std::string_view line) { output->err.emplace_back(line); },
                [&] {
                  ++output->ticks;
                  if (on_tick) on_tick(p);
                },
                std::chrono::milliseconds(50));
}

SubprocessOptions Shell(const std::string& script) {
  SubprocessOptions options;
  options.argv = {"/bin/sh", "-c", script};
  options.env = {"PATH=/usr/bin:/bin", "GREETING=hello there"};
  return options;
}

TEST(Subprocess, CapturesLinesOfBothStreamsAndTheExitStatus) {
  Output output;
  ProgramExit exit = RunProgram(
      Shell("echo \"$GREETING\"; echo oops >&2; printf 'a\\nb\\nno-newline'; "
            "exit 3"),
      &output);
  EXPECT_FALSE(exit.signaled);
  EXPECT_EQ(exit.code, 3);
  EXPECT_FALSE(exit.timed_out);
  EXPECT_THAT(output.out, ElementsAre("hello there", "a", "b", "no-newline"));
  EXPECT_THAT(output.err, ElementsAre("oops"));
  EXPECT_GE(output.ticks, 1);
}

TEST(Subprocess, StdinIsEmpty) {
  Output output;
  ProgramExit exit = RunProgram(Shell("cat; echo done"), &output);
  EXPECT_EQ(exit.code, 0);
  EXPECT_THAT(output.out, ElementsAre("done"));
}

TEST(Subprocess, ReportsTheKillingSignal) {
  Output output;
  ProgramExit exit = RunProgram(Shell("kill -9 $$"), &output);
  EXPECT_TRUE(exit.signaled);
  EXPECT_EQ(exit.code, SIGKILL);
}

TEST(Subprocess, TimeoutEndsTheWholeProcessGroup) {
  // The child shell starts a grandchild that would hold the pipe open.
  SubprocessOptions options = Shell("sleep 100 & echo started; wait");
  options.timeout = std::chrono::duration<double>(0.2);
  Output output;
  ProgramExit exit = RunProgram(options, &output);
  EXPECT_TRUE(exit.timed_out);
  EXPECT_TRUE(exit.signaled);
  EXPECT_EQ(exit.code, SIGTERM);
  EXPECT_THAT(output.out, ElementsAre("started"));
}

TEST(Subprocess, TerminateEscalatesToKill) {
  // Ignores SIGTERM: only the SIGKILL after the grace period ends it.
  SubprocessOptions options =
      Shell("trap '' TERM; echo ready; while :; do sleep 0.05; done");
  options.kill_grace = std::chrono::duration<double>(0.1);
  Output output;
  bool terminated = false;
  ProgramExit exit = RunProgram(options, &output, [&](Subprocess& p) {
    if (!terminated && !output.out.empty()) {
      p.Terminate();
      terminated = true;
    }
  });
  EXPECT_TRUE(terminated);
  EXPECT_TRUE(exit.signaled);
  EXPECT_EQ(exit.code, SIGKILL);
  EXPECT_FALSE(exit.timed_out);
}

TEST(Subprocess, SignalReachesTheProgram) {
  SubprocessOptions options = Shell(
      "trap 'echo got INT; exit 5' INT; echo ready; "
      "while :; do sleep 0.05; done");
  Output output;
  bool sent = false;
  ProgramExit exit = RunProgram(options, &output, [&](Subprocess& p) {
    if (!sent && !output.out.empty()) {
      p.Signal(SIGINT);
      sent = true;
    }
  });
  EXPECT_EQ(exit.code, 5);
  EXPECT_THAT(output.out, ElementsAre("ready", "got INT"));
}

// Whether process `pid`, not our child, is gone (or a zombie, as good as
// gone), polled for up to 10 s.
bool GoneSoon(pid_t pid) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return true;
    const size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() &&
        line[paren + 2] == 'Z') {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// How our child `pid` ended, waiting up to 10 s (then killing it): the
// wait status, or -1 if it had to be killed.
int ReapSoon(pid_t pid) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

TEST(Subprocess, AProgramDiesWithTheThreadThatStartedIt) {
  pid_t pid = 0;
  std::thread starter([&] {
    auto process = Subprocess::Start(Shell("exec sleep 100"));
    ASSERT_TRUE(process.ok()) << process.status();
    pid = (*process)->pid();
    // Dropped unreaped: as if the thread, or the worker, died.
    process->release();
  });
  starter.join();
  ASSERT_GT(pid, 0);
  const int status = ReapSoon(pid);
  ASSERT_NE(status, -1) << "the program outlived the thread that started it";
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST(Subprocess, WhatTheProgramLeftRunningEndsWithIt) {
  Output output;
  ProgramExit exit =
      RunProgram(Shell("sleep 100 >/dev/null 2>&1 & echo $!; exit 0"), &output);
  EXPECT_EQ(exit.code, 0);
  ASSERT_EQ(output.out.size(), 1u);
  EXPECT_TRUE(GoneSoon(std::stoi(output.out[0])));
}

TEST(OrphanGuard, KillsTheGroupsItKnowsOnceItsWorkerIsGone) {
  auto guard = OrphanGuard::Start();
  ASSERT_TRUE(guard.ok()) << guard.status();
  SubprocessOptions options =
      Shell("sleep 100 >/dev/null 2>&1 & echo $!; echo ready; wait");
  options.guard = guard->get();
  auto process = Subprocess::Start(options);
  ASSERT_TRUE(process.ok()) << process.status();
  // A group started and ended meanwhile is forgotten.
  {
    SubprocessOptions other = Shell("exit 0");
    other.guard = guard->get();
    Output ignored;
    RunProgram(other, &ignored);
  }
  Output output;
  bool dropped = false;
  ProgramExit exit = (*process)->Wait(
      [&](std::string_view line) { output.out.emplace_back(line); },
      [&](std::string_view) {},
      [&] {
        if (!dropped && output.out.size() == 2) {
          // What the kernel does to the worker's end when it dies.
          guard->reset();
          dropped = true;
        }
      },
      std::chrono::milliseconds(20));
  EXPECT_TRUE(dropped);
  EXPECT_TRUE(exit.signaled);
  EXPECT_EQ(exit.code, SIGKILL);
  ASSERT_EQ(output.out.size(), 2u);
  EXPECT_TRUE(GoneSoon(std::stoi(output.out[0])));
}

TEST(Subprocess, MissingProgramIsNotFound) {
  SubprocessOptions options;
  options.argv = {"/nonexistent/hypertune-test-program"};
  auto process = Subprocess::Start(options);
  ASSERT_FALSE(process.ok());
  EXPECT_EQ(process.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(process.status().message()),
              HasSubstr("cannot run \"/nonexistent/hypertune-test-program\""));

  options.argv = {"hypertune-test-no-such-program-in-path"};
  process = Subprocess::Start(options);
  ASSERT_FALSE(process.ok());
  EXPECT_EQ(process.status().code(), absl::StatusCode::kNotFound);
}

TEST(Subprocess, AProgramNotExecutableIsPermissionDenied) {
  const std::string file = ::testing::TempDir() + "/subprocess_test-plain";
  std::ofstream(file) << "not a program\n";
  SubprocessOptions options;
  options.argv = {file};
  auto process = Subprocess::Start(options);
  ASSERT_FALSE(process.ok());
  EXPECT_EQ(process.status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace hypertune::cli
