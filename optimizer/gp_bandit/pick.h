// GP_BANDIT's first and last stages for one point: the initial design's
// point (before there are models), and the pick among the acquisition
// optimizer's ranked points. Every point they return is new, compared in
// the space's canonical form (integers and categories decoded, inactive
// parameters absent), unless every point of a finite space is taken.
// Pure functions; thread-safe.
#ifndef HYPERTUNE_OPTIMIZER_GP_BANDIT_PICK_H_
#define HYPERTUNE_OPTIMIZER_GP_BANDIT_PICK_H_

#include <cstdint>
#include <optional>
#include <vector>

#include <Eigen/Core>

#include "optimizer/acquisition.h"
#include "optimizer/acquisition_optimizer.h"
#include "optimizer/gp.h"
#include "optimizer/gp_bandit/coordinates.h"
#include "optimizer/search_space.h"
#include "optimizer/suggester.h"

namespace hypertune::optimizer::gp_bandit {

// Initial design point number `index` (initial_design.h). Cost-aware (a
// model of log cost given) and past the centre: the cheapest of the next
// few Sobol points not yet taken, so that the design does not spend a
// fixed share of the budget blind (a fifth to a half, with 10 trials of
// 50, on dear points). A point already taken (on a small discrete space
// the centre's cell recurs in the Sobol sequence) gives way to
// UntriedPoint(index).
Assignment DesignPoint(const SearchSpace& space, const Coordinates& coords,
                       uint64_t seed, int64_t index,
                       const GaussianProcess* log_cost,
                       const AssignmentSet& taken);

// Every assignment of a finite space (integers, discrete values,
// categories, and doubles with min == max), in canonical form, if there
// are at most `limit`; nullopt for an infinite or larger space.
std::optional<std::vector<Assignment>> FiniteSpacePoints(
    const SearchSpace& space, int64_t limit);

// Finite spaces of at most this many points are enumerated when the
// acquisition optimizer's points are all taken.
inline constexpr int64_t kMaxEnumeratedPoints = 4096;

// A point not in `taken`: the first of scrambled Sobol points index,
// index + 1, ... (at most kUntriedSobolTries of them) that is new; then, on
// a finite space of at most kMaxEnumeratedPoints, the untried point
// farthest from the taken ones (unit-cube distance); nullopt if every
// point is taken (or none was found in a larger space).
std::optional<Assignment> UntriedPoint(const SearchSpace& space, uint64_t seed,
                                       int64_t index,
                                       const AssignmentSet& taken);
inline constexpr int kUntriedSobolTries = 64;

// Moves x's coordinates, one dimension at a time in index order, toward the
// incumbent's wherever the acquisition stays within `tolerance` of its
// value at x: integers, discrete values and categories onto the
// incumbent's, doubles nine tenths of the way, so that a double is never a
// copy of the incumbent's. Returns the moved point (x itself if tolerance
// <= 0).
// With few points in many dimensions the fit deems most dimensions
// irrelevant (long lengthscales) and the acquisition is flat along them, so
// its maximizer takes arbitrary values there, drawn from the Sobol
// candidates; the incumbent's values are the best the data supports.
Eigen::VectorXd PullTowardIncumbent(const Acquisition& acquisition,
                                    const Coordinates& coords,
                                    const SearchSpace& space,
                                    const Eigen::VectorXd& incumbent,
                                    const Eigen::VectorXd& x, double tolerance);

// The best of `ranked` with a finite value that decodes to an assignment
// not in `taken`, pulled toward `incumbent` (none if empty) unless that
// lands on a taken point. If every one is taken (a small discrete space
// where the acquisition peaks at evaluated points), the untried point of a
// finite space of at most kMaxEnumeratedPoints with the highest finite
// acquisition. nullopt if there is none.
std::optional<Assignment> PickNew(const std::vector<ScoredPoint>& ranked,
                                  const Acquisition& acquisition,
                                  const Coordinates& coords,
                                  const SearchSpace& space,
                                  const Eigen::VectorXd& incumbent,
                                  double tolerance, const AssignmentSet& taken);

}  // namespace hypertune::optimizer::gp_bandit

#endif  // HYPERTUNE_OPTIMIZER_GP_BANDIT_PICK_H_
