#include "optimizer/pareto.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "optimizer/splitmix.h"

namespace hypertune::optimizer {
namespace {

constexpr double kPi = 3.14159265358979324;

Eigen::MatrixXd Points(std::initializer_list<std::vector<double>> rows) {
  Eigen::MatrixXd y(rows.size(), rows.begin()->size());
  int i = 0;
  for (const std::vector<double>& r : rows) {
    for (size_t j = 0; j < r.size(); ++j)
      y(i, static_cast<Eigen::Index>(j)) = r[j];
    ++i;
  }
  return y;
}

// The hypervolume by inclusion-exclusion over every non-empty subset: the
// union of boxes [r, y_i] has measure sum_S (-1)^(|S|+1) vol(cap_S), and
// the intersection of boxes is the box up to their componentwise minimum.
double BruteForceHypervolume(const Eigen::MatrixXd& y,
                             const Eigen::VectorXd& r) {
  const int n = static_cast<int>(y.rows());
  double total = 0;
  for (int mask = 1; mask < (1 << n); ++mask) {
    Eigen::VectorXd corner = Eigen::VectorXd::Constant(
        r.size(), std::numeric_limits<double>::infinity());
    int members = 0;
    for (int i = 0; i < n; ++i) {
      if (mask & (1 << i)) {
        // Element by element: GCC 12 takes Eigen's resize-on-assign here
        // for a use after free (-Wuse-after-free) at -march=x86-64.
        for (Eigen::Index j = 0; j < r.size(); ++j) {
          corner[j] = std::min(corner[j], y(i, j));
        }
        ++members;
      }
    }
    double volume = 1;
    for (Eigen::Index j = 0; j < r.size(); ++j) {
      volume *= std::max(0.0, corner[j] - r[j]);
    }
    total += (members % 2 == 1 ? 1 : -1) * volume;
  }
  return total;
}

Eigen::MatrixXd RandomPoints(int n, int m, uint64_t seed) {
  SplitMix64 rng(seed);
  Eigen::MatrixXd y(n, m);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < m; ++j) y(i, j) = rng.NextUnit();
  }
  return y;
}

TEST(ParetoTest, DominanceNeedsOneStrictImprovement) {
  Eigen::VectorXd a(2), b(2);
  a << 1, 2;
  b << 1, 1;
  EXPECT_TRUE(Dominates(a, b));
  EXPECT_FALSE(Dominates(b, a));
  EXPECT_FALSE(Dominates(a, a));
  b << 2, 1;
  EXPECT_FALSE(Dominates(a, b));
  EXPECT_FALSE(Dominates(b, a));
}

TEST(ParetoTest, FrontKeepsNondominatedRowsAndDuplicates) {
  const Eigen::MatrixXd y =
      Points({{1, 3}, {2, 2}, {1, 1}, {3, 1}, {2, 2}, {0, 0}, {2.5, 0.5}});
  EXPECT_EQ(ParetoFrontRows(y), (std::vector<int>{0, 1, 3, 4}));
}

TEST(ParetoTest, FrontAgreesWithPairwiseDefinition) {
  for (int m : {2, 3, 4}) {
    const Eigen::MatrixXd y = RandomPoints(60, m, 7 + m);
    std::vector<int> expected;
    for (int i = 0; i < y.rows(); ++i) {
      bool dominated = false;
      for (int k = 0; k < y.rows(); ++k) {
        dominated |= Dominates(y.row(k).transpose(), y.row(i).transpose());
      }
      if (!dominated) expected.push_back(i);
    }
    EXPECT_EQ(ParetoFrontRows(y), expected) << "m = " << m;
  }
}

