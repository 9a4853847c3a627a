// The CUDA backend (MakeCudaBackend in backend.h): device memory and one
// stream; the elementwise, batch-norm, pooling, loss and SGD ops are the
// kernels of kernels.cu; the matrix products are cuBLAS (linear layers, and
// convolutions as im2col + strided-batched GEMM) or, where this build found
// cuDNN (HYPERTUNE_TRAIN_CUDNN), cuDNN convolutions with the im2col path as
// the fallback for any shape cuDNN declines.
//
// Precision: buffers are float32 throughout (master weights, activations,
// optimizer state). With BackendOptions::mixed_precision the products use
// tensor cores: cuBLAS GEMMs with CUBLAS_COMPUTE_32F_FAST_16BF (bf16 inputs,
// fp32 accumulation and output), cuDNN convolutions in TF32; without it
// they are plain fp32 (cuBLAS CUBLAS_COMPUTE_32F, cuDNN FMA-only kernels),
// which is what the parity tests hold to tight tolerances.
//
// Environment: HYPERTUNE_CUDA_CONV=im2col forces the cuBLAS convolutions
// even where cuDNN is available (the parity test runs both);
// HYPERTUNE_CUDA_VERBOSE=1 prints the device and the convolution path to
// stderr once.
//
// Errors: the first failing CUDA/cuBLAS/cuDNN call is recorded in error()
// and every later op is skipped (the interface's "unusable afterwards").
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "trainer_sdk/trainer/backend.h"
#include "trainer_sdk/trainer/cuda/kernels.h"

#ifdef HYPERTUNE_TRAIN_CUDNN
#include <cudnn.h>
#endif

namespace hypertune::train {
namespace {

// im2col buffers are processed in chunks of images of at most this many
// floats (1 GiB).
constexpr size_t kColumnBudget = size_t(1) << 28;

const char* CublasName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED (out of memory)";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "unknown cuBLAS status";
  }
}

// Images per im2col chunk when each image needs `per_image` floats.
int ImagesPerChunk(int n, size_t per_image) {
  if (per_image == 0) return std::max(1, n);
  return int(
      std::clamp<size_t>(kColumnBudget / per_image, 1, size_t(std::max(1, n))));
}

class CudaBackend : public Backend {
 public:
  // nullptr with *error set when there is no usable device.
  static std::unique_ptr<CudaBackend> Create(const BackendOptions& options,
                                             std::string* error);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  std::string error() const override { return error_; }

  void* Allocate(size_t bytes) override;
  void Free(void* ptr) override;
  void CopyToDevice(void* dst, const void* src, size_t bytes) override;
  void CopyToHost(void* dst, const void* src, size_t bytes) override;
  void CopyOnDevice(void* dst, const void* src, size_t bytes) override;
  void Zero(void* dst, size_t bytes) override;
  void Synchronize() override;

  void Conv2dForward(float* out, const float* in, const float* weight,
                     const ConvShape& s) override;
  void Conv2dBackward(float* d_in, float* d_weight, const float* d_out,
                      const float* in, const float* weight,
                      const ConvShape& s) override;
  void BatchNormForwardTrain(float* out, float* save_mean, float* save_inv_std,
                             float* running_mean, float* running_var,
                             const float* in, const float* gamma,
                             const float* beta, const float* residual,
                             bool relu, const BatchNormShape& s) override;
  void BatchNormForwardEval(float* out, const float* in, const float* gamma,
                            const float* beta, const float* running_mean,
                            const float* running_var, const float* residual,
                            bool relu, const BatchNormShape& s) override;
  void BatchNormBackward(float* d_in, float* d_gamma, float* d_beta,
                         const float* d_out, const float* in,
                         const float* gamma, const float* save_mean,
                         const float* save_inv_std,
                         const BatchNormShape& s) override;
  void ReluForward(float* out, const float* in, size_t count) override;
  void ReluBackward(float* d_in, const float* d_out, const float* out,
                    size_t count) override;
  void AddInPlace(float* y, const float* x, size_t count) override;
  void MaxPoolForward(float* out, int32_t* argmax, const float* in,
                      const PoolShape& s) override;
  void MaxPoolBackward(float* d_in, const float* d_out, const int32_t* argmax,
                       const PoolShape& s) override;
  void GlobalAvgPoolForward(float* out, const float* in, int n, int c,
                            int hw) override;
  void GlobalAvgPoolBackward(float* d_in, const float* d_out, int n, int c,
                             int hw) override;
  void LinearForward(float* out, const float* in, const float* weight,
                     const float* bias, int n, int in_f, int out_f) override;
  void LinearBackward(float* d_in, float* d_weight, float* d_bias,
                      const float* d_out, const float* in, const float* weight,
                      int n, int in_f, int out_f) override;
  void SoftmaxCrossEntropy(float* losses, float* d_logits, const float* logits,
                           const int32_t* labels, int n, int k,
                           float smoothing) override;
  void SgdUpdate(float* param, float* velocity, const float* grad, size_t count,
                 const SgdStep& step) override;

