#include "testing/regret.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace hypertune::bench {
namespace {

using optimizer::Algorithm;

RegretOptions Options(Algorithm algorithm, int trials, int parallel,
                      uint64_t seed) {
  RegretOptions o;
  o.algorithm = algorithm;
  o.trials = trials;
  o.parallel = parallel;
  o.seed = seed;
  return o;
}

TEST(RegretTest, BestRegretIsNonNegativeNonIncreasingAndOnePerTrial) {
  for (const BenchmarkFunction& f : PublicSuite()) {
    for (int parallel : {1, 4}) {
      const RegretRun run =
          RunRegret(f, Options(Algorithm::kQuasiRandom, 30, parallel, 1))
              .value();
      ASSERT_EQ(run.best_regret.size(), 30u) << f.name;
      for (size_t k = 0; k < run.best_regret.size(); ++k) {
        EXPECT_GE(run.best_regret[k], 0.0) << f.name;
        if (k > 0) {
          EXPECT_LE(run.best_regret[k], run.best_regret[k - 1]);
        }
      }
      EXPECT_GE(run.seconds, 0.0);
    }
  }
}

TEST(RegretTest, HistoryFreeAlgorithmsIgnoreParallelism) {
  // RANDOM and QUASI_RANDOM pick by trial index alone, and trials complete in
  // creation order, so pending trials change nothing.
  const BenchmarkFunction f = FindFunction("hartmann6").value();
  for (Algorithm a : {Algorithm::kRandom, Algorithm::kQuasiRandom}) {
    const RegretRun sequential = RunRegret(f, Options(a, 40, 1, 3)).value();
    const RegretRun parallel = RunRegret(f, Options(a, 40, 4, 3)).value();
    EXPECT_EQ(sequential.best_regret, parallel.best_regret);
  }
}

TEST(RegretTest, SeedsGiveDifferentRunsAndRepeatExactly) {
  const BenchmarkFunction f = FindFunction("branin2").value();
  const RegretOptions options = Options(Algorithm::kRandom, 20, 1, 5);
  const RegretOptions other = Options(Algorithm::kRandom, 20, 1, 6);
  EXPECT_EQ(RunRegret(f, options)->best_regret,
            RunRegret(f, options)->best_regret);
  EXPECT_NE(RunRegret(f, options)->best_regret,
            RunRegret(f, other)->best_regret);
}

TEST(RegretTest, OptimizerLabels) {
  EXPECT_EQ(OptimizerLabel(Algorithm::kQuasiRandom, 1),
            "hypertune-quasi_random");
  EXPECT_EQ(OptimizerLabel(Algorithm::kRandom, 4), "hypertune-random-p4");
}

TEST(LatencyTest, PercentileInterpolatesLikeNumpy) {
  const std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 3);
  EXPECT_DOUBLE_EQ(Percentile(v, 95), 4.8);  // numpy.percentile: 4.8
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 5);
  EXPECT_DOUBLE_EQ(Percentile({7}, 95), 7);
}

TEST(LatencyTest, MeasuresEveryRound) {
  const LatencyResult r =
      MeasureLatency(Algorithm::kQuasiRandom, 3, 50, 5).value();
  EXPECT_GE(r.median_ms, 0.0);
  EXPECT_LE(r.median_ms, r.p95_ms);
  EXPECT_LE(r.p95_ms, r.max_ms);
}

}  // namespace
}  // namespace hypertune::bench
