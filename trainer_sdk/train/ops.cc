// CPU reference of ops.h. Convolutions are Eigen GEMMs: on im2col columns
// per image, or, for stride-1 convolutions on large planes, one GEMM per
// kernel tap over a zero-padded chunk of images (no im2col). The batch is
// split into chunks of images fixed by the shape, and weight gradients are
// summed chunk by chunk in order, whatever the thread count.
#include "trainer_sdk/train/ops.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "trainer_sdk/train/thread_pool.h"

namespace hypertune::train {
namespace {

using RowMatrix =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapRow = Eigen::Map<RowMatrix>;
using ConstMapRow = Eigen::Map<const RowMatrix>;

// Elementwise loops are split into chunks of this many values.
constexpr size_t kElementChunk = 1 << 15;
// Images per conv task: as many as keep one task's widest matrix (channels
// x padded pixels) near kConvChunkFloats, so GEMM operands stay in L2, but
// at most kMaxConvChunks tasks (each holds a weight-gradient partial). A
// function of the shape only, never of the thread count (determinism).
constexpr size_t kConvChunkFloats = size_t(1) << 16;
constexpr int kMaxConvChunks = 32;

int ConvChunk(const ConvShape& s) {
  const size_t plane = size_t(s.in_h + 2 * s.pad) * (s.in_w + 2 * s.pad);
  const size_t per_image = plane * size_t(std::max(s.in_c, s.out_c));
  const int by_cache =
      int(std::clamp<size_t>(kConvChunkFloats / std::max<size_t>(per_image, 1), 1, 8));
  return std::max(by_cache, (s.n + kMaxConvChunks - 1) / kMaxConvChunks);
}

int Chunks(size_t count, size_t chunk) { return int((count + chunk - 1) / chunk); }

template <typename Fn>
void ForChunks(ThreadPool* pool, size_t count, Fn fn) {
  ParallelFor(pool, Chunks(count, kElementChunk), [&](int t) {
    size_t begin = size_t(t) * kElementChunk;
    size_t end = std::min(count, begin + kElementChunk);
    fn(begin, end);
  });
}

bool IsPointwise(const ConvShape& s) {
  return s.kernel == 1 && s.stride == 1 && s.pad == 0;
}

// col [in_c * k * k][out_h * out_w] from one image [in_c][in_h][in_w].
void Im2Col(float* col, const float* img, const ConvShape& s) {
  const int oh = s.out_h(), ow = s.out_w(), k = s.kernel;
  const int plane = oh * ow;
  for (int c = 0; c < s.in_c; ++c) {
    const float* src = img + size_t(c) * s.in_h * s.in_w;
    for (int ky = 0; ky < k; ++ky) {
      for (int kx = 0; kx < k; ++kx) {
        float* dst = col + size_t((c * k + ky) * k + kx) * plane;
        // Output columns whose input x is inside the image.
        int ox_lo = 0, ox_hi = ow;  // [lo, hi)
        while (ox_lo < ow && ox_lo * s.stride - s.pad + kx < 0) ++ox_lo;
        while (ox_hi > ox_lo &&
               (ox_hi - 1) * s.stride - s.pad + kx >= s.in_w)
          --ox_hi;
        for (int oy = 0; oy < oh; ++oy) {
          float* row = dst + oy * ow;
          const int iy = oy * s.stride - s.pad + ky;
          if (iy < 0 || iy >= s.in_h) {
            std::fill(row, row + ow, 0.0f);
            continue;
          }
          const float* srow = src + iy * s.in_w;
          for (int ox = 0; ox < ox_lo; ++ox) row[ox] = 0.0f;
          if (s.stride == 1) {
            const float* __restrict from = srow - s.pad + kx;
            float* __restrict to = row;
            for (int ox = ox_lo; ox < ox_hi; ++ox) to[ox] = from[ox];
          } else {
            for (int ox = ox_lo; ox < ox_hi; ++ox) {
              row[ox] = srow[ox * s.stride - s.pad + kx];
            }
          }
          for (int ox = ox_hi; ox < ow; ++ox) row[ox] = 0.0f;
        }
      }
    }
  }
}

// img += col2im(col): the adjoint of Im2Col.
void Col2ImAdd(float* img, const float* col, const ConvShape& s) {
  const int oh = s.out_h(), ow = s.out_w(), k = s.kernel;
  const int plane = oh * ow;
  for (int c = 0; c < s.in_c; ++c) {
    float* dst = img + size_t(c) * s.in_h * s.in_w;
    for (int ky = 0; ky < k; ++ky) {
      for (int kx = 0; kx < k; ++kx) {
        const float* src = col + size_t((c * k + ky) * k + kx) * plane;
        int ox_lo = 0, ox_hi = ow;
        while (ox_lo < ow && ox_lo * s.stride - s.pad + kx < 0) ++ox_lo;
        while (ox_hi > ox_lo &&
               (ox_hi - 1) * s.stride - s.pad + kx >= s.in_w)
          --ox_hi;
        for (int oy = 0; oy < oh; ++oy) {
          const int iy = oy * s.stride - s.pad + ky;
          if (iy < 0 || iy >= s.in_h) continue;
          const float* __restrict row = src + oy * ow;
          float* __restrict drow = dst + iy * s.in_w - s.pad + kx;
          if (s.stride == 1) {
            for (int ox = ox_lo; ox < ox_hi; ++ox) drow[ox] += row[ox];
          } else {
            for (int ox = ox_lo; ox < ox_hi; ++ox) drow[ox * s.stride] += row[ox];
          }
        }
      }
    }
  }
}

// out[j] = sum over t of partial[t * size + j], t ascending (the same
// order whatever the thread count); slices of j run in parallel.
void SumPartials(float* out, const float* partial, int count, size_t size,
                 ThreadPool* pool) {
  ParallelFor(pool, Chunks(size, kElementChunk), [&](int slice) {
    const size_t begin = size_t(slice) * kElementChunk;
    const size_t end = std::min(size, begin + kElementChunk);
    std::copy(partial + begin, partial + end, out + begin);
    for (int t = 1; t < count; ++t) {
      const float* __restrict q = partial + size * t;
      float* __restrict o = out;
      for (size_t j = begin; j < end; ++j) o[j] += q[j];
    }
  });
}

// Scratch reused by a thread across calls.
std::vector<float>& Scratch(int which, size_t size) {
  thread_local std::vector<float> buffers[3];
  std::vector<float>& b = buffers[which];
  if (b.size() < size) b.resize(size);
  return b;
}

// Sums of (x - shift) and (x - shift)^2 over n values, in 8 interleaved lanes
// combined in a fixed order: the compiler vectorizes it without reordering
// anything run to run.
void ShiftedSums(const float* __restrict x, int n, float shift, float* sum,
                 float* sum_sq) {
  float a[8] = {}, b[8] = {};
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) {
      const float d = x[j + l] - shift;
      a[l] += d;
      b[l] += d * d;
    }
  }
  for (; j < n; ++j) {
    const float d = x[j] - shift;
    a[j & 7] += d;
    b[j & 7] += d * d;
  }
  *sum = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  *sum_sq = ((b[0] + b[1]) + (b[2] + b[3])) + ((b[4] + b[5]) + (b[6] + b[7]));
}

