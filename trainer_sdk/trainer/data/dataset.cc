#include "trainer_sdk/trainer/data/dataset.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace hypertune::data {

Normalization FashionMnistNormalization() { return {{0.2860f}, {0.3530f}}; }

Normalization ImageNetNormalization() {
  return {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
}

namespace {

class SubsetDataset : public Dataset {
 public:
  SubsetDataset(std::shared_ptr<const Dataset> base, int64_t begin, int64_t end)
      : base_(std::move(base)), begin_(begin), end_(end) {}

  int64_t size() const override { return end_ - begin_; }
  int channels() const override { return base_->channels(); }
  int height() const override { return base_->height(); }
  int width() const override { return base_->width(); }
  int num_classes() const override { return base_->num_classes(); }

  absl::Status Fill(std::span<const int64_t> indices, bool train, uint64_t seed,
                    ImageBatch& out) const override {
    std::vector<int64_t> mapped(indices.size());
    for (size_t i = 0; i < indices.size(); ++i) {
      if (indices[i] < 0 || indices[i] >= size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("indices[", i, "]: ", indices[i],
                         " is outside the subset's [0, ", size(), ")"));
      }
      mapped[i] = begin_ + indices[i];
    }
    return base_->Fill(mapped, train, seed, out);
  }

 private:
  std::shared_ptr<const Dataset> base_;
  int64_t begin_, end_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const Dataset>> Subset(
    std::shared_ptr<const Dataset> base, int64_t begin, int64_t end) {
  if (base == nullptr) {
    return absl::InvalidArgumentError("subset: base data set is null");
  }
  if (begin < 0 || begin > end || end > base->size()) {
    return absl::InvalidArgumentError(absl::StrCat("subset [", begin, ", ", end,
                                                   ") does not lie in [0, ",
                                                   base->size(), ")"));
  }
  return std::make_shared<SubsetDataset>(std::move(base), begin, end);
}

absl::StatusOr<Split> HoldOutTail(std::shared_ptr<const Dataset> base,
                                  int64_t validation_size,
                                  int64_t train_limit) {
  if (base == nullptr) {
    return absl::InvalidArgumentError("split: base data set is null");
  }
  const int64_t total = base->size();
  if (validation_size < 0 || validation_size > total) {
    return absl::InvalidArgumentError(
        absl::StrCat("validation size ", validation_size, " must lie in [0, ",
                     total, "] (the data set's size)"));
  }
  const int64_t train_size = total - validation_size;
  if (train_limit > train_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "train subset ", train_limit, " exceeds the ", train_size,
        " training examples left after holding out ", validation_size));
  }
  Split split;
  absl::StatusOr<std::shared_ptr<const Dataset>> train =
      Subset(base, 0, train_limit >= 0 ? train_limit : train_size);
  if (!train.ok()) return train.status();
  absl::StatusOr<std::shared_ptr<const Dataset>> validation =
      Subset(base, train_size, total);
  if (!validation.ok()) return validation.status();
  split.train = *std::move(train);
  split.validation = *std::move(validation);
  return split;
}

}  // namespace hypertune::data
