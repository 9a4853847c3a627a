// Conditional search spaces: the tree's validation, activity, encoding,
// sampling by every algorithm, and the tree kernel (tree_kernel.h).
#include "optimizer/conditional.h"

#include <Eigen/Eigenvalues>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "optimizer/gp_bandit_suggester.h"
#include "optimizer/search_space.h"
#include "optimizer/suggester.h"
#include "optimizer/tree_kernel.h"
#include "testing/conditional_problems.h"

namespace hypertune::optimizer {
namespace {

using ::testing::HasSubstr;

ParameterConfig Integer(std::string name, double min, double max,
                        int parent = kNoParent,
                        std::vector<double> values = {}) {
  return bench::NumericParameter(std::move(name), min, max, parent,
                                 std::move(values), Scale::kLinear,
                                 ParameterType::kInteger);
}

// optimizer in {sgd, adam}; momentum under sgd; beta2 under adam; lr
// always; layers (integer 1..3) always; width under layers in {2, 3}, and
// width2 (discrete) under width's sibling condition of layers = 3.
std::vector<ParameterConfig> TreeConfigs() {
  ParameterConfig width2;
  width2.name = "width2";
  width2.type = ParameterType::kDiscrete;
  width2.values = {16, 32, 64};
  width2.parent = 4;
  width2.parent_values = {3};
  return {bench::CategoricalParameter("optimizer", {"sgd", "adam"}),
          bench::NumericParameter("momentum", 0, 0.99, 0, {0}),
          bench::NumericParameter("beta2", 0.9, 0.9999, 0, {1}),
          bench::NumericParameter("lr", 1e-4, 1, kNoParent, {}, Scale::kLog),
          Integer("layers", 1, 3),
          bench::NumericParameter("width", 0, 1, 4, {2, 3}),
          width2};
}

SearchSpace TreeSpace() { return *SearchSpace::Create(TreeConfigs()); }

// Whether `a` is a valid configuration with NaN exactly at the inactive
// parameters.
void ExpectValidConfiguration(const SearchSpace& space, const Assignment& a) {
  ASSERT_TRUE(space.Validate(a).ok()) << space.Validate(a);
  const std::vector<bool> active = space.Active(a);
  for (int j = 0; j < space.dim(); ++j) {
    EXPECT_EQ(std::isnan(a[j]), !active[j]) << space.parameters()[j].name;
  }
}

TEST(ConditionalValidationTest, AcceptsATreeAndAFlatSpace) {
  EXPECT_TRUE(SearchSpace::Create(TreeConfigs()).ok());
  const SearchSpace tree = TreeSpace();
  EXPECT_TRUE(tree.conditional());
  const SearchSpace flat =
      *SearchSpace::Create({bench::NumericParameter("x", 0, 1)});
  EXPECT_FALSE(flat.conditional());
}

TEST(ConditionalValidationTest, RefusesCycles) {
  std::vector<ParameterConfig> c = {Integer("a", 0, 2, 1, {1}),
                                    Integer("b", 0, 2, 0, {1})};
  const absl::Status s = SearchSpace::Create(c).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("cycle"));
  EXPECT_THAT(s.message(), HasSubstr(".parent"));
}

TEST(ConditionalValidationTest, RefusesUnknownOrSelfParent) {
  std::vector<ParameterConfig> c = TreeConfigs();
  c[1].parent = 42;
  EXPECT_THAT(SearchSpace::Create(c).status().message(),
              HasSubstr("parameters[1] (\"momentum\").parent"));
  c[1].parent = 1;
  EXPECT_FALSE(SearchSpace::Create(c).ok());
}

TEST(ConditionalValidationTest, RefusesADoubleParent) {
  std::vector<ParameterConfig> c = TreeConfigs();
  c[1].parent = 3;  // lr
  c[1].parent_values = {0.1};
  const absl::Status s = SearchSpace::Create(c).status();
  EXPECT_THAT(s.message(), HasSubstr("(\"momentum\").parent"));
  EXPECT_THAT(s.message(), HasSubstr("CATEGORICAL, DISCRETE or INTEGER"));
}

TEST(ConditionalValidationTest, RefusesParentValuesOutsideTheDomain) {
  std::vector<ParameterConfig> c = TreeConfigs();
  c[1].parent_values = {5};  // optimizer has 2 categories.
  EXPECT_THAT(SearchSpace::Create(c).status().message(),
              HasSubstr("(\"momentum\").parent_values[0]"));
  c = TreeConfigs();
  c[5].parent_values = {2, 4};  // layers is 1..3.
  EXPECT_THAT(SearchSpace::Create(c).status().message(),
              HasSubstr("(\"width\").parent_values[1]"));
  c = TreeConfigs();
  c[6].parent = 6 - 1;  // width is DOUBLE.
  EXPECT_FALSE(SearchSpace::Create(c).ok());
  c = TreeConfigs();
  c[1].parent_values = {};
  EXPECT_THAT(SearchSpace::Create(c).status().message(),
              HasSubstr("(\"momentum\").parent_values"));
  c = TreeConfigs();
  c[1].parent_values = {0, 0};
  EXPECT_THAT(SearchSpace::Create(c).status().message(),
              HasSubstr("parent_values[1]"));
  c = TreeConfigs();
  c[3].parent_values = {1};  // lr has no parent.
  EXPECT_THAT(SearchSpace::Create(c).status().message(),
              HasSubstr("(\"lr\").parent_values"));
}

TEST(ConditionalValidationTest, RefusesDuplicateNamesAlongAPath) {
  std::vector<ParameterConfig> c = TreeConfigs();
  c[2].name = "momentum";
  EXPECT_THAT(SearchSpace::Create(c).status().message(),
              HasSubstr("parameters[2] (\"momentum\")"));
  c = TreeConfigs();
  c[6].name = "layers";  // Its own grandparent's name.
  EXPECT_FALSE(SearchSpace::Create(c).ok());
}

TEST(ConditionalEncodingTest, ActivityFollowsTheParents) {
  const SearchSpace space = TreeSpace();
  const Assignment sgd = {0, 0.9, kInactive, 0.01, 3, 0.5, 32};
  EXPECT_EQ(space.Active(sgd),
            std::vector<bool>({true, true, false, true, true, true, true}));
  EXPECT_TRUE(space.Validate(sgd).ok());
  const Assignment adam = {1, kInactive, 0.99, 0.01, 1, kInactive, kInactive};
  EXPECT_TRUE(space.Validate(adam).ok());
}

TEST(ConditionalEncodingTest, ValidateNamesInactiveValuesAndMissingActiveOnes) {
  const SearchSpace space = TreeSpace();
  const Assignment extra = {0, 0.9, 0.99, 0.01, 1, kInactive, kInactive};
  const absl::Status s1 = space.Validate(extra);
  EXPECT_EQ(s1.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s1.message(), HasSubstr("\"beta2\""));
  EXPECT_THAT(s1.message(), HasSubstr("inactive"));
  const Assignment missing = {0, kInactive, kInactive, 0.01,
                              1, kInactive, kInactive};
  const absl::Status s2 = space.Validate(missing);
  EXPECT_THAT(s2.message(), HasSubstr("\"momentum\""));
  EXPECT_THAT(s2.message(), HasSubstr("active"));
  // A grandchild under an inactive child is inactive too.
  const Assignment deep = {0, 0.9, kInactive, 0.01, 1, kInactive, 32};
  EXPECT_THAT(space.Validate(deep).message(), HasSubstr("\"width2\""));
}

TEST(ConditionalEncodingTest, DecodeMarksInactiveAndRoundTrips) {
  const SearchSpace space = TreeSpace();
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int t = 0; t < 500; ++t) {
    Eigen::VectorXd u(space.dim());
    for (int j = 0; j < space.dim(); ++j) u[j] = unit(rng);
    const Assignment a = space.Decode(u);
    ExpectValidConfiguration(space, a);
    const Eigen::VectorXd e = space.Encode(a);
    for (int j = 0; j < space.dim(); ++j) {
      if (std::isnan(a[j])) {
        EXPECT_EQ(e[j], 0.5);  // The placeholder.
      }
    }
    // Exact for everything but doubles, which round-trip to a few ulps.
    const Assignment back = space.Decode(e);
    for (int j = 0; j < space.dim(); ++j) {
      EXPECT_EQ(std::isnan(back[j]), std::isnan(a[j]));
      if (!std::isnan(a[j])) {
        EXPECT_NEAR(back[j], a[j], 1e-12 * (1 + std::abs(a[j])));
      }
    }
  }
}