TEST(ParetoTest, NondominatedRanksPeelFronts) {
  const Eigen::MatrixXd y =
      Points({{3, 1}, {1, 3}, {2, 2}, {1, 1}, {2, 1}, {0, 0}, {1, 2}});
  // Front {(3,1), (1,3), (2,2)}; then {(2,1), (1,2)}; then (1,1); then (0,0).
  EXPECT_EQ(NondominatedRanks(y), (std::vector<int>{0, 0, 0, 2, 1, 3, 1}));
  // No row is dominated by one of the same or a worse rank.
  const Eigen::MatrixXd z = RandomPoints(80, 3, 11);
  const std::vector<int> rank = NondominatedRanks(z);
  for (int i = 0; i < z.rows(); ++i) {
    bool has_dominator_one_rank_up = rank[i] == 0;
    for (int k = 0; k < z.rows(); ++k) {
      if (Dominates(z.row(k).transpose(), z.row(i).transpose())) {
        EXPECT_LT(rank[k], rank[i]);
        has_dominator_one_rank_up |= rank[k] == rank[i] - 1;
      }
    }
    EXPECT_TRUE(has_dominator_one_rank_up) << "row " << i;
  }
}

TEST(HypervolumeTest, ClosedFormsInTwoAndThreeObjectives) {
  // Three boxes of widths 1, 2, 3 stacked: 3 + 2 + 1.
  EXPECT_DOUBLE_EQ(
      Hypervolume(Points({{1, 3}, {2, 2}, {3, 1}}), Eigen::VectorXd::Zero(2)),
      6.0);
  // Three boxes of volume 2 meeting in the unit cube: 3 * 2 - 3 * 1 + 1.
  EXPECT_DOUBLE_EQ(Hypervolume(Points({{2, 1, 1}, {1, 2, 1}, {1, 1, 2}}),
                               Eigen::VectorXd::Zero(3)),
                   4.0);
  // One point: the box's volume; points not above r add nothing.
  Eigen::VectorXd r(3);
  r << -1, 0, 0.5;
  EXPECT_DOUBLE_EQ(Hypervolume(Points({{1, 2, 1.5}, {5, -1, 9}}), r),
                   2 * 2 * 1.0);
  EXPECT_DOUBLE_EQ(Hypervolume(Eigen::MatrixXd(0, 3), r), 0.0);
  // One objective: the best value's distance to r.
  EXPECT_DOUBLE_EQ(
      Hypervolume(Points({{0.5}, {2.0}, {-3}}), Eigen::VectorXd::Zero(1)), 2.0);
}

TEST(HypervolumeTest, MatchesInclusionExclusionOnSmallSets) {
  for (int m : {2, 3, 4}) {
    for (uint64_t seed = 0; seed < 5; ++seed) {
      const Eigen::MatrixXd y = RandomPoints(9, m, 100 * m + seed);
      Eigen::VectorXd r = Eigen::VectorXd::Constant(m, 0.1);
      const double exact = Hypervolume(y, r);
      EXPECT_NEAR(exact, BruteForceHypervolume(y, r), 1e-12)
          << "m = " << m << " seed " << seed;
    }
  }
}

TEST(HypervolumeTest, ScalarizationsAverageToTheHypervolume) {
  EXPECT_DOUBLE_EQ(HypervolumeScalarizationConstant(1), 1.0);
  EXPECT_NEAR(HypervolumeScalarizationConstant(2), kPi / 4, 1e-15);
  EXPECT_NEAR(HypervolumeScalarizationConstant(3), kPi / 6, 1e-15);
  for (int m : {2, 3}) {
    const Eigen::MatrixXd y = RandomPoints(12, m, 31 + m);
    const Eigen::VectorXd r = Eigen::VectorXd::Zero(m);
    const Eigen::MatrixXd lambda = PositiveSphereDirections(m, 1 << 14, 5);
    double sum = 0;
    for (int k = 0; k < lambda.rows(); ++k) {
      double best = 0;
      for (int i = 0; i < y.rows(); ++i) {
        best =
            std::max(best, HypervolumeScalarization(y.row(i).transpose(), r,
                                                    lambda.row(k).transpose()));
      }
      sum += best;
    }
    const double estimate =
        HypervolumeScalarizationConstant(m) * sum / lambda.rows();
    EXPECT_NEAR(estimate, Hypervolume(y, r), 0.01 * Hypervolume(y, r))
        << "m = " << m;
  }
}

