#include "optimizer/tpe_suggester.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <set>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "optimizer/conditional.h"
#include "optimizer/fidelity.h"
#include "optimizer/metrics.h"
#include "optimizer/sobol.h"
#include "optimizer/splitmix.h"
#include "optimizer/tpe/groups.h"
#include "optimizer/tpe/parzen_estimator.h"

namespace hypertune::optimizer {
namespace {

// gamma(n) = min(ceil(0.1 n), 25): the size of the "good" group.
int GoodGroupSize(int n) {
  return std::min(static_cast<int>(std::ceil(0.1 * n)), 25);
}

// Optuna's default_weights: flat for the newest 25, a ramp from 1/n up
// for older ones. Entries are in history order (oldest first).
std::vector<double> RecencyWeights(int n) {
  std::vector<double> w(n, 1.0);
  if (n >= 25) {
    const int ramp = n - 25;
    for (int i = 0; i < ramp; ++i) {
      w[i] = ramp == 1 ? 1.0 / n : 1.0 / n + (1.0 - 1.0 / n) * i / (ramp - 1);
    }
  }
  return w;
}

// A trial as the estimators read it: its assignment's model coordinates
// (unit cube; category index) and which parameters are active.
struct Row {
  Eigen::VectorXd x;
  std::vector<bool> active;
};

Row MakeRow(const SearchSpace& space, const Assignment& a) {
  Row row{space.Encode(a), std::vector<bool>(a.size())};
  for (size_t j = 0; j < a.size(); ++j) {
    row.active[j] = !std::isnan(a[j]);
    if (space.parameters()[j].type == ParameterType::kCategorical) {
      row.x[static_cast<Eigen::Index>(j)] = a[j];
    }
  }
  return row;
}

// One estimator's data: the rows (in history order) where the group is
// active, with their recency weights.
tpe::ParzenEstimator Estimate(const SearchSpace& space,
                              const std::vector<tpe::Dimension>& dims,
                              const std::vector<const Row*>& rows,
                              const tpe::ParzenOptions& options) {
  std::vector<tpe::GroupPoint> points;
  for (const Row* r : rows) {
    if (!r->active[dims.front().parameter]) continue;
    tpe::GroupPoint p(dims.size());
    for (size_t j = 0; j < dims.size(); ++j) p[j] = r->x[dims[j].parameter];
    points.push_back(std::move(p));
  }
  return tpe::ParzenEstimator(space, dims, points,
                              RecencyWeights(static_cast<int>(points.size())),
                              options);
}

// The estimators' groups: tpe::ParameterGroups (joint), or one parameter
// each in parents-first order.
std::vector<std::vector<tpe::Dimension>> DimensionGroups(
    const SearchSpace& space, bool joint) {
  auto dimension = [&](int j) {
    const ParameterConfig& p = space.parameters()[j];
    return tpe::Dimension{j, p.type == ParameterType::kCategorical
                                 ? static_cast<int>(p.categories.size())
                                 : 0};
  };
  std::vector<std::vector<tpe::Dimension>> groups;
  if (joint) {
    for (const std::vector<int>& g : tpe::ParameterGroups(space)) {
      groups.emplace_back();
      for (int j : g) groups.back().push_back(dimension(j));
    }
  } else {
    for (int j : space.parents_first()) groups.push_back({dimension(j)});
  }
  return groups;
}

}  // namespace

absl::StatusOr<std::vector<Assignment>> TpeSuggester::Suggest(
    const SuggestRequest& request) {
  if (absl::Status s = ValidateSobolRequest(request, "TPE"); !s.ok()) {
    return s;
  }
  if (request.fidelity != nullptr) return Suggest(AtOneFidelity(request));
  const SearchSpace& space = *request.space;
  const int d = space.dim();
  // A completed trial's score: its objective (one objective, no
  // constraints), else minus its position in PreferenceOrder (metrics.h),
  // which decides the split below.
  std::vector<double> completed_scores(request.history.size(), 0.0);
  const MetricTable table = TabulateMetrics(request);
  if (IsPlainSingleObjective(request)) {
    for (size_t r = 0; r < table.rows.size(); ++r) {
      completed_scores[table.rows[r]] =
          table.objective_values(static_cast<Eigen::Index>(r), 0);
    }
  } else {
    int evaluated = 0;
    for (const Observation& o : request.history) {
      evaluated += o.outcome != Outcome::kPending;
    }
    const std::vector<int> order =
        PreferenceOrder(table, GoodGroupSize(evaluated));
    for (size_t k = 0; k < order.size(); ++k) {
      completed_scores[table.rows[order[k]]] = -static_cast<double>(k);
    }
  }
  // The split's order: completed trials by score, then infeasible ones;
  // pending trials are not evaluated and never good.
  std::vector<Row> rows;
  std::vector<int> evaluated, pending;
  std::vector<double> order_score;
  std::set<Assignment, AssignmentLess> taken;
  for (size_t i = 0; i < request.history.size(); ++i) {
    const Observation& o = request.history[i];
    taken.insert(o.x);
    if (o.outcome == Outcome::kPending && !options_.constant_liar) continue;
    const int r = static_cast<int>(rows.size());
    rows.push_back(MakeRow(space, o.x));
    if (o.outcome == Outcome::kPending) {
      pending.push_back(r);
      order_score.push_back(-std::numeric_limits<double>::infinity());
      continue;
    }
    evaluated.push_back(r);
    order_score.push_back(o.outcome == Outcome::kCompleted
                              ? completed_scores[i]
                              : -std::numeric_limits<double>::infinity());
  }
  const int n = static_cast<int>(evaluated.size());
  const SobolSequence sobol(d, request.seed);
  std::vector<Assignment> out;
  if (n < options_.startup_trials) {
    for (int i = 0; i < request.count; ++i) {
      out.push_back(space.Decode(sobol.Point(request.trials_created + i)));
    }
    return out;
  }

  // The split: the best gamma(n) evaluated trials are "good", the others
  // and (constant liar) the pending ones "bad"; each group keeps history
  // order for the recency weights.
  std::vector<int> ranked = evaluated;
  std::stable_sort(ranked.begin(), ranked.end(), [&](int a, int b) {
    return order_score[a] > order_score[b];
  });
  const int n_good = GoodGroupSize(n);
  std::vector<int> good(ranked.begin(), ranked.begin() + n_good);
  std::vector<int> bad(ranked.begin() + n_good, ranked.end());
  bad.insert(bad.end(), pending.begin(), pending.end());
  std::sort(good.begin(), good.end());
  std::sort(bad.begin(), bad.end());
  std::vector<const Row*> good_rows, bad_rows;
  for (int r : good) good_rows.push_back(&rows[r]);
  for (int r : bad) bad_rows.push_back(&rows[r]);

  // The groups, each with its good estimator (the same for the whole
  // batch): joint per group, or one per parameter.
  const tpe::ParzenOptions joint{options_.prior_weight, true,
                                 options_.bandwidth_weights};
  const tpe::ParzenOptions single{options_.prior_weight, false,
                                  options_.bandwidth_weights};
  auto joint_at = [&](int64_t t) {
    return options_.joint_every > 0 && t % options_.joint_every == 0;
  };
  bool any_joint = false, any_single = false;
  for (int i = 0; i < request.count; ++i) {
    (joint_at(request.trials_created + i) ? any_joint : any_single) = true;
  }
  std::vector<std::vector<tpe::Dimension>> joint_groups, single_groups;
  if (any_joint) joint_groups = DimensionGroups(space, true);
  if (any_single) single_groups = DimensionGroups(space, false);
  std::vector<tpe::ParzenEstimator> joint_good, single_good;
  for (const auto& dims : joint_groups) {
    joint_good.push_back(Estimate(space, dims, good_rows, joint));
  }
  for (const auto& dims : single_groups) {
    single_good.push_back(Estimate(space, dims, good_rows, single));
  }

  std::vector<Row> batch;  // This batch's points so far (the liar's).
  batch.reserve(static_cast<size_t>(request.count));
  for (int i = 0; i < request.count; ++i) {
    const int64_t t = request.trials_created + i;
    const bool use_joint = joint_at(t);
    const auto& groups = use_joint ? joint_groups : single_groups;
    const auto& good_model = use_joint ? joint_good : single_good;
    std::vector<const Row*> bad_now = bad_rows;
    if (options_.constant_liar) {
      for (const Row& r : batch) bad_now.push_back(&r);
    }
    std::vector<tpe::ParzenEstimator> bad_model;
    for (const auto& dims : groups) {
      bad_model.push_back(
          Estimate(space, dims, bad_now, use_joint ? joint : single));
    }
    Assignment best;
    bool found = false;
    for (int attempt = 0; attempt < 10 && !found; ++attempt) {
      SplitMix64 rng(MixSeeds(MixSeeds(request.seed, static_cast<uint64_t>(t)),
                              static_cast<uint64_t>(attempt)));
      Eigen::VectorXd unit = Eigen::VectorXd::Constant(d, 0.5);
      for (size_t g = 0; g < groups.size(); ++g) {
        // The candidate maximizing log l - log g among draws from l
        // (Bergstra et al., section 4); values drawn for parameters that
        // the drawn parents leave inactive are dropped by Decode.
        tpe::GroupPoint chosen;
        double chosen_score = -std::numeric_limits<double>::infinity();
        for (int c = 0; c < options_.ei_candidates; ++c) {
          tpe::GroupPoint x = good_model[g].Sample(rng);
          const double score = good_model[g].LogPdf(x) - bad_model[g].LogPdf(x);
          if (chosen.empty() || score > chosen_score) {
            chosen_score = score;
            chosen = std::move(x);
          }
        }
        for (size_t j = 0; j < groups[g].size(); ++j) {
          const tpe::Dimension& dim = groups[g][j];
          unit[dim.parameter] = dim.categories > 0
                                    ? (chosen[j] + 0.5) / dim.categories
                                    : chosen[j];
        }
      }
      best = space.Decode(unit);
      found = !taken.contains(best);
    }
    if (!found) best = space.Decode(sobol.Point(request.trials_created + i));
    taken.insert(best);
    batch.push_back(MakeRow(space, best));
    out.push_back(std::move(best));
  }
  return out;
}

}  // namespace hypertune::optimizer
