#include "optimizer/search_space.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hypertune::optimizer {
namespace {

using ::testing::HasSubstr;

ParameterConfig Double(std::string name, double min, double max,
                       Scale scale = Scale::kLinear) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = ParameterType::kDouble;
  p.min = min;
  p.max = max;
  p.scale = scale;
  return p;
}

ParameterConfig Integer(std::string name, double min, double max,
                        Scale scale = Scale::kLinear) {
  ParameterConfig p = Double(std::move(name), min, max, scale);
  p.type = ParameterType::kInteger;
  return p;
}

ParameterConfig Discrete(std::string name, std::vector<double> values) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = ParameterType::kDiscrete;
  p.values = std::move(values);
  return p;
}

ParameterConfig Categorical(std::string name,
                            std::vector<std::string> categories) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = ParameterType::kCategorical;
  p.categories = std::move(categories);
  return p;
}

constexpr double kMaxInt = 1099511627776.0;  // 2^40, the largest allowed.

SearchSpace MixedSpace() {
  return SearchSpace::Create({
                                 Double("lr", 1e-5, 1e-1, Scale::kLog),
                                 Double("momentum", 0.0, 0.99),
                                 Integer("layers", 1, 8),
                                 Integer("width", 16, 1024, Scale::kLog),
                                 Integer("fixed", 3, 3),
                                 Integer("neg", -5, 5),
                                 Discrete("batch", {16, 32, 64, 128, 256}),
                                 Categorical("opt", {"sgd", "adam", "rms"}),
                                 Double("point", 2.0, 2.0),
                                 Integer("wide", -kMaxInt, kMaxInt),
                                 Integer("wide_log", 1, kMaxInt, Scale::kLog),
                             })
      .value();
}

// A uniformly random valid assignment, drawn per type (not through Decode).
Assignment RandomValid(const SearchSpace& space, std::mt19937_64& rng) {
  Assignment a;
  for (const ParameterConfig& p : space.parameters()) {
    switch (p.type) {
      case ParameterType::kDouble:
        a.push_back(std::uniform_real_distribution<double>(p.min, p.max)(rng));
        break;
      case ParameterType::kInteger:
        a.push_back(static_cast<double>(std::uniform_int_distribution<int64_t>(
            static_cast<int64_t>(p.min), static_cast<int64_t>(p.max))(rng)));
        break;
      case ParameterType::kDiscrete:
        a.push_back(p.values[std::uniform_int_distribution<size_t>(
            0, p.values.size() - 1)(rng)]);
        break;
      case ParameterType::kCategorical:
        a.push_back(static_cast<double>(std::uniform_int_distribution<size_t>(
            0, p.categories.size() - 1)(rng)));
        break;
    }
  }
  return a;
}

