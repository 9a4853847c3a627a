#include "trainer_sdk/trainer/data/jpeg.h"

#include <turbojpeg.h>

#include "absl/strings/str_cat.h"

namespace hypertune::data {

JpegDecoder::JpegDecoder() : handle_(tjInitDecompress()) {}

JpegDecoder::~JpegDecoder() {
  if (handle_ != nullptr) tjDestroy(static_cast<tjhandle>(handle_));
}

absl::StatusOr<std::pair<int, int>> JpegDecoder::ReadSize(
    std::string_view jpeg) {
  if (handle_ == nullptr) {
    return absl::InternalError("TurboJPEG: no decompressor");
  }
  tjhandle tj = static_cast<tjhandle>(handle_);
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(
          tj, reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size(),
          &width, &height, &subsampling, &colorspace) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a readable JPEG: ", tjGetErrorStr2(tj)));
  }
  if (width <= 0 || height <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty JPEG image ", width, " x ", height));
  }
  return std::make_pair(width, height);
}

absl::StatusOr<DecodedImage> JpegDecoder::Decode(std::string_view jpeg,
                                                 DctScale scale) {
  if (handle_ == nullptr) {
    return absl::InternalError("TurboJPEG: no decompressor");
  }
  tjhandle tj = static_cast<tjhandle>(handle_);
  const auto* data = reinterpret_cast<const unsigned char*>(jpeg.data());
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, data, jpeg.size(), &width, &height, &subsampling,
                          &colorspace) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a readable JPEG: ", tjGetErrorStr2(tj)));
  }
  DecodedImage image;
  image.width = ScaledSize(width, scale);
  image.height = ScaledSize(height, scale);
  if (image.width <= 0 || image.height <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty JPEG image ", width, " x ", height));
  }
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  const size_t pixels = static_cast<size_t>(image.width) * image.height;
  std::vector<uint8_t> decoded(pixels * (cmyk ? 4 : 3));
  if (tjDecompress2(tj, data, jpeg.size(), decoded.data(), image.width, 0,
                    image.height, cmyk ? TJPF_CMYK : TJPF_RGB, 0) != 0 &&
      tjGetErrorCode(tj) == TJERR_FATAL) {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG decode failed: ", tjGetErrorStr2(tj)));
  }
  if (!cmyk) {
    image.rgb = std::move(decoded);
    return image;
  }
  // Photoshop-style CMYK JPEGs store inverted inks: R = C * K / 255.
  image.rgb.resize(pixels * 3);
  for (size_t p = 0; p < pixels; ++p) {
    const unsigned k = decoded[4 * p + 3];
    for (int c = 0; c < 3; ++c) {
      image.rgb[3 * p + c] = static_cast<uint8_t>(decoded[4 * p + c] * k / 255);
    }
  }
  return image;
}

int ScaledSize(int size, DctScale scale) {
  return static_cast<int>(
      (static_cast<int64_t>(size) * scale.num + scale.denom - 1) / scale.denom);
}

DctScale ChooseDctScale(const CropBox& box, int out_width, int out_height) {
  DctScale chosen;
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  for (int f = 0; f < count && factors != nullptr; ++f) {
    const DctScale candidate{factors[f].num, factors[f].denom};
    // Only smaller than the best so far.
    if (int64_t{candidate.num} * chosen.denom >=
        int64_t{chosen.num} * candidate.denom) {
      continue;
    }
    const double ratio = static_cast<double>(candidate.num) / candidate.denom;
    if (box.width * ratio >= out_width && box.height * ratio >= out_height) {
      chosen = candidate;
    }
  }
  return chosen;
}

}  // namespace hypertune::data