// Sums of dy and dy * (x - mean) over n values, lanes as above.
void GradientSums(const float* __restrict dy, const float* __restrict x, int n,
                  float mean, float* sum_dy, float* sum_dy_x) {
  float a[8] = {}, b[8] = {};
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) {
      a[l] += dy[j + l];
      b[l] += dy[j + l] * (x[j + l] - mean);
    }
  }
  for (; j < n; ++j) {
    a[j & 7] += dy[j];
    b[j & 7] += dy[j] * (x[j] - mean);
  }
  *sum_dy = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  *sum_dy_x = ((b[0] + b[1]) + (b[2] + b[3])) + ((b[4] + b[5]) + (b[6] + b[7]));
}

// Stride-1 convolutions without im2col ("shifted GEMMs"): a chunk of images
// is copied once into a zero-padded buffer [in_c][images * Hp * Wp + slack];
// output pixel (y, x) of tap (ky, kx) reads flat index y*Wp + x + ky*Wp + kx,
// so each tap is one GEMM of W[:, :, ky, kx] with a shifted window of that
// buffer. Outputs are computed on the padded grid (columns x >= out_w and
// rows y >= out_h are junk and dropped). Worth it where the padded grid is
// not much bigger than the image.
struct Padded {
  int hp, wp, plane;  // padded height, width, hp * wp
  int images;
  int cols;           // images * plane: the GEMM width
  int ld;             // row length of the input buffer (cols + slack)
};

