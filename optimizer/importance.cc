#include "optimizer/importance.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "optimizer/splitmix.h"

namespace hypertune::optimizer {
namespace {

// The forest's view of the observations: x[j][p] is point p's unit
// coordinate of numeric parameter j, or its category index when parameter j
// is categorical (categories[j] > 0).
struct Data {
  int dim = 0;
  std::vector<int> categories;
  std::vector<std::vector<double>> x;
  std::vector<double> y;
};

struct Node {
  int feature = -1;             // -1: a leaf
  double threshold = 0.0;       // numeric: x < threshold goes left
  std::vector<char> goes_left;  // categorical: per category
  int left = -1;
  int right = -1;
  double value = 0.0;  // a leaf's prediction: its points' mean
};

struct Split {
  int feature = -1;
  double threshold = 0.0;
  std::vector<char> goes_left;
  // sum_left² / n_left + sum_right² / n_right: the larger, the smaller the
  // squared error left after the split.
  double score = -1.0;
};

// Grows one CART regression tree (squared error, every feature tried at
// every node) on a sample of point indices.
class TreeBuilder {
 public:
  TreeBuilder(const Data& data, const ImportanceOptions& options)
      : data_(data), options_(options) {}

  std::vector<Node> Build(std::vector<int> sample) {
    nodes_.clear();
    index_ = std::move(sample);
    Grow(0, static_cast<int>(index_.size()), 0);
    return std::move(nodes_);
  }

 private:
  // Grows the node of points index_[begin, end); returns its index.
  int Grow(int begin, int end, int depth) {
    const int id = static_cast<int>(nodes_.size());
    nodes_.emplace_back();
    const int n = end - begin;
    double sum = 0.0, sum2 = 0.0;
    for (int k = begin; k < end; ++k) {
      const double y = data_.y[index_[k]];
      sum += y;
      sum2 += y * y;
    }
    nodes_[id].value = sum / n;
    const double sse = sum2 - sum * sum / n;
    if (n < options_.min_samples_split || n < 2 * options_.min_samples_leaf ||
        depth >= options_.max_depth || sse <= 1e-12 * sum2) {
      return id;
    }
    Split best;
    for (int j = 0; j < data_.dim; ++j) {
      if (data_.categories[j] > 0) {
        BestCategoricalSplit(j, begin, end, best);
      } else {
        BestNumericSplit(j, begin, end, best);
      }
    }
    // Worth a split only if it removes some of the error.
    if (best.feature < 0 || best.score - sum * sum / n <= 1e-9 * sse) {
      return id;
    }
    const std::vector<double>& x = data_.x[best.feature];
    auto left_of = [&](int p) {
      return data_.categories[best.feature] > 0
                 ? best.goes_left[static_cast<int>(x[p])] != 0
                 : x[p] < best.threshold;
    };
    const int middle = static_cast<int>(
        std::partition(index_.begin() + begin, index_.begin() + end, left_of) -
        index_.begin());
    const int left = Grow(begin, middle, depth + 1);
    const int right = Grow(middle, end, depth + 1);
    Node& node = nodes_[id];
    node.feature = best.feature;
    node.threshold = best.threshold;
    node.goes_left = std::move(best.goes_left);
    node.left = left;
    node.right = right;
    return id;
  }

  void BestNumericSplit(int j, int begin, int end, Split& best) {
    const std::vector<double>& x = data_.x[j];
    order_.assign(index_.begin() + begin, index_.begin() + end);
    std::sort(order_.begin(), order_.end(),
              [&](int a, int b) { return x[a] < x[b]; });
    const int n = end - begin;
    const int min_leaf = options_.min_samples_leaf;
    double total = 0.0;
    for (int p : order_) total += data_.y[p];
    double left = 0.0;
    for (int k = 1; k < n; ++k) {
      left += data_.y[order_[k - 1]];
      const double a = x[order_[k - 1]], b = x[order_[k]];
      if (k < min_leaf || n - k < min_leaf || !(a < b)) continue;
      const double right = total - left;
      const double score = left * left / k + right * right / (n - k);
      if (score > best.score) {
        best.score = score;
        best.feature = j;
        // Halfway, and strictly above a, so that a goes left.
        double t = a + (b - a) / 2;
        best.threshold = t > a ? t : b;
        best.goes_left.clear();
      }
    }
  }

