// CUDA kernels of the reference trainer (see kernels.h): each is the
// device twin of the ops.cc function of the same name, written plainly (one
// thread per output element, grid-stride loops) with the CPU's arithmetic
// where it matters for parity (shifted batch-norm sums, double-precision
// softmax normalizer, the same SGD formula).
#include <algorithm>
#include <cmath>

#include "trainer_sdk/trainer/cuda/kernels.h"

namespace hypertune::train::cuda {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops cover whatever exceeds this many blocks.
constexpr size_t kMaxBlocks = 1 << 16;

int Blocks(size_t count) {
  return int(std::max<size_t>(
      1, std::min(kMaxBlocks, (count + kThreads - 1) / kThreads)));
}

// ops.h's out_h()/out_w() are host functions; this is their device twin.
__device__ int OutDim(int in, int kernel, int stride, int pad) {
  return (in + 2 * pad - kernel) / stride + 1;
}

// Index arithmetic (divisions above all) is much cheaper in 32 bits: the
// kernels that divide take their index type I, uint32_t whenever the element
// count is below 2^31 (Small() below), size_t otherwise.
#define GRID_STRIDE_T(I, i, count)                                   \
  for (I i = I(blockIdx.x) * blockDim.x + threadIdx.x; i < I(count); \
       i += I(gridDim.x) * blockDim.x)

#define GRID_STRIDE(i, count)                                                 \
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (count); \
       i += size_t(gridDim.x) * blockDim.x)

template <typename T>
__device__ T WarpSum(T v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}

__device__ float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Sum over the block, valid in thread 0. REQUIRES: blockDim.x a multiple of
// 32; every thread calls it. `shared` holds 32 values.
template <typename T>
__device__ T BlockSum(T v, T* shared) {
  v = WarpSum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // earlier readers of `shared` are done
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / 32 ? shared[threadIdx.x] : T(0);
  if (warp == 0) v = WarpSum(v);
  return v;
}

