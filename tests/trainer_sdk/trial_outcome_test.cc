#include "trainer_sdk/cli/trial_outcome.h"

#include <cmath>

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
  TrialOutcome outcome = DecideOutcome(run, "loss");
  EXPECT_EQ(outcome.kind, Kind::kComplete);
  EXPECT_EQ(outcome.metrics, (Metrics{{"loss", 0.2}}));
  EXPECT_EQ(outcome.step, 4);
}

TEST(DecideOutcome, CleanExitWithOnlyStepsUsesTheLastStep) {
  TrialRun run = Exited(0);
  run.step_metrics = Metrics{{"loss", 0.3}};
  run.last_step = 9;
  TrialOutcome outcome = DecideOutcome(run, "loss");
  EXPECT_EQ(outcome.kind, Kind::kComplete);
  EXPECT_EQ(outcome.metrics, (Metrics{{"loss", 0.3}}));
  EXPECT_EQ(outcome.step, 9);
}

TEST(DecideOutcome, CleanExitWithoutMetricsIsInfeasible) {
  TrialOutcome outcome = DecideOutcome(Exited(0), "loss");
  EXPECT_EQ(outcome.kind, Kind::kInfeasible);
  EXPECT_EQ(outcome.reason, "program exited 0 without reporting a metric");
}

TEST(DecideOutcome, NonZeroExitIsInfeasibleEvenWithMetrics) {
  TrialRun run = Exited(3);
  run.final_metrics = Metrics{{"loss", 0.2}};
  TrialOutcome outcome = DecideOutcome(run, "loss");
  EXPECT_EQ(outcome.kind, Kind::kInfeasible);
  EXPECT_EQ(outcome.reason, "exit status 3");
}

TEST(DecideOutcome, SignalIsInfeasible) {
  TrialRun run;
  run.exit.signaled = true;
  run.exit.code = 9;
  TrialOutcome outcome = DecideOutcome(run, "loss");
  EXPECT_EQ(outcome.kind, Kind::kInfeasible);
  EXPECT_EQ(outcome.reason, "killed by signal 9");
}

TEST(DecideOutcome, TimeoutWins) {
  TrialRun run;
  run.exit.signaled = true;
  run.exit.code = 15;
  run.exit.timed_out = true;
  run.step_metrics = Metrics{{"loss", 0.3}};
  TrialOutcome outcome = DecideOutcome(run, "loss");
  EXPECT_EQ(outcome.kind, Kind::kInfeasible);
  EXPECT_EQ(outcome.reason, "timeout");
}

TEST(DecideOutcome, NaNObjectiveIsInfeasible) {
  TrialRun run = Exited(0);
  run.final_metrics = Metrics{{"loss", std::nan("")}};
  TrialOutcome outcome = DecideOutcome(run, "loss");
  EXPECT_EQ(outcome.kind, Kind::kInfeasible);
  EXPECT_EQ(outcome.reason, "metric \"loss\" is NaN");
}

TEST(DecideOutcome, MissingObjectiveIsInfeasible) {
  TrialRun run = Exited(0);
  run.final_metrics = Metrics{{"acc", 0.9}, {"f1", 0.8}};
  TrialOutcome outcome = DecideOutcome(run, "loss");
  EXPECT_EQ(outcome.kind, Kind::kInfeasible);
  EXPECT_THAT(outcome.reason, HasSubstr("objective \"loss\""));
  EXPECT_THAT(outcome.reason, HasSubstr("acc, f1"));
}

TEST(DecideOutcome, InterruptedIsLeftUnlessItFinishedCleanly) {
  TrialRun run;
  run.interrupted = true;
  run.exit.signaled = true;
  run.exit.code = 2;
  run.step_metrics = Metrics{{"loss", 0.3}};
  EXPECT_EQ(DecideOutcome(run, "loss").kind, Kind::kLeave);

  TrialRun finished = Exited(0);
  finished.interrupted = true;
  finished.final_metrics = Metrics{{"loss", 0.1}};
  EXPECT_EQ(DecideOutcome(finished, "loss").kind, Kind::kComplete);
}

TEST(DecideOutcome, StoppedEarlyCompletesWithWhatItReached) {
  TrialRun run;
  run.stop_requested = true;
  run.exit.signaled = true;
  run.exit.code = 15;
  run.step_metrics = Metrics{{"loss", 0.4}};
  run.last_step = 2;
  TrialOutcome outcome = DecideOutcome(run, "loss");
  EXPECT_EQ(outcome.kind, Kind::kComplete);
  EXPECT_EQ(outcome.step, 2);

  TrialRun nothing;
  nothing.stop_requested = true;
  EXPECT_EQ(DecideOutcome(nothing, "loss").kind, Kind::kLeave);
}

}  // namespace
}  // namespace hypertune::cli
