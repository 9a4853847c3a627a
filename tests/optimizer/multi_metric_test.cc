// Multi-objective and constrained requests (suggester.h, metrics.h) through
// every algorithm, and GP_BANDIT's behaviour on them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "optimizer/gp_bandit_suggester.h"
#include "optimizer/metrics.h"
#include "optimizer/pareto.h"
#include "optimizer/suggester.h"
#include "optimizer/tpe_suggester.h"
#include "tests/optimizer/spaces.h"

namespace hypertune::optimizer {
namespace {

using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

SearchSpace MixedSpace() {
  ParameterConfig x, n, c;
  x.name = "x";
  n.name = "n";
  n.type = ParameterType::kInteger;
  n.min = 1;
  n.max = 8;
  c.name = "c";
  c.type = ParameterType::kCategorical;
  c.categories = {"a", "b", "c"};
  return SearchSpace::Create({x, n, c}).value();
}

MetricConfig Objective() { return MetricConfig{}; }
MetricConfig AtMost(double upper) {
  return MetricConfig{MetricRole::kConstraint, -kInf, upper};
}

Observation Completed(Assignment x, std::vector<double> values) {
  return Observation{std::move(x), Outcome::kCompleted, std::move(values)};
}

// Two objectives (maximized) on [0,1]^2 whose front is x1 = 0.5, x0 in
// [0, 1]: y0 = -x0^2 - (x1 - 0.5)^2, y1 = -(1 - x0)^2 - (x1 - 0.5)^2.
std::vector<double> TwoBowls(const Assignment& a) {
  const double b = (a[1] - 0.5) * (a[1] - 0.5);
  return {-a[0] * a[0] - b, -(1 - a[0]) * (1 - a[0]) - b};
}

// Runs `trials` sequential trials of a metric function; returns the history.
template <typename F>
std::vector<Observation> RunStudy(Suggester& s, const SearchSpace& space,
                                  const std::vector<MetricConfig>& metrics, F f,
                                  int trials, uint64_t seed) {
  return RunSequentialStudy(
      s, space, trials, seed, [&](SuggestRequest& r) { r.metrics = metrics; },
      [&](const Assignment& a) { return Completed(a, f(a)); });
}

// A history with every kind of entry: completed (one with infinite
// values), infeasible and pending, for two objectives and one constraint.
SuggestRequest MixedRequest(const SearchSpace& space) {
  SuggestRequest r;
  r.space = &space;
  r.metrics = {Objective(), Objective(), AtMost(1.0)};
  r.seed = 4;
  const std::vector<Assignment> xs = {{0.2, 3, 0},  {0.7, 5, 1},  {0.4, 1, 2},
                                      {0.9, 8, 0},  {0.1, 2, 1},  {0.55, 6, 2},
                                      {0.3, 4, 1},  {0.8, 7, 2},  {0.65, 3, 0},
                                      {0.05, 5, 2}, {0.45, 2, 0}, {0.95, 1, 1}};
  for (size_t i = 0; i < xs.size(); ++i) {
    const Assignment& x = xs[i];
    r.history.push_back(Completed(
        x,
        {-x[0] * x[0] + 0.1 * x[2], -(1 - x[0]) * x[1] / 8, x[0] + x[1] / 8}));
  }
  r.history[3].values[0] = -kInf;  // Counts as the worst value seen.
  r.history[7].values[2] = kInf;   // Misses the constraint.
  r.history.push_back({{0.5, 4, 1}, Outcome::kInfeasible});
  r.history.push_back({{0.35, 6, 0}, Outcome::kPending});
  r.trials_created = static_cast<int64_t>(r.history.size());
  return r;
}

TEST(MetricRequestTest, ValidationNamesWhatIsWrong) {
  const SearchSpace space = Box(2);
  SuggestRequest r;
  r.space = &space;
  r.metrics = {AtMost(1.0)};
  EXPECT_THAT(ValidateRequest(r).message(), HasSubstr("no objective"));
  r.metrics = {Objective(), MetricConfig{MetricRole::kConstraint, 2.0, 1.0}};
  EXPECT_THAT(ValidateRequest(r).message(), HasSubstr("metrics[1]"));
  r.metrics = {Objective(), AtMost(1.0)};
  r.history = {Completed({0.1, 0.2}, {1.0})};
  EXPECT_THAT(ValidateRequest(r).message(),
              HasSubstr("history[0].values: 1 values for 2 metrics"));
  r.history = {Completed({0.1, 0.2}, {1.0, std::nan("")})};
  EXPECT_THAT(ValidateRequest(r).message(), HasSubstr("history[0].values[1]"));
  // Infinities are values; pending and infeasible trials carry none.
  r.history = {Completed({0.1, 0.2}, {-kInf, kInf}),
               {{0.3, 0.3}, Outcome::kPending},
               {{0.4, 0.3}, Outcome::kInfeasible}};
  EXPECT_TRUE(ValidateRequest(r).ok());
  for (Algorithm a : {Algorithm::kRandom, Algorithm::kQuasiRandom,
                      Algorithm::kTpe, Algorithm::kGpBandit}) {
    r.metrics = {AtMost(1.0)};
    EXPECT_EQ(MakeSuggester(a)->Suggest(r).status().code(),
              absl::StatusCode::kInvalidArgument)
        << AlgorithmName(a);
  }
}

TEST(MetricRequestTest, TableReplacesInfinitiesAndJudgesFeasibility) {
  const SearchSpace space = Box(1);
  SuggestRequest r;
  r.space = &space;
  r.metrics = {Objective(), AtMost(0.5),
               MetricConfig{MetricRole::kConstraint, 1.0, 2.0}};
  r.history = {Completed({0.1}, {3.0, 0.2, 1.5}),
               {{0.2}, Outcome::kPending},
               Completed({0.3}, {-kInf, 0.7, 1.0}),
               Completed({0.4}, {kInf, kInf, 2.5}),
               Completed({0.5}, {-1.0, -kInf, 1.25})};
  ASSERT_TRUE(ValidateRequest(r).ok());
  const MetricTable t = TabulateMetrics(r);
  EXPECT_EQ(t.objectives, (std::vector<int>{0}));
  EXPECT_EQ(t.constraints, (std::vector<int>{1, 2}));
  EXPECT_EQ(t.rows, (std::vector<int>{0, 2, 3, 4}));
  // +-infinity: the worst finite objective value, -1.
  EXPECT_EQ(t.objective_values.col(0), Eigen::Vector4d(3, -1, -1, -1));
  // Constraint values clamped to their finite range [0.2, 0.7].
  EXPECT_EQ(t.constraint_values.col(0), Eigen::Vector4d(0.2, 0.7, 0.7, 0.2));
  EXPECT_EQ(t.feasible, (std::vector<bool>{true, false, false, true}));
  EXPECT_DOUBLE_EQ(t.violation[1], 0.2);
  EXPECT_EQ(t.violation[2], kInf);
  EXPECT_EQ(t.violation[3], 0.0);
}

TEST(MetricRequestTest, PreferenceOrderIsFeasibleThenRankThenViolation) {
  const SearchSpace space = Box(1);
  SuggestRequest r;
  r.space = &space;
  r.metrics = {Objective(), Objective(), AtMost(0.0)};
  r.history = {
      Completed({0.0}, {1, 1, 0.5}),  // 0: best outcome, misses by 0.5.
      Completed({0.1}, {0, 3, 0}),    // 1: front.
      Completed({0.2}, {3, 0, -1}),   // 2: front.
      Completed({0.3}, {2, 2, 0}),    // 3: front, the largest box.
      Completed({0.4}, {1, 1, 0}),    // 4: rank 1.
      Completed({0.5}, {0, 0, 0.1}),  // 5: misses by 0.1.
  };
  const MetricTable t = TabulateMetrics(r);
  // Keep 2 of the front's 3: greedy hypervolume takes (2, 2) first.
  const std::vector<int> order = PreferenceOrder(t, 2);
  ASSERT_EQ(order.size(), 6u);
  EXPECT_EQ(order[0], 3);
  EXPECT_THAT(std::vector<int>(order.begin() + 1, order.begin() + 3),
              ::testing::UnorderedElementsAre(1, 2));
  EXPECT_EQ(order[3], 4);
  EXPECT_EQ(order[4], 5);
  EXPECT_EQ(order[5], 0);
}

class MetricSuggesterTest : public ::testing::TestWithParam<Algorithm> {};

TEST_P(MetricSuggesterTest, ReturnsValidDeterministicPoints) {
  const SearchSpace space = MixedSpace();
  const SuggestRequest r = MixedRequest(space);
  SuggestRequest batch = r;
  batch.count = 3;
  const auto a = MakeSuggester(GetParam());
  const std::vector<Assignment> first = a->Suggest(batch).value();
  ASSERT_EQ(first.size(), 3u);
  for (const Assignment& x : first) EXPECT_TRUE(space.Validate(x).ok());
  // Same request, same answer: on the same instance and on a fresh one.
  EXPECT_EQ(a->Suggest(batch).value(), first);
  EXPECT_EQ(MakeSuggester(GetParam())->Suggest(batch).value(), first);
  // No suggestion repeats a trial of the history.
  for (const Assignment& x : first) {
    for (const Observation& o : r.history) EXPECT_NE(x, o.x);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllAlgorithms, MetricSuggesterTest,
    ::testing::Values(Algorithm::kRandom, Algorithm::kQuasiRandom,
                      Algorithm::kTpe, Algorithm::kGpBandit),
    [](const auto& info) { return std::string(AlgorithmName(info.param)); });

// One objective in the metrics form is the single-objective problem: the
// same suggestions as the form without metrics.
TEST(MetricRequestTest, OneObjectiveAloneMatchesTheFormWithoutMetrics) {
  const SearchSpace space = Box(2);
  SuggestRequest plain, with_metrics;
  plain.space = with_metrics.space = &space;
  with_metrics.metrics = {Objective()};
  for (int t = 0; t < 12; ++t) {
    const Assignment x = {0.07 * t + 0.05, std::fmod(0.37 * t, 1.0)};
    const double y = -std::pow(x[0] - 0.4, 2) - std::pow(x[1] - 0.6, 2);
    plain.history.push_back({x, Outcome::kCompleted, {y}});
    with_metrics.history.push_back(Completed(x, {y}));
  }
  plain.trials_created = with_metrics.trials_created = 12;
  plain.count = with_metrics.count = 2;
  for (Algorithm a : {Algorithm::kTpe, Algorithm::kGpBandit}) {
    EXPECT_EQ(MakeSuggester(a)->Suggest(with_metrics).value(),
              MakeSuggester(a)->Suggest(plain).value())
        << AlgorithmName(a);
  }
}

// A long-lived instance (with caches) and a fresh one for every request
// agree bit for bit in the metrics path too, across the warm-refit,
// incremental and local regimes.
TEST(GpBanditMetricsTest, FreshInstanceReplayingARequestAgrees) {
  GpBanditOptions options;
  options.warm_refit_below = 12;
  options.max_local_points = 25;
  options.max_fit_points = 20;
  options.acquisition_optimizer.raw_samples = 128;
  const SearchSpace space = Box(2);
  GpBanditSuggester long_lived(options);
  std::vector<Observation> history;
  for (int t = 0; t < 32; ++t) {
    SuggestRequest r;
    r.space = &space;
    r.history = history;
    r.trials_created = t;
    r.seed = 5;
    r.metrics = {Objective(), Objective(), AtMost(0.8)};
    r.count = t % 3 == 0 ? 2 : 1;
    const std::vector<Assignment> a = long_lived.Suggest(r).value();
    GpBanditSuggester fresh(options);
    EXPECT_EQ(fresh.Suggest(r).value(), a) << "trial " << t;
    EXPECT_EQ(long_lived.Suggest(r).value(), a) << "trial " << t;
    std::vector<double> v = TwoBowls(a.front());
    v.push_back(a.front()[0] + a.front()[1]);
    history.push_back(Completed(a.front(), v));
  }
}

TEST(GpBanditMetricsTest, BatchesAndPendingTrialsAreNotNearDuplicates) {
  const SearchSpace space = Box(2);
  auto distance = [](const Assignment& a, const Assignment& b) {
    return std::hypot(a[0] - b[0], a[1] - b[1]);
  };
  const std::vector<MetricConfig> metrics = {Objective(), Objective()};
  for (uint64_t seed : {1, 2}) {
    GpBanditSuggester gp;
    SuggestRequest r;
    r.space = &space;
    r.history = RunStudy(gp, space, metrics, TwoBowls, 14, seed);
    r.trials_created = 14;
    r.count = 4;
    r.seed = seed;
    r.metrics = metrics;
    const std::vector<Assignment> batch = gp.Suggest(r).value();
    ASSERT_EQ(batch.size(), 4u);
    EXPECT_TRUE(gp.last_fallback_reason().empty()) << gp.last_fallback_reason();
    for (size_t i = 0; i < batch.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        EXPECT_GT(distance(batch[i], batch[j]), 0.01) << i << " " << j;
      }
    }
    SuggestRequest single = r;
    single.count = 1;
    std::vector<Assignment> picks;
    for (int i = 0; i < 4; ++i) {
      picks.push_back(gp.Suggest(single).value().front());
      for (size_t j = 0; j + 1 < picks.size(); ++j) {
        EXPECT_GT(distance(picks.back(), picks[j]), 0.01) << i << " " << j;
      }
      single.history.push_back({picks.back(), Outcome::kPending});
      ++single.trials_created;
    }
  }
}

// The hypervolume of a history's outcomes above r, over the true front's.
double HypervolumeFraction(const std::vector<Observation>& history,
                           const Eigen::VectorXd& r, double front_volume) {
  Eigen::MatrixXd y(history.size(), 2);
  for (size_t i = 0; i < history.size(); ++i) {
    y(static_cast<Eigen::Index>(i), 0) = history[i].values[0];
    y(static_cast<Eigen::Index>(i), 1) = history[i].values[1];
  }
  return Hypervolume(y, r) / front_volume;
}

TEST(GpBanditMetricsTest, SpreadsAlongTheParetoFront) {
  const SearchSpace space = Box(2);
  const std::vector<MetricConfig> metrics = {Objective(), Objective()};
  const Eigen::VectorXd r = Eigen::Vector2d(-1, -1);
  // The true front (x1 = 0.5): y = (-t^2, -(1 - t)^2), t in [0, 1].
  Eigen::MatrixXd front(1001, 2);
  for (int k = 0; k <= 1000; ++k) {
    const double t = k / 1000.0;
    front.row(k) << -t * t, -(1 - t) * (1 - t);
  }
  const double front_volume = Hypervolume(front, r);
  for (uint64_t seed : {0, 1, 2}) {
    GpBanditSuggester gp;
    const double ours = HypervolumeFraction(
        RunStudy(gp, space, metrics, TwoBowls, 30, seed), r, front_volume);
    const auto random = MakeSuggester(Algorithm::kRandom);
    const double baseline = HypervolumeFraction(
        RunStudy(*random, space, metrics, TwoBowls, 30, seed), r, front_volume);
    // Random search leaves 5-10% of the hypervolume at 30 trials.
    EXPECT_GT(ours, 0.95) << "seed " << seed;
    EXPECT_LT(1 - ours, 0.6 * (1 - baseline)) << "seed " << seed;
    EXPECT_TRUE(gp.last_fallback_reason().empty()) << gp.last_fallback_reason();
  }
}

// Maximize x0 + x1 on [0,1]^2 subject to x0^2 + x1^2 <= 0.5: the optimum
// 1 at (0.5, 0.5), inside the unconstrained optimum's corner.
std::vector<double> DiscProblem(const Assignment& a) {
  return {a[0] + a[1], a[0] * a[0] + a[1] * a[1]};
}

TEST(GpBanditMetricsTest,
     FindsTheConstrainedOptimumAndAvoidsTheInfeasibleSide) {
  const SearchSpace space = Box(2);
  const std::vector<MetricConfig> metrics = {Objective(), AtMost(0.5)};
  for (uint64_t seed : {0, 1}) {
    GpBanditSuggester gp;
    const std::vector<Observation> h =
        RunStudy(gp, space, metrics, DiscProblem, 30, seed);
    double best = -kInf;
    int deep_misses = 0;
    for (size_t t = 0; t < h.size(); ++t) {
      if (h[t].values[1] <= 0.5) best = std::max(best, h[t].values[0]);
      // Past the initial design, well outside the disc.
      if (t >= 10 && h[t].values[1] > 0.7) ++deep_misses;
    }
    EXPECT_GT(best, 0.99) << "seed " << seed;
    EXPECT_LE(deep_misses, 2) << "seed " << seed;
  }
}

TEST(GpBanditMetricsTest, SeeksFeasibilityBeforeAnyFeasiblePointIsKnown) {
  // Feasible only within 0.12 of (0.85, 0.15); the objective pulls away.
  const SearchSpace space = Box(2);
  const std::vector<MetricConfig> metrics = {Objective(), AtMost(0.12 * 0.12)};
  auto f = [](const Assignment& a) {
    return std::vector<double>{
        -a[0] + a[1], std::pow(a[0] - 0.85, 2) + std::pow(a[1] - 0.15, 2)};
  };
  for (uint64_t seed : {0, 1, 2}) {
    GpBanditSuggester gp;
    const std::vector<Observation> h =
        RunStudy(gp, space, metrics, f, 20, seed);
    int first_feasible = -1;
    for (size_t t = 0; t < h.size() && first_feasible < 0; ++t) {
      if (h[t].values[1] <= 0.12 * 0.12) first_feasible = static_cast<int>(t);
    }
    EXPECT_GE(first_feasible, 0) << "seed " << seed;
    EXPECT_LT(first_feasible, 20) << "seed " << seed;
  }
}

TEST(GpBanditMetricsTest, InfiniteObjectiveValuesCountAsTheWorst) {
  const SearchSpace space = Box(2);
  SuggestRequest r;
  r.space = &space;
  r.metrics = {Objective(), Objective()};
  for (int t = 0; t < 12; ++t) {
    const Assignment x = {0.08 * t + 0.02, std::fmod(0.61 * t + 0.1, 1.0)};
    std::vector<double> v = TwoBowls(x);
    // A crashed evaluation of the region x0 > 0.8 reports -infinity.
    if (x[0] > 0.8) v[0] = -kInf;
    r.history.push_back(Completed(x, v));
  }
  r.trials_created = 12;
  r.count = 2;
  GpBanditSuggester gp;
  const std::vector<Assignment> a = gp.Suggest(r).value();
  ASSERT_EQ(a.size(), 2u);
  EXPECT_TRUE(gp.last_fallback_reason().empty()) << gp.last_fallback_reason();
  for (const Assignment& x : a) EXPECT_TRUE(space.Validate(x).ok());
  // The same with +infinity: never a number, also the worst.
  for (Observation& o : r.history) {
    if (o.values[0] == -kInf) o.values[0] = kInf;
  }
  EXPECT_EQ(gp.Suggest(r).value(), a);
}

TEST(TpeMetricsTest, MultiObjectiveSplitBeatsRandom) {
  const SearchSpace space = Box(2);
  const std::vector<MetricConfig> metrics = {Objective(), Objective()};
  const Eigen::VectorXd r = Eigen::Vector2d(-1, -1);
  int wins = 0;
  for (uint64_t seed = 0; seed < 6; ++seed) {
    TpeSuggester tpe;
    const auto random = MakeSuggester(Algorithm::kRandom);
    wins += HypervolumeFraction(
                RunStudy(tpe, space, metrics, TwoBowls, 60, seed), r, 1.0) >
            HypervolumeFraction(
                RunStudy(*random, space, metrics, TwoBowls, 60, seed), r, 1.0);
  }
  EXPECT_GE(wins, 5);
}

}  // namespace
}  // namespace hypertune::optimizer