TEST(HypervolumeTest, ScalarizationIsTheDistanceToTheBoxBoundaryToTheM) {
  Eigen::VectorXd y(2), r(2), lambda(2);
  y << 3, 2;
  r << 1, 1;
  lambda << 0.6, 0.8;
  // min(2 / 0.6, 1 / 0.8)^2.
  EXPECT_DOUBLE_EQ(HypervolumeScalarization(y, r, lambda), 1.25 * 1.25);
  y << 0, 5;  // Below r in the first objective.
  EXPECT_DOUBLE_EQ(HypervolumeScalarization(y, r, lambda), 0.0);
}

TEST(HypervolumeTest, DirectionsAreUnitPositiveAndDeterministic) {
  const Eigen::MatrixXd a = PositiveSphereDirections(3, 64, 9);
  EXPECT_EQ(a, PositiveSphereDirections(3, 64, 9));
  EXPECT_NE(a, PositiveSphereDirections(3, 64, 10));
  for (int k = 0; k < a.rows(); ++k) {
    EXPECT_NEAR(a.row(k).norm(), 1.0, 1e-9);
    EXPECT_GT(a.row(k).minCoeff(), 0.0);
  }
  // Quasi-normal draws: mean ~0, variance ~1 per coordinate.
  const Eigen::MatrixXd z = QuasiNormalSamples(3, 4096, 2);
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(z.col(j).mean(), 0.0, 0.02);
    EXPECT_NEAR(z.col(j).squaredNorm() / z.rows(), 1.0, 0.03);
  }
}

TEST(HypervolumeTest, GreedySubsetIsWithinTheSubmodularBound) {
  for (int m : {2, 3}) {
    const Eigen::MatrixXd y = RandomPoints(10, m, 57 + m);
    const Eigen::VectorXd r = Eigen::VectorXd::Zero(m);
    const int k = 4;
    const std::vector<int> greedy = GreedyHypervolumeSubset(y, r, k);
    ASSERT_EQ(greedy.size(), 4u);
    // The first pick is the largest box.
    int largest = 0;
    for (int i = 0; i < y.rows(); ++i) {
      if (y.row(i).prod() > y.row(largest).prod()) largest = i;
    }
    EXPECT_EQ(greedy.front(), largest);
    double best_subset = 0;
    for (int mask = 0; mask < (1 << 10); ++mask) {
      if (__builtin_popcount(mask) != k) continue;
      std::vector<int> rows;
      for (int i = 0; i < 10; ++i) {
        if (mask & (1 << i)) rows.push_back(i);
      }
      Eigen::MatrixXd s(k, m);
      for (int i = 0; i < k; ++i) s.row(i) = y.row(rows[i]);
      best_subset = std::max(best_subset, Hypervolume(s, r));
    }
    Eigen::MatrixXd s(k, m);
    for (int i = 0; i < k; ++i) s.row(i) = y.row(greedy[i]);
    EXPECT_GE(Hypervolume(s, r), (1 - 1 / std::exp(1.0)) * best_subset);
  }
}

TEST(HypervolumeTest, ReferencePointSitsBelowTheNadir) {
  const Eigen::MatrixXd front = Points({{1, 5}, {3, 2}});
  const Eigen::VectorXd r = InferReferencePoint(front, 0.05);
  EXPECT_DOUBLE_EQ(r[0], 1 - 0.2);
  EXPECT_DOUBLE_EQ(r[1], 2 - 0.3);
  // One point: the floor.
  const Eigen::VectorXd single = InferReferencePoint(Points({{1, 5}}), 0.05);
  EXPECT_DOUBLE_EQ(single[0], 0.95);
  EXPECT_DOUBLE_EQ(single[1], 4.95);
}

}  // namespace
}  // namespace hypertune::optimizer
