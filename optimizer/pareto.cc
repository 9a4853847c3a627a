#include "optimizer/pareto.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <vector>

#include "optimizer/sobol.h"

namespace hypertune::optimizer {
namespace {

constexpr double kPi = 3.14159265358979324;

// Row indices sorted by decreasing value, lexicographically over the
// columns, so that a row's dominators all come before it.
std::vector<int> LexicographicDescending(const Eigen::MatrixXd& y,
                                         const std::vector<int>& rows) {
  std::vector<int> order = rows;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    for (Eigen::Index j = 0; j < y.cols(); ++j) {
      if (y(a, j) != y(b, j)) return y(a, j) > y(b, j);
    }
    return false;
  });
  return order;
}

// The non-dominated subset of `rows` (in increasing row order): in
// lexicographic order a row is dominated iff a row already on the front
// dominates it (a dominator off the front is itself dominated by a front
// row, which then dominates this one too).
std::vector<int> FrontOf(const Eigen::MatrixXd& y,
                         const std::vector<int>& rows) {
  std::vector<int> front;
  for (int i : LexicographicDescending(y, rows)) {
    const Eigen::VectorXd yi = y.row(i).transpose();
    bool dominated = false;
    for (int f : front) {
      if (Dominates(y.row(f).transpose(), yi)) {
        dominated = true;
        break;
      }
    }
    if (!dominated) front.push_back(i);
  }
  std::sort(front.begin(), front.end());
  return front;
}

// The hypervolume of `points` (each of size >= m) above r in the first m
// objectives. `points` may be reordered.
double HypervolumeOf(std::vector<Eigen::VectorXd>& points,
                     const Eigen::VectorXd& r, int m) {
  // Points not above r in every objective add nothing.
  std::erase_if(points, [&](const Eigen::VectorXd& p) {
    for (int j = 0; j < m; ++j) {
      if (!(p[j] > r[j])) return true;
    }
    return false;
  });
  if (points.empty()) return 0;
  if (m == 1) {
    double best = r[0];
    for (const Eigen::VectorXd& p : points) best = std::max(best, p[0]);
    return best - r[0];
  }
  if (m == 2) {
    // Sweep by decreasing first objective: each point adds the strip of
    // second-objective values above every point swept before it.
    std::sort(points.begin(), points.end(),
              [](const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
                return a[0] > b[0] || (a[0] == b[0] && a[1] > b[1]);
              });
    double volume = 0, covered = r[1];
    for (const Eigen::VectorXd& p : points) {
      if (p[1] > covered) {
        volume += (p[0] - r[0]) * (p[1] - covered);
        covered = p[1];
      }
    }
    return volume;
  }
  // Slices along objective m - 1: between consecutive levels of the sorted
  // values, the points at or above the upper level form an (m-1)-objective
  // set.
  std::sort(points.begin(), points.end(),
            [m](const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
              return a[m - 1] > b[m - 1];
            });
  double volume = 0;
  std::vector<Eigen::VectorXd> slice;
  for (size_t k = 0; k < points.size(); ++k) {
    const double next = k + 1 < points.size() ? points[k + 1][m - 1] : r[m - 1];
    const double depth = points[k][m - 1] - next;
    if (depth <= 0) continue;
    slice.assign(points.begin(), points.begin() + static_cast<long>(k) + 1);
    volume += depth * HypervolumeOf(slice, r, m - 1);
  }
  return volume;
}

}  // namespace

bool Dominates(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  assert(a.size() == b.size());
  bool better = false;
  for (Eigen::Index j = 0; j < a.size(); ++j) {
    if (a[j] < b[j]) return false;
    if (a[j] > b[j]) better = true;
  }
  return better;
}

std::vector<int> ParetoFrontRows(const Eigen::MatrixXd& y) {
  std::vector<int> rows(y.rows());
  std::iota(rows.begin(), rows.end(), 0);
  return FrontOf(y, rows);
}

std::vector<int> NondominatedRanks(const Eigen::MatrixXd& y) {
  std::vector<int> rank(y.rows(), -1);
  std::vector<int> left(y.rows());
  std::iota(left.begin(), left.end(), 0);
  for (int r = 0; !left.empty(); ++r) {
    const std::vector<int> front = FrontOf(y, left);
    for (int i : front) rank[i] = r;
    std::vector<int> rest;
    std::set_difference(left.begin(), left.end(), front.begin(), front.end(),
                        std::back_inserter(rest));
    left = std::move(rest);
  }
  return rank;
}

