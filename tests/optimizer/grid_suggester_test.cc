#include "optimizer/grid_suggester.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "optimizer/conditional.h"
#include "optimizer/search_space.h"

namespace hypertune::optimizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ParameterConfig Categorical(std::string name, std::vector<std::string> names) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = ParameterType::kCategorical;
  p.categories = std::move(names);
  return p;
}

ParameterConfig Discrete(std::string name, std::vector<double> values) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = ParameterType::kDiscrete;
  p.values = std::move(values);
  return p;
}

ParameterConfig Ranged(std::string name, ParameterType type, double min,
                       double max, int grid_points = 0,
                       Scale scale = Scale::kLinear) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = type;
  p.min = min;
  p.max = max;
  p.grid_points = grid_points;
  p.scale = scale;
  return p;
}

// Every point of a 3 x 2 x 3 grid.
SearchSpace FlatSpace() {
  return SearchSpace::Create({Categorical("opt", {"sgd", "adam", "rmsprop"}),
                              Discrete("batch", {32, 64}),
                              Ranged("depth", ParameterType::kInteger, 1, 3)})
      .value();
}

std::vector<Assignment> Suggest(const SearchSpace& space,
                                const std::vector<Assignment>& done, int count,
                                uint64_t seed = 7,
                                Outcome outcome = Outcome::kCompleted) {
  SuggestRequest request;
  request.space = &space;
  for (const Assignment& x : done) {
    Observation o;
    o.x = x;
    o.outcome = outcome;
    if (outcome == Outcome::kCompleted) o.values = {1.0};
    request.history.push_back(o);
  }
  request.count = count;
  request.seed = seed;
  GridSuggester grid;
  return grid.Suggest(request).value();
}

TEST(GridSuggesterTest, SuggestsEveryPointOnceThenNothing) {
  const SearchSpace space = FlatSpace();
  EXPECT_EQ(GridSize(space).value(), 18);
  std::vector<Assignment> done;
  // Batches of 4 with the earlier ones in the history: 4+4+4+4+2.
  for (int round = 0; round < 5; ++round) {
    const std::vector<Assignment> batch = Suggest(space, done, 4);
    EXPECT_EQ(batch.size(), round < 4 ? 4u : 2u) << "round " << round;
    for (const Assignment& a : batch) {
      ASSERT_TRUE(space.Validate(a).ok());
      done.push_back(a);
    }
  }
  const std::set<Assignment> distinct(done.begin(), done.end());
  EXPECT_EQ(distinct.size(), 18u);
  EXPECT_TRUE(Suggest(space, done, 4).empty());
}

TEST(GridSuggesterTest, PendingAndInfeasiblePointsAreDone) {
  const SearchSpace space = FlatSpace();
  const std::vector<Assignment> first = Suggest(space, {}, 17);
  for (Outcome outcome : {Outcome::kPending, Outcome::kInfeasible}) {
    const std::vector<Assignment> last =
        Suggest(space, first, 5, /*seed=*/7, outcome);
    ASSERT_EQ(last.size(), 1u);
    EXPECT_EQ(std::count(first.begin(), first.end(), last[0]), 0);
  }
}

TEST(GridSuggesterTest, OrderIsShuffledBySeedAndReproducible) {
  const SearchSpace space = FlatSpace();
  EXPECT_EQ(Suggest(space, {}, 18, 1), Suggest(space, {}, 18, 1));
  EXPECT_NE(Suggest(space, {}, 18, 1), Suggest(space, {}, 18, 2));
  // Not the nested-loop order: the first six points already try more than
  // one value of every parameter.
  const std::vector<Assignment> first = Suggest(space, {}, 6, 1);
  for (int i = 0; i < space.dim(); ++i) {
    std::set<double> values;
    for (const Assignment& a : first) values.insert(a[i]);
    EXPECT_GT(values.size(), 1u) << "parameter " << i;
  }
}

