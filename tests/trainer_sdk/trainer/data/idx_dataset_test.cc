#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer_sdk/trainer/data/dataset.h"

namespace hypertune::data {
namespace {

using ::testing::HasSubstr;

std::string BigEndian(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
          static_cast<char>(v >> 8), static_cast<char>(v)};
}

std::string ImagesFile(uint32_t count, uint32_t rows, uint32_t cols,
                       const std::vector<uint8_t>& pixels) {
  return BigEndian(0x803) + BigEndian(count) + BigEndian(rows) +
         BigEndian(cols) + std::string(pixels.begin(), pixels.end());
}

std::string LabelsFile(const std::vector<uint8_t>& labels) {
  return BigEndian(0x801) + BigEndian(static_cast<uint32_t>(labels.size())) +
         std::string(labels.begin(), labels.end());
}

std::string TempPath(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "/train_data_idx-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

std::string WritePlain(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

std::string WriteGzip(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  gzFile file = gzopen(path.c_str(), "wb");
  EXPECT_NE(file, nullptr);
  EXPECT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(file);
  return path;
}

// Pseudo-random pixels from a fixed linear congruential sequence.
std::vector<uint8_t> NoisePixels(size_t n, uint32_t seed) {
  std::vector<uint8_t> pixels(n);
  for (auto& p : pixels) {
    seed = seed * 1664525u + 1013904223u;
    p = static_cast<uint8_t>(seed >> 24);
  }
  return pixels;
}

float Normalized(uint8_t v) {
  const Normalization n = FashionMnistNormalization();
  return (v / 255.0f - n.mean[0]) / n.std[0];
}

constexpr int kRows = 4, kCols = 3, kCount = 5;

class IdxFilesTest : public ::testing::TestWithParam<bool> {};

TEST_P(IdxFilesTest, ReadsPixelsAndLabels) {
  const bool gzipped = GetParam();
  const std::vector<uint8_t> pixels = NoisePixels(kCount * kRows * kCols, 7);
  const std::vector<uint8_t> labels = {3, 0, 9, 1, 9};
  auto write = gzipped ? WriteGzip : WritePlain;
  const std::string suffix = gzipped ? ".gz" : "";
  absl::StatusOr<std::unique_ptr<Dataset>> data = OpenIdx(
      write("images" + suffix, ImagesFile(kCount, kRows, kCols, pixels)),
      write("labels" + suffix, LabelsFile(labels)));
  ASSERT_TRUE(data.ok()) << data.status();
  const Dataset& d = **data;
  EXPECT_EQ(d.size(), kCount);
  EXPECT_EQ(d.channels(), 1);
  EXPECT_EQ(d.height(), kRows);
  EXPECT_EQ(d.width(), kCols);
  EXPECT_EQ(d.num_classes(), 10);

  ImageBatch batch;
  const std::vector<int64_t> indices = {4, 0, 2};
  ASSERT_TRUE(d.Fill(indices, /*train=*/false, 1, batch).ok());
  EXPECT_EQ(batch.n, 3);
  EXPECT_EQ(batch.channels, 1);
  EXPECT_EQ(batch.height, kRows);
  EXPECT_EQ(batch.width, kCols);
  ASSERT_EQ(batch.pixels.size(), 3u * kRows * kCols);
  EXPECT_THAT(batch.labels, ::testing::ElementsAre(9, 3, 9));
  for (size_t i = 0; i < indices.size(); ++i) {
    for (int p = 0; p < kRows * kCols; ++p) {
      EXPECT_FLOAT_EQ(batch.pixels[i * kRows * kCols + p],
                      Normalized(pixels[indices[i] * kRows * kCols + p]))
          << "image " << i << " pixel " << p;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PlainAndGzipped, IdxFilesTest, ::testing::Bool());

struct Files {
  std::string images, labels;
};

Files GoodFiles(const std::string& tag) {
  return {WritePlain(tag + "-images",
                     ImagesFile(kCount, kRows, kCols,
                                NoisePixels(kCount * kRows * kCols, 3))),
          WritePlain(tag + "-labels", LabelsFile({0, 1, 2, 3, 4}))};
}

TEST(IdxErrorsTest, TruncatedPixelsNameTheFile) {
  Files files = GoodFiles("trunc");
  std::string bytes =
      ImagesFile(kCount, kRows, kCols, NoisePixels(kCount * kRows * kCols, 3));
  bytes.resize(bytes.size() - 5);
  files.images = WritePlain("trunc-images", bytes);
  absl::StatusOr<std::unique_ptr<Dataset>> data =
      OpenIdx(files.images, files.labels);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(data.status().message(), HasSubstr(files.images));
  EXPECT_THAT(data.status().message(), HasSubstr("truncated"));
}

TEST(IdxErrorsTest, TruncatedHeader) {
  const Files files = GoodFiles("header");
  const std::string images =
      WritePlain("header-images", BigEndian(0x803) + "ab");
  absl::StatusOr<std::unique_ptr<Dataset>> data = OpenIdx(images, files.labels);
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(), HasSubstr("truncated"));
  EXPECT_THAT(data.status().message(), HasSubstr("header"));
}

TEST(IdxErrorsTest, TruncatedGzipStream) {
  const Files files = GoodFiles("gztrunc");
  // Large enough that the cut lands inside the deflate stream.
  const std::string full_path =
      WriteGzip("gztrunc-full.gz",
                ImagesFile(200, 28, 28, NoisePixels(200 * 28 * 28, 11)));
  std::string compressed;
  {
    std::ifstream in(full_path, std::ios::binary);
    compressed.assign(std::istreambuf_iterator<char>(in),
                      std::istreambuf_iterator<char>());
  }
  ASSERT_GT(compressed.size(), 1000u);
  compressed.resize(compressed.size() / 2);
  const std::string images = WritePlain("gztrunc-images.gz", compressed);
  absl::StatusOr<std::unique_ptr<Dataset>> data = OpenIdx(images, files.labels);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(data.status().message(), HasSubstr(images));
}

TEST(IdxErrorsTest, TrailingBytes) {
  const Files files = GoodFiles("trail");
  const std::string images = WritePlain(
      "trail-images",
      ImagesFile(kCount, kRows, kCols, NoisePixels(kCount * kRows * kCols, 3)) +
          "xx");
  absl::StatusOr<std::unique_ptr<Dataset>> data = OpenIdx(images, files.labels);
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(), HasSubstr("trailing bytes"));
}

TEST(IdxErrorsTest, LabelCountMismatch) {
  Files files = GoodFiles("count");
  files.labels = WritePlain("count-labels", LabelsFile({0, 1, 2, 3}));
  absl::StatusOr<std::unique_ptr<Dataset>> data =
      OpenIdx(files.images, files.labels);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(data.status().message(), HasSubstr(files.labels));
  EXPECT_THAT(data.status().message(), HasSubstr("4 labels"));
  EXPECT_THAT(data.status().message(), HasSubstr("5 images"));
}

TEST(IdxErrorsTest, LabelOutOfRange) {
  Files files = GoodFiles("range");
  files.labels = WritePlain("range-labels", LabelsFile({0, 1, 10, 3, 4}));
  absl::StatusOr<std::unique_ptr<Dataset>> data =
      OpenIdx(files.images, files.labels);
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(),
              HasSubstr("label 10 of example 2 is outside [0, 10)"));
  // With more classes the same file is fine.
  IdxOptions options;
  options.num_classes = 11;
  EXPECT_TRUE(OpenIdx(files.images, files.labels, options).ok());
}

TEST(IdxErrorsTest, SwappedFilesFailOnMagic) {
  const Files files = GoodFiles("magic");
  absl::StatusOr<std::unique_ptr<Dataset>> data =
      OpenIdx(files.labels, files.images);
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(data.status().message(), HasSubstr("magic number 0x00000801"));
  EXPECT_THAT(data.status().message(), HasSubstr(files.labels));
}

TEST(IdxErrorsTest, MissingFileIsNotFound) {
  const Files files = GoodFiles("missing");
  absl::StatusOr<std::unique_ptr<Dataset>> data =
      OpenIdx(TempPath("no-such-file"), files.labels);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(data.status().message(), HasSubstr("no-such-file"));
}

TEST(IdxErrorsTest, FillRejectsIndexOutOfRange) {
  const Files files = GoodFiles("fill");
  absl::StatusOr<std::unique_ptr<Dataset>> data =
      OpenIdx(files.images, files.labels);
  ASSERT_TRUE(data.ok()) << data.status();
  ImageBatch batch;
  const std::vector<int64_t> indices = {0, kCount};
  const absl::Status status = (*data)->Fill(indices, false, 0, batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("indices[1]"));
}

// ------------------------------------------------------ augmentation

// 64 copies of one 28 x 28 noise image, so every difference between two
// training examples comes from augmentation alone.
class IdxAugmentTest : public ::testing::Test {
 protected:
  static constexpr int kSide = 28, kCopies = 64;
  void SetUp() override {
    image_ = NoisePixels(kSide * kSide, 99);
    std::vector<uint8_t> pixels;
    for (int i = 0; i < kCopies; ++i) {
      pixels.insert(pixels.end(), image_.begin(), image_.end());
    }
    absl::StatusOr<std::unique_ptr<Dataset>> data = OpenIdx(
        WritePlain("aug-images", ImagesFile(kCopies, kSide, kSide, pixels)),
        WritePlain("aug-labels", LabelsFile(std::vector<uint8_t>(kCopies, 1))));
    ASSERT_TRUE(data.ok()) << data.status();
    data_ = *std::move(data);
  }

  std::vector<float> One(int64_t index, bool train, uint64_t seed) {
    ImageBatch batch;
    const std::vector<int64_t> indices = {index};
    EXPECT_TRUE(data_->Fill(indices, train, seed, batch).ok());
    return batch.pixels;
  }

  // The (dy, dx, flip) of the padded crop that turns image_ into `out`, or
  // nullopt when none does.
  std::optional<std::array<int, 3>> FindTransform(
      std::span<const float> out) const {
    std::optional<std::array<int, 3>> found;
    for (int flip = 0; flip < 2; ++flip) {
      for (int dy = -2; dy <= 2; ++dy) {
        for (int dx = -2; dx <= 2; ++dx) {
          bool match = true;
          for (int y = 0; y < kSide && match; ++y) {
            for (int x = 0; x < kSide && match; ++x) {
              const int sy = y + dy, sx = (flip ? kSide - 1 - x : x) + dx;
              const bool inside =
                  sy >= 0 && sy < kSide && sx >= 0 && sx < kSide;
              const uint8_t v = inside ? image_[sy * kSide + sx] : 0;
              match = out[y * kSide + x] == Normalized(v);
            }
          }
          if (match) {
            EXPECT_FALSE(found.has_value()) << "two transforms match";
            found = std::array<int, 3>{dy, dx, flip};
          }
        }
      }
    }
    return found;
  }

  std::vector<uint8_t> image_;
  std::unique_ptr<Dataset> data_;
};

TEST_F(IdxAugmentTest, EvalIsTheImageItself) {
  for (uint64_t seed : {0u, 5u}) {
    const std::vector<float> out = One(17, /*train=*/false, seed);
    ASSERT_EQ(out.size(), static_cast<size_t>(kSide * kSide));
    for (int p = 0; p < kSide * kSide; ++p) {
      ASSERT_EQ(out[p], Normalized(image_[p]));
    }
  }
}

TEST_F(IdxAugmentTest, SameSeedAndIndexGiveSamePixels) {
  const std::vector<float> alone = One(9, true, 1234);
  EXPECT_EQ(One(9, true, 1234), alone);
  // Neither the batch's other members nor the position matter.
  ImageBatch batch;
  const std::vector<int64_t> indices = {3, 40, 9};
  ASSERT_TRUE(data_->Fill(indices, true, 1234, batch).ok());
  const std::vector<float> third(batch.pixels.begin() + 2 * kSide * kSide,
                                 batch.pixels.end());
  EXPECT_EQ(third, alone);
  EXPECT_EQ(batch.n, 3);
  EXPECT_EQ(batch.height, kSide);
  EXPECT_EQ(batch.width, kSide);
}

TEST_F(IdxAugmentTest, TrainingIsAPaddedCropWithFlip) {
  std::set<std::array<int, 3>> seen;
  for (int64_t i = 0; i < kCopies; ++i) {
    const std::vector<float> out = One(i, true, 2026);
    const std::optional<std::array<int, 3>> t = FindTransform(out);
    ASSERT_TRUE(t.has_value())
        << "example " << i << " is no padded crop of the image";
    seen.insert(*t);
  }
  // 64 draws from 50 transforms: many distinct ones, both flips.
  EXPECT_GE(seen.size(), 20u);
  EXPECT_TRUE(std::any_of(seen.begin(), seen.end(),
                          [](const auto& t) { return t[2] == 1; }));
  EXPECT_TRUE(std::any_of(seen.begin(), seen.end(),
                          [](const auto& t) { return t[2] == 0; }));
}

TEST_F(IdxAugmentTest, DifferentIndexOrSeedGivesDifferentCrops) {
  int differing_index = 0, differing_seed = 0;
  for (int64_t i = 0; i + 1 < kCopies; ++i) {
    if (One(i, true, 7) != One(i + 1, true, 7)) ++differing_index;
    if (One(i, true, 7) != One(i, true, 8)) ++differing_seed;
  }
  // A pair coincides with chance 1/50: about 1 of these 63 pairs, rarely 7.
  EXPECT_GE(differing_index, 56);
  EXPECT_GE(differing_seed, 56);
}

TEST_F(IdxAugmentTest, NoPaddingNoFlipIsIdentity) {
  IdxOptions options;
  options.crop_padding = 0;
  options.flip = false;
  std::vector<uint8_t> pixels = image_;
  absl::StatusOr<std::unique_ptr<Dataset>> data =
      OpenIdx(WritePlain("plain-images", ImagesFile(1, kSide, kSide, pixels)),
              WritePlain("plain-labels", LabelsFile({4})), options);
  ASSERT_TRUE(data.ok()) << data.status();
  ImageBatch batch;
  const std::vector<int64_t> indices = {0};
  ASSERT_TRUE((*data)->Fill(indices, true, 3, batch).ok());
  for (int p = 0; p < kSide * kSide; ++p) {
    ASSERT_EQ(batch.pixels[p], Normalized(image_[p]));
  }
}

// ------------------------------------------------- the real data set

TEST(FashionMnistTest, RealFilesOpen) {
  std::error_code ec;
  if (!std::filesystem::exists(
          std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz", ec)) {
    GTEST_SKIP() << "Fashion-MNIST not installed at " << kFashionMnistDir;
  }
  for (const bool test_set : {false, true}) {
    absl::StatusOr<std::unique_ptr<Dataset>> data =
        OpenFashionMnist(kFashionMnistDir, test_set);
    ASSERT_TRUE(data.ok()) << data.status();
    const Dataset& d = **data;
    const int64_t expected = test_set ? 10000 : 60000;
    EXPECT_EQ(d.size(), expected);
    EXPECT_EQ(d.channels(), 1);
    EXPECT_EQ(d.height(), 28);
    EXPECT_EQ(d.width(), 28);
    EXPECT_EQ(d.num_classes(), 10);
    // Fashion-MNIST is balanced: every class has a tenth of the examples.
    std::vector<int64_t> per_class(10, 0);
    ImageBatch batch;
    for (int64_t begin = 0; begin < d.size(); begin += 5000) {
      std::vector<int64_t> indices(5000);
      std::iota(indices.begin(), indices.end(), begin);
      ASSERT_TRUE(d.Fill(indices, false, 0, batch).ok());
      for (int32_t label : batch.labels) {
        ASSERT_GE(label, 0);
        ASSERT_LT(label, 10);
        ++per_class[label];
      }
    }
    for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], expected / 10);
  }
}

}  // namespace
}  // namespace hypertune::data
