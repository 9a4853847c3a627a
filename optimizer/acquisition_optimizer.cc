#include "optimizer/acquisition_optimizer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include "optimizer/box_minimizer.h"
#include "optimizer/sobol.h"
#include "optimizer/splitmix.h"

namespace hypertune::optimizer {
namespace {

int RandomIndex(SplitMix64& rng, int n) {
  return std::min(static_cast<int>(rng.NextUnit() * n), n - 1);
}

// Per categorical coordinate (alternatives[k] other categories): how many
// of them the coordinate ascent tries, at most `budget` in all. Water
// filling: in increasing order of alternatives, each coordinate gets all of
// its own or an even share of what is left, whichever is less; so when the
// alternatives fit the budget, every coordinate gets all of them.
std::vector<int> CategoryQuotas(const std::vector<int>& alternatives,
                                int budget) {
  std::vector<int> order(alternatives.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return alternatives[a] < alternatives[b];
  });
  std::vector<int> quota(alternatives.size(), 0);
  int left = std::max(budget, 0);
  int coordinates_left = static_cast<int>(order.size());
  for (int k : order) {
    quota[k] = std::min(alternatives[k], left / coordinates_left);
    left -= quota[k];
    --coordinates_left;
  }
  return quota;
}

// `count` distinct categories of 0..categories-1 other than `current`,
// ascending, drawn uniformly (Floyd's sampling: O(count log count)).
// REQUIRES: 0 <= count <= categories - 1
std::vector<int> SampleOtherCategories(int categories, int current, int count,
                                       SplitMix64& rng) {
  // Draw from the categories - 1 others, numbered skipping `current`.
  const int others = categories - 1;
  std::set<int> chosen;
  for (int top = others - count; top < others; ++top) {
    const int pick = RandomIndex(rng, top + 1);
    chosen.insert(chosen.contains(pick) ? top : pick);
  }
  std::vector<int> out;
  out.reserve(chosen.size());
  for (int c : chosen) out.push_back(c < current ? c : c + 1);
  return out;
}

}  // namespace

