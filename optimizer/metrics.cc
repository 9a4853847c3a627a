#include "optimizer/metrics.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <vector>

namespace hypertune::optimizer {

MetricTable TabulateMetrics(const SuggestRequest& request) {
  assert(!request.metrics.empty());
  MetricTable t;
  for (size_t j = 0; j < request.metrics.size(); ++j) {
    (request.metrics[j].role == MetricRole::kObjective ? t.objectives
                                                       : t.constraints)
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
    const MetricConfig& m = request.metrics[t.constraints[c]];
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
      const double miss = std::max(0.0, std::max(m.lower - v, v - m.upper));
      if (miss > 0) {
        t.feasible[r] = false;
        t.violation[r] += miss;
      }
    }
  }
  return t;
}

bool IsPlainSingleObjective(const SuggestRequest& request) {
  return request.metrics.size() == 1 &&
         request.metrics[0].role == MetricRole::kObjective;
}

SuggestRequest WithoutMetrics(const SuggestRequest& request,
                              const MetricTable& table) {
  assert(IsPlainSingleObjective(request));
  SuggestRequest plain = request;
  plain.metrics.clear();
  for (size_t r = 0; r < table.rows.size(); ++r) {
    Observation& o = plain.history[table.rows[r]];
    o.value = table.objective_values(static_cast<Eigen::Index>(r), 0);
    o.values.clear();
  }
  return plain;
}

}  // namespace hypertune::optimizer
