#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer_sdk/trainer/data/dataset.h"
#include "trainer_sdk/trainer/data/prefetcher.h"

namespace hypertune::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Example i is one pixel holding i (plus 0.5 when training, plus the seed's
// low bits) and label i % 10; Fill fails on `fail_at`.
class FakeDataset : public Dataset {
 public:
  explicit FakeDataset(int64_t size, int64_t fail_at = -1)
      : size_(size), fail_at_(fail_at) {}
  int64_t size() const override { return size_; }
  int channels() const override { return 1; }
  int height() const override { return 1; }
  int width() const override { return 1; }
  int num_classes() const override { return 10; }

  absl::Status Fill(std::span<const int64_t> indices, bool train, uint64_t seed,
                    ImageBatch& out) const override {
    if (on_fill_) on_fill_(indices);
    out.n = static_cast<int>(indices.size());
    out.channels = out.height = out.width = 1;
    out.pixels.clear();
    out.labels.clear();
    for (int64_t i : indices) {
      if (i < 0 || i >= size_) return absl::InvalidArgumentError("range");
      if (i == fail_at_) {
        return absl::DataLossError("example " + std::to_string(i) + " is bad");
      }
      out.pixels.push_back(static_cast<float>(i) + (train ? 0.5f : 0.0f) +
                           static_cast<float>(seed % 8) * 1000);
      out.labels.push_back(static_cast<int32_t>(i % 10));
    }
    return absl::OkStatus();
  }

  std::function<void(std::span<const int64_t>)> on_fill_;

 private:
  int64_t size_, fail_at_;
};

std::vector<float> Pixels(const Dataset& d, std::vector<int64_t> indices,
                          bool train = false, uint64_t seed = 0) {
  ImageBatch batch;
  EXPECT_TRUE(d.Fill(indices, train, seed, batch).ok());
  return batch.pixels;
}

// ----------------------------------------------------------- subsets

TEST(SubsetTest, MapsIndicesIntoTheBase) {
  auto base = std::make_shared<FakeDataset>(10);
  absl::StatusOr<std::shared_ptr<const Dataset>> sub = Subset(base, 2, 5);
  ASSERT_TRUE(sub.ok()) << sub.status();
  EXPECT_EQ((*sub)->size(), 3);
  EXPECT_EQ((*sub)->num_classes(), 10);
  EXPECT_THAT(Pixels(**sub, {0, 2}), ElementsAre(2, 4));
  // Augmentation follows the base index and the seed.
  EXPECT_THAT(Pixels(**sub, {1}, true, 3), Pixels(*base, {3}, true, 3));
  ImageBatch batch;
  const std::vector<int64_t> outside = {3};
  const absl::Status status = (*sub)->Fill(outside, false, 0, batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("outside the subset's [0, 3)"));
}

TEST(SubsetTest, RejectsRangesOutsideTheBase) {
  auto base = std::make_shared<FakeDataset>(10);
  EXPECT_FALSE(Subset(base, -1, 3).ok());
  EXPECT_FALSE(Subset(base, 4, 3).ok());
  EXPECT_FALSE(Subset(base, 0, 11).ok());
  EXPECT_FALSE(Subset(nullptr, 0, 0).ok());
  absl::StatusOr<std::shared_ptr<const Dataset>> empty = Subset(base, 10, 10);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->size(), 0);
}

TEST(HoldOutTailTest, ValidationIsTheLastK) {
  auto base = std::make_shared<FakeDataset>(10);
  absl::StatusOr<Split> split = HoldOutTail(base, 3);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->train->size(), 7);
  EXPECT_EQ(split->validation->size(), 3);
  EXPECT_THAT(Pixels(*split->train, {0, 6}), ElementsAre(0, 6));
  EXPECT_THAT(Pixels(*split->validation, {0, 1, 2}), ElementsAre(7, 8, 9));
}

