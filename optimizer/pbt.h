// Population-based training's two decisions (Jaderberg et al., "Population
// Based Training of Neural Networks", 2017, section 3 and appendix A.1's
// truncation selection, as Ray Tune's PopulationBasedTraining does it):
//
//   exploit: a member whose latest value lies in the bottom quantile of the
//            population continues from the checkpoint of a member drawn
//            uniformly from the top quantile;
//   explore: its parameters become the donor's, each one perturbed
//            (multiplied by a factor, or moved to a neighbouring value) or,
//            with the resample probability, drawn afresh from the space.
//
// Pure functions of their arguments and a seed: no storage, no protobuf.
// The service decides when a member is judged (its step crossed the next
// perturbation interval) and records what was decided. Thread-safe (no
// state).
#ifndef HYPERTUNE_OPTIMIZER_PBT_H_
#define HYPERTUNE_OPTIMIZER_PBT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "optimizer/search_space.h"

namespace hypertune::optimizer {

struct PbtOptions {
  // Share of the ranked members in each of the bottom and top quantiles;
  // (0, 0.5]. Default 0.25.
  double quantile_fraction = 0.25;
  // Chance that a parameter is resampled instead of perturbed; [0, 1].
  // Default 0.25.
  double resample_probability = 0.25;
  // Factors a DOUBLE or INTEGER parameter is multiplied by, one drawn
  // uniformly; each positive. Default 0.8 and 1.2.
  std::vector<double> perturbation_factors = {0.8, 1.2};
  // Members that must have a value before anyone is judged; at least 2.
  int min_ready_members = 2;
};

// A member of the population as the ranking sees it.
struct PbtMember {
  int64_t id = 0;
  // Its latest value of the ranking metric, turned into maximization.
  // Never NaN (a member without a value is left out by the caller).
  double value = 0.0;
  // Whether it has a checkpoint another member could load: only those may
  // be donors.
  bool has_checkpoint = false;
};

// The bottom and top quantiles of `members`, by value (ties by id, lower id
// ranked higher), each of size ceil(n * quantile_fraction) capped at
// floor(n / 2): the ids, worst first in `bottom`, best first in `top`.
struct PbtQuantiles {
  std::vector<int64_t> bottom;
  std::vector<int64_t> top;
};
PbtQuantiles SplitQuantiles(const std::vector<PbtMember>& members,
                            double quantile_fraction);

// The donor that member `id` exploits, or nullopt when it should go on as
// it is: fewer than options.min_ready_members members, `id` not in the
// bottom quantile (or not among `members`), or no top member with a
// checkpoint. The donor is drawn uniformly (by `seed`) from those top
// members. Ties rank by id, as SplitQuantiles says, so an all-equal
// population still exploits (Ray Tune's rule): a symmetric start breaks.
std::optional<int64_t> ChooseDonor(const std::vector<PbtMember>& members,
                                   int64_t id, const PbtOptions& options,
                                   uint64_t seed);

// The explored copy of `donor`: for each parameter, with probability
// options.resample_probability a value drawn uniformly from the space (as
// RANDOM draws it); otherwise a DOUBLE multiplied by a factor drawn from
// options.perturbation_factors, an INTEGER likewise and rounded (moved by one
// in the factor's direction when rounding would leave it unchanged), a
// DISCRETE or CATEGORICAL value moved to the neighbour below or above (drawn
// evenly); every result clamped to the parameter's range. Deterministic in
// `seed`.
// REQUIRES: !space.conditional(), space.Validate(donor).ok(),
//           options.perturbation_factors non-empty.
Assignment Explore(const SearchSpace& space, const Assignment& donor,
                   const PbtOptions& options, uint64_t seed);

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_PBT_H_