TEST(ConditionalEncodingTest, AssignmentOrderTreatsInactiveAsOneValue) {
  std::set<Assignment, AssignmentLess> s;
  s.insert({0, kInactive});
  s.insert({0, kInactive});
  s.insert({0, 1});
  s.insert({1, kInactive});
  EXPECT_EQ(s.size(), 3u);
  EXPECT_TRUE(s.contains({0, kInactive}));
}

class ConditionalSamplingTest : public ::testing::TestWithParam<Algorithm> {};

// Every algorithm: every suggestion of a study run on the tree is a valid
// configuration, no inactive parameter carries a value, and both branches
// are visited.
TEST_P(ConditionalSamplingTest, EverySuggestionIsAValidConfiguration) {
  const SearchSpace space = TreeSpace();
  std::unique_ptr<Suggester> suggester = MakeSuggester(GetParam());
  SuggestRequest request;
  request.space = &space;
  request.seed = 7;
  int branch[2] = {0, 0};
  const int trials = GetParam() == Algorithm::kGpBandit ? 24 : 60;
  for (int t = 0; t < trials; t += 2) {
    request.trials_created = t;
    request.count = 2;
    absl::StatusOr<std::vector<Assignment>> got = suggester->Suggest(request);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), 2u);
    for (const Assignment& a : *got) {
      ExpectValidConfiguration(space, a);
      ++branch[static_cast<int>(a[0])];
      Observation o;
      o.x = a;
      o.outcome = Outcome::kCompleted;
      // Best: sgd with momentum near 0.9, lr near 0.01.
      o.values = {a[0] == 0
                      ? -std::abs(a[1] - 0.9) - std::abs(std::log10(a[3]) + 2)
                      : -1.0 - std::abs(std::log10(a[3]) + 2)};
      request.history.push_back(o);
    }
  }
  EXPECT_GT(branch[0], 0);
  EXPECT_GT(branch[1], 0);
}