__device__ float BlockMax(float v, float* shared) {
  v = WarpMax(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / 32 ? shared[threadIdx.x] : -INFINITY;
  if (warp == 0) v = WarpMax(v);
  return v;
}

// --- Convolution helpers -----------------------------------------------------

template <typename I>
__global__ void Im2ColKernel(float* col, const float* in, ConvShape s,
                             int images) {
  const int k = s.kernel;
  const int oh = OutDim(s.in_h, k, s.stride, s.pad),
            ow = OutDim(s.in_w, k, s.stride, s.pad);
  const I plane = I(oh) * ow;
  const I width = plane * I(images);
  const I total = I(s.in_c) * k * k * width;
  GRID_STRIDE_T(I, t, total) {
    const I row = t / width, j = t - row * width;
    const int g = int(j / plane), p = int(j - I(g) * plane);
    const int oy = p / ow, ox = p - oy * ow;
    const int c = int(row) / (k * k), kk = int(row) - c * k * k;
    const int ky = kk / k, kx = kk - ky * k;
    const int iy = oy * s.stride - s.pad + ky, ix = ox * s.stride - s.pad + kx;
    float v = 0.0f;
    if (iy >= 0 && iy < s.in_h && ix >= 0 && ix < s.in_w) {
      v = in[((size_t(g) * s.in_c + c) * s.in_h + iy) * s.in_w + ix];
    }
    col[t] = v;
  }
}

// Input pixel (iy, ix) receives tap (ky, kx) of output (oy, ox) when
// oy * stride - pad + ky == iy; taps are summed in (ky, kx) order, as the
// CPU's Col2ImAdd does.
template <typename I>
__global__ void Col2ImKernel(float* d_in, const float* dcol, ConvShape s,
                             int images) {
  const int k = s.kernel;
  const int oh = OutDim(s.in_h, k, s.stride, s.pad),
            ow = OutDim(s.in_w, k, s.stride, s.pad);
  const size_t plane = size_t(oh) * ow;
  const size_t rows = size_t(s.in_c) * k * k;
  const I total = I(images) * s.in_c * s.in_h * s.in_w;
  GRID_STRIDE_T(I, t, total) {
    const I xy = t / I(s.in_w), cxy = xy / I(s.in_h), gc = cxy / I(s.in_c);
    const int ix = int(t - xy * I(s.in_w));
    const int iy = int(xy - cxy * I(s.in_h));
    const int c = int(cxy - gc * I(s.in_c));
    const float* base = dcol + size_t(gc) * rows * plane;
    float sum = 0.0f;
    for (int ky = 0; ky < k; ++ky) {
      const int ty = iy + s.pad - ky;
      if (ty < 0 || ty % s.stride != 0) continue;
      const int oy = ty / s.stride;
      if (oy >= oh) continue;
      for (int kx = 0; kx < k; ++kx) {
        const int tx = ix + s.pad - kx;
        if (tx < 0 || tx % s.stride != 0) continue;
        const int ox = tx / s.stride;
        if (ox >= ow) continue;
        sum +=
            base[(size_t(c * k + ky) * k + kx) * plane + size_t(oy) * ow + ox];
      }
    }
    d_in[t] = sum;
  }
}

template <typename I>
__global__ void ChannelMajorKernel(float* dst, const float* src, int images,
                                   int c, int plane) {
  const I width = I(images) * plane;
  const I total = width * c;
  GRID_STRIDE_T(I, t, total) {
    const I ch = t / width, j = t - ch * width;
    const I g = j / I(plane), p = j - g * I(plane);
    dst[t] = src[(size_t(g) * c + ch) * plane + p];
  }
}

// --- Batch norm
// ----------------------------------------------------------------

// Scratch: double partial[2][c][splits], then float coef[3][c].
struct BnScratch {
  double* partial;
  float* coef;
};

BnScratch Carve(void* scratch, const BatchNormShape& s, int splits) {
  BnScratch b;
  b.partial = static_cast<double*>(scratch);
  b.coef = reinterpret_cast<float*>(b.partial + 2 * size_t(s.c) * splits);
  return b;
}

// Per (split, channel) block: float sums of (x - shift) and (x - shift)^2
// over its share of the channel's images, shift = the channel's first value
// (as on the CPU, it keeps the variance accurate).
__global__ void BnSumsKernel(double* partial, const float* in, int n, int c,
                             int hw, int splits) {
  __shared__ double shared[32];
  const int ch = blockIdx.y;
  const float shift = in[size_t(ch) * hw];
  float a = 0.0f, b = 0.0f;
  for (int i = blockIdx.x; i < n; i += splits) {
    const float* x = in + (size_t(i) * c + ch) * hw;
    for (int p = threadIdx.x; p < hw; p += blockDim.x) {
      const float d = x[p] - shift;
      a += d;
      b += d * d;
    }
  }
  const double sa = BlockSum<double>(a, shared);
  const double sb = BlockSum<double>(b, shared);
  if (threadIdx.x == 0) {
    partial[size_t(ch) * splits + blockIdx.x] = sa;
    partial[(size_t(c) + ch) * splits + blockIdx.x] = sb;
  }
}

// One thread per channel: batch statistics, running statistics, and the
// affine coefficients scale = gamma * inv_std, bias = beta - mean * scale.
__global__ void BnFinalizeTrainKernel(float* coef, float* save_mean,
                                      float* save_inv_std, float* running_mean,
                                      float* running_var, const double* partial,
                                      const float* in, const float* gamma,
                                      const float* beta, BatchNormShape s,
                                      int splits) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= s.c) return;
  double sum = 0.0, sum_sq = 0.0;
  for (int k = 0; k < splits; ++k) {
    sum += partial[size_t(ch) * splits + k];
    sum_sq += partial[(size_t(s.c) + ch) * splits + k];
  }
  const double count = double(s.n) * s.hw;
  const double mean_shifted = sum / count;
  double var = sum_sq / count - mean_shifted * mean_shifted;
  if (var < 0.0) var = 0.0;
  const double mean = mean_shifted + in[size_t(ch) * s.hw];
  const float inv_std = float(1.0 / sqrt(var + s.eps));
  save_mean[ch] = float(mean);
  save_inv_std[ch] = inv_std;
  const double unbiased = count > 1 ? var * count / (count - 1) : var;
  const double m = s.momentum;
  running_mean[ch] = float((1.0 - m) * running_mean[ch] + m * mean);
  running_var[ch] = float((1.0 - m) * running_var[ch] + m * unbiased);
  const float scale = gamma[ch] * inv_std;
  coef[ch] = scale;
  coef[s.c + ch] = beta[ch] - float(mean) * scale;
}

