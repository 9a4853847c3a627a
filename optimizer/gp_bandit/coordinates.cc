#include "optimizer/gp_bandit/coordinates.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

namespace hypertune::optimizer::gp_bandit {

Coordinates::Coordinates(const SearchSpace& space)
    : parent(space.parameters().size(), false) {
  if (space.conditional()) tree = TreeKernelGroups(space);
  for (const ParameterConfig& p : space.parameters()) {
    if (p.parent != kNoParent) parent[p.parent] = true;
  }
  for (const ParameterConfig& p : space.parameters()) {
    const bool is_cat = p.type == ParameterType::kCategorical;
    categories.push_back(is_cat ? static_cast<int>(p.categories.size()) : 0);
    categorical.push_back(is_cat);
    snapped.push_back(p.type == ParameterType::kInteger ||
                      p.type == ParameterType::kDiscrete);
  }
}

Eigen::VectorXd Coordinates::FromUnit(const Eigen::VectorXd& unit) const {
  Eigen::VectorXd x = unit;
  for (int j = 0; j < dim(); ++j) {
    if (categorical[j]) {
      x[j] = std::min(std::floor(std::clamp(unit[j], 0.0, 1.0) * categories[j]),
                      categories[j] - 1.0);
    }
  }
  return x;
}

Eigen::VectorXd Coordinates::ToUnit(const Eigen::VectorXd& x) const {
  Eigen::VectorXd unit = x;
  for (int j = 0; j < dim(); ++j) {
    if (categorical[j]) unit[j] = (x[j] + 0.5) / categories[j];
  }
  return unit;
}

Eigen::VectorXd Coordinates::FromAssignment(const SearchSpace& space,
                                            const Assignment& a) const {
  Eigen::VectorXd x = space.Encode(a);
  for (int j = 0; j < dim(); ++j) {
    if (categorical[j]) x[j] = std::isnan(a[j]) ? 0.0 : a[j];
  }
  return x;
}

std::unique_ptr<Kernel> Coordinates::MakeKernel(
    KernelStructure structure) const {
  if (!tree.empty()) return std::make_unique<TreeKernel>(tree);
  return MakeMixedKernel(categorical, structure);
}

void Coordinates::Snap(const SearchSpace& space, Eigen::VectorXd& x) const {
  if (std::none_of(snapped.begin(), snapped.end(), [](bool b) { return b; })) {
    return;
  }
  const Eigen::VectorXd centred = space.Encode(space.Decode(ToUnit(x)));
  for (int j = 0; j < dim(); ++j) {
    if (snapped[j]) x[j] = centred[j];
  }
}

double Distance2(const Coordinates& c, const Eigen::VectorXd& a,
                 const Eigen::VectorXd& b, const Eigen::VectorXd& weights,
                 double categorical_weight) {
  double d2 = 0;
  for (int j = 0; j < c.dim(); ++j) {
    if (c.categorical[j]) {
      d2 += a[j] != b[j] ? categorical_weight : 0.0;
    } else {
      d2 += weights[j] * (a[j] - b[j]) * (a[j] - b[j]);
    }
  }
  return d2;
}

namespace {

// The indices of the `count` smallest distances, in increasing index order.
std::vector<int> Smallest(std::vector<std::pair<double, int>> d, int count) {
  const int k = std::min<int>(count, static_cast<int>(d.size()));
  std::partial_sort(d.begin(), d.begin() + k, d.end());
  std::vector<int> out(k);
  for (int i = 0; i < k; ++i) out[i] = d[i].second;
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<int> Nearest(const Coordinates& c, const Eigen::MatrixXd& x,
                         int centre, int count, const Eigen::VectorXd& weights,
                         double categorical_weight) {
  const Eigen::VectorXd centre_x = x.row(centre).transpose();
  std::vector<std::pair<double, int>> d(x.rows());
  for (int i = 0; i < x.rows(); ++i) {
    d[i] = {Distance2(c, x.row(i).transpose(), centre_x, weights,
                      categorical_weight),
            i};
  }
  return Smallest(std::move(d), count);
}

std::vector<int> NearestToAny(const Coordinates& c, const Eigen::MatrixXd& x,
                              const std::vector<int>& centres, int count) {
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(c.dim());
  std::vector<std::pair<double, int>> d(x.rows());
  for (int i = 0; i < x.rows(); ++i) {
    double best = std::numeric_limits<double>::infinity();
    for (int k : centres) {
      best = std::min(best, Distance2(c, x.row(i).transpose(),
                                      x.row(k).transpose(), ones, 1.0));
    }
    d[i] = {best, i};
  }
  return Smallest(std::move(d), count);
}

Eigen::MatrixXd Rows(const Eigen::MatrixXd& x, const std::vector<int>& rows) {
  Eigen::MatrixXd out(rows.size(), x.cols());
  for (size_t i = 0; i < rows.size(); ++i) {
    out.row(static_cast<Eigen::Index>(i)) = x.row(rows[i]);
  }
  return out;
}

Eigen::VectorXd Entries(const Eigen::VectorXd& y,
                        const std::vector<int>& rows) {
  Eigen::VectorXd out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    out[static_cast<Eigen::Index>(i)] = y[rows[i]];
  }
  return out;
}

Eigen::MatrixXd ToMatrix(const std::vector<Eigen::VectorXd>& rows, int cols) {
  Eigen::MatrixXd m(rows.size(), cols);
  for (size_t i = 0; i < rows.size(); ++i) {
    m.row(static_cast<Eigen::Index>(i)) = rows[i].transpose();
  }
  return m;
}

int ArgMax(const Eigen::VectorXd& y) {
  Eigen::Index i = 0;
  y.maxCoeff(&i);
  return static_cast<int>(i);
}

std::vector<int> TopEntries(const Eigen::VectorXd& y, int count) {
  std::vector<int> order(y.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return y[a] > y[b]; });
  order.resize(std::min<size_t>(order.size(), static_cast<size_t>(count)));
  return order;
}

void KeepNearestBest(const Coordinates& c, int count, Eigen::MatrixXd& x,
                     Eigen::VectorXd& y) {
  if (x.rows() <= count) return;
  const std::vector<int> rows =
      Nearest(c, x, ArgMax(y), count, Eigen::VectorXd::Ones(c.dim()), 1.0);
  x = Rows(x, rows);
  y = Entries(y, rows);
}

Eigen::VectorXd NumericLengthscales(const Coordinates& c,
                                    const GpParams& params) {
  if (!c.tree.empty()) {
    return TreeKernelLengthscales(c.tree, params.kernel, c.dim());
  }
  Eigen::VectorXd l = Eigen::VectorXd::Ones(c.dim());
  int k = 0;
  for (int j = 0; j < c.dim(); ++j) {
    if (!c.categorical[j]) l[j] = std::exp(params.kernel[k++]);
  }
  return l;
}

GpPrior PriorFor(const Coordinates& c, KernelStructure structure) {
  return GpPrior::ForDimension(
      structure == KernelStructure::kAdditive ? 1 : c.dim());
}

Eigen::VectorXd PerturbationScale(const Coordinates& coords,
                                  const Eigen::VectorXd& lengthscales) {
  Eigen::VectorXd scale = Eigen::VectorXd::Zero(coords.dim());
  for (int j = 0; j < coords.dim(); ++j) {
    if (!coords.categorical[j]) {
      scale[j] = std::clamp(0.5 * lengthscales[j], 0.01, 0.5);
    }
  }
  return scale;
}

}  // namespace hypertune::optimizer::gp_bandit
