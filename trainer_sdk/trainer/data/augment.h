// Pure pieces of the image pipeline: per-example random streams, crop-box
// geometry (torchvision's RandomResizedCrop and resize-then-centre-crop) and
// an antialiased bilinear resampler. Internal to hypertune_train_data; kept
// in a header of its own so tests reach the math directly.
//
// Thread safety: free functions without state; an ExampleRng belongs to one
// thread.
#ifndef HYPERTUNE_TRAINER_SDK_TRAINER_DATA_AUGMENT_H_
#define HYPERTUNE_TRAINER_SDK_TRAINER_DATA_AUGMENT_H_

#include <cstdint>
#include <span>

namespace hypertune::data {

// splitmix64's output function (Steele, Lea, Flood 2014): a bijective mixer.
uint64_t SplitMix64(uint64_t x);

// A small deterministic stream: the splitmix64 sequence started from a state
// mixed from (seed, stream). The values are the same on every platform.
class ExampleRng {
 public:
  ExampleRng(uint64_t seed, uint64_t stream);
  uint64_t NextU64();
  double Uniform();               // in [0, 1), 53 bits
  int64_t UniformInt(int64_t n);  // in [0, n); REQUIRES: n > 0
  bool Coin() { return (NextU64() >> 63) != 0; }

 private:
  uint64_t state_;
};

// A source rectangle in (possibly fractional) pixel coordinates.
struct CropBox {
  double x = 0, y = 0, width = 0, height = 0;
};

// torchvision's RandomResizedCrop geometry on a width x height image: up to 10
// tries of an area fraction in [min_scale, max_scale] and a log-uniform aspect
// ratio in [min_ratio, max_ratio] that fit, else the largest centred box whose
// ratio is clamped to the range. Integer box. REQUIRES: width, height > 0.
CropBox RandomResizedCropBox(int width, int height, ExampleRng& rng,
                             double min_scale = 0.08, double max_scale = 1.0,
                             double min_ratio = 3.0 / 4.0,
                             double max_ratio = 4.0 / 3.0);

// The source region that "resize the shorter side to `resize_to` (the longer
// side truncated proportionally), then centre-crop size x size" shows.
// REQUIRES: 0 < size <= resize_to.
CropBox ResizeCentreCropBox(int width, int height, int resize_to, int size);

// Scales a box given on a width x height image to the same region of that
// image decoded at scaled_width x scaled_height.
CropBox ScaleBox(const CropBox& box, int width, int height, int scaled_width,
                 int scaled_height);

// Resamples `box` of an interleaved RGB (or gray, channels = 1) uint8 image to
// out_width x out_height, planar (channels x out_height x out_width) floats in
// [0, 255]. Triangle (bilinear) filter widened to the scale factor when
// shrinking, as PIL's antialiased bilinear resize; taps outside the image are
// dropped and the weights renormalized. REQUIRES: out has room.
void ResampleToPlanar(const uint8_t* pixels, int width, int height,
                      int channels, const CropBox& box, int out_width,
                      int out_height, std::span<float> out);

}  // namespace hypertune::data

#endif  // HYPERTUNE_TRAINER_SDK_TRAINER_DATA_AUGMENT_H_
