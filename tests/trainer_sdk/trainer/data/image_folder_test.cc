#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/test_images.h"
#include "trainer_sdk/trainer/data/augment.h"
#include "trainer_sdk/trainer/data/dataset.h"
#include "trainer_sdk/trainer/data/jpeg.h"

namespace hypertune::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/train_data_jpeg-" +
                          std::to_string(getpid()) + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

constexpr int kSize = 16;

class ImageFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = FreshDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    absl::StatusOr<std::vector<GeneratedImage>> images = WriteJpegFolder(root_);
    ASSERT_TRUE(images.ok()) << images.status();
    images_ = *std::move(images);
    ASSERT_EQ(images_.size(), 18u);
  }

  std::unique_ptr<Dataset> Open(ImageFolderOptions options = {}) {
    options.image_size = kSize;
    absl::StatusOr<std::unique_ptr<Dataset>> data =
        OpenImageFolder(root_, options);
    EXPECT_TRUE(data.ok()) << data.status();
    return data.ok() ? *std::move(data) : nullptr;
  }

  static std::vector<int64_t> All(const Dataset& d) {
    std::vector<int64_t> all(d.size());
    std::iota(all.begin(), all.end(), 0);
    return all;
  }

  // Pixel (c, y, x) of example i back in [0, 255].
  static float Raw(const ImageBatch& b, int i, int c, int y, int x) {
    const Normalization n = ImageNetNormalization();
    const float v =
        b.pixels[((static_cast<size_t>(i) * 3 + c) * b.height + y) * b.width +
                 x];
    return (v * n.std[c] + n.mean[c]) * 255.0f;
  }

  std::string root_;
  std::vector<GeneratedImage> images_;
};

TEST_F(ImageFolderTest, GeneratedJpegsDecodeToTheirSizeAndColour) {
  JpegDecoder decoder;
  for (const GeneratedImage& image : images_) {
    const std::string bytes = ReadFile(image.path);
    absl::StatusOr<std::pair<int, int>> size = decoder.ReadSize(bytes);
    ASSERT_TRUE(size.ok()) << size.status();
    EXPECT_EQ(size->first, image.width) << image.path;
    EXPECT_EQ(size->second, image.height) << image.path;
    absl::StatusOr<DecodedImage> decoded = decoder.Decode(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    ASSERT_EQ(decoded->rgb.size(),
              static_cast<size_t>(image.width) * image.height * 3);
    if (!image.solid) continue;
    for (size_t p = 0; p < decoded->rgb.size(); ++p) {
      ASSERT_NEAR(decoded->rgb[p], image.rgb[p % 3], 3) << image.path;
    }
  }
  // Half-scale decoding rounds sizes up.
  const GeneratedImage& first = images_[0];
  absl::StatusOr<DecodedImage> half =
      decoder.Decode(ReadFile(first.path), {1, 2});
  ASSERT_TRUE(half.ok()) << half.status();
  EXPECT_EQ(half->width, (first.width + 1) / 2);
  EXPECT_EQ(half->height, (first.height + 1) / 2);
}

TEST_F(ImageFolderTest, LabelsFollowSortedClassNames) {
  absl::StatusOr<std::vector<std::string>> classes = ListClasses(root_);
  ASSERT_TRUE(classes.ok()) << classes.status();
  EXPECT_THAT(*classes, ElementsAre("apple", "mango", "zebra"));
  std::unique_ptr<Dataset> data = Open();
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->size(), 18);
  EXPECT_EQ(data->num_classes(), 3);
  EXPECT_EQ(data->channels(), 3);
  EXPECT_EQ(data->height(), kSize);
  EXPECT_EQ(data->width(), kSize);
  ImageBatch batch;
  ASSERT_TRUE(data->Fill(All(*data), false, 0, batch).ok());
  ASSERT_EQ(batch.labels.size(), images_.size());
  for (size_t i = 0; i < images_.size(); ++i) {
    EXPECT_EQ(batch.labels[i], images_[i].label) << images_[i].path;
  }
  EXPECT_EQ(images_.front().class_name, "apple");
  EXPECT_EQ(images_.back().class_name, "zebra");
}

TEST_F(ImageFolderTest, SolidColoursSurviveEvalAndTraining) {
  std::unique_ptr<Dataset> data = Open();
  ASSERT_NE(data, nullptr);
  for (const bool train : {false, true}) {
    ImageBatch batch;
    ASSERT_TRUE(data->Fill(All(*data), train, 77, batch).ok());
    ASSERT_EQ(batch.n, 18);
    ASSERT_EQ(batch.pixels.size(), 18u * 3 * kSize * kSize);
    for (size_t i = 0; i < images_.size(); ++i) {
      if (!images_[i].solid) continue;
      for (int c = 0; c < 3; ++c) {
        for (int y = 0; y < kSize; ++y) {
          for (int x = 0; x < kSize; ++x) {
            ASSERT_NEAR(Raw(batch, i, c, y, x), images_[i].rgb[c], 3.5)
                << images_[i].path << " train=" << train;
          }
        }
      }
    }
  }
}