  // Breiman's ordering: with categories sorted by their mean, the best
  // split into two sets is one of the prefixes. Categories absent from the
  // node go with the side holding more points.
  void BestCategoricalSplit(int j, int begin, int end, Split& best) {
    const int k_count = data_.categories[j];
    const std::vector<double>& x = data_.x[j];
    count_.assign(k_count, 0);
    sum_.assign(k_count, 0.0);
    for (int k = begin; k < end; ++k) {
      const int c = static_cast<int>(x[index_[k]]);
      ++count_[c];
      sum_[c] += data_.y[index_[k]];
    }
    present_.clear();
    for (int c = 0; c < k_count; ++c) {
      if (count_[c] > 0) present_.push_back(c);
    }
    if (present_.size() < 2) return;
    std::sort(present_.begin(), present_.end(), [&](int a, int b) {
      return sum_[a] / count_[a] < sum_[b] / count_[b];
    });
    const int n = end - begin;
    double total = 0.0;
    for (int c : present_) total += sum_[c];
    double left = 0.0;
    int n_left = 0;
    for (size_t m = 1; m < present_.size(); ++m) {
      left += sum_[present_[m - 1]];
      n_left += count_[present_[m - 1]];
      const int n_right = n - n_left;
      if (n_left < options_.min_samples_leaf ||
          n_right < options_.min_samples_leaf) {
        continue;
      }
      const double right = total - left;
      const double score = left * left / n_left + right * right / n_right;
      if (score > best.score) {
        best.score = score;
        best.feature = j;
        best.threshold = 0.0;
        const bool absent_left = n_left >= n_right;
        best.goes_left.assign(k_count, absent_left ? 1 : 0);
        for (size_t i = 0; i < present_.size(); ++i) {
          best.goes_left[present_[i]] = i < m ? 1 : 0;
        }
      }
    }
  }

