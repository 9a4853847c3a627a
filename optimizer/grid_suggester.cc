#include "optimizer/grid_suggester.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "optimizer/conditional.h"
#include "optimizer/splitmix.h"

namespace hypertune::optimizer {
namespace {

// n values evenly spaced over [min, max] in `scale`, both ends included (the
// centre for n == 1). Log scale steps in powers of ten, so that decades land
// exactly (1e-4 .. 1e-1 in 4 gives 0.01, not 0.010000000000000004).
std::vector<double> EvenlySpaced(double min, double max, Scale scale, int n) {
  const bool log = scale == Scale::kLog;
  const double lo = log ? std::log10(min) : min;
  const double hi = log ? std::log10(max) : max;
  std::vector<double> values(n);
  for (int i = 0; i < n; ++i) {
    const double v =
        n == 1 ? (lo + hi) / 2 : (lo * (n - 1 - i) + hi * i) / (n - 1);
    values[i] = std::clamp(log ? std::pow(10.0, v) : v, min, max);
  }
  // Exact ends, whatever pow(10, log10(x)) rounds to.
  if (n > 1) values.front() = min, values.back() = max;
  return values;
}

// Adds saturating at kMaxGridPoints + 1: larger grids are refused, so any
// count above the limit is as good as another.
int64_t CappedAdd(int64_t a, int64_t b) {
  return std::min(a + b, kMaxGridPoints + 1);
}
int64_t CappedMultiply(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > (kMaxGridPoints + 1) / b ? kMaxGridPoints + 1 : a * b;
}

// The grid's points numbered 0..size()-1. A list of sibling parameters
// (the roots, or the children a value activates) numbers its combinations
// in mixed radix, the first sibling varying fastest; a parameter numbers
// its value's block, then, within it, its active children's combinations.
class Grid {
 public:
  static absl::StatusOr<Grid> Build(const SearchSpace& space) {
    Grid grid;
    grid.space_ = &space;
    const std::vector<ParameterConfig>& params = space.parameters();
    grid.nodes_.resize(params.size());
    for (int i = 0; i < space.dim(); ++i) {
      absl::StatusOr<std::vector<double>> values = GridValues(space, i);
      if (!values.ok()) return values.status();
      Node& node = grid.nodes_[i];
      node.values = *std::move(values);
      node.children.resize(node.values.size());
    }
    for (int i = 0; i < space.dim(); ++i) {
      if (params[i].parent == kNoParent) {
        grid.roots_.push_back(i);
        continue;
      }
      Node& parent = grid.nodes_[params[i].parent];
      for (size_t j = 0; j < parent.values.size(); ++j) {
        if (ActivatedBy(params[i], parent.values[j])) {
          parent.children[j].push_back(i);
        }
      }
    }
    // Children before their parents.
    const std::vector<int>& order = space.parents_first();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Node& node = grid.nodes_[*it];
      node.offsets.assign(1, 0);
      for (const std::vector<int>& children : node.children) {
        node.offsets.push_back(
            CappedAdd(node.offsets.back(), grid.ListSize(children)));
      }
    }
    grid.size_ = grid.ListSize(grid.roots_);
    if (grid.size_ > kMaxGridPoints) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameters: GRID allows at most ", kMaxGridPoints,
                       " points, this space has more; give fewer grid_points "
                       "or values, or choose QUASI_RANDOM or GP_BANDIT"));
    }
    return grid;
  }

  int64_t size() const { return size_; }

  Assignment Decode(int64_t number) const {
    Assignment a(nodes_.size(), kInactive);
    DecodeList(roots_, number, a);
    return a;
  }

  // The number of `a`, nullopt if some active value is off the grid.
  std::optional<int64_t> Number(const Assignment& a) const {
    return NumberList(roots_, a);
  }

 private:
  struct Node {
    std::vector<double> values;
    // Per value: the children it activates.
    std::vector<std::vector<int>> children;
    // Per value: where its block starts; then the node's count.
    std::vector<int64_t> offsets;
    int64_t count() const { return offsets.back(); }
  };

  int64_t ListSize(const std::vector<int>& list) const {
    int64_t size = 1;
    for (int i : list) size = CappedMultiply(size, nodes_[i].count());
    return size;
  }

  void DecodeList(const std::vector<int>& list, int64_t number,
                  Assignment& a) const {
    for (int i : list) {
      const Node& node = nodes_[i];
      const int64_t r = number % node.count();
      number /= node.count();
      const size_t j =
          std::upper_bound(node.offsets.begin() + 1, node.offsets.end(), r) -
          (node.offsets.begin() + 1);
      a[i] = node.values[j];
      DecodeList(node.children[j], r - node.offsets[j], a);
    }
  }

  std::optional<int64_t> NumberList(const std::vector<int>& list,
                                    const Assignment& a) const {
    int64_t number = 0, radix = 1;
    for (int i : list) {
      const Node& node = nodes_[i];
      const std::optional<size_t> j = ValueIndex(i, a[i]);
      if (!j.has_value()) return std::nullopt;
      const std::optional<int64_t> within = NumberList(node.children[*j], a);
      if (!within.has_value()) return std::nullopt;
      number += (node.offsets[*j] + *within) * radix;
      radix *= node.count();
    }
    return number;
  }

  // The grid value `x` stands for: within 1e-9 of the parameter's range.
  std::optional<size_t> ValueIndex(int i, double x) const {
    if (std::isnan(x)) return std::nullopt;
    const std::vector<double>& values = nodes_[i].values;
    const ParameterConfig& p = space_->parameters()[i];
    const bool ranged =
        p.type == ParameterType::kDouble || p.type == ParameterType::kInteger;
    const double tolerance = ranged ? 1e-9 * std::max(1.0, p.max - p.min) : 0;
    const size_t k =
        std::lower_bound(values.begin(), values.end(), x) - values.begin();
    for (size_t j : {k, k - 1}) {
      if (j < values.size() && std::abs(values[j] - x) <= tolerance) return j;
    }
    return std::nullopt;
  }

  const SearchSpace* space_ = nullptr;
  std::vector<Node> nodes_;
  std::vector<int> roots_;
  int64_t size_ = 0;
};