bool UseShifted(const ConvShape& s) {
  if (s.stride != 1 || s.kernel == 1 || s.in_c < 8) return false;
  const double hp = s.in_h + 2 * s.pad, wp = s.in_w + 2 * s.pad;
  return double(s.out_h()) * s.out_w() >= 0.7 * hp * wp;
}

Padded PaddedLayout(const ConvShape& s, int images) {
  Padded p;
  p.hp = s.in_h + 2 * s.pad;
  p.wp = s.in_w + 2 * s.pad;
  p.plane = p.hp * p.wp;
  p.images = images;
  p.cols = images * p.plane;
  p.ld = p.cols + (s.kernel - 1) * (p.wp + 1) + 1;
  return p;
}

// buffer [in_c][ld] <- the images, zero-padded.
void PackPadded(float* buffer, const float* in, const ConvShape& s, const Padded& p) {
  std::fill(buffer, buffer + size_t(s.in_c) * p.ld, 0.0f);
  for (int g = 0; g < p.images; ++g) {
    for (int c = 0; c < s.in_c; ++c) {
      const float* src = in + (size_t(g) * s.in_c + c) * s.in_h * s.in_w;
      float* dst = buffer + size_t(c) * p.ld + size_t(g) * p.plane + s.pad * p.wp + s.pad;
      for (int y = 0; y < s.in_h; ++y) {
        const float* __restrict from = src + y * s.in_w;
        float* __restrict to = dst + y * p.wp;
        for (int x = 0; x < s.in_w; ++x) to[x] = from[x];
      }
    }
  }
}

using StridedConst = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
using Strided = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;

// Weights OIHW -> [tap][out_c][in_c].
std::vector<float> TapMajor(const float* weight, const ConvShape& s) {
  const int taps = s.kernel * s.kernel;
  std::vector<float> t(s.weight_size());
  for (int o = 0; o < s.out_c; ++o)
    for (int c = 0; c < s.in_c; ++c)
      for (int k = 0; k < taps; ++k)
        t[(size_t(k) * s.out_c + o) * s.in_c + c] = weight[(size_t(o) * s.in_c + c) * taps + k];
  return t;
}

void ShiftedForward(float* out, const float* in, const std::vector<float>& taps,
                    const ConvShape& s, const Padded& p) {
  float* x = Scratch(0, size_t(s.in_c) * p.ld).data();
  float* y = Scratch(1, size_t(s.out_c) * p.cols).data();
  PackPadded(x, in, s, p);
  MapRow result(y, s.out_c, p.cols);
  for (int ky = 0; ky < s.kernel; ++ky) {
    for (int kx = 0; kx < s.kernel; ++kx) {
      const int k = ky * s.kernel + kx;
      ConstMapRow w(taps.data() + size_t(k) * s.out_c * s.in_c, s.out_c, s.in_c);
      StridedConst window(x + ky * p.wp + kx, s.in_c, p.cols, Eigen::OuterStride<>(p.ld));
      if (k == 0) {
        result.noalias() = w * window;
      } else {
        result.noalias() += w * window;
      }
    }
  }
  const int oh = s.out_h(), ow = s.out_w();
  for (int g = 0; g < p.images; ++g) {
    for (int o = 0; o < s.out_c; ++o) {
      const float* src = y + size_t(o) * p.cols + size_t(g) * p.plane;
      float* dst = out + (size_t(g) * s.out_c + o) * oh * ow;
      for (int r = 0; r < oh; ++r) {
        const float* __restrict from = src + r * p.wp;
        float* __restrict to = dst + r * ow;
        for (int c = 0; c < ow; ++c) to[c] = from[c];
      }
    }
  }
}

