#include "optimizer/tpe_suggester.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "absl/strings/str_cat.h"
#include "optimizer/conditional.h"
#include "optimizer/fidelity.h"
#include "optimizer/metrics.h"
#include "optimizer/sobol.h"
#include "optimizer/splitmix.h"

namespace hypertune::optimizer {
namespace {

constexpr double kSqrt2 = 1.41421356237309505;
constexpr double kLogSqrt2Pi = 0.918938533204672742;

double NormalCdf(double z) { return 0.5 * std::erfc(-z / kSqrt2); }

// gamma(n) = min(ceil(0.1 n), 25): the size of the "good" group.
int GoodGroupSize(int n) {
  return std::min(static_cast<int>(std::ceil(0.1 * n)), 25);
}

double LogSumExp(const std::vector<double>& v) {
  const double m = *std::max_element(v.begin(), v.end());
  if (!std::isfinite(m)) return m;
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}

// Optuna's default_weights: flat for the newest 25, a ramp from 1/n up
// for older ones. Entries are in history order (oldest first).
std::vector<double> RecencyWeights(int n) {
  std::vector<double> w(n, 1.0);
  if (n >= 25) {
    const int ramp = n - 25;
    for (int i = 0; i < ramp; ++i) {
      w[i] = ramp == 1 ? 1.0 / n
                       : 1.0 / n + (1.0 - 1.0 / n) * i / (ramp - 1);
    }
  }
  return w;
}

// A mixture of Gaussians truncated to [0,1].
class NumericParzen {
 public:
  NumericParzen(const std::vector<double>& obs, const std::vector<double>& w,
                double prior_weight) {
    mu_ = obs;
    mu_.push_back(0.5);
    weight_ = w;
    weight_.push_back(prior_weight);
    const size_t m = mu_.size();
    std::vector<size_t> order(m);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return mu_[a] < mu_[b]; });
    std::vector<double> with_ends = {0.0};
    for (size_t i : order) with_ends.push_back(mu_[i]);
    with_ends.push_back(1.0);
    sigma_.assign(m, 1.0);
    const double min_sigma = 1.0 / std::min(100.0, 1.0 + m);
    for (size_t k = 0; k < m; ++k) {
      double s = std::max(with_ends[k + 1] - with_ends[k],
                          with_ends[k + 2] - with_ends[k + 1]);
      // Not considering the endpoints (Optuna's default): the outermost
      // components take their inner neighbour's distance.
      if (m >= 2 && k == 0) s = with_ends[2] - with_ends[1];
      if (m >= 2 && k == m - 1) s = with_ends[m] - with_ends[m - 1];
      sigma_[order[k]] = std::clamp(s, min_sigma, 1.0);
    }
    sigma_[m - 1] = 1.0;  // The prior.
    const double total = std::accumulate(weight_.begin(), weight_.end(), 0.0);
    for (double& x : weight_) x /= total;
    log_norm_.resize(m);
    for (size_t k = 0; k < m; ++k) {
      const double z = NormalCdf((1 - mu_[k]) / sigma_[k]) -
                       NormalCdf(-mu_[k] / sigma_[k]);
      log_norm_[k] = std::log(std::max(z, 1e-300));
    }
  }

  double LogPdf(double x) const {
    std::vector<double> terms(mu_.size());
    for (size_t k = 0; k < mu_.size(); ++k) {
      const double z = (x - mu_[k]) / sigma_[k];
      terms[k] = std::log(weight_[k]) - 0.5 * z * z - kLogSqrt2Pi -
                 std::log(sigma_[k]) - log_norm_[k];
    }
    return LogSumExp(terms);
  }

  double Sample(SplitMix64& rng) const {
    double u = rng.NextUnit();
    size_t k = 0;
    while (k + 1 < weight_.size() && u >= weight_[k]) u -= weight_[k++];
    for (int attempt = 0; attempt < 100; ++attempt) {
      const double x = mu_[k] + sigma_[k] * rng.NextNormal();
      if (x >= 0 && x <= 1) return x;
    }
    return std::clamp(mu_[k], 0.0, 1.0);
  }

 private:
  std::vector<double> mu_, sigma_, weight_, log_norm_;
};

// Weighted category frequencies plus prior_weight spread evenly.
class CategoricalParzen {
 public:
  CategoricalParzen(const std::vector<double>& obs, const std::vector<double>& w,
                    double prior_weight, int categories)
      : p_(categories, prior_weight / categories) {
    for (size_t i = 0; i < obs.size(); ++i) p_[static_cast<int>(obs[i])] += w[i];
    const double total = std::accumulate(p_.begin(), p_.end(), 0.0);
    for (double& x : p_) x /= total;
  }
  double LogPdf(double c) const { return std::log(p_[static_cast<int>(c)]); }
  double Sample(SplitMix64& rng) const {
    double u = rng.NextUnit();
    for (size_t c = 0; c + 1 < p_.size(); ++c) {
      if (u < p_[c]) return static_cast<double>(c);
      u -= p_[c];
    }
    return static_cast<double>(p_.size() - 1);
  }

