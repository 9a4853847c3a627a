#include "testing/mo_functions.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "optimizer/pareto.h"
#include "testing/multi_objective.h"

namespace hypertune::bench {
namespace {

constexpr double kPi = 3.14159265358979324;

Eigen::VectorXd ParetoSetPoint(double x1, int d, double rest) {
  Eigen::VectorXd x = Eigen::VectorXd::Constant(d, rest);
  x[0] = x1;
  return x;
}

TEST(MultiObjectiveSuiteTest, ParetoSetsMapOntoTheKnownFronts) {
  for (double t : {0.0, 0.25, 0.5, 1.0}) {
    const Eigen::VectorXd x = ParetoSetPoint(t, 6, 0.0);
    EXPECT_NEAR(Zdt1(x)[1], 1 - std::sqrt(t), 1e-15);
    EXPECT_NEAR(Zdt2(x)[1], 1 - t * t, 1e-15);
    EXPECT_NEAR(Zdt3(x)[1], 1 - std::sqrt(t) - t * std::sin(10 * kPi * t),
                1e-14);
    // Off the set, g > 1 pushes f2 up.
    EXPECT_GT(Zdt1(ParetoSetPoint(t, 6, 0.1))[1], Zdt1(x)[1]);
    Eigen::VectorXd y = ParetoSetPoint(t, 6, 0.5);
    y[1] = 0.3;
    EXPECT_NEAR(Dtlz2(y).norm(), 1.0, 1e-14);
  }
}

// The hypervolume of `samples` points of a 2-objective front f2(f1),
// minimized, below `reference`.
template <typename F>
double SampledFrontVolume(F f2, const Eigen::VectorXd& reference, int samples) {
  Eigen::MatrixXd y(samples, 2);
  for (int k = 0; k < samples; ++k) {
    const double f1 = static_cast<double>(k) / (samples - 1);
    y.row(k) << -f1, -f2(f1);
  }
  return optimizer::Hypervolume(y, -reference);
}

TEST(MultiObjectiveSuiteTest, FrontHypervolumesMatchDenseSamples) {
  const MultiObjectiveProblem zdt1 = FindMultiObjectiveProblem("zdt1").value();
  const MultiObjectiveProblem zdt2 = FindMultiObjectiveProblem("zdt2").value();
  const MultiObjectiveProblem zdt3 = FindMultiObjectiveProblem("zdt3").value();
  const MultiObjectiveProblem dtlz2 =
      FindMultiObjectiveProblem("dtlz2").value();
  // Sampled fronts fall short by O(1 / samples).
  const int n = 20000;
  const double zdt1_sampled = SampledFrontVolume(
      [](double t) { return 1 - std::sqrt(t); }, zdt1.reference, n);
  EXPECT_LT(zdt1_sampled, zdt1.front_hypervolume);
  EXPECT_NEAR(zdt1_sampled, zdt1.front_hypervolume, 1e-4);
  const double zdt2_sampled =
      SampledFrontVolume([](double t) { return 1 - t * t; }, zdt2.reference, n);
  EXPECT_LT(zdt2_sampled, zdt2.front_hypervolume);
  EXPECT_NEAR(zdt2_sampled, zdt2.front_hypervolume, 1e-4);
  const double zdt3_sampled = SampledFrontVolume(
      [](double t) { return 1 - std::sqrt(t) - t * std::sin(10 * kPi * t); },
      zdt3.reference, n);
  EXPECT_NEAR(zdt3_sampled, zdt3.front_hypervolume, 1e-3);
  EXPECT_NEAR(Zdt3FrontHypervolume(zdt3.reference, 1000000),
              zdt3.front_hypervolume, 2e-6);
  // DTLZ2: a grid on the sphere's orthant approaches the volume from below.
  const int k = 60;
  Eigen::MatrixXd sphere((k + 1) * (k + 1), 3);
  for (int i = 0; i <= k; ++i) {
    for (int j = 0; j <= k; ++j) {
      Eigen::VectorXd x = Eigen::VectorXd::Constant(6, 0.5);
      x[0] = static_cast<double>(i) / k;
      x[1] = static_cast<double>(j) / k;
      sphere.row(i * (k + 1) + j) = -Dtlz2(x).transpose();
    }
  }
  const double dtlz2_sampled = optimizer::Hypervolume(sphere, -dtlz2.reference);
  EXPECT_LT(dtlz2_sampled, dtlz2.front_hypervolume);
  EXPECT_GT(dtlz2_sampled, 0.97 * dtlz2.front_hypervolume);
}

TEST(ConstrainedSuiteTest, MinimaAreFeasibleAndNoGridPointBeatsThem) {
  for (const ConstrainedProblem& p : ConstrainedSuite()) {
    double best = std::numeric_limits<double>::infinity(), worst = -best;
    const int k = 400;
    for (int i = 0; i <= k; ++i) {
      for (int j = 0; j <= k; ++j) {
        Eigen::VectorXd x(2);
        x << p.bounds[0].first +
                 (p.bounds[0].second - p.bounds[0].first) * i / k,
            p.bounds[1].first +
                (p.bounds[1].second - p.bounds[1].first) * j / k;
        const double f = p.f(x);
        worst = std::max(worst, f);
        if ((p.constraints(x).array() <= 0).all()) best = std::min(best, f);
      }
    }
    EXPECT_GE(best, p.minimum - 1e-7) << p.name;
    EXPECT_LT(best, p.minimum + 1e-2) << p.name;
    EXPECT_LE(worst, p.minimum + p.infeasible_regret + 1e-9) << p.name;
    EXPECT_GT(worst, p.minimum + 0.99 * p.infeasible_regret) << p.name;
  }
  // The known minimizers.
  Eigen::VectorXd gardner(2), branin(2);
  gardner << 1.5 * kPi, 0;
  branin << kPi, 2.275;
  EXPECT_NEAR(GardnerObjective(gardner), -2.0, 1e-12);
  EXPECT_LE(GardnerConstraints(gardner)[0], 0.0);
  EXPECT_NEAR(BraninObjective(branin), 0.397887357729738, 1e-9);
  EXPECT_LE(BraninDiscConstraints(branin)[0], 0.0);
}

TEST(MetricsRunsTest, RunsRecordOneMonotoneFigurePerTrial) {
  const MetricsRunOptions options{.algorithm = optimizer::Algorithm::kRandom,
                                  .trials = 20,
                                  .parallel = 2,
                                  .seed = 3};
  const MultiObjectiveRun mo =
      RunMultiObjective(FindMultiObjectiveProblem("dtlz2").value(), options)
          .value();
  ASSERT_EQ(mo.hypervolume_fraction.size(), 20u);
  for (size_t k = 1; k < mo.hypervolume_fraction.size(); ++k) {
    EXPECT_GE(mo.hypervolume_fraction[k], mo.hypervolume_fraction[k - 1]);
  }
  EXPECT_GE(mo.hypervolume_fraction.front(), 0.0);
  EXPECT_LE(mo.hypervolume_fraction.back(), 1.0);
  const ConstrainedProblem gramacy = FindConstrainedProblem("gramacy").value();
  const ConstrainedRun c = RunConstrained(gramacy, options).value();
  ASSERT_EQ(c.best_regret.size(), 20u);
  for (size_t k = 1; k < c.best_regret.size(); ++k) {
    EXPECT_LE(c.best_regret[k], c.best_regret[k - 1]);
  }
  EXPECT_LE(c.best_regret.front(), gramacy.infeasible_regret);
  EXPECT_GE(c.best_regret.back(), 0.0);
  EXPECT_FALSE(FindConstrainedProblem("nope").ok());
  EXPECT_FALSE(FindMultiObjectiveProblem("nope").ok());
}

TEST(MetricsRunsTest, LatencyStudyRunsEveryAlgorithm) {
  for (optimizer::Algorithm a :
       {optimizer::Algorithm::kRandom, optimizer::Algorithm::kTpe,
        optimizer::Algorithm::kGpBandit}) {
    const MetricsLatency l = MeasureMetricsLatency(a, 3, 30, 2, 1, 2).value();
    EXPECT_LE(l.median_ms, l.max_ms);
    EXPECT_GE(l.median_ms, 0.0);
  }
}

}  // namespace
}  // namespace hypertune::bench
