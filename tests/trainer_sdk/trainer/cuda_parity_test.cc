// Parity of the CUDA backend with the CPU reference: every Backend op
// against its ops.h twin on the same random inputs, then the first 10
// training-step losses of a small ResNet on both backends. Each comparison
// prints its worst mismatch; the bound is |gpu - cpu| <= atol + rtol*|cpu|
// with atol scaled by the RMS of the CPU result (so one tolerance fits
// tensors of any magnitude). Runs in four modes: fp32 and mixed precision,
// each with the default convolutions (cuDNN where built) and with
// HYPERTUNE_CUDA_CONV=im2col. Without a CUDA device every test is skipped.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trainer_sdk/trainer/backend.h"
#include "trainer_sdk/trainer/model.h"
#include "trainer_sdk/trainer/ops.h"
#include "trainer_sdk/trainer/rng.h"

namespace hypertune::train {
namespace {

bool HaveCudaDevice() {
  int count = 0;
  const bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();
  return ok;
}

struct Tolerance {
  double atol;  // times the RMS of the CPU values
  double rtol;
};

struct Mode {
  const char* name;
  bool mixed;
  bool im2col;
};

void PrintTo(const Mode& mode, std::ostream* os) { *os << mode.name; }

std::vector<float> Random(size_t n, uint64_t seed, double mean = 0.0,
                          double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = float(mean + scale * rng.Normal());
  return v;
}

// Asserts |gpu - cpu| <= atol * rms(cpu) + rtol * |cpu| elementwise and
// prints the worst mismatch (relative to its bound).
::testing::AssertionResult Near(const std::string& what,
                                const std::vector<float>& gpu,
                                const std::vector<float>& cpu, Tolerance tol) {
  if (gpu.size() != cpu.size()) {
    return ::testing::AssertionFailure()
           << what << ": sizes differ (" << gpu.size() << " vs " << cpu.size()
           << ")";
  }
  double sum_sq = 0.0;
  for (float c : cpu) sum_sq += double(c) * c;
  const double rms = cpu.empty() ? 0.0 : std::sqrt(sum_sq / cpu.size());
  const double atol = tol.atol * std::max(rms, 1e-6);
  size_t worst = 0, failures = 0;
  double worst_ratio = -1.0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double diff = std::fabs(double(gpu[i]) - cpu[i]);
    const double bound = atol + tol.rtol * std::fabs(cpu[i]);
    const double ratio = std::isfinite(diff) ? diff / bound : INFINITY;
    if (!(ratio <= 1.0)) ++failures;
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  char line[512];
  if (cpu.empty()) {
    std::snprintf(line, sizeof(line), "%s: no values", what.c_str());
  } else {
    std::snprintf(
        line, sizeof(line),
        "%s: %zu values, worst |gpu-cpu| = %.3g at [%zu] (gpu %.7g, cpu %.7g, "
        "bound %.3g = %.0f%% of it), %zu over the bound",
        what.c_str(), cpu.size(), std::fabs(double(gpu[worst]) - cpu[worst]),
        worst, gpu[worst], cpu[worst], atol + tol.rtol * std::fabs(cpu[worst]),
        100.0 * worst_ratio, failures);
  }
  std::printf("[parity] %s\n", line);
  if (failures > 0) return ::testing::AssertionFailure() << line;
  return ::testing::AssertionSuccess();
}

class CudaParityTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    if (!HaveCudaDevice()) GTEST_SKIP() << "no CUDA device";
    if (GetParam().im2col) {
      setenv("HYPERTUNE_CUDA_CONV", "im2col", 1);
    } else {
      unsetenv("HYPERTUNE_CUDA_CONV");
    }
    BackendOptions options;
    options.mixed_precision = GetParam().mixed;
    std::string error;
    gpu_ = MakeCudaBackend(options, &error);
    ASSERT_NE(gpu_, nullptr) << error;
  }
  void TearDown() override { unsetenv("HYPERTUNE_CUDA_CONV"); }

  // Products (convolutions, linear layers) run in reduced precision in
  // mixed mode; everything else is fp32 in both modes.
  Tolerance Product() const {
    return GetParam().mixed ? Tolerance{2e-2, 2e-2} : Tolerance{1e-4, 1e-3};
  }
  static Tolerance Exact() { return {1e-5, 1e-5}; }
  static Tolerance Elementwise() { return {1e-5, 1e-4}; }
  static Tolerance Reduction() { return {1e-4, 1e-3}; }

