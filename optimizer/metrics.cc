#include "optimizer/metrics.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "optimizer/pareto.h"

namespace hypertune::optimizer {

std::vector<MetricConfig> MetricsOf(const SuggestRequest& request) {
  if (request.metrics.empty()) return {MetricConfig{}};
  return request.metrics;
}

MetricTable TabulateMetrics(const SuggestRequest& request) {
  const std::vector<MetricConfig> metrics = MetricsOf(request);
  MetricTable t;
  for (size_t j = 0; j < metrics.size(); ++j) {
    (metrics[j].role == MetricRole::kObjective ? t.objectives : t.constraints)
        .push_back(static_cast<int>(j));
  }
  for (size_t i = 0; i < request.history.size(); ++i) {
    if (request.history[i].outcome == Outcome::kCompleted) {
      t.rows.push_back(static_cast<int>(i));
    }
  }
  const int n = static_cast<int>(t.rows.size());
  auto raw = [&](int row, int metric) {
    return request.history[t.rows[row]].values[metric];
  };
  t.objective_values.resize(n, static_cast<Eigen::Index>(t.objectives.size()));
  for (size_t c = 0; c < t.objectives.size(); ++c) {
    double worst = std::numeric_limits<double>::infinity();
    for (int r = 0; r < n; ++r) {
      const double v = raw(r, t.objectives[c]);
      if (std::isfinite(v)) worst = std::min(worst, v);
    }
    if (!std::isfinite(worst)) worst = 0;
    for (int r = 0; r < n; ++r) {
      const double v = raw(r, t.objectives[c]);
      t.objective_values(r, c) = std::isfinite(v) ? v : worst;
    }
  }
  t.constraint_values.resize(n,
                             static_cast<Eigen::Index>(t.constraints.size()));
  t.feasible.assign(n, true);
  t.violation.assign(n, 0.0);
  for (size_t c = 0; c < t.constraints.size(); ++c) {
    const MetricConfig& m = metrics[t.constraints[c]];
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (int r = 0; r < n; ++r) {
      const double v = raw(r, t.constraints[c]);
      if (std::isfinite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
    if (lo > hi) lo = hi = 0;
    for (int r = 0; r < n; ++r) {
      const double v = raw(r, t.constraints[c]);
      t.constraint_values(r, c) = std::clamp(v, lo, hi);
      // (Written out: lower - v is NaN for v = lower = -infinity.)
      const double miss = v < m.lower   ? m.lower - v
                          : v > m.upper ? v - m.upper
                                        : 0.0;
      if (miss > 0) {
        t.feasible[r] = false;
        t.violation[r] += miss;
      }
    }
  }
  return t;
}

std::vector<int> PreferenceOrder(const MetricTable& table, int keep) {
  assert(keep >= 0);
  const int n = static_cast<int>(table.rows.size());
  std::vector<int> feasible, infeasible;
  for (int r = 0; r < n; ++r) {
    (table.feasible[r] ? feasible : infeasible).push_back(r);
  }
  Eigen::MatrixXd values(feasible.size(), table.objective_values.cols());
  for (size_t k = 0; k < feasible.size(); ++k) {
    values.row(static_cast<Eigen::Index>(k)) =
        table.objective_values.row(feasible[k]);
  }
  const std::vector<int> rank = NondominatedRanks(values);
  std::vector<int> order(feasible.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return rank[a] < rank[b]; });
  // The rank that straddles `keep`: its members by greedy hypervolume.
  size_t start = 0;
  while (start < order.size()) {
    size_t end = start;
    while (end < order.size() && rank[order[end]] == rank[order[start]]) ++end;
    if (static_cast<int>(start) < keep && static_cast<int>(end) > keep) {
      const std::vector<int> members(order.begin() + static_cast<long>(start),
                                     order.begin() + static_cast<long>(end));
      Eigen::MatrixXd y(members.size(), values.cols());
      for (size_t k = 0; k < members.size(); ++k) {
        y.row(static_cast<Eigen::Index>(k)) = values.row(members[k]);
      }
      const std::vector<int> chosen = GreedyHypervolumeSubset(
          y, InferReferencePoint(y, 1e-12), keep - static_cast<int>(start));
      std::vector<bool> picked(members.size(), false);
      size_t next = start;
      for (int k : chosen) {
        order[next++] = members[k];
        picked[k] = true;
      }
      for (size_t k = 0; k < members.size(); ++k) {
        if (!picked[k]) order[next++] = members[k];
      }
      break;
    }
    start = end;
  }
  std::vector<int> out;
  out.reserve(n);
  for (int k : order) out.push_back(feasible[k]);
  std::stable_sort(infeasible.begin(), infeasible.end(), [&](int a, int b) {
    return table.violation[a] < table.violation[b];
  });
  out.insert(out.end(), infeasible.begin(), infeasible.end());
  return out;
}

bool IsPlainSingleObjective(const SuggestRequest& request) {
  return request.metrics.empty() ||
         (request.metrics.size() == 1 &&
          request.metrics[0].role == MetricRole::kObjective);
}

}  // namespace hypertune::optimizer
