// Prefetcher: fills one epoch's batches on a pool of threads, a bounded
// number ahead of the consumer, and hands them out strictly in order.
//
// Batch k is Fill(batches[k], train, seed) on the dataset; the result does not
// depend on the thread count or on timing. The first error a worker meets is
// returned by Next() in place of the batch that failed (earlier batches still
// come out first); after it, Next() keeps returning that error. The destructor
// stops the workers (waiting for fills in flight) and joins them.
//
// Thread safety: Next() and done() are for one consumer thread; the dataset
// is shared read-only with the workers and must outlive the Prefetcher.
#ifndef HYPERTUNE_TRAINER_SDK_TRAINER_DATA_PREFETCHER_H_
#define HYPERTUNE_TRAINER_SDK_TRAINER_DATA_PREFETCHER_H_

#include <cstdint>
#include <map>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "trainer_sdk/trainer/data/dataset.h"

namespace hypertune::data {

struct PrefetchOptions {
  int threads = 2;  // worker threads filling batches (at least 1)
  int ahead = 3;    // batches filled but not yet taken, at most (at least 1)
};

class Prefetcher {
 public:
  // Starts the workers. REQUIRES: `dataset` outlives this object.
  Prefetcher(const Dataset& dataset, std::vector<std::vector<int64_t>> batches,
             bool train, uint64_t seed, const PrefetchOptions& options = {});
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Returns the next batch in order, blocking until it is filled; the
  // worker's error for a batch that failed; OUT_OF_RANGE once every batch has
  // been returned (the end of the epoch).
  absl::StatusOr<ImageBatch> Next();

  // True once every batch has been returned (or an error was).
  bool done() const;

  int64_t num_batches() const { return static_cast<int64_t>(batches_.size()); }

 private:
  void Work();

  const Dataset& dataset_;
  const std::vector<std::vector<int64_t>> batches_;
  const bool train_;
  const uint64_t seed_;
  const int ahead_;

  mutable absl::Mutex mu_;
  int64_t next_to_claim_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_to_return_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, absl::StatusOr<ImageBatch>> ready_ ABSL_GUARDED_BY(mu_);
  bool failed_ ABSL_GUARDED_BY(mu_) = false;  // a worker hit an error
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // returned once failed and drained
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

// The augmentation seed for one epoch of a run: Fill() draws from
// (seed, example index), so without it every epoch would repeat its crops.
uint64_t EpochSeed(uint64_t seed, int64_t epoch);

// One epoch's index batches over [0, size): a permutation drawn from
// (seed, epoch) when `shuffle`, else 0, 1, 2, ...; cut into batches of
// batch_size, the last one short unless `drop_last`. REQUIRES: batch_size > 0.
std::vector<std::vector<int64_t>> EpochBatches(int64_t size, int batch_size,
                                               bool shuffle, uint64_t seed,
                                               int64_t epoch, bool drop_last);

}  // namespace hypertune::data

#endif  // HYPERTUNE_TRAINER_SDK_TRAINER_DATA_PREFETCHER_H_