TEST(SearchSpaceTest, CreateRejectsUnusableConfigsNamingTheParameter) {
  struct Case {
    std::vector<ParameterConfig> params;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{}, "at least one parameter"},
      {{Double("", 0, 1)}, "parameters[0] (\"\"): name must not be empty"},
      {{Double("a", 0, 1), Double("a", 0, 1)},
       "parameters[1] (\"a\"): name is used by an earlier parameter"},
      {{Double("a", 2, 1)}, "parameters[0] (\"a\"): min must not exceed max"},
      {{Double("lr", 0, 1, Scale::kLog)},
       "parameters[0] (\"lr\"): log scale requires min > 0, got 0"},
      {{Integer("n", 0, 4, Scale::kLog)}, "log scale requires min > 0"},
      {{Double("a", 0, INFINITY)}, "bounds must be finite"},
      {{Integer("n", 0.5, 4)}, "integer bounds must be integral"},
      {{Integer("n", 0, 1e13)}, "within +-2^40"},
      {{Discrete("d", {})}, "at least one value"},
      {{Discrete("d", {1, 3, 2})}, "strictly increasing"},
      {{Discrete("d", {1, 2, 2})}, "strictly increasing"},
      {{Discrete("d", {1, NAN})}, "values[1] must be finite"},
      {{Categorical("c", {})}, "at least one category"},
      {{Categorical("c", {"a", "b", "a"})},
       "categories[2] (\"a\") is repeated"},
      {{Categorical("c", {"a", ""})}, "categories[1] is empty"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<SearchSpace> space = SearchSpace::Create(c.params);
    ASSERT_FALSE(space.ok()) << c.message;
    EXPECT_EQ(space.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(space.status().message(), HasSubstr(c.message));
  }
}

TEST(SearchSpaceTest, CreateAcceptsDegenerateButUsableConfigs) {
  EXPECT_TRUE(SearchSpace::Create({Double("a", 1, 1), Integer("b", 2, 2),
                                   Discrete("c", {7}), Categorical("d", {"x"}),
                                   Integer("e", 1, 1, Scale::kLog)})
                  .ok());
}

TEST(SearchSpaceTest, DecodeMapsTheUnitCubeByScale) {
  const SearchSpace space =
      SearchSpace::Create(
          {Double("lin", -2, 6), Double("log", 1e-4, 1, Scale::kLog)})
          .value();
  EXPECT_EQ(space.Decode(Eigen::Vector2d(0, 0)), (Assignment{-2, 1e-4}));
  EXPECT_EQ(space.Decode(Eigen::Vector2d(1, 1)), (Assignment{6, 1}));
  const Assignment mid = space.Decode(Eigen::Vector2d(0.5, 0.5));
  EXPECT_DOUBLE_EQ(mid[0], 2.0);
  EXPECT_NEAR(mid[1], 1e-2, 1e-15);  // Geometric midpoint.
  // Out-of-range and NaN coordinates are clamped.
  EXPECT_EQ(space.Decode(Eigen::Vector2d(-3, 7)), (Assignment{-2, 1}));
  EXPECT_DOUBLE_EQ(space.Decode(Eigen::Vector2d(NAN, 0))[0], 2.0);
}

TEST(SearchSpaceTest, LinearIntegersGetEqualShares) {
  const SearchSpace space = SearchSpace::Create({Integer("n", 1, 4)}).value();
  // [0,1] maps onto [0.5, 4.5]: each integer owns a quarter.
  std::vector<int> counts(5, 0);
  constexpr int kSteps = 4000;
  for (int i = 0; i < kSteps; ++i) {
    const double u = (i + 0.5) / kSteps;
    ++counts[static_cast<int>(
        space.Decode(Eigen::VectorXd::Constant(1, u))[0])];
  }
  EXPECT_EQ(counts, (std::vector<int>{0, 1000, 1000, 1000, 1000}));
}

TEST(SearchSpaceTest, LogIntegersGetLogShares) {
  const SearchSpace space =
      SearchSpace::Create({Integer("n", 1, 100, Scale::kLog)}).value();
  const double total = std::log(100.5 / 0.5);
  for (double k : {1.0, 2.0, 10.0, 100.0}) {
    // The share of k is the log-length of its rounding cell.
    const double lo = std::log((k - 0.5) / 0.5) / total;
    const double hi = std::log((k + 0.5) / 0.5) / total;
    EXPECT_EQ(space.Decode(Eigen::VectorXd::Constant(1, lo + 1e-9))[0], k);
    EXPECT_EQ(space.Decode(Eigen::VectorXd::Constant(1, hi - 1e-9))[0], k);
  }
  EXPECT_EQ(space.Decode(Eigen::VectorXd::Zero(1))[0], 1.0);
  EXPECT_EQ(space.Decode(Eigen::VectorXd::Ones(1))[0], 100.0);
}

TEST(SearchSpaceTest, DiscreteAndCategoricalUseEqualBins) {
  const SearchSpace space =
      SearchSpace::Create(
          {Discrete("d", {1, 10, 100}), Categorical("c", {"a", "b", "c", "d"})})
          .value();
  EXPECT_EQ(space.Decode(Eigen::Vector2d(0.0, 0.0)), (Assignment{1, 0}));
  EXPECT_EQ(space.Decode(Eigen::Vector2d(0.34, 0.26)), (Assignment{10, 1}));
  EXPECT_EQ(space.Decode(Eigen::Vector2d(0.67, 0.51)), (Assignment{100, 2}));
  EXPECT_EQ(space.Decode(Eigen::Vector2d(1.0, 1.0)), (Assignment{100, 3}));
  const Eigen::VectorXd centre = space.Encode({10, 3});
  EXPECT_DOUBLE_EQ(centre[0], 0.5);
  EXPECT_DOUBLE_EQ(centre[1], 0.875);
}

TEST(SearchSpaceTest, DecodeOfEncodeIsIdentityOnRandomValidAssignments) {
  const SearchSpace space = MixedSpace();
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 5000; ++trial) {
    const Assignment a = RandomValid(space, rng);
    ASSERT_TRUE(space.Validate(a).ok());
    const Eigen::VectorXd u = space.Encode(a);
    ASSERT_TRUE((u.array() >= 0).all() && (u.array() <= 1).all());
    const Assignment back = space.Decode(u);
    ASSERT_TRUE(space.Validate(back).ok());
    for (int i = 0; i < space.dim(); ++i) {
      if (space.parameters()[i].type == ParameterType::kDouble) {
        EXPECT_NEAR(back[i], a[i], 1e-12 * std::max(1.0, std::abs(a[i])))
            << space.parameters()[i].name;
      } else {
        EXPECT_EQ(back[i], a[i]) << space.parameters()[i].name;
      }
    }
  }
}