  template <typename T>
  DeviceArray<T> Upload(const std::vector<T>& host) {
    DeviceArray<T> d(gpu_.get(), host.size());
    EXPECT_TRUE(d.ok()) << gpu_->error();
    if (!host.empty())
      gpu_->CopyToDevice(d.data(), host.data(), sizeof(T) * host.size());
    return d;
  }
  DeviceArray<float> Buffer(size_t n) {
    DeviceArray<float> d(gpu_.get(), n);
    EXPECT_TRUE(d.ok()) << gpu_->error();
    return d;
  }
  template <typename T>
  std::vector<T> Download(const DeviceArray<T>& d) {
    std::vector<T> host(d.size());
    if (!host.empty())
      gpu_->CopyToHost(host.data(), d.data(), sizeof(T) * host.size());
    EXPECT_EQ(gpu_->error(), "");
    return host;
  }

  std::unique_ptr<Backend> gpu_;
};

std::string Describe(const ConvShape& s) {
  return "conv n" + std::to_string(s.n) + " " + std::to_string(s.in_c) + "x" +
         std::to_string(s.in_h) + "x" + std::to_string(s.in_w) + "->" +
         std::to_string(s.out_c) + " k" + std::to_string(s.kernel) + " s" +
         std::to_string(s.stride) + " p" + std::to_string(s.pad);
}

TEST_P(CudaParityTest, Conv2dForwardAndBackward) {
  const ConvShape shapes[] = {
      {3, 5, 9, 7, 6, 3, 1, 1},      // 3x3, odd sizes
      {2, 3, 17, 17, 8, 7, 2, 3},    // the imagenet stem's 7x7 stride 2
      {3, 16, 14, 14, 16, 3, 1, 1},  // the CPU's shifted-GEMM path
      {2, 8, 10, 10, 12, 3, 2, 1},   // stride-2 3x3 (first block of a stage)
      {4, 6, 8, 8, 10, 1, 2, 0},     // projection shortcut
      {2, 4, 6, 6, 5, 1, 1, 0},      // pointwise stride 1 (direct GEMM path)
  };
  uint64_t seed = 10;
  for (const ConvShape& s : shapes) {
    SCOPED_TRACE(Describe(s));
    const std::vector<float> in = Random(s.in_size(), ++seed);
    const std::vector<float> weight =
        Random(s.weight_size(), ++seed, 0.0,
               1.0 / std::sqrt(double(s.in_c * s.kernel * s.kernel)));
    const std::vector<float> d_out = Random(s.out_size(), ++seed);
    std::vector<float> out(s.out_size()), d_in(s.in_size()),
        d_weight(s.weight_size());
    Conv2dForward(out.data(), in.data(), weight.data(), s);
    Conv2dBackward(d_in.data(), d_weight.data(), d_out.data(), in.data(),
                   weight.data(), s);

    auto g_in = Upload(in), g_weight = Upload(weight), g_d_out = Upload(d_out);
    auto g_out = Buffer(out.size()), g_d_in = Buffer(d_in.size()),
         g_d_weight = Buffer(d_weight.size());
    gpu_->Conv2dForward(g_out.data(), g_in.data(), g_weight.data(), s);
    gpu_->Conv2dBackward(g_d_in.data(), g_d_weight.data(), g_d_out.data(),
                         g_in.data(), g_weight.data(), s);
    EXPECT_TRUE(Near(Describe(s) + " out", Download(g_out), out, Product()));
    EXPECT_TRUE(Near(Describe(s) + " d_in", Download(g_d_in), d_in, Product()));
    EXPECT_TRUE(Near(Describe(s) + " d_weight", Download(g_d_weight), d_weight,
                     Product()));

    // Weight gradient alone (the stem's call: d_in null).
    auto g_d_weight2 = Buffer(d_weight.size());
    gpu_->Conv2dBackward(nullptr, g_d_weight2.data(), g_d_out.data(),
                         g_in.data(), g_weight.data(), s);
    EXPECT_TRUE(Near(Describe(s) + " d_weight only", Download(g_d_weight2),
                     d_weight, Product()));
  }
}