// Pending trials (kPending) are never proposed again, and the batch is of
// distinct configurations.
TEST_P(ConditionalSamplingTest, StaysPendingAware) {
  const SearchSpace space = TreeSpace();
  std::unique_ptr<Suggester> suggester = MakeSuggester(GetParam());
  SuggestRequest request;
  request.space = &space;
  request.seed = 11;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int t = 0; t < 16; ++t) {
    Eigen::VectorXd u(space.dim());
    for (int j = 0; j < space.dim(); ++j) u[j] = unit(rng);
    Observation o;
    o.x = space.Decode(u);
    o.outcome = t < 12 ? Outcome::kCompleted : Outcome::kPending;
    o.values = {-u.squaredNorm()};
    request.history.push_back(o);
  }
  request.trials_created = 16;
  request.count = 4;
  absl::StatusOr<std::vector<Assignment>> got = suggester->Suggest(request);
  ASSERT_TRUE(got.ok()) << got.status();
  std::set<Assignment, AssignmentLess> seen;
  for (const Observation& o : request.history) seen.insert(o.x);
  for (const Assignment& a : *got) {
    ExpectValidConfiguration(space, a);
    EXPECT_TRUE(seen.insert(a).second);
  }
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, ConditionalSamplingTest,
                         ::testing::Values(Algorithm::kRandom,
                                           Algorithm::kQuasiRandom,
                                           Algorithm::kGpBandit,
                                           Algorithm::kTpe),
                         [](const ::testing::TestParamInfo<Algorithm>& info) {
                           return std::string(AlgorithmName(info.param));
                         });

// A root of `categories` categories with `children` doubles, child k
// active under category k alone (issue 31: a GP_BANDIT suggestion there
// took 8 s, scanning every child for every point, and trying every
// category at each polish start).
SearchSpace WideRootSpace(int categories, int children) {
  std::vector<std::string> names;
  for (int c = 0; c < categories; ++c) names.push_back(absl::StrCat("c", c));
  std::vector<ParameterConfig> params = {
      bench::CategoricalParameter("root", names)};
  for (int k = 0; k < children; ++k) {
    params.push_back(bench::NumericParameter(absl::StrCat("x", k), 0, 1, 0,
                                             {static_cast<double>(k)}));
  }
  return *SearchSpace::Create(params);
}

