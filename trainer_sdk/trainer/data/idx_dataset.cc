// IDX files (the MNIST format): a big-endian header of magic, then one uint32
// per dimension, then the uint8 payload. zlib's gzread reads gzipped and plain
// files alike.
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "trainer_sdk/trainer/data/augment.h"
#include "trainer_sdk/trainer/data/dataset.h"

namespace hypertune::data {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // ubyte, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // ubyte, 1 dimension

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  }
  std::string data;
  std::vector<char> chunk(1 << 20);
  while (true) {
    const int n =
        gzread(file, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n > 0) {
      data.append(chunk.data(), n);
      continue;
    }
    int errnum = Z_OK;
    const char* message = gzerror(file, &errnum);
    if (n < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) {
      const std::string what = message != nullptr ? message : "read error";
      gzclose(file);
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": truncated or corrupt gzip data (", what, ")"));
    }
    break;
  }
  gzclose(file);
  return data;
}

uint32_t BigEndian32(const std::string& data, size_t offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data()) + offset;
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Checks the header of an IDX file with `dims` dimensions and returns them.
absl::StatusOr<std::vector<uint32_t>> ParseHeader(const std::string& path,
                                                  const std::string& data,
                                                  uint32_t magic, int dims,
                                                  const char* kind) {
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  if (data.size() >= 4 && BigEndian32(data, 0) != magic) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: magic number 0x%08x is not that of an IDX %s file (0x%08x)", path,
        BigEndian32(data, 0), kind, magic));
  }
  if (data.size() < header) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": truncated: the IDX header needs ", header,
                     " bytes, the file has ", data.size()));
  }
  std::vector<uint32_t> sizes(dims);
  uint64_t payload = 1;
  for (int d = 0; d < dims; ++d) {
    sizes[d] = BigEndian32(data, 4 + 4 * d);
    payload *= sizes[d];
  }
  if (data.size() - header != payload) {
    const bool short_file = data.size() - header < payload;
    return absl::InvalidArgumentError(absl::StrCat(
        path, short_file ? ": truncated: " : ": trailing bytes: ",
        "dimensions ", absl::StrJoin(sizes, " x "), " need ", payload,
        " bytes after the header, the file has ", data.size() - header));
  }
  return sizes;
}

class IdxDataset : public Dataset {
 public:
  IdxDataset(std::string pixels, size_t offset, int64_t count, int rows,
             int cols, std::vector<int32_t> labels, const IdxOptions& options)
      : pixels_(std::move(pixels)),
        offset_(offset),
        count_(count),
        rows_(rows),
        cols_(cols),
        labels_(std::move(labels)),
        options_(options) {
    const float mean = options.normalization.mean.at(0);
    const float stddev = options.normalization.std.at(0);
    for (int v = 0; v < 256; ++v) lut_[v] = (v / 255.0f - mean) / stddev;
  }

  int64_t size() const override { return count_; }
  int channels() const override { return 1; }
  int height() const override { return rows_; }
  int width() const override { return cols_; }
  int num_classes() const override { return options_.num_classes; }

