#include "trainer_sdk/trainer/data/prefetcher.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "trainer_sdk/trainer/data/augment.h"

namespace hypertune::data {

Prefetcher::Prefetcher(const Dataset& dataset,
                       std::vector<std::vector<int64_t>> batches, bool train,
                       uint64_t seed, const PrefetchOptions& options)
    : dataset_(dataset),
      batches_(std::move(batches)),
      train_(train),
      seed_(seed),
      ahead_(std::max(1, options.ahead)) {
  const int64_t threads =
      std::min<int64_t>({std::max(1, options.threads), ahead_, num_batches()});
  workers_.reserve(threads);
  for (int64_t t = 0; t < threads; ++t)
    workers_.emplace_back([this] { Work(); });
}

Prefetcher::~Prefetcher() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
}

void Prefetcher::Work() {
  const int64_t total = num_batches();
  while (true) {
    int64_t k = 0;
    {
      absl::MutexLock lock(&mu_);
      // Claims go in batch order, so every batch before a failed one is
      // claimed and will be delivered.
      auto may_claim = [this, total]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || failed_ || next_to_claim_ >= total ||
               next_to_claim_ < next_to_return_ + ahead_;
      };
      mu_.Await(absl::Condition(&may_claim));
      if (stopping_ || failed_ || next_to_claim_ >= total) return;
      k = next_to_claim_++;
    }
    ImageBatch batch;
    absl::Status status = dataset_.Fill(batches_[k], train_, seed_, batch);
    absl::MutexLock lock(&mu_);
    if (status.ok()) {
      ready_.emplace(k, std::move(batch));
    } else {
      failed_ = true;
      ready_.emplace(
          k, absl::Status(status.code(),
                          absl::StrCat("batch ", k, ": ", status.message())));
    }
  }
}

absl::StatusOr<ImageBatch> Prefetcher::Next() {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  if (next_to_return_ >= num_batches()) {
    return absl::OutOfRangeError(absl::StrCat(
        "end of epoch: all ", num_batches(), " batches were returned"));
  }
  auto is_ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ready_.contains(next_to_return_);
  };
  mu_.Await(absl::Condition(&is_ready));
  auto node = ready_.extract(next_to_return_);
  ++next_to_return_;
  if (!node.mapped().ok()) error_ = node.mapped().status();
  return std::move(node.mapped());
}

bool Prefetcher::done() const {
  absl::MutexLock lock(&mu_);
  return !error_.ok() || next_to_return_ >= num_batches();
}

uint64_t EpochSeed(uint64_t seed, int64_t epoch) {
  return SplitMix64(SplitMix64(seed) + static_cast<uint64_t>(epoch));
}

std::vector<std::vector<int64_t>> EpochBatches(int64_t size, int batch_size,
                                               bool shuffle, uint64_t seed,
                                               int64_t epoch, bool drop_last) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(size, 0)));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (shuffle) {
    // A stream apart from the per-example augmentation streams of `seed`.
    ExampleRng rng(SplitMix64(seed ^ 0x73687566666c65ULL),
                   static_cast<uint64_t>(epoch));
    for (int64_t i = size - 1; i > 0; --i) {
      std::swap(order[i], order[rng.UniformInt(i + 1)]);
    }
  }
  std::vector<std::vector<int64_t>> batches;
  for (int64_t begin = 0; begin < size; begin += batch_size) {
    const int64_t end = std::min<int64_t>(begin + batch_size, size);
    if (drop_last && end - begin < batch_size) break;
    batches.emplace_back(order.begin() + begin, order.begin() + end);
  }
  return batches;
}

}  // namespace hypertune::data