std::vector<ScoredPoint> MaximizeAcquisition(
    const Acquisition& acquisition, const AcquisitionDomain& domain,
    const Eigen::MatrixXd& anchors, const Eigen::VectorXd& perturbation_scale,
    uint64_t seed, const AcquisitionOptimizerOptions& options) {
  const int d = static_cast<int>(domain.categories.size());
  std::vector<int> numeric, categorical;
  for (int j = 0; j < d; ++j) {
    (domain.categories[j] == 0 ? numeric : categorical).push_back(j);
  }
  auto snap = [&](Eigen::VectorXd& x) {
    for (int j : numeric)
      x[j] = std::clamp(x[j], domain.lower[j], domain.upper[j]);
    if (domain.snap) domain.snap(x);
  };

  // Candidates: Sobol points of the domain, then perturbed anchors.
  const int num_perturbed = anchors.rows() > 0 ? options.perturbations : 0;
  Eigen::MatrixXd candidates(options.raw_samples + num_perturbed, d);
  const SobolSequence sobol(std::min(d, SobolSequence::kMaxDimension), seed);
  for (int i = 0; i < options.raw_samples; ++i) {
    const Eigen::VectorXd u = sobol.Point(i);
    Eigen::VectorXd x(d);
    for (int j = 0; j < d; ++j) {
      const double uj = j < u.size() ? u[j] : 0.5;
      x[j] = domain.categories[j] == 0
                 ? domain.lower[j] + uj * (domain.upper[j] - domain.lower[j])
                 : std::min(std::floor(uj * domain.categories[j]),
                            domain.categories[j] - 1.0);
    }
    snap(x);
    candidates.row(i) = x.transpose();
  }
  SplitMix64 rng(MixSeeds(seed, 0x70e27b));
  // Perturb each coordinate with probability min(1, 20 / d) (TuRBO) for
  // even-numbered candidates, and about two coordinates at a time for odd
  // ones (moves along few axes matter on nearly separable objectives), at
  // one of three scales so that both fine and coarse moves are tried.
  const double p_dense =
      numeric.empty() ? 0 : std::min(1.0, 20.0 / numeric.size());
  const double p_sparse =
      numeric.empty() ? 0 : std::min(1.0, 2.0 / numeric.size());
  const double p_categorical = 1.0 / std::max(1, d);
  for (int i = 0; i < num_perturbed; ++i) {
    Eigen::VectorXd x = anchors.row(i % anchors.rows()).transpose();
    const int round = static_cast<int>(i / anchors.rows() / 2);
    const double factor = round % 3 == 0 ? 1.0 : round % 3 == 1 ? 0.25 : 0.05;
    bool moved = false;
    const double p_numeric = i % 2 == 0 ? p_dense : p_sparse;
    for (int j : numeric) {
      if (rng.NextUnit() < p_numeric) {
        x[j] += factor * perturbation_scale[j] * rng.NextNormal();
        moved = true;
      }
    }
    for (int j : categorical) {
      if (rng.NextUnit() < p_categorical) {
        x[j] = RandomIndex(rng, domain.categories[j]);
        moved = true;
      }
    }
    if (!moved && !numeric.empty()) {
      const int j = numeric[RandomIndex(rng, static_cast<int>(numeric.size()))];
      x[j] += factor * perturbation_scale[j] * rng.NextNormal();
    }
    snap(x);
    candidates.row(options.raw_samples + i) = x.transpose();
  }
  const Eigen::VectorXd values = acquisition.EvaluateBatch(candidates);

  std::vector<int> order(candidates.rows());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return values[a] > values[b]; });

  std::vector<ScoredPoint> results;
  // Polish the best starts on the numeric coordinates: the best Sobol
  // candidates first (global ones), then the best others.
  std::vector<int> start_rows;
  for (int i : order) {
    if (static_cast<int>(start_rows.size()) >= options.global_starts) break;
    if (i < options.raw_samples) start_rows.push_back(i);
  }
  for (int i : order) {
    if (static_cast<int>(start_rows.size()) >= options.polish_starts) break;
    if (std::find(start_rows.begin(), start_rows.end(), i) ==
        start_rows.end()) {
      start_rows.push_back(i);
    }
  }
  std::sort(start_rows.begin(), start_rows.end(), [&](int a, int b) {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  });
  const int starts = static_cast<int>(start_rows.size());
  std::vector<int> alternatives;
  for (int j : categorical) alternatives.push_back(domain.categories[j] - 1);
  const std::vector<int> category_quota =
      CategoryQuotas(alternatives, options.max_category_evaluations);
  Eigen::VectorXd lower(numeric.size()), upper(numeric.size());
  for (size_t k = 0; k < numeric.size(); ++k) {
    lower[k] = domain.lower[numeric[k]];
    upper[k] = domain.upper[numeric[k]];
  }
  BoxMinimizerOptions polish;
  polish.max_iterations = options.polish_iterations;
  polish.gradient_tolerance = 1e-6;
  polish.relative_tolerance = 1e-10;
  for (int s = 0; s < starts; ++s) {
    Eigen::VectorXd x = candidates.row(start_rows[s]).transpose();
    double value = values[start_rows[s]];
    if (!numeric.empty()) {
      auto objective = [&](const Eigen::VectorXd& z, Eigen::VectorXd& grad) {
        Eigen::VectorXd full = x;
        for (size_t k = 0; k < numeric.size(); ++k) full[numeric[k]] = z[k];
        Eigen::VectorXd g;
        const double v = acquisition.Evaluate(full, &g);
        for (size_t k = 0; k < numeric.size(); ++k) grad[k] = -g[numeric[k]];
        return -v;
      };
      Eigen::VectorXd z0(numeric.size());
      for (size_t k = 0; k < numeric.size(); ++k) z0[k] = x[numeric[k]];
      const BoxMinimum m = MinimizeInBox(objective, z0, lower, upper, polish);
      if (std::isfinite(m.value) && -m.value > value) {
        for (size_t k = 0; k < numeric.size(); ++k) x[numeric[k]] = m.x[k];
      }
    }
    // One pass of coordinate ascent over the categories, within the
    // budget: all of a coordinate's other categories where its quota
    // covers them, else a random subset.
    if (!categorical.empty()) {
      double best_v = acquisition.Evaluate(x, nullptr);
      for (size_t k = 0; k < categorical.size(); ++k) {
        const int j = categorical[k];
        const int categories = domain.categories[j];
        if (category_quota[k] == 0) continue;
        const double original = x[j];
        std::vector<int> tried;
        if (category_quota[k] >= categories - 1) {
          for (int c = 0; c < categories; ++c) {
            if (c != original) tried.push_back(c);
          }
        } else {
          tried = SampleOtherCategories(categories, static_cast<int>(original),
                                        category_quota[k], rng);
        }
        double best_c = original;
        for (int c : tried) {
          x[j] = c;
          const double v = acquisition.Evaluate(x, nullptr);
          if (v > best_v) {
            best_v = v;
            best_c = c;
          }
        }
        x[j] = best_c;
      }
    }
    snap(x);
    value = acquisition.Evaluate(x, nullptr);
    results.push_back({x, value});
  }
  auto known = [&](const Eigen::VectorXd& x) {
    return std::any_of(results.begin(), results.end(),
                       [&](const ScoredPoint& p) { return p.x == x; });
  };
  if (options.distinct_results) {
    std::vector<ScoredPoint> polished;
    for (ScoredPoint& p : results) {
      const bool seen =
          std::any_of(polished.begin(), polished.end(),
                      [&](const ScoredPoint& q) { return q.x == p.x; });
      if (!seen) polished.push_back(std::move(p));
    }
    results = std::move(polished);
  }
  for (int i : order) {
    if (static_cast<int>(results.size()) >= options.max_results + starts) break;
    if (options.distinct_results && known(candidates.row(i).transpose())) {
      continue;
    }
    results.push_back({candidates.row(i).transpose(), values[i]});
  }
  std::stable_sort(results.begin(), results.end(),
                   [](const ScoredPoint& a, const ScoredPoint& b) {
                     return a.value > b.value;
                   });
  if (static_cast<int>(results.size()) > options.max_results) {
    results.resize(options.max_results);
  }
  return results;
}

}  // namespace hypertune::optimizer