 private:
  std::vector<double> p_;
};

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
  // Per trial: model coordinates (unit cube; category index) and a score
  // for the split (higher is better; infeasible at -infinity).
  std::vector<Eigen::VectorXd> points;
  std::vector<bool> active;  // Row-major n x d: parameter j active in trial k.
  std::vector<double> scores;
  std::set<Assignment, AssignmentLess> taken;
  for (size_t i = 0; i < request.history.size(); ++i) {
    const Observation& o = request.history[i];
    taken.insert(o.x);
    if (o.outcome == Outcome::kPending) continue;
    Eigen::VectorXd x = space.Encode(o.x);
    for (int j = 0; j < d; ++j) {
      active.push_back(!std::isnan(o.x[j]));
      if (space.parameters()[j].type == ParameterType::kCategorical) x[j] = o.x[j];
    }
    points.push_back(std::move(x));
    if (o.outcome != Outcome::kCompleted) {
      scores.push_back(-std::numeric_limits<double>::infinity());
    } else {
      scores.push_back(completed_scores[i]);
    }
  }
  const int n = static_cast<int>(points.size());
  const SobolSequence sobol(d, request.seed);
  std::vector<Assignment> out;
  if (n < options_.startup_trials) {
    for (int i = 0; i < request.count; ++i) {
      out.push_back(space.Decode(sobol.Point(request.trials_created + i)));
    }
    return out;
  }

  // The split: the best gamma(n) trials are "good"; each group keeps
  // history order for the recency weights.
  const int n_good = GoodGroupSize(n);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return scores[a] > scores[b]; });
  std::vector<int> good(order.begin(), order.begin() + n_good);
  std::vector<int> bad(order.begin() + n_good, order.end());
  std::sort(good.begin(), good.end());
  std::sort(bad.begin(), bad.end());
  const std::vector<double> all_good_w =
      RecencyWeights(static_cast<int>(good.size()));
  const std::vector<double> all_bad_w =
      RecencyWeights(static_cast<int>(bad.size()));

  for (int i = 0; i < request.count; ++i) {
    Assignment best;
    bool found = false;
    for (int attempt = 0; attempt < 10 && !found; ++attempt) {
      SplitMix64 rng(MixSeeds(
          MixSeeds(request.seed,
                   static_cast<uint64_t>(request.trials_created + i)),
          static_cast<uint64_t>(attempt)));
      Eigen::VectorXd unit(d);
      for (int j = 0; j < d; ++j) {
        // Each parameter's densities over the trials where it is active
        // (Bergstra et al., "Algorithms for hyper-parameter optimization",
        // NeurIPS 2011, section 4: the tree-structured Parzen estimator);
        // in a flat space, every trial. Values drawn for a parameter that
        // the drawn parents leave inactive are dropped by Decode.
        std::vector<double> gx, bx, good_w, bad_w;
        for (size_t m = 0; m < good.size(); ++m) {
          if (!active[good[m] * d + j]) continue;
          gx.push_back(points[good[m]][j]);
          good_w.push_back(all_good_w[m]);
        }
        for (size_t m = 0; m < bad.size(); ++m) {
          if (!active[bad[m] * d + j]) continue;
          bx.push_back(points[bad[m]][j]);
          bad_w.push_back(all_bad_w[m]);
        }
        const ParameterConfig& p = space.parameters()[j];
        double chosen = 0, chosen_score = -std::numeric_limits<double>::infinity();
        if (p.type == ParameterType::kCategorical) {
          const int k = static_cast<int>(p.categories.size());
          const CategoricalParzen l(gx, good_w, options_.prior_weight, k);
          const CategoricalParzen g(bx, bad_w, options_.prior_weight, k);
          for (int c = 0; c < options_.ei_candidates; ++c) {
            const double x = l.Sample(rng);
            const double s = l.LogPdf(x) - g.LogPdf(x);
            if (s > chosen_score) {
              chosen_score = s;
              chosen = x;
            }
          }
          unit[j] = (chosen + 0.5) / k;
        } else {
          const NumericParzen l(gx, good_w, options_.prior_weight);
          const NumericParzen g(bx, bad_w, options_.prior_weight);
          for (int c = 0; c < options_.ei_candidates; ++c) {
            const double x = l.Sample(rng);
            const double s = l.LogPdf(x) - g.LogPdf(x);
            if (s > chosen_score) {
              chosen_score = s;
              chosen = x;
            }
          }
          unit[j] = chosen;
        }
      }
      best = space.Decode(unit);
      found = !taken.contains(best);
    }
    if (!found) best = space.Decode(sobol.Point(request.trials_created + i));
    taken.insert(best);
    out.push_back(std::move(best));
  }
  return out;
}

}  // namespace hypertune::optimizer