// d_weight_taps [tap][out_c][in_c] (overwritten) and d_in for one chunk.
void ShiftedBackward(float* d_in, float* d_weight_taps, const float* d_out,
                     const float* in, const std::vector<float>& taps,
                     const ConvShape& s, const Padded& p) {
  const int oh = s.out_h(), ow = s.out_w();
  float* dy = Scratch(1, size_t(s.out_c) * p.cols).data();
  std::fill(dy, dy + size_t(s.out_c) * p.cols, 0.0f);
  for (int g = 0; g < p.images; ++g) {
    for (int o = 0; o < s.out_c; ++o) {
      const float* src = d_out + (size_t(g) * s.out_c + o) * oh * ow;
      float* dst = dy + size_t(o) * p.cols + size_t(g) * p.plane;
      for (int r = 0; r < oh; ++r) {
        const float* __restrict from = src + r * ow;
        float* __restrict to = dst + r * p.wp;
        for (int c = 0; c < ow; ++c) to[c] = from[c];
      }
    }
  }
  ConstMapRow grad(dy, s.out_c, p.cols);
  if (d_weight_taps != nullptr) {
    float* x = Scratch(0, size_t(s.in_c) * p.ld).data();
    PackPadded(x, in, s, p);
    for (int k = 0; k < s.kernel * s.kernel; ++k) {
      const int ky = k / s.kernel, kx = k % s.kernel;
      StridedConst window(x + ky * p.wp + kx, s.in_c, p.cols, Eigen::OuterStride<>(p.ld));
      MapRow(d_weight_taps + size_t(k) * s.out_c * s.in_c, s.out_c, s.in_c).noalias() =
          grad * window.transpose();
    }
  }
  if (d_in != nullptr) {
    float* dx = Scratch(2, size_t(s.in_c) * p.ld).data();
    std::fill(dx, dx + size_t(s.in_c) * p.ld, 0.0f);
    for (int k = 0; k < s.kernel * s.kernel; ++k) {
      const int ky = k / s.kernel, kx = k % s.kernel;
      ConstMapRow w(taps.data() + size_t(k) * s.out_c * s.in_c, s.out_c, s.in_c);
      Strided window(dx + ky * p.wp + kx, s.in_c, p.cols, Eigen::OuterStride<>(p.ld));
      window.noalias() += w.transpose() * grad;
    }
    for (int g = 0; g < p.images; ++g) {
      for (int c = 0; c < s.in_c; ++c) {
        const float* src = dx + size_t(c) * p.ld + size_t(g) * p.plane + s.pad * p.wp + s.pad;
        float* dst = d_in + (size_t(g) * s.in_c + c) * s.in_h * s.in_w;
        for (int r = 0; r < s.in_h; ++r) {
          const float* __restrict from = src + r * p.wp;
          float* __restrict to = dst + r * s.in_w;
          for (int x = 0; x < s.in_w; ++x) to[x] = from[x];
        }
      }
    }
  }
}

}  // namespace