  absl::Status Fill(std::span<const int64_t> indices, bool train, uint64_t seed,
                    ImageBatch& out) const override {
    const size_t image = static_cast<size_t>(rows_) * cols_;
    out.n = static_cast<int>(indices.size());
    out.channels = 1;
    out.height = rows_;
    out.width = cols_;
    out.pixels.resize(indices.size() * image);
    out.labels.resize(indices.size());
    const auto* all =
        reinterpret_cast<const uint8_t*>(pixels_.data()) + offset_;
    const int pad = options_.crop_padding;
    for (size_t i = 0; i < indices.size(); ++i) {
      const int64_t index = indices[i];
      if (index < 0 || index >= count_) {
        return absl::InvalidArgumentError(absl::StrCat(
            "indices[", i, "]: ", index, " is outside [0, ", count_, ")"));
      }
      const uint8_t* src = all + static_cast<size_t>(index) * image;
      float* dst = &out.pixels[i * image];
      out.labels[i] = labels_[index];
      int dy = 0, dx = 0;
      bool flip = false;
      if (train) {
        ExampleRng rng(seed, static_cast<uint64_t>(index));
        dy = static_cast<int>(rng.UniformInt(2 * pad + 1)) - pad;
        dx = static_cast<int>(rng.UniformInt(2 * pad + 1)) - pad;
        flip = options_.flip && rng.Coin();
      }
      // Output (y, x) shows source (y + dy, x' + dx), x' mirrored when
      // flipping; outside the source is the zero padding.
      for (int y = 0; y < rows_; ++y) {
        const int sy = y + dy;
        for (int x = 0; x < cols_; ++x) {
          const int sx = (flip ? cols_ - 1 - x : x) + dx;
          const bool inside = sy >= 0 && sy < rows_ && sx >= 0 && sx < cols_;
          dst[y * cols_ + x] = lut_[inside ? src[sy * cols_ + sx] : 0];
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  std::string pixels_;  // the whole images file; pixels start at offset_
  size_t offset_;
  int64_t count_;
  int rows_, cols_;
  std::vector<int32_t> labels_;
  IdxOptions options_;
  float lut_[256];
};

}  // namespace

absl::StatusOr<std::unique_ptr<Dataset>> OpenIdx(const std::string& images_path,
                                                 const std::string& labels_path,
                                                 const IdxOptions& options) {
  if (options.num_classes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_classes must be positive, got ", options.num_classes));
  }
  if (options.normalization.mean.size() != 1 ||
      options.normalization.std.size() != 1 ||
      !(options.normalization.std[0] > 0)) {
    return absl::InvalidArgumentError(
        "normalization: IDX images have one channel; need one mean and one "
        "positive std");
  }
  if (options.crop_padding < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("crop_padding must be >= 0, got ", options.crop_padding));
  }
  absl::StatusOr<std::string> images = ReadWholeFile(images_path);
  if (!images.ok()) return images.status();
  absl::StatusOr<std::vector<uint32_t>> image_dims =
      ParseHeader(images_path, *images, kImagesMagic, 3, "image");
  if (!image_dims.ok()) return image_dims.status();
  const uint32_t count = (*image_dims)[0];
  const uint32_t rows = (*image_dims)[1], cols = (*image_dims)[2];
  if (rows == 0 || cols == 0 || rows > 65536 || cols > 65536) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_path, ": image size ", rows, " x ", cols, " is not usable"));
  }

  absl::StatusOr<std::string> labels = ReadWholeFile(labels_path);
  if (!labels.ok()) return labels.status();
  absl::StatusOr<std::vector<uint32_t>> label_dims =
      ParseHeader(labels_path, *labels, kLabelsMagic, 1, "label");
  if (!label_dims.ok()) return label_dims.status();
  if ((*label_dims)[0] != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_path, ": ", (*label_dims)[0], " labels, but ",
                     images_path, " holds ", count, " images"));
  }
  std::vector<int32_t> label_values(count);
  for (uint32_t i = 0; i < count; ++i) {
    const int label = static_cast<unsigned char>((*labels)[8 + i]);
    if (label >= options.num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(labels_path, ": label ", label, " of example ", i,
                       " is outside [0, ", options.num_classes, ")"));
    }
    label_values[i] = label;
  }
  return std::make_unique<IdxDataset>(
      *std::move(images), 16, count, static_cast<int>(rows),
      static_cast<int>(cols), std::move(label_values), options);
}

absl::StatusOr<std::unique_ptr<Dataset>> OpenFashionMnist(
    const std::string& dir, bool test_set, const IdxOptions& options) {
  const std::string prefix = test_set ? "t10k" : "train";
  // Prefer the .gz files (as distributed); fall back to unpacked ones.
  auto pick = [&](const std::string& stem) {
    const std::string base = absl::StrCat(dir, "/", prefix, "-", stem);
    std::error_code ec;
    if (std::filesystem::is_regular_file(base + ".gz", ec)) return base + ".gz";
    if (std::filesystem::is_regular_file(base, ec)) return base;
    return base + ".gz";  // missing either way: name the usual file
  };
  return OpenIdx(pick("images-idx3-ubyte"), pick("labels-idx1-ubyte"), options);
}

}  // namespace hypertune::data
