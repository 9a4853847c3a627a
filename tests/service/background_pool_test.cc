#include "service/server/background_pool.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace hypertune::service {
namespace {

StopFlag NewFlag() { return std::make_shared<std::atomic<bool>>(false); }

// How long a job waits for its flag, and a test for a job, before failing:
// a flag that is never seen fails the test with a message instead of hanging
// it until ctest's timeout.
constexpr absl::Duration kLimit = absl::Seconds(30);

// Polls `stop` until it is raised or kLimit has passed; returns whether it
// was raised.
bool SeesFlagWithinLimit(const std::atomic<bool>& stop) {
  const absl::Time deadline = absl::Now() + kLimit;
  while (!stop && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  return stop;
}

TEST(BackgroundPoolTest, RunsJobsInOrderOnItsThread) {
  absl::Mutex mu;
  std::vector<int> ran;
  absl::Notification done;
  {
    BackgroundPool pool(1);
    const StopFlag flag = NewFlag();
    for (int i = 0; i < 5; ++i) {
      pool.Run(flag, [&, i](const std::atomic<bool>& stop) {
        EXPECT_FALSE(stop);
        absl::MutexLock lock(&mu);
        ran.push_back(i);
        if (i == 4) done.Notify();
      });
    }
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(kLimit))
        << "the five jobs did not all run";
  }
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(BackgroundPoolTest, ARaisedFlagSkipsQueuedJobsOfThatOwnerOnly) {
  absl::Notification release, blocker_started, other_ran;
  std::atomic<int> deleted_ran{0};
  BackgroundPool pool(1);
  const StopFlag deleted = NewFlag();
  const StopFlag other = NewFlag();
  // Holds the only thread until the flags are set.
  pool.Run(other, [&](const std::atomic<bool>&) {
    blocker_started.Notify();
    release.WaitForNotificationWithTimeout(kLimit);
  });
  ASSERT_TRUE(blocker_started.WaitForNotificationWithTimeout(kLimit))
      << "the first job never started";
  pool.RunnerFor(deleted)([&](const std::atomic<bool>&) { ++deleted_ran; });
  pool.RunnerFor(other)([&](const std::atomic<bool>&) { other_ran.Notify(); });
  *deleted = true;
  release.Notify();
  ASSERT_TRUE(other_ran.WaitForNotificationWithTimeout(kLimit))
      << "the other owner's job never ran";
  EXPECT_EQ(deleted_ran, 0);
}

TEST(BackgroundPoolTest, ARunningJobSeesItsFlagRaised) {
  absl::Notification started, finished;
  std::atomic<bool> saw_stop{false};
  BackgroundPool pool(2);
  const StopFlag flag = NewFlag();
  pool.Run(flag, [&](const std::atomic<bool>& stop) {
    started.Notify();
    saw_stop = SeesFlagWithinLimit(stop);
    finished.Notify();
  });
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kLimit))
      << "the job never started";
  *flag = true;  // The study is deleted while its fit runs.
  ASSERT_TRUE(finished.WaitForNotificationWithTimeout(2 * kLimit))
      << "the job never returned";
  EXPECT_TRUE(saw_stop) << "the running job did not see its flag raised "
                        << "within " << kLimit;
}

TEST(BackgroundPoolTest, GoingAwayStopsTheRunningJobs) {
  absl::Notification started;
  std::atomic<bool> saw_stop{false};
  {
    BackgroundPool pool(1);
    pool.Run(NewFlag(), [&](const std::atomic<bool>& stop) {
      started.Notify();
      saw_stop = SeesFlagWithinLimit(stop);
    });
    ASSERT_TRUE(started.WaitForNotificationWithTimeout(kLimit))
        << "the job never started";
  }  // Joins: returns once the job has seen its flag or given up waiting.
  EXPECT_TRUE(saw_stop) << "the pool went away without raising the flag of "
                        << "its running job within " << kLimit;
}

}  // namespace
}  // namespace hypertune::service