TEST(HoldOutTailTest, TrainLimitKeepsTheFirstN) {
  auto base = std::make_shared<FakeDataset>(10);
  absl::StatusOr<Split> split = HoldOutTail(base, 3, 4);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->train->size(), 4);
  EXPECT_EQ(split->validation->size(), 3);
  EXPECT_THAT(Pixels(*split->validation, {0}), ElementsAre(7));

  absl::StatusOr<Split> too_many = HoldOutTail(base, 3, 8);
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(too_many.status().message(), HasSubstr("train subset 8"));
  EXPECT_FALSE(HoldOutTail(base, 11).ok());
  EXPECT_FALSE(HoldOutTail(base, -1).ok());
}

// --------------------------------------------------------- batching

TEST(EpochBatchesTest, SequentialWithoutShuffle) {
  const auto batches = EpochBatches(7, 3, false, 0, 0, false);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_THAT(batches[0], ElementsAre(0, 1, 2));
  EXPECT_THAT(batches[2], ElementsAre(6));
  EXPECT_EQ(EpochBatches(7, 3, false, 0, 0, true).size(), 2u);
}

TEST(EpochBatchesTest, ShuffleIsAPermutationFixedBySeedAndEpoch) {
  auto flat = [](const std::vector<std::vector<int64_t>>& batches) {
    std::vector<int64_t> all;
    for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
    return all;
  };
  const auto a = flat(EpochBatches(100, 16, true, 5, 0, false));
  EXPECT_EQ(a, flat(EpochBatches(100, 16, true, 5, 0, false)));
  EXPECT_NE(a, flat(EpochBatches(100, 16, true, 5, 1, false)));
  EXPECT_NE(a, flat(EpochBatches(100, 16, true, 6, 0, false)));
  std::vector<int64_t> sorted = a, expected(100);
  std::sort(sorted.begin(), sorted.end());
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(sorted, expected);
  std::vector<int64_t> identity(100);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(a, identity);
  EXPECT_NE(EpochSeed(5, 0), EpochSeed(5, 1));
  EXPECT_EQ(EpochSeed(5, 1), EpochSeed(5, 1));
}

// -------------------------------------------------------- prefetcher

class PrefetcherTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(PrefetcherTest, ReturnsEveryBatchInOrder) {
  const auto [threads, ahead] = GetParam();
  FakeDataset data(100);
  const auto batches = EpochBatches(100, 7, true, 11, 2, false);
  Prefetcher prefetcher(data, batches, /*train=*/true, 3, {threads, ahead});
  EXPECT_EQ(prefetcher.num_batches(), 15);
  for (size_t k = 0; k < batches.size(); ++k) {
    EXPECT_FALSE(prefetcher.done());
    absl::StatusOr<ImageBatch> batch = prefetcher.Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_EQ(batch->n, static_cast<int>(batches[k].size()));
    for (size_t i = 0; i < batches[k].size(); ++i) {
      EXPECT_EQ(batch->pixels[i], batches[k][i] + 0.5f + 3000);
      EXPECT_EQ(batch->labels[i], batches[k][i] % 10);
    }
  }
  EXPECT_TRUE(prefetcher.done());
  EXPECT_EQ(prefetcher.Next().status().code(), absl::StatusCode::kOutOfRange);
}

INSTANTIATE_TEST_SUITE_P(ThreadsAndAhead, PrefetcherTest,
                         ::testing::Values(std::pair{1, 1}, std::pair{2, 3},
                                           std::pair{4, 2}, std::pair{8, 16}));