TEST(GridSuggesterTest, DoublesTakeGridPointsEvenlySpacedInTheirScale) {
  const SearchSpace space =
      SearchSpace::Create(
          {Ranged("x", ParameterType::kDouble, 0, 1, 5),
           Ranged("lr", ParameterType::kDouble, 1e-4, 1, 5, Scale::kLog),
           Ranged("units", ParameterType::kInteger, 1, 1000, 4, Scale::kLog)})
          .value();
  EXPECT_THAT(GridValues(space, 0).value(), ElementsAre(0, 0.25, 0.5, 0.75, 1));
  const std::vector<double> lr = GridValues(space, 1).value();
  ASSERT_EQ(lr.size(), 5u);
  // Decades exactly, as a user would write them.
  EXPECT_THAT(lr, ElementsAre(1e-4, 1e-3, 1e-2, 1e-1, 1));
  EXPECT_THAT(GridValues(space, 2).value(), ElementsAre(1, 10, 100, 1000));
  EXPECT_EQ(GridSize(space).value(), 100);
}

TEST(GridSuggesterTest, HistoryNearAGridPointCountsAndOffGridIsIgnored) {
  const SearchSpace space =
      SearchSpace::Create({Ranged("x", ParameterType::kDouble, 0, 1, 3)})
          .value();
  // 0.5 read back from a store with a rounding error, and a point off the
  // grid that a user enqueued.
  const std::vector<Assignment> rest =
      Suggest(space, {{0.5 + 1e-13}, {0.3}}, 3);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(std::set<Assignment>(rest.begin(), rest.end()),
            (std::set<Assignment>{{0.0}, {1.0}}));
}

TEST(GridSuggesterTest, ConditionalSpaceEnumeratesOnlyActiveCombinations) {
  ParameterConfig momentum = Discrete("momentum", {0.9, 0.99});
  momentum.parent = 0;
  momentum.parent_values = {0};  // sgd
  ParameterConfig beta = Discrete("beta", {0.9, 0.99, 0.999});
  beta.parent = 0;
  beta.parent_values = {1};  // adam
  const SearchSpace space =
      SearchSpace::Create({Categorical("opt", {"sgd", "adam"}),
                           Ranged("depth", ParameterType::kInteger, 1, 2),
                           momentum, beta})
          .value();
  EXPECT_EQ(GridSize(space).value(), (2 + 3) * 2);
  const std::vector<Assignment> all = Suggest(space, {}, 20);
  ASSERT_EQ(all.size(), 10u);
  AssignmentSet distinct;
  for (const Assignment& a : all) {
    ASSERT_TRUE(space.Validate(a).ok());
    EXPECT_TRUE(distinct.insert(a).second);
  }
  EXPECT_TRUE(Suggest(space, all, 1).empty());
}

TEST(GridSuggesterTest, AGrownCategoryListAddsOnlyTheNewPoints) {
  const std::vector<Assignment> old =
      Suggest(SearchSpace::Create({Categorical("opt", {"sgd", "adam"}),
                                   Discrete("batch", {32, 64})})
                  .value(),
              {}, 4);
  ASSERT_EQ(old.size(), 4u);
  const SearchSpace grown =
      SearchSpace::Create({Categorical("opt", {"sgd", "adam", "lion"}),
                           Discrete("batch", {32, 64})})
          .value();
  const std::vector<Assignment> added = Suggest(grown, old, 6);
  ASSERT_EQ(added.size(), 2u);
  for (const Assignment& a : added) EXPECT_EQ(a[0], 2) << "not lion";
}

TEST(GridSuggesterTest, RefusesWhatItCannotEnumerateNamingWhy) {
  const SearchSpace unbounded =
      SearchSpace::Create({Discrete("batch", {32, 64}),
                           Ranged("lr", ParameterType::kDouble, 0, 1)})
          .value();
  absl::StatusOr<int64_t> size = GridSize(unbounded);
  EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(size.status().message(),
              HasSubstr("parameters[1] (\"lr\").grid_points"));

  const SearchSpace huge =
      SearchSpace::Create({Ranged("a", ParameterType::kInteger, 1, 101),
                           Ranged("b", ParameterType::kInteger, 1, 101),
                           Ranged("c", ParameterType::kInteger, 1, 101)})
          .value();
  size = GridSize(huge);
  EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(size.status().message(), HasSubstr("at most 1000000 points"));

  const SearchSpace wide =
      SearchSpace::Create({Ranged("seed", ParameterType::kInteger, 0, 1e6)})
          .value();
  EXPECT_THAT(GridSize(wide).status().message(),
              HasSubstr("parameters[0] (\"seed\"): GRID tries every integer"));
}

}  // namespace
}  // namespace hypertune::optimizer
