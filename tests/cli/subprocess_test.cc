#include "cli/subprocess.h"

#include <signal.h>

#include <cstdlib>

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

ProgramExit RunProgram(SubprocessOptions options, Output* output,
                const std::function<void(Subprocess&)>& on_tick = nullptr) {
  auto process = Subprocess::Start(options);
  EXPECT_TRUE(process.ok()) << process.status();
  if (!process.ok()) return {};
  Subprocess& p = **process;
  return p.Wait(
      [&](std::string_view line) { output->out.emplace_back(line); },
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
  SubprocessOptions options =
      Shell("trap 'echo got INT; exit 5' INT; echo ready; "
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

TEST(Subprocess, MissingProgramIsNotFound) {
  SubprocessOptions options;
  options.argv = {"/nonexistent/hypertune-test-program"};
  auto process = Subprocess::Start(options);
  ASSERT_FALSE(process.ok());
  EXPECT_EQ(process.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(process.status().message()),
              HasSubstr("cannot run \"/nonexistent/hypertune-test-program\""));
}

}  // namespace
}  // namespace hypertune::cli