__global__ void BnEvalCoefKernel(float* coef, const float* gamma,
                                 const float* beta, const float* running_mean,
                                 const float* running_var, int c, float eps) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  const float scale = gamma[ch] / sqrtf(running_var[ch] + eps);
  coef[ch] = scale;
  coef[c + ch] = beta[ch] - running_mean[ch] * scale;
}

// out = act(in * scale + bias + residual); out may alias residual. One
// block per (image, channel) plane.
__global__ void BnApplyKernel(float* out, const float* in, const float* coef,
                              const float* residual, bool relu, int c, int hw) {
  const int ch = int(blockIdx.x % unsigned(c));
  const float scale = coef[ch], bias = coef[c + ch];
  const size_t base = size_t(blockIdx.x) * hw;
  for (int p = threadIdx.x; p < hw; p += blockDim.x) {
    const size_t t = base + p;
    float v = in[t] * scale + bias;
    if (residual != nullptr) v += residual[t];
    out[t] = relu ? fmaxf(v, 0.0f) : v;
  }
}

// Per (split, channel) block: sums of dy and dy * (x - mean).
__global__ void BnGradSumsKernel(double* partial, const float* d_out,
                                 const float* in, const float* save_mean, int n,
                                 int c, int hw, int splits) {
  __shared__ double shared[32];
  const int ch = blockIdx.y;
  const float mean = save_mean[ch];
  float a = 0.0f, b = 0.0f;
  for (int i = blockIdx.x; i < n; i += splits) {
    const size_t base = (size_t(i) * c + ch) * hw;
    for (int p = threadIdx.x; p < hw; p += blockDim.x) {
      const float dy = d_out[base + p];
      a += dy;
      b += dy * (in[base + p] - mean);
    }
  }
  const double sa = BlockSum<double>(a, shared);
  const double sb = BlockSum<double>(b, shared);
  if (threadIdx.x == 0) {
    partial[size_t(ch) * splits + blockIdx.x] = sa;
    partial[(size_t(c) + ch) * splits + blockIdx.x] = sb;
  }
}

// d_gamma, d_beta, and d_in = A * dy + B * x + O per channel (ops.cc's
// rearrangement of gamma * inv_std * (dy - mean(dy) - xhat * mean(dy xhat))).
__global__ void BnGradFinalizeKernel(float* coef, float* d_gamma, float* d_beta,
                                     const double* partial, const float* gamma,
                                     const float* save_mean,
                                     const float* save_inv_std,
                                     BatchNormShape s, int splits) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= s.c) return;
  double sum_dy = 0.0, sum_dy_x = 0.0;
  for (int k = 0; k < splits; ++k) {
    sum_dy += partial[size_t(ch) * splits + k];
    sum_dy_x += partial[(size_t(s.c) + ch) * splits + k];
  }
  const float inv_std = save_inv_std[ch];
  const double sum_dy_xhat = sum_dy_x * inv_std;
  if (d_gamma != nullptr) d_gamma[ch] = float(sum_dy_xhat);
  if (d_beta != nullptr) d_beta[ch] = float(sum_dy);
  const double count = double(s.n) * s.hw;
  const float k = gamma[ch] * inv_std;
  const float mean_dy = float(sum_dy / count);
  const float mean_dy_xhat = float(sum_dy_xhat / count);
  const float a = k, b = -k * inv_std * mean_dy_xhat;
  coef[ch] = a;
  coef[s.c + ch] = b;
  coef[2 * s.c + ch] = -k * mean_dy - b * save_mean[ch];
}

// One block per (image, channel) plane.
__global__ void BnGradApplyKernel(float* d_in, const float* d_out,
                                  const float* in, const float* coef, int c,
                                  int hw) {
  const int ch = int(blockIdx.x % unsigned(c));
  const float a = coef[ch], b = coef[c + ch], o = coef[2 * c + ch];
  const size_t base = size_t(blockIdx.x) * hw;
  for (int p = threadIdx.x; p < hw; p += blockDim.x) {
    d_in[base + p] = a * d_out[base + p] + b * in[base + p] + o;
  }
}

// --- Elementwise
// ----------------------------------------------------------------