double Hypervolume(const Eigen::MatrixXd& y, const Eigen::VectorXd& r) {
  assert(y.cols() == r.size() && r.size() >= 1);
  if (y.rows() == 0) return 0;
  // Dominated points add nothing; dropping them first keeps the slices
  // small.
  const std::vector<int> front = ParetoFrontRows(y);
  std::vector<Eigen::VectorXd> points;
  points.reserve(front.size());
  for (int i : front) points.push_back(y.row(i).transpose());
  return HypervolumeOf(points, r, static_cast<int>(r.size()));
}

double HypervolumeScalarization(const Eigen::VectorXd& y,
                                const Eigen::VectorXd& r,
                                const Eigen::VectorXd& lambda) {
  assert(y.size() == r.size() && r.size() == lambda.size());
  double t = std::numeric_limits<double>::infinity();
  for (Eigen::Index i = 0; i < y.size(); ++i) {
    t = std::min(t, (y[i] - r[i]) / lambda[i]);
  }
  return std::pow(std::max(t, 0.0), static_cast<double>(y.size()));
}

double HypervolumeScalarizationConstant(int m) {
  assert(m >= 1);
  return std::pow(kPi, m / 2.0) / (std::pow(2.0, m) * std::tgamma(m / 2.0 + 1));
}

Eigen::MatrixXd QuasiNormalSamples(int m, int count, uint64_t seed) {
  assert(m >= 1 && count >= 1);
  const int pairs = (m + 1) / 2;
  const SobolSequence sobol(2 * pairs, seed);
  Eigen::MatrixXd out(count, m);
  for (int k = 0; k < count; ++k) {
    const Eigen::VectorXd u = sobol.Point(k);
    for (int p = 0; p < pairs; ++p) {
      // 1 - u lies in (0, 1], so the logarithm is finite.
      const double radius = std::sqrt(-2 * std::log(1 - u[2 * p]));
      const double angle = 2 * kPi * u[2 * p + 1];
      out(k, 2 * p) = radius * std::cos(angle);
      if (2 * p + 1 < m) out(k, 2 * p + 1) = radius * std::sin(angle);
    }
  }
  return out;
}

Eigen::MatrixXd PositiveSphereDirections(int m, int count, uint64_t seed) {
  Eigen::MatrixXd out = QuasiNormalSamples(m, count, seed).cwiseAbs();
  for (int k = 0; k < count; ++k) {
    const double norm = out.row(k).norm();
    if (norm > 0) {
      out.row(k) /= norm;
    } else {
      out.row(k).setConstant(1 / std::sqrt(static_cast<double>(m)));
    }
  }
  // Strictly positive, so that s_lambda divides by no zero.
  return out.cwiseMax(1e-12);
}

std::vector<int> GreedyHypervolumeSubset(const Eigen::MatrixXd& y,
                                         const Eigen::VectorXd& r, int count) {
  assert(count >= 0 && count <= y.rows());
  std::vector<int> chosen;
  std::vector<bool> taken(y.rows(), false);
  std::vector<Eigen::VectorXd> subset;
  for (int step = 0; step < count; ++step) {
    int best = -1;
    double best_volume = -1;
    for (Eigen::Index i = 0; i < y.rows(); ++i) {
      if (taken[i]) continue;
      std::vector<Eigen::VectorXd> with = subset;
      with.push_back(y.row(i).transpose());
      const double v = HypervolumeOf(with, r, static_cast<int>(r.size()));
      if (v > best_volume) {
        best_volume = v;
        best = static_cast<int>(i);
      }
    }
    taken[best] = true;
    chosen.push_back(best);
    subset.push_back(y.row(best).transpose());
  }
  return chosen;
}

Eigen::VectorXd InferReferencePoint(const Eigen::MatrixXd& front,
                                    double min_margin) {
  assert(front.rows() >= 1);
  const Eigen::VectorXd nadir = front.colwise().minCoeff().transpose();
  const Eigen::VectorXd ideal = front.colwise().maxCoeff().transpose();
  return nadir - (0.1 * (ideal - nadir)).cwiseMax(min_margin);
}

}  // namespace hypertune::optimizer
