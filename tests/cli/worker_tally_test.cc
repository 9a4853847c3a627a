// The worker's progress counts each trial once, in the bucket of its latest
// outcome, so that the buckets add up to the trials shown (issue 47 item 9:
// "17/16 done (14 given back or left)").
#include "cli/worker/worker_tally.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hypertune::cli {
namespace {

v1::Trial Settled(int64_t id, v1::Trial::State state, double loss = 0) {
  v1::Trial trial;
  trial.set_id(id);
  trial.set_state(state);
  (*trial.mutable_final_measurement()->mutable_metrics())["loss"] = loss;
  return trial;
}

WorkerTally Tally(int64_t budget) {
  return WorkerTally("s", budget, StudyMetrics::Objective{"loss", false});
}

TEST(WorkerTally, ATrialRunAgainMovesBetweenBucketsInsteadOfCountingTwice) {
  WorkerTally tally = Tally(2);
  // Trial 1 killed and given back, then run again to the end; trial 2
  // paused at a rung, then promoted and completed.
  tally.ProgramStarted(1);
  tally.ProgramEnded(1);
  tally.CountSettled(Settled(1, v1::Trial::REQUESTED));
  tally.ProgramStarted(2);
  tally.ProgramEnded(2);
  tally.CountSettled(Settled(2, v1::Trial::PAUSED));
  EXPECT_EQ(tally.Progress(),
            "s: 2/2 trials: 1 paused at a rung, 1 given back or left");
  tally.ProgramStarted(1);
  EXPECT_EQ(tally.Progress(), "s: 2/2 trials: 1 paused at a rung, 1 running");
  tally.ProgramEnded(1);
  tally.CountSettled(Settled(1, v1::Trial::COMPLETED, 0.5));
  tally.ProgramStarted(2);
  tally.ProgramEnded(2);
  tally.CountSettled(Settled(2, v1::Trial::COMPLETED, 0.25));
  EXPECT_EQ(tally.Progress(),
            "s: 2/2 trials: 2 completed; best loss=0.25 (trial 2)");
  const WorkerTally::Counts counts = tally.counts();
  EXPECT_EQ(counts.completed, 2);
  EXPECT_EQ(counts.total(), 2);
}

TEST(WorkerTally, TheBucketsAddUpToTheTotal) {
  WorkerTally tally = Tally(0);
  EXPECT_EQ(tally.Progress(), "s: 0 trials");
  tally.ProgramStarted(1);
  EXPECT_EQ(tally.Progress(), "s: 1 trial: 1 running");
  tally.ProgramEnded(1);
  EXPECT_EQ(tally.Progress(), "s: 1 trial: 1 held");
  tally.CountSettled(Settled(1, v1::Trial::INFEASIBLE));
  tally.CountSettled(Settled(2, v1::Trial::FAILED));
  tally.CountSettled(Settled(3, v1::Trial::STOPPED, 2));
  tally.CountOther(4);
  tally.CountOther(4);
  tally.ProgramStarted(5);
  EXPECT_EQ(tally.Progress(),
            "s: 5 trials: 1 completed, 1 infeasible, 1 failed, 1 given back "
            "or left, 1 running; best loss=2 (trial 3)");
  const WorkerTally::Counts counts = tally.counts();
  EXPECT_EQ(counts.total(), 5);
  EXPECT_EQ(counts.running + counts.held + counts.completed +
                counts.infeasible + counts.failed + counts.paused +
                counts.other,
            counts.total());
}

TEST(WorkerTally, AnInfeasibleResultIsNotTheBest) {
  WorkerTally tally = Tally(3);
  v1::Trial missed = Settled(1, v1::Trial::COMPLETED, 0.1);
  missed.set_feasible(false);
  tally.CountSettled(missed);
  tally.CountSettled(Settled(2, v1::Trial::COMPLETED, 0.3));
  EXPECT_EQ(tally.Progress(),
            "s: 2/3 trials: 2 completed; best loss=0.3 (trial 2)");
}

}  // namespace
}  // namespace hypertune::cli