TEST_F(ImageFolderTest, EvalIsDeterministicTrainingIsSeeded) {
  std::unique_ptr<Dataset> data = Open();
  ASSERT_NE(data, nullptr);
  auto fill = [&](bool train, uint64_t seed) {
    ImageBatch batch;
    EXPECT_TRUE(data->Fill(All(*data), train, seed, batch).ok());
    return batch.pixels;
  };
  EXPECT_EQ(fill(false, 1), fill(false, 2));
  EXPECT_EQ(fill(true, 5), fill(true, 5));
  EXPECT_NE(fill(true, 5), fill(true, 6));
  EXPECT_NE(fill(true, 5), fill(false, 5));
  // Per gradient image, different seeds give different crops.
  const std::vector<float> a = fill(true, 5), b = fill(true, 6);
  const size_t image = 3 * kSize * kSize;
  int differing = 0;
  for (size_t i = 0; i < images_.size(); ++i) {
    if (images_[i].solid) continue;
    differing += !std::equal(a.begin() + i * image, a.begin() + (i + 1) * image,
                             b.begin() + i * image);
  }
  EXPECT_EQ(differing, 9);
}

TEST_F(ImageFolderTest, CacheGivesTheSameBatches) {
  ImageFolderOptions cached;
  cached.cache_encoded = true;
  std::unique_ptr<Dataset> with = Open(cached), without = Open();
  ASSERT_NE(with, nullptr);
  ASSERT_NE(without, nullptr);
  ImageBatch a, b;
  ASSERT_TRUE(with->Fill(All(*with), true, 9, a).ok());
  ASSERT_TRUE(without->Fill(All(*without), true, 9, b).ok());
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_EQ(a.labels, b.labels);
}

TEST_F(ImageFolderTest, ExplicitClassListSetsLabels) {
  ImageFolderOptions options;
  options.classes = {"zebra", "apple"};
  std::unique_ptr<Dataset> data = Open(options);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->num_classes(), 2);
  EXPECT_EQ(data->size(), 12);
  ImageBatch batch;
  const std::vector<int64_t> first_and_last = {0, 11};
  ASSERT_TRUE(data->Fill(first_and_last, false, 0, batch).ok());
  EXPECT_THAT(batch.labels, ElementsAre(0, 1));  // zebra first now

  options.classes = {"apple", "kiwi"};
  options.image_size = kSize;
  absl::StatusOr<std::unique_ptr<Dataset>> missing =
      OpenImageFolder(root_, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("classes[1] (\"kiwi\")"));
}

TEST_F(ImageFolderTest, CorruptFileFailsNamingIt) {
  const std::string bad = root_ + "/mango/zz_bad.jpg";
  std::ofstream(bad, std::ios::binary) << "this is not a jpeg";
  std::unique_ptr<Dataset> data = Open();
  ASSERT_NE(data, nullptr);
  ASSERT_EQ(data->size(), 19);
  // Sorted within mango: img_0..img_5, then zz_bad.
  ImageBatch batch;
  const std::vector<int64_t> ok_index = {5}, bad_index = {12};
  EXPECT_TRUE(data->Fill(ok_index, true, 0, batch).ok());
  const absl::Status status = data->Fill(bad_index, false, 0, batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(bad));
}

TEST(ImageFolderErrorsTest, MissingOrEmptyRoots) {
  absl::StatusOr<std::unique_ptr<Dataset>> missing =
      OpenImageFolder(::testing::TempDir() + "/train_data_jpeg/nothing-here");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);

  const std::string empty = FreshDir("empty");
  absl::StatusOr<std::unique_ptr<Dataset>> no_classes = OpenImageFolder(empty);
  EXPECT_EQ(no_classes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_classes.status().message(), HasSubstr("no class folders"));

  std::filesystem::create_directories(empty + "/cat");
  std::ofstream(empty + "/cat/readme.txt") << "not an image";
  absl::StatusOr<std::unique_ptr<Dataset>> no_images = OpenImageFolder(empty);
  EXPECT_EQ(no_images.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_images.status().message(), HasSubstr("no .jpg/.jpeg images"));
}

