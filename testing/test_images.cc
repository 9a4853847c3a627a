#include "testing/test_images.h"

#include <turbojpeg.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace hypertune::data {

namespace {

absl::StatusOr<std::string> Encode(std::span<const uint8_t> pixels, int width,
                                   int height, int quality, bool cmyk) {
  const int channels = cmyk ? 4 : 3;
  if (width <= 0 || height <= 0 ||
      pixels.size() != static_cast<size_t>(width) * height * channels) {
    return absl::InvalidArgumentError(
        absl::StrCat("EncodeJpeg: ", pixels.size(), " bytes is not a ", width,
                     " x ", height, cmyk ? " CMYK" : " RGB", " image"));
  }
  tjhandle tj = tjInitCompress();
  if (tj == nullptr) {
    return absl::InternalError(absl::StrCat(
        "TurboJPEG: cannot create a compressor: ", tjGetErrorStr2(nullptr)));
  }
  unsigned char* jpeg = nullptr;
  unsigned long jpeg_size = 0;
  const int rc = tjCompress2(tj, pixels.data(), width, 0, height,
                             cmyk ? TJPF_CMYK : TJPF_RGB, &jpeg, &jpeg_size,
                             TJSAMP_444, quality, 0);
  absl::StatusOr<std::string> result;
  if (rc != 0) {
    result = absl::InternalError(
        absl::StrCat("TurboJPEG: compress failed: ", tjGetErrorStr2(tj)));
  } else {
    result = std::string(reinterpret_cast<const char*>(jpeg), jpeg_size);
  }
  tjFree(jpeg);
  tjDestroy(tj);
  return result;
}

}  // namespace

absl::StatusOr<std::string> EncodeJpeg(std::span<const uint8_t> rgb, int width,
                                       int height, int quality) {
  return Encode(rgb, width, height, quality, /*cmyk=*/false);
}

absl::StatusOr<std::string> EncodeCmykJpeg(std::span<const uint8_t> cmyk,
                                           int width, int height, int quality) {
  return Encode(cmyk, width, height, quality, /*cmyk=*/true);
}

absl::StatusOr<std::vector<GeneratedImage>> WriteJpegFolder(
    const std::string& root, const JpegFolderSpec& spec) {
  std::vector<std::string> sorted = spec.classes;
  std::sort(sorted.begin(), sorted.end());
  std::vector<GeneratedImage> images;
  for (size_t label = 0; label < sorted.size(); ++label) {
    const std::string& name = sorted[label];
    // Colours depend on the class name's original position, not the label.
    const size_t c = static_cast<size_t>(
        std::find(spec.classes.begin(), spec.classes.end(), name) -
        spec.classes.begin());
    const std::filesystem::path dir = std::filesystem::path(root) / name;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat(dir.string(), ": cannot create: ", ec.message()));
    }
    for (int k = 0; k < spec.images_per_class; ++k) {
      GeneratedImage image;
      image.class_name = name;
      image.label = static_cast<int>(label);
      image.path = (dir / absl::StrCat("img_", k, ".jpg")).string();
      // Sizes vary in both directions: landscape, portrait and square.
      image.width = spec.min_size + (7 * k + 11 * static_cast<int>(c)) %
                                        (spec.min_size * 3 / 2 + 1);
      image.height = spec.min_size + (13 * k + 5 * static_cast<int>(c) + 9) %
                                         (spec.min_size * 3 / 2 + 1);
      image.solid = k % 2 == 0;
      image.rgb[0] = static_cast<uint8_t>(40 + 70 * c);
      image.rgb[1] = static_cast<uint8_t>(200 - 30 * k % 160);
      image.rgb[2] = static_cast<uint8_t>(60 + 50 * ((c + k) % 4));
      std::vector<uint8_t> rgb(static_cast<size_t>(image.width) * image.height *
                               3);
      for (int y = 0; y < image.height; ++y) {
        for (int x = 0; x < image.width; ++x) {
          uint8_t* p = &rgb[(static_cast<size_t>(y) * image.width + x) * 3];
          for (int ch = 0; ch < 3; ++ch) {
            int v = image.rgb[ch];
            if (!image.solid) {
              // Horizontal ramp on red, vertical on green, diagonal on blue.
              const int ramp =
                  ch == 0   ? 255 * x / image.width
                  : ch == 1 ? 255 * y / image.height
                            : 127 * (x + y) / (image.width + image.height);
              v = (v + ramp) % 256;
            }
            p[ch] = static_cast<uint8_t>(v);
          }
        }
      }
      absl::StatusOr<std::string> jpeg =
          EncodeJpeg(rgb, image.width, image.height);
      if (!jpeg.ok()) return jpeg.status();
      std::ofstream out(image.path, std::ios::binary | std::ios::trunc);
      out.write(jpeg->data(), static_cast<std::streamsize>(jpeg->size()));
      if (!out) {
        return absl::InternalError(absl::StrCat(image.path, ": cannot write"));
      }
      images.push_back(std::move(image));
    }
  }
  return images;
}

}  // namespace hypertune::data
