// The reference trainer's layer operations: llm.c-style free functions on
// float buffers with explicit dimensions, the readable CPU reference that
// every other backend (trainer_sdk/trainer/cuda/) is checked against.
//
// Conventions shared by every backend (the Backend interface in backend.h
// mirrors these functions one to one, on device pointers):
// - Activations are NCHW, contiguous. Conv weights are OIHW
//   [out_c][in_c][k][k]; linear weights are [out_features][in_features].
// - Backward functions OVERWRITE their gradient outputs (no accumulation);
//   a gradient output passed as nullptr is not computed.
// - Buffers may not alias unless a comment says so.
// - CPU: `pool` (nullable = run on the calling thread) splits the work into
//   chunks whose boundaries do not depend on the number of threads, and
//   reductions across chunks are summed in chunk order, so results are
//   bit-identical for any thread count and any scheduling.
//
// Thread safety: the functions keep no state besides per-thread scratch
// buffers (reused across calls); distinct calls may run concurrently on
// disjoint outputs.
#ifndef HYPERTUNE_TRAINER_SDK_TRAINER_OPS_H_
#define HYPERTUNE_TRAINER_SDK_TRAINER_OPS_H_

#include <cstddef>
#include <cstdint>

namespace hypertune::train {

class ThreadPool;

// A 2-d convolution without bias: in [n][in_c][in_h][in_w] ->
// out [n][out_c][out_h()][out_w()], square kernel, zero padding.
struct ConvShape {
  int n = 0;
  int in_c = 0;
  int in_h = 0;
  int in_w = 0;
  int out_c = 0;
  int kernel = 3;
  int stride = 1;
  int pad = 1;
  int out_h() const { return (in_h + 2 * pad - kernel) / stride + 1; }
  int out_w() const { return (in_w + 2 * pad - kernel) / stride + 1; }
  size_t in_size() const { return size_t(n) * in_c * in_h * in_w; }
  size_t out_size() const { return size_t(n) * out_c * out_h() * out_w(); }
  size_t weight_size() const { return size_t(out_c) * in_c * kernel * kernel; }
};

// Max pooling over square windows; padded cells never win.
struct PoolShape {
  int n = 0;
  int c = 0;
  int in_h = 0;
  int in_w = 0;
  int kernel = 3;
  int stride = 2;
  int pad = 1;
  int out_h() const { return (in_h + 2 * pad - kernel) / stride + 1; }
  int out_w() const { return (in_w + 2 * pad - kernel) / stride + 1; }
  size_t in_size() const { return size_t(n) * c * in_h * in_w; }
  size_t out_size() const { return size_t(n) * c * out_h() * out_w(); }
};

// Per-channel batch normalization over n x hw values per channel.
struct BatchNormShape {
  int n = 0;
  int c = 0;
  int hw = 0;  // height * width
  float eps = 1e-5f;
  float momentum =
      0.1f;  // running = (1 - momentum) * running + momentum * batch
  size_t size() const { return size_t(n) * c * hw; }
};

// One SGD-with-momentum step, PyTorch convention:
//   g' = g + weight_decay * w;  v = momentum * v + g';
//   w -= lr * (nesterov ? g' + momentum * v : v).
struct SgdStep {
  float lr = 0.1f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

// out = conv(in, weight).
void Conv2dForward(float* out, const float* in, const float* weight,
                   const ConvShape& s, ThreadPool* pool = nullptr);
// d_in = conv^T(d_out) (skipped when null); d_weight = dL/dweight.
void Conv2dBackward(float* d_in, float* d_weight, const float* d_out,
                    const float* in, const float* weight, const ConvShape& s,
                    ThreadPool* pool = nullptr);

// Training-mode batch norm with batch statistics, optionally fused with a
// residual add and a ReLU:
//   out = act(gamma * (in - mean) * inv_std + beta + residual)
// where act is ReLU when `relu`, identity otherwise, and residual is skipped
// when null. Writes the batch mean and 1/sqrt(var + eps) (biased variance)
// into save_mean / save_inv_std [c] for the backward pass, and updates
// running_mean / running_var [c] (unbiased variance, like PyTorch).
// `out` may alias `residual`.
void BatchNormForwardTrain(float* out, float* save_mean, float* save_inv_std,
                           float* running_mean, float* running_var,
                           const float* in, const float* gamma,
                           const float* beta, const float* residual, bool relu,
                           const BatchNormShape& s, ThreadPool* pool = nullptr);
// Inference-mode batch norm with the running statistics; otherwise as above.
void BatchNormForwardEval(float* out, const float* in, const float* gamma,
                          const float* beta, const float* running_mean,
                          const float* running_var, const float* residual,
                          bool relu, const BatchNormShape& s,
                          ThreadPool* pool = nullptr);
// Gradients of the (unfused) normalization given d_out = dL/d(bn output):
// callers apply ReluBackward first when the forward pass was fused.
void BatchNormBackward(float* d_in, float* d_gamma, float* d_beta,
                       const float* d_out, const float* in, const float* gamma,
                       const float* save_mean, const float* save_inv_std,
                       const BatchNormShape& s, ThreadPool* pool = nullptr);

// out = max(in, 0). In place allowed.
void ReluForward(float* out, const float* in, size_t count,
                 ThreadPool* pool = nullptr);
// d_in = out > 0 ? d_out : 0, where `out` is the forward output. In place
// (d_in == d_out) allowed.
void ReluBackward(float* d_in, const float* d_out, const float* out,
                  size_t count, ThreadPool* pool = nullptr);
// y += x.
void AddInPlace(float* y, const float* x, size_t count,
                ThreadPool* pool = nullptr);

// Max pooling; `argmax` [out_size] receives each output's input offset
// within its (image, channel) plane, for the backward pass.
void MaxPoolForward(float* out, int32_t* argmax, const float* in,
                    const PoolShape& s, ThreadPool* pool = nullptr);
void MaxPoolBackward(float* d_in, const float* d_out, const int32_t* argmax,
                     const PoolShape& s, ThreadPool* pool = nullptr);

// out [n][c] = mean over hw of in [n][c][hw].
void GlobalAvgPoolForward(float* out, const float* in, int n, int c, int hw,
                          ThreadPool* pool = nullptr);
void GlobalAvgPoolBackward(float* d_in, const float* d_out, int n, int c,
                           int hw, ThreadPool* pool = nullptr);

// out [n][out_f] = in [n][in_f] * weight^T + bias.
void LinearForward(float* out, const float* in, const float* weight,
                   const float* bias, int n, int in_f, int out_f,
                   ThreadPool* pool = nullptr);
void LinearBackward(float* d_in, float* d_weight, float* d_bias,
                    const float* d_out, const float* in, const float* weight,
                    int n, int in_f, int out_f, ThreadPool* pool = nullptr);

// Softmax cross-entropy with label smoothing eps: the target of example i
// is (1 - eps) one_hot(labels[i]) + eps / k. Writes losses [n] (per
// example) and, when d_logits is not null, d_logits [n][k] = dL/dlogits of
// the MEAN loss, (softmax - target) / n. REQUIRES: 0 <= labels[i] < k.
void SoftmaxCrossEntropy(float* losses, float* d_logits, const float* logits,
                         const int32_t* labels, int n, int k, float smoothing,
                         ThreadPool* pool = nullptr);

// One SgdStep over `count` parameters; `velocity` holds the momentum buffer.
void SgdUpdate(float* param, float* velocity, const float* grad, size_t count,
               const SgdStep& step, ThreadPool* pool = nullptr);

}  // namespace hypertune::train

#endif  // HYPERTUNE_TRAINER_SDK_TRAINER_OPS_H_
