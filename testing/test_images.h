// Test support: writes small ImageNet-style folders of generated JPEGs, so
// tests of the data pipeline and of the trainer need no real images.
//
// Thread safety: free functions; concurrent calls must use different roots.
#ifndef HYPERTUNE_TESTING_TEST_IMAGES_H_
#define HYPERTUNE_TESTING_TEST_IMAGES_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hypertune::data {

// Returns the JPEG encoding (4:4:4, `quality`) of a width x height
// interleaved RGB image. REQUIRES: rgb.size() == width * height * 3.
absl::StatusOr<std::string> EncodeJpeg(std::span<const uint8_t> rgb, int width,
                                       int height, int quality = 95);

// As EncodeJpeg, from interleaved CMYK (4 bytes a pixel): a YCCK JPEG with an
// Adobe marker, as some photo tools write. REQUIRES: cmyk.size() ==
// width * height * 4.
absl::StatusOr<std::string> EncodeCmykJpeg(std::span<const uint8_t> cmyk,
                                           int width, int height,
                                           int quality = 95);

struct GeneratedImage {
  std::string path;
  std::string class_name;
  int label = 0;  // the class's position in the sorted class names
  int width = 0, height = 0;
  bool solid = false;          // one colour all over; otherwise a gradient
  uint8_t rgb[3] = {0, 0, 0};  // the colour (solid), or top-left (gradient)
};

struct JpegFolderSpec {
  // Deliberately not in sorted order, so label assignment is exercised.
  std::vector<std::string> classes = {"zebra", "apple", "mango"};
  int images_per_class = 6;  // even-numbered ones solid, odd ones gradients
  int min_size = 24;         // sides range over [min_size, ~2.5 * min_size]
};

// Writes root/<class>/img_<k>.jpg per the spec (creating folders as needed)
// and returns the images in (sorted class, file name) order, which is the
// order OpenImageFolder() indexes them.
absl::StatusOr<std::vector<GeneratedImage>> WriteJpegFolder(
    const std::string& root, const JpegFolderSpec& spec = {});

}  // namespace hypertune::data

#endif  // HYPERTUNE_TESTING_TEST_IMAGES_H_
