#include "optimizer/gp_bandit/pick.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "optimizer/initial_design.h"

namespace hypertune::optimizer::gp_bandit {
namespace {

// A cost-aware initial design picks the cheapest of this many Sobol points
// per trial.
constexpr int kCostAwareDesignCandidates = 4;

}  // namespace

Assignment DesignPoint(const SearchSpace& space, const Coordinates& coords,
                       uint64_t seed, int64_t index,
                       const GaussianProcess* log_cost,
                       const AssignmentSet& taken) {
  const int d = coords.dim();
  Assignment a = space.Decode(InitialDesignPoint(d, seed, index));
  if (log_cost == nullptr || index == 0) return a;
  double cheapest = std::numeric_limits<double>::infinity();
  for (int j = 0; j < kCostAwareDesignCandidates; ++j) {
    Assignment candidate = space.Decode(
        InitialDesignPoint(d, seed, index * kCostAwareDesignCandidates + j));
    if (taken.contains(candidate)) continue;
    Eigen::VectorXd mean, var;
    log_cost->Predict(coords.FromAssignment(space, candidate).transpose(),
                      &mean, &var);
    if (mean[0] < cheapest) {
      cheapest = mean[0];
      a = std::move(candidate);
    }
  }
  return a;
}

Eigen::VectorXd PullTowardIncumbent(const Acquisition& acquisition,
                                    const Coordinates& coords,
                                    const SearchSpace& space,
                                    const Eigen::VectorXd& incumbent,
                                    const Eigen::VectorXd& x,
                                    double tolerance) {
  Eigen::VectorXd out = x;
  if (!(tolerance > 0)) return out;
  // Against x's value, so the total loss stays within the tolerance.
  const double floor = acquisition.Evaluate(x, nullptr) - tolerance;
  // An inactive coordinate is a placeholder that neither the model nor the
  // decoded assignment reads: moving it changes nothing, so it costs no
  // evaluation (a conditional space's points have few active ones).
  const std::vector<bool> active =
      space.conditional() ? space.Active(space.Decode(coords.ToUnit(x)))
                          : std::vector<bool>(coords.dim(), true);
  for (int j = 0; j < coords.dim(); ++j) {
    // A parent's value chooses which parameters exist: moving it is a move
    // to another subspace, not along a direction the model deems flat.
    if (out[j] == incumbent[j] || coords.parent[j] || !active[j]) continue;
    Eigen::VectorXd moved = out;
    moved[j] = incumbent[j];
    coords.Snap(space, moved);
    const double v = acquisition.Evaluate(moved, nullptr);
    if (std::isfinite(v) && v >= floor) out = std::move(moved);
  }
  return out;
}

std::optional<Assignment> PickNew(const std::vector<ScoredPoint>& ranked,
                                  const Acquisition& acquisition,
                                  const Coordinates& coords,
                                  const SearchSpace& space,
                                  const Eigen::VectorXd& incumbent,
                                  double tolerance,
                                  const AssignmentSet& taken) {
  for (const ScoredPoint& p : ranked) {
    if (!std::isfinite(p.value) || !p.x.allFinite()) continue;
    const Eigen::VectorXd px =
        incumbent.size() > 0 ? PullTowardIncumbent(acquisition, coords, space,
                                                   incumbent, p.x, tolerance)
                             : p.x;
    Assignment candidate = space.Decode(coords.ToUnit(px));
    // Fully pulled onto a known point: the acquisition's own pick.
    if (taken.contains(candidate)) {
      candidate = space.Decode(coords.ToUnit(p.x));
    }
    if (taken.contains(candidate)) continue;
    return candidate;
  }
  return std::nullopt;
}

}  // namespace hypertune::optimizer::gp_bandit