TEST_P(CudaParityTest, BatchNorm) {
  struct Case {
    BatchNormShape s;
    bool residual, relu, alias;
  };
  const Case cases[] = {
      {{4, 5, 37}, false, true, false},
      {{16, 3, 2048}, true, true, false},  // several blocks per channel
      {{8, 6, 49}, true, true, true},      // out aliases residual
      {{2, 7, 1}, false, false, false},
  };
  uint64_t seed = 100;
  for (const Case& k : cases) {
    const BatchNormShape& s = k.s;
    const std::string name =
        "bn n" + std::to_string(s.n) + " c" + std::to_string(s.c) + " hw" +
        std::to_string(s.hw) + (k.residual ? " +res" : "") +
        (k.relu ? " relu" : "") + (k.alias ? " aliased" : "");
    SCOPED_TRACE(name);
    // A far-from-zero mean tests the shifted variance.
    const std::vector<float> in = Random(s.size(), ++seed, 3.0, 2.0);
    const std::vector<float> gamma = Random(s.c, ++seed, 1.0, 0.3);
    const std::vector<float> beta = Random(s.c, ++seed, 0.0, 0.3);
    const std::vector<float> residual = Random(s.size(), ++seed);
    const std::vector<float> d_out = Random(s.size(), ++seed);
    std::vector<float> run_mean = Random(s.c, ++seed, 0.0, 0.1);
    std::vector<float> run_var = Random(s.c, ++seed, 1.0, 0.1);
    for (float& v : run_var) v = std::fabs(v);

    auto g_in = Upload(in), g_gamma = Upload(gamma), g_beta = Upload(beta),
         g_residual = Upload(residual), g_d_out = Upload(d_out),
         g_run_mean = Upload(run_mean), g_run_var = Upload(run_var);
    auto g_out = Buffer(s.size()), g_mean = Buffer(s.c),
         g_inv_std = Buffer(s.c);
    float* g_out_ptr = k.alias ? g_residual.data() : g_out.data();
    gpu_->BatchNormForwardTrain(
        g_out_ptr, g_mean.data(), g_inv_std.data(), g_run_mean.data(),
        g_run_var.data(), g_in.data(), g_gamma.data(), g_beta.data(),
        k.residual ? g_residual.data() : nullptr, k.relu, s);
    std::vector<float> out = k.alias ? residual : std::vector<float>(s.size());
    std::vector<float> mean(s.c), inv_std(s.c);
    BatchNormForwardTrain(
        out.data(), mean.data(), inv_std.data(), run_mean.data(),
        run_var.data(), in.data(), gamma.data(), beta.data(),
        k.residual ? (k.alias ? out.data() : residual.data()) : nullptr, k.relu,
        s);
    EXPECT_TRUE(Near(name + " train out",
                     Download(k.alias ? g_residual : g_out), out, Reduction()));
    EXPECT_TRUE(Near(name + " save_mean", Download(g_mean), mean, Reduction()));
    EXPECT_TRUE(Near(name + " save_inv_std", Download(g_inv_std), inv_std,
                     Reduction()));
    EXPECT_TRUE(Near(name + " running_mean", Download(g_run_mean), run_mean,
                     Reduction()));
    EXPECT_TRUE(
        Near(name + " running_var", Download(g_run_var), run_var, Reduction()));

    // Eval mode from the (matching) running statistics.
    auto g_eval = Buffer(s.size());
    gpu_->BatchNormForwardEval(
        g_eval.data(), g_in.data(), g_gamma.data(), g_beta.data(),
        g_run_mean.data(), g_run_var.data(),
        k.residual && !k.alias ? g_residual.data() : nullptr, k.relu, s);
    std::vector<float> eval(s.size());
    BatchNormForwardEval(eval.data(), in.data(), gamma.data(), beta.data(),
                         run_mean.data(), run_var.data(),
                         k.residual && !k.alias ? residual.data() : nullptr,
                         k.relu, s);
    EXPECT_TRUE(Near(name + " eval out", Download(g_eval), eval, Reduction()));

    // Backward from the CPU's saved statistics on both sides.
    auto g_mean_cpu = Upload(mean), g_inv_std_cpu = Upload(inv_std);
    auto g_d_in = Buffer(s.size()), g_d_gamma = Buffer(s.c),
         g_d_beta = Buffer(s.c);
    gpu_->BatchNormBackward(g_d_in.data(), g_d_gamma.data(), g_d_beta.data(),
                            g_d_out.data(), g_in.data(), g_gamma.data(),
                            g_mean_cpu.data(), g_inv_std_cpu.data(), s);
    std::vector<float> d_in(s.size()), d_gamma(s.c), d_beta(s.c);
    BatchNormBackward(d_in.data(), d_gamma.data(), d_beta.data(), d_out.data(),
                      in.data(), gamma.data(), mean.data(), inv_std.data(), s);
    EXPECT_TRUE(Near(name + " d_in", Download(g_d_in), d_in, Reduction()));
    EXPECT_TRUE(
        Near(name + " d_gamma", Download(g_d_gamma), d_gamma, Reduction()));
    EXPECT_TRUE(
        Near(name + " d_beta", Download(g_d_beta), d_beta, Reduction()));
  }
}