TEST(WideConditionalSpaceTest,
     GpBanditSuggestsValidNewConfigurationsFromItsModel) {
  const SearchSpace space = WideRootSpace(1000, 499);
  GpBanditSuggester suggester;
  SuggestRequest request;
  request.space = &space;
  request.seed = 7;
  // The initial design (10 trials at 500 parameters), then the model's.
  for (int t = 0; t < 12; ++t) {
    request.trials_created = t;
    absl::StatusOr<std::vector<Assignment>> got = suggester.Suggest(request);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), 1u);
    const Assignment& a = got->front();
    ExpectValidConfiguration(space, a);
    for (const Observation& o : request.history) {
      EXPECT_FALSE(SameAssignment(o.x, a)) << "trial " << t;
    }
    if (t >= 10) {
      EXPECT_EQ(suggester.last_fallback_reason(), "") << t;
    }
    Observation o;
    o.x = a;
    o.outcome = Outcome::kCompleted;
    // Best: category 300, its child near 0.3.
    const int root = static_cast<int>(a[0]);
    o.values = {-std::abs(root - 300) / 1000.0 -
                (root < 499 ? std::abs(a[1 + root] - 0.3) : 1.0)};
    request.history.push_back(o);
  }
}

// Random model coordinates of the tree space (tree_kernel.h's
// TreeKernelGroups).
Eigen::MatrixXd TreePoints(const SearchSpace& space, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  Eigen::MatrixXd x(n, space.dim());
  for (int i = 0; i < n; ++i) {
    Eigen::VectorXd u(space.dim());
    for (int j = 0; j < space.dim(); ++j) u[j] = unit(rng);
    const Assignment a = space.Decode(u);
    Eigen::VectorXd e = space.Encode(a);
    e[0] = a[0];  // The categorical column holds the index.
    x.row(i) = e.transpose();
  }
  return x;
}

std::unique_ptr<TreeKernel> MakeTreeKernel(const SearchSpace& space) {
  auto k = std::make_unique<TreeKernel>(TreeKernelGroups(space));
  Eigen::VectorXd p(k->num_params());
  for (int i = 0; i < p.size(); ++i) p[i] = -0.8 + 0.17 * i;
  k->set_log_params(p);
  return k;
}

TEST(TreeKernelTest, GroupsFollowTheTree) {
  const SearchSpace space = TreeSpace();
  const std::vector<TreeKernelGroup> groups = TreeKernelGroups(space);
  // Roots; momentum; beta2; width; width2.
  ASSERT_EQ(groups.size(), 5u);
  EXPECT_EQ(groups[0].columns, std::vector<int>({0, 3, 4}));
  const TreeKernel k(groups);
  Eigen::MatrixXd x(4, space.dim());
  // layers 1, 2, 3 and adam: in layers' unit coordinate, the cells' centres.
  const Eigen::VectorXd sgd3 =
      space.Encode({0, 0.5, kInactive, 0.1, 3, 0.5, 16});
  const Eigen::VectorXd adam1 =
      space.Encode({1, kInactive, 0.99, 0.1, 1, kInactive, kInactive});
  const Eigen::VectorXd sgd2 =
      space.Encode({0, 0.5, kInactive, 0.1, 2, 0.5, kInactive});
  x.row(0) = sgd3.transpose();
  x.row(1) = adam1.transpose();
  x.row(2) = sgd2.transpose();
  x.row(3) = sgd3.transpose();
  x(0, 0) = 0;
  x(1, 0) = 1;
  x(2, 0) = 0;
  x(3, 0) = 0;
  const TreeKernel::ActivityMatrix act = k.Activity(x);
  EXPECT_TRUE(act(0, 1) && act(0, 3) && act(0, 4) && !act(0, 2));
  EXPECT_TRUE(!act(1, 1) && act(1, 2) && !act(1, 3) && !act(1, 4));
  EXPECT_TRUE(act(2, 3) && !act(2, 4));
}

