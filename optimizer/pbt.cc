#include "optimizer/pbt.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "optimizer/splitmix.h"

namespace hypertune::optimizer {

PbtQuantiles SplitQuantiles(const std::vector<PbtMember>& members,
                            double quantile_fraction) {
  std::vector<const PbtMember*> ranked;
  ranked.reserve(members.size());
  for (const PbtMember& m : members) ranked.push_back(&m);
  // Best first.
  std::sort(ranked.begin(), ranked.end(),
            [](const PbtMember* a, const PbtMember* b) {
              if (a->value != b->value) return a->value > b->value;
              return a->id < b->id;
            });
  const size_t n = ranked.size();
  size_t k = static_cast<size_t>(
      std::ceil(static_cast<double>(n) * quantile_fraction - 1e-12));
  k = std::min(k, n / 2);
  PbtQuantiles q;
  for (size_t i = 0; i < k; ++i) {
    q.top.push_back(ranked[i]->id);
    q.bottom.push_back(ranked[n - 1 - i]->id);
  }
  return q;
}

std::optional<int64_t> ChooseDonor(const std::vector<PbtMember>& members,
                                   int64_t id, const PbtOptions& options,
                                   uint64_t seed) {
  if (members.size() <
      static_cast<size_t>(std::max(2, options.min_ready_members))) {
    return std::nullopt;
  }
  const PbtQuantiles q = SplitQuantiles(members, options.quantile_fraction);
  if (std::find(q.bottom.begin(), q.bottom.end(), id) == q.bottom.end()) {
    return std::nullopt;
  }
  std::vector<int64_t> donors;
  for (int64_t top : q.top) {
    for (const PbtMember& m : members) {
      if (m.id == top && m.has_checkpoint) donors.push_back(top);
    }
  }
  if (donors.empty()) return std::nullopt;
  SplitMix64 rng(seed);
  return donors[rng.Next() % donors.size()];
}

Assignment Explore(const SearchSpace& space, const Assignment& donor,
                   const PbtOptions& options, uint64_t seed) {
  assert(!space.conditional());
  assert(!options.perturbation_factors.empty());
  SplitMix64 rng(seed);
  // A fresh draw of the whole space, from which resampled values are taken.
  Eigen::VectorXd unit(space.dim());
  for (int j = 0; j < space.dim(); ++j) unit[j] = rng.NextUnit();
  const Assignment fresh = space.Decode(unit);

  Assignment out = donor;
  const std::vector<double>& factors = options.perturbation_factors;
  for (int j = 0; j < space.dim(); ++j) {
    const ParameterConfig& p = space.parameters()[j];
    // Two draws per parameter whatever happens, so one parameter's choice
    // does not shift the next one's stream.
    const bool resample = rng.NextUnit() < options.resample_probability;
    const uint64_t pick = rng.Next();
    if (resample) {
      out[j] = fresh[j];
      continue;
    }
    switch (p.type) {
      case ParameterType::kDouble: {
        const double f = factors[pick % factors.size()];
        out[j] = std::clamp(donor[j] * f, p.min, p.max);
        break;
      }
      case ParameterType::kInteger: {
        const double f = factors[pick % factors.size()];
        double v = std::round(donor[j] * f);
        if (v == donor[j] && f != 1.0) {
          // Rounding undid the move (a small integer): step by one the way
          // the factor points (x * f moves away from zero for f > 1).
          const bool up = (f > 1.0) == (donor[j] >= 0.0);
          v = donor[j] + (up ? 1.0 : -1.0);
        }
        out[j] = std::clamp(v, p.min, p.max);
        break;
      }
      case ParameterType::kDiscrete:
      case ParameterType::kCategorical: {
        // The index of the current value, moved by one.
        const int n = p.type == ParameterType::kDiscrete
                          ? static_cast<int>(p.values.size())
                          : static_cast<int>(p.categories.size());
        int index = 0;
        if (p.type == ParameterType::kCategorical) {
          index = static_cast<int>(donor[j]);
        } else {
          index = static_cast<int>(
              std::lower_bound(p.values.begin(), p.values.end(), donor[j]) -
              p.values.begin());
        }
        index = std::clamp(index + ((pick & 1) ? 1 : -1), 0, n - 1);
        out[j] = p.type == ParameterType::kDiscrete
                     ? p.values[index]
                     : static_cast<double>(index);
        break;
      }
    }
  }
  return out;
}

}  // namespace hypertune::optimizer