__global__ void ReluKernel(float* out, const float* in, size_t count) {
  GRID_STRIDE(i, count) {
    const float v = in[i];
    out[i] = v > 0.0f ? v : 0.0f;
  }
}

__global__ void ReluBackwardKernel(float* d_in, const float* d_out,
                                   const float* out, size_t count) {
  GRID_STRIDE(i, count) {
    const float g = d_out[i];
    d_in[i] = out[i] > 0.0f ? g : 0.0f;
  }
}

__global__ void AddKernel(float* y, const float* x, size_t count) {
  GRID_STRIDE(i, count) { y[i] += x[i]; }
}

// --- Pooling
// -------------------------------------------------------------------

// Same window scan and tie rule as the CPU: the first maximum wins.
template <typename I>
__global__ void MaxPoolKernel(float* out, int32_t* argmax, const float* in,
                              PoolShape s) {
  const int oh = OutDim(s.in_h, s.kernel, s.stride, s.pad);
  const int ow = OutDim(s.in_w, s.kernel, s.stride, s.pad);
  const I out_plane = I(oh) * ow;
  const size_t in_plane = size_t(s.in_h) * s.in_w;
  const I total = I(s.n) * s.c * out_plane;
  GRID_STRIDE_T(I, t, total) {
    const I plane = t / out_plane;
    const int o = int(t - plane * out_plane);
    const int oy = o / ow, ox = o - oy * ow;
    const float* x = in + size_t(plane) * in_plane;
    float best = -INFINITY;
    int32_t where = -1;
    for (int ky = 0; ky < s.kernel; ++ky) {
      const int iy = oy * s.stride - s.pad + ky;
      if (iy < 0 || iy >= s.in_h) continue;
      for (int kx = 0; kx < s.kernel; ++kx) {
        const int ix = ox * s.stride - s.pad + kx;
        if (ix < 0 || ix >= s.in_w) continue;
        const float v = x[iy * s.in_w + ix];
        if (where < 0 || v > best) {
          best = v;
          where = iy * s.in_w + ix;
        }
      }
    }
    out[t] = best;
    argmax[t] = where;
  }
}

// A gather over the outputs whose window covers the input pixel, in the
// CPU's (row-major output) order.
template <typename I>
__global__ void MaxPoolBackwardKernel(float* d_in, const float* d_out,
                                      const int32_t* argmax, PoolShape s) {
  const int oh = OutDim(s.in_h, s.kernel, s.stride, s.pad);
  const int ow = OutDim(s.in_w, s.kernel, s.stride, s.pad);
  const size_t out_plane = size_t(oh) * ow;
  const I in_plane = I(s.in_h) * s.in_w;
  const I total = I(s.n) * s.c * in_plane;
  GRID_STRIDE_T(I, t, total) {
    const I plane = t / in_plane;
    const int offset = int(t - plane * in_plane);
    const int iy = offset / s.in_w, ix = offset - iy * s.in_w;
    const int ly = iy + s.pad - s.kernel + 1, lx = ix + s.pad - s.kernel + 1;
    const int oy_lo = ly <= 0 ? 0 : (ly + s.stride - 1) / s.stride;
    const int ox_lo = lx <= 0 ? 0 : (lx + s.stride - 1) / s.stride;
    const int oy_hi = min(oh - 1, (iy + s.pad) / s.stride);
    const int ox_hi = min(ow - 1, (ix + s.pad) / s.stride);
    const size_t base = size_t(plane) * out_plane;
    float sum = 0.0f;
    for (int oy = oy_lo; oy <= oy_hi; ++oy) {
      for (int ox = ox_lo; ox <= ox_hi; ++ox) {
        const size_t j = base + size_t(oy) * ow + ox;
        if (argmax[j] == offset) sum += d_out[j];
      }
    }
    d_in[t] = sum;
  }
}

// One warp per (image, channel) plane.
__global__ void GlobalAvgPoolKernel(float* out, const float* in, int planes,
                                    int hw) {
  const int plane = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (plane >= planes) return;
  const float* x = in + size_t(plane) * hw;
  float sum = 0.0f;
  for (int j = lane; j < hw; j += 32) sum += x[j];
  sum = WarpSum(sum);
  if (lane == 0) out[plane] = sum / float(hw);
}