TEST(TreeKernelTest, IsACorrelationThatIgnoresInactiveColumns) {
  const SearchSpace space = TreeSpace();
  const std::unique_ptr<TreeKernel> tree = MakeTreeKernel(space);
  const TreeKernel& k = *tree;
  const Eigen::MatrixXd x = TreePoints(space, 40, 1);
  const Eigen::MatrixXd kxx = k.Matrix(x, x);
  for (int i = 0; i < x.rows(); ++i) EXPECT_NEAR(kxx(i, i), 1.0, 1e-12);
  EXPECT_LT((kxx - kxx.transpose()).cwiseAbs().maxCoeff(), 1e-12);
  const Eigen::VectorXd eig =
      Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(kxx).eigenvalues();
  EXPECT_GT(eig.minCoeff(), -1e-10);
  // Whatever an inactive column holds changes nothing.
  Eigen::MatrixXd moved = x;
  for (int i = 0; i < x.rows(); ++i) {
    const bool sgd = x(i, 0) == 0;
    moved(i, sgd ? 2 : 1) = 0.123 * (i % 7);
  }
  EXPECT_LT((k.Matrix(moved, moved) - kxx).cwiseAbs().maxCoeff(), 1e-14);
}

TEST(TreeKernelTest, ParameterGradientMatchesFiniteDifferences) {
  const SearchSpace space = TreeSpace();
  const std::unique_ptr<TreeKernel> tree = MakeTreeKernel(space);
  TreeKernel& k = *tree;
  const Eigen::MatrixXd x = TreePoints(space, 12, 2);
  Eigen::MatrixXd w = Eigen::MatrixXd::Random(12, 12);
  w = (w + w.transpose()).eval();
  const Eigen::VectorXd p = k.log_params();
  const Eigen::VectorXd g = k.ContractGradient(x, w);
  const double h = 1e-6;
  for (int i = 0; i < p.size(); ++i) {
    Eigen::VectorXd up = p, down = p;
    up[i] += h;
    down[i] -= h;
    k.set_log_params(up);
    const double f_up = (w.array() * k.Matrix(x, x).array()).sum();
    k.set_log_params(down);
    const double f_down = (w.array() * k.Matrix(x, x).array()).sum();
    k.set_log_params(p);
    EXPECT_NEAR(g[i], (f_up - f_down) / (2 * h), 1e-6 * (1 + std::abs(g[i])))
        << "parameter " << i;
  }
}

TEST(TreeKernelTest, InputGradientMatchesFiniteDifferences) {
  const SearchSpace space = TreeSpace();
  const std::unique_ptr<TreeKernel> tree = MakeTreeKernel(space);
  const TreeKernel& k = *tree;
  const Eigen::MatrixXd b = TreePoints(space, 10, 3);
  const Eigen::MatrixXd xs = TreePoints(space, 3, 4);
  const double h = 1e-6;
  for (int r = 0; r < xs.rows(); ++r) {
    const Eigen::VectorXd x = xs.row(r).transpose();
    const Eigen::MatrixXd g = k.InputGradient(x, b);
    // Numeric columns other than layers (whose cell boundaries switch
    // activity): lr, and the active children.
    for (int j : {1, 2, 3, 5}) {
      Eigen::VectorXd up = x, down = x;
      up[j] += h;
      down[j] -= h;
      const Eigen::VectorXd fd =
          (k.Matrix(up.transpose(), b) - k.Matrix(down.transpose(), b))
              .transpose() /
          (2 * h);
      for (int i = 0; i < b.rows(); ++i) {
        EXPECT_NEAR(g(i, j), fd[i], 1e-6) << "row " << r << " column " << j;
      }
    }
  }
}