TEST(PrefetcherErrorTest, WorkerErrorReachesTheConsumerInPlace) {
  FakeDataset data(40, /*fail_at=*/23);
  const auto batches = EpochBatches(40, 5, false, 0, 0, false);
  Prefetcher prefetcher(data, batches, false, 0, {3, 3});
  for (int k = 0; k < 4; ++k) {
    absl::StatusOr<ImageBatch> batch = prefetcher.Next();
    ASSERT_TRUE(batch.ok()) << "batch " << k << ": " << batch.status();
    EXPECT_EQ(batch->pixels[0], 5 * k);
  }
  absl::StatusOr<ImageBatch> failed = prefetcher.Next();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(failed.status().message(), HasSubstr("batch 4"));
  EXPECT_THAT(failed.status().message(), HasSubstr("example 23 is bad"));
  EXPECT_TRUE(prefetcher.done());
  EXPECT_EQ(prefetcher.Next().status(), failed.status());
}

TEST(PrefetcherBoundTest, NeverFillsMoreThanAheadBeyondTheConsumer) {
  constexpr int kAhead = 2;
  FakeDataset data(60);
  std::atomic<int64_t> taken{0};
  std::atomic<int64_t> violations{0};
  // Batch k (indices 3k..3k+2) may start only while fewer than kAhead batches
  // are claimed and not yet returned; Next() counts its own batch returned
  // before `taken` catches up, hence the + 1.
  data.on_fill_ = [&](std::span<const int64_t> indices) {
    const int64_t k = indices[0] / 3;
    if (k >= taken.load() + kAhead + 1) ++violations;
  };
  Prefetcher prefetcher(data, EpochBatches(60, 3, false, 0, 0, false), false, 0,
                        {4, kAhead});
  while (!prefetcher.done()) {
    ASSERT_TRUE(prefetcher.Next().ok());
    ++taken;
  }
  EXPECT_EQ(taken.load(), 20);
  EXPECT_EQ(violations.load(), 0);
}

// Destroys `prefetcher` on a thread of its own and returns whether that
// finished within `limit`, so that a destructor that never joins its workers
// fails the test in seconds instead of hanging it until ctest's timeout. The
// thread owns what it destroys (`data` too), so that a hung one, left behind,
// touches nothing of the returning test.
bool DestroyedWithin(std::shared_ptr<const FakeDataset> data,
                     std::unique_ptr<Prefetcher> prefetcher,
                     std::chrono::seconds limit) {
  auto destroyed = std::make_shared<std::promise<void>>();
  std::future<void> done = destroyed->get_future();
  std::thread([data = std::move(data), prefetcher = std::move(prefetcher),
               destroyed]() mutable {
    prefetcher.reset();
    destroyed->set_value();
  }).detach();
  return done.wait_for(limit) == std::future_status::ready;
}

TEST(PrefetcherLifetimeTest, DestroyingMidEpochStopsTheWorkers) {
  constexpr std::chrono::seconds kLimit{30};
  auto data = std::make_shared<const FakeDataset>(1000);
  auto prefetcher = std::make_unique<Prefetcher>(
      *data, EpochBatches(1000, 4, true, 1, 0, false), true, 0,
      PrefetchOptions{4, 4});
  ASSERT_TRUE(prefetcher->Next().ok());
  ASSERT_TRUE(prefetcher->Next().ok());
  // The workers wait for room four batches ahead: only the destructor's stop
  // ends them.
  EXPECT_TRUE(DestroyedWithin(data, std::move(prefetcher), kLimit))
      << "destroying a prefetcher mid-epoch did not join its workers within "
      << kLimit.count() << " s";
  auto never_read = std::make_unique<Prefetcher>(
      *data, EpochBatches(1000, 4, false, 0, 0, false), false, 0);
  EXPECT_TRUE(DestroyedWithin(data, std::move(never_read), kLimit))
      << "destroying a prefetcher never read did not join its workers within "
      << kLimit.count() << " s";
}

TEST(PrefetcherLifetimeTest, NoBatchesIsAnEmptyEpoch) {
  FakeDataset data(0);
  Prefetcher prefetcher(data, {}, false, 0);
  EXPECT_TRUE(prefetcher.done());
  EXPECT_EQ(prefetcher.Next().status().code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace hypertune::data
