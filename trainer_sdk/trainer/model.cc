#include "trainer_sdk/trainer/model.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "trainer_sdk/trainer/rng.h"

namespace hypertune::train {

// A conv layer: shape (n filled in per call) and its weight offset.
struct Model::Conv {
  ConvShape shape;
  size_t weight = 0;  // offset into params
};

// A BN layer: parameter and running-stat offsets, saved batch statistics.
struct Model::Norm {
  int c = 0;
  int hw = 0;
  size_t gamma = 0, beta = 0;  // offsets into params (plain region)
  size_t mean = 0, var = 0;    // offsets into stats
  DeviceArray<float> save_mean, save_inv_std;
};

struct Model::Block {
  Conv conv1, conv2, conv_s;
  Norm bn1, bn2, bn_s;
  bool projection = false;
  const float* input = nullptr;      // the previous layer's output
  size_t in_size = 0, out_size = 0;  // per image
  DeviceArray<float> c1, a1, c2, cs, s, out;
};

struct Model::Layers {
  Conv stem_conv;
  Norm stem_bn;
  DeviceArray<float> stem_c, stem_a;
  bool pool = false;
  PoolShape pool_shape;
  DeviceArray<float> pooled_stem;
  DeviceArray<int32_t> argmax;
  std::vector<std::unique_ptr<Block>> blocks;
  int feature_c = 0, feature_hw = 0;
  DeviceArray<float> features;  // [n][feature_c] after global pooling
  size_t linear_w = 0, linear_b = 0;
  // Gradient scratch, each max activation size.
  DeviceArray<float> g[4];
  DeviceArray<float> d_features;
  size_t max_activation = 0;  // per image
};

std::string ValidateModelConfig(const ModelConfig& c) {
  auto check = [](const char* name, int value, int min) -> std::string {
    if (value >= min) return "";
    return std::string(name) + ": must be >= " + std::to_string(min) +
           ", got " + std::to_string(value);
  };
  for (auto [name, value, min] :
       {std::tuple{"in_channels", c.in_channels, 1},
        std::tuple{"in_height", c.in_height, 1},
        std::tuple{"in_width", c.in_width, 1},
        std::tuple{"num_classes", c.num_classes, 2},
        std::tuple{"width", c.width, 1}, std::tuple{"depth", c.depth, 1},
        std::tuple{"stages", c.stages, 1}}) {
    std::string e = check(name, value, min);
    if (!e.empty()) return e;
  }
  if (c.stages > 8)
    return "stages: must be <= 8, got " + std::to_string(c.stages);
  // Every stride-2 stage must leave at least one pixel.
  int h = c.in_height, w = c.in_width;
  if (c.imagenet_stem) {
    h = (h + 6 - 7) / 2 + 1;
    w = (w + 6 - 7) / 2 + 1;
    h = (h + 2 - 3) / 2 + 1;
    w = (w + 2 - 3) / 2 + 1;
  }
  for (int s = 1; s < c.stages; ++s) {
    h = (h + 2 - 3) / 2 + 1;
    w = (w + 2 - 3) / 2 + 1;
  }
  if (h < 1 || w < 1) return "stages: too many for the input size";
  return "";
}

ModelConfig ResNet18Config() {
  ModelConfig c;
  c.in_channels = 3;
  c.in_height = 224;
  c.in_width = 224;
  c.num_classes = 1000;
  c.width = 64;
  c.depth = 2;
  c.stages = 4;
  c.imagenet_stem = true;
  return c;
}

Model::Model(const ModelConfig& config, int max_batch, Backend* backend)
    : config_(config), max_batch_(max_batch), backend_(backend) {}

Model::~Model() = default;

std::unique_ptr<Model> Model::Create(const ModelConfig& config, int max_batch,
                                     uint64_t seed, Backend* backend,
                                     std::string* error) {
  std::string invalid = ValidateModelConfig(config);
  if (invalid.empty() && max_batch < 1) {
    invalid = "max_batch: must be >= 1, got " + std::to_string(max_batch);
  }
  if (!invalid.empty()) {
    if (error != nullptr) *error = invalid;
    return nullptr;
  }
  std::unique_ptr<Model> model(new Model(config, max_batch, backend));
  if (!model->Build(seed, error)) return nullptr;
  return model;
}

bool Model::Build(uint64_t seed, std::string* error) {
  layers_ = std::make_unique<Layers>();
  Layers& L = *layers_;
  // Offsets: decayed params first; plain ones are relative until the end.
  size_t decayed = 0, plain = 0;
  std::vector<size_t*> plain_offsets;
  std::vector<Norm*> norms;
  std::vector<Conv*> convs;
  auto add_conv = [&](Conv& conv, int in_c, int h, int w, int out_c, int k,
                      int stride, int pad) {
    conv.shape = ConvShape{0, in_c, h, w, out_c, k, stride, pad};
    conv.weight = decayed;
    decayed += conv.shape.weight_size();
    convs.push_back(&conv);
  };
  auto add_norm = [&](Norm& norm, int c, int hw) {
    norm.c = c;
    norm.hw = hw;
    norm.gamma = plain;
    norm.beta = plain + c;
    plain += 2 * size_t(c);
    plain_offsets.push_back(&norm.gamma);
    plain_offsets.push_back(&norm.beta);
    norm.mean = stats_size_;
    norm.var = stats_size_ + c;
    stats_size_ += 2 * size_t(c);
    norms.push_back(&norm);
  };

  int c = config_.in_channels, h = config_.in_height, w = config_.in_width;
  const size_t input_size = size_t(c) * h * w;
  if (config_.imagenet_stem) {
    add_conv(L.stem_conv, c, h, w, config_.width, 7, 2, 3);
  } else {
    add_conv(L.stem_conv, c, h, w, config_.width, 3, 1, 1);
  }
  c = config_.width;
  h = L.stem_conv.shape.out_h();
  w = L.stem_conv.shape.out_w();
  add_norm(L.stem_bn, c, h * w);
  L.max_activation = std::max(input_size, size_t(c) * h * w);
  std::vector<std::pair<DeviceArray<float>*, size_t>> activations;
  activations.push_back({&L.stem_c, size_t(c) * h * w});
  activations.push_back({&L.stem_a, size_t(c) * h * w});
  if (config_.imagenet_stem) {
    L.pool = true;
    L.pool_shape = PoolShape{0, c, h, w, 3, 2, 1};
    h = L.pool_shape.out_h();
    w = L.pool_shape.out_w();
    activations.push_back({&L.pooled_stem, size_t(c) * h * w});
  }
  for (int stage = 0; stage < config_.stages; ++stage) {
    const int out_c = config_.width << stage;
    for (int b = 0; b < config_.depth; ++b) {
      auto block = std::make_unique<Block>();
      Block& B = *block;
      const int stride = (stage > 0 && b == 0) ? 2 : 1;
      add_conv(B.conv1, c, h, w, out_c, 3, stride, 1);
      const int oh = B.conv1.shape.out_h(), ow = B.conv1.shape.out_w();
      add_norm(B.bn1, out_c, oh * ow);
      add_conv(B.conv2, out_c, oh, ow, out_c, 3, 1, 1);
      add_norm(B.bn2, out_c, oh * ow);
      B.projection = stride != 1 || c != out_c;
      if (B.projection) {
        add_conv(B.conv_s, c, h, w, out_c, 1, stride, 0);
        add_norm(B.bn_s, out_c, oh * ow);
      }
      B.in_size = size_t(c) * h * w;
      B.out_size = size_t(out_c) * oh * ow;
      for (DeviceArray<float>* a : {&B.c1, &B.a1, &B.c2, &B.out}) {
        activations.push_back({a, B.out_size});
      }
      if (B.projection) {
        activations.push_back({&B.cs, B.out_size});
        activations.push_back({&B.s, B.out_size});
      }
      L.max_activation = std::max(L.max_activation, B.out_size);
      c = out_c;
      h = oh;
      w = ow;
      L.blocks.push_back(std::move(block));
    }
  }
  L.feature_c = c;
  L.feature_hw = h * w;
  L.linear_w = decayed;
  decayed += size_t(config_.num_classes) * c;
  L.linear_b = plain;
  plain += config_.num_classes;
  plain_offsets.push_back(&L.linear_b);
  for (size_t* offset : plain_offsets) *offset += decayed;
  decayed_size_ = decayed;
  param_size_ = decayed + plain;

  // Allocation.
  const size_t nb = size_t(max_batch_);
  params_ = DeviceArray<float>(backend_, param_size_);
  grads_ = DeviceArray<float>(backend_, param_size_);
  velocity_ = DeviceArray<float>(backend_, param_size_);
  stats_ = DeviceArray<float>(backend_, stats_size_);
  input_ = DeviceArray<float>(backend_, nb * input_size);
  logits_ = DeviceArray<float>(backend_, nb * config_.num_classes);
  d_logits_ = DeviceArray<float>(backend_, nb * config_.num_classes);
  losses_ = DeviceArray<float>(backend_, nb);
  labels_ = DeviceArray<int32_t>(backend_, nb);
  bool ok = params_.ok() && grads_.ok() && velocity_.ok() && stats_.ok() &&
            input_.ok() && logits_.ok() && d_logits_.ok() && losses_.ok() &&
            labels_.ok();
  for (auto& [array, per_image] : activations) {
    *array = DeviceArray<float>(backend_, nb * per_image);
    ok = ok && array->ok();
  }
  if (L.pool) {
    L.argmax = DeviceArray<int32_t>(backend_, L.pooled_stem.size());
    ok = ok && L.argmax.ok();
  }
  for (DeviceArray<float>& g : L.g) {
    g = DeviceArray<float>(backend_, nb * L.max_activation);
    ok = ok && g.ok();
  }
  L.features = DeviceArray<float>(backend_, nb * L.feature_c);
  L.d_features = DeviceArray<float>(backend_, nb * L.feature_c);
  ok = ok && L.features.ok() && L.d_features.ok();
  for (Norm* norm : norms) {
    norm->save_mean = DeviceArray<float>(backend_, norm->c);
    norm->save_inv_std = DeviceArray<float>(backend_, norm->c);
    ok = ok && norm->save_mean.ok() && norm->save_inv_std.ok();
  }
  if (!ok) {
    if (error != nullptr) *error = "allocating the model: " + backend_->error();
    return false;
  }

  // Initialization on the host, then one upload.
  Rng rng(seed);
  std::vector<float> params(param_size_, 0.0f);
  for (Conv* conv : convs) {
    const ConvShape& s = conv->shape;
    const double std_dev =
        std::sqrt(2.0 / (double(s.out_c) * s.kernel * s.kernel));
    for (size_t i = 0; i < s.weight_size(); ++i) {
      params[conv->weight + i] = float(std_dev * rng.Normal());
    }
  }
  const double bound = 1.0 / std::sqrt(double(L.feature_c));
  for (size_t i = 0; i < size_t(config_.num_classes) * L.feature_c; ++i) {
    params[L.linear_w + i] = float(bound * (2.0 * rng.Uniform() - 1.0));
  }
  for (int i = 0; i < config_.num_classes; ++i) {
    params[L.linear_b + i] = float(bound * (2.0 * rng.Uniform() - 1.0));
  }
  std::vector<float> stats(stats_size_, 0.0f);
  for (Norm* norm : norms) {
    std::fill_n(params.begin() + norm->gamma, norm->c, 1.0f);
    std::fill_n(stats.begin() + norm->var, norm->c, 1.0f);
  }
  Write(ModelArray::kParameters, params);
  Write(ModelArray::kRunningStats, stats);
  return backend_->error().empty();
}

size_t Model::Size(ModelArray which) const {
  return which == ModelArray::kRunningStats ? stats_size_ : param_size_;
}

std::vector<float> Model::Read(ModelArray which) const {
  const DeviceArray<float>* array = nullptr;
  switch (which) {
    case ModelArray::kParameters:
      array = &params_;
      break;
    case ModelArray::kGradients:
      array = &grads_;
      break;
    case ModelArray::kVelocity:
      array = &velocity_;
      break;
    case ModelArray::kRunningStats:
      array = &stats_;
      break;
  }
  std::vector<float> values(array->size());
  if (!values.empty()) {
    backend_->CopyToHost(values.data(), array->data(),
                         values.size() * sizeof(float));
  }
  return values;
}

void Model::Write(ModelArray which, const std::vector<float>& values) {
  DeviceArray<float>* array = nullptr;
  switch (which) {
    case ModelArray::kParameters:
      array = &params_;
      break;
    case ModelArray::kGradients:
      array = &grads_;
      break;
    case ModelArray::kVelocity:
      array = &velocity_;
      break;
    case ModelArray::kRunningStats:
      array = &stats_;
      break;
  }
  if (!values.empty()) {
    backend_->CopyToDevice(array->data(), values.data(),
                           values.size() * sizeof(float));
  }
}

void Model::Forward(int n, bool train) {
  Layers& L = *layers_;
  float* P = params_.data();
  float* S = stats_.data();
  Backend& be = *backend_;
  auto conv = [&](Conv& c, const float* in, float* out) {
    c.shape.n = n;
    be.Conv2dForward(out, in, P + c.weight, c.shape);
  };
  auto norm = [&](Norm& b, const float* in, float* out, const float* residual,
                  bool relu) {
    BatchNormShape s{n, b.c, b.hw};
    if (train) {
      be.BatchNormForwardTrain(out, b.save_mean.data(), b.save_inv_std.data(),
                               S + b.mean, S + b.var, in, P + b.gamma,
                               P + b.beta, residual, relu, s);
    } else {
      be.BatchNormForwardEval(out, in, P + b.gamma, P + b.beta, S + b.mean,
                              S + b.var, residual, relu, s);
    }
  };
  conv(L.stem_conv, input_.data(), L.stem_c.data());
  norm(L.stem_bn, L.stem_c.data(), L.stem_a.data(), nullptr, true);
  const float* x = L.stem_a.data();
  if (L.pool) {
    L.pool_shape.n = n;
    be.MaxPoolForward(L.pooled_stem.data(), L.argmax.data(), x, L.pool_shape);
    x = L.pooled_stem.data();
  }
  for (auto& block : L.blocks) {
    Block& B = *block;
    B.input = x;
    conv(B.conv1, x, B.c1.data());
    norm(B.bn1, B.c1.data(), B.a1.data(), nullptr, true);
    conv(B.conv2, B.a1.data(), B.c2.data());
    const float* shortcut = x;
    if (B.projection) {
      conv(B.conv_s, x, B.cs.data());
      norm(B.bn_s, B.cs.data(), B.s.data(), nullptr, false);
      shortcut = B.s.data();
    }
    norm(B.bn2, B.c2.data(), B.out.data(), shortcut, true);
    x = B.out.data();
  }
  be.GlobalAvgPoolForward(L.features.data(), x, n, L.feature_c, L.feature_hw);
  be.LinearForward(logits_.data(), L.features.data(), P + L.linear_w,
                   P + L.linear_b, n, L.feature_c, config_.num_classes);
}

void Model::Backward(int n) {
  Layers& L = *layers_;
  float* P = params_.data();
  float* G = grads_.data();
  Backend& be = *backend_;
  be.LinearBackward(L.d_features.data(), G + L.linear_w, G + L.linear_b,
                    d_logits_.data(), L.features.data(), P + L.linear_w, n,
                    L.feature_c, config_.num_classes);
  // Scratch roles rotate: `d` holds dL/d(current layer output).
  float* scratch[4] = {L.g[0].data(), L.g[1].data(), L.g[2].data(),
                       L.g[3].data()};
  float* d = scratch[0];
  be.GlobalAvgPoolBackward(d, L.d_features.data(), n, L.feature_c,
                           L.feature_hw);
  auto conv_back = [&](Conv& c, float* d_in, const float* d_out,
                       const float* in) {
    c.shape.n = n;
    be.Conv2dBackward(d_in, G + c.weight, d_out, in, P + c.weight, c.shape);
  };
  auto norm_back = [&](Norm& b, float* d_in, const float* d_out,
                       const float* in) {
    BatchNormShape s{n, b.c, b.hw};
    be.BatchNormBackward(d_in, G + b.gamma, G + b.beta, d_out, in, P + b.gamma,
                         b.save_mean.data(), b.save_inv_std.data(), s);
  };
  for (int i = int(L.blocks.size()) - 1; i >= 0; --i) {
    Block& B = *L.blocks[i];
    float* others[3];
    for (int j = 0, k = 0; j < 4; ++j) {
      if (scratch[j] != d) others[k++] = scratch[j];
    }
    float* g1 = others[0];
    float* g2 = others[1];
    float* g3 = others[2];
    const size_t out_count = size_t(n) * B.out_size;
    be.ReluBackward(d, d, B.out.data(), out_count);  // d = dL/d(pre-ReLU sum)
    norm_back(B.bn2, g1, d, B.c2.data());
    conv_back(B.conv2, g2, g1, B.a1.data());
    be.ReluBackward(g2, g2, B.a1.data(), out_count);
    norm_back(B.bn1, g1, g2, B.c1.data());
    conv_back(B.conv1, g3, g1, B.input);
    if (B.projection) {
      norm_back(B.bn_s, g1, d, B.cs.data());
      conv_back(B.conv_s, g2, g1, B.input);
      be.AddInPlace(g3, g2, size_t(n) * B.in_size);
    } else {
      be.AddInPlace(g3, d, size_t(n) * B.in_size);
    }
    d = g3;
  }
  float* others[3];
  for (int j = 0, k = 0; j < 4; ++j) {
    if (scratch[j] != d) others[k++] = scratch[j];
  }
  if (L.pool) {
    be.MaxPoolBackward(others[0], d, L.argmax.data(), L.pool_shape);
    d = others[0];
    others[0] = others[1];
  }
  const size_t stem_count = size_t(n) * L.stem_bn.c * L.stem_bn.hw;
  be.ReluBackward(d, d, L.stem_a.data(), stem_count);
  norm_back(L.stem_bn, others[0], d, L.stem_c.data());
  conv_back(L.stem_conv, nullptr, others[0], input_.data());
}

StepStats Model::ComputeGradients(const float* images, const int32_t* labels,
                                  int n, float label_smoothing) {
  const size_t image =
      size_t(config_.in_channels) * config_.in_height * config_.in_width;
  backend_->CopyToDevice(input_.data(), images, sizeof(float) * image * n);
  backend_->CopyToDevice(labels_.data(), labels, sizeof(int32_t) * n);
  Forward(n, /*train=*/true);
  backend_->SoftmaxCrossEntropy(losses_.data(), d_logits_.data(),
                                logits_.data(), labels_.data(), n,
                                config_.num_classes, label_smoothing);
  Backward(n);
  const int k = config_.num_classes;
  host_logits_.resize(size_t(n) * k);
  host_losses_.resize(n);
  backend_->CopyToHost(host_logits_.data(), logits_.data(),
                       sizeof(float) * n * k);
  backend_->CopyToHost(host_losses_.data(), losses_.data(), sizeof(float) * n);
  StepStats stats;
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    sum += host_losses_[i];
    const float* z = host_logits_.data() + size_t(i) * k;
    if (std::max_element(z, z + k) - z == labels[i]) ++stats.correct;
  }
  stats.loss = sum / n;
  return stats;
}

