#include "trainer_sdk/trainer/data/augment.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

namespace hypertune::data {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Mixing the stream before xoring keeps (seed, i) and (seed ^ 1, i ^ 1) apart.
ExampleRng::ExampleRng(uint64_t seed, uint64_t stream)
    : state_(SplitMix64(seed) ^ SplitMix64(~stream)) {}

uint64_t ExampleRng::NextU64() {
  state_ += 0x9e3779b97f4a7c15ULL;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double ExampleRng::Uniform() {
  return static_cast<double>(NextU64() >> 11) * 0x1.0p-53;
}

int64_t ExampleRng::UniformInt(int64_t n) {
  assert(n > 0);
  // Multiply-shift: bias n / 2^64, far below anything a test could see.
  return static_cast<int64_t>(
      (static_cast<unsigned __int128>(NextU64()) * static_cast<uint64_t>(n)) >>
      64);
}

CropBox RandomResizedCropBox(int width, int height, ExampleRng& rng,
                             double min_scale, double max_scale,
                             double min_ratio, double max_ratio) {
  assert(width > 0 && height > 0);
  const double area = static_cast<double>(width) * height;
  const double log_min = std::log(min_ratio), log_max = std::log(max_ratio);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area =
        area * (min_scale + (max_scale - min_scale) * rng.Uniform());
    const double ratio =
        std::exp(log_min + (log_max - log_min) * rng.Uniform());
    const int w = static_cast<int>(std::lround(std::sqrt(target_area * ratio)));
    const int h = static_cast<int>(std::lround(std::sqrt(target_area / ratio)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int64_t y = rng.UniformInt(height - h + 1);
      const int64_t x = rng.UniformInt(width - w + 1);
      return {static_cast<double>(x), static_cast<double>(y),
              static_cast<double>(w), static_cast<double>(h)};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < min_ratio) {
    h = static_cast<int>(std::lround(w / min_ratio));
  } else if (in_ratio > max_ratio) {
    w = static_cast<int>(std::lround(h * max_ratio));
  }
  return {static_cast<double>((width - w) / 2),
          static_cast<double>((height - h) / 2), static_cast<double>(w),
          static_cast<double>(h)};
}

CropBox ResizeCentreCropBox(int width, int height, int resize_to, int size) {
  assert(size > 0 && size <= resize_to);
  int resized_w = resize_to, resized_h = resize_to;
  if (width < height) {
    resized_h =
        static_cast<int>(static_cast<int64_t>(resize_to) * height / width);
  } else if (height < width) {
    resized_w =
        static_cast<int>(static_cast<int64_t>(resize_to) * width / height);
  }
  const double sx = static_cast<double>(width) / resized_w;
  const double sy = static_cast<double>(height) / resized_h;
  // nearbyint rounds half to even, as Python round() in torchvision.
  const double left = std::nearbyint((resized_w - size) / 2.0);
  const double top = std::nearbyint((resized_h - size) / 2.0);
  return {left * sx, top * sy, size * sx, size * sy};
}

CropBox ScaleBox(const CropBox& box, int width, int height, int scaled_width,
                 int scaled_height) {
  const double sx = static_cast<double>(scaled_width) / width;
  const double sy = static_cast<double>(scaled_height) / height;
  return {box.x * sx, box.y * sy, box.width * sx, box.height * sy};
}

namespace {

// For each output position along one axis: the first source pixel it reads,
// how many, and their weights (summing to 1).
struct AxisTaps {
  std::vector<int> first;
  std::vector<int> count;
  std::vector<float> weights;  // out_len * stride
  int stride = 0;
};

AxisTaps ComputeTaps(double start, double extent, int out_len, int src_len) {
  AxisTaps taps;
  const double scale = extent / out_len;
  const double support = std::max(scale, 1.0);  // triangle half-width
  taps.stride = static_cast<int>(std::ceil(support)) * 2 + 2;
  taps.first.resize(out_len);
  taps.count.resize(out_len);
  taps.weights.assign(static_cast<size_t>(out_len) * taps.stride, 0.0f);
  for (int o = 0; o < out_len; ++o) {
    const double center = start + (o + 0.5) * scale;
    int lo = static_cast<int>(std::floor(center - support));
    int hi = static_cast<int>(std::ceil(center + support));
    lo = std::clamp(lo, 0, src_len - 1);
    hi = std::clamp(hi, lo + 1, src_len);
    hi = std::min(hi, lo + taps.stride);
    float* w = &taps.weights[static_cast<size_t>(o) * taps.stride];
    double sum = 0;
    for (int i = lo; i < hi; ++i) {
      const double t = 1.0 - std::abs((i + 0.5 - center) / support);
      w[i - lo] = static_cast<float>(std::max(t, 0.0));
      sum += w[i - lo];
    }
    if (sum <= 0) {  // centre beyond the image edge: take the nearest pixel
      lo = std::clamp(static_cast<int>(std::floor(center)), 0, src_len - 1);
      hi = lo + 1;
      w[0] = 1.0f;
      sum = 1.0;
    }
    for (int i = 0; i < hi - lo; ++i) w[i] = static_cast<float>(w[i] / sum);
    taps.first[o] = lo;
    taps.count[o] = hi - lo;
  }
  return taps;
}

}  // namespace

void ResampleToPlanar(const uint8_t* pixels, int width, int height,
                      int channels, const CropBox& box, int out_width,
                      int out_height, std::span<float> out) {
  assert(out.size() >= static_cast<size_t>(channels) * out_width * out_height);
  const AxisTaps xs = ComputeTaps(box.x, box.width, out_width, width);
  const AxisTaps ys = ComputeTaps(box.y, box.height, out_height, height);
  int row_lo = height, row_hi = 0;
  for (int o = 0; o < out_height; ++o) {
    row_lo = std::min(row_lo, ys.first[o]);
    row_hi = std::max(row_hi, ys.first[o] + ys.count[o]);
  }
  // Horizontal pass over the rows the vertical taps read, interleaved:
  // rows x out_width x channels.
  const size_t row_len = static_cast<size_t>(out_width) * channels;
  std::vector<float> rows(static_cast<size_t>(row_hi - row_lo) * row_len);
  for (int y = row_lo; y < row_hi; ++y) {
    const uint8_t* src = pixels + static_cast<size_t>(y) * width * channels;
    float* dst = &rows[static_cast<size_t>(y - row_lo) * row_len];
    for (int o = 0; o < out_width; ++o) {
      const float* w = &xs.weights[static_cast<size_t>(o) * xs.stride];
      const uint8_t* p = src + static_cast<size_t>(xs.first[o]) * channels;
      const int count = xs.count[o];
      if (channels == 3) {
        float r = 0, g = 0, b = 0;
        for (int k = 0; k < count; ++k) {
          r += w[k] * p[3 * k];
          g += w[k] * p[3 * k + 1];
          b += w[k] * p[3 * k + 2];
        }
        dst[3 * o] = r;
        dst[3 * o + 1] = g;
        dst[3 * o + 2] = b;
      } else {
        for (int c = 0; c < channels; ++c) {
          float acc = 0;
          for (int k = 0; k < count; ++k) acc += w[k] * p[k * channels + c];
          dst[o * channels + c] = acc;
        }
      }
    }
  }
  // Vertical pass, a weighted sum of whole rows (contiguous, so it
  // vectorizes), then de-interleaved into the planar output.
  const size_t plane = static_cast<size_t>(out_width) * out_height;
  std::vector<float> line(row_len);
  for (int o = 0; o < out_height; ++o) {
    const float* w = &ys.weights[static_cast<size_t>(o) * ys.stride];
    const float* base =
        &rows[static_cast<size_t>(ys.first[o] - row_lo) * row_len];
    std::fill(line.begin(), line.end(), 0.0f);
    for (int k = 0; k < ys.count[o]; ++k) {
      const float wk = w[k];
      const float* row = base + k * row_len;
      for (size_t j = 0; j < row_len; ++j) line[j] += wk * row[j];
    }
    for (int c = 0; c < channels; ++c) {
      float* dst = &out[c * plane + static_cast<size_t>(o) * out_width];
      for (int x = 0; x < out_width; ++x) dst[x] = line[x * channels + c];
    }
  }
}

}  // namespace hypertune::data
