#include "optimizer/pbt.h"

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "optimizer/search_space.h"

namespace hypertune::optimizer {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

std::vector<PbtMember> Population(const std::vector<double>& values) {
  std::vector<PbtMember> members;
  for (size_t i = 0; i < values.size(); ++i) {
    members.push_back({static_cast<int64_t>(i + 1), values[i], true});
  }
  return members;
}

TEST(PbtQuantilesTest, CeilOfTheFractionCappedAtHalf) {
  // Eight members, 0.25: two in each quantile, worst first / best first.
  PbtQuantiles q = SplitQuantiles(
      Population({0.5, 0.9, 0.1, 0.7, 0.3, 0.8, 0.2, 0.6}), 0.25);
  EXPECT_THAT(q.bottom, ElementsAre(3, 7));
  EXPECT_THAT(q.top, ElementsAre(2, 6));
  // Five members, 0.25: ceil(1.25) = 2.
  q = SplitQuantiles(Population({5, 4, 3, 2, 1}), 0.25);
  EXPECT_THAT(q.bottom, ElementsAre(5, 4));
  EXPECT_THAT(q.top, ElementsAre(1, 2));
  // Three members, 0.5: ceil(1.5) = 2 is capped at floor(3 / 2) = 1.
  q = SplitQuantiles(Population({1, 3, 2}), 0.5);
  EXPECT_THAT(q.bottom, ElementsAre(1));
  EXPECT_THAT(q.top, ElementsAre(2));
  // Ties go to the lower id.
  q = SplitQuantiles(Population({1, 1, 1, 1}), 0.25);
  EXPECT_THAT(q.top, ElementsAre(1));
  EXPECT_THAT(q.bottom, ElementsAre(4));
}

TEST(PbtDonorTest, OnlyTheBottomExploitsAndOnlyFromTheTop) {
  const std::vector<PbtMember> members =
      Population({0.5, 0.9, 0.1, 0.7, 0.3, 0.8, 0.2, 0.6});
  PbtOptions options;
  std::set<int64_t> donors;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    for (int64_t id : {3, 7}) {
      std::optional<int64_t> donor = ChooseDonor(members, id, options, seed);
      ASSERT_TRUE(donor.has_value());
      donors.insert(*donor);
    }
    for (int64_t id : {1, 2, 4, 5, 6, 8}) {
      EXPECT_FALSE(ChooseDonor(members, id, options, seed).has_value()) << id;
    }
  }
  EXPECT_THAT(donors, UnorderedElementsAre(2, 6));
  // Not a member: nothing.
  EXPECT_FALSE(ChooseDonor(members, 99, options, 1).has_value());
}

TEST(PbtDonorTest, NeedsEnoughMembersAndADonorCheckpoint) {
  std::vector<PbtMember> members = Population({0.1, 0.9, 0.5, 0.4});
  PbtOptions options;
  options.min_ready_members = 5;
  EXPECT_FALSE(ChooseDonor(members, 1, options, 7).has_value());
  options.min_ready_members = 4;
  EXPECT_EQ(ChooseDonor(members, 1, options, 7), 2);
  members[1].has_checkpoint = false;  // the only top member
  EXPECT_FALSE(ChooseDonor(members, 1, options, 7).has_value());
  // Ties rank by id: in an all-equal population the highest id exploits
  // the lowest.
  EXPECT_EQ(ChooseDonor(Population({0.5, 0.5, 0.5, 0.5}), 4, options, 7), 1);
  // A single member never exploits itself.
  options.min_ready_members = 1;
  EXPECT_FALSE(ChooseDonor(Population({0.3}), 1, options, 7).has_value());
}

ParameterConfig Param(std::string name, ParameterType type, double min,
                      double max) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = type;
  p.min = min;
  p.max = max;
  return p;
}

SearchSpace MixedSpace() {
  ParameterConfig lr = Param("lr", ParameterType::kDouble, 1e-4, 1.0);
  lr.scale = Scale::kLog;
  ParameterConfig layers = Param("layers", ParameterType::kInteger, 1, 10);
  ParameterConfig batch = Param("batch", ParameterType::kDiscrete, 0, 0);
  batch.values = {16, 32, 64, 128};
  ParameterConfig opt = Param("opt", ParameterType::kCategorical, 0, 0);
  opt.categories = {"sgd", "adam", "rmsprop"};
  absl::StatusOr<SearchSpace> space =
      SearchSpace::Create({lr, layers, batch, opt});
  EXPECT_TRUE(space.ok()) << space.status();
  return *std::move(space);
}

// The values each parameter took over 200 explores of `donor` without
// resampling, each explore valid.
std::map<int, std::set<double>> PerturbedValues(const Assignment& donor) {
  const SearchSpace space = MixedSpace();
  PbtOptions options;
  options.resample_probability = 0.0;
  std::map<int, std::set<double>> seen;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const Assignment x = Explore(space, donor, options, seed);
    EXPECT_TRUE(space.Validate(x).ok());
    for (int j = 0; j < space.dim(); ++j) seen[j].insert(x[j]);
  }
  return seen;
}

TEST(PbtExploreTest, PerturbsByTheFactorsOrMovesToANeighbour) {
  std::map<int, std::set<double>> seen = PerturbedValues({0.01, 5, 32, 1});
  // 0.01 * 0.8 and 0.01 * 1.2 (each exactly a product, nothing else).
  EXPECT_THAT(seen[0], UnorderedElementsAre(0.01 * 0.8, 0.01 * 1.2));
  EXPECT_THAT(seen[1], UnorderedElementsAre(4, 6));
  EXPECT_THAT(seen[2], UnorderedElementsAre(16, 64));
  EXPECT_THAT(seen[3], UnorderedElementsAre(0, 2));
}

TEST(PbtExploreTest, ClampsAtTheEdgesAndStepsSmallIntegers) {
  std::map<int, std::set<double>> seen = PerturbedValues({0.95, 1, 128, 2});
  EXPECT_THAT(seen[0], UnorderedElementsAre(0.95 * 0.8, 1.0));
  // round(1 * 0.8) = 1 would not move: 0.8 steps down (clamped at 1), 1.2
  // steps up to 2.
  EXPECT_THAT(seen[1], UnorderedElementsAre(1, 2));
  EXPECT_THAT(seen[2], UnorderedElementsAre(64, 128));
  EXPECT_THAT(seen[3], UnorderedElementsAre(1, 2));
}

TEST(PbtExploreTest, ResamplesAtTheGivenRateAndIsDeterministic) {
  const SearchSpace space = MixedSpace();
  PbtOptions options;
  options.resample_probability = 1.0;
  options.perturbation_factors = {2.0};
  const Assignment donor = {0.01, 5, 32, 1};
  int differs = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const Assignment x = Explore(space, donor, options, seed);
    ASSERT_TRUE(space.Validate(x).ok());
    EXPECT_EQ(x, Explore(space, donor, options, seed));
    // Never the perturbed value: a fresh draw of lr is continuous.
    EXPECT_NE(x[0], 0.02);
    differs += x[0] != donor[0];
  }
  EXPECT_EQ(differs, 200);
  // Probability 0.25: about a quarter of the lr values resampled.
  options.resample_probability = 0.25;
  int resampled = 0;
  for (uint64_t seed = 0; seed < 4000; ++seed) {
    resampled += Explore(space, donor, options, seed)[0] != 0.02;
  }
  EXPECT_NEAR(resampled / 4000.0, 0.25, 0.03);
}

}  // namespace
}  // namespace hypertune::optimizer