 private:
  explicit CudaBackend(const BackendOptions& options)
      : mixed_(options.mixed_precision) {}

  bool ok() const { return error_.empty(); }
  // Each returns whether `status` is a success, recording the first failure.
  bool Check(cudaError_t status, const char* what);
  bool Check(cublasStatus_t status, const char* what);
  // Scratch of at least `bytes` (valid until the next call); nullptr on
  // failure.
  void* Workspace(size_t bytes);

  // Column-major, strided-batched C = op(A) op(B) + beta C on float buffers,
  // with the precision of this backend (see the file comment).
  void Gemm(bool trans_a, bool trans_b, int m, int n, int k, const float* a,
            int lda, long long stride_a, const float* b, int ldb,
            long long stride_b, float beta, float* c, int ldc,
            long long stride_c, int batch);
  void Im2ColForward(float* out, const float* in, const float* weight,
                     const ConvShape& s);
  void Im2ColBackward(float* d_in, float* d_weight, const float* d_out,
                      const float* in, const float* weight, const ConvShape& s);

#ifdef HYPERTUNE_TRAIN_CUDNN
  // cuDNN descriptors and the chosen algorithms of one ConvShape.
  struct ConvPlan {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    bool usable = false;  // descriptors built and shapes agree with ops.h
    // Per direction: 0 = not searched yet, 1 = found, -1 = cuDNN declined.
    int fwd_state = 0, data_state = 0, filter_state = 0;
    cudnnConvolutionFwdAlgo_t fwd{};
    cudnnConvolutionBwdDataAlgo_t data{};
    cudnnConvolutionBwdFilterAlgo_t filter{};
    cudnnMathType_t fwd_math{}, data_math{}, filter_math{};
    size_t fwd_bytes = 0, data_bytes = 0, filter_bytes = 0;
  };
  ConvPlan* Plan(const ConvShape& s);
  void DestroyPlan(ConvPlan& plan);
  // Each returns false when cuDNN declined (the caller falls back).
  bool CudnnForward(float* out, const float* in, const float* weight,
                    const ConvShape& s);
  bool CudnnBackwardData(float* d_in, const float* d_out, const float* weight,
                         const ConvShape& s);
  bool CudnnBackwardFilter(float* d_weight, const float* d_out, const float* in,
                           const ConvShape& s);

  cudnnHandle_t cudnn_ = nullptr;
  std::map<std::array<int, 8>, std::unique_ptr<ConvPlan>> plans_;
#endif

  bool mixed_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::string error_;
};

std::unique_ptr<CudaBackend> CudaBackend::Create(const BackendOptions& options,
                                                 std::string* error) {
  auto fail = [error](const std::string& message) {
    if (error != nullptr) *error = message;
    return nullptr;
  };
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return fail(std::string("no CUDA device: cudaGetDeviceCount: ") +
                cudaGetErrorString(status));
  }
  if (count == 0)
    return fail("no CUDA device: cudaGetDeviceCount found 0 devices");
  if (options.device < 0 || options.device >= count) {
    return fail("device: CUDA device " + std::to_string(options.device) +
                " does not exist (" + std::to_string(count) + " found)");
  }
  std::unique_ptr<CudaBackend> backend(new CudaBackend(options));
  CudaBackend& b = *backend;
  if (b.Check(cudaSetDevice(options.device), "cudaSetDevice") &&
      b.Check(cudaStreamCreateWithFlags(&b.stream_, cudaStreamNonBlocking),
              "cudaStreamCreate") &&
      b.Check(cublasCreate(&b.cublas_), "cublasCreate")) {
    b.Check(cublasSetStream(b.cublas_, b.stream_), "cublasSetStream");
  }
  const char* conv_env = std::getenv("HYPERTUNE_CUDA_CONV");
  const bool force_im2col =
      conv_env != nullptr && std::string(conv_env) == "im2col";
  std::string conv_path = "im2col + cuBLAS";