TEST(SearchSpaceTest, ExtremeIntegersRoundTrip) {
  const SearchSpace space = MixedSpace();
  Assignment a = {1e-3, 0.9, 4, 64, 3, -2, 32, 1, 2.0, 0, 1};
  for (double wide :
       {-kMaxInt, -kMaxInt + 1, -1.0, 0.0, 1.0, kMaxInt - 1, kMaxInt}) {
    for (double wide_log : {1.0, 2.0, 3.0, kMaxInt / 2, kMaxInt - 1, kMaxInt}) {
      a[9] = wide;
      a[10] = wide_log;
      ASSERT_TRUE(space.Validate(a).ok());
      const Assignment back = space.Decode(space.Encode(a));
      EXPECT_EQ(back[9], wide);
      EXPECT_EQ(back[10], wide_log);
    }
  }
}

TEST(SearchSpaceTest, DecodeAlwaysGivesValidAssignments) {
  const SearchSpace space = MixedSpace();
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(-0.2, 1.2);
  for (int trial = 0; trial < 5000; ++trial) {
    Eigen::VectorXd u(space.dim());
    for (int i = 0; i < space.dim(); ++i) u[i] = unit(rng);
    ASSERT_TRUE(space.Validate(space.Decode(u)).ok());
  }
}

TEST(SearchSpaceTest, ValidateNamesTheBadParameter) {
  const SearchSpace space = MixedSpace();
  const Assignment good = {1e-3, 0.9, 4, 64, 3, -2, 32, 1, 2.0, 5, 5};
  ASSERT_TRUE(space.Validate(good).ok());
  struct Case {
    int index;
    double value;
    std::string message;
  };
  const std::vector<Case> cases = {
      {0, 0.5, "parameters[0] (\"lr\"): value 0.5 is outside"},
      {1, NAN, "parameters[1] (\"momentum\"): value must be finite"},
      {2, 2.5, "parameters[2] (\"layers\"): value must be an integer"},
      {2, 9, "parameters[2] (\"layers\"): value 9 is outside [1, 8]"},
      {6, 48, "parameters[6] (\"batch\"): value 48 is not one of"},
      {7, 3, "parameters[7] (\"opt\"): category index must be an integer"},
      {7, 0.5, "category index must be an integer"},
      {8, 2.5, "parameters[8] (\"point\")"},
  };
  for (const Case& c : cases) {
    Assignment a = good;
    a[c.index] = c.value;
    const absl::Status s = space.Validate(a);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
  EXPECT_THAT(space.Validate({1.0}).message(),
              HasSubstr("assignment has 1 values"));
}

// A partial configuration (an enqueued trial with some parameters given):
// the fixed values kept exactly, the others the proposal's.
TEST(SearchSpaceTest, CompleteKeepsTheFixedValuesAndTakesTheRest) {
  const SearchSpace space = MixedSpace();
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; ++round) {
    const Assignment proposal = RandomValid(space, rng);
    const Assignment other = RandomValid(space, rng);
    Assignment fixed(space.dim(), kInactive);
    for (int i = 0; i < space.dim(); i += 2) fixed[i] = other[i];
    absl::StatusOr<Assignment> completed = space.Complete(fixed, proposal);
    ASSERT_TRUE(completed.ok()) << completed.status();
    ASSERT_TRUE(space.Validate(*completed).ok());
    for (int i = 0; i < space.dim(); ++i) {
      // Exact, not within ulps: Decode's rounding is undone.
      EXPECT_EQ((*completed)[i], i % 2 == 0 ? other[i] : proposal[i])
          << space.parameters()[i].name;
    }
  }
}

