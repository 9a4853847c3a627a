// ImageNet-style folders: root/<class>/<image>.jpg, decoded with TurboJPEG.
// The crop is chosen on the full-size image first, then the JPEG is decoded
// at the smallest DCT scale that still gives the crop image_size pixels
// across, which makes large photos several times cheaper to decode without
// changing which region an example shows.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "trainer_sdk/trainer/data/augment.h"
#include "trainer_sdk/trainer/data/dataset.h"
#include "trainer_sdk/trainer/data/jpeg.h"

namespace hypertune::data {
namespace {

namespace fs = std::filesystem;

bool IsJpegName(const fs::path& path) {
  const std::string ext = absl::AsciiStrToLower(path.extension().string());
  return ext == ".jpeg" || ext == ".jpg";
}

absl::StatusOr<std::string> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  if (in.bad()) return absl::InternalError(absl::StrCat(path, ": read error"));
  return bytes;
}

class ImageFolderDataset : public Dataset {
 public:
  struct Example {
    std::string path;
    int32_t label;
  };

  ImageFolderDataset(std::vector<Example> examples,
                     std::vector<std::string> cache, int num_classes,
                     const ImageFolderOptions& options)
      : examples_(std::move(examples)),
        cache_(std::move(cache)),
        num_classes_(num_classes),
        options_(options),
        resize_to_(
            static_cast<int>(std::lround(options.image_size * 256.0 / 224.0))) {
  }

  int64_t size() const override {
    return static_cast<int64_t>(examples_.size());
  }
  int channels() const override { return 3; }
  int height() const override { return options_.image_size; }
  int width() const override { return options_.image_size; }
  int num_classes() const override { return num_classes_; }

  absl::Status Fill(std::span<const int64_t> indices, bool train, uint64_t seed,
                    ImageBatch& out) const override {
    const int s = options_.image_size;
    const size_t plane = static_cast<size_t>(s) * s;
    out.n = static_cast<int>(indices.size());
    out.channels = 3;
    out.height = s;
    out.width = s;
    out.pixels.resize(indices.size() * 3 * plane);
    out.labels.resize(indices.size());
    JpegDecoder decoder;
    std::vector<float> planar(3 * plane);
    for (size_t i = 0; i < indices.size(); ++i) {
      const int64_t index = indices[i];
      if (index < 0 || index >= size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "indices[", i, "]: ", index, " is outside [0, ", size(), ")"));
      }
      const Example& example = examples_[index];
      std::string read;
      const std::string* bytes = nullptr;
      if (!cache_.empty()) {
        bytes = &cache_[index];
      } else {
        absl::StatusOr<std::string> loaded = ReadBytes(example.path);
        if (!loaded.ok()) return loaded.status();
        read = *std::move(loaded);
        bytes = &read;
      }
      bool flip = false;
      absl::Status status = DecodeCropResize(decoder, example.path, *bytes,
                                             train, seed, index, planar, flip);
      if (!status.ok()) return status;
      out.labels[i] = example.label;
      float* dst = &out.pixels[i * 3 * plane];
      for (int c = 0; c < 3; ++c) {
        const float scale = 1.0f / (255.0f * options_.normalization.std[c]);
        const float shift =
            options_.normalization.mean[c] / options_.normalization.std[c];
        const float* src = &planar[c * plane];
        float* plane_out = dst + c * plane;
        for (int y = 0; y < s; ++y) {
          for (int x = 0; x < s; ++x) {
            const float v = src[y * s + (flip ? s - 1 - x : x)];
            plane_out[y * s + x] = v * scale - shift;
          }
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  // Decodes one JPEG and resamples its crop into `planar` (3 x s x s, values
  // in [0, 255]); sets `flip` for training.
  absl::Status DecodeCropResize(JpegDecoder& decoder, const std::string& path,
                                const std::string& bytes, bool train,
                                uint64_t seed, int64_t index,
                                std::vector<float>& planar, bool& flip) const {
    absl::StatusOr<std::pair<int, int>> size = decoder.ReadSize(bytes);
    if (!size.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", size.status().message()));
    }
    const auto [width, height] = *size;
    const int s = options_.image_size;
    CropBox box;
    flip = false;
    if (train) {
      ExampleRng rng(seed, static_cast<uint64_t>(index));
      box = RandomResizedCropBox(width, height, rng);
      flip = rng.Coin();
    } else {
      box = ResizeCentreCropBox(width, height, resize_to_, s);
    }
    absl::StatusOr<DecodedImage> image =
        decoder.Decode(bytes, ChooseDctScale(box, s, s));
    if (!image.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", image.status().message()));
    }
    const CropBox scaled =
        ScaleBox(box, width, height, image->width, image->height);
    ResampleToPlanar(image->rgb.data(), image->width, image->height, 3, scaled,
                     s, s, planar);
    return absl::OkStatus();
  }

  std::vector<Example> examples_;
  std::vector<std::string> cache_;  // encoded bytes per example, or empty
  int num_classes_;
  ImageFolderOptions options_;
  int resize_to_;  // evaluation: shorter side before the centre crop
};

}  // namespace

absl::StatusOr<std::vector<std::string>> ListClasses(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return absl::NotFoundError(absl::StrCat(root, ": no such directory"));
  }
  std::vector<std::string> classes;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) {
      classes.push_back(it->path().filename().string());
    }
  }
  if (ec) {
    return absl::InternalError(
        absl::StrCat(root, ": cannot list: ", ec.message()));
  }
  std::sort(classes.begin(), classes.end());
  return classes;
}