#ifdef HYPERTUNE_TRAIN_CUDNN
  if (b.ok() && !force_im2col) {
    if (cudnnCreate(&b.cudnn_) == CUDNN_STATUS_SUCCESS &&
        cudnnSetStream(b.cudnn_, b.stream_) == CUDNN_STATUS_SUCCESS) {
      conv_path = "cuDNN " + std::to_string(cudnnGetVersion()) +
                  " (im2col + cuBLAS fallback)";
    } else if (b.cudnn_ != nullptr) {
      cudnnDestroy(b.cudnn_);
      b.cudnn_ = nullptr;
    }
  }
#else
  (void)force_im2col;
#endif
  if (!b.ok()) return fail(b.error_);
  const char* verbose = std::getenv("HYPERTUNE_CUDA_VERBOSE");
  if (verbose != nullptr && std::string(verbose) == "1") {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, options.device);
    std::fprintf(
        stderr,
        "hypertune cuda: device %d %s (sm_%d%d, %.1f GiB), convolutions: "
        "%s, mixed precision: %s\n",
        options.device, prop.name, prop.major, prop.minor,
        double(prop.totalGlobalMem) / (1 << 30), conv_path.c_str(),
        options.mixed_precision ? "on" : "off");
  }
  return backend;
}

CudaBackend::~CudaBackend() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
#ifdef HYPERTUNE_TRAIN_CUDNN
  for (auto& [key, plan] : plans_) DestroyPlan(*plan);
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
#endif
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

bool CudaBackend::Check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  cudaGetLastError();  // clear it if it is not sticky
  if (ok()) {
    error_ =
        std::string(status == cudaErrorMemoryAllocation ? "CUDA out of memory: "
                                                        : "CUDA error: ") +
        what + ": " + cudaGetErrorString(status);
  }
  return false;
}

bool CudaBackend::Check(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return true;
  if (ok())
    error_ = std::string("cuBLAS error: ") + what + ": " + CublasName(status);
  return false;
}

void* CudaBackend::Workspace(size_t bytes) {
  if (!ok()) return nullptr;
  if (bytes <= workspace_bytes_) return workspace_;
  // Earlier ops on the stream may still use the old buffer.
  if (!Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"))
    return nullptr;
  if (workspace_ != nullptr) cudaFree(workspace_);
  workspace_ = nullptr;
  workspace_bytes_ = 0;
  const size_t rounded = (bytes + (size_t(1) << 20) - 1) >> 20 << 20;
  if (!Check(cudaMalloc(&workspace_, rounded),
             ("cudaMalloc of a " + std::to_string(rounded) + "-byte workspace")
                 .c_str())) {
    workspace_ = nullptr;
    return nullptr;
  }
  workspace_bytes_ = rounded;
  return workspace_;
}

void* CudaBackend::Allocate(size_t bytes) {
  if (!ok()) return nullptr;
  void* p = nullptr;
  if (!Check(cudaMalloc(&p, std::max<size_t>(bytes, 1)),
             ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str())) {
    return nullptr;
  }
  if (!Check(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync")) {
    cudaFree(p);
    return nullptr;
  }
  return p;
}

void CudaBackend::Free(void* ptr) {
  if (ptr == nullptr) return;
  // Work queued on the stream may still read the buffer.
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  cudaFree(ptr);
}

void CudaBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  // From pageable memory the call returns once `src` was staged, so the
  // caller may reuse it at once.
  if (ok() && bytes > 0) {
    Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync to the device");
  }
}

void CudaBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  if (ok() && bytes > 0 &&
      Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync to the host")) {
    Check(cudaStreamSynchronize(stream_),
          "cudaStreamSynchronize after a copy to the host");
  }
}

void CudaBackend::CopyOnDevice(void* dst, const void* src, size_t bytes) {
  if (ok() && bytes > 0) {
    Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
          "cudaMemcpyAsync on the device");
  }
}

