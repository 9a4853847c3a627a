// The reference trainer's data sets: labelled images, decoded, augmented and
// normalized into NCHW float batches.
//
// A Dataset is immutable once opened; Fill() is const and safe to call from
// many threads at once (the Prefetcher does). Augmentation randomness is a
// pure function of (seed, example index), so the same call always yields the
// same pixels: a run resumed from a checkpoint sees exactly the batches it
// would have seen.
#ifndef HYPERTUNE_TRAINER_SDK_TRAINER_DATA_DATASET_H_
#define HYPERTUNE_TRAINER_SDK_TRAINER_DATA_DATASET_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hypertune::data {

// A batch of n images, NCHW, already normalized; labels[i] is in
// [0, num_classes).
struct ImageBatch {
  int n = 0;
  int channels = 0;
  int height = 0;
  int width = 0;
  std::vector<float> pixels;    // n * channels * height * width
  std::vector<int32_t> labels;  // n
};

// Per-channel normalization: x = (pixel / 255 - mean[c]) / std[c].
struct Normalization {
  std::vector<float> mean;
  std::vector<float> std;
};
// Fashion-MNIST: mean 0.2860, std 0.3530.
Normalization FashionMnistNormalization();
// ImageNet: mean (0.485, 0.456, 0.406), std (0.229, 0.224, 0.225).
Normalization ImageNetNormalization();

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  virtual int channels() const = 0;
  virtual int height() const = 0;  // of the images Fill() produces
  virtual int width() const = 0;
  virtual int num_classes() const = 0;

  // Decodes the examples `indices` (each in [0, size())) into `out`, resized
  // to indices.size() x channels() x height() x width(). With `train`, applies
  // the data set's training augmentation drawn from (seed, index); without,
  // the deterministic evaluation transform. Reuses out's storage.
  // Returns INVALID_ARGUMENT for an index out of range, or the decode error
  // naming the file.
  virtual absl::Status Fill(std::span<const int64_t> indices, bool train,
                            uint64_t seed, ImageBatch& out) const = 0;
};

// ---------------------------------------------------------------- IDX files

struct IdxOptions {
  int num_classes = 10;  // labels must lie in [0, num_classes)
  Normalization normalization = FashionMnistNormalization();
  int crop_padding = 2;  // training: zero-pad by this much, crop back randomly
  bool flip = true;      // training: horizontal flip with probability 1/2
};

// Opens an IDX image file (magic 0x00000803: count x rows x cols uint8) and
// its label file (0x00000801: count uint8), each gzipped or plain, and keeps
// the pixels in memory (one channel). Returns INVALID_ARGUMENT naming the file
// and the problem (bad magic, truncated, count mismatch, label out of range),
// NOT_FOUND when a file is missing.
absl::StatusOr<std::unique_ptr<Dataset>> OpenIdx(
    const std::string& images_path, const std::string& labels_path,
    const IdxOptions& options = {});

inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// Opens Fashion-MNIST from `dir` ({train,t10k}-{images-idx3,labels-idx1}-ubyte
// with or without .gz): the 60,000 training images, or with `test_set` the
// 10,000 test images.
absl::StatusOr<std::unique_ptr<Dataset>> OpenFashionMnist(
    const std::string& dir, bool test_set, const IdxOptions& options = {});

// ------------------------------------------------- ImageNet-style folders

struct ImageFolderOptions {
  int image_size = 224;  // output is 3 x image_size x image_size
  Normalization normalization = ImageNetNormalization();
  // Class folder names in label order; empty: every subfolder of the root,
  // sorted by name. Pass the training set's list when opening `val`.
  std::vector<std::string> classes;
  // Read every file's bytes into memory at open (small data sets only).
  bool cache_encoded = false;
};

// Opens `root/<class>/*.{JPEG,jpg,jpeg}` (label = position of <class> in the
// class list). Training: RandomResizedCrop (scale 0.08..1, ratio 3/4..4/3,
// centre-crop fallback, bilinear) to image_size, then flip with probability
// 1/2. Evaluation: resize the shorter side to image_size * 256 / 224, then a
// centre crop of image_size. Files are decoded with TurboJPEG on each Fill().
// Returns NOT_FOUND for a missing root, INVALID_ARGUMENT for a root without
// class folders or images, or a class in options.classes without a folder.
absl::StatusOr<std::unique_ptr<Dataset>> OpenImageFolder(
    const std::string& root, const ImageFolderOptions& options = {});

// The sorted class folder names under `root`, as OpenImageFolder uses them.
absl::StatusOr<std::vector<std::string>> ListClasses(const std::string& root);

// ------------------------------------------------------------ subsets

// A view of base's examples [begin, end): example i is base's begin + i,
// augmented as base's example begin + i would be. Returns INVALID_ARGUMENT
// unless 0 <= begin <= end <= base->size().
absl::StatusOr<std::shared_ptr<const Dataset>> Subset(
    std::shared_ptr<const Dataset> base, int64_t begin, int64_t end);

struct Split {
  std::shared_ptr<const Dataset> train;       // base's first size - K
  std::shared_ptr<const Dataset> validation;  // base's last K
};

// Holds out the last `validation_size` examples of `base` as the validation
// split (Fashion-MNIST trials validate on the last 10,000 training images:
// the trainer's README). With train_limit >= 0, keeps only the first
// train_limit examples of the training part (--train-subset). Returns
// INVALID_ARGUMENT unless 0 <= validation_size <= base->size() and train_limit
// <= the training part.
absl::StatusOr<Split> HoldOutTail(std::shared_ptr<const Dataset> base,
                                  int64_t validation_size,
                                  int64_t train_limit = -1);

}  // namespace hypertune::data

#endif  // HYPERTUNE_TRAINER_SDK_TRAINER_DATA_DATASET_H_
