// TPE: the Parzen estimator's math (normalization, closed-form bandwidths,
// cells and categories, sampling against the density), the group
// decomposition, and the suggester's behaviour: batches and pending trials
// under the constant liar, determinism, conditional spaces, and a search
// that beats random.
#include "optimizer/tpe_suggester.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "optimizer/conditional.h"
#include "optimizer/search_space.h"
#include "optimizer/splitmix.h"
#include "optimizer/tpe/groups.h"
#include "optimizer/tpe/parzen_estimator.h"

namespace hypertune::optimizer {
namespace {

using ::testing::ElementsAre;
using tpe::CellOf;
using tpe::Dimension;
using tpe::GroupPoint;
using tpe::LogGaussMass;
using tpe::ParzenEstimator;
using tpe::ParzenOptions;

constexpr double kSqrt2Pi = 2.5066282746310002;

double Phi(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

SearchSpace Box(int d) {
  std::vector<ParameterConfig> params(d);
  for (int i = 0; i < d; ++i) params[i].name = "x" + std::to_string(i);
  return SearchSpace::Create(params).value();
}

ParameterConfig Integer(const std::string& name, double lo, double hi,
                        Scale scale = Scale::kLinear) {
  ParameterConfig p;
  p.name = name;
  p.type = ParameterType::kInteger;
  p.min = lo;
  p.max = hi;
  p.scale = scale;
  return p;
}

ParameterConfig Double(const std::string& name) {
  ParameterConfig p;
  p.name = name;
  return p;
}

ParameterConfig Categorical(const std::string& name, int k) {
  ParameterConfig p;
  p.name = name;
  p.type = ParameterType::kCategorical;
  for (int i = 0; i < k; ++i) p.categories.push_back("c" + std::to_string(i));
  return p;
}

TEST(LogGaussMassTest, MatchesTheCdfDifferenceAndStaysFiniteInTheTails) {
  for (auto [a, b] : {std::pair{-1.0, 0.5},
                      {-3.0, -2.0},
                      {0.2, 2.5},
                      {-0.1, 0.1},
                      {1.0, 8.0}}) {
    EXPECT_NEAR(LogGaussMass(a, b), std::log(Phi(b) - Phi(a)), 1e-10)
        << a << " " << b;
  }
  // Far tails, where Phi(b) - Phi(a) underflows or cancels: the mass of
  // [-45, -44] is about phi(44) / 44 (Mills' ratio).
  const double far = LogGaussMass(-45.0, -44.0);
  EXPECT_NEAR(far, -0.5 * 44 * 44 - std::log(44.0 * kSqrt2Pi), 0.01);
  EXPECT_NEAR(LogGaussMass(44.0, 45.0), far, 1e-9);
  EXPECT_LT(LogGaussMass(-45.0, -44.0), LogGaussMass(-40.0, -39.0));
  EXPECT_NEAR(LogGaussMass(-40.0, 40.0), 0.0, 1e-12);
}

TEST(ParzenEstimatorTest, UnivariateBandwidthsFollowTheNeighbourRule) {
  const SearchSpace space = Box(1);
  // One observation at 0.3 beside the prior's centre 0.5: the outermost
  // centres take their inner neighbour's distance, 0.2, clipped up to
  // 1 / min(100, n + 2) = 1/3; the prior has width 1. Weights 1 and 1.
  const ParzenEstimator est(space, {{0, 0}}, {{0.3}}, {1.0},
                            {.prior_weight = 1.0, .multivariate = false});
  auto truncated = [](double x, double mu, double s) {
    const double z = (x - mu) / s;
    return std::exp(-0.5 * z * z) / (kSqrt2Pi * s) /
           (Phi((1 - mu) / s) - Phi(-mu / s));
  };
  for (double x : {0.0, 0.1, 0.3, 0.77, 1.0}) {
    const double expected =
        0.5 * truncated(x, 0.3, 1.0 / 3) + 0.5 * truncated(x, 0.5, 1.0);
    EXPECT_NEAR(est.LogPdf({x}), std::log(expected), 1e-12) << x;
  }
  // Bandwidth weights: the components weigh 1/3 and 1, up to a constant.
  const ParzenEstimator weighted(
      space, {{0, 0}}, {{0.3}}, {1.0},
      {.multivariate = false, .bandwidth_weights = true});
  auto log_weighted = [&](double x) {
    return std::log(truncated(x, 0.3, 1.0 / 3) / 3 + truncated(x, 0.5, 1.0));
  };
  for (double x : {0.0, 0.1, 0.77, 1.0}) {
    EXPECT_NEAR(weighted.LogPdf({x}) - weighted.LogPdf({0.3}),
                log_weighted(x) - log_weighted(0.3), 1e-12)
        << x;
  }
}

TEST(ParzenEstimatorTest, MultivariateBandwidthIsScottsRule) {
  const SearchSpace space = Box(2);
  // n = 10 observations, p = 2 parameters: 0.2 * 10^(-1/6) = 0.136, above
  // the clip 1 / min(100, n + 2); weights 10 x 1 and the prior's 5
  // (normalized: 1/15 each, 1/3).
  std::vector<GroupPoint> pts;
  for (int i = 0; i < 10; ++i) {
    pts.push_back({0.05 + 0.09 * i, std::fmod(0.37 * i, 1.0)});
  }
  const ParzenEstimator est(space, {{0, 0}, {1, 0}}, pts,
                            std::vector<double>(10, 1.0),
                            {.prior_weight = 5.0, .multivariate = true});
  const double s = 0.2 * std::pow(10.0, -1.0 / 6.0);
  auto truncated = [](double x, double mu, double sd) {
    const double z = (x - mu) / sd;
    return std::exp(-0.5 * z * z) / (kSqrt2Pi * sd) /
           (Phi((1 - mu) / sd) - Phi(-mu / sd));
  };
  const GroupPoint x = {0.35, 0.7};
  double expected = truncated(x[0], 0.5, 1) * truncated(x[1], 0.5, 1) / 3;
  for (const GroupPoint& p : pts) {
    expected += truncated(x[0], p[0], s) * truncated(x[1], p[1], s) / 15;
  }
  EXPECT_NEAR(est.LogPdf(x), std::log(expected), 1e-12);
}

TEST(ParzenEstimatorTest, ContinuousDensityIntegratesToOne) {
  const SearchSpace space = Box(1);
  for (bool multivariate : {false, true}) {
    const ParzenEstimator est(space, {{0, 0}}, {{0.02}, {0.5}, {0.51}, {0.97}},
                              {1, 0.5, 1, 1}, {.multivariate = multivariate});
    // Simpson's rule on 2000 intervals.
    const int n = 2000;
    double sum = 0;
    for (int i = 0; i <= n; ++i) {
      const double w = i == 0 || i == n ? 1 : (i % 2 ? 4 : 2);
      sum += w * std::exp(est.LogPdf({static_cast<double>(i) / n}));
    }
    EXPECT_NEAR(sum / (3.0 * n), 1.0, 1e-6) << multivariate;
  }
}

TEST(ParzenEstimatorTest, IntegerAndCategoryProbabilitiesSumToOne) {
  const SearchSpace space =
      SearchSpace::Create({Integer("k", 1, 9),
                           Integer("m", 1, 1000, Scale::kLog),
                           Categorical("c", 4)})
          .value();
  std::vector<GroupPoint> pts;
  for (const Assignment& a : std::vector<Assignment>{
           {2, 10, 1}, {2, 700, 3}, {9, 1, 1}, {5, 30, 0}}) {
    const Eigen::VectorXd u = space.Encode(a);
    pts.push_back({u[0], u[1], a[2]});
  }
  const ParzenEstimator est(space, {{0, 0}, {1, 0}, {2, 4}}, pts, {1, 1, 1, 1},
                            {.multivariate = true});
  // Sum over every value of the first two and every category: 1.
  double total = 0;
  for (int k = 1; k <= 9; ++k) {
    for (int m = 1; m <= 1000; ++m) {
      for (int c = 0; c < 4; ++c) {
        const Eigen::VectorXd u =
            space.Encode({double(k), double(m), double(c)});
        total += std::exp(est.LogPdf({u[0], u[1], double(c)}));
      }
    }
  }
  EXPECT_NEAR(total, 1.0, 1e-9);
  // The observed category 1 (twice) is likelier than the unobserved 2.
  const Eigen::VectorXd u = space.Encode({2, 10, 0});
  EXPECT_GT(est.LogPdf({u[0], u[1], 1}), est.LogPdf({u[0], u[1], 2}));
}

TEST(ParzenEstimatorTest, CellsAreWhatDecodesToOneValue) {
  const ParameterConfig lin = Integer("k", 3, 6);
  // Four values, each a quarter of [0,1].
  EXPECT_THAT(
      std::vector<double>({CellOf(lin, 0.3).first, CellOf(lin, 0.3).second}),
      ElementsAre(0.25, 0.5));
  const ParameterConfig log = Integer("m", 1, 100, Scale::kLog);
  const SearchSpace space = SearchSpace::Create({log}).value();
  for (double u : {0.0, 0.13, 0.5, 0.999, 1.0}) {
    const auto [lo, hi] = CellOf(log, u);
    const Assignment at = space.Decode(Eigen::VectorXd::Constant(1, u));
    EXPECT_LE(lo, u);
    EXPECT_GE(hi, u);
    EXPECT_EQ(space.Decode(Eigen::VectorXd::Constant(1, lo + 1e-9)), at);
    EXPECT_EQ(space.Decode(Eigen::VectorXd::Constant(1, hi - 1e-9)), at);
  }
}

TEST(ParzenEstimatorTest, SamplesFollowTheDensity) {
  const SearchSpace space = Box(1);
  const ParzenEstimator est(space, {{0, 0}}, {{0.1}, {0.15}, {0.8}}, {1, 1, 1},
                            {.multivariate = false});
  SplitMix64 rng(7);
  const int n = 40000, bins = 10;
  std::vector<int> count(bins);
  for (int i = 0; i < n; ++i) {
    const double x = est.Sample(rng)[0];
    ASSERT_GE(x, 0.0);
    ASSERT_LE(x, 1.0);
    ++count[std::min(bins - 1, static_cast<int>(x * bins))];
  }
  for (int b = 0; b < bins; ++b) {
    double p = 0;  // The bin's mass by the midpoint rule on 100 points.
    for (int i = 0; i < 100; ++i) {
      p += std::exp(est.LogPdf({(b + (i + 0.5) / 100) / bins})) / (100 * bins);
    }
    // Four standard deviations of a binomial count.
    EXPECT_NEAR(count[b], n * p, 4 * std::sqrt(n * p * (1 - p)) + 1) << b;
  }
}

TEST(ParameterGroupsTest, FlatSpaceIsOneGroupConditionalSplitsByActivity) {
  EXPECT_THAT(tpe::ParameterGroups(Box(3)), ElementsAre(ElementsAre(0, 1, 2)));
  // model in {svm, tree, forest}; C, gamma under svm; depth under tree or
  // forest; trees under forest only; lr always.
  std::vector<ParameterConfig> params = {Categorical("model", 3)};
  ParameterConfig c;
  c.name = "C";
  c.parent = 0;
  c.parent_values = {0};
  ParameterConfig gamma = c;
  gamma.name = "gamma";
  ParameterConfig depth = Integer("depth", 1, 10);
  depth.parent = 0;
  depth.parent_values = {2, 1};
  ParameterConfig trees = Integer("trees", 1, 100);
  trees.parent = 0;
  trees.parent_values = {2};
  ParameterConfig lr;
  lr.name = "lr";
  params.insert(params.end(), {c, depth, gamma, trees, lr});
  const SearchSpace space = SearchSpace::Create(params).value();
  EXPECT_THAT(tpe::ParameterGroups(space),
              ElementsAre(ElementsAre(0, 5), ElementsAre(1, 3), ElementsAre(2),
                          ElementsAre(4)));
}

// Minimized sphere centred at 0.37 as a maximization.
double NegSphere(const Assignment& a) {
  double s = 0;
  for (double v : a) s += (v - 0.37) * (v - 0.37);
  return -s;
}

std::vector<Observation> Evaluated(const SearchSpace& space, int n,
                                   uint64_t seed) {
  std::vector<Observation> h;
  SplitMix64 rng(seed);
  for (int i = 0; i < n; ++i) {
    Eigen::VectorXd u(space.dim());
    for (int j = 0; j < space.dim(); ++j) u[j] = rng.NextUnit();
    const Assignment a = space.Decode(u);
    h.push_back({a, Outcome::kCompleted, {NegSphere(a)}});
  }
  return h;
}

double MedianPairwiseDistance(const SearchSpace& space,
                              const std::vector<Assignment>& batch) {
  std::vector<double> d;
  for (size_t a = 0; a < batch.size(); ++a) {
    for (size_t b = a + 1; b < batch.size(); ++b) {
      d.push_back((space.Encode(batch[a]) - space.Encode(batch[b])).norm());
    }
  }
  std::sort(d.begin(), d.end());
  return d[d.size() / 2];
}

TEST(TpeSuggesterTest, ConstantLiarSpreadsABatch) {
  const SearchSpace space = Box(4);
  std::vector<double> with, without;
  for (uint64_t seed = 0; seed < 6; ++seed) {
    SuggestRequest r;
    r.space = &space;
    r.history = Evaluated(space, 40, seed);
    r.trials_created = 40;
    r.count = 8;
    r.seed = seed;
    for (bool liar : {true, false}) {
      TpeSuggester tpe({.constant_liar = liar});
      const std::vector<Assignment> batch = tpe.Suggest(r).value();
      ASSERT_EQ(batch.size(), 8u);
      const std::set<Assignment> distinct(batch.begin(), batch.end());
      EXPECT_EQ(distinct.size(), 8u);
      (liar ? with : without).push_back(MedianPairwiseDistance(space, batch));
    }
  }
  std::sort(with.begin(), with.end());
  std::sort(without.begin(), without.end());
  // The liar's batches are wider in the median and in the narrowest one.
  EXPECT_GT(with[3], 1.5 * without[3]);
  EXPECT_GT(with[0], without[0]);
}

TEST(TpeSuggesterTest, PendingTrialsPushTheNextPointAway) {
  const SearchSpace space = Box(2);
  // Suggest once, then again with ten trials pending around that
  // suggestion: the liar moves the next point away, without it the model
  // proposes the same region.
  double far_with = 0, far_without = 0;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    SuggestRequest r;
    r.space = &space;
    r.history = Evaluated(space, 30, seed);
    r.trials_created = 30;
    r.seed = seed;
    TpeSuggester plain;
    const Assignment first = plain.Suggest(r).value().front();
    for (int k = 0; k < 10; ++k) {
      Assignment near = first;
      near[k % 2] = std::clamp(near[k % 2] + 0.002 * (k - 5), 0.0, 1.0);
      r.history.push_back({near, Outcome::kPending});
    }
    r.trials_created += 10;
    for (bool liar : {true, false}) {
      TpeSuggester tpe({.constant_liar = liar});
      const Assignment next = tpe.Suggest(r).value().front();
      const double dist = (space.Encode(next) - space.Encode(first)).norm();
      (liar ? far_with : far_without) += dist;
    }
  }
  EXPECT_GT(far_with, 1.5 * far_without);
}

TEST(TpeSuggesterTest, SameRequestSameAnswer) {
  const SearchSpace space =
      SearchSpace::Create(
          {Integer("k", 1, 50, Scale::kLog), Categorical("c", 3), Double("x")})
          .value();
  SuggestRequest r;
  r.space = &space;
  SplitMix64 rng(3);
  for (int i = 0; i < 25; ++i) {
    const Assignment a = {std::floor(1 + 49 * rng.NextUnit()),
                          std::floor(3 * rng.NextUnit()), rng.NextUnit()};
    r.history.push_back({a, Outcome::kCompleted, {a[2] - 0.1 * a[1]}});
  }
  r.history.push_back({{4, 1, 0.2}, Outcome::kPending});
  r.history.push_back({{7, 0, 0.9}, Outcome::kInfeasible});
  r.trials_created = 27;
  r.count = 5;
  r.seed = 11;
  TpeSuggester a, b;
  const std::vector<Assignment> first = a.Suggest(r).value();
  EXPECT_EQ(a.Suggest(r).value(), first);
  EXPECT_EQ(b.Suggest(r).value(), first);
  for (const Assignment& x : first) EXPECT_TRUE(space.Validate(x).ok());
}

TEST(TpeSuggesterTest, ConditionalSpaceGivesValidPointsAndLearnsTheBranch) {
  // Branch 0's x scores up to 1 near 0.8, branch 1's y at most 0.3.
  ParameterConfig x = Double("x");
  x.parent = 0;
  x.parent_values = {0};
  ParameterConfig y = Double("y");
  y.parent = 0;
  y.parent_values = {1};
  const SearchSpace space =
      SearchSpace::Create({Categorical("b", 2), x, y}).value();
  for (int joint_every : {0, 1, 2}) {
    TpeSuggester tpe({.joint_every = joint_every});
    std::vector<Observation> h;
    for (int t = 0; t < 40; ++t) {
      SuggestRequest r;
      r.space = &space;
      r.history = h;
      r.trials_created = t;
      r.seed = 5;
      const Assignment a = tpe.Suggest(r).value().front();
      ASSERT_TRUE(space.Validate(a).ok());
      const double v = a[0] == 0 ? 1 - std::abs(a[1] - 0.8) : 0.3 * a[2];
      h.push_back({a, Outcome::kCompleted, {v}});
    }
    int branch0 = 0;
    for (int t = 20; t < 40; ++t) branch0 += h[t].x[0] == 0;
    EXPECT_GE(branch0, 15) << joint_every;
  }
}

double Best(const std::vector<Observation>& h) {
  double best = -std::numeric_limits<double>::infinity();
  for (const Observation& o : h) best = std::max(best, o.values[0]);
  return best;
}

std::vector<Observation> RunStudy(Suggester& s, const SearchSpace& space,
                                  int trials, int batch, uint64_t seed) {
  std::vector<Observation> h;
  while (static_cast<int>(h.size()) < trials) {
    SuggestRequest r;
    r.space = &space;
    r.history = h;
    r.trials_created = static_cast<int64_t>(h.size());
    r.count = batch;
    r.seed = seed;
    absl::StatusOr<std::vector<Assignment>> batch = s.Suggest(r);
    if (!batch.ok()) {
      ADD_FAILURE() << batch.status();
      break;
    }
    for (const Assignment& a : *batch) {
      h.push_back({a, Outcome::kCompleted, {NegSphere(a)}});
    }
  }
  return h;
}

TEST(TpeSuggesterTest, BeatsRandomAcrossSeedsSequentialAndInBatches) {
  const SearchSpace space = Box(5);
  for (int batch : {1, 8}) {
    std::vector<double> tpe_best, random_best;
    for (uint64_t seed = 0; seed < 8; ++seed) {
      TpeSuggester tpe;
      tpe_best.push_back(Best(RunStudy(tpe, space, 64, batch, seed)));
      auto random = MakeSuggester(Algorithm::kRandom);
      random_best.push_back(Best(RunStudy(*random, space, 64, batch, seed)));
    }
    std::sort(tpe_best.begin(), tpe_best.end());
    std::sort(random_best.begin(), random_best.end());
    // Sorted seed by seed: TPE's k-th best beats random's k-th best.
    int wins = 0;
    for (size_t i = 0; i < tpe_best.size(); ++i) {
      wins += tpe_best[i] > random_best[i];
    }
    EXPECT_GE(wins, 7) << "batch " << batch;
    EXPECT_GT(tpe_best[4], random_best[4]) << "batch " << batch;
  }
}

}  // namespace
}  // namespace hypertune::optimizer