void CudaBackend::Zero(void* dst, size_t bytes) {
  if (ok() && bytes > 0)
    Check(cudaMemsetAsync(dst, 0, bytes, stream_), "cudaMemsetAsync");
}

void CudaBackend::Synchronize() {
  if (ok()) Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

void CudaBackend::Gemm(bool trans_a, bool trans_b, int m, int n, int k,
                       const float* a, int lda, long long stride_a,
                       const float* b, int ldb, long long stride_b, float beta,
                       float* c, int ldc, long long stride_c, int batch) {
  if (!ok()) return;
  const float alpha = 1.0f;
  const cublasComputeType_t compute =
      mixed_ ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F;
  Check(cublasGemmStridedBatchedEx(
            cublas_, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
            trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, a, CUDA_R_32F,
            lda, stride_a, b, CUDA_R_32F, ldb, stride_b, &beta, c, CUDA_R_32F,
            ldc, stride_c, batch, compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
}

// The im2col convolution, per chunk of g images, with P = out_h * out_w and
// K = in_c * k * k. In cuBLAS's column-major terms a row-major [r][c] array
// is a c x r matrix, so with col [K][g*P] (Im2Col's layout):
//   out_i [out_c][P]  = W [out_c][K] col_i [K][P]     one batched GEMM
//   dW [out_c][K]     = dout' [out_c][g*P] col^T      one GEMM over g*P
//   dcol_i [K][P]     = W^T dout_i                    one batched GEMM
// where dout' is d_out regrouped channel-major (ChannelMajor). Pointwise
// stride-1 convolutions use the input itself as col in the forward pass
// and write d_in directly.
void CudaBackend::Im2ColForward(float* out, const float* in,
                                const float* weight, const ConvShape& s) {
  const int K = s.in_c * s.kernel * s.kernel;
  const int P = s.out_h() * s.out_w();
  const size_t in_image = size_t(s.in_c) * s.in_h * s.in_w;
  const size_t out_image = size_t(s.out_c) * P;
  const bool direct = s.kernel == 1 && s.stride == 1 && s.pad == 0;
  const int g = direct ? s.n : ImagesPerChunk(s.n, size_t(K) * P);
  float* col = nullptr;
  if (!direct) {
    col = static_cast<float*>(Workspace(sizeof(float) * size_t(K) * P * g));
    if (col == nullptr) return;
  }
  for (int first = 0; first < s.n && ok(); first += g) {
    const int images = std::min(g, s.n - first);
    const float* a = in + first * in_image;
    int lda = P;
    long long stride_a = (long long)K * P;
    if (!direct) {
      Check(cuda::Im2Col(col, a, s, images, stream_), "Im2Col launch");
      a = col;
      lda = images * P;
      stride_a = P;
    }
    Gemm(false, false, P, s.out_c, K, a, lda, stride_a, weight, K, 0, 0.0f,
         out + first * out_image, P, (long long)out_image, images);
  }
}

void CudaBackend::Im2ColBackward(float* d_in, float* d_weight,
                                 const float* d_out, const float* in,
                                 const float* weight, const ConvShape& s) {
  const int K = s.in_c * s.kernel * s.kernel;
  const int P = s.out_h() * s.out_w();
  const size_t in_image = size_t(s.in_c) * s.in_h * s.in_w;
  const size_t out_image = size_t(s.out_c) * P;
  const bool direct = s.kernel == 1 && s.stride == 1 && s.pad == 0;
  const size_t col_image = d_weight != nullptr ? size_t(K) * P : 0;
  const size_t dcol_image = d_in != nullptr && !direct ? size_t(K) * P : 0;
  const int g = ImagesPerChunk(s.n, col_image + out_image + dcol_image);
  float* base = static_cast<float*>(
      Workspace(sizeof(float) * (col_image + out_image + dcol_image) * g));
  if (base == nullptr) return;
  float* col = base;
  float* dout_t = col + col_image * g;
  float* dcol = dout_t + out_image * g;
  for (int first = 0; first < s.n && ok(); first += g) {
    const int images = std::min(g, s.n - first);
    const int width = images * P;
    Check(cuda::ChannelMajor(dout_t, d_out + first * out_image, images, s.out_c,
                             P, stream_),
          "ChannelMajor launch");
    if (d_weight != nullptr) {
      Check(cuda::Im2Col(col, in + first * in_image, s, images, stream_),
            "Im2Col launch");
      Gemm(true, false, K, s.out_c, width, col, width, 0, dout_t, width, 0,
           first == 0 ? 0.0f : 1.0f, d_weight, K, 0, 1);
    }
    if (d_in != nullptr) {
      float* dst = direct ? d_in + first * in_image : dcol;
      Gemm(false, true, P, K, s.out_c, dout_t, width, P, weight, K, 0, 0.0f,
           dst, P, (long long)K * P, images);
      if (!direct) {
        Check(cuda::Col2Im(d_in + first * in_image, dcol, s, images, stream_),
              "Col2Im launch");
      }
    }
  }
}

#ifdef HYPERTUNE_TRAIN_CUDNN

void CudaBackend::DestroyPlan(ConvPlan& plan) {
  if (plan.x != nullptr) cudnnDestroyTensorDescriptor(plan.x);
  if (plan.y != nullptr) cudnnDestroyTensorDescriptor(plan.y);
  if (plan.w != nullptr) cudnnDestroyFilterDescriptor(plan.w);
  if (plan.conv != nullptr) cudnnDestroyConvolutionDescriptor(plan.conv);
}

CudaBackend::ConvPlan* CudaBackend::Plan(const ConvShape& s) {
  const std::array<int, 8> key = {s.n,     s.in_c,   s.in_h,   s.in_w,
                                  s.out_c, s.kernel, s.stride, s.pad};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  auto plan = std::make_unique<ConvPlan>();
  ConvPlan& p = *plan;
  int n = 0, c = 0, h = 0, w = 0;
  p.usable =
      cudnnCreateTensorDescriptor(&p.x) == CUDNN_STATUS_SUCCESS &&
      cudnnCreateTensorDescriptor(&p.y) == CUDNN_STATUS_SUCCESS &&
      cudnnCreateFilterDescriptor(&p.w) == CUDNN_STATUS_SUCCESS &&
      cudnnCreateConvolutionDescriptor(&p.conv) == CUDNN_STATUS_SUCCESS &&
      cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n,
                                 s.in_c, s.in_h,
                                 s.in_w) == CUDNN_STATUS_SUCCESS &&
      cudnnSetFilter4dDescriptor(p.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                 s.out_c, s.in_c, s.kernel,
                                 s.kernel) == CUDNN_STATUS_SUCCESS &&
      cudnnSetConvolution2dDescriptor(
          p.conv, s.pad, s.pad, s.stride, s.stride, 1, 1,
          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) == CUDNN_STATUS_SUCCESS &&
      cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &n, &c, &h, &w) ==
          CUDNN_STATUS_SUCCESS &&
      n == s.n && c == s.out_c && h == s.out_h() && w == s.out_w() &&
      cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n,
                                 s.out_c, h, w) == CUDNN_STATUS_SUCCESS;
  ConvPlan* result = plan.get();
  plans_.emplace(key, std::move(plan));
  return result;
}

