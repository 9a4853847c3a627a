#include "optimizer/tpe/parzen_estimator.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

namespace hypertune::optimizer::tpe {
namespace {

constexpr double kLogSqrt2Pi = 0.918938533204672742;
constexpr double kInvSqrt2 = 0.707106781186547524;
// Scott's-rule factor of the multivariate bandwidth (BOHB's and Optuna's).
constexpr double kSigma0 = 0.2;

// log Phi(z). erfc is accurate down to its underflow near z = -37; below
// -30 the asymptotic series (Abramowitz and Stegun 26.2.12) is used.
double LogNormalCdf(double z) {
  if (z > -30.0) return std::log(0.5 * std::erfc(-z * kInvSqrt2));
  const double z2 = z * z;
  return -0.5 * z2 - std::log(-z) - kLogSqrt2Pi +
         std::log1p(-1.0 / z2 + 3.0 / (z2 * z2));
}

double LogSumExp(const std::vector<double>& v) {
  double m = -std::numeric_limits<double>::infinity();
  for (double x : v) m = std::max(m, x);
  if (!std::isfinite(m)) return m;
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}

// The univariate bandwidths of `mu` (the prior's centre last): the larger
// distance to a sorted neighbour, bounds 0 and 1 at the ends, the outermost
// centres taking their inner neighbour's distance.
std::vector<double> NeighbourBandwidths(const std::vector<double>& mu) {
  const size_t m = mu.size();
  std::vector<size_t> order(m);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return mu[a] < mu[b]; });
  std::vector<double> s(m + 2);  // Sorted centres with the bounds.
  s[0] = 0.0;
  for (size_t k = 0; k < m; ++k) s[k + 1] = mu[order[k]];
  s[m + 1] = 1.0;
  std::vector<double> sigma(m);
  for (size_t k = 0; k < m; ++k) {
    double w = std::max(s[k + 1] - s[k], s[k + 2] - s[k + 1]);
    if (m >= 2 && k == 0) w = s[2] - s[1];
    if (m >= 2 && k == m - 1) w = s[m] - s[m - 1];
    sigma[order[k]] = w;
  }
  return sigma;
}

}  // namespace

double LogGaussMass(double a, double b) {
  assert(a <= b);
  if (a == b) return -std::numeric_limits<double>::infinity();
  // Reflect so that the interval's lower tail is the small one.
  if (a > 0) {
    const double t = a;
    a = -b;
    b = -t;
  }
  if (b <= 0) {
    // Both in the left tail: Phi(b) (1 - Phi(a) / Phi(b)).
    const double lb = LogNormalCdf(b), la = LogNormalCdf(a);
    return lb + std::log1p(-std::exp(la - lb));
  }
  // a <= 0 < b: 1 - Phi(a) - Phi(-b), both tails small.
  return std::log1p(-(std::exp(LogNormalCdf(a)) + std::exp(LogNormalCdf(-b))));
}

std::pair<double, double> CellOf(const ParameterConfig& p, double u) {
  switch (p.type) {
    case ParameterType::kInteger: {
      const bool log = p.scale == Scale::kLog;
      const double lo = log ? std::log(p.min - 0.5) : p.min - 0.5;
      const double hi = log ? std::log(p.max + 0.5) : p.max + 0.5;
      double t = lo + u * (hi - lo);
      if (log) t = std::exp(t);
      const double k = std::clamp(std::round(t), p.min, p.max);
      auto unit = [&](double v) {
        return std::clamp(((log ? std::log(v) : v) - lo) / (hi - lo), 0.0, 1.0);
      };
      return {unit(k - 0.5), unit(k + 0.5)};
    }
    case ParameterType::kDiscrete: {
      const size_t n = p.values.size();
      const size_t bin =
          std::min(static_cast<size_t>(u * static_cast<double>(n)), n - 1);
      return {static_cast<double>(bin) / static_cast<double>(n),
              static_cast<double>(bin + 1) / static_cast<double>(n)};
    }
    default:
      return {u, u};
  }
}

