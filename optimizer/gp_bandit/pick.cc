#include "optimizer/gp_bandit/pick.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "optimizer/initial_design.h"
#include "optimizer/sobol.h"

namespace hypertune::optimizer::gp_bandit {
namespace {

// A cost-aware initial design picks the cheapest of this many Sobol points
// per trial.
constexpr int kCostAwareDesignCandidates = 4;
// The share of its distance to the incumbent's value that a pulled double
// keeps (PullTowardIncumbent).
constexpr double kPullResidual = 0.1;

}  // namespace

Assignment DesignPoint(const SearchSpace& space, const Coordinates& coords,
                       uint64_t seed, int64_t index,
                       const GaussianProcess* log_cost,
                       const AssignmentSet& taken) {
  const int d = coords.dim();
  Assignment a = space.Decode(InitialDesignPoint(d, seed, index));
  if (log_cost != nullptr && index > 0) {
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
  }
  if (!taken.contains(a)) return a;
  std::optional<Assignment> untried = UntriedPoint(space, seed, index, taken);
  return untried ? *std::move(untried) : a;
}

std::optional<std::vector<Assignment>> FiniteSpacePoints(
    const SearchSpace& space, int64_t limit) {
  // Each parameter's values, in the assignment's units.
  std::vector<std::vector<double>> values(space.dim());
  int64_t count = 1;
  for (int j = 0; j < space.dim(); ++j) {
    const ParameterConfig& p = space.parameters()[j];
    std::vector<double>& v = values[j];
    switch (p.type) {
      case ParameterType::kDouble:
        if (p.min != p.max) return std::nullopt;
        v = {p.min};
        break;
      case ParameterType::kInteger:
        if (p.max - p.min + 1 > static_cast<double>(limit)) {
          return std::nullopt;
        }
        for (double k = p.min; k <= p.max; ++k) v.push_back(k);
        break;
      case ParameterType::kDiscrete:
        v = p.values;
        break;
      case ParameterType::kCategorical:
        for (size_t c = 0; c < p.categories.size(); ++c) {
          v.push_back(static_cast<double>(c));
        }
        break;
    }
    count *= static_cast<int64_t>(v.size());
    if (count > limit) return std::nullopt;
  }
  // The product, odometer order; inactive parameters set to kInactive,
  // which folds the combinations that differ only there into one.
  AssignmentSet points;
  std::vector<size_t> digit(space.dim(), 0);
  for (int64_t k = 0; k < count; ++k) {
    Assignment a(space.dim());
    for (int j = 0; j < space.dim(); ++j) a[j] = values[j][digit[j]];
    if (space.conditional()) {
      const std::vector<bool> active = space.Active(a);
      for (int j = 0; j < space.dim(); ++j) {
        if (!active[j]) a[j] = kInactive;
      }
    }
    points.insert(std::move(a));
    for (int j = space.dim() - 1; j >= 0; --j) {
      if (++digit[j] < values[j].size()) break;
      digit[j] = 0;
    }
  }
  return std::vector<Assignment>(points.begin(), points.end());
}

std::optional<Assignment> UntriedPoint(const SearchSpace& space, uint64_t seed,
                                       int64_t index,
                                       const AssignmentSet& taken) {
  const SobolSequence sobol(space.dim(), seed);
  constexpr int64_t kEnd = int64_t{1} << SobolSequence::kBits;
  for (int64_t k = 0; k < kUntriedSobolTries && index + k < kEnd; ++k) {
    Assignment a = space.Decode(sobol.Point(index + k));
    if (!taken.contains(a)) return a;
  }
  const std::optional<std::vector<Assignment>> all =
      FiniteSpacePoints(space, kMaxEnumeratedPoints);
  if (!all) return std::nullopt;
  // The untried point farthest from every taken one (maximin), first in
  // enumeration order among equals.
  std::vector<Eigen::VectorXd> known;
  for (const Assignment& a : taken) known.push_back(space.Encode(a));
  const Assignment* farthest = nullptr;
  double farthest_d2 = -1;
  for (const Assignment& a : *all) {
    if (taken.contains(a)) continue;
    const Eigen::VectorXd u = space.Encode(a);
    double d2 = std::numeric_limits<double>::infinity();
    for (const Eigen::VectorXd& k : known) {
      d2 = std::min(d2, (u - k).squaredNorm());
    }
    if (d2 > farthest_d2) {
      farthest_d2 = d2;
      farthest = &a;
    }
  }
  if (farthest == nullptr) return std::nullopt;
  return *farthest;
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
    // A double goes most of the way, not onto the incumbent's value: a copy
    // would be copied again from the next incumbent, so that one value
    // spreads through the study (a learning rate in 7 of 16 trials), and
    // the model learns nothing along that dimension from the trials that
    // share it.
    const bool continuous = !coords.categorical[j] && !coords.snapped[j];
    moved[j] = continuous
                   ? incumbent[j] + kPullResidual * (out[j] - incumbent[j])
                   : incumbent[j];
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
  // Every point found is taken: the best untried point of a small finite
  // space, by enumeration.
  const std::optional<std::vector<Assignment>> all =
      FiniteSpacePoints(space, kMaxEnumeratedPoints);
  if (!all) return std::nullopt;
  std::vector<const Assignment*> untried;
  for (const Assignment& a : *all) {
    if (!taken.contains(a)) untried.push_back(&a);
  }
  if (untried.empty()) return std::nullopt;
  Eigen::MatrixXd xs(untried.size(), coords.dim());
  for (size_t k = 0; k < untried.size(); ++k) {
    xs.row(static_cast<Eigen::Index>(k)) =
        coords.FromAssignment(space, *untried[k]).transpose();
  }
  const Eigen::VectorXd values = acquisition.EvaluateBatch(xs);
  int best = -1;
  for (int k = 0; k < values.size(); ++k) {
    if (std::isfinite(values[k]) && (best < 0 || values[k] > values[best])) {
      best = k;
    }
  }
  if (best < 0) return std::nullopt;
  return *untried[static_cast<size_t>(best)];
}

}  // namespace hypertune::optimizer::gp_bandit