// Whether cuDNN turned a call down before running it (bad parameter, not
// supported), so that the im2col path can take over instead of failing.
bool Declined(cudnnStatus_t status) {
#if CUDNN_MAJOR >= 9
  const int category = CUDNN_STATUS_CATEGORY(int(status));
#else
  const int category = int(status);
#endif
  return category == CUDNN_STATUS_BAD_PARAM ||
         category == CUDNN_STATUS_NOT_SUPPORTED;
}

// The math type a search runs under: fp32 mode allows FMA kernels only
// (no TF32), mixed precision allows tensor cores.
cudnnMathType_t SearchMath(bool mixed) {
  return mixed ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
}

// The math type to run a found algorithm under: the one cuDNN timed it with
// in mixed mode (what PyTorch does), FMA-only in fp32 mode (the search ran
// under it).
template <typename Perf>
cudnnMathType_t RunMath(const Perf& perf, bool mixed) {
  return mixed ? perf.mathType : CUDNN_FMA_MATH;
}

// Picks from cuDNN's timed candidates (fastest first): successful ones
// only, no tensor-core math in fp32 mode; a deterministic kernel (a run
// then repeats bit for bit) unless it is over 1.5x slower than the fastest.
// Returns the index, or -1.
template <typename Perf>
int ChooseAlgorithm(const Perf* perf, int count, bool mixed) {
  int fastest = -1, deterministic = -1;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (!mixed && (perf[i].mathType == CUDNN_TENSOR_OP_MATH ||
                   perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) {
      continue;
    }
    if (fastest < 0 || perf[i].time < perf[fastest].time) fastest = i;
    if (perf[i].determinism == CUDNN_DETERMINISTIC &&
        (deterministic < 0 || perf[i].time < perf[deterministic].time)) {
      deterministic = i;
    }
  }
  if (deterministic >= 0 &&
      perf[deterministic].time <= 1.5f * perf[fastest].time) {
    return deterministic;
  }
  return fastest;
}

