// fANOVA importances against functions whose functional ANOVA is known in
// closed form, under the uniform measure of the (unit-encoded) space.
#include "optimizer/importance.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "optimizer/splitmix.h"

namespace hypertune::optimizer {
namespace {

ParameterConfig Double(const std::string& name, double min, double max,
                       Scale scale = Scale::kLinear) {
  ParameterConfig p;
  p.name = name;
  p.type = ParameterType::kDouble;
  p.min = min;
  p.max = max;
  p.scale = scale;
  return p;
}

ParameterConfig Categorical(const std::string& name,
                            std::vector<std::string> categories) {
  ParameterConfig p;
  p.name = name;
  p.type = ParameterType::kCategorical;
  p.categories = std::move(categories);
  return p;
}

// `n` points drawn uniformly from `space` (in its unit encoding), and
// f at each.
struct Sample {
  std::vector<Assignment> points;
  std::vector<double> values;
};

template <typename F>
Sample Draw(const SearchSpace& space, int n, uint64_t seed, F f) {
  SplitMix64 rng(seed);
  Sample s;
  for (int i = 0; i < n; ++i) {
    Eigen::VectorXd unit(space.dim());
    for (int j = 0; j < space.dim(); ++j) unit(j) = rng.NextUnit();
    Assignment a = space.Decode(unit);
    s.values.push_back(f(a));
    s.points.push_back(std::move(a));
  }
  return s;
}

std::vector<double> Fractions(const ImportanceResult& result) {
  std::vector<double> out;
  for (const ParameterImportance& p : result.parameters) {
    out.push_back(p.fraction);
  }
  return out;
}

TEST(FanovaImportanceTest, AdditiveLinearFunction) {
  // f = 10 x0 + x1 + 0 x2 on [0,1]^3: Var(10 x0) = 100/12, Var(x1) = 1/12,
  // so the shares are 100/101, 1/101 and 0, summing to 1 (no interaction).
  auto space = SearchSpace::Create(
      {Double("x0", 0, 1), Double("x1", 0, 1), Double("x2", 0, 1)});
  ASSERT_TRUE(space.ok());
  Sample s = Draw(*space, 1000, 1,
                  [](const Assignment& a) { return 10 * a[0] + a[1]; });
  auto result = FanovaImportance(*space, s.points, s.values);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->trees, 64);
  EXPECT_EQ(result->varying_trees, 64);
  const std::vector<double> f = Fractions(*result);
  EXPECT_NEAR(f[0], 100.0 / 101, 0.01);
  EXPECT_NEAR(f[1], 1.0 / 101, 0.005);
  EXPECT_LT(f[2], 0.003);
  EXPECT_NEAR(f[0] + f[1] + f[2], 1.0, 0.02);
}

TEST(FanovaImportanceTest, ProductLeavesAShareToTheInteraction) {
  // f = x0 x1 on [0,1]²: Var f = 1/9 - 1/16 = 7/144; E[f | x0] = x0 / 2 has
  // variance 1/48 = 3/144. Each main effect explains 3/7, the interaction
  // the remaining 1/7; x2 nothing.
  auto space = SearchSpace::Create(
      {Double("x0", 0, 1), Double("x1", 0, 1), Double("x2", 0, 1)});
  ASSERT_TRUE(space.ok());
  Sample s =
      Draw(*space, 2000, 2, [](const Assignment& a) { return a[0] * a[1]; });
  auto result = FanovaImportance(*space, s.points, s.values);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<double> f = Fractions(*result);
  EXPECT_NEAR(f[0], 3.0 / 7, 0.04);
  EXPECT_NEAR(f[1], 3.0 / 7, 0.04);
  EXPECT_LT(f[2], 0.01);
  EXPECT_NEAR(f[0] + f[1], 6.0 / 7, 0.05);
}

TEST(FanovaImportanceTest, LogScaledParameterIsMeasuredInLogSpace) {
  // lr log-uniform on [1e-4, 1]: log10(lr) is uniform on [-4, 0], variance
  // 16/12; 5 x has variance 25/12. Shares 16/41 and 25/41. Weighed by
  // linear width instead, log10(lr) would have variance 1/ln(10)² ≈ 0.19
  // and lr a share near 0.08.
  auto space = SearchSpace::Create(
      {Double("lr", 1e-4, 1, Scale::kLog), Double("x", 0, 1)});
  ASSERT_TRUE(space.ok());
  Sample s = Draw(*space, 1500, 3, [](const Assignment& a) {
    return std::log10(a[0]) + 5 * a[1];
  });
  auto result = FanovaImportance(*space, s.points, s.values);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<double> f = Fractions(*result);
  EXPECT_NEAR(f[0], 16.0 / 41, 0.03);
  EXPECT_NEAR(f[1], 25.0 / 41, 0.03);
}

TEST(FanovaImportanceTest, CategoricalParameterSplitsBySets) {
  // f = g(c) + x with g = {a: 0, b: 3, c: 0, d: 3}: the categories that
  // matter are not adjacent, so an ordinal split would need two cuts.
  // Var g(c) = 9/4 (half 0, half 3), Var x = 1/12: shares 27/28 and 1/28.
  auto space = SearchSpace::Create(
      {Categorical("c", {"a", "b", "c", "d"}), Double("x", 0, 1)});
  ASSERT_TRUE(space.ok());
  Sample s = Draw(*space, 1000, 4, [](const Assignment& a) {
    const int c = static_cast<int>(a[0]);
    return (c == 1 || c == 3 ? 3.0 : 0.0) + a[1];
  });
  ImportanceOptions options;
  options.num_trees = 32;
  auto result = FanovaImportance(*space, s.points, s.values, options);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<double> f = Fractions(*result);
  EXPECT_NEAR(f[0], 27.0 / 28, 0.01);
  EXPECT_NEAR(f[1], 1.0 / 28, 0.01);
}

TEST(FanovaImportanceTest, SubsampledTreesStillFindTheImportantParameter) {
  auto space = SearchSpace::Create({Double("x0", 0, 1), Double("x1", 0, 1),
                                    Double("x2", 0, 1), Double("x3", 0, 1)});
  ASSERT_TRUE(space.ok());
  Sample s = Draw(*space, 10000, 5, [](const Assignment& a) {
    return std::sin(6 * a[2]) + 0.1 * a[0];
  });
  ImportanceOptions options;
  options.max_points_per_tree = 500;
  options.num_trees = 16;
  auto result = FanovaImportance(*space, s.points, s.values, options);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<double> f = Fractions(*result);
  EXPECT_GT(f[2], 0.9);
  EXPECT_LT(f[1], 0.02);
  EXPECT_LT(f[3], 0.02);
}

TEST(FanovaImportanceTest, ConstantValuesExplainNothing) {
  auto space = SearchSpace::Create({Double("x", 0, 1), Double("y", 0, 1)});
  ASSERT_TRUE(space.ok());
  Sample s = Draw(*space, 50, 6, [](const Assignment&) { return 4.0; });
  auto result = FanovaImportance(*space, s.points, s.values);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->varying_trees, 0);
  EXPECT_EQ(result->parameters[0].fraction, 0.0);
  EXPECT_EQ(result->parameters[1].fraction, 0.0);
}