TEST_P(CudaParityTest, ReluAndAdd) {
  const size_t n = 100003;
  const std::vector<float> x = Random(n, 1), g = Random(n, 2),
                           y0 = Random(n, 3);
  std::vector<float> out(n), d_in(n), y = y0;
  ReluForward(out.data(), x.data(), n);
  ReluBackward(d_in.data(), g.data(), out.data(), n);
  AddInPlace(y.data(), x.data(), n);
  auto g_x = Upload(x), g_g = Upload(g), g_y = Upload(y0);
  auto g_out = Buffer(n), g_d_in = Buffer(n);
  gpu_->ReluForward(g_out.data(), g_x.data(), n);
  gpu_->ReluBackward(g_d_in.data(), g_g.data(), g_out.data(), n);
  gpu_->AddInPlace(g_y.data(), g_x.data(), n);
  EXPECT_TRUE(Near("relu forward", Download(g_out), out, Exact()));
  EXPECT_TRUE(Near("relu backward", Download(g_d_in), d_in, Exact()));
  EXPECT_TRUE(Near("add in place", Download(g_y), y, Exact()));
  // In place, as the model calls them.
  gpu_->ReluBackward(g_g.data(), g_g.data(), g_out.data(), n);
  EXPECT_TRUE(Near("relu backward in place", Download(g_g), d_in, Exact()));
}

TEST_P(CudaParityTest, Pooling) {
  const PoolShape pools[] = {{3, 4, 16, 16, 3, 2, 1}, {2, 3, 15, 13, 3, 2, 1}};
  for (const PoolShape& s : pools) {
    const std::string name =
        "maxpool " + std::to_string(s.in_h) + "x" + std::to_string(s.in_w);
    const std::vector<float> in = Random(s.in_size(), 7);
    const std::vector<float> d_out = Random(s.out_size(), 8);
    std::vector<float> out(s.out_size()), d_in(s.in_size());
    std::vector<int32_t> argmax(s.out_size());
    MaxPoolForward(out.data(), argmax.data(), in.data(), s);
    MaxPoolBackward(d_in.data(), d_out.data(), argmax.data(), s);
    auto g_in = Upload(in), g_d_out = Upload(d_out);
    auto g_out = Buffer(out.size()), g_d_in = Buffer(d_in.size());
    DeviceArray<int32_t> g_argmax(gpu_.get(), argmax.size());
    gpu_->MaxPoolForward(g_out.data(), g_argmax.data(), g_in.data(), s);
    gpu_->MaxPoolBackward(g_d_in.data(), g_d_out.data(), g_argmax.data(), s);
    EXPECT_TRUE(Near(name + " forward", Download(g_out), out, Exact()));
    EXPECT_EQ(Download(g_argmax), argmax) << name << " argmax";
    EXPECT_TRUE(Near(name + " backward", Download(g_d_in), d_in, Exact()));
  }
  const int n = 5, c = 7, hw = 49;
  const std::vector<float> in = Random(size_t(n) * c * hw, 9),
                           d_out = Random(size_t(n) * c, 10);
  std::vector<float> out(size_t(n) * c), d_in(in.size());
  GlobalAvgPoolForward(out.data(), in.data(), n, c, hw);
  GlobalAvgPoolBackward(d_in.data(), d_out.data(), n, c, hw);
  auto g_in = Upload(in), g_d_out = Upload(d_out);
  auto g_out = Buffer(out.size()), g_d_in = Buffer(d_in.size());
  gpu_->GlobalAvgPoolForward(g_out.data(), g_in.data(), n, c, hw);
  gpu_->GlobalAvgPoolBackward(g_d_in.data(), g_d_out.data(), n, c, hw);
  EXPECT_TRUE(
      Near("global avg pool forward", Download(g_out), out, Reduction()));
  EXPECT_TRUE(
      Near("global avg pool backward", Download(g_d_in), d_in, Exact()));
}

