#include "cli/worker/trial_outcome.h"

#include <cmath>
#include <csignal>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hypertune::cli {
namespace {

using Kind = TrialOutcome::Kind;
using ::testing::HasSubstr;

TrialRun Exited(int code) {
  TrialRun run;
  run.exit.code = code;
  return run;
}

TEST(DecideOutcome, CleanExitWithFinalMetricsCompletes) {
  TrialRun run = Exited(0);
  run.final_metrics = Metrics{{"loss", 0.2}};
  run.step_metrics = Metrics{{"loss", 0.3}};
  run.last_step = 4;
  TrialOutcome outcome = DecideOutcome(run, {"loss"});
  EXPECT_EQ(outcome.kind, Kind::kComplete);
  EXPECT_EQ(outcome.metrics, (Metrics{{"loss", 0.2}}));
  EXPECT_EQ(outcome.step, 4);
}

TEST(DecideOutcome, CleanExitWithOnlyStepsUsesTheLastStep) {
  TrialRun run = Exited(0);
  run.step_metrics = Metrics{{"loss", 0.3}};
  run.last_step = 9;
  TrialOutcome outcome = DecideOutcome(run, {"loss"});
  EXPECT_EQ(outcome.kind, Kind::kComplete);
  EXPECT_EQ(outcome.metrics, (Metrics{{"loss", 0.3}}));
  EXPECT_EQ(outcome.step, 9);
}

// Not the parameters' doing: the program's (DESIGN.md, "Trial states").
TEST(DecideOutcome, CleanExitWithoutMetricsFails) {
  TrialOutcome outcome = DecideOutcome(Exited(0), {"loss"});
  EXPECT_EQ(outcome.kind, Kind::kFailed);
  EXPECT_EQ(outcome.reason, "program exited 0 without reporting a metric");
}

TEST(DecideOutcome, NonZeroExitFailsEvenWithMetrics) {
  TrialRun run = Exited(3);
  run.final_metrics = Metrics{{"loss", 0.2}};
  TrialOutcome outcome = DecideOutcome(run, {"loss"});
  EXPECT_EQ(outcome.kind, Kind::kFailed);
  EXPECT_EQ(outcome.reason, "exit status 3");
}

TEST(DecideOutcome, AFailuresReasonEndsWithTheProgramsLastLine) {
  TrialRun run = Exited(1);
  run.last_line = "ValueError: shapes (3,) and (4,) not aligned";
  TrialOutcome outcome = DecideOutcome(run, {"loss"});
  EXPECT_EQ(outcome.kind, Kind::kFailed);
  EXPECT_EQ(outcome.reason,
            "exit status 1: ValueError: shapes (3,) and (4,) not aligned");
}

TEST(DecideOutcome, ATrialTheProgramDeclaredInfeasibleIsInfeasible) {
  TrialRun run = Exited(1);
  run.infeasible_reason = "CUDA out of memory";
  run.step_metrics = Metrics{{"loss", 0.3}};
  TrialOutcome outcome = DecideOutcome(run, {"loss"});
  EXPECT_EQ(outcome.kind, Kind::kInfeasible);
  EXPECT_EQ(outcome.reason, "CUDA out of memory");

  // Whatever the exit status, with a default reason.
  TrialRun clean = Exited(0);
  clean.infeasible_reason = "";
  outcome = DecideOutcome(clean, {"loss"});
  EXPECT_EQ(outcome.kind, Kind::kInfeasible);
  EXPECT_EQ(outcome.reason, "declared infeasible by the program");

  // The worker's own stop still gives the trial back.
  TrialRun preempted = Exited(1);
  preempted.infeasible_reason = "diverged";
  preempted.worker_signal = SIGTERM;
  EXPECT_EQ(DecideOutcome(preempted, {"loss"}).kind, Kind::kWorkerFailed);
}

TEST(DecideOutcome, ASignalFromOutsideIsTheWorkersFailure) {
  for (int signal : {SIGKILL, SIGTERM, SIGINT, SIGHUP}) {
    TrialRun run;
    run.exit.signaled = true;
    run.exit.code = signal;
    run.step_metrics = Metrics{{"loss", 0.3}};
    TrialOutcome outcome = DecideOutcome(run, {"loss"});
    EXPECT_EQ(outcome.kind, Kind::kWorkerFailed) << signal;
    EXPECT_EQ(outcome.reason, absl::StrCat("killed by signal ", signal));
  }
}

TEST(DecideOutcome, ACrashIsTheParametersFault) {
  TrialRun run;
  run.exit.signaled = true;
  run.exit.code = SIGSEGV;
  TrialOutcome outcome = DecideOutcome(run, {"loss"});
  EXPECT_EQ(outcome.kind, Kind::kInfeasible);
  EXPECT_EQ(outcome.reason,
            absl::StrCat("crashed with signal ", SIGSEGV, " (SIGSEGV)"));
  run.exit.code = SIGABRT;
  EXPECT_EQ(DecideOutcome(run, {"loss"}).kind, Kind::kInfeasible);
}

TEST(DecideOutcome, TimeoutWins) {
  TrialRun run;
  run.exit.signaled = true;
  run.exit.code = 15;
  run.exit.timed_out = true;
  run.step_metrics = Metrics{{"loss", 0.3}};
  TrialOutcome outcome = DecideOutcome(run, {"loss"});
  EXPECT_EQ(outcome.kind, Kind::kInfeasible);
  EXPECT_EQ(outcome.reason, "timeout");
}

TEST(DecideOutcome, NaNObjectiveIsInfeasible) {
  TrialRun run = Exited(0);
  run.final_metrics = Metrics{{"loss", std::nan("")}};
  TrialOutcome outcome = DecideOutcome(run, {"loss"});
  EXPECT_EQ(outcome.kind, Kind::kInfeasible);
  EXPECT_EQ(outcome.reason, "metric \"loss\" is NaN");
}

TEST(DecideOutcome, MissingObjectiveIsInfeasible) {
  TrialRun run = Exited(0);
  run.final_metrics = Metrics{{"acc", 0.9}, {"f1", 0.8}};
  TrialOutcome outcome = DecideOutcome(run, {"loss"});
  EXPECT_EQ(outcome.kind, Kind::kInfeasible);
  EXPECT_THAT(outcome.reason, HasSubstr("did not report \"loss\""));
  EXPECT_THAT(outcome.reason, HasSubstr("acc, f1"));
}

TEST(DecideOutcome, AResultNeedsEveryObjectiveAndConstraint) {
  TrialRun run = Exited(0);
  run.final_metrics = Metrics{{"acc", 0.9}, {"memory", 3}};
  TrialOutcome outcome = DecideOutcome(run, {"acc", "latency", "memory"});
  EXPECT_EQ(outcome.kind, Kind::kInfeasible);
  EXPECT_THAT(outcome.reason, HasSubstr("did not report \"latency\""));
  run.final_metrics->emplace("latency", 12);
  EXPECT_EQ(DecideOutcome(run, {"acc", "latency", "memory"}).kind,
            Kind::kComplete);

  // Stopped early on the server's word: the primary objective is enough.
  TrialRun stopped = Exited(0);
  stopped.stop_requested = true;
  stopped.step_metrics = Metrics{{"acc", 0.5}};
  EXPECT_EQ(DecideOutcome(stopped, {"acc", "latency", "memory"}).kind,
            Kind::kComplete);
}

TEST(DecideOutcome, PreemptedWorkerGivesTheTrialBackUnlessItFinished) {
  TrialRun run;
  run.worker_signal = SIGTERM;
  run.exit.signaled = true;
  run.exit.code = SIGTERM;
  run.step_metrics = Metrics{{"loss", 0.3}};
  TrialOutcome outcome = DecideOutcome(run, {"loss"});
  EXPECT_EQ(outcome.kind, Kind::kWorkerFailed);
  EXPECT_EQ(outcome.reason, "worker preempted");
  EXPECT_TRUE(outcome.preempted);

  // The program caught the signal and exited non-zero: still preempted.
  TrialRun caught = Exited(1);
  caught.worker_signal = SIGTERM;
  EXPECT_EQ(DecideOutcome(caught, {"loss"}).reason, "worker preempted");

  TrialRun interrupted;
  interrupted.worker_signal = SIGINT;
  interrupted.exit.signaled = true;
  interrupted.exit.code = SIGINT;
  outcome = DecideOutcome(interrupted, {"loss"});
  EXPECT_EQ(outcome.kind, Kind::kWorkerFailed);
  EXPECT_EQ(outcome.reason,
            absl::StrCat("worker interrupted by signal ", SIGINT));
  // A Ctrl-C is no fault of the trial's: it spends no retry either.
  EXPECT_TRUE(outcome.preempted);

  TrialRun finished = Exited(0);
  finished.worker_signal = SIGTERM;
  finished.final_metrics = Metrics{{"loss", 0.1}};
  EXPECT_EQ(DecideOutcome(finished, {"loss"}).kind, Kind::kComplete);
}

TEST(DecideOutcome, TimeoutWinsOverThePreemption) {
  TrialRun run;
  run.worker_signal = SIGTERM;
  run.exit.signaled = true;
  run.exit.code = SIGKILL;
  run.exit.timed_out = true;
  EXPECT_EQ(DecideOutcome(run, {"loss"}).reason, "timeout");
}

TEST(DecideOutcome, ALostLeaseLeavesTheTrialToItsNewHolder) {
  TrialRun run;
  run.lease_lost = true;
  run.exit.signaled = true;
  run.exit.code = SIGTERM;
  run.final_metrics = Metrics{{"loss", 0.1}};
  EXPECT_EQ(DecideOutcome(run, {"loss"}).kind, Kind::kLeave);
}

TEST(DecideOutcome, StoppedEarlyCompletesWithWhatItReached) {
  TrialRun run;
  run.stop_requested = true;
  run.exit.signaled = true;
  run.exit.code = 15;
  run.step_metrics = Metrics{{"loss", 0.4}};
  run.last_step = 2;
  TrialOutcome outcome = DecideOutcome(run, {"loss"});
  EXPECT_EQ(outcome.kind, Kind::kComplete);
  EXPECT_EQ(outcome.step, 2);

  TrialRun nothing;
  nothing.stop_requested = true;
  EXPECT_EQ(DecideOutcome(nothing, {"loss"}).kind, Kind::kLeave);
}

}  // namespace
}  // namespace hypertune::cli