TEST(SearchSpaceTest, CompleteRefusesAFixedValueOutOfRange) {
  const SearchSpace space = MixedSpace();
  std::mt19937_64 rng(3);
  Assignment fixed(space.dim(), kInactive);
  fixed[2] = 9;  // layers in [1, 8]
  absl::Status s = space.Complete(fixed, RandomValid(space, rng)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("parameters[2] (\"layers\")"));
  EXPECT_THAT(s.message(), HasSubstr("outside [1, 8]"));
}

// opt -> {momentum under sgd, beta under adam}.
SearchSpace TreeSpace() {
  ParameterConfig momentum = Double("momentum", 0, 0.9);
  momentum.parent = 0;
  momentum.parent_values = {0};
  ParameterConfig beta = Double("beta", 0.5, 0.99);
  beta.parent = 0;
  beta.parent_values = {1};
  return SearchSpace::Create(
             {Categorical("opt", {"sgd", "adam"}), momentum, beta})
      .value();
}

TEST(SearchSpaceTest, CompleteFollowsAFixedParentIntoItsChildren) {
  const SearchSpace space = TreeSpace();
  const Assignment proposal = {0, 0.3, kInactive};  // sgd, momentum 0.3
  // adam fixed: momentum goes, beta (off in the proposal) takes its centre.
  absl::StatusOr<Assignment> completed =
      space.Complete({1, kInactive, kInactive}, proposal);
  ASSERT_TRUE(completed.ok()) << completed.status();
  EXPECT_EQ((*completed)[0], 1);
  EXPECT_TRUE(std::isnan((*completed)[1]));
  EXPECT_NEAR((*completed)[2], (0.5 + 0.99) / 2, 1e-12);
  // A child fixed with its parent: kept with it.
  completed = space.Complete({0, 0.8, kInactive}, {1, kInactive, 0.6});
  ASSERT_TRUE(completed.ok()) << completed.status();
  EXPECT_EQ((*completed)[0], 0);
  EXPECT_EQ((*completed)[1], 0.8);
  EXPECT_TRUE(std::isnan((*completed)[2]));
}

// Issue 48: the rule holds whatever the algorithm proposes (a random
// proposal whose parent happens to turn the child on included).
TEST(SearchSpaceTest, CompleteRefusesAFixedChildWithoutItsParent) {
  const SearchSpace space = TreeSpace();
  for (const Assignment& proposal :
       {Assignment{0, 0.3, kInactive}, Assignment{1, kInactive, 0.6}}) {
    absl::Status s =
        space.Complete({kInactive, 0.8, kInactive}, proposal).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("\"momentum\""));
    EXPECT_THAT(s.message(), HasSubstr("conditional on \"opt\""));
  }
}

TEST(SearchSpaceTest, CompleteRefusesAFixedChildItsParentTurnsOff) {
  const SearchSpace space = TreeSpace();
  absl::Status s =
      space.Complete({0, kInactive, 0.7}, {0, 0.3, kInactive}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("\"beta\""));
  EXPECT_THAT(s.message(), HasSubstr("fix the parent"));
}

}  // namespace
}  // namespace hypertune::optimizer
