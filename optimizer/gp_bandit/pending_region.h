// GP_BANDIT's pending region: where a pick made while trials are pending
// (asynchronous workers, or a batch's later points) searches.
//
// Under the pending points' fantasies (kriging believer) the acquisition
// flattens near them, and picks drift a lengthscale or more away even when
// the sequential run, knowing nothing pending, would refine around the
// incumbent. So when the pick made without the pending trials lies within
// the incumbent's box (incumbent +- min(lengthscale, max_half_width) along
// each numeric dimension), the picks made with them search only that box;
// where the sequential pick explores, they search the whole domain
// (options.h, pending_region_half_width, has the measurements). One
// objective, no constraints, flat spaces.
// Immutable values; thread-safe.
#ifndef HYPERTUNE_OPTIMIZER_GP_BANDIT_PENDING_REGION_H_
#define HYPERTUNE_OPTIMIZER_GP_BANDIT_PENDING_REGION_H_

#include <optional>
#include <vector>

#include <Eigen/Core>

#include "optimizer/acquisition_optimizer.h"
#include "optimizer/gp_bandit/coordinates.h"
#include "optimizer/gp_bandit/models.h"
#include "optimizer/gp_bandit/options.h"

namespace hypertune::optimizer::gp_bandit {

// A box around the incumbent: incumbent +- min(lengthscale, max_half_width)
// along each numeric dimension, within [box_lower, box_upper]; categorical
// dimensions keep the box's.
struct IncumbentRegion {
  Eigen::VectorXd lower, upper;
  IncumbentRegion(const Coordinates& coords, const Eigen::VectorXd& incumbent,
                  const Eigen::VectorXd& lengthscales,
                  const Eigen::VectorXd& box_lower,
                  const Eigen::VectorXd& box_upper, double max_half_width);
  // Whether x's numeric coordinates lie in the box.
  bool Contains(const Coordinates& coords, const Eigen::VectorXd& x) const;
};

// Whether the picks made under `models` with trials pending may be
// confined at all: the option is on, the problem is plain (one objective,
// no constraints), the space flat, and there is an incumbent.
bool MayConfinePendingPicks(const GpBanditOptions& options,
                            const Coordinates& coords, const Models& models);

// The region the picks made with trials pending search: the incumbent's
// (options.pending_region_half_width wide at most) if they may be confined
// and the best of `sequential`, the acquisition optimizer's points for the
// pick made without the pending trials, lies in it; nullopt otherwise (the
// whole domain).
std::optional<IncumbentRegion> PendingRegion(
    const GpBanditOptions& options, const Coordinates& coords,
    const Models& models, const std::vector<ScoredPoint>& sequential);

}  // namespace hypertune::optimizer::gp_bandit

#endif  // HYPERTUNE_OPTIMIZER_GP_BANDIT_PENDING_REGION_H_
