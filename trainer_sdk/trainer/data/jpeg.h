// JPEG decoding for the image pipeline: a thin owner of a TurboJPEG
// decompressor that returns interleaved RGB, optionally decoded at a reduced
// DCT scale (1/8 .. 1), which is much cheaper than a full decode for crops
// that will be shrunk anyway. Internal to hypertune_train_data.
//
// Thread safety: a JpegDecoder belongs to one thread at a time.
#ifndef HYPERTUNE_TRAINER_SDK_TRAINER_DATA_JPEG_H_
#define HYPERTUNE_TRAINER_SDK_TRAINER_DATA_JPEG_H_

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer_sdk/trainer/data/augment.h"

namespace hypertune::data {

struct DctScale {
  int num = 1;
  int denom = 1;
};

struct DecodedImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3, interleaved
};

class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Returns the full-size width and height, or INVALID_ARGUMENT when the
  // bytes are not a JPEG TurboJPEG can read.
  absl::StatusOr<std::pair<int, int>> ReadSize(std::string_view jpeg);

  // Decodes to RGB at `scale` (sizes rounded up); grayscale is expanded and
  // CMYK/YCCK (Adobe, inverted) converted. Returns INVALID_ARGUMENT on a
  // fatal decode error (warnings such as a truncated scan are tolerated).
  absl::StatusOr<DecodedImage> Decode(std::string_view jpeg,
                                      DctScale scale = {});

 private:
  void* handle_;  // tjhandle
};

// The smallest scale TurboJPEG supports (<= 1) at which `box` (on the full
// image) still spans at least out_width x out_height pixels.
DctScale ChooseDctScale(const CropBox& box, int out_width, int out_height);

// A dimension decoded at `scale`, as TurboJPEG rounds it (up).
int ScaledSize(int size, DctScale scale);

}  // namespace hypertune::data

#endif  // HYPERTUNE_TRAINER_SDK_TRAINER_DATA_JPEG_H_