void Conv2dForward(float* out, const float* in, const float* weight,
                   const ConvShape& s, ThreadPool* pool) {
  const int K = s.in_c * s.kernel * s.kernel;
  const int plane = s.out_h() * s.out_w();
  const size_t in_image = size_t(s.in_c) * s.in_h * s.in_w;
  const size_t out_image = size_t(s.out_c) * plane;
  if (UseShifted(s)) {
    const std::vector<float> taps = TapMajor(weight, s);
    const int chunk = ConvChunk(s);
    ParallelFor(pool, Chunks(s.n, chunk), [&](int t) {
      const int first = t * chunk, last = std::min(s.n, first + chunk);
      ShiftedForward(out + first * out_image, in + first * in_image, taps, s,
                     PaddedLayout(s, last - first));
    });
    return;
  }
  ConstMapRow w(weight, s.out_c, K);
  const int chunk = ConvChunk(s);
  ParallelFor(pool, Chunks(s.n, chunk), [&](int t) {
    const int first = t * chunk, last = std::min(s.n, first + chunk);
    for (int i = first; i < last; ++i) {
      const float* col = in + i * in_image;
      if (!IsPointwise(s)) {
        std::vector<float>& buffer = Scratch(0, size_t(K) * plane);
        Im2Col(buffer.data(), in + i * in_image, s);
        col = buffer.data();
      }
      MapRow o(out + i * out_image, s.out_c, plane);
      o.noalias() = w * ConstMapRow(col, K, plane);
    }
  });
}

void Conv2dBackward(float* d_in, float* d_weight, const float* d_out,
                    const float* in, const float* weight, const ConvShape& s,
                    ThreadPool* pool) {
  const int K = s.in_c * s.kernel * s.kernel;
  const int plane = s.out_h() * s.out_w();
  const size_t in_image = size_t(s.in_c) * s.in_h * s.in_w;
  const size_t out_image = size_t(s.out_c) * plane;
  const int chunk = ConvChunk(s);
  const int chunks = Chunks(s.n, chunk);
  const size_t wsize = s.weight_size();
  // Per-chunk weight-gradient partials, each fully written by its task;
  // kept across calls so that large layers do not fault in fresh pages.
  thread_local std::vector<float> partial_buffer;
  if (d_weight != nullptr && partial_buffer.size() < wsize * chunks) {
    partial_buffer.resize(wsize * chunks);
  }
  float* partial = partial_buffer.data();
  if (UseShifted(s)) {
    const std::vector<float> taps = TapMajor(weight, s);
    ParallelFor(pool, chunks, [&](int t) {
      const int first = t * chunk, last = std::min(s.n, first + chunk);
      ShiftedBackward(d_in != nullptr ? d_in + first * in_image : nullptr,
                      d_weight != nullptr ? partial + wsize * t : nullptr,
                      d_out + first * out_image, in + first * in_image, taps, s,
                      PaddedLayout(s, last - first));
    });
    if (d_weight != nullptr) {
      // Sum the chunks in order, then taps-major back to OIHW.
      std::vector<float> sum(wsize);
      SumPartials(sum.data(), partial, chunks, wsize, pool);
      const int ntaps = s.kernel * s.kernel;
      for (int o = 0; o < s.out_c; ++o)
        for (int c = 0; c < s.in_c; ++c)
          for (int k = 0; k < ntaps; ++k)
            d_weight[(size_t(o) * s.in_c + c) * ntaps + k] =
                sum[(size_t(k) * s.out_c + o) * s.in_c + c];
    }
    return;
  }
  ConstMapRow w(weight, s.out_c, K);
  ParallelFor(pool, chunks, [&](int t) {
    const int first = t * chunk, last = std::min(s.n, first + chunk);
    MapRow dw(d_weight != nullptr ? partial + wsize * t : nullptr,
              d_weight != nullptr ? s.out_c : 0, d_weight != nullptr ? K : 0);
    if (d_weight != nullptr) dw.setZero();
    for (int i = first; i < last; ++i) {
      ConstMapRow dout(d_out + i * out_image, s.out_c, plane);
      if (d_weight != nullptr) {
        const float* col = in + i * in_image;
        if (!IsPointwise(s)) {
          std::vector<float>& buffer = Scratch(0, size_t(K) * plane);
          Im2Col(buffer.data(), in + i * in_image, s);
          col = buffer.data();
        }
        dw.noalias() += dout * ConstMapRow(col, K, plane).transpose();
      }
      if (d_in != nullptr) {
        float* din = d_in + i * in_image;
        if (IsPointwise(s)) {
          MapRow(din, K, plane).noalias() = w.transpose() * dout;
        } else {
          std::vector<float>& buffer = Scratch(1, size_t(K) * plane);
          MapRow dcol(buffer.data(), K, plane);
          dcol.noalias() = w.transpose() * dout;
          std::fill(din, din + in_image, 0.0f);
          Col2ImAdd(din, buffer.data(), s);
        }
      }
    }
  });
  if (d_weight != nullptr) SumPartials(d_weight, partial, chunks, wsize, pool);
}