bool CudaBackend::CudnnForward(float* out, const float* in, const float* weight,
                               const ConvShape& s) {
  ConvPlan* p = Plan(s);
  if (!p->usable || p->fwd_state < 0) return false;
  if (p->fwd_state == 0) {
    p->fwd_state = -1;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    cudnnSetConvolutionMathType(p->conv, SearchMath(mixed_));
    if (cudnnFindConvolutionForwardAlgorithm(
            cudnn_, p->x, p->w, p->conv, p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
            &found, perf) == CUDNN_STATUS_SUCCESS) {
      const int i = ChooseAlgorithm(perf, found, mixed_);
      if (i >= 0) {
        p->fwd_state = 1;
        p->fwd = perf[i].algo;
        p->fwd_math = RunMath(perf[i], mixed_);
        p->fwd_bytes = perf[i].memory;
      }
    }
    cudaGetLastError();
    if (p->fwd_state < 0) return false;
  }
  void* ws = Workspace(p->fwd_bytes);
  if (!ok()) return true;
  const float alpha = 1.0f, beta = 0.0f;
  cudnnSetConvolutionMathType(p->conv, p->fwd_math);
  const cudnnStatus_t status =
      cudnnConvolutionForward(cudnn_, &alpha, p->x, in, p->w, weight, p->conv,
                              p->fwd, ws, p->fwd_bytes, &beta, p->y, out);
  if (status == CUDNN_STATUS_SUCCESS) return true;
  if (Declined(status)) {
    p->fwd_state = -1;
    return false;
  }
  error_ = std::string("cuDNN error: cudnnConvolutionForward: ") +
           cudnnGetErrorString(status);
  return true;
}

bool CudaBackend::CudnnBackwardData(float* d_in, const float* d_out,
                                    const float* weight, const ConvShape& s) {
  ConvPlan* p = Plan(s);
  if (!p->usable || p->data_state < 0) return false;
  if (p->data_state == 0) {
    p->data_state = -1;
    cudnnConvolutionBwdDataAlgoPerf_t
        perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int found = 0;
    cudnnSetConvolutionMathType(p->conv, SearchMath(mixed_));
    if (cudnnFindConvolutionBackwardDataAlgorithm(
            cudnn_, p->w, p->y, p->conv, p->x,
            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found,
            perf) == CUDNN_STATUS_SUCCESS) {
      const int i = ChooseAlgorithm(perf, found, mixed_);
      if (i >= 0) {
        p->data_state = 1;
        p->data = perf[i].algo;
        p->data_math = RunMath(perf[i], mixed_);
        p->data_bytes = perf[i].memory;
      }
    }
    cudaGetLastError();
    if (p->data_state < 0) return false;
  }
  void* ws = Workspace(p->data_bytes);
  if (!ok()) return true;
  const float alpha = 1.0f, beta = 0.0f;
  cudnnSetConvolutionMathType(p->conv, p->data_math);
  const cudnnStatus_t status = cudnnConvolutionBackwardData(
      cudnn_, &alpha, p->w, weight, p->y, d_out, p->conv, p->data, ws,
      p->data_bytes, &beta, p->x, d_in);
  if (status == CUDNN_STATUS_SUCCESS) return true;
  if (Declined(status)) {
    p->data_state = -1;
    return false;
  }
  error_ = std::string("cuDNN error: cudnnConvolutionBackwardData: ") +
           cudnnGetErrorString(status);
  return true;
}

