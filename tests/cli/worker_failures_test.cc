#include "cli/worker/worker_failures.h"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hypertune::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A program that exited with `code` on its own, without a metric.
TrialRun Exited(int code) {
  TrialRun run;
  run.exit.code = code;
  return run;
}

TrialRun KilledBy(int signal) {
  TrialRun run;
  run.exit.signaled = true;
  run.exit.code = signal;
  return run;
}

TrialRun Succeeded() {
  TrialRun run = Exited(0);
  run.final_metrics = Metrics{{"loss", 0.1}};
  return run;
}

constexpr double kQuick = 1;
constexpr char kNoLog[] = "/nonexistent/hypertune/trial-1.log";

TEST(EarlyFailures, FirstProgramsFailingAlikeAreHeldThenGivenBack) {
  FailureWatch watch(/*early_failures=*/3, /*max_consecutive_failures=*/0);
  EXPECT_EQ(watch.JudgeEarly(Exited(127), kQuick, 1), EarlyVerdict::kHold);
  EXPECT_EQ(watch.JudgeEarly(Exited(127), kQuick, 2), EarlyVerdict::kHold);
  EXPECT_EQ(watch.JudgeEarly(Exited(127), kQuick, 3),
            EarlyVerdict::kEnvironment);

  EXPECT_THAT(watch.EarlyFailuresGiveBackReason(Exited(127).exit),
              HasSubstr("the worker's environment: its first 3 programs "
                        "failed alike within seconds (exit status 127)"));
  absl::Status error = watch.EarlyFailuresError(Exited(127).exit, 3, kNoLog);
  EXPECT_EQ(error.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(error.message(),
              HasSubstr("the first 3 trials this worker ran (1, 2, 3) all "
                        "failed alike within 10 s: exit status 127"));
  EXPECT_THAT(error.message(), HasSubstr("gives those trials back"));
  // Decided: nothing more to end.
  EXPECT_FALSE(watch.EndEarlyWatch());
}

TEST(EarlyFailures, ProgramsStillRunningWhenItEndsAreGivenBackToo) {
  FailureWatch watch(2, 0);
  EXPECT_EQ(watch.JudgeEarly(KilledBy(SIGSEGV), kQuick, 1),
            EarlyVerdict::kHold);
  EXPECT_EQ(watch.JudgeEarly(KilledBy(SIGSEGV), kQuick, 2),
            EarlyVerdict::kEnvironment);
  // A parallel slot's program, started before the count was reached.
  EXPECT_EQ(watch.JudgeEarly(KilledBy(SIGSEGV), kQuick, 3),
            EarlyVerdict::kEnvironment);
  EXPECT_THAT(
      watch.EarlyFailuresError(KilledBy(SIGSEGV).exit, 3, kNoLog).message(),
      HasSubstr("(1, 2, 3) all failed alike within 10 s: killed by "
                "signal 11"));
  // One that ends otherwise is settled as usual.
  EXPECT_EQ(watch.JudgeEarly(Succeeded(), kQuick, 4), EarlyVerdict::kNone);
}

TEST(EarlyFailures, FailuresThatDifferEndTheWatchForGood) {
  FailureWatch watch(2, 0);
  EXPECT_EQ(watch.JudgeEarly(Exited(1), kQuick, 1), EarlyVerdict::kHold);
  // The held trial 1 is then settled as usual, as is this one.
  EXPECT_EQ(watch.JudgeEarly(Exited(2), kQuick, 2), EarlyVerdict::kEnded);
  EXPECT_EQ(watch.JudgeEarly(Exited(1), kQuick, 3), EarlyVerdict::kNone);
  EXPECT_EQ(watch.JudgeEarly(Exited(1), kQuick, 4), EarlyVerdict::kNone);
}

TEST(EarlyFailures, ASignalDiffersFromTheSameExitStatus) {
  FailureWatch watch(2, 0);
  EXPECT_EQ(watch.JudgeEarly(Exited(SIGSEGV), kQuick, 1), EarlyVerdict::kHold);
  EXPECT_EQ(watch.JudgeEarly(KilledBy(SIGSEGV), kQuick, 2),
            EarlyVerdict::kEnded);
}

TEST(EarlyFailures, ASuccessEndsTheWatchForGood) {
  FailureWatch watch(2, 0);
  EXPECT_EQ(watch.JudgeEarly(Succeeded(), kQuick, 1), EarlyVerdict::kEnded);
  EXPECT_EQ(watch.JudgeEarly(Exited(1), kQuick, 2), EarlyVerdict::kNone);
  EXPECT_EQ(watch.JudgeEarly(Exited(1), kQuick, 3), EarlyVerdict::kNone);
}

TEST(EarlyFailures, AProgramStillRunningAfterSecondsEndsTheWatch) {
  FailureWatch watch(2, 0);
  EXPECT_EQ(watch.JudgeEarly(Exited(1), kQuick, 1), EarlyVerdict::kHold);
  EXPECT_TRUE(watch.EndEarlyWatch());  // the held trial 1 settles
  EXPECT_FALSE(watch.EndEarlyWatch());
  EXPECT_EQ(watch.JudgeEarly(Exited(1), kQuick, 2), EarlyVerdict::kNone);
}

TEST(EarlyFailures, OnlyQuickFailuresOnTheirOwnWithoutAMetricCount) {
  TrialRun with_metric = Exited(1);
  with_metric.step_metrics = Metrics{{"loss", 0.5}};
  TrialRun declared = Exited(1);
  declared.infeasible_reason = "out of memory";
  TrialRun timed_out = Exited(1);
  timed_out.exit.timed_out = true;
  TrialRun preempted = KilledBy(SIGTERM);
  preempted.worker_signal = SIGTERM;
  TrialRun stopped = KilledBy(SIGTERM);
  stopped.stop_requested = true;
  TrialRun taken_over = KilledBy(SIGTERM);
  taken_over.lease_lost = true;
  struct Case {
    const char* what;
    TrialRun run;
    double seconds;
  };
  for (const Case& c : {Case{"with a metric", with_metric, kQuick},
                        Case{"declared infeasible", declared, kQuick},
                        Case{"timed out", timed_out, kQuick},
                        Case{"preempted", preempted, kQuick},
                        Case{"stopped early", stopped, kQuick},
                        Case{"taken over", taken_over, kQuick},
                        Case{"slow", Exited(1), kQuickFailureSeconds}}) {
    FailureWatch watch(2, 0);
    EXPECT_EQ(watch.JudgeEarly(c.run, c.seconds, 1), EarlyVerdict::kEnded)
        << c.what;
    EXPECT_EQ(watch.JudgeEarly(Exited(1), kQuick, 2), EarlyVerdict::kNone)
        << c.what;
  }
}

TEST(EarlyFailures, ZeroTurnsItOff) {
  FailureWatch watch(0, 0);
  for (int64_t id = 1; id <= 5; ++id) {
    EXPECT_EQ(watch.JudgeEarly(Exited(1), kQuick, id), EarlyVerdict::kNone);
  }
  EXPECT_FALSE(watch.EndEarlyWatch());
}

TEST(FailuresToRun, InARowStopTheWorkerWithTheLogsTail) {
  const std::filesystem::path log =
      std::filesystem::path(::testing::TempDir()) /
      "worker_failures_test-trial-3.log";
  {
    std::ofstream out(log);
    for (int i = 1; i <= 25; ++i) out << "line " << i << "\n";
  }
  FailureWatch watch(0, 3);
  EXPECT_TRUE(
      watch.CountFailureToRun(v1::Trial::INFEASIBLE, Exited(1), log).ok());
  EXPECT_TRUE(
      watch.CountFailureToRun(v1::Trial::INFEASIBLE, Exited(1), log).ok());
  absl::Status error =
      watch.CountFailureToRun(v1::Trial::INFEASIBLE, Exited(1), log);
  EXPECT_EQ(error.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(error.message(), HasSubstr("3 trials in a row failed to run"));
  EXPECT_THAT(error.message(), HasSubstr(log.string()));
  // The last 20 lines, indented.
  EXPECT_THAT(error.message(), HasSubstr("\n  line 6\n"));
  EXPECT_THAT(error.message(), HasSubstr("  line 25\n"));
  EXPECT_THAT(error.message(), Not(HasSubstr("  line 5\n")));
  std::filesystem::remove(log);
}

TEST(FailuresToRun, FailedTrialsWithoutAMetricCountToo) {
  FailureWatch watch(0, 2);
  EXPECT_TRUE(
      watch.CountFailureToRun(v1::Trial::FAILED, Exited(1), kNoLog).ok());
  EXPECT_EQ(
      watch.CountFailureToRun(v1::Trial::INFEASIBLE, Exited(0), kNoLog).code(),
      absl::StatusCode::kFailedPrecondition);
  // A trial the program declared infeasible ran: the count starts again.
  FailureWatch again(0, 2);
  TrialRun declared = Exited(1);
  declared.infeasible_reason = "out of memory";
  EXPECT_TRUE(
      again.CountFailureToRun(v1::Trial::FAILED, Exited(1), kNoLog).ok());
  EXPECT_TRUE(
      again.CountFailureToRun(v1::Trial::INFEASIBLE, declared, kNoLog).ok());
  EXPECT_TRUE(
      again.CountFailureToRun(v1::Trial::FAILED, Exited(1), kNoLog).ok());
}

TEST(FailuresToRun, ATrialThatRanStartsTheCountAgain) {
  TrialRun timed_out = Exited(1);
  timed_out.exit.timed_out = true;
  TrialRun with_metric = Exited(1);
  with_metric.final_metrics = Metrics{{"loss", 0.5}};
  struct Case {
    const char* what;
    v1::Trial::State settled;
    TrialRun run;
  };
  for (const Case& c :
       {Case{"completed", v1::Trial::COMPLETED, Succeeded()},
        Case{"stopped", v1::Trial::STOPPED, Succeeded()},
        Case{"timed out", v1::Trial::INFEASIBLE, timed_out},
        Case{"infeasible with a metric", v1::Trial::INFEASIBLE, with_metric}}) {
    FailureWatch watch(0, 2);
    EXPECT_TRUE(
        watch.CountFailureToRun(v1::Trial::INFEASIBLE, Exited(1), kNoLog).ok())
        << c.what;
    EXPECT_TRUE(watch.CountFailureToRun(c.settled, c.run, kNoLog).ok())
        << c.what;
    EXPECT_TRUE(
        watch.CountFailureToRun(v1::Trial::INFEASIBLE, Exited(1), kNoLog).ok())
        << c.what;
  }
}

TEST(FailuresToRun, TrialsGivenBackOrLeftChangeNothing) {
  FailureWatch watch(0, 2);
  EXPECT_TRUE(
      watch.CountFailureToRun(v1::Trial::INFEASIBLE, Exited(1), kNoLog).ok());
  EXPECT_TRUE(watch.CountFailureToRun(std::nullopt, Exited(1), kNoLog).ok());
  EXPECT_TRUE(
      watch.CountFailureToRun(v1::Trial::REQUESTED, KilledBy(SIGKILL), kNoLog)
          .ok());
  EXPECT_EQ(
      watch.CountFailureToRun(v1::Trial::INFEASIBLE, Exited(1), kNoLog).code(),
      absl::StatusCode::kFailedPrecondition);
}

TEST(FailuresToRun, ZeroTurnsItOff) {
  FailureWatch watch(0, 0);
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(
        watch.CountFailureToRun(v1::Trial::INFEASIBLE, Exited(1), kNoLog).ok());
  }
}

}  // namespace
}  // namespace hypertune::cli
