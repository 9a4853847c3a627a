#include "trainer_sdk/trainer/data/augment.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace hypertune::data {
namespace {

TEST(SplitMix64Test, MatchesTheReferenceSequence) {
  // The first output of splitmix64 seeded with 0 (Vigna's splitmix64.c).
  EXPECT_EQ(SplitMix64(0), 0xe220a8397b1dcdafULL);
}

TEST(ExampleRngTest, IsAPureFunctionOfSeedAndStream) {
  ExampleRng a(42, 7), b(42, 7), c(42, 8), d(43, 7);
  const uint64_t first = a.NextU64();
  EXPECT_EQ(first, b.NextU64());
  EXPECT_NE(first, c.NextU64());
  EXPECT_NE(first, d.NextU64());
}

TEST(ExampleRngTest, UniformIntCoversItsRangeEvenly) {
  ExampleRng rng(1, 2);
  std::vector<int> counts(5, 0);
  for (int i = 0; i < 5000; ++i) {
    const int64_t v = rng.UniformInt(5);
    ASSERT_GE(v, 0);
    ASSERT_LT(v, 5);
    ++counts[v];
  }
  // Expected 1000 each; the standard deviation is ~28.
  for (int c : counts) EXPECT_NEAR(c, 1000, 150);
  for (int i = 0; i < 1000; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

TEST(RandomResizedCropTest, BoxesRespectScaleRatioAndBounds) {
  int full_image = 0;
  for (uint64_t i = 0; i < 500; ++i) {
    ExampleRng rng(3, i);
    const int width = 300 + static_cast<int>(i % 7) * 40, height = 260;
    const CropBox box = RandomResizedCropBox(width, height, rng);
    ASSERT_GE(box.x, 0);
    ASSERT_GE(box.y, 0);
    ASSERT_LE(box.x + box.width, width);
    ASSERT_LE(box.y + box.height, height);
    EXPECT_EQ(box.x, std::floor(box.x));  // integer pixel boxes
    const double area = box.width * box.height / (width * height);
    // Rounding w and h to whole pixels moves the area and ratio a little.
    EXPECT_GE(area, 0.08 * 0.97);
    EXPECT_LE(area, 1.0);
    const double ratio = box.width / box.height;
    EXPECT_GE(ratio, 0.75 * 0.97);
    EXPECT_LE(ratio, 4.0 / 3.0 * 1.03);
    if (area > 0.95) ++full_image;
  }
  EXPECT_LT(full_image, 50);  // mostly real crops, not fallbacks
}

TEST(RandomResizedCropTest, FallsBackToACentredClampedBox) {
  // So wide that no try fits: the fallback keeps the height and clamps the
  // ratio to 4/3.
  ExampleRng rng(0, 0);
  const CropBox box = RandomResizedCropBox(1000, 10, rng);
  EXPECT_EQ(box.height, 10);
  EXPECT_EQ(box.width, 13);
  EXPECT_EQ(box.x, (1000 - 13) / 2);
  EXPECT_EQ(box.y, 0);
}

TEST(ResizeCentreCropTest, MatchesResizeThenCrop) {
  // 500 x 375 -> shorter side 256: 341 x 256; crop 224 at (58, 16), where
  // 58.5 rounds to even as Python does.
  const CropBox box = ResizeCentreCropBox(500, 375, 256, 224);
  EXPECT_DOUBLE_EQ(box.x, 58 * 500.0 / 341);
  EXPECT_DOUBLE_EQ(box.y, 16 * 375.0 / 256);
  EXPECT_DOUBLE_EQ(box.width, 224 * 500.0 / 341);
  EXPECT_DOUBLE_EQ(box.height, 224 * 375.0 / 256);

  const CropBox square = ResizeCentreCropBox(256, 256, 256, 224);
  EXPECT_DOUBLE_EQ(square.x, 16);
  EXPECT_DOUBLE_EQ(square.y, 16);
  EXPECT_DOUBLE_EQ(square.width, 224);
  EXPECT_DOUBLE_EQ(square.height, 224);
}

TEST(ScaleBoxTest, ScalesEachAxis) {
  const CropBox box = ScaleBox({10, 20, 100, 40}, 200, 80, 50, 40);
  EXPECT_DOUBLE_EQ(box.x, 2.5);
  EXPECT_DOUBLE_EQ(box.y, 10);
  EXPECT_DOUBLE_EQ(box.width, 25);
  EXPECT_DOUBLE_EQ(box.height, 20);
}

TEST(ResampleTest, SameSizeIsTheIdentity) {
  const int w = 7, h = 5;
  std::vector<uint8_t> rgb(w * h * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 37);
  std::vector<float> out(3 * w * h);
  ResampleToPlanar(rgb.data(), w, h, 3, {0, 0, w, h}, w, h, out);
  for (int c = 0; c < 3; ++c) {
    for (int p = 0; p < w * h; ++p) {
      ASSERT_FLOAT_EQ(out[c * w * h + p], rgb[p * 3 + c]);
    }
  }
}

TEST(ResampleTest, ShrinkingKeepsALinearRampLinear) {
  // Gray ramp v = 2x + 1; halved, output o is centred on source 2o + 1, whose
  // value is 2(2o + 1 - 0.5) + 1 = 4o + 2. A symmetric filter keeps it there
  // away from the edges.
  const int w = 64, h = 4;
  std::vector<uint8_t> gray(w * h);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x)
      gray[y * w + x] = static_cast<uint8_t>(2 * x + 1);
  }
  std::vector<float> out(32 * 2);
  ResampleToPlanar(gray.data(), w, h, 1, {0, 0, w, h}, 32, 2, out);
  for (int y = 0; y < 2; ++y) {
    for (int o = 1; o < 31; ++o) {
      EXPECT_NEAR(out[y * 32 + o], 4 * o + 2, 1e-4) << "o=" << o;
    }
  }
}

TEST(ResampleTest, SolidColourStaysSolidForAnyBox) {
  const int w = 33, h = 21;
  std::vector<uint8_t> rgb(w * h * 3);
  for (int p = 0; p < w * h; ++p) {
    rgb[p * 3] = 10;
    rgb[p * 3 + 1] = 128;
    rgb[p * 3 + 2] = 250;
  }
  std::vector<float> out(3 * 16 * 16);
  ResampleToPlanar(rgb.data(), w, h, 3, {3.5, 2.25, 20.5, 17}, 16, 16, out);
  for (int p = 0; p < 16 * 16; ++p) {
    ASSERT_NEAR(out[p], 10, 1e-3);
    ASSERT_NEAR(out[256 + p], 128, 1e-3);
    ASSERT_NEAR(out[512 + p], 250, 1e-3);
  }
}

}  // namespace
}  // namespace hypertune::data