template <typename I>
__global__ void GlobalAvgPoolBackwardKernel(float* d_in, const float* d_out,
                                            size_t total, int hw) {
  GRID_STRIDE_T(I, t, total) { d_in[t] = d_out[t / I(hw)] / float(hw); }
}

// --- Linear helpers, loss, optimizer
// ----------------------------------------------

__global__ void BroadcastRowsKernel(float* out, const float* bias, int n,
                                    int f) {
  GRID_STRIDE(t, size_t(n) * f) {
    out[t] = bias != nullptr ? bias[t % f] : 0.0f;
  }
}

// One thread per column, rows summed in order (the CPU's order).
__global__ void SumRowsKernel(float* d_bias, const float* d_out, int n, int f) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= f) return;
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += d_out[size_t(i) * f + j];
  d_bias[j] = sum;
}

// One block per example; the normalizer in double like the CPU.
__global__ void SoftmaxCrossEntropyKernel(float* losses, float* d_logits,
                                          const float* logits,
                                          const int32_t* labels, int n, int k,
                                          float smoothing) {
  __shared__ float shared_f[32];
  __shared__ double shared_d[32];
  __shared__ float row_max;
  __shared__ double row_lse;
  const int i = blockIdx.x;
  const float* z = logits + size_t(i) * k;
  const int label = labels[i];
  const float off = smoothing / float(k);
  const float on = 1.0f - smoothing + off;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < k; j += blockDim.x) m = fmaxf(m, z[j]);
  m = BlockMax(m, shared_f);
  if (threadIdx.x == 0) row_max = m;
  __syncthreads();
  const float zmax = row_max;
  double sum_exp = 0.0, sum_z = 0.0;
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    sum_exp += exp(double(z[j] - zmax));
    sum_z += z[j];
  }
  sum_exp = BlockSum(sum_exp, shared_d);
  sum_z = BlockSum(sum_z, shared_d);
  if (threadIdx.x == 0) {
    const double lse = zmax + log(sum_exp);
    row_lse = lse;
    if (label >= 0 && label < k) {
      const double target_dot = off * sum_z + (on - off) * z[label];
      losses[i] = float(lse - target_dot);
    } else {
      losses[i] =
          NAN;  // violated precondition: poison, do not read out of bounds
    }
  }
  __syncthreads();
  if (d_logits == nullptr) return;
  const double lse = row_lse;
  float* d = d_logits + size_t(i) * k;
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    const double p = exp(double(z[j]) - lse);
    const float t = j == label ? on : off;
    d[j] = float((p - t) / n);
  }
}

__global__ void SgdKernel(float* param, float* velocity, const float* grad,
                          size_t count, SgdStep step) {
  GRID_STRIDE(i, count) {
    const float g = grad[i] + step.weight_decay * param[i];
    const float v = step.momentum * velocity[i] + g;
    velocity[i] = v;
    param[i] -= step.lr * (step.nesterov ? g + step.momentum * v : v);
  }
}

cudaError_t Launched() { return cudaGetLastError(); }

// Threads for a one-block-per-plane kernel: whole warps, at most kThreads.
int PlaneThreads(int hw) {
  return std::min(kThreads, std::max(32, (hw + 31) / 32 * 32));
}

// Whether `count` elements can be indexed in 32 bits (uint32_t kernels).
bool Small(size_t count) { return count < (size_t(1) << 31); }

}  // namespace

cudaError_t Im2Col(float* col, const float* in, const ConvShape& s, int images,
                   cudaStream_t stream) {
  const size_t total =
      size_t(s.in_c) * s.kernel * s.kernel * s.out_h() * s.out_w() * images;
  if (Small(total)) {
    Im2ColKernel<uint32_t>
        <<<Blocks(total), kThreads, 0, stream>>>(col, in, s, images);
  } else {
    Im2ColKernel<size_t>
        <<<Blocks(total), kThreads, 0, stream>>>(col, in, s, images);
  }
  return Launched();
}

cudaError_t Col2Im(float* d_in, const float* dcol, const ConvShape& s,
                   int images, cudaStream_t stream) {
  const size_t total = size_t(images) * s.in_c * s.in_h * s.in_w;
  if (Small(total)) {
    Col2ImKernel<uint32_t>
        <<<Blocks(total), kThreads, 0, stream>>>(d_in, dcol, s, images);
  } else {
    Col2ImKernel<size_t>
        <<<Blocks(total), kThreads, 0, stream>>>(d_in, dcol, s, images);
  }
  return Launched();
}