TEST_P(CudaParityTest, Linear) {
  const int n = 6, in_f = 64, out_f = 11;
  const std::vector<float> in = Random(size_t(n) * in_f, 11);
  const std::vector<float> weight =
      Random(size_t(out_f) * in_f, 12, 0.0, 0.125);
  const std::vector<float> bias = Random(out_f, 13);
  const std::vector<float> d_out = Random(size_t(n) * out_f, 14);
  std::vector<float> out(size_t(n) * out_f), d_in(in.size()),
      d_weight(weight.size()), d_bias(out_f);
  LinearForward(out.data(), in.data(), weight.data(), bias.data(), n, in_f,
                out_f);
  LinearBackward(d_in.data(), d_weight.data(), d_bias.data(), d_out.data(),
                 in.data(), weight.data(), n, in_f, out_f);
  auto g_in = Upload(in), g_weight = Upload(weight), g_bias = Upload(bias),
       g_d_out = Upload(d_out);
  auto g_out = Buffer(out.size()), g_d_in = Buffer(d_in.size()),
       g_d_weight = Buffer(d_weight.size()), g_d_bias = Buffer(d_bias.size());
  gpu_->LinearForward(g_out.data(), g_in.data(), g_weight.data(), g_bias.data(),
                      n, in_f, out_f);
  gpu_->LinearBackward(g_d_in.data(), g_d_weight.data(), g_d_bias.data(),
                       g_d_out.data(), g_in.data(), g_weight.data(), n, in_f,
                       out_f);
  EXPECT_TRUE(Near("linear out", Download(g_out), out, Product()));
  EXPECT_TRUE(Near("linear d_in", Download(g_d_in), d_in, Product()));
  EXPECT_TRUE(
      Near("linear d_weight", Download(g_d_weight), d_weight, Product()));
  EXPECT_TRUE(Near("linear d_bias", Download(g_d_bias), d_bias, Exact()));
}

TEST_P(CudaParityTest, SoftmaxCrossEntropy) {
  const int n = 7, k = 1000;
  const std::vector<float> logits = Random(size_t(n) * k, 15, 0.0, 3.0);
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = (i * 389 + 17) % k;
  for (float smoothing : {0.0f, 0.1f}) {
    const std::string name =
        "softmax xent smoothing " + std::to_string(smoothing);
    std::vector<float> losses(n), d_logits(logits.size());
    SoftmaxCrossEntropy(losses.data(), d_logits.data(), logits.data(),
                        labels.data(), n, k, smoothing);
    auto g_logits = Upload(logits);
    auto g_labels = Upload(labels);
    auto g_losses = Buffer(n), g_d_logits = Buffer(d_logits.size()),
         g_losses2 = Buffer(n);
    gpu_->SoftmaxCrossEntropy(g_losses.data(), g_d_logits.data(),
                              g_logits.data(), g_labels.data(), n, k,
                              smoothing);
    gpu_->SoftmaxCrossEntropy(g_losses2.data(), nullptr, g_logits.data(),
                              g_labels.data(), n, k, smoothing);
    EXPECT_TRUE(
        Near(name + " losses", Download(g_losses), losses, Reduction()));
    EXPECT_TRUE(
        Near(name + " d_logits", Download(g_d_logits), d_logits, Reduction()));
    EXPECT_TRUE(Near(name + " losses (no gradient)", Download(g_losses2),
                     losses, Reduction()));
  }
}

TEST_P(CudaParityTest, SgdUpdate) {
  const size_t n = 5000;
  for (bool nesterov : {false, true}) {
    const SgdStep step{0.05f, 0.9f, nesterov ? 5e-4f : 0.0f, nesterov};
    std::vector<float> param = Random(n, 16),
                       velocity = Random(n, 17, 0.0, 0.1);
    const std::vector<float> grad = Random(n, 18);
    auto g_param = Upload(param), g_velocity = Upload(velocity),
         g_grad = Upload(grad);
    for (int i = 0; i < 3; ++i) {
      SgdUpdate(param.data(), velocity.data(), grad.data(), n, step);
      gpu_->SgdUpdate(g_param.data(), g_velocity.data(), g_grad.data(), n,
                      step);
    }
    const std::string name = nesterov ? "sgd nesterov" : "sgd";
    EXPECT_TRUE(Near(name + " param", Download(g_param), param, Exact()));
    EXPECT_TRUE(
        Near(name + " velocity", Download(g_velocity), velocity, Exact()));
  }
}

