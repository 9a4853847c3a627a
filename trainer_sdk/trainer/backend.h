// Backend: where the model's buffers live and its operations run. The model
// (model.h) only talks to this interface, so the CPU reference and the CUDA
// backend are interchangeable at run time (`--device cpu|cuda`).
//
// Every op has the semantics of its namesake in ops.h (same argument order,
// same overwrite-not-accumulate convention, NCHW layout), on pointers this
// backend allocated. Ops may run asynchronously (a CUDA stream); CopyToHost
// and Synchronize wait for all earlier work.
//
// How a CUDA twin plugs in: trainer_sdk/trainer/cuda/ defines MakeCudaBackend
// (declared below) and the CMake block that builds it defines
// HYPERTUNE_TRAIN_CUDA for hypertune_train_core; MakeBackend("cuda", ...)
// then calls it, and without that define answers "built without CUDA".
// Parity tests compare each Backend op against the ops.h function on the
// same inputs.
//
// Errors: ops do not fail on valid arguments; device failures (out of
// memory, a launch error) are recorded and reported by error(), which stays
// set (the backend is unusable afterwards). Allocate returns nullptr on
// failure and records the error.
//
// Thread safety: one Backend is used by one thread at a time.
#ifndef HYPERTUNE_TRAINER_SDK_TRAINER_BACKEND_H_
#define HYPERTUNE_TRAINER_SDK_TRAINER_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "trainer_sdk/trainer/ops.h"

namespace hypertune::train {

struct BackendOptions {
  // CPU worker threads; 0 = std::thread::hardware_concurrency().
  int threads = 0;
  // CUDA device ordinal.
  int device = 0;
  // CUDA: allow reduced-precision math (TF32 / bf16 tensor cores) inside
  // ops; buffers stay float32. Ignored by the CPU backend.
  bool mixed_precision = false;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda".
  virtual std::string name() const = 0;
  // Empty while healthy; else what failed (e.g. "CUDA out of memory ...").
  virtual std::string error() const = 0;

  // Memory: `bytes` of device memory, zero-filled; nullptr on failure.
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  virtual void CopyToDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual void CopyToHost(void* dst, const void* src, size_t bytes) = 0;
  virtual void CopyOnDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual void Zero(void* dst, size_t bytes) = 0;
  // Waits until all queued work finished.
  virtual void Synchronize() = 0;

  // Ops: see ops.h.
  virtual void Conv2dForward(float* out, const float* in, const float* weight,
                             const ConvShape& s) = 0;
  virtual void Conv2dBackward(float* d_in, float* d_weight, const float* d_out,
                              const float* in, const float* weight,
                              const ConvShape& s) = 0;
  virtual void BatchNormForwardTrain(float* out, float* save_mean,
                                     float* save_inv_std, float* running_mean,
                                     float* running_var, const float* in,
                                     const float* gamma, const float* beta,
                                     const float* residual, bool relu,
                                     const BatchNormShape& s) = 0;
  virtual void BatchNormForwardEval(float* out, const float* in,
                                    const float* gamma, const float* beta,
                                    const float* running_mean,
                                    const float* running_var,
                                    const float* residual, bool relu,
                                    const BatchNormShape& s) = 0;
  virtual void BatchNormBackward(float* d_in, float* d_gamma, float* d_beta,
                                 const float* d_out, const float* in,
                                 const float* gamma, const float* save_mean,
                                 const float* save_inv_std,
                                 const BatchNormShape& s) = 0;
  virtual void ReluForward(float* out, const float* in, size_t count) = 0;
  virtual void ReluBackward(float* d_in, const float* d_out, const float* out,
                            size_t count) = 0;
  virtual void AddInPlace(float* y, const float* x, size_t count) = 0;
  virtual void MaxPoolForward(float* out, int32_t* argmax, const float* in,
                              const PoolShape& s) = 0;
  virtual void MaxPoolBackward(float* d_in, const float* d_out,
                               const int32_t* argmax, const PoolShape& s) = 0;
  virtual void GlobalAvgPoolForward(float* out, const float* in, int n, int c,
                                    int hw) = 0;
  virtual void GlobalAvgPoolBackward(float* d_in, const float* d_out, int n,
                                     int c, int hw) = 0;
  virtual void LinearForward(float* out, const float* in, const float* weight,
                             const float* bias, int n, int in_f, int out_f) = 0;
  virtual void LinearBackward(float* d_in, float* d_weight, float* d_bias,
                              const float* d_out, const float* in,
                              const float* weight, int n, int in_f,
                              int out_f) = 0;
  virtual void SoftmaxCrossEntropy(float* losses, float* d_logits,
                                   const float* logits, const int32_t* labels,
                                   int n, int k, float smoothing) = 0;
  virtual void SgdUpdate(float* param, float* velocity, const float* grad,
                         size_t count, const SgdStep& step) = 0;
};

// The CPU reference backend (always available).
std::unique_ptr<Backend> MakeCpuBackend(const BackendOptions& options);

// Defined only in trainer_sdk/trainer/cuda/ (built with HYPERTUNE_TRAIN_CUDA):
// a backend on CUDA device options.device, or nullptr with *error set (no
// device, driver too old, ...).
std::unique_ptr<Backend> MakeCudaBackend(const BackendOptions& options,
                                         std::string* error);

// "cpu" or "cuda"; nullptr with *error set for an unknown name or "cuda" in
// a build without CUDA.
std::unique_ptr<Backend> MakeBackend(const std::string& device,
                                     const BackendOptions& options,
                                     std::string* error);

// Whether this build includes the CUDA backend.
bool CudaBuilt();

// A typed, owning device array; frees through its backend. Move-only.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  // REQUIRES: backend outlives this array.
  DeviceArray(Backend* backend, size_t size)
      : backend_(backend),
        size_(size),
        data_(size == 0
                  ? nullptr
                  : static_cast<T*>(backend->Allocate(size * sizeof(T)))) {}
  DeviceArray(DeviceArray&& other) noexcept { *this = std::move(other); }
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    if (this != &other) {
      Reset();
      backend_ = other.backend_;
      size_ = other.size_;
      data_ = other.data_;
      other.data_ = nullptr;
      other.size_ = 0;
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { Reset(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  // False when allocation failed (see Backend::error()).
  bool ok() const { return size_ == 0 || data_ != nullptr; }

 private:
  void Reset() {
    if (data_ != nullptr) backend_->Free(data_);
    data_ = nullptr;
    size_ = 0;
  }

  Backend* backend_ = nullptr;
  size_t size_ = 0;
  T* data_ = nullptr;
};

}  // namespace hypertune::train

#endif  // HYPERTUNE_TRAINER_SDK_TRAINER_BACKEND_H_