absl::StatusOr<std::unique_ptr<Dataset>> OpenImageFolder(
    const std::string& root, const ImageFolderOptions& options) {
  if (options.image_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("image_size must be positive, got ", options.image_size));
  }
  const Normalization& norm = options.normalization;
  if (norm.mean.size() != 3 || norm.std.size() != 3 ||
      !std::all_of(norm.std.begin(), norm.std.end(),
                   [](float v) { return v > 0; })) {
    return absl::InvalidArgumentError(
        "normalization: RGB images need three means and three positive stds");
  }
  std::vector<std::string> classes = options.classes;
  if (classes.empty()) {
    absl::StatusOr<std::vector<std::string>> listed = ListClasses(root);
    if (!listed.ok()) return listed.status();
    classes = *std::move(listed);
    if (classes.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          root, ": no class folders (expected root/<class>/*.jpg)"));
    }
  } else {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
      return absl::NotFoundError(absl::StrCat(root, ": no such directory"));
    }
  }

  std::vector<ImageFolderDataset::Example> examples;
  for (size_t label = 0; label < classes.size(); ++label) {
    const fs::path dir = fs::path(root) / classes[label];
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      return absl::InvalidArgumentError(
          absl::StrCat("classes[", label, "] (\"", classes[label],
                       "\"): no folder ", dir.string()));
    }
    std::vector<std::string> files;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      std::error_code type_ec;
      if (it->is_regular_file(type_ec) && IsJpegName(it->path())) {
        files.push_back(it->path().string());
      }
    }
    if (ec) {
      return absl::InternalError(
          absl::StrCat(dir.string(), ": cannot list: ", ec.message()));
    }
    std::sort(files.begin(), files.end());
    for (std::string& file : files) {
      examples.push_back({std::move(file), static_cast<int32_t>(label)});
    }
  }
  if (examples.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        root, ": no .jpg/.jpeg images in ", classes.size(), " class folders"));
  }
  std::vector<std::string> cache;
  if (options.cache_encoded) {
    cache.reserve(examples.size());
    for (const auto& example : examples) {
      absl::StatusOr<std::string> bytes = ReadBytes(example.path);
      if (!bytes.ok()) return bytes.status();
      cache.push_back(*std::move(bytes));
    }
  }
  return std::make_unique<ImageFolderDataset>(
      std::move(examples), std::move(cache), static_cast<int>(classes.size()),
      options);
}

}  // namespace hypertune::data