void BatchNormForwardTrain(float* out, float* save_mean, float* save_inv_std,
                           float* running_mean, float* running_var,
                           const float* in, const float* gamma,
                           const float* beta, const float* residual, bool relu,
                           const BatchNormShape& s, ThreadPool* pool) {
  const size_t count = size_t(s.n) * s.hw;
  const size_t image = size_t(s.c) * s.hw;
  ParallelFor(pool, s.c, [&](int c) {
    // Shifted sums (by the first value) keep the variance accurate.
    const float shift = in[size_t(c) * s.hw];
    double sum = 0.0, sum_sq = 0.0;
    for (int i = 0; i < s.n; ++i) {
      float fs = 0.0f, fq = 0.0f;
      ShiftedSums(in + i * image + size_t(c) * s.hw, s.hw, shift, &fs, &fq);
      sum += fs;
      sum_sq += fq;
    }
    const double mean_shifted = sum / double(count);
    double var = sum_sq / double(count) - mean_shifted * mean_shifted;
    if (var < 0.0) var = 0.0;
    const double mean = mean_shifted + shift;
    const float inv_std = float(1.0 / std::sqrt(var + s.eps));
    save_mean[c] = float(mean);
    save_inv_std[c] = inv_std;
    const double unbiased = count > 1 ? var * double(count) / double(count - 1) : var;
    running_mean[c] = float((1.0 - s.momentum) * running_mean[c] + s.momentum * mean);
    running_var[c] = float((1.0 - s.momentum) * running_var[c] + s.momentum * unbiased);
    const float scale = gamma[c] * inv_std;
    const float bias = beta[c] - float(mean) * scale;
    for (int i = 0; i < s.n; ++i) {
      const size_t offset = i * image + size_t(c) * s.hw;
      const float* __restrict x = in + offset;
      const float* r = residual != nullptr ? residual + offset : nullptr;
      float* y = out + offset;
      if (r != nullptr) {
        if (relu) {
          for (int j = 0; j < s.hw; ++j) y[j] = std::max(x[j] * scale + bias + r[j], 0.0f);
        } else {
          for (int j = 0; j < s.hw; ++j) y[j] = x[j] * scale + bias + r[j];
        }
      } else if (relu) {
        for (int j = 0; j < s.hw; ++j) y[j] = std::max(x[j] * scale + bias, 0.0f);
      } else {
        for (int j = 0; j < s.hw; ++j) y[j] = x[j] * scale + bias;
      }
    }
  });
}

void BatchNormForwardEval(float* out, const float* in, const float* gamma,
                          const float* beta, const float* running_mean,
                          const float* running_var, const float* residual,
                          bool relu, const BatchNormShape& s,
                          ThreadPool* pool) {
  const size_t image = size_t(s.c) * s.hw;
  ParallelFor(pool, s.c, [&](int c) {
    const float scale = gamma[c] / std::sqrt(running_var[c] + s.eps);
    const float bias = beta[c] - running_mean[c] * scale;
    for (int i = 0; i < s.n; ++i) {
      const size_t offset = i * image + size_t(c) * s.hw;
      for (int j = 0; j < s.hw; ++j) {
        float v = in[offset + j] * scale + bias;
        if (residual != nullptr) v += residual[offset + j];
        out[offset + j] = relu ? std::max(v, 0.0f) : v;
      }
    }
  });
}