cudaError_t ChannelMajor(float* dst, const float* src, int images, int c,
                         int plane, cudaStream_t stream) {
  const size_t total = size_t(images) * c * plane;
  if (Small(total)) {
    ChannelMajorKernel<uint32_t>
        <<<Blocks(total), kThreads, 0, stream>>>(dst, src, images, c, plane);
  } else {
    ChannelMajorKernel<size_t>
        <<<Blocks(total), kThreads, 0, stream>>>(dst, src, images, c, plane);
  }
  return Launched();
}

int BatchNormSplits(const BatchNormShape& s) {
  // Blocks split a channel's images: about a thousand blocks in all, each
  // with at least 16 values a thread.
  const size_t count = size_t(s.n) * s.hw;
  const size_t by_work = std::max<size_t>(1, count / (size_t(kThreads) * 16));
  const size_t by_channels = std::max(1, 1024 / std::max(1, s.c));
  return int(std::min<size_t>(
      {by_work, by_channels, size_t(std::max(1, s.n)), 65535}));
}

size_t BatchNormScratchBytes(const BatchNormShape& s) {
  return 2 * size_t(s.c) * BatchNormSplits(s) * sizeof(double) +
         3 * size_t(s.c) * sizeof(float);
}

cudaError_t BatchNormForwardTrain(float* out, float* save_mean,
                                  float* save_inv_std, float* running_mean,
                                  float* running_var, const float* in,
                                  const float* gamma, const float* beta,
                                  const float* residual, bool relu,
                                  const BatchNormShape& s, void* scratch,
                                  cudaStream_t stream) {
  if (s.size() == 0) return cudaSuccess;
  const int splits = BatchNormSplits(s);
  const BnScratch b = Carve(scratch, s, splits);
  BnSumsKernel<<<dim3(splits, s.c), PlaneThreads(s.hw), 0, stream>>>(
      b.partial, in, s.n, s.c, s.hw, splits);
  BnFinalizeTrainKernel<<<(s.c + 127) / 128, 128, 0, stream>>>(
      b.coef, save_mean, save_inv_std, running_mean, running_var, b.partial, in,
      gamma, beta, s, splits);
  BnApplyKernel<<<s.n * s.c, PlaneThreads(s.hw), 0, stream>>>(
      out, in, b.coef, residual, relu, s.c, s.hw);
  return Launched();
}

cudaError_t BatchNormForwardEval(
    float* out, const float* in, const float* gamma, const float* beta,
    const float* running_mean, const float* running_var, const float* residual,
    bool relu, const BatchNormShape& s, void* scratch, cudaStream_t stream) {
  if (s.size() == 0) return cudaSuccess;
  const BnScratch b = Carve(scratch, s, BatchNormSplits(s));
  BnEvalCoefKernel<<<(s.c + 127) / 128, 128, 0, stream>>>(
      b.coef, gamma, beta, running_mean, running_var, s.c, s.eps);
  BnApplyKernel<<<s.n * s.c, PlaneThreads(s.hw), 0, stream>>>(
      out, in, b.coef, residual, relu, s.c, s.hw);
  return Launched();
}

cudaError_t BatchNormBackward(float* d_in, float* d_gamma, float* d_beta,
                              const float* d_out, const float* in,
                              const float* gamma, const float* save_mean,
                              const float* save_inv_std,
                              const BatchNormShape& s, void* scratch,
                              cudaStream_t stream) {
  if (s.size() == 0) return cudaSuccess;
  const int splits = BatchNormSplits(s);
  const BnScratch b = Carve(scratch, s, splits);
  BnGradSumsKernel<<<dim3(splits, s.c), PlaneThreads(s.hw), 0, stream>>>(
      b.partial, d_out, in, save_mean, s.n, s.c, s.hw, splits);
  BnGradFinalizeKernel<<<(s.c + 127) / 128, 128, 0, stream>>>(
      b.coef, d_gamma, d_beta, b.partial, gamma, save_mean, save_inv_std, s,
      splits);
  if (d_in != nullptr) {
    BnGradApplyKernel<<<s.n * s.c, PlaneThreads(s.hw), 0, stream>>>(
        d_in, d_out, in, b.coef, s.c, s.hw);
  }
  return Launched();
}