// Groups with overlapping conditions, a group below a non-root group, and
// one whose parent column lies outside its parent group: activity is
// exactly "the parent group is active and the parent column lies in one of
// the accepted intervals" (tree_kernel.h), NaN activating nothing.
TEST(TreeKernelTest, ActivityFollowsTheDefinitionOnOverlappingConditions) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  auto group = [](int column, int parent_group, int parent_column,
                  std::vector<std::pair<double, double>> accepted) {
    return TreeKernelGroup{
        {column}, {false}, parent_group, parent_column, std::move(accepted)};
  };
  // Column 0: a 6-category root; 1: numeric; 2: an integer's coordinate.
  const std::vector<TreeKernelGroup> groups = {
      {{0, 1, 2}, {true, false, false}, -1, -1, {}},
      group(3, 0, 0, {{0.5, 1.5}, {1.5, 2.5}}),  // Categories 1, 2.
      group(4, 0, 0, {{1.5, 2.5}}),              // 2 as well.
      group(5, 0, 2, {{-kInf, 0.25}, {0.6, kInf}}),
      group(6, 1, 3, {{0.2, 0.7}}),              // Below group 1.
      group(7, 2, 0, {{1.5, 2.5}, {1.9, 3.5}}),  // Only with group 2.
      group(8, 0, 0, {}),                        // Never.
  };
  const TreeKernel k(groups);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> unit(0, 1);
  Eigen::MatrixXd x(200, 9);
  for (int i = 0; i < x.rows(); ++i) {
    for (int j = 0; j < x.cols(); ++j) x(i, j) = unit(rng);
    x(i, 0) = static_cast<double>(rng() % 6);
    if (i % 17 == 0) x(i, 2) = std::nan("");
    if (i % 13 == 0) x(i, 3) = i % 2 == 0 ? 0.2 : 0.7;  // Interval ends.
  }
  const TreeKernel::ActivityMatrix act = k.Activity(x);
  const TreeKernel::SparseActivity sparse = k.ActiveGroups(x);
  int seen_active = 0;
  for (int i = 0; i < x.rows(); ++i) {
    std::vector<bool> expected(groups.size(), false);
    expected[0] = true;
    for (size_t g = 1; g < groups.size(); ++g) {
      const double v = x(i, groups[g].parent_column);
      bool accepted = false;
      for (const auto& [low, high] : groups[g].accepted) {
        accepted = accepted || (v >= low && v < high);
      }
      expected[g] = expected[groups[g].parent_group] && accepted;
    }
    std::vector<int> expected_list;
    for (size_t g = 0; g < groups.size(); ++g) {
      EXPECT_EQ(act(i, static_cast<Eigen::Index>(g)), expected[g])
          << "row " << i << " group " << g;
      if (expected[g]) expected_list.push_back(static_cast<int>(g));
    }
    const std::vector<int> listed(sparse.groups.begin() + sparse.begin[i],
                                  sparse.groups.begin() + sparse.begin[i + 1]);
    EXPECT_EQ(listed, expected_list) << "row " << i;
    seen_active += static_cast<int>(expected_list.size());
  }
  // Every group but the last is active somewhere.
  for (size_t g = 0; g + 1 < groups.size(); ++g) {
    EXPECT_TRUE(act.col(static_cast<Eigen::Index>(g)).any()) << g;
  }
  EXPECT_FALSE(act.col(static_cast<Eigen::Index>(groups.size() - 1)).any());
  EXPECT_EQ(seen_active, static_cast<int>(sparse.groups.size()));
}

// The work bound of the wide root: each point activates the root's group
// and its own child's alone, so k(x, .) touches 2 of the 500 groups.
TEST(TreeKernelTest, APointOfAWideRootActivatesItsPathAlone) {
  const SearchSpace space = WideRootSpace(1000, 499);
  const TreeKernel k(TreeKernelGroups(space));
  ASSERT_EQ(k.num_groups(), 500);
  Eigen::MatrixXd x = Eigen::MatrixXd::Constant(1000, space.dim(), 0.5);
  for (int c = 0; c < 1000; ++c) x(c, 0) = c;
  const TreeKernel::SparseActivity active = k.ActiveGroups(x);
  for (int c = 0; c < 1000; ++c) {
    const std::vector<int> listed(active.groups.begin() + active.begin[c],
                                  active.groups.begin() + active.begin[c + 1]);
    // Child k is parameter 1 + k, alone in group 1 + k.
    EXPECT_EQ(listed,
              c < 499 ? std::vector<int>({0, 1 + c}) : std::vector<int>({0}))
        << "category " << c;
  }
  // And the kernel between two points of one category compares their
  // child; of two categories, the root alone.
  Eigen::MatrixXd pair = x.topRows(3);
  pair(1, 0) = 0;
  pair(1, 1) = 0.9;
  pair(2, 0) = 700;
  const Eigen::MatrixXd kxx = k.Matrix(pair, pair);
  EXPECT_LT(kxx(0, 1), 1.0);
  EXPECT_GT(kxx(0, 1), kxx(0, 2));
  EXPECT_NEAR(kxx(0, 0), 1.0, 1e-12);
}

}  // namespace
}  // namespace hypertune::optimizer