// A permutation of [0, size) keyed by `seed`: a four-round Feistel network
// on the smallest even number of bits that holds size, walked until it
// lands inside (cycle walking keeps it a bijection of [0, size)).
class Shuffle {
 public:
  Shuffle(int64_t size, uint64_t seed) : size_(size) {
    while ((int64_t{1} << (2 * half_bits_)) < size) ++half_bits_;
    SplitMix64 keys(seed);
    for (uint64_t& key : keys_) key = keys.Next();
  }

  int64_t operator()(int64_t position) const {
    uint64_t x = static_cast<uint64_t>(position);
    do {
      x = Round(x);
    } while (static_cast<int64_t>(x) >= size_);
    return static_cast<int64_t>(x);
  }

 private:
  uint64_t Round(uint64_t x) const {
    const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
    uint64_t left = x >> half_bits_, right = x & mask;
    for (uint64_t key : keys_) {
      const uint64_t next = left ^ (Mix64(right ^ key) & mask);
      left = right;
      right = next;
    }
    return (left << half_bits_) | right;
  }

  int64_t size_;
  int half_bits_ = 1;
  uint64_t keys_[4];
};

}  // namespace

absl::StatusOr<std::vector<double>> GridValues(const SearchSpace& space,
                                               int index) {
  const ParameterConfig& p = space.parameters()[index];
  switch (p.type) {
    case ParameterType::kCategorical: {
      std::vector<double> values(p.categories.size());
      for (size_t j = 0; j < values.size(); ++j) values[j] = j;
      return values;
    }
    case ParameterType::kDiscrete:
      return p.values;
    case ParameterType::kInteger: {
      if (p.grid_points == 0) {
        if (p.max - p.min + 1 > kMaxGridPointsPerParameter) {
          return absl::InvalidArgumentError(absl::StrCat(
              space.Label(index), ": GRID tries every integer of the range, ",
              "and [", p.min, ", ", p.max, "] has more than ",
              kMaxGridPointsPerParameter, "; set grid_points"));
        }
        std::vector<double> values;
        for (double v = p.min; v <= p.max; ++v) values.push_back(v);
        return values;
      }
      std::vector<double> values =
          EvenlySpaced(p.min, p.max, p.scale, p.grid_points);
      for (double& v : values) v = std::round(v);
      values.erase(std::unique(values.begin(), values.end()), values.end());
      return values;
    }
    case ParameterType::kDouble:
      if (p.grid_points == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            space.Label(index),
            ".grid_points: GRID needs the number of values to try of a DOUBLE "
            "parameter, got none"));
      }
      return EvenlySpaced(p.min, p.max, p.scale, p.grid_points);
  }
  return absl::InternalError("unknown parameter type");
}

absl::StatusOr<int64_t> GridSize(const SearchSpace& space) {
  absl::StatusOr<Grid> grid = Grid::Build(space);
  if (!grid.ok()) return grid.status();
  return grid->size();
}

absl::StatusOr<std::vector<Assignment>> GridSuggester::Suggest(
    const SuggestRequest& request) {
  if (absl::Status s = ValidateRequest(request); !s.ok()) return s;
  absl::StatusOr<Grid> grid = Grid::Build(*request.space);
  if (!grid.ok()) return grid.status();
  std::unordered_set<int64_t> done;
  for (const Observation& o : request.history) {
    if (std::optional<int64_t> n = grid->Number(o.x); n.has_value()) {
      done.insert(*n);
    }
  }
  std::vector<Assignment> points;
  const Shuffle order(grid->size(), request.seed);
  for (int64_t position = 0;
       position < grid->size() && std::ssize(points) < request.count &&
       std::ssize(done) < grid->size();
       ++position) {
    const int64_t n = order(position);
    if (done.insert(n).second) points.push_back(grid->Decode(n));
  }
  return points;
}

}  // namespace hypertune::optimizer