cudaError_t ReluForward(float* out, const float* in, size_t count,
                        cudaStream_t stream) {
  ReluKernel<<<Blocks(count), kThreads, 0, stream>>>(out, in, count);
  return Launched();
}

cudaError_t ReluBackward(float* d_in, const float* d_out, const float* out,
                         size_t count, cudaStream_t stream) {
  ReluBackwardKernel<<<Blocks(count), kThreads, 0, stream>>>(d_in, d_out, out,
                                                             count);
  return Launched();
}

cudaError_t AddInPlace(float* y, const float* x, size_t count,
                       cudaStream_t stream) {
  AddKernel<<<Blocks(count), kThreads, 0, stream>>>(y, x, count);
  return Launched();
}

cudaError_t MaxPoolForward(float* out, int32_t* argmax, const float* in,
                           const PoolShape& s, cudaStream_t stream) {
  if (Small(s.out_size())) {
    MaxPoolKernel<uint32_t>
        <<<Blocks(s.out_size()), kThreads, 0, stream>>>(out, argmax, in, s);
  } else {
    MaxPoolKernel<size_t>
        <<<Blocks(s.out_size()), kThreads, 0, stream>>>(out, argmax, in, s);
  }
  return Launched();
}

cudaError_t MaxPoolBackward(float* d_in, const float* d_out,
                            const int32_t* argmax, const PoolShape& s,
                            cudaStream_t stream) {
  if (Small(s.in_size())) {
    MaxPoolBackwardKernel<uint32_t>
        <<<Blocks(s.in_size()), kThreads, 0, stream>>>(d_in, d_out, argmax, s);
  } else {
    MaxPoolBackwardKernel<size_t>
        <<<Blocks(s.in_size()), kThreads, 0, stream>>>(d_in, d_out, argmax, s);
  }
  return Launched();
}

cudaError_t GlobalAvgPoolForward(float* out, const float* in, int n, int c,
                                 int hw, cudaStream_t stream) {
  const int planes = n * c, per_block = kThreads / 32;
  if (planes <= 0) return cudaSuccess;
  GlobalAvgPoolKernel<<<(planes + per_block - 1) / per_block, kThreads, 0,
                        stream>>>(out, in, planes, hw);
  return Launched();
}

cudaError_t GlobalAvgPoolBackward(float* d_in, const float* d_out, int n, int c,
                                  int hw, cudaStream_t stream) {
  const size_t total = size_t(n) * c * hw;
  if (Small(total)) {
    GlobalAvgPoolBackwardKernel<uint32_t>
        <<<Blocks(total), kThreads, 0, stream>>>(d_in, d_out, total, hw);
  } else {
    GlobalAvgPoolBackwardKernel<size_t>
        <<<Blocks(total), kThreads, 0, stream>>>(d_in, d_out, total, hw);
  }
  return Launched();
}

cudaError_t BroadcastRows(float* out, const float* bias, int n, int f,
                          cudaStream_t stream) {
  BroadcastRowsKernel<<<Blocks(size_t(n) * f), kThreads, 0, stream>>>(out, bias,
                                                                      n, f);
  return Launched();
}

cudaError_t SumRows(float* d_bias, const float* d_out, int n, int f,
                    cudaStream_t stream) {
  if (f <= 0) return cudaSuccess;
  SumRowsKernel<<<(f + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      d_bias, d_out, n, f);
  return Launched();
}

cudaError_t SoftmaxCrossEntropy(float* losses, float* d_logits,
                                const float* logits, const int32_t* labels,
                                int n, int k, float smoothing,
                                cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  SoftmaxCrossEntropyKernel<<<n, kThreads, 0, stream>>>(
      losses, d_logits, logits, labels, n, k, smoothing);
  return Launched();
}

cudaError_t SgdUpdate(float* param, float* velocity, const float* grad,
                      size_t count, const SgdStep& step, cudaStream_t stream) {
  SgdKernel<<<Blocks(count), kThreads, 0, stream>>>(param, velocity, grad,
                                                    count, step);
  return Launched();
}

}  // namespace hypertune::train::cuda
