#include "service/background_pool.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace hypertune::service {
namespace {

StopFlag NewFlag() { return std::make_shared<std::atomic<bool>>(false); }

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
    done.WaitForNotification();
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
    release.WaitForNotification();
  });
  blocker_started.WaitForNotification();
  pool.RunnerFor(deleted)([&](const std::atomic<bool>&) { ++deleted_ran; });
  pool.RunnerFor(other)([&](const std::atomic<bool>&) { other_ran.Notify(); });
  *deleted = true;
  release.Notify();
  other_ran.WaitForNotification();
  EXPECT_EQ(deleted_ran, 0);
}

TEST(BackgroundPoolTest, ARunningJobSeesItsFlagRaised) {
  absl::Notification started, saw_stop;
  BackgroundPool pool(2);
  const StopFlag flag = NewFlag();
  pool.Run(flag, [&](const std::atomic<bool>& stop) {
    started.Notify();
    while (!stop) absl::SleepFor(absl::Milliseconds(1));
    saw_stop.Notify();
  });
  started.WaitForNotification();
  *flag = true;  // The study is deleted while its fit runs.
  saw_stop.WaitForNotification();
}

TEST(BackgroundPoolTest, GoingAwayStopsTheRunningJobs) {
  absl::Notification started;
  std::atomic<bool> saw_stop{false};
  {
    BackgroundPool pool(1);
    pool.Run(NewFlag(), [&](const std::atomic<bool>& stop) {
      started.Notify();
      while (!stop) absl::SleepFor(absl::Milliseconds(1));
      saw_stop = true;
    });
    started.WaitForNotification();
  }  // Joins: returns only once the job has seen its flag.
  EXPECT_TRUE(saw_stop);
}

}  // namespace
}  // namespace hypertune::service
