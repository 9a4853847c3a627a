// hypertune-train-bench: training-step throughput of the reference ResNet on
// synthetic data, printed as one JSON object (benchmarks/peers_torch_resnet.py
// prints the same fields for PyTorch).
//
//   hypertune-train-bench [--device cpu|cuda] [--threads T] [--batch B]
//       [--width W] [--depth D] [--stages S] [--channels C] [--size HxW]
//       [--classes K] [--imagenet] [--mixed-precision] [--warmup N] [--steps N]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "trainer_sdk/trainer/backend.h"
#include "trainer_sdk/trainer/model.h"
#include "trainer_sdk/trainer/rng.h"

namespace {

using hypertune::train::BackendOptions;
using hypertune::train::MakeBackend;
using hypertune::train::Model;
using hypertune::train::ModelConfig;
using hypertune::train::Rng;
using hypertune::train::SgdStep;

// CPU seconds used by this process (all threads) so far.
double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

int Usage(const char* problem) {
  std::fprintf(stderr, "hypertune-train-bench: %s\n", problem);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "cpu";
  BackendOptions options;
  options.threads = 2;
  int batch = 128, warmup = 3, steps = 20;
  ModelConfig config;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) return nullptr;
      return argv[++i];
    };
    const char* v = nullptr;
    if (flag == "--imagenet") {
      config = hypertune::train::ResNet18Config();
      continue;
    }
    if (flag == "--mixed-precision") {
      options.mixed_precision = true;
      continue;
    }
    if ((v = value()) == nullptr)
      return Usage(("missing value for " + flag).c_str());
    if (flag == "--device")
      device = v;
    else if (flag == "--threads")
      options.threads = std::atoi(v);
    else if (flag == "--batch")
      batch = std::atoi(v);
    else if (flag == "--width")
      config.width = std::atoi(v);
    else if (flag == "--depth")
      config.depth = std::atoi(v);
    else if (flag == "--stages")
      config.stages = std::atoi(v);
    else if (flag == "--channels")
      config.in_channels = std::atoi(v);
    else if (flag == "--classes")
      config.num_classes = std::atoi(v);
    else if (flag == "--warmup")
      warmup = std::atoi(v);
    else if (flag == "--steps")
      steps = std::atoi(v);
    else if (flag == "--size") {
      if (std::sscanf(v, "%dx%d", &config.in_height, &config.in_width) != 2) {
        return Usage("--size: expected HxW, e.g. 28x28");
      }
    } else {
      return Usage(("unknown flag " + flag).c_str());
    }
  }
  if (batch < 1 || steps < 1) return Usage("--batch and --steps must be >= 1");
  std::string error;
  auto backend = MakeBackend(device, options, &error);
  if (backend == nullptr) return Usage(error.c_str());
  auto model = Model::Create(config, batch, /*seed=*/1, backend.get(), &error);
  if (model == nullptr) return Usage(error.c_str());

  Rng rng(7);
  const size_t image =
      size_t(config.in_channels) * config.in_height * config.in_width;
  std::vector<float> images(image * batch);
  std::vector<int32_t> labels(batch);
  for (float& x : images) x = float(rng.Normal());
  for (int32_t& y : labels)
    y = int32_t(rng.Next() % uint64_t(config.num_classes));
  SgdStep step{0.01f, 0.9f, 5e-4f, true};

  double loss = 0.0;
  for (int i = 0; i < warmup; ++i)
    loss =
        model->TrainStep(images.data(), labels.data(), batch, 0.1f, step).loss;
  backend->Synchronize();
  const double cpu_start = CpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i)
    loss =
        model->TrainStep(images.data(), labels.data(), batch, 0.1f, step).loss;
  backend->Synchronize();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  const double cpu_seconds = CpuSeconds() - cpu_start;
  if (!backend->error().empty()) return Usage(backend->error().c_str());
  std::printf(
      "{\"framework\": \"hypertune\", \"device\": \"%s\", \"threads\": %d, "
      "\"batch\": %d, \"width\": %d, \"depth\": %d, \"stages\": %d, "
      "\"input\": \"%dx%dx%d\", \"classes\": %d, \"imagenet_stem\": %s, "
      "\"steps\": %d, \"seconds\": %.4f, \"step_ms\": %.3f, "
      "\"images_per_second\": %.1f, \"cpu_seconds\": %.4f, "
      "\"images_per_cpu_second\": %.1f, \"final_loss\": %.4f}\n",
      device.c_str(), options.threads, batch, config.width, config.depth,
      config.stages, config.in_channels, config.in_height, config.in_width,
      config.num_classes, config.imagenet_stem ? "true" : "false", steps,
      seconds, 1000.0 * seconds / steps, steps * batch / seconds, cpu_seconds,
      steps * batch / cpu_seconds, loss);
  return 0;
}