  const Data& data_;
  const ImportanceOptions& options_;
  std::vector<Node> nodes_;
  std::vector<int> index_;
  // Scratch space, reused from node to node.
  std::vector<int> order_;
  std::vector<int> count_;
  std::vector<double> sum_;
  std::vector<int> present_;
};

// A leaf's box: [lo, hi) per numeric parameter, the allowed categories per
// categorical one, and the box's measure.
struct Box {
  std::vector<double> lo, hi;
  std::vector<std::vector<char>> allowed;
  std::vector<double> width;  // the measure along each parameter
  double value = 0.0;
  double volume = 1.0;
};

void CollectLeaves(const std::vector<Node>& tree, int id, const Data& data,
                   Box& box, std::vector<Box>& leaves) {
  const Node& node = tree[id];
  if (node.feature < 0) {
    Box leaf = box;
    leaf.value = node.value;
    leaf.volume = 1.0;
    for (int j = 0; j < data.dim; ++j) {
      if (data.categories[j] > 0) {
        const auto& allowed = leaf.allowed[j];
        leaf.width[j] =
            static_cast<double>(std::count(allowed.begin(), allowed.end(), 1)) /
            data.categories[j];
      } else {
        leaf.width[j] = leaf.hi[j] - leaf.lo[j];
      }
      leaf.volume *= leaf.width[j];
    }
    leaves.push_back(std::move(leaf));
    return;
  }
  const int j = node.feature;
  if (data.categories[j] > 0) {
    const std::vector<char> saved = box.allowed[j];
    for (int c = 0; c < data.categories[j]; ++c) {
      box.allowed[j][c] = saved[c] && node.goes_left[c];
    }
    CollectLeaves(tree, node.left, data, box, leaves);
    for (int c = 0; c < data.categories[j]; ++c) {
      box.allowed[j][c] = saved[c] && !node.goes_left[c];
    }
    CollectLeaves(tree, node.right, data, box, leaves);
    box.allowed[j] = saved;
  } else {
    const double saved_hi = box.hi[j];
    box.hi[j] = std::min(saved_hi, node.threshold);
    CollectLeaves(tree, node.left, data, box, leaves);
    box.hi[j] = saved_hi;
    const double saved_lo = box.lo[j];
    box.lo[j] = std::max(saved_lo, node.threshold);
    CollectLeaves(tree, node.right, data, box, leaves);
    box.lo[j] = saved_lo;
  }
}

// V_i / V of one tree for every parameter; nullopt-like empty result when
// the tree predicts a constant.
std::vector<double> TreeFractions(const std::vector<Node>& tree,
                                  const Data& data) {
  Box root;
  root.lo.assign(data.dim, 0.0);
  root.hi.assign(data.dim, 1.0);
  root.width.assign(data.dim, 1.0);
  root.allowed.resize(data.dim);
  for (int j = 0; j < data.dim; ++j) {
    if (data.categories[j] > 0) root.allowed[j].assign(data.categories[j], 1);
  }
  std::vector<Box> leaves;
  CollectLeaves(tree, 0, data, root, leaves);

  double mean = 0.0;
  for (const Box& leaf : leaves) mean += leaf.volume * leaf.value;
  double variance = 0.0;
  for (const Box& leaf : leaves) {
    variance += leaf.volume * (leaf.value - mean) * (leaf.value - mean);
  }
  if (!(variance > 1e-300)) return {};

  std::vector<double> fractions(data.dim, 0.0);
  for (int j = 0; j < data.dim; ++j) {
    double v_j = 0.0;
    if (data.categories[j] > 0) {
      // E[f | x_j = c] per category c, each of measure 1/K.
      const int k_count = data.categories[j];
      std::vector<double> g(k_count, 0.0);
      for (const Box& leaf : leaves) {
        const double weight = leaf.value * leaf.volume / leaf.width[j];
        for (int c = 0; c < k_count; ++c) {
          if (leaf.allowed[j][c]) g[c] += weight;
        }
      }
      for (double g_c : g) v_j += (g_c - mean) * (g_c - mean) / k_count;
    } else {
      // E[f | x_j] on each cell between consecutive split points of j,
      // summed over the leaves covering the cell (a difference array).
      std::vector<double> cuts = {0.0, 1.0};
      for (const Node& node : tree) {
        if (node.feature == j) cuts.push_back(node.threshold);
      }
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      std::vector<double> diff(cuts.size(), 0.0);
      auto cell = [&](double at) {
        return std::lower_bound(cuts.begin(), cuts.end(), at) - cuts.begin();
      };
      for (const Box& leaf : leaves) {
        const double weight = leaf.value * leaf.volume / leaf.width[j];
        diff[cell(leaf.lo[j])] += weight;
        diff[cell(leaf.hi[j])] -= weight;
      }
      double g = 0.0;
      for (size_t c = 0; c + 1 < cuts.size(); ++c) {
        g += diff[c];
        v_j += (cuts[c + 1] - cuts[c]) * (g - mean) * (g - mean);
      }
    }
    fractions[j] = std::clamp(v_j / variance, 0.0, 1.0);
  }
  return fractions;
}

}  // namespace

absl::StatusOr<ImportanceResult> FanovaImportance(
    const SearchSpace& space, const std::vector<Assignment>& points,
    const std::vector<double>& values, const ImportanceOptions& options) {
  if (points.size() != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("importance: ", points.size(), " points but ",
                     values.size(), " values"));
  }
  if (points.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "importance: needs at least 2 points, got ", points.size()));
  }
  if (options.num_trees < 1 || options.max_points_per_tree < 1 ||
      options.min_samples_split < 1 || options.min_samples_leaf < 1 ||
      options.max_depth < 1) {
    return absl::InvalidArgumentError(
        "importance: num_trees, max_points_per_tree, min_samples_split, "
        "min_samples_leaf and max_depth must be at least 1");
  }
  const int n = static_cast<int>(points.size());
  Data data;
  data.dim = space.dim();
  data.categories.assign(data.dim, 0);
  data.x.assign(data.dim, std::vector<double>(n));
  for (int j = 0; j < data.dim; ++j) {
    if (space.parameters()[j].type == ParameterType::kCategorical) {
      data.categories[j] =
          static_cast<int>(space.parameters()[j].categories.size());
    }
  }
  for (int p = 0; p < n; ++p) {
    if (absl::Status valid = space.Validate(points[p]); !valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("importance: point ", p, ": ", valid.message()));
    }
    // An inactive parameter has no coordinate: Encode's placeholder (0.5)
    // would be read as a value, and NaN is no category index.
    for (int j = 0; j < data.dim; ++j) {
      if (std::isnan(points[p][j])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "importance: point ", p, ": parameter \"",
            space.parameters()[j].name,
            "\" is inactive; fit over points where every parameter is "
            "active"));
      }
    }
    if (!std::isfinite(values[p])) {
      return absl::InvalidArgumentError(
          absl::StrCat("importance: value ", p, " is not finite: ", values[p]));
    }
    const Eigen::VectorXd unit = space.Encode(points[p]);
    for (int j = 0; j < data.dim; ++j) {
      data.x[j][p] = data.categories[j] > 0 ? points[p][j] : unit(j);
    }
  }
  data.y = values;

  ImportanceResult result;
  result.parameters.resize(data.dim);
  std::vector<double> sum(data.dim, 0.0), sum2(data.dim, 0.0);
  const int sample_size = std::min(n, options.max_points_per_tree);
  TreeBuilder builder(data, options);
  std::vector<int> sample(sample_size);
  for (int t = 0; t < options.num_trees; ++t) {
    SplitMix64 rng(MixSeeds(options.seed, static_cast<uint64_t>(t)));
    for (int& p : sample) p = static_cast<int>(rng.Next() % n);
    const std::vector<double> fractions =
        TreeFractions(builder.Build(sample), data);
    ++result.trees;
    if (fractions.empty()) continue;
    ++result.varying_trees;
    for (int j = 0; j < data.dim; ++j) {
      sum[j] += fractions[j];
      sum2[j] += fractions[j] * fractions[j];
    }
  }
  if (result.varying_trees > 0) {
    const double m = result.varying_trees;
    for (int j = 0; j < data.dim; ++j) {
      const double mean = sum[j] / m;
      result.parameters[j].fraction = mean;
      result.parameters[j].stddev =
          std::sqrt(std::max(0.0, sum2[j] / m - mean * mean));
    }
  }
  return result;
}

}  // namespace hypertune::optimizer
