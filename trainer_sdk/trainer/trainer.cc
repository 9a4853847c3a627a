#include "trainer_sdk/trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "trainer_sdk/trainer/schedule.h"

namespace hypertune::train {
namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// Index batches 0.. of `size` in order, for evaluation.
std::vector<std::vector<int64_t>> InOrder(int64_t size, int batch_size) {
  return data::EpochBatches(size, batch_size, /*shuffle=*/false, 0, 0,
                            /*drop_last=*/false);
}

}  // namespace

std::string ValidateTrainOptions(const TrainOptions& o) {
  if (o.epochs < 1) return absl::StrCat("epochs: must be >= 1, got ", o.epochs);
  if (o.batch_size < 2)
    return absl::StrCat("batch_size: must be >= 2, got ", o.batch_size);
  if (o.eval_batch_size < 1) {
    return absl::StrCat("eval_batch_size: must be >= 1, got ",
                        o.eval_batch_size);
  }
  if (!(o.lr > 0) || !std::isfinite(o.lr))
    return absl::StrCat("lr: must be > 0, got ", o.lr);
  if (!(o.momentum >= 0 && o.momentum < 1)) {
    return absl::StrCat("momentum: must be in [0, 1), got ", o.momentum);
  }
  if (!(o.weight_decay >= 0)) {
    return absl::StrCat("weight_decay: must be >= 0, got ", o.weight_decay);
  }
  if (!(o.label_smoothing >= 0 && o.label_smoothing < 1)) {
    return absl::StrCat("label_smoothing: must be in [0, 1), got ",
                        o.label_smoothing);
  }
  if (!(o.warmup_epochs >= 0 && o.warmup_epochs <= o.epochs)) {
    return absl::StrCat("warmup: must be in [0, epochs], got ",
                        o.warmup_epochs);
  }
  return "";
}

absl::StatusOr<EvalStats> EvaluateDataset(
    Model& model, const data::Dataset& dataset, int batch_size,
    const data::PrefetchOptions& prefetch) {
  batch_size = std::min(batch_size, model.max_batch());
  data::Prefetcher batches(dataset, InOrder(dataset.size(), batch_size),
                           /*train=*/false, 0, prefetch);
  EvalStats total;
  while (!batches.done()) {
    absl::StatusOr<data::ImageBatch> batch = batches.Next();
    if (absl::IsOutOfRange(batch.status())) break;
    if (!batch.ok()) return batch.status();
    EvalStats s =
        model.Evaluate(batch->pixels.data(), batch->labels.data(), batch->n);
    total.loss_sum += s.loss_sum;
    total.correct += s.correct;
    total.count += s.count;
  }
  return total;
}