void BatchNormBackward(float* d_in, float* d_gamma, float* d_beta,
                       const float* d_out, const float* in, const float* gamma,
                       const float* save_mean, const float* save_inv_std,
                       const BatchNormShape& s, ThreadPool* pool) {
  const size_t count = size_t(s.n) * s.hw;
  const size_t image = size_t(s.c) * s.hw;
  ParallelFor(pool, s.c, [&](int c) {
    const float mean = save_mean[c], inv_std = save_inv_std[c];
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int i = 0; i < s.n; ++i) {
      const size_t offset = i * image + size_t(c) * s.hw;
      float a = 0.0f, b = 0.0f;
      GradientSums(d_out + offset, in + offset, s.hw, mean, &a, &b);
      sum_dy += a;
      sum_dy_xhat += b;
    }
    sum_dy_xhat *= inv_std;
    if (d_gamma != nullptr) d_gamma[c] = float(sum_dy_xhat);
    if (d_beta != nullptr) d_beta[c] = float(sum_dy);
    if (d_in == nullptr) return;
    // d_in = gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat)).
    const float k = gamma[c] * inv_std;
    const float mean_dy = float(sum_dy / double(count));
    const float mean_dy_xhat = float(sum_dy_xhat / double(count));
    // As a * dy + b * x + c per element.
    const float a = k, b = -k * inv_std * mean_dy_xhat;
    const float offset_c = -k * mean_dy - b * mean;
    for (int i = 0; i < s.n; ++i) {
      const size_t offset = i * image + size_t(c) * s.hw;
      const float* __restrict dy = d_out + offset;
      const float* __restrict x = in + offset;
      float* __restrict dx = d_in + offset;
      for (int j = 0; j < s.hw; ++j) dx[j] = a * dy[j] + b * x[j] + offset_c;
    }
  });
}

void ReluForward(float* out, const float* in, size_t count, ThreadPool* pool) {
  ForChunks(pool, count, [out, in](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const float v = in[i];
      out[i] = v > 0.0f ? v : 0.0f;
    }
  });
}

void ReluBackward(float* d_in, const float* d_out, const float* out,
                  size_t count, ThreadPool* pool) {
  ForChunks(pool, count, [d_in, d_out, out](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const float g = d_out[i];
      d_in[i] = out[i] > 0.0f ? g : 0.0f;
    }
  });
}

void AddInPlace(float* y, const float* x, size_t count, ThreadPool* pool) {
  ForChunks(pool, count, [y, x](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) y[i] += x[i];
  });
}

void MaxPoolForward(float* out, int32_t* argmax, const float* in,
                    const PoolShape& s, ThreadPool* pool) {
  const int oh = s.out_h(), ow = s.out_w();
  const size_t in_plane = size_t(s.in_h) * s.in_w;
  const size_t out_plane = size_t(oh) * ow;
  ParallelFor(pool, s.n * s.c, [&](int p) {
    const float* x = in + p * in_plane;
    float* y = out + p * out_plane;
    int32_t* a = argmax + p * out_plane;
    for (int oy = 0; oy < oh; ++oy) {
      for (int ox = 0; ox < ow; ++ox) {
        float best = -std::numeric_limits<float>::infinity();
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
        y[oy * ow + ox] = best;
        a[oy * ow + ox] = where;
      }
    }
  });
}

void MaxPoolBackward(float* d_in, const float* d_out, const int32_t* argmax,
                     const PoolShape& s, ThreadPool* pool) {
  const size_t in_plane = size_t(s.in_h) * s.in_w;
  const size_t out_plane = size_t(s.out_h()) * s.out_w();
  ParallelFor(pool, s.n * s.c, [&](int p) {
    float* dx = d_in + p * in_plane;
    std::fill(dx, dx + in_plane, 0.0f);
    for (size_t j = 0; j < out_plane; ++j) {
      dx[argmax[p * out_plane + j]] += d_out[p * out_plane + j];
    }
  });
}

