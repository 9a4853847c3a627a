// Train: the reference trainer's epoch loop, a library function without the
// SDK. Each epoch draws its batch order and augmentation from (seed, epoch)
// (data::EpochBatches / data::EpochSeed), trains on full batches with SGD and
// the warmup + cosine schedule, evaluates on the validation set, hands a
// checkpoint to a callback and asks another whether to go on. A run resumed
// from the checkpoint of epoch e continues bit-identically (CPU backend) to
// a run that never stopped.
//
// Thread safety: Train runs on the calling thread (plus the prefetcher's
// workers and the backend's threads); callbacks are called on it.
#ifndef HYPERTUNE_TRAINER_SDK_TRAINER_TRAINER_H_
#define HYPERTUNE_TRAINER_SDK_TRAINER_TRAINER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer_sdk/trainer/backend.h"
#include "trainer_sdk/trainer/checkpoint.h"
#include "trainer_sdk/trainer/data/dataset.h"
#include "trainer_sdk/trainer/data/prefetcher.h"
#include "trainer_sdk/trainer/model.h"

namespace hypertune::train {

struct TrainOptions {
  // width, depth, stages, imagenet_stem; input shape and classes come from
  // the training set.
  ModelConfig model;
  int epochs = 5;
  int batch_size = 128;
  double lr = 0.1;
  double momentum = 0.9;
  bool nesterov = true;
  double weight_decay = 5e-4;  // conv and linear weights only
  double label_smoothing = 0.1;
  double warmup_epochs = 0.5;  // linear warmup, then cosine to 0
  uint64_t seed = 1;           // init, data order, augmentation
  int eval_batch_size = 256;
  data::PrefetchOptions prefetch = {1, 4};
};

// "" if valid, else what is wrong, e.g. "batch_size: must be >= 2, got 1".
std::string ValidateTrainOptions(const TrainOptions& options);

struct EpochReport {
  int64_t epoch = 0;  // epochs completed, 1-based
  double train_loss = 0.0;
  double train_accuracy = 0.0;
  double val_loss = 0.0;
  double val_accuracy = 0.0;
  double lr = 0.0;  // of the epoch's last step
  double seconds = 0.0;
};

struct TrainResult {
  enum class Outcome {
    kCompleted,    // every epoch ran
    kStopped,      // on_epoch asked to stop
    kDiverged,     // NaN or Inf loss
    kDeviceError,  // the backend failed (e.g. CUDA out of memory)
  };
  Outcome outcome = Outcome::kCompleted;
  std::string reason;  // for kDiverged / kDeviceError
  int64_t epochs_completed = 0;
  EpochReport last;                // the last finished epoch (epoch 0 if none)
  int64_t images = 0;              // trained in this run
  double train_seconds = 0.0;      // wall time of this run's epochs
  double device_seconds = 0.0;     // inside training steps (compute only)
  double images_per_second = 0.0;  // images / device_seconds
};

struct TrainCallbacks {
  // After each epoch's validation; return false to stop training.
  std::function<bool(const EpochReport&)> on_epoch;
  // The state after each epoch; an error ends the run with that error.
  std::function<absl::Status(const Checkpoint&)> on_checkpoint;
};

// Trains a fresh model (or continues `resume`, whose config must match)
// on `train`, validating on `validation` each epoch. Returns the outcome;
// an error status for invalid options, a data error, or a checkpoint that
// does not fit.
absl::StatusOr<TrainResult> Train(const TrainOptions& options, Backend& backend,
                                  const data::Dataset& train,
                                  const data::Dataset& validation,
                                  const Checkpoint* resume,
                                  const TrainCallbacks& callbacks,
                                  std::unique_ptr<Model>* trained = nullptr);

// Mean loss (no smoothing) and accuracy of `model` over all of `dataset`.
absl::StatusOr<EvalStats> EvaluateDataset(
    Model& model, const data::Dataset& dataset, int batch_size,
    const data::PrefetchOptions& prefetch = {1, 4});

}  // namespace hypertune::train

#endif  // HYPERTUNE_TRAINER_SDK_TRAINER_TRAINER_H_
