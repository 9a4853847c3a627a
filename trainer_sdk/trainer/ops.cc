// CPU reference of ops.h. The network's convolutions (3x3 pad 1 and 1x1,
// stride 1 or 2) are computed directly on a zero-padded "grid" copy of a
// chunk of images (see Grid below): small register-tiled loops of fused
// multiply-adds, explicitly vectorized, with no im2col; other shapes (the
// 7x7 imagenet stem) are Eigen GEMMs on im2col columns per image. The batch
// is split into chunks of images fixed by the shape, and weight gradients
// are summed chunk by chunk in order, whatever the thread count. Batch norm
// streams image by image, its per-(image, channel) sums combined per
// channel in image order.
#include "trainer_sdk/trainer/ops.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "trainer_sdk/trainer/thread_pool.h"

namespace hypertune::train {
namespace {

using RowMatrix =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapRow = Eigen::Map<RowMatrix>;
using ConstMapRow = Eigen::Map<const RowMatrix>;

// Elementwise loops are split into chunks of this many values.
constexpr size_t kElementChunk = 1 << 15;
// Images per conv task: as many as keep one task's widest buffer (channels
// x padded pixels) near kConvChunkFloats, so a task's operands stay in L2,
// but at most kMaxConvChunks tasks (each holds a weight-gradient partial). A
// function of the shape only, never of the thread count (determinism).
constexpr size_t kConvChunkFloats = size_t(1) << 16;
constexpr int kMaxConvChunks = 32;

int ConvChunk(const ConvShape& s) {
  const size_t plane = size_t(s.in_h + 2 * s.pad) * (s.in_w + 2 * s.pad);
  const size_t per_image = plane * size_t(std::max(s.in_c, s.out_c));
  const int by_cache = int(std::clamp<size_t>(
      kConvChunkFloats / std::max<size_t>(per_image, 1), 1, 8));
  return std::max(by_cache, (s.n + kMaxConvChunks - 1) / kMaxConvChunks);
}

int Chunks(size_t count, size_t chunk) {
  return int((count + chunk - 1) / chunk);
}

// Images per task of a per-image loop: about kElementChunk values.
int ImagesPerTask(size_t image) {
  return int(std::max<size_t>(1, kElementChunk / std::max<size_t>(image, 1)));
}

template <typename Fn>
void ForChunks(ThreadPool* pool, size_t count, Fn fn) {
  ParallelFor(pool, Chunks(count, kElementChunk), [&](int t) {
    size_t begin = size_t(t) * kElementChunk;
    size_t end = std::min(count, begin + kElementChunk);
    fn(begin, end);
  });
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
        while (ox_hi > ox_lo && (ox_hi - 1) * s.stride - s.pad + kx >= s.in_w)
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
        while (ox_hi > ox_lo && (ox_hi - 1) * s.stride - s.pad + kx >= s.in_w)
          --ox_hi;
        for (int oy = 0; oy < oh; ++oy) {
          const int iy = oy * s.stride - s.pad + ky;
          if (iy < 0 || iy >= s.in_h) continue;
          const float* __restrict row = src + oy * ow;
          float* __restrict drow = dst + iy * s.in_w - s.pad + kx;
          if (s.stride == 1) {
            for (int ox = ox_lo; ox < ox_hi; ++ox) drow[ox] += row[ox];
          } else {
            for (int ox = ox_lo; ox < ox_hi; ++ox)
              drow[ox * s.stride] += row[ox];
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
  thread_local std::vector<float> buffers[4];
  std::vector<float>& b = buffers[which];
  if (b.size() < size) b.resize(size);
  return b;
}

// Eight floats, for explicit SIMD through the GCC/Clang vector extension,
// and its unaligned twin that may alias float, for loads and stores through
// float pointers (as immintrin.h's _mm256_loadu_ps does).
typedef float Vec8 __attribute__((vector_size(32)));
typedef float UnalignedVec8
    __attribute__((vector_size(32), aligned(4), may_alias));

// The lanes' sum, in a fixed order.
float SumLanes(const Vec8& v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// Sums of (x - shift) and (x - shift)^2 over n values, in 8 lanes (value j
// in lane j % 8) combined in a fixed order.
void ShiftedSums(const float* x, int n, float shift, float* sum,
                 float* sum_sq) {
  Vec8 a = {}, b = {};
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const Vec8 d = *reinterpret_cast<const UnalignedVec8*>(x + j) - shift;
    a += d;
    b += d * d;
  }
  for (; j < n; ++j) {
    const float d = x[j] - shift;
    a[j & 7] += d;
    b[j & 7] += d * d;
  }
  *sum = SumLanes(a);
  *sum_sq = SumLanes(b);
}

// Sums of dy and dy * (x - mean) over n values, lanes as above.
void GradientSums(const float* dy, const float* x, int n, float mean,
                  float* sum_dy, float* sum_dy_x) {
  Vec8 a = {}, b = {};
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const Vec8 g = *reinterpret_cast<const UnalignedVec8*>(dy + j);
    a += g;
    b += g * (*reinterpret_cast<const UnalignedVec8*>(x + j) - mean);
  }
  for (; j < n; ++j) {
    a[j & 7] += dy[j];
    b[j & 7] += dy[j] * (x[j] - mean);
  }
  *sum_dy = SumLanes(a);
  *sum_dy_x = SumLanes(b);
}

// Direct convolution on a grid, for the network's own convolutions: 3x3
// with pad 1 and 1x1 with pad 0, stride 1 or 2 (UseGrid). A chunk of images
// is copied into a "grid" per channel: images one after another, each as
// gh = out_h + 1 rows of gw = out_w + 1 values, whose first row and first
// column are zeros. Output pixel (i, y, x) lives at grid position
//   q = (i * gh + 1 + y) * gw + 1 + x,
// and input pixel (stride * y + py, stride * x + px) at the same position of
// input plane (py, px) (a strided conv reads stride^2 subsampled planes, so
// that its taps become unit steps too). Tap (ky, kx) then reads the input at
// q + shift, a constant per tap, the zero row and column serving as padding
// on both sides; so the convolution is a sum of shifted rows scaled by
// weights: contiguous loops of fused multiply-adds, no im2col copy. Grid
// positions that are not output pixels are computed and dropped, the price
// being (out_h + 1)(out_w + 1) / (out_h * out_w).

// A tile of ShiftedRows: kTileRows output rows by kTileVecs vectors, held in
// registers while every input row and tap is accumulated.
constexpr int kTileRows = 4;
constexpr int kTileVecs = 3;
constexpr int kTileCols = 8 * kTileVecs;
// Floats of input per ShiftedRows column block (16 KiB).
constexpr int kRowsBlockFloats = 4096;

int RoundUp(int value, int multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Where ShiftedRows reads weight (r, c, t) of its out_rows x in_rows x taps
// weights: row tile after row tile (kTileRows rows, then single rows), each
// [c][t][rows of the tile], so that a tile's weights are one contiguous run.
size_t TileWeightIndex(int r, int c, int t, int out_rows, int in_rows,
                       int taps) {
  const int full = out_rows / kTileRows * kTileRows;
  const int r0 = r < full ? r / kTileRows * kTileRows : r;
  const int rows = r < full ? kTileRows : 1;
  return size_t(r0) * in_rows * taps + (size_t(c) * taps + t) * rows + (r - r0);
}

// out[r * ld_out + q] = sum over c < in_rows and t < taps of
//   W(r, c, t) * in[c * ld_in + q + shift[t]]
// for the rows r in [r0, r0 + R) and q in [q0, q1), where W(r, c, t) is
// w[TileWeightIndex(r, c, t, ...)].
// REQUIRES: q1 - q0 is a multiple of kTileCols; every in[...] read lies in
// the buffer.
template <int R>
void ShiftedRowsTile(float* out, size_t ld_out, const float* in, size_t ld_in,
                     int in_rows, const float* w, const int* shift, int taps,
                     int q0, int q1, int r0) {
  for (int q = q0; q < q1; q += kTileCols) {
    Vec8 acc[R][kTileVecs] = {};
    const float* tile = w + size_t(r0) * in_rows * taps;
    for (int c = 0; c < in_rows; ++c) {
      const float* x = in + c * ld_in + q;
      const float* wc = tile + size_t(c) * taps * R;
      for (int t = 0; t < taps; ++t) {
        Vec8 xv[kTileVecs];
        for (int j = 0; j < kTileVecs; ++j) {
          xv[j] = *reinterpret_cast<const UnalignedVec8*>(x + shift[t] + 8 * j);
        }
        for (int r = 0; r < R; ++r) {
          const float wv = wc[t * R + r];
          for (int j = 0; j < kTileVecs; ++j) acc[r][j] += wv * xv[j];
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < kTileVecs; ++j) {
        float* to = out + (r0 + r) * ld_out + q + 8 * j;
        *reinterpret_cast<UnalignedVec8*>(to) = acc[r][j];
      }
    }
  }
}

// REQUIRES: cols % kTileCols == 0. Column blocks keep their slice of `in`
// in L1 while every row tile passes over it.
void ShiftedRows(float* out, size_t ld_out, const float* in, size_t ld_in,
                 int in_rows, const float* w, int out_rows, const int* shift,
                 int taps, int cols) {
  const int block =
      kTileCols * std::max(1, kRowsBlockFloats / (kTileCols * in_rows));
  for (int q0 = 0; q0 < cols; q0 += block) {
    const int q1 = std::min(cols, q0 + block);
    int r = 0;
    for (; r + kTileRows <= out_rows; r += kTileRows) {
      ShiftedRowsTile<kTileRows>(out, ld_out, in, ld_in, in_rows, w, shift,
                                 taps, q0, q1, r);
    }
    for (; r < out_rows; ++r) {
      ShiftedRowsTile<1>(out, ld_out, in, ld_in, in_rows, w, shift, taps, q0,
                         q1, r);
    }
  }
}

// dw[(r * b_rows + c) * taps + t] = sum over q < cols of
//   at[q * ld_at + r] * b[c * ld_b + q + shift[t]]
// (at is the first operand transposed) for rows r in [r0, r0 + 8 V) and the
// CT (c, t) pairs from ct0 on, pairs numbered c * taps + t: a register tile
// of V x CT vectors, each lane summing its products in order of q. Rows
// from a_rows on are read (at must hold them) but not written. Out of line:
// inlined into its caller, GCC spills the row pointers of the inner loop.
template <int V, int CT>
[[gnu::noinline]] void ShiftedDotsTile(float* dw, const float* at, size_t ld_at,
                                       int a_rows, const float* b, size_t ld_b,
                                       int b_rows, const int* shift, int taps,
                                       int cols, int r0, int ct0) {
  const float* rows[CT];
  for (int k = 0; k < CT; ++k) {
    const int c = (ct0 + k) / taps, t = (ct0 + k) % taps;
    rows[k] = b + c * ld_b + shift[t];
  }
  Vec8 acc[V][CT] = {};
  for (int q = 0; q < cols; ++q) {
    Vec8 av[V];
    for (int v = 0; v < V; ++v) {
      const float* from = at + q * ld_at + r0 + 8 * v;
      av[v] = *reinterpret_cast<const UnalignedVec8*>(from);
    }
    for (int k = 0; k < CT; ++k) {
      const float bv = rows[k][q];
      for (int v = 0; v < V; ++v) acc[v][k] += av[v] * bv;
    }
  }
  for (int v = 0; v < V; ++v) {
    for (int l = 0; l < 8; ++l) {
      const int r = r0 + 8 * v + l;
      if (r >= a_rows) break;
      for (int k = 0; k < CT; ++k) {
        dw[size_t(r) * b_rows * taps + ct0 + k] = acc[v][k][l];
      }
    }
  }
}

// REQUIRES: ld_at >= RoundUp(a_rows, 16).
void ShiftedDots(float* dw, const float* at, size_t ld_at, int a_rows,
                 const float* b, size_t ld_b, int b_rows, const int* shift,
                 int taps, int cols) {
  const int pairs = b_rows * taps;
  for (int r = 0; r < a_rows; r += 16) {
    int ct = 0;
    for (; ct + 6 <= pairs; ct += 6) {
      ShiftedDotsTile<2, 6>(dw, at, ld_at, a_rows, b, ld_b, b_rows, shift, taps,
                            cols, r, ct);
    }
    for (; ct + 3 <= pairs; ct += 3) {
      ShiftedDotsTile<2, 3>(dw, at, ld_at, a_rows, b, ld_b, b_rows, shift, taps,
                            cols, r, ct);
    }
    for (; ct < pairs; ++ct) {
      ShiftedDotsTile<2, 1>(dw, at, ld_at, a_rows, b, ld_b, b_rows, shift, taps,
                            cols, r, ct);
    }
  }
}

#ifdef __has_builtin
#if __has_builtin(__builtin_shufflevector)
#define HYPERTUNE_TRAIN_SHUFFLEVECTOR 1
#endif
#endif

// Transposes the 8 x 8 matrix whose rows are b[0..8), in place.
void Transpose8(Vec8 (&b)[8]) {
#ifdef HYPERTUNE_TRAIN_SHUFFLEVECTOR
  // Interleave pairs of rows, then pairs of those, then swap 4 x 4 quarters.
  Vec8 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(b[i], b[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] =
        __builtin_shufflevector(b[i], b[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = __builtin_shufflevector(t[i], t[i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
    u[i + 1] =
        __builtin_shufflevector(t[i], t[i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    u[i + 2] =
        __builtin_shufflevector(t[i + 1], t[i + 3], 0, 1, 8, 9, 4, 5, 12, 13);
    u[i + 3] =
        __builtin_shufflevector(t[i + 1], t[i + 3], 2, 3, 10, 11, 6, 7, 14, 15);
  }
  for (int i = 0; i < 4; ++i) {
    b[i] = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    b[i + 4] =
        __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
#else
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < i; ++j) {
      const float x = b[i][j];
      b[i][j] = b[j][i];
      b[j][i] = x;
    }
  }
#endif
}

// dst[q * ld_dst + r] = src[r * ld_src + q] for q < cols and r < ld_dst,
// zero for the rows r >= rows. REQUIRES: cols and ld_dst multiples of 8.
void Transpose(float* dst, size_t ld_dst, const float* src, size_t ld_src,
               int rows, int cols) {
  for (int r0 = 0; r0 < int(ld_dst); r0 += 8) {
    for (int q0 = 0; q0 < cols; q0 += 8) {
      Vec8 block[8];
      for (int i = 0; i < 8; ++i) {
        block[i] = Vec8{};
        if (r0 + i < rows) {
          const float* from = src + (r0 + i) * ld_src + q0;
          block[i] = *reinterpret_cast<const UnalignedVec8*>(from);
        }
      }
      Transpose8(block);
      for (int i = 0; i < 8; ++i) {
        float* to = dst + (q0 + i) * ld_dst + r0;
        *reinterpret_cast<UnalignedVec8*>(to) = block[i];
      }
    }
  }
}

bool UseGrid(const ConvShape& s) {
  const bool k3 = s.kernel == 3 && s.pad == 1;
  const bool k1 = s.kernel == 1 && s.pad == 0;
  return (k3 || k1) && (s.stride == 1 || s.stride == 2);
}

// The grid of a chunk of `images` images of shape s (see above).
struct Grid {
  int stride = 1;
  int phases = 1;      // input planes per channel
  int gh = 0, gw = 0;  // rows per image, values per row
  int images = 0;
  int cols = 0;   // positions computed per row, a multiple of kTileCols
  int front = 0;  // zeros before position 0 (taps reach back gw + 1)
  size_t ld = 0;  // floats per plane
  int taps = 0;
  int phase[9];   // per tap: its input plane
  int shift[9];   // per tap: its offset within that plane
  int offset[9];  // per tap: phase * ld + shift
};

Grid MakeGrid(const ConvShape& s, int images) {
  Grid g;
  g.stride = s.stride;
  g.phases = s.kernel == 1 ? 1 : s.stride * s.stride;
  g.gh = s.out_h() + 1;
  g.gw = s.out_w() + 1;
  g.images = images;
  g.cols = RoundUp(images * g.gh * g.gw, kTileCols);
  g.front = RoundUp(g.gw + 1, 8);
  g.ld = size_t(g.front) + g.cols + RoundUp(g.gw + 1, 8);
  g.taps = s.kernel * s.kernel;
  for (int ky = 0; ky < s.kernel; ++ky) {
    for (int kx = 0; kx < s.kernel; ++kx) {
      // Input row stride * oy - pad + ky = stride * (oy + dy) + py.
      const int ry = ky - s.pad, rx = kx - s.pad;
      const int dy = ry < 0 ? -1 : ry / s.stride, py = ry - dy * s.stride;
      const int dx = rx < 0 ? -1 : rx / s.stride, px = rx - dx * s.stride;
      const int t = ky * s.kernel + kx;
      g.phase[t] = py * s.stride + px;
      g.shift[t] = dy * g.gw + dx;
      g.offset[t] = int(g.phase[t] * g.ld) + g.shift[t];
    }
  }
  return g;
}

// row[0] = 0, then row[1 + x] = from[stride * x] for x < n and zero for
// x in [n, row_len), or zero throughout when from is null (a padding row).
// REQUIRES: stride 1 or 2 (spelled out below so that the loops vectorize).
void CopyRow(float* __restrict row, const float* __restrict from, int stride,
             int n, int row_len) {
  row[0] = 0.0f;
  int x = 0;
  if (from != nullptr) {
    if (stride == 1) {
      for (; x < n; ++x) row[1 + x] = from[x];
    } else {
      for (; x < n; ++x) row[1 + x] = from[2 * x];
    }
  }
  for (; x < row_len; ++x) row[1 + x] = 0.0f;
}

// CopyRow with stride 2 into two rows at once: even gets from[2x], odd
// from[2x + 1].
void CopyRowPair(float* __restrict even, float* __restrict odd,
                 const float* __restrict from, int w, int row_len) {
  even[0] = 0.0f;
  odd[0] = 0.0f;
  int x = 0;
  if (from != nullptr) {
    for (; x < std::min(row_len, w / 2); ++x) {
      even[1 + x] = from[2 * x];
      odd[1 + x] = from[2 * x + 1];
    }
    if (x < row_len && 2 * x < w) {
      even[1 + x] = from[2 * x];
      odd[1 + x] = 0.0f;
      ++x;
    }
  }
  for (; x < row_len; ++x) {
    even[1 + x] = 0.0f;
    odd[1 + x] = 0.0f;
  }
}

// grid planes [channels][phases][ld] <- the images src [images][channels]
// [h][w]: plane (py, px) holds pixel (stride * y + py, stride * x + px) at
// the position of output (y, x), zeros elsewhere. With one plane (a 1x1
// conv), only pixels (stride * y, stride * x). REQUIRES: stride 1 or 2.
void PackGrid(float* grid, const float* src, int channels, int h, int w,
              int stride, int phases, const Grid& g) {
  const int rows = g.gh - 1, row_len = g.gw - 1;
  const int planes_per_row = phases == 1 ? 1 : stride;         // px values
  const int n = std::min(row_len, (w + stride - 1) / stride);  // x in the image
  const size_t block = size_t(g.gh) * g.gw;
  for (int c = 0; c < channels; ++c) {
    float* planes = grid + size_t(c) * phases * g.ld;
    for (int ph = 0; ph < phases; ++ph) {
      // The slack, and the zero row above each image and after the last.
      float* p = planes + ph * g.ld;
      std::fill(p, p + g.front, 0.0f);
      for (int i = 0; i <= g.images; ++i) {
        float* top = p + g.front + i * block;
        std::fill(top, top + g.gw, 0.0f);
      }
      std::fill(p + g.front + g.images * block + g.gw, p + g.ld, 0.0f);
    }
    for (int i = 0; i < g.images; ++i) {
      const float* img = src + (size_t(i) * channels + c) * h * w;
      for (int y = 0; y < rows; ++y) {
        for (int py = 0; py < planes_per_row; ++py) {
          const size_t at = g.front + i * block + size_t(y + 1) * g.gw;
          float* even = planes + (py * planes_per_row) * g.ld + at;
          const int iy = stride * y + py;
          const float* from = iy < h ? img + size_t(iy) * w : nullptr;
          if (planes_per_row == 2) {
            CopyRowPair(even, even + g.ld, from, w, row_len);
          } else {
            CopyRow(even, from, stride, n, row_len);
          }
        }
      }
    }
  }
}

// dst [images][channels][h][w] <- grid planes [channels][phases][ld_plane]
// laid out as PackGrid's; pixels in no plane (a strided 1x1 conv's) get 0.
void UnpackGrid(float* dst, const float* grid, size_t ld_plane, int channels,
                int h, int w, int stride, int phases, const Grid& g) {
  const int planes_per_row = phases == 1 ? 1 : stride;
  for (int i = 0; i < g.images; ++i) {
    for (int c = 0; c < channels; ++c) {
      const float* planes = grid + size_t(c) * phases * ld_plane;
      float* img = dst + (size_t(i) * channels + c) * h * w;
      for (int iy = 0; iy < h; ++iy) {
        const int py = iy % stride;
        float* __restrict to = img + size_t(iy) * w;
        if (py >= planes_per_row) {
          std::fill(to, to + w, 0.0f);
          continue;
        }
        const size_t at = (size_t(i) * g.gh + iy / stride + 1) * g.gw + 1;
        const float* even = planes + py * planes_per_row * ld_plane + at;
        if (stride == 1) {
          for (int x = 0; x < w; ++x) to[x] = even[x];
        } else if (planes_per_row == 1) {
          int x = 0;
          for (; 2 * x + 1 < w; ++x) {
            to[2 * x] = even[x];
            to[2 * x + 1] = 0.0f;
          }
          if (2 * x < w) to[2 * x] = even[x];
        } else {
          const float* __restrict odd = even + ld_plane;
          int x = 0;
          for (; 2 * x + 1 < w; ++x) {
            to[2 * x] = even[x];
            to[2 * x + 1] = odd[x];
          }
          if (2 * x < w) to[2 * x] = even[x];
        }
      }
    }
  }
}

// Weights for ShiftedRows, forward: W(o, c, t) = weight[o][c][t].
std::vector<float> ForwardWeights(const float* weight, const ConvShape& s) {
  const int taps = s.kernel * s.kernel;
  std::vector<float> w(s.weight_size());
  for (int o = 0; o < s.out_c; ++o)
    for (int c = 0; c < s.in_c; ++c)
      for (int t = 0; t < taps; ++t)
        w[TileWeightIndex(o, c, t, s.out_c, s.in_c, taps)] =
            weight[(size_t(o) * s.in_c + c) * taps + t];
  return w;
}

// The transposed convolution of one input plane: its taps, their reversed
// shifts, and weights for ShiftedRows from dY to dX:
// W(c, o, j) = weight[o][c][tap[j]].
struct PlaneTaps {
  int count = 0;
  int tap[9];
  int shift[9];
  std::vector<float> weights;
};

std::vector<PlaneTaps> BackwardTaps(const float* weight, const ConvShape& s,
                                    const Grid& g) {
  std::vector<PlaneTaps> planes(g.phases);
  for (int t = 0; t < g.taps; ++t) {
    PlaneTaps& p = planes[g.phase[t]];
    p.tap[p.count] = t;
    p.shift[p.count] = -g.shift[t];
    ++p.count;
  }
  for (PlaneTaps& p : planes) {
    p.weights.resize(size_t(s.out_c) * p.count * s.in_c);
    for (int o = 0; o < s.out_c; ++o)
      for (int j = 0; j < p.count; ++j)
        for (int c = 0; c < s.in_c; ++c)
          p.weights[TileWeightIndex(c, o, j, s.in_c, s.out_c, p.count)] =
              weight[(size_t(o) * s.in_c + c) * g.taps + p.tap[j]];
  }
  return planes;
}

void GridForward(float* out, const float* in, const std::vector<float>& w,
                 const ConvShape& s, const Grid& g) {
  float* x = Scratch(0, size_t(s.in_c) * g.phases * g.ld).data();
  float* y = Scratch(1, size_t(s.out_c) * g.cols).data();
  PackGrid(x, in, s.in_c, s.in_h, s.in_w, s.stride, g.phases, g);
  ShiftedRows(y, g.cols, x + g.front, g.phases * g.ld, s.in_c, w.data(),
              s.out_c, g.offset, g.taps, g.cols);
  UnpackGrid(out, y, g.cols, s.out_c, s.out_h(), s.out_w(), 1, 1, g);
}

// d_weight [out_c][in_c][taps] (overwritten) and d_in for one chunk.
void GridBackward(float* d_in, float* d_weight, const float* d_out,
                  const float* in, const std::vector<PlaneTaps>& planes,
                  const ConvShape& s, const Grid& g) {
  float* dy = Scratch(1, size_t(s.out_c) * g.ld).data();
  PackGrid(dy, d_out, s.out_c, s.out_h(), s.out_w(), 1, 1, g);
  if (d_weight != nullptr) {
    float* x = Scratch(0, size_t(s.in_c) * g.phases * g.ld).data();
    PackGrid(x, in, s.in_c, s.in_h, s.in_w, s.stride, g.phases, g);
    const int ld_t = RoundUp(s.out_c, 16);
    float* dy_t = Scratch(3, size_t(g.cols) * ld_t).data();
    Transpose(dy_t, ld_t, dy + g.front, g.ld, s.out_c, g.cols);
    ShiftedDots(d_weight, dy_t, ld_t, s.out_c, x + g.front, g.phases * g.ld,
                s.in_c, g.offset, g.taps, g.cols);
  }
  if (d_in != nullptr) {
    float* dx = Scratch(2, size_t(s.in_c) * g.phases * g.cols).data();
    for (int ph = 0; ph < g.phases; ++ph) {
      const PlaneTaps& p = planes[ph];
      ShiftedRows(dx + size_t(ph) * g.cols, size_t(g.phases) * g.cols,
                  dy + g.front, g.ld, s.out_c, p.weights.data(), s.in_c,
                  p.shift, p.count, g.cols);
    }
    UnpackGrid(d_in, dx, g.cols, s.in_c, s.in_h, s.in_w, s.stride, g.phases, g);
  }
}

// The general case, Eigen GEMMs per image: out = W [out_c][in_c k k] x
// im2col(in) for `images` images.
void GemmForward(float* out, const float* in, const float* weight,
                 const ConvShape& s, int images) {
  const int K = s.in_c * s.kernel * s.kernel;
  const int plane = s.out_h() * s.out_w();
  const size_t in_image = size_t(s.in_c) * s.in_h * s.in_w;
  const size_t out_image = size_t(s.out_c) * plane;
  ConstMapRow w(weight, s.out_c, K);
  float* col = Scratch(0, size_t(K) * plane).data();
  for (int i = 0; i < images; ++i) {
    Im2Col(col, in + i * in_image, s);
    MapRow(out + i * out_image, s.out_c, plane).noalias() =
        w * ConstMapRow(col, K, plane);
  }
}

// d_weight (overwritten, when not null) and d_in of `images` images.
void GemmBackward(float* d_in, float* d_weight, const float* d_out,
                  const float* in, const float* weight, const ConvShape& s,
                  int images) {
  const int K = s.in_c * s.kernel * s.kernel;
  const int plane = s.out_h() * s.out_w();
  const size_t in_image = size_t(s.in_c) * s.in_h * s.in_w;
  const size_t out_image = size_t(s.out_c) * plane;
  ConstMapRow w(weight, s.out_c, K);
  float* col = Scratch(0, size_t(K) * plane).data();
  if (d_weight != nullptr) {
    std::fill(d_weight, d_weight + s.weight_size(), 0.0f);
  }
  for (int i = 0; i < images; ++i) {
    ConstMapRow dout(d_out + i * out_image, s.out_c, plane);
    if (d_weight != nullptr) {
      Im2Col(col, in + i * in_image, s);
      MapRow(d_weight, s.out_c, K).noalias() +=
          dout * ConstMapRow(col, K, plane).transpose();
    }
    if (d_in != nullptr) {
      float* din = d_in + i * in_image;
      MapRow(col, K, plane).noalias() = w.transpose() * dout;
      std::fill(din, din + in_image, 0.0f);
      Col2ImAdd(din, col, s);
    }
  }
}

}  // namespace

void Conv2dForward(float* out, const float* in, const float* weight,
                   const ConvShape& s, ThreadPool* pool) {
  const size_t in_image = size_t(s.in_c) * s.in_h * s.in_w;
  const size_t out_image = size_t(s.out_c) * s.out_h() * s.out_w();
  const int chunk = ConvChunk(s);
  const bool grid = UseGrid(s);
  const std::vector<float> w =
      grid ? ForwardWeights(weight, s) : std::vector<float>();
  ParallelFor(pool, Chunks(s.n, chunk), [&](int t) {
    const int first = t * chunk, last = std::min(s.n, first + chunk);
    if (grid) {
      GridForward(out + first * out_image, in + first * in_image, w, s,
                  MakeGrid(s, last - first));
    } else {
      GemmForward(out + first * out_image, in + first * in_image, weight, s,
                  last - first);
    }
  });
}

void Conv2dBackward(float* d_in, float* d_weight, const float* d_out,
                    const float* in, const float* weight, const ConvShape& s,
                    ThreadPool* pool) {
  const size_t in_image = size_t(s.in_c) * s.in_h * s.in_w;
  const size_t out_image = size_t(s.out_c) * s.out_h() * s.out_w();
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
  const bool grid = UseGrid(s);
  const std::vector<PlaneTaps> planes =
      grid ? BackwardTaps(weight, s, MakeGrid(s, chunk))
           : std::vector<PlaneTaps>();
  ParallelFor(pool, chunks, [&](int t) {
    const int first = t * chunk, last = std::min(s.n, first + chunk);
    float* chunk_d_in = d_in != nullptr ? d_in + first * in_image : nullptr;
    float* chunk_d_weight = d_weight != nullptr ? partial + wsize * t : nullptr;
    if (grid) {
      GridBackward(chunk_d_in, chunk_d_weight, d_out + first * out_image,
                   in + first * in_image, planes, s, MakeGrid(s, last - first));
    } else {
      GemmBackward(chunk_d_in, chunk_d_weight, d_out + first * out_image,
                   in + first * in_image, weight, s, last - first);
    }
  });
  if (d_weight != nullptr) SumPartials(d_weight, partial, chunks, wsize, pool);
}

// Two sums per channel: `pair_sums(offset, c, pair)` fills a pair for the
// plane of one (image, channel) at `offset`, on the pool; the pairs are then
// added per channel in image order, in double, so the totals do not depend
// on the thread count. Returns {first, second} of channel c at 2c, 2c + 1.
template <typename PairSums>
std::vector<double> ChannelPairSums(const BatchNormShape& s, ThreadPool* pool,
                                    PairSums pair_sums) {
  const size_t image = size_t(s.c) * s.hw;
  const int per_task = ImagesPerTask(image);
  std::vector<float> pairs(2 * size_t(s.n) * s.c);
  ParallelFor(pool, Chunks(s.n, per_task), [&](int t) {
    const int last = std::min(s.n, (t + 1) * per_task);
    for (int i = t * per_task; i < last; ++i) {
      for (int c = 0; c < s.c; ++c) {
        pair_sums(i * image + size_t(c) * s.hw, c,
                  pairs.data() + 2 * (size_t(i) * s.c + c));
      }
    }
  });
  std::vector<double> totals(2 * size_t(s.c), 0.0);
  for (int c = 0; c < s.c; ++c) {
    for (int i = 0; i < s.n; ++i) {
      totals[2 * c] += pairs[2 * (size_t(i) * s.c + c)];
      totals[2 * c + 1] += pairs[2 * (size_t(i) * s.c + c) + 1];
    }
  }
  return totals;
}

void BatchNormForwardTrain(float* out, float* save_mean, float* save_inv_std,
                           float* running_mean, float* running_var,
                           const float* in, const float* gamma,
                           const float* beta, const float* residual, bool relu,
                           const BatchNormShape& s, ThreadPool* pool) {
  const size_t count = size_t(s.n) * s.hw;
  const size_t image = size_t(s.c) * s.hw;
  const int per_task = ImagesPerTask(image);
  // Sums of (x - shift) and its square, shift being the channel's first
  // value (keeps the variance accurate).
  const std::vector<double> sums =
      ChannelPairSums(s, pool, [&](size_t offset, int c, float* pair) {
        ShiftedSums(in + offset, s.hw, in[size_t(c) * s.hw], &pair[0],
                    &pair[1]);
      });
  std::vector<float> scale(s.c), bias(s.c);
  for (int c = 0; c < s.c; ++c) {
    const double sum = sums[2 * c], sum_sq = sums[2 * c + 1];
    const double shift = in[size_t(c) * s.hw];
    const double mean_shifted = sum / double(count);
    double var = sum_sq / double(count) - mean_shifted * mean_shifted;
    if (var < 0.0) var = 0.0;
    const double mean = mean_shifted + shift;
    const float inv_std = float(1.0 / std::sqrt(var + s.eps));
    save_mean[c] = float(mean);
    save_inv_std[c] = inv_std;
    const double unbiased =
        count > 1 ? var * double(count) / double(count - 1) : var;
    running_mean[c] =
        float((1.0 - s.momentum) * running_mean[c] + s.momentum * mean);
    running_var[c] =
        float((1.0 - s.momentum) * running_var[c] + s.momentum * unbiased);
    scale[c] = gamma[c] * inv_std;
    bias[c] = beta[c] - float(mean) * scale[c];
  }
  ParallelFor(pool, Chunks(s.n, per_task), [&](int t) {
    const int last = std::min(s.n, (t + 1) * per_task);
    for (int i = t * per_task; i < last; ++i) {
      for (int c = 0; c < s.c; ++c) {
        const size_t offset = i * image + size_t(c) * s.hw;
        const float a = scale[c], b = bias[c];
        const float* __restrict x = in + offset;
        const float* r = residual != nullptr ? residual + offset : nullptr;
        float* y = out + offset;
        if (r != nullptr) {
          if (relu) {
            for (int j = 0; j < s.hw; ++j)
              y[j] = std::max(x[j] * a + b + r[j], 0.0f);
          } else {
            for (int j = 0; j < s.hw; ++j) y[j] = x[j] * a + b + r[j];
          }
        } else if (relu) {
          for (int j = 0; j < s.hw; ++j) y[j] = std::max(x[j] * a + b, 0.0f);
        } else {
          for (int j = 0; j < s.hw; ++j) y[j] = x[j] * a + b;
        }
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
  const int per_task = ImagesPerTask(image);
  // Sums of dy and dy * (x - mean).
  const std::vector<double> sums =
      ChannelPairSums(s, pool, [&](size_t offset, int c, float* pair) {
        GradientSums(d_out + offset, in + offset, s.hw, save_mean[c], &pair[0],
                     &pair[1]);
      });
  // d_in = gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat)),
  // as a * dy + b * x + k per element.
  std::vector<float> a(s.c), b(s.c), k(s.c);
  for (int c = 0; c < s.c; ++c) {
    const double sum_dy = sums[2 * c];
    double sum_dy_xhat = sums[2 * c + 1];
    const float inv_std = save_inv_std[c];
    sum_dy_xhat *= inv_std;
    if (d_gamma != nullptr) d_gamma[c] = float(sum_dy_xhat);
    if (d_beta != nullptr) d_beta[c] = float(sum_dy);
    const float scale = gamma[c] * inv_std;
    const float mean_dy = float(sum_dy / double(count));
    const float mean_dy_xhat = float(sum_dy_xhat / double(count));
    a[c] = scale;
    b[c] = -scale * inv_std * mean_dy_xhat;
    k[c] = -scale * mean_dy - b[c] * save_mean[c];
  }
  if (d_in == nullptr) return;
  ParallelFor(pool, Chunks(s.n, per_task), [&](int t) {
    const int last = std::min(s.n, (t + 1) * per_task);
    for (int i = t * per_task; i < last; ++i) {
      for (int c = 0; c < s.c; ++c) {
        const size_t offset = i * image + size_t(c) * s.hw;
        const float* __restrict dy = d_out + offset;
        const float* __restrict x = in + offset;
        float* __restrict dx = d_in + offset;
        const float ac = a[c], bc = b[c], kc = k[c];
        for (int j = 0; j < s.hw; ++j) dx[j] = ac * dy[j] + bc * x[j] + kc;
      }
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
  y.noalias() =
      ConstMapRow(in, n, in_f) * ConstMapRow(weight, out_f, in_f).transpose();
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