// The first 10 training steps of a small ResNet: the same losses on both
// backends (same seed, same batches).
TEST_P(CudaParityTest, FirstTenTrainingLosses) {
  for (bool imagenet : {false, true}) {
    ModelConfig config;
    config.in_channels = 3;
    config.in_height = imagenet ? 32 : 12;
    config.in_width = imagenet ? 32 : 12;
    config.num_classes = 10;
    config.width = 8;
    config.depth = 1;
    config.stages = 3;
    config.imagenet_stem = imagenet;
    const int batch = 16;
    auto cpu = MakeCpuBackend({.threads = 2});
    std::string error;
    auto cpu_model = Model::Create(config, batch, 42, cpu.get(), &error);
    ASSERT_NE(cpu_model, nullptr) << error;
    auto gpu_model = Model::Create(config, batch, 42, gpu_.get(), &error);
    ASSERT_NE(gpu_model, nullptr) << error;
    const SgdStep step{0.05f, 0.9f, 5e-4f, true};
    const size_t image =
        size_t(config.in_channels) * config.in_height * config.in_width;
    const Tolerance tol =
        GetParam().mixed ? Tolerance{0.0, 3e-2} : Tolerance{0.0, 2e-3};
    for (int i = 0; i < 10; ++i) {
      const std::vector<float> images = Random(image * batch, 1000 + i);
      std::vector<int32_t> labels(batch);
      for (int j = 0; j < batch; ++j)
        labels[j] = (j * 7 + i) % config.num_classes;
      const double cpu_loss =
          cpu_model->TrainStep(images.data(), labels.data(), batch, 0.1f, step)
              .loss;
      const double gpu_loss =
          gpu_model->TrainStep(images.data(), labels.data(), batch, 0.1f, step)
              .loss;
      ASSERT_EQ(gpu_->error(), "");
      std::printf(
          "[parity] %s stem, step %d: loss cpu %.6f gpu %.6f (diff %.2g)\n",
          imagenet ? "imagenet" : "small", i, cpu_loss, gpu_loss,
          std::fabs(cpu_loss - gpu_loss));
      EXPECT_LE(std::fabs(cpu_loss - gpu_loss), tol.rtol * std::fabs(cpu_loss))
          << (imagenet ? "imagenet" : "small") << " stem, step " << i;
    }
    // The running statistics moved the same way too.
    EXPECT_TRUE(
        Near(std::string(imagenet ? "imagenet" : "small") + " running stats",
             gpu_model->Read(ModelArray::kRunningStats),
             cpu_model->Read(ModelArray::kRunningStats),
             GetParam().mixed ? Tolerance{5e-2, 5e-2} : Tolerance{1e-3, 1e-2}));
  }
}

// Device failures are reported through error(), never by aborting.
TEST_P(CudaParityTest, OutOfMemoryIsReported) {
  void* p = gpu_->Allocate(size_t(1) << 50);  // a petabyte
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(gpu_->error().find("out of memory"), std::string::npos)
      << gpu_->error();
  // Unusable afterwards, but calls are harmless.
  EXPECT_EQ(gpu_->Allocate(16), nullptr);
  gpu_->Synchronize();
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaParityTest,
                         ::testing::Values(Mode{"fp32", false, false},
                                           Mode{"fp32_im2col", false, true},
                                           Mode{"mixed", true, false},
                                           Mode{"mixed_im2col", true, true}),
                         [](const ::testing::TestParamInfo<Mode>& info) {
                           return std::string(info.param.name);
                         });

TEST(CudaBackendTest, NoDeviceIsAnErrorNotACrash) {
  if (HaveCudaDevice()) GTEST_SKIP() << "a CUDA device is present";
  std::string error;
  EXPECT_EQ(MakeCudaBackend({}, &error), nullptr);
  EXPECT_NE(error.find("no CUDA device"), std::string::npos) << error;
  EXPECT_TRUE(CudaBuilt());
}

}  // namespace
}  // namespace hypertune::train
