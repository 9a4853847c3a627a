// The training loop: resume from a checkpoint reproduces an uninterrupted
// run bit for bit, divergence is reported, callbacks can stop the run.
#include "trainer_sdk/trainer/trainer.h"

#include <unistd.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trainer_sdk/trainer/rng.h"

namespace hypertune::train {
namespace {

// 2 x 8 x 8 images in 3 classes (a bright 3x3 square in a class-specific
// place plus noise), a pure function of the index; training adds a
// (seed, index)-dependent brightness jitter, like a real augmentation.
class SquaresDataset : public data::Dataset {
 public:
  explicit SquaresDataset(int64_t size) : size_(size) {}
  int64_t size() const override { return size_; }
  int channels() const override { return 2; }
  int height() const override { return 8; }
  int width() const override { return 8; }
  int num_classes() const override { return 3; }
  absl::Status Fill(std::span<const int64_t> indices, bool train, uint64_t seed,
                    data::ImageBatch& out) const override {
    out.n = int(indices.size());
    out.channels = 2;
    out.height = 8;
    out.width = 8;
    out.pixels.assign(indices.size() * 128, 0.0f);
    out.labels.resize(indices.size());
    for (size_t i = 0; i < indices.size(); ++i) {
      const int64_t index = indices[i];
      if (index < 0 || index >= size_)
        return absl::InvalidArgumentError("index out of range");
      Rng rng(uint64_t(index) * 7919 + 1);
      const int label = int(index % 3);
      out.labels[i] = label;
      const float jitter =
          train ? float(0.2 * Rng(seed ^ uint64_t(index)).Normal()) : 0.0f;
      float* img = out.pixels.data() + i * 128;
      for (int p = 0; p < 128; ++p) img[p] = float(0.5 * rng.Normal()) + jitter;
      const int y0 = 1 + 2 * label, x0 = 4 - label;
      for (int c = 0; c < 2; ++c)
        for (int y = y0; y < y0 + 3; ++y)
          for (int x = x0; x < x0 + 3; ++x) img[c * 64 + y * 8 + x] += 1.5f;
    }
    return absl::OkStatus();
  }

 private:
  int64_t size_;
};

TrainOptions SmallOptions(int epochs) {
  TrainOptions o;
  o.model.width = 4;
  o.model.depth = 1;
  o.model.stages = 2;
  o.epochs = epochs;
  o.batch_size = 16;
  o.eval_batch_size = 32;
  o.lr = 0.05;
  o.warmup_epochs = 0.5;
  o.seed = 42;
  o.prefetch = {2, 2};
  return o;
}

struct RunLog {
  TrainResult result;
  std::vector<EpochReport> epochs;
  std::vector<Checkpoint> checkpoints;
};

RunLog TrainFor(const TrainOptions& options, const Checkpoint* resume) {
  SquaresDataset train(96), validation(48);
  auto backend = MakeCpuBackend({.threads = 2});
  RunLog run;
  TrainCallbacks callbacks;
  callbacks.on_epoch = [&](const EpochReport& r) {
    run.epochs.push_back(r);
    return true;
  };
  callbacks.on_checkpoint = [&](const Checkpoint& c) {
    run.checkpoints.push_back(c);
    return absl::OkStatus();
  };
  absl::StatusOr<TrainResult> result =
      Train(options, *backend, train, validation, resume, callbacks);
  EXPECT_TRUE(result.ok()) << result.status();
  if (result.ok()) run.result = *result;
  return run;
}

TEST(TrainerTest, ResumeReproducesAnUninterruptedRun) {
  const RunLog straight = TrainFor(SmallOptions(3), nullptr);
  ASSERT_EQ(straight.epochs.size(), 3u);
  ASSERT_EQ(straight.checkpoints.size(), 3u);
  EXPECT_EQ(straight.result.outcome, TrainResult::Outcome::kCompleted);

  // Stop after the first epoch, save to disk, resume in a fresh model.
  TrainOptions first_leg = SmallOptions(3);
  SquaresDataset train(96), validation(48);
  auto backend = MakeCpuBackend({.threads = 1});  // any thread count
  TrainCallbacks stop_after_one;
  const std::string path = ::testing::TempDir() + "/trainer_test_resume-" +
                           std::to_string(getpid()) + ".ckpt";
  stop_after_one.on_checkpoint = [&](const Checkpoint& c) {
    return WriteCheckpoint(path, c).empty() ? absl::OkStatus()
                                            : absl::InternalError("write");
  };
  stop_after_one.on_epoch = [](const EpochReport&) { return false; };
  absl::StatusOr<TrainResult> stopped =
      Train(first_leg, *backend, train, validation, nullptr, stop_after_one);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->outcome, TrainResult::Outcome::kStopped);
  EXPECT_EQ(stopped->epochs_completed, 1);

  Checkpoint saved;
  ASSERT_EQ(ReadCheckpoint(path, saved), "");
  EXPECT_EQ(saved.epoch, 1);
  const RunLog resumed = TrainFor(SmallOptions(3), &saved);
  ASSERT_EQ(resumed.epochs.size(), 2u);
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(resumed.epochs[e].epoch, straight.epochs[e + 1].epoch);
    EXPECT_EQ(resumed.epochs[e].train_loss, straight.epochs[e + 1].train_loss);
    EXPECT_EQ(resumed.epochs[e].val_loss, straight.epochs[e + 1].val_loss);
    EXPECT_EQ(resumed.epochs[e].val_accuracy,
              straight.epochs[e + 1].val_accuracy);
  }
  EXPECT_EQ(resumed.checkpoints.back().parameters,
            straight.checkpoints.back().parameters);
  EXPECT_EQ(resumed.checkpoints.back().velocity,
            straight.checkpoints.back().velocity);
  EXPECT_EQ(resumed.checkpoints.back().running_stats,
            straight.checkpoints.back().running_stats);
  EXPECT_EQ(resumed.checkpoints.back().step, straight.checkpoints.back().step);
}

TEST(TrainerTest, LearnsTheTask) {
  const RunLog run = TrainFor(SmallOptions(4), nullptr);
  ASSERT_EQ(run.epochs.size(), 4u);
  EXPECT_LT(run.epochs.back().train_loss, run.epochs.front().train_loss);
  EXPECT_GE(run.epochs.back().val_accuracy, 0.9);
  EXPECT_EQ(run.result.images, 4 * 96);
  EXPECT_GT(run.result.images_per_second, 0.0);
}

TEST(TrainerTest, ReportsDivergence) {
  TrainOptions options = SmallOptions(2);
  options.lr = 1e30;
  options.warmup_epochs = 0;
  const RunLog run = TrainFor(options, nullptr);
  EXPECT_EQ(run.result.outcome, TrainResult::Outcome::kDiverged);
  EXPECT_NE(run.result.reason.find("loss is"), std::string::npos)
      << run.result.reason;
  EXPECT_TRUE(run.checkpoints.empty());
}

TEST(TrainerTest, RejectsInvalidOptions) {
  SquaresDataset train(96), validation(48);
  auto backend = MakeCpuBackend({.threads = 1});
  TrainOptions options = SmallOptions(2);
  options.momentum = 1.5;
  absl::StatusOr<TrainResult> result =
      Train(options, *backend, train, validation, nullptr, {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("momentum"), std::string::npos);
  options = SmallOptions(2);
  options.batch_size = 200;
  EXPECT_EQ(
      Train(options, *backend, train, validation, nullptr, {}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hypertune::train
