#include "service/rpc/suggest_queue.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hypertune::service {
namespace {

v1::SuggestTrialsRequest Request() {
  v1::SuggestTrialsRequest request;
  request.set_study_name("s");
  request.set_count(1);
  return request;
}

// Serves every ticket with an empty response.
void ServeAll(const std::vector<SuggestQueue::Ticket*>& batch) {
  for (SuggestQueue::Ticket* t : batch) t->result = v1::SuggestTrialsResponse();
}

TEST(SuggestQueue, TheLeaderKeepsTheSameModelFromOneBatchToTheNext) {
  SuggestQueue queue;
  const v1::SuggestTrialsRequest request = Request();
  const Principal caller = Principal::AuthOff();
  StudyModel* first = nullptr;
  ASSERT_TRUE(queue
                  .Submit(request, caller,
                          [&](const auto& batch, StudyModel& model) {
                            model.study_created_ms = 42;
                            first = &model;
                            ServeAll(batch);
                          })
                  .ok());
  ASSERT_TRUE(queue
                  .Submit(request, caller,
                          [&](const auto& batch, StudyModel& model) {
                            EXPECT_EQ(&model, first);
                            EXPECT_EQ(model.study_created_ms, 42);
                            ServeAll(batch);
                          })
                  .ok());
}

TEST(SuggestQueue, DiscardModelStopsItsFitsAndTheNextLeaderStartsAfresh) {
  SuggestQueue queue;
  const v1::SuggestTrialsRequest request = Request();
  const Principal caller = Principal::AuthOff();
  StopFlag old_stop;
  ASSERT_TRUE(queue
                  .Submit(request, caller,
                          [&](const auto& batch, StudyModel& model) {
                            model.study_created_ms = 42;
                            old_stop = model.stop;
                            ServeAll(batch);
                          })
                  .ok());
  queue.DiscardModel();
  EXPECT_TRUE(*old_stop);
  ASSERT_TRUE(queue
                  .Submit(request, caller,
                          [&](const auto& batch, StudyModel& model) {
                            EXPECT_EQ(model.study_created_ms, 0);
                            EXPECT_NE(model.stop, old_stop);
                            EXPECT_FALSE(*model.stop);
                            ServeAll(batch);
                          })
                  .ok());
}

TEST(SuggestQueue, AModelMadeWhileItIsDiscardedIsStoppedToo) {
  SuggestQueue queue;
  const v1::SuggestTrialsRequest request = Request();
  const Principal caller = Principal::AuthOff();
  StopFlag made;
  ASSERT_TRUE(queue
                  .Submit(request, caller,
                          [&](const auto& batch, StudyModel& model) {
                            // The leader replaces the model (a new study
                            // incarnation) while the study is deleted.
                            model = StudyModel();
                            made = model.stop;
                            queue.DiscardModel();
                            ServeAll(batch);
                          })
                  .ok());
  EXPECT_TRUE(*made);
}

TEST(SuggestQueue, OneLeaderAtATimeTouchesTheModel) {
  SuggestQueue queue;
  const v1::SuggestTrialsRequest request = Request();
  const Principal caller = Principal::AuthOff();
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> served{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 50; ++k) {
        absl::StatusOr<v1::SuggestTrialsResponse> r = queue.Submit(
            request, caller, [&](const auto& batch, StudyModel& model) {
              if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
              ++model.study_created_ms;
              served.fetch_add(static_cast<int>(batch.size()));
              ServeAll(batch);
              inside.fetch_sub(1);
            });
        EXPECT_TRUE(r.ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(served.load(), 8 * 50);
}

}  // namespace
}  // namespace hypertune::service