ParzenEstimator::ParzenEstimator(const SearchSpace& space,
                                 std::vector<Dimension> dims,
                                 const std::vector<GroupPoint>& points,
                                 const std::vector<double>& weights,
                                 const ParzenOptions& options)
    : space_(space), dims_(std::move(dims)) {
  assert(points.size() == weights.size());
  const size_t n = points.size();
  const size_t m = n + 1;  // With the prior, last.
  weight_ = weights;
  weight_.push_back(options.prior_weight);
  const double total = std::accumulate(weight_.begin(), weight_.end(), 0.0);
  log_weight_.resize(m);
  for (size_t k = 0; k < m; ++k) {
    weight_[k] /= total;
    log_weight_[k] = std::log(weight_[k]);
  }
  const double min_sigma = 1.0 / std::min(100.0, static_cast<double>(m) + 1);
  const double scott =
      kSigma0 * std::pow(static_cast<double>(std::max<size_t>(n, 1)),
                         -1.0 / (static_cast<double>(dims_.size()) + 4.0));
  numeric_.resize(dims_.size());
  categorical_.resize(dims_.size());
  for (size_t j = 0; j < dims_.size(); ++j) {
    const Dimension& dim = dims_[j];
    if (dim.categories > 0) {
      CategoricalDim& c = categorical_[j];
      const int k = dim.categories;
      c.categories = k;
      c.log_p.assign(m * static_cast<size_t>(k), 0.0);
      const double smooth = options.prior_weight / static_cast<double>(n + 1);
      for (size_t i = 0; i < n; ++i) {
        const int observed = static_cast<int>(points[i][j]);
        assert(observed >= 0 && observed < k);
        const double row_total = 1.0 + smooth * k;
        for (int v = 0; v < k; ++v) {
          c.log_p[i * k + v] =
              std::log(((v == observed ? 1.0 : 0.0) + smooth) / row_total);
        }
      }
      for (int v = 0; v < k; ++v) c.log_p[n * k + v] = -std::log(k);
      continue;
    }
    NumericDim& d = numeric_[j];
    const ParameterConfig& p = space_.parameters()[dim.parameter];
    d.cells =
        p.type == ParameterType::kInteger || p.type == ParameterType::kDiscrete;
    d.mu.resize(m);
    for (size_t i = 0; i < n; ++i) d.mu[i] = points[i][j];
    d.mu[n] = 0.5;
    d.sigma = options.multivariate ? std::vector<double>(m, scott)
                                   : NeighbourBandwidths(d.mu);
    for (double& s : d.sigma) s = std::clamp(s, min_sigma, 1.0);
    d.sigma[n] = 1.0;
    d.log_mass.resize(m);
    d.log_norm.resize(m);
    for (size_t i = 0; i < m; ++i) {
      d.log_mass[i] =
          LogGaussMass(-d.mu[i] / d.sigma[i], (1.0 - d.mu[i]) / d.sigma[i]);
      d.log_norm[i] = kLogSqrt2Pi + d.log_mass[i] +
                      (options.bandwidth_weights ? 0.0 : std::log(d.sigma[i]));
    }
  }
}

GroupPoint ParzenEstimator::Sample(SplitMix64& rng) const {
  double u = rng.NextUnit();
  size_t k = 0;
  while (k + 1 < weight_.size() && u >= weight_[k]) u -= weight_[k++];
  GroupPoint x(dims_.size());
  for (size_t j = 0; j < dims_.size(); ++j) {
    if (dims_[j].categories > 0) {
      const CategoricalDim& c = categorical_[j];
      double r = rng.NextUnit();
      int v = 0;
      for (; v + 1 < c.categories; ++v) {
        const double p = std::exp(c.log_p[k * c.categories + v]);
        if (r < p) break;
        r -= p;
      }
      x[j] = v;
      continue;
    }
    const NumericDim& d = numeric_[j];
    // Rejection: every component has its centre in [0,1] and a width of at
    // most 1, so at least a third of its mass lies inside.
    double value = std::clamp(d.mu[k], 0.0, 1.0);
    for (int attempt = 0; attempt < 100; ++attempt) {
      const double t = d.mu[k] + d.sigma[k] * rng.NextNormal();
      if (t >= 0.0 && t <= 1.0) {
        value = t;
        break;
      }
    }
    x[j] = value;
  }
  return x;
}

double ParzenEstimator::LogPdf(const GroupPoint& x) const {
  const size_t m = log_weight_.size();
  std::vector<double> terms(log_weight_);
  for (size_t j = 0; j < dims_.size(); ++j) {
    if (dims_[j].categories > 0) {
      const CategoricalDim& c = categorical_[j];
      const int v = static_cast<int>(x[j]);
      for (size_t k = 0; k < m; ++k) terms[k] += c.log_p[k * c.categories + v];
      continue;
    }
    const NumericDim& d = numeric_[j];
    if (d.cells) {
      const auto [lo, hi] =
          CellOf(space_.parameters()[dims_[j].parameter], x[j]);
      for (size_t k = 0; k < m; ++k) {
        terms[k] += LogGaussMass((lo - d.mu[k]) / d.sigma[k],
                                 (hi - d.mu[k]) / d.sigma[k]) -
                    d.log_mass[k];
      }
    } else {
      for (size_t k = 0; k < m; ++k) {
        const double z = (x[j] - d.mu[k]) / d.sigma[k];
        terms[k] += -0.5 * z * z - d.log_norm[k];
      }
    }
  }
  return LogSumExp(terms);
}

}  // namespace hypertune::optimizer::tpe
