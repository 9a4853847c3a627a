// The CPU backend (ops.h on host memory with a thread pool) and the
// backend factory.
#include "trainer_sdk/trainer/backend.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "trainer_sdk/trainer/thread_pool.h"

namespace hypertune::train {
namespace {

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(int threads) : pool_(threads) {}

  std::string name() const override { return "cpu"; }
  std::string error() const override { return error_; }

  void* Allocate(size_t bytes) override {
    // 64-byte alignment suits AVX-512 loads; calloc gives the zero fill.
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (p == nullptr) {
      error_ =
          "out of host memory allocating " + std::to_string(bytes) + " bytes";
      return nullptr;
    }
    std::memset(p, 0, rounded);
    return p;
  }
  void Free(void* ptr) override { std::free(ptr); }
  void CopyToDevice(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void CopyOnDevice(void* dst, const void* src, size_t bytes) override {
    std::memmove(dst, src, bytes);
  }
  void Zero(void* dst, size_t bytes) override { std::memset(dst, 0, bytes); }
  void Synchronize() override {}

  void Conv2dForward(float* out, const float* in, const float* weight,
                     const ConvShape& s) override {
    train::Conv2dForward(out, in, weight, s, &pool_);
  }
  void Conv2dBackward(float* d_in, float* d_weight, const float* d_out,
                      const float* in, const float* weight,
                      const ConvShape& s) override {
    train::Conv2dBackward(d_in, d_weight, d_out, in, weight, s, &pool_);
  }
  void BatchNormForwardTrain(float* out, float* save_mean, float* save_inv_std,
                             float* running_mean, float* running_var,
                             const float* in, const float* gamma,
                             const float* beta, const float* residual,
                             bool relu, const BatchNormShape& s) override {
    train::BatchNormForwardTrain(out, save_mean, save_inv_std, running_mean,
                                 running_var, in, gamma, beta, residual, relu,
                                 s, &pool_);
  }
  void BatchNormForwardEval(float* out, const float* in, const float* gamma,
                            const float* beta, const float* running_mean,
                            const float* running_var, const float* residual,
                            bool relu, const BatchNormShape& s) override {
    train::BatchNormForwardEval(out, in, gamma, beta, running_mean, running_var,
                                residual, relu, s, &pool_);
  }
  void BatchNormBackward(float* d_in, float* d_gamma, float* d_beta,
                         const float* d_out, const float* in,
                         const float* gamma, const float* save_mean,
                         const float* save_inv_std,
                         const BatchNormShape& s) override {
    train::BatchNormBackward(d_in, d_gamma, d_beta, d_out, in, gamma, save_mean,
                             save_inv_std, s, &pool_);
  }
  void ReluForward(float* out, const float* in, size_t count) override {
    train::ReluForward(out, in, count, &pool_);
  }
  void ReluBackward(float* d_in, const float* d_out, const float* out,
                    size_t count) override {
    train::ReluBackward(d_in, d_out, out, count, &pool_);
  }
  void AddInPlace(float* y, const float* x, size_t count) override {
    train::AddInPlace(y, x, count, &pool_);
  }
  void MaxPoolForward(float* out, int32_t* argmax, const float* in,
                      const PoolShape& s) override {
    train::MaxPoolForward(out, argmax, in, s, &pool_);
  }
  void MaxPoolBackward(float* d_in, const float* d_out, const int32_t* argmax,
                       const PoolShape& s) override {
    train::MaxPoolBackward(d_in, d_out, argmax, s, &pool_);
  }
  void GlobalAvgPoolForward(float* out, const float* in, int n, int c,
                            int hw) override {
    train::GlobalAvgPoolForward(out, in, n, c, hw, &pool_);
  }
  void GlobalAvgPoolBackward(float* d_in, const float* d_out, int n, int c,
                             int hw) override {
    train::GlobalAvgPoolBackward(d_in, d_out, n, c, hw, &pool_);
  }
  void LinearForward(float* out, const float* in, const float* weight,
                     const float* bias, int n, int in_f, int out_f) override {
    train::LinearForward(out, in, weight, bias, n, in_f, out_f, &pool_);
  }
  void LinearBackward(float* d_in, float* d_weight, float* d_bias,
                      const float* d_out, const float* in, const float* weight,
                      int n, int in_f, int out_f) override {
    train::LinearBackward(d_in, d_weight, d_bias, d_out, in, weight, n, in_f,
                          out_f, &pool_);
  }
  void SoftmaxCrossEntropy(float* losses, float* d_logits, const float* logits,
                           const int32_t* labels, int n, int k,
                           float smoothing) override {
    train::SoftmaxCrossEntropy(losses, d_logits, logits, labels, n, k,
                               smoothing, &pool_);
  }
  void SgdUpdate(float* param, float* velocity, const float* grad, size_t count,
                 const SgdStep& step) override {
    train::SgdUpdate(param, velocity, grad, count, step, &pool_);
  }

 private:
  ThreadPool pool_;
  std::string error_;
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend(const BackendOptions& options) {
  int threads = options.threads;
  if (threads <= 0) threads = int(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  return std::make_unique<CpuBackend>(threads);
}

bool CudaBuilt() {
#ifdef HYPERTUNE_TRAIN_CUDA
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Backend> MakeBackend(const std::string& device,
                                     const BackendOptions& options,
                                     std::string* error) {
  if (device == "cpu") return MakeCpuBackend(options);
  if (device == "cuda") {
#ifdef HYPERTUNE_TRAIN_CUDA
    return MakeCudaBackend(options, error);
#else
    if (error != nullptr)
      *error = "device \"cuda\": this build has no CUDA backend";
    return nullptr;
#endif
  }
  if (error != nullptr) {
    *error = "device \"" + device + "\": expected cpu or cuda";
  }
  return nullptr;
}

}  // namespace hypertune::train
