#include "optimizer/gp_bandit/pending_region.h"

#include <algorithm>

namespace hypertune::optimizer::gp_bandit {

IncumbentRegion::IncumbentRegion(const Coordinates& coords,
                                 const Eigen::VectorXd& incumbent,
                                 const Eigen::VectorXd& lengthscales,
                                 const Eigen::VectorXd& box_lower,
                                 const Eigen::VectorXd& box_upper,
                                 double max_half_width)
    : lower(box_lower), upper(box_upper) {
  for (int j = 0; j < coords.dim(); ++j) {
    if (coords.categorical[j]) continue;
    const double half = std::min(lengthscales[j], max_half_width);
    lower[j] = std::max(lower[j], incumbent[j] - half);
    upper[j] = std::min(upper[j], incumbent[j] + half);
  }
}

bool IncumbentRegion::Contains(const Coordinates& coords,
                               const Eigen::VectorXd& x) const {
  for (int j = 0; j < coords.dim(); ++j) {
    if (coords.categorical[j]) continue;
    if (x[j] < lower[j] || x[j] > upper[j]) return false;
  }
  return true;
}

bool MayConfinePendingPicks(const GpBanditOptions& options,
                            const Coordinates& coords, const Models& models) {
  return options.pending_region_half_width > 0 && models.plain &&
         coords.tree.empty() && models.incumbent.size() == coords.dim();
}

std::optional<IncumbentRegion> PendingRegion(
    const GpBanditOptions& options, const Coordinates& coords,
    const Models& models, const std::vector<ScoredPoint>& sequential) {
  if (!MayConfinePendingPicks(options, coords, models) || sequential.empty()) {
    return std::nullopt;
  }
  IncumbentRegion region(coords, models.incumbent,
                         models.objectives[0].lengthscales, models.box_lower,
                         models.box_upper, options.pending_region_half_width);
  if (!region.Contains(coords, sequential.front().x)) return std::nullopt;
  return region;
}

}  // namespace hypertune::optimizer::gp_bandit