// A large gradient photo: the scaled-DCT decode the data set uses must show
// the same region as a full decode followed by the same resampling.
TEST(ImageFolderScalingTest, ReducedDecodeMatchesFullDecode) {
  const std::string root = FreshDir("large");
  std::filesystem::create_directories(root + "/only");
  const int w = 400, h = 300;
  std::vector<uint8_t> rgb(w * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &rgb[(y * w + x) * 3];
      p[0] = static_cast<uint8_t>(255 * x / w);
      p[1] = static_cast<uint8_t>(255 * y / h);
      p[2] = static_cast<uint8_t>(128 + 100 * std::sin(x * 0.02) *
                                            std::cos(y * 0.03));
    }
  }
  absl::StatusOr<std::string> jpeg = EncodeJpeg(rgb, w, h, 95);
  ASSERT_TRUE(jpeg.ok()) << jpeg.status();
  std::ofstream(root + "/only/big.jpg", std::ios::binary) << *jpeg;

  ImageFolderOptions options;
  options.image_size = 32;
  absl::StatusOr<std::unique_ptr<Dataset>> data =
      OpenImageFolder(root, options);
  ASSERT_TRUE(data.ok()) << data.status();
  JpegDecoder decoder;
  absl::StatusOr<DecodedImage> full = decoder.Decode(*jpeg);
  ASSERT_TRUE(full.ok());
  const Normalization n = ImageNetNormalization();
  for (const bool train : {false, true}) {
    for (uint64_t seed = 0; seed < 4; ++seed) {
      ImageBatch batch;
      const std::vector<int64_t> index = {0};
      ASSERT_TRUE((*data)->Fill(index, train, seed, batch).ok());
      CropBox box = ResizeCentreCropBox(w, h, 37, 32);
      bool flip = false;
      if (train) {
        ExampleRng rng(seed, 0);
        box = RandomResizedCropBox(w, h, rng);
        flip = rng.Coin();
      }
      std::vector<float> expected(3 * 32 * 32);
      ResampleToPlanar(full->rgb.data(), w, h, 3, box, 32, 32, expected);
      double total_error = 0;
      for (int c = 0; c < 3; ++c) {
        for (int y = 0; y < 32; ++y) {
          for (int x = 0; x < 32; ++x) {
            const float got =
                (batch.pixels[(c * 32 + y) * 32 + x] * n.std[c] + n.mean[c]) *
                255.0f;
            total_error += std::abs(
                got - expected[(c * 32 + y) * 32 + (flip ? 31 - x : x)]);
          }
        }
      }
      // A misplaced box on these ramps would be off by tens of levels.
      EXPECT_LT(total_error / (3 * 32 * 32), 2.5)
          << "train=" << train << " seed=" << seed;
    }
  }
}

TEST(JpegDecoderTest, CmykIsConvertedAsInvertedInks) {
  // Adobe CMYK JPEGs store 255 for "no ink": R = C * K / 255.
  const int w = 16, h = 8;
  std::vector<uint8_t> cmyk(w * h * 4);
  for (int p = 0; p < w * h; ++p) {
    cmyk[4 * p] = 255;
    cmyk[4 * p + 1] = 0;
    cmyk[4 * p + 2] = 128;
    cmyk[4 * p + 3] = 200;
  }
  absl::StatusOr<std::string> jpeg = EncodeCmykJpeg(cmyk, w, h);
  ASSERT_TRUE(jpeg.ok()) << jpeg.status();
  JpegDecoder decoder;
  absl::StatusOr<DecodedImage> image = decoder.Decode(*jpeg);
  ASSERT_TRUE(image.ok()) << image.status();
  ASSERT_EQ(image->width, w);
  ASSERT_EQ(image->height, h);
  for (int p = 0; p < w * h; ++p) {
    ASSERT_NEAR(image->rgb[3 * p], 200, 3);
    ASSERT_NEAR(image->rgb[3 * p + 1], 0, 3);
    ASSERT_NEAR(image->rgb[3 * p + 2], 100, 3);
  }
}

TEST(JpegDecoderTest, ChoosesTheSmallestCoveringScale) {
  // A 400-pixel crop shown at 32: 1/8 still gives 50 pixels across.
  const DctScale eighth = ChooseDctScale({0, 0, 400, 400}, 32, 32);
  EXPECT_EQ(eighth.num, 1);
  EXPECT_EQ(eighth.denom, 8);
  // 300 -> 224 needs at least 224/300 = 0.75: 3/4 exactly.
  const DctScale three_quarters = ChooseDctScale({0, 0, 300, 300}, 224, 224);
  EXPECT_EQ(three_quarters.num * 4, three_quarters.denom * 3);
  // Upscaling never decodes below full size.
  const DctScale full = ChooseDctScale({0, 0, 100, 50}, 224, 224);
  EXPECT_EQ(full.num, full.denom);
  EXPECT_EQ(ScaledSize(375, {3, 8}), 141);  // 140.625 rounds up
}

}  // namespace
}  // namespace hypertune::data