bool CudaBackend::CudnnBackwardFilter(float* d_weight, const float* d_out,
                                      const float* in, const ConvShape& s) {
  ConvPlan* p = Plan(s);
  if (!p->usable || p->filter_state < 0) return false;
  if (p->filter_state == 0) {
    p->filter_state = -1;
    cudnnConvolutionBwdFilterAlgoPerf_t
        perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int found = 0;
    cudnnSetConvolutionMathType(p->conv, SearchMath(mixed_));
    if (cudnnFindConvolutionBackwardFilterAlgorithm(
            cudnn_, p->x, p->y, p->conv, p->w,
            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found,
            perf) == CUDNN_STATUS_SUCCESS) {
      const int i = ChooseAlgorithm(perf, found, mixed_);
      if (i >= 0) {
        p->filter_state = 1;
        p->filter = perf[i].algo;
        p->filter_math = RunMath(perf[i], mixed_);
        p->filter_bytes = perf[i].memory;
      }
    }
    cudaGetLastError();
    if (p->filter_state < 0) return false;
  }
  void* ws = Workspace(p->filter_bytes);
  if (!ok()) return true;
  const float alpha = 1.0f, beta = 0.0f;
  cudnnSetConvolutionMathType(p->conv, p->filter_math);
  const cudnnStatus_t status = cudnnConvolutionBackwardFilter(
      cudnn_, &alpha, p->x, in, p->y, d_out, p->conv, p->filter, ws,
      p->filter_bytes, &beta, p->w, d_weight);
  if (status == CUDNN_STATUS_SUCCESS) return true;
  if (Declined(status)) {
    p->filter_state = -1;
    return false;
  }
  error_ = std::string("cuDNN error: cudnnConvolutionBackwardFilter: ") +
           cudnnGetErrorString(status);
  return true;
}

#endif  // HYPERTUNE_TRAIN_CUDNN

void CudaBackend::Conv2dForward(float* out, const float* in,
                                const float* weight, const ConvShape& s) {
  if (!ok() || s.n == 0) return;
#ifdef HYPERTUNE_TRAIN_CUDNN
  if (cudnn_ != nullptr && CudnnForward(out, in, weight, s)) return;
#endif
  Im2ColForward(out, in, weight, s);
}

void CudaBackend::Conv2dBackward(float* d_in, float* d_weight,
                                 const float* d_out, const float* in,
                                 const float* weight, const ConvShape& s) {
  if (!ok() || s.n == 0) return;
#ifdef HYPERTUNE_TRAIN_CUDNN
  if (cudnn_ != nullptr) {
    if (d_weight != nullptr && CudnnBackwardFilter(d_weight, d_out, in, s))
      d_weight = nullptr;
    if (d_in != nullptr && CudnnBackwardData(d_in, d_out, weight, s))
      d_in = nullptr;
    if (d_in == nullptr && d_weight == nullptr) return;
  }
#endif
  Im2ColBackward(d_in, d_weight, d_out, in, weight, s);
}

void CudaBackend::BatchNormForwardTrain(
    float* out, float* save_mean, float* save_inv_std, float* running_mean,
    float* running_var, const float* in, const float* gamma, const float* beta,
    const float* residual, bool relu, const BatchNormShape& s) {
  if (!ok()) return;
  void* scratch = Workspace(cuda::BatchNormScratchBytes(s));
  if (scratch == nullptr) return;
  Check(cuda::BatchNormForwardTrain(out, save_mean, save_inv_std, running_mean,
                                    running_var, in, gamma, beta, residual,
                                    relu, s, scratch, stream_),
        "BatchNormForwardTrain launch");
}

void CudaBackend::BatchNormForwardEval(float* out, const float* in,
                                       const float* gamma, const float* beta,
                                       const float* running_mean,
                                       const float* running_var,
                                       const float* residual, bool relu,
                                       const BatchNormShape& s) {
  if (!ok()) return;
  void* scratch = Workspace(cuda::BatchNormScratchBytes(s));
  if (scratch == nullptr) return;
  Check(cuda::BatchNormForwardEval(out, in, gamma, beta, running_mean,
                                   running_var, residual, relu, s, scratch,
                                   stream_),
        "BatchNormForwardEval launch");
}

void CudaBackend::BatchNormBackward(float* d_in, float* d_gamma, float* d_beta,
                                    const float* d_out, const float* in,
                                    const float* gamma, const float* save_mean,
                                    const float* save_inv_std,
                                    const BatchNormShape& s) {
  if (!ok()) return;
  void* scratch = Workspace(cuda::BatchNormScratchBytes(s));
  if (scratch == nullptr) return;
  Check(cuda::BatchNormBackward(d_in, d_gamma, d_beta, d_out, in, gamma,
                                save_mean, save_inv_std, s, scratch, stream_),
        "BatchNormBackward launch");
}

