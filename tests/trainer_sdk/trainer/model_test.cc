// The ResNet end to end on the CPU backend: backprop against finite
// differences, determinism across thread counts, learning a separable task,
// and the checkpoint format.
#include "trainer_sdk/trainer/model.h"

#include <unistd.h>

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trainer_sdk/trainer/backend.h"
#include "trainer_sdk/trainer/checkpoint.h"
#include "trainer_sdk/trainer/rng.h"

namespace hypertune::train {
namespace {

ModelConfig Tiny(bool imagenet_stem) {
  ModelConfig c;
  c.in_channels = 2;
  c.in_height = imagenet_stem ? 16 : 6;
  c.in_width = imagenet_stem ? 16 : 6;
  c.num_classes = 3;
  c.width = 3;
  c.depth = 2;
  c.stages = 2;
  c.imagenet_stem = imagenet_stem;
  return c;
}

struct Batch {
  std::vector<float> images;
  std::vector<int32_t> labels;
};

Batch RandomBatch(const ModelConfig& c, int n, uint64_t seed) {
  Rng rng(seed);
  Batch b;
  b.images.resize(size_t(n) * c.in_channels * c.in_height * c.in_width);
  for (float& x : b.images) x = float(rng.Normal());
  for (int i = 0; i < n; ++i)
    b.labels.push_back(int32_t(rng.Next() % c.num_classes));
  return b;
}

class GradientTest : public ::testing::TestWithParam<bool> {};

// Directional derivative: (L(w + h v) - L(w - h v)) / 2h against g . v.
// Tiny batches make batch norm and the ReLUs far from smooth, so h is small
// (float rounding of the loss stays ~1e-3 of the difference) and the bound
// loose; per-op gradients are checked tightly in ops_test.cc.
TEST_P(GradientTest, BackpropMatchesFiniteDifferences) {
  auto backend = MakeCpuBackend({.threads = 2});
  const ModelConfig config = Tiny(GetParam());
  std::string error;
  auto model = Model::Create(config, 4, 3, backend.get(), &error);
  ASSERT_NE(model, nullptr) << error;
  const Batch batch = RandomBatch(config, 4, 5);
  const std::vector<float> w = model->Read(ModelArray::kParameters);
  model->ComputeGradients(batch.images.data(), batch.labels.data(), 4, 0.1f);
  const std::vector<float> g = model->Read(ModelArray::kGradients);
  for (uint64_t direction = 0; direction < 3; ++direction) {
    Rng rng(100 + direction);
    std::vector<float> v(w.size());
    double g_dot_v = 0.0;
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = float(rng.Normal());
      g_dot_v += double(g[i]) * v[i];
    }
    const double h = 1e-4;
    auto loss_at = [&](double t) {
      std::vector<float> moved(w.size());
      for (size_t i = 0; i < w.size(); ++i) moved[i] = w[i] + float(t) * v[i];
      model->Write(ModelArray::kParameters, moved);
      return model
          ->ComputeGradients(batch.images.data(), batch.labels.data(), 4, 0.1f)
          .loss;
    };
    const double numeric = (loss_at(h) - loss_at(-h)) / (2 * h);
    EXPECT_NEAR(numeric, g_dot_v, 1e-2 + 5e-2 * std::abs(g_dot_v))
        << "direction " << direction;
  }
}

INSTANTIATE_TEST_SUITE_P(Stems, GradientTest, ::testing::Bool());

TEST(ModelTest, BitIdenticalAcrossThreadCounts) {
  const ModelConfig config = Tiny(false);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    auto backend = MakeCpuBackend({.threads = threads});
    std::string error;
    auto model = Model::Create(config, 9, 7, backend.get(), &error);
    ASSERT_NE(model, nullptr) << error;
    for (int step = 0; step < 3; ++step) {
      const Batch b = RandomBatch(config, 9, 20 + step);
      model->TrainStep(b.images.data(), b.labels.data(), 9, 0.1f,
                       SgdStep{0.05f, 0.9f, 5e-4f, true});
    }
    std::vector<float> state = model->Read(ModelArray::kParameters);
    std::vector<float> stats = model->Read(ModelArray::kRunningStats);
    state.insert(state.end(), stats.begin(), stats.end());
    results.push_back(state);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(ModelTest, WeightDecaySkipsNormAndBias) {
  auto backend = MakeCpuBackend({.threads = 1});
  std::string error;
  auto model = Model::Create(Tiny(false), 2, 1, backend.get(), &error);
  ASSERT_NE(model, nullptr) << error;
  const std::vector<float> before = model->Read(ModelArray::kParameters);
  // Zero gradients: only weight decay moves parameters.
  model->Write(ModelArray::kGradients, std::vector<float>(before.size(), 0.0f));
  model->ApplySgd(SgdStep{0.1f, 0.0f, 0.5f, false});
  const std::vector<float> after = model->Read(ModelArray::kParameters);
  for (size_t i = 0; i < before.size(); ++i) {
    if (i < model->decayed_size()) {
      EXPECT_FLOAT_EQ(after[i], before[i] * 0.95f) << i;
    } else {
      EXPECT_EQ(after[i], before[i]) << i;
    }
  }
  // Gammas (1) are in the plain region, and nothing there is a conv weight.
  EXPECT_GT(before.size(), model->decayed_size());
}

// Three classes, each a bright square in its own corner, plus noise.
Batch Separable(const ModelConfig& c, int n, uint64_t seed) {
  Rng rng(seed);
  Batch b;
  b.images.assign(size_t(n) * c.in_channels * c.in_height * c.in_width, 0.0f);
  for (int i = 0; i < n; ++i) {
    const int label = int(rng.Next() % 3);
    b.labels.push_back(label);
    for (int ch = 0; ch < c.in_channels; ++ch) {
      float* img = b.images.data() +
                   (size_t(i) * c.in_channels + ch) * c.in_height * c.in_width;
      for (int p = 0; p < c.in_height * c.in_width; ++p)
        img[p] = float(0.3 * rng.Normal());
      const int y0 = label == 0 ? 0 : c.in_height - 2,
                x0 = label == 1 ? 0 : c.in_width - 2;
      for (int y = y0; y < y0 + 2; ++y)
        for (int x = x0; x < x0 + 2; ++x) img[y * c.in_width + x] += 2.0f;
    }
  }
  return b;
}

TEST(ModelTest, LearnsSeparableData) {
  auto backend = MakeCpuBackend({.threads = 2});
  const ModelConfig config = Tiny(false);
  std::string error;
  auto model = Model::Create(config, 32, 11, backend.get(), &error);
  ASSERT_NE(model, nullptr) << error;
  const Batch test = Separable(config, 32, 999);
  const EvalStats before =
      model->Evaluate(test.images.data(), test.labels.data(), 32);
  for (int step = 0; step < 60; ++step) {
    const Batch b = Separable(config, 32, step);
    StepStats s = model->TrainStep(b.images.data(), b.labels.data(), 32, 0.0f,
                                   SgdStep{0.05f, 0.9f, 0.0f, true});
    ASSERT_TRUE(std::isfinite(s.loss));
  }
  const EvalStats after =
      model->Evaluate(test.images.data(), test.labels.data(), 32);
  EXPECT_LT(after.loss_sum, 0.3 * before.loss_sum);
  EXPECT_GE(after.correct, 30);
}

TEST(CheckpointTest, RoundTripAndCorruption) {
  Checkpoint c;
  c.config = Tiny(true);
  c.epoch = 3;
  c.step = 1234;
  c.seed = 0xDEADBEEFCAFEull;
  c.parameters = {1.5f, -2.0f, 3.25f};
  c.velocity = {0.0f, 1e-30f, -7.0f};
  c.running_stats = {0.5f};
  c.metadata = {{"val_accuracy", 0.91}, {"lr", 0.1}};
  const std::string path = ::testing::TempDir() + "/train_model_test-" +
                           std::to_string(getpid()) + ".ckpt";
  ASSERT_EQ(WriteCheckpoint(path, c), "");
  Checkpoint read;
  ASSERT_EQ(ReadCheckpoint(path, read), "");
  EXPECT_EQ(read.config, c.config);
  EXPECT_EQ(read.epoch, 3);
  EXPECT_EQ(read.step, 1234);
  EXPECT_EQ(read.seed, c.seed);
  EXPECT_EQ(read.parameters, c.parameters);
  EXPECT_EQ(read.velocity, c.velocity);
  EXPECT_EQ(read.running_stats, c.running_stats);
  EXPECT_EQ(read.metadata, c.metadata);

  std::string bytes = EncodeCheckpoint(c);
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 1;
  EXPECT_NE(DecodeCheckpoint(flipped, read).find("checksum"),
            std::string::npos);
  EXPECT_NE(DecodeCheckpoint(bytes.substr(0, bytes.size() - 3), read), "");
  EXPECT_NE(DecodeCheckpoint("not a checkpoint at all", read).find("magic"),
            std::string::npos);
  EXPECT_NE(ReadCheckpoint(path + ".missing", read), "");
}

TEST(CheckpointTest, RestoreRefusesAnotherConfig) {
  auto backend = MakeCpuBackend({.threads = 1});
  std::string error;
  auto small = Model::Create(Tiny(false), 2, 1, backend.get(), &error);
  ModelConfig wider = Tiny(false);
  wider.width = 4;
  auto wide = Model::Create(wider, 2, 1, backend.get(), &error);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(wide, nullptr);
  Checkpoint c;
  CaptureModel(*small, c);
  EXPECT_NE(RestoreModel(c, *wide), "");
  EXPECT_EQ(RestoreModel(c, *small), "");
}

TEST(ModelTest, RejectsInvalidConfig) {
  auto backend = MakeCpuBackend({.threads = 1});
  std::string error;
  ModelConfig c = Tiny(false);
  c.width = 0;
  EXPECT_EQ(Model::Create(c, 2, 1, backend.get(), &error), nullptr);
  EXPECT_EQ(error, "width: must be >= 1, got 0");
  std::string device_error;
  EXPECT_EQ(MakeBackend("tpu", {}, &device_error), nullptr);
  EXPECT_NE(device_error.find("tpu"), std::string::npos);
}

}  // namespace
}  // namespace hypertune::train
