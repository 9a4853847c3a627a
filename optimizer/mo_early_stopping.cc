#include "optimizer/mo_early_stopping.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "optimizer/pareto.h"

namespace hypertune::optimizer {
namespace {

// Each column scaled by its range to [0, 1] (a column of one value to 0).
Eigen::MatrixXd Scaled(const Eigen::MatrixXd& y) {
  Eigen::MatrixXd out = y;
  for (Eigen::Index j = 0; j < y.cols(); ++j) {
    const double lo = y.col(j).minCoeff();
    const double range = y.col(j).maxCoeff() - lo;
    out.col(j) = (y.col(j).array() - lo) / (range > 0 ? range : 1.0);
  }
  return out;
}

struct Fit {
  double prediction, margin, residual_variance;
};

// Student's t quantile at 1 - 1e-4 for 1 to 6 degrees of freedom (at most
// kForecastWindow - 2).
double TQuantile(int dof) {
  static constexpr double kT[] = {3183.1, 70.70, 22.20, 13.03, 9.678, 8.025};
  assert(dof >= 1 && dof <= 6);
  return kT[dof - 1];
}

// Least squares y = a + b x through `xy`, at x0, with its prediction
// interval's half-width (TQuantile(n - 2) standard errors).
std::optional<Fit> LineAt(const std::vector<std::pair<double, double>>& xy,
                          double x0) {
  const double n = static_cast<double>(xy.size());
  double mx = 0, my = 0;
  for (const auto& [x, y] : xy) {
    mx += x;
    my += y;
  }
  mx /= n;
  my /= n;
  double sxx = 0, sxy = 0;
  for (const auto& [x, y] : xy) {
    sxx += (x - mx) * (x - mx);
    sxy += (x - mx) * (y - my);
  }
  if (!(sxx > 0)) return std::nullopt;
  const double b = sxy / sxx;
  const double a = my - b * mx;
  double ssr = 0;
  for (const auto& [x, y] : xy) ssr += (y - a - b * x) * (y - a - b * x);
  const double variance = ssr / (n - 2);
  const double se =
      std::sqrt(variance * (1.0 + 1.0 / n + (x0 - mx) * (x0 - mx) / sxx));
  return Fit{a + b * x0, TQuantile(static_cast<int>(xy.size()) - 2) * se,
             variance};
}

bool Beyond(const Fit& fit, double lower, double upper) {
  return fit.prediction - fit.margin > upper ||
         fit.prediction + fit.margin < lower;
}

}  // namespace

std::vector<int> EpsilonNetOrder(const Eigen::MatrixXd& points) {
  const Eigen::Index n = points.rows();
  std::vector<int> order;
  if (n == 0) return order;
  // First: the best in the first objective (ties: the lower row).
  Eigen::Index first = 0;
  for (Eigen::Index i = 1; i < n; ++i) {
    if (points(i, 0) > points(first, 0)) first = i;
  }
  std::vector<double> distance(n, std::numeric_limits<double>::infinity());
  std::vector<bool> taken(n, false);
  Eigen::Index next = first;
  for (Eigen::Index step = 0; step < n; ++step) {
    taken[next] = true;
    order.push_back(static_cast<int>(next));
    Eigen::Index farthest = -1;
    for (Eigen::Index i = 0; i < n; ++i) {
      if (taken[i]) continue;
      distance[i] =
          std::min(distance[i], (points.row(i) - points.row(next)).norm());
      if (farthest < 0 || distance[i] > distance[farthest]) farthest = i;
    }
    next = farthest;
  }
  return order;
}

std::vector<int> OrderRung(const Eigen::MatrixXd& y, FrontOrder order,
                           std::vector<int>* fronts) {
  assert(y.cols() >= 1);
  const std::vector<int> ranks = NondominatedRanks(y);
  if (fronts != nullptr) *fronts = ranks;
  std::vector<int> out;
  if (y.rows() == 0) return out;
  const Eigen::MatrixXd scaled = Scaled(y);
  const int most = *std::max_element(ranks.begin(), ranks.end());
  for (int front = 0; front <= most; ++front) {
    std::vector<int> rows;
    for (int i = 0; i < static_cast<int>(ranks.size()); ++i) {
      if (ranks[i] == front) rows.push_back(i);
    }
    Eigen::MatrixXd points(rows.size(), y.cols());
    for (size_t k = 0; k < rows.size(); ++k)
      points.row(k) = scaled.row(rows[k]);
    std::vector<int> within;
    if (order == FrontOrder::kEpsilonNet) {
      within = EpsilonNetOrder(points);
    } else {
      const Eigen::VectorXd r = Eigen::VectorXd::Constant(y.cols(), -0.1);
      within =
          GreedyHypervolumeSubset(points, r, static_cast<int>(points.rows()));
    }
    for (int k : within) out.push_back(rows[k]);
  }
  return out;
}

std::optional<ConstraintForecast> ForecastConstraint(
    std::span<const std::pair<int64_t, double>> points, int64_t final_step,
    double lower, double upper) {
  std::vector<std::pair<int64_t, double>> kept;
  for (auto it = points.rbegin();
       it != points.rend() && static_cast<int>(kept.size()) < kForecastWindow;
       ++it) {
    if (std::isfinite(it->second)) kept.push_back(*it);
  }
  if (kept.empty() || kept.front().first >= final_step) return std::nullopt;
  int distinct = 0;
  int64_t previous = std::numeric_limits<int64_t>::min();
  std::vector<std::pair<int64_t, double>> sorted(kept.rbegin(), kept.rend());
  std::stable_sort(
      sorted.begin(), sorted.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [step, value] : sorted) {
    if (step != previous) ++distinct;
    previous = step;
  }
  if (distinct < kForecastMinPoints) return std::nullopt;
  std::vector<std::pair<double, double>> linear, logarithmic;
  for (const auto& [step, value] : sorted) {
    const double x = static_cast<double>(std::max<int64_t>(step, 0));
    linear.emplace_back(x, value);
    logarithmic.emplace_back(std::log1p(x), value);
  }
  const double x0 = static_cast<double>(final_step);
  const std::optional<Fit> a = LineAt(linear, x0);
  const std::optional<Fit> b = LineAt(logarithmic, std::log1p(x0));
  if (!a || !b) return std::nullopt;
  ConstraintForecast forecast;
  forecast.linear = a->prediction;
  forecast.linear_margin = a->margin;
  forecast.log_linear = b->prediction;
  forecast.log_linear_margin = b->margin;
  // The line that fits better (ties: the linear one) decides.
  const bool linear_fits = a->residual_variance <= b->residual_variance;
  forecast.misses = Beyond(linear_fits ? *a : *b, lower, upper);
  return forecast;
}

}  // namespace hypertune::optimizer