void CudaBackend::ReluForward(float* out, const float* in, size_t count) {
  if (ok())
    Check(cuda::ReluForward(out, in, count, stream_), "ReluForward launch");
}

void CudaBackend::ReluBackward(float* d_in, const float* d_out,
                               const float* out, size_t count) {
  if (ok())
    Check(cuda::ReluBackward(d_in, d_out, out, count, stream_),
          "ReluBackward launch");
}

void CudaBackend::AddInPlace(float* y, const float* x, size_t count) {
  if (ok()) Check(cuda::AddInPlace(y, x, count, stream_), "AddInPlace launch");
}

void CudaBackend::MaxPoolForward(float* out, int32_t* argmax, const float* in,
                                 const PoolShape& s) {
  if (ok())
    Check(cuda::MaxPoolForward(out, argmax, in, s, stream_),
          "MaxPoolForward launch");
}

void CudaBackend::MaxPoolBackward(float* d_in, const float* d_out,
                                  const int32_t* argmax, const PoolShape& s) {
  if (ok()) {
    Check(cuda::MaxPoolBackward(d_in, d_out, argmax, s, stream_),
          "MaxPoolBackward launch");
  }
}

void CudaBackend::GlobalAvgPoolForward(float* out, const float* in, int n,
                                       int c, int hw) {
  if (ok()) {
    Check(cuda::GlobalAvgPoolForward(out, in, n, c, hw, stream_),
          "GlobalAvgPoolForward launch");
  }
}

void CudaBackend::GlobalAvgPoolBackward(float* d_in, const float* d_out, int n,
                                        int c, int hw) {
  if (ok()) {
    Check(cuda::GlobalAvgPoolBackward(d_in, d_out, n, c, hw, stream_),
          "GlobalAvgPoolBackward launch");
  }
}

// out [n][out_f] = in [n][in_f] W^T + bias: column-major out^T = W in^T.
void CudaBackend::LinearForward(float* out, const float* in,
                                const float* weight, const float* bias, int n,
                                int in_f, int out_f) {
  if (!ok() || n == 0) return;
  Check(cuda::BroadcastRows(out, bias, n, out_f, stream_),
        "BroadcastRows launch");
  Gemm(true, false, out_f, n, in_f, weight, in_f, 0, in, in_f, 0, 1.0f, out,
       out_f, 0, 1);
}

// d_in^T = W^T d_out^T and dW^T = in^T d_out (column-major).
void CudaBackend::LinearBackward(float* d_in, float* d_weight, float* d_bias,
                                 const float* d_out, const float* in,
                                 const float* weight, int n, int in_f,
                                 int out_f) {
  if (!ok() || n == 0) return;
  if (d_in != nullptr) {
    Gemm(false, false, in_f, n, out_f, weight, in_f, 0, d_out, out_f, 0, 0.0f,
         d_in, in_f, 0, 1);
  }
  if (d_weight != nullptr) {
    Gemm(false, true, in_f, out_f, n, in, in_f, 0, d_out, out_f, 0, 0.0f,
         d_weight, in_f, 0, 1);
  }
  if (d_bias != nullptr) {
    Check(cuda::SumRows(d_bias, d_out, n, out_f, stream_), "SumRows launch");
  }
}

void CudaBackend::SoftmaxCrossEntropy(float* losses, float* d_logits,
                                      const float* logits,
                                      const int32_t* labels, int n, int k,
                                      float smoothing) {
  if (ok()) {
    Check(cuda::SoftmaxCrossEntropy(losses, d_logits, logits, labels, n, k,
                                    smoothing, stream_),
          "SoftmaxCrossEntropy launch");
  }
}

void CudaBackend::SgdUpdate(float* param, float* velocity, const float* grad,
                            size_t count, const SgdStep& step) {
  if (ok())
    Check(cuda::SgdUpdate(param, velocity, grad, count, step, stream_),
          "SgdUpdate launch");
}

}  // namespace

std::unique_ptr<Backend> MakeCudaBackend(const BackendOptions& options,
                                         std::string* error) {
  return CudaBackend::Create(options, error);
}

}  // namespace hypertune::train