void GlobalAvgPoolForward(float* out, const float* in, int n, int c, int hw,
                          ThreadPool* pool) {
  ParallelFor(pool, n, [&](int i) {
    for (int ch = 0; ch < c; ++ch) {
      const float* x = in + (size_t(i) * c + ch) * hw;
      float sum = 0.0f;
      for (int j = 0; j < hw; ++j) sum += x[j];
      out[size_t(i) * c + ch] = sum / float(hw);
    }
  });
}

void GlobalAvgPoolBackward(float* d_in, const float* d_out, int n, int c,
                           int hw, ThreadPool* pool) {
  ParallelFor(pool, n, [&](int i) {
    for (int ch = 0; ch < c; ++ch) {
      const float g = d_out[size_t(i) * c + ch] / float(hw);
      float* dx = d_in + (size_t(i) * c + ch) * hw;
      std::fill(dx, dx + hw, g);
    }
  });
}

void LinearForward(float* out, const float* in, const float* weight,
                   const float* bias, int n, int in_f, int out_f,
                   ThreadPool* /*pool*/) {
  MapRow y(out, n, out_f);
  y.noalias() = ConstMapRow(in, n, in_f) * ConstMapRow(weight, out_f, in_f).transpose();
  if (bias != nullptr) {
    y.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias, out_f);
  }
}

void LinearBackward(float* d_in, float* d_weight, float* d_bias,
                    const float* d_out, const float* in, const float* weight,
                    int n, int in_f, int out_f, ThreadPool* /*pool*/) {
  ConstMapRow dy(d_out, n, out_f);
  if (d_in != nullptr) {
    MapRow(d_in, n, in_f).noalias() = dy * ConstMapRow(weight, out_f, in_f);
  }
  if (d_weight != nullptr) {
    MapRow(d_weight, out_f, in_f).noalias() =
        dy.transpose() * ConstMapRow(in, n, in_f);
  }
  if (d_bias != nullptr) {
    for (int j = 0; j < out_f; ++j) {
      float sum = 0.0f;
      for (int i = 0; i < n; ++i) sum += d_out[size_t(i) * out_f + j];
      d_bias[j] = sum;
    }
  }
}

void SoftmaxCrossEntropy(float* losses, float* d_logits, const float* logits,
                         const int32_t* labels, int n, int k, float smoothing,
                         ThreadPool* /*pool*/) {
  const float off = smoothing / float(k);
  const float on = 1.0f - smoothing + off;
  for (int i = 0; i < n; ++i) {
    const float* z = logits + size_t(i) * k;
    assert(labels[i] >= 0 && labels[i] < k);
    float zmax = z[0];
    for (int j = 1; j < k; ++j) zmax = std::max(zmax, z[j]);
    double sum_exp = 0.0, sum_z = 0.0;
    for (int j = 0; j < k; ++j) {
      sum_exp += std::exp(double(z[j] - zmax));
      sum_z += z[j];
    }
    const double lse = zmax + std::log(sum_exp);
    // loss = lse - sum_j target_j z_j.
    const double target_dot = off * sum_z + (on - off) * z[labels[i]];
    losses[i] = float(lse - target_dot);
    if (d_logits != nullptr) {
      float* d = d_logits + size_t(i) * k;
      for (int j = 0; j < k; ++j) {
        const double p = std::exp(double(z[j]) - lse);
        const float t = j == labels[i] ? on : off;
        d[j] = float((p - t) / n);
      }
    }
  }
}

void SgdUpdate(float* param, float* velocity, const float* grad, size_t count,
               const SgdStep& step, ThreadPool* pool) {
  const SgdStep st = step;
  ForChunks(pool, count, [param, velocity, grad, st](size_t begin, size_t end) {
    const SgdStep& step = st;
    for (size_t i = begin; i < end; ++i) {
      const float g = grad[i] + step.weight_decay * param[i];
      const float v = step.momentum * velocity[i] + g;
      velocity[i] = v;
      param[i] -= step.lr * (step.nesterov ? g + step.momentum * v : v);
    }
  });
}

}  // namespace hypertune::train
