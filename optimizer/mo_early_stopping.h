// The multi-objective and constraint math of the early-stopping rules
// (early_stopping.h): how a rung of trials with several objectives is
// ordered for ASHA's promotions, and the extrapolation that predicts a
// constraint metric at a trial's final step.
//
// Rung order (Schmucker et al., "Multi-objective asynchronous successive
// halving", 2021, MO-ASHA): the trials are sorted into non-dominated fronts
// (NSGA-II's ranks, pareto.h); front k comes before front k + 1, and each
// front is ordered within itself
//   - as an epsilon-net: the point best in the first objective, then, one at
//     a time, the point farthest (Euclidean, every objective scaled by its
//     range over the rung) from the points already taken. Every prefix of
//     this order (Gonzalez's farthest-point traversal) covers the front
//     within the distance to the next point taken, so the top 1/eta of a
//     rung spreads over the front instead of crowding one end of it;
//   - or by hypervolume contribution: greedy hypervolume subset selection
//     (pareto.h's GreedyHypervolumeSubset) over the front, the objectives
//     scaled to [0, 1] over the rung and the reference point at -0.1 in each.
// Ties go to the lower row.
//
// Constraint forecast: two least-squares lines through a constraint
// metric's latest points, against the step (a cost that grows by the step:
// seconds, tokens) and against log(1 + step) (a metric that levels off:
// accuracy, loss), each extrapolated to the final step x0 with its
// prediction interval
//   y0 +- t s sqrt(1 + 1/n + (x0 - mean x)^2 / Sxx),
// s^2 the residual variance over n - 2 degrees of freedom and t Student's
// quantile at 1 - 1e-4 for them (3183 with 3 points, 8.0 with 8). The line
// that fits better (the smaller s^2) decides: the trial is predicted to miss
// a bound only when its whole interval lies beyond it. Few or noisy points
// widen the interval instead of stopping anyone; a metric that follows a
// line exactly (a model size, seconds per step) is judged by it at once.
//
// Pure functions; thread-safe.
#ifndef HYPERTUNE_OPTIMIZER_MO_EARLY_STOPPING_H_
#define HYPERTUNE_OPTIMIZER_MO_EARLY_STOPPING_H_

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <Eigen/Core>

namespace hypertune::optimizer {

enum class FrontOrder { kEpsilonNet, kHypervolume };

// The rows of y (one row per trial, every objective maximized), best first:
// by front, each front in `order`. When `fronts` is not null it receives
// each row's front (0: non-dominated).
// REQUIRES: y.rows() >= 0, y.cols() >= 1, all finite
std::vector<int> OrderRung(const Eigen::MatrixXd& y, FrontOrder order,
                           std::vector<int>* fronts = nullptr);

// The epsilon-net order of all rows of `points` (already scaled).
std::vector<int> EpsilonNetOrder(const Eigen::MatrixXd& points);

struct ConstraintForecast {
  // The two fits' predictions at the final step and their half-widths.
  double linear = 0, linear_margin = 0;
  double log_linear = 0, log_linear_margin = 0;
  // Both intervals entirely beyond a bound.
  bool misses = false;
};

// The minimum points a forecast needs, and the most recent points it reads.
inline constexpr int kForecastMinPoints = 3;
inline constexpr int kForecastWindow = 8;

// The forecast at `final_step` of a constraint [lower, upper] from (step,
// value) points (the latest kForecastWindow finite ones); none with fewer
// than kForecastMinPoints distinct steps or when the last step is already at
// or past final_step.
std::optional<ConstraintForecast> ForecastConstraint(
    std::span<const std::pair<int64_t, double>> points, int64_t final_step,
    double lower, double upper);

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_MO_EARLY_STOPPING_H_