absl::StatusOr<TrainResult> Train(const TrainOptions& options, Backend& backend,
                                  const data::Dataset& train,
                                  const data::Dataset& validation,
                                  const Checkpoint* resume,
                                  const TrainCallbacks& callbacks,
                                  std::unique_ptr<Model>* trained) {
  std::string invalid = ValidateTrainOptions(options);
  if (!invalid.empty()) return absl::InvalidArgumentError(invalid);
  if (train.size() < options.batch_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_size: ", options.batch_size, " exceeds the training set (",
        train.size(), " examples)"));
  }
  if (validation.size() < 1)
    return absl::InvalidArgumentError("validation set is empty");
  ModelConfig config = options.model;
  config.in_channels = train.channels();
  config.in_height = train.height();
  config.in_width = train.width();
  config.num_classes = train.num_classes();
  const int max_batch = std::max(options.batch_size, options.eval_batch_size);
  std::string error;
  std::unique_ptr<Model> model =
      Model::Create(config, max_batch, options.seed, &backend, &error);
  if (model == nullptr) {
    if (!backend.error().empty()) {
      TrainResult failed;
      failed.outcome = TrainResult::Outcome::kDeviceError;
      failed.reason = error;
      return failed;
    }
    return absl::InvalidArgumentError(error);
  }
  int64_t epoch = 0, step = 0;
  uint64_t seed = options.seed;
  if (resume != nullptr) {
    std::string problem = RestoreModel(*resume, *model);
    if (!problem.empty()) return absl::FailedPreconditionError(problem);
    epoch = resume->epoch;
    step = resume->step;
    seed = resume->seed;
  }

  const int64_t steps_per_epoch =
      StepsPerEpoch(train.size(), options.batch_size);
  Schedule schedule;
  schedule.lr = options.lr;
  schedule.total_steps = steps_per_epoch * options.epochs;
  schedule.warmup_steps = std::llround(options.warmup_epochs * steps_per_epoch);
  SgdStep sgd;
  sgd.momentum = float(options.momentum);
  sgd.weight_decay = float(options.weight_decay);
  sgd.nesterov = options.nesterov;

  TrainResult result;
  result.epochs_completed = epoch;
  const auto run_start = std::chrono::steady_clock::now();
  auto finish = [&](TrainResult::Outcome outcome, std::string reason) {
    result.outcome = outcome;
    result.reason = std::move(reason);
    result.train_seconds = Since(run_start);
    result.images_per_second =
        result.device_seconds > 0 ? result.images / result.device_seconds : 0.0;
    if (trained != nullptr) *trained = std::move(model);
    return result;
  };
  for (; epoch < options.epochs; ++epoch) {
    const auto epoch_start = std::chrono::steady_clock::now();
    data::Prefetcher batches(
        train,
        data::EpochBatches(train.size(), options.batch_size, /*shuffle=*/true,
                           seed, epoch, /*drop_last=*/true),
        /*train=*/true, data::EpochSeed(seed, epoch), options.prefetch);
    double loss_sum = 0.0;
    int64_t correct = 0, seen = 0;
    EpochReport report;
    while (!batches.done()) {
      absl::StatusOr<data::ImageBatch> batch = batches.Next();
      if (absl::IsOutOfRange(batch.status())) break;
      if (!batch.ok()) return batch.status();
      sgd.lr = float(LearningRate(schedule, step));
      report.lr = sgd.lr;
      const auto step_start = std::chrono::steady_clock::now();
      StepStats s =
          model->TrainStep(batch->pixels.data(), batch->labels.data(), batch->n,
                           float(options.label_smoothing), sgd);
      result.device_seconds += Since(step_start);
      ++step;
      if (!backend.error().empty()) {
        return finish(TrainResult::Outcome::kDeviceError, backend.error());
      }
      if (!std::isfinite(s.loss)) {
        return finish(TrainResult::Outcome::kDiverged,
                      absl::StrCat("training loss is ", s.loss, " at epoch ",
                                   epoch + 1, " step ", step));
      }
      loss_sum += s.loss * batch->n;
      correct += s.correct;
      seen += batch->n;
      result.images += batch->n;
    }
    absl::StatusOr<EvalStats> val = EvaluateDataset(
        *model, validation, options.eval_batch_size, options.prefetch);
    if (!val.ok()) return val.status();
    if (!backend.error().empty()) {
      return finish(TrainResult::Outcome::kDeviceError, backend.error());
    }
    report.epoch = epoch + 1;
    report.train_loss = seen > 0 ? loss_sum / seen : 0.0;
    report.train_accuracy = seen > 0 ? double(correct) / seen : 0.0;
    report.val_loss = val->loss_sum / val->count;
    report.val_accuracy = double(val->correct) / val->count;
    report.seconds = Since(epoch_start);
    result.last = report;
    result.epochs_completed = epoch + 1;
    if (!std::isfinite(report.val_loss)) {
      return finish(TrainResult::Outcome::kDiverged,
                    absl::StrCat("validation loss is ", report.val_loss,
                                 " after epoch ", epoch + 1));
    }
    if (callbacks.on_checkpoint) {
      Checkpoint checkpoint;
      CaptureModel(*model, checkpoint);
      checkpoint.epoch = epoch + 1;
      checkpoint.step = step;
      checkpoint.seed = seed;
      checkpoint.metadata["val_accuracy"] = report.val_accuracy;
      checkpoint.metadata["val_loss"] = report.val_loss;
      absl::Status saved = callbacks.on_checkpoint(checkpoint);
      if (!saved.ok()) return saved;
    }
    if (callbacks.on_epoch && !callbacks.on_epoch(report)) {
      ++epoch;
      return finish(TrainResult::Outcome::kStopped, "stopped by the caller");
    }
  }
  return finish(TrainResult::Outcome::kCompleted, "");
}

}  // namespace hypertune::train