void Model::ApplySgd(const SgdStep& step) {
  SgdStep plain = step;
  plain.weight_decay = 0.0f;
  backend_->SgdUpdate(params_.data(), velocity_.data(), grads_.data(),
                      decayed_size_, step);
  backend_->SgdUpdate(
      params_.data() + decayed_size_, velocity_.data() + decayed_size_,
      grads_.data() + decayed_size_, param_size_ - decayed_size_, plain);
}

StepStats Model::TrainStep(const float* images, const int32_t* labels, int n,
                           float label_smoothing, const SgdStep& step) {
  StepStats stats = ComputeGradients(images, labels, n, label_smoothing);
  ApplySgd(step);
  return stats;
}

void Model::Predict(const float* images, int n, float* logits) {
  const size_t image =
      size_t(config_.in_channels) * config_.in_height * config_.in_width;
  backend_->CopyToDevice(input_.data(), images, sizeof(float) * image * n);
  Forward(n, /*train=*/false);
  backend_->CopyToHost(logits, logits_.data(),
                       sizeof(float) * n * config_.num_classes);
}

EvalStats Model::Evaluate(const float* images, const int32_t* labels, int n) {
  const size_t image =
      size_t(config_.in_channels) * config_.in_height * config_.in_width;
  backend_->CopyToDevice(input_.data(), images, sizeof(float) * image * n);
  backend_->CopyToDevice(labels_.data(), labels, sizeof(int32_t) * n);
  Forward(n, /*train=*/false);
  backend_->SoftmaxCrossEntropy(losses_.data(), nullptr, logits_.data(),
                                labels_.data(), n, config_.num_classes, 0.0f);
  const int k = config_.num_classes;
  host_logits_.resize(size_t(n) * k);
  host_losses_.resize(n);
  backend_->CopyToHost(host_logits_.data(), logits_.data(),
                       sizeof(float) * n * k);
  backend_->CopyToHost(host_losses_.data(), losses_.data(), sizeof(float) * n);
  EvalStats stats;
  stats.count = n;
  for (int i = 0; i < n; ++i) {
    stats.loss_sum += host_losses_[i];
    const float* z = host_logits_.data() + size_t(i) * k;
    if (std::max_element(z, z + k) - z == labels[i]) ++stats.correct;
  }
  return stats;
}

}  // namespace hypertune::train