TEST(FanovaImportanceTest, SameSeedSameAnswer) {
  auto space = SearchSpace::Create({Double("x", 0, 1), Double("y", 0, 1)});
  ASSERT_TRUE(space.ok());
  Sample s = Draw(*space, 300, 7, [](const Assignment& a) {
    return a[0] * a[0] + std::cos(3 * a[1]);
  });
  auto a = FanovaImportance(*space, s.points, s.values);
  auto b = FanovaImportance(*space, s.points, s.values);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int j = 0; j < 2; ++j) {
    EXPECT_EQ(a->parameters[j].fraction, b->parameters[j].fraction);
    EXPECT_EQ(a->parameters[j].stddev, b->parameters[j].stddev);
  }
}

TEST(FanovaImportanceTest, BadInputIsRefused) {
  auto space = SearchSpace::Create({Double("x", 0, 1)});
  ASSERT_TRUE(space.ok());
  std::vector<Assignment> points = {{0.1}, {0.2}};
  EXPECT_EQ(FanovaImportance(*space, points, {1.0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FanovaImportance(*space, {{0.1}}, {1.0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FanovaImportance(*space, points, {1.0, INFINITY}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      FanovaImportance(*space, {{0.1}, {3.0}}, {1.0, 2.0}).status().code(),
      absl::StatusCode::kInvalidArgument);
  ImportanceOptions none;
  none.num_trees = 0;
  EXPECT_EQ(FanovaImportance(*space, points, {1.0, 2.0}, none).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// An inactive parameter (kInactive, in a conditional space) has no value
// for the forest to split on: such a point is refused, naming the
// parameter, instead of being read at a made-up coordinate (callers fit
// over the points where the parameters they ask about are active, as
// service/http/dashboard_view.cc does).
TEST(FanovaImportanceTest, InactiveParameterIsRefusedByName) {
  ParameterConfig depth = Double("depth", 1, 6);
  depth.parent = 0;
  depth.parent_values = {0};
  auto space =
      SearchSpace::Create({Categorical("act", {"relu", "tanh"}), depth});
  ASSERT_TRUE(space.ok()) << space.status();
  const std::vector<Assignment> points = {{0, 2.0}, {1, kInactive}, {0, 5.0}};
  absl::StatusOr<ImportanceResult> result =
      FanovaImportance(*space, points, {1.0, 2.0, 3.0});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("point 1"), std::string::npos)
      << result.status();
  EXPECT_NE(result.status().message().find("\"depth\""), std::string::npos)
      << result.status();
  // The same points without the inactive one are fine.
  EXPECT_TRUE(
      FanovaImportance(*space, {points[0], points[2]}, {1.0, 3.0}).ok());
}

}  // namespace
}  // namespace hypertune::optimizer
