// Model: the reference ResNet (README.md) on a Backend: parameters,
// optimizer state, activations, and the forward/backward/SGD step.
//
//   stem: conv3x3 s1 (or, imagenet_stem, conv7x7 s2 + maxpool3x3 s2), BN, ReLU
//   stages s = 0..stages-1: width * 2^s channels, `depth` BasicBlocks, the
//     first block of s >= 1 with stride 2; BasicBlock =
//     relu(bn(conv3x3(relu(bn(conv3x3(x))))) + shortcut(x)), shortcut =
//     identity or bn(conv1x1 stride) where the shape changes
//   global average pool, linear (with bias) to num_classes.
//
// Parameters live in one device array in two regions: the decayed ones
// (conv and linear weights) first, then BN gammas/betas and the linear bias,
// which get no weight decay. Gradients and momentum buffers share the
// layout; BN running statistics are a separate array.
//
// Thread safety: one thread at a time (the Backend's rule).
#ifndef HYPERTUNE_TRAINER_SDK_TRAINER_MODEL_H_
#define HYPERTUNE_TRAINER_SDK_TRAINER_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainer_sdk/trainer/backend.h"
#include "trainer_sdk/trainer/ops.h"

namespace hypertune::train {

struct ModelConfig {
  int in_channels = 1;
  int in_height = 28;
  int in_width = 28;
  int num_classes = 10;
  int width = 16;  // channels of the stem and of stage 0
  int depth = 1;   // BasicBlocks per stage
  int stages = 3;
  bool imagenet_stem = false;  // conv7x7 s2 + maxpool instead of conv3x3 s1

  bool operator==(const ModelConfig&) const = default;
};

// "" if valid, else what is wrong, e.g. "width: must be >= 1, got 0".
std::string ValidateModelConfig(const ModelConfig& config);

// The ResNet-18-like network of the GPU check (224px, 1000 classes).
ModelConfig ResNet18Config();

// Which flat array of the model to read or write.
enum class ModelArray { kParameters, kGradients, kVelocity, kRunningStats };

struct StepStats {
  double loss = 0.0;  // mean loss over the batch (with label smoothing)
  int correct = 0;    // examples whose arg-max logit is the label
};

struct EvalStats {
  double loss_sum = 0.0;  // sum of per-example losses (no smoothing)
  int correct = 0;
  int count = 0;
};

class Model {
 public:
  // Builds the network for batches of up to max_batch images, parameters
  // initialized from `seed` (Kaiming normal fan_out for convs, PyTorch's
  // default for the linear layer, BN gamma 1 beta 0). Returns nullptr with
  // *error set for an invalid config or a failed allocation.
  // REQUIRES: backend outlives the model.
  static std::unique_ptr<Model> Create(const ModelConfig& config, int max_batch,
                                       uint64_t seed, Backend* backend,
                                       std::string* error);

  // Forward (training mode), backward and one SGD step on a host batch of n
  // NCHW images. `step.weight_decay` applies to the decayed region only.
  // REQUIRES: 1 <= n <= max_batch, labels in [0, num_classes).
  StepStats TrainStep(const float* images, const int32_t* labels, int n,
                      float label_smoothing, const SgdStep& step);

  // Forward and backward only: fills the gradients, returns the loss.
  StepStats ComputeGradients(const float* images, const int32_t* labels, int n,
                             float label_smoothing);
  // One SGD step from the current gradients.
  void ApplySgd(const SgdStep& step);

  // Inference-mode forward (running BN statistics); loss without smoothing.
  EvalStats Evaluate(const float* images, const int32_t* labels, int n);
  // Inference-mode logits [n][num_classes] into `logits`.
  void Predict(const float* images, int n, float* logits);

  std::vector<float> Read(ModelArray which) const;
  // REQUIRES: values.size() == Size(which).
  void Write(ModelArray which, const std::vector<float>& values);
  size_t Size(ModelArray which) const;
  // Parameters in [0, decayed_size()) get weight decay.
  size_t decayed_size() const { return decayed_size_; }

  const ModelConfig& config() const { return config_; }
  int max_batch() const { return max_batch_; }
  Backend* backend() const { return backend_; }

  ~Model();

 private:
  struct Conv;
  struct Norm;
  struct Block;
  struct Layers;

  Model(const ModelConfig& config, int max_batch, Backend* backend);
  bool Build(uint64_t seed, std::string* error);
  // Forward pass from input_ into logits_; training mode when `train`.
  void Forward(int n, bool train);
  void Backward(int n);

  ModelConfig config_;
  int max_batch_;
  Backend* backend_;
  size_t decayed_size_ = 0;
  size_t param_size_ = 0;
  size_t stats_size_ = 0;
  DeviceArray<float> params_, grads_, velocity_, stats_;
  DeviceArray<float> input_, logits_, d_logits_, losses_;
  DeviceArray<int32_t> labels_;
  std::unique_ptr<Layers> layers_;
  std::vector<float> host_logits_, host_losses_;
};

}  // namespace hypertune::train

#endif  // HYPERTUNE_TRAINER_SDK_TRAINER_MODEL_H_
