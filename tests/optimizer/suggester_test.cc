#include "optimizer/suggester.h"

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "optimizer/quasi_random_suggester.h"
#include "optimizer/random_suggester.h"
#include "optimizer/sobol.h"

namespace hypertune::optimizer {
namespace {

using ::testing::HasSubstr;

ParameterConfig Numeric(std::string name, ParameterType type, double min,
                        double max, Scale scale = Scale::kLinear) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = type;
  p.min = min;
  p.max = max;
  p.scale = scale;
  return p;
}

SearchSpace MixedSpace() {
  ParameterConfig batch, opt;
  batch.name = "batch";
  batch.type = ParameterType::kDiscrete;
  batch.values = {32, 64, 128};
  opt.name = "opt";
  opt.type = ParameterType::kCategorical;
  opt.categories = {"sgd", "adam", "rmsprop", "adagrad"};
  return SearchSpace::Create(
             {Numeric("lr", ParameterType::kDouble, 1e-5, 1.0, Scale::kLog),
              Numeric("layers", ParameterType::kInteger, 1, 6),
              Numeric("width", ParameterType::kInteger, 8, 512, Scale::kLog),
              batch, opt})
      .value();
}

SuggestRequest Request(const SearchSpace* space, int64_t trials_created,
                       int count, uint64_t seed) {
  SuggestRequest r;
  r.space = space;
  r.trials_created = trials_created;
  r.count = count;
  r.seed = seed;
  return r;
}

class SuggesterTest : public ::testing::TestWithParam<Algorithm> {
 protected:
  std::unique_ptr<Suggester> suggester_ = MakeSuggester(GetParam());
  SearchSpace space_ = MixedSpace();
};

TEST_P(SuggesterTest, ReturnsCountValidAssignments) {
  for (int created : {0, 1, 17, 1000}) {
    for (int count : {1, 3, 16}) {
      SuggestRequest request = Request(&space_, created, count, 9);
      absl::StatusOr<std::vector<Assignment>> out =
          suggester_->Suggest(request);
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->size(), static_cast<size_t>(count));
      for (const Assignment& a : *out) EXPECT_TRUE(space_.Validate(a).ok());
      // The points of one batch are distinct.
      EXPECT_EQ(std::set<Assignment>(out->begin(), out->end()).size(),
                out->size());
    }
  }
}

TEST_P(SuggesterTest, IsDeterministic) {
  SuggestRequest request = Request(&space_, 5, 4, 3);
  request.history.push_back({space_.Decode(Eigen::VectorXd::Constant(5, 0.3)),
                             Outcome::kCompleted,
                             {1.5}});
  const auto first = suggester_->Suggest(request);
  const auto second = MakeSuggester(GetParam())->Suggest(request);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
}

TEST_P(SuggesterTest, ConsecutiveRequestsAndSeedsDiffer) {
  // From trial 1 on: GP_BANDIT's trial 0 is the centre whatever the seed.
  SuggestRequest request = Request(&space_, 1, 1, 3);
  const Assignment a = suggester_->Suggest(request).value()[0];
  request.trials_created = 2;
  const Assignment b = suggester_->Suggest(request).value()[0];
  request.trials_created = 1;
  request.seed = 4;
  const Assignment c = suggester_->Suggest(request).value()[0];
  // The log-scaled double is continuous: equal values would mean equal
  // underlying points.
  EXPECT_NE(a[0], b[0]);
  EXPECT_NE(a[0], c[0]);
}

TEST_P(SuggesterTest, RejectsBadRequests) {
  SuggestRequest request = Request(&space_, 0, 0, 0);
  EXPECT_THAT(suggester_->Suggest(request).status().message(),
              HasSubstr("count"));
  request.count = 1;
  request.trials_created = -1;
  EXPECT_THAT(suggester_->Suggest(request).status().message(),
              HasSubstr("trials_created"));
  request.trials_created = 0;
  request.history.push_back({{0.5, 1, 8, 32, 7}, Outcome::kCompleted, {0}});
  const absl::Status s = suggester_->Suggest(request).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("history[0]: parameters[4] (\"opt\")"));
  request.space = nullptr;
  EXPECT_THAT(suggester_->Suggest(request).status().message(),
              HasSubstr("space"));
}

TEST_P(SuggesterTest, CoversTheRangeOfEachParameter) {
  // 256 suggestions one at a time, as a study would ask.
  std::set<double> layers, batches, categories;
  double lr_min = 1, lr_max = 0;
  for (int t = 0; t < 256; ++t) {
    SuggestRequest request = Request(&space_, t, 1, 1);
    const Assignment a = suggester_->Suggest(request).value()[0];
    lr_min = std::min(lr_min, a[0]);
    lr_max = std::max(lr_max, a[0]);
    layers.insert(a[1]);
    batches.insert(a[3]);
    categories.insert(a[4]);
  }
  // Log scale: a quarter of the points fall below 1e-5^(3/4) ~ 1.8e-4.
  EXPECT_LT(lr_min, 1e-4);
  EXPECT_GT(lr_max, 0.1);
  EXPECT_EQ(layers.size(), 6u);
  EXPECT_EQ(batches.size(), 3u);
  EXPECT_EQ(categories.size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, SuggesterTest,
                         ::testing::Values(Algorithm::kRandom,
                                           Algorithm::kQuasiRandom,
                                           Algorithm::kGpBandit,
                                           Algorithm::kTpe),
                         [](const auto& info) {
                           switch (info.param) {
                             case Algorithm::kRandom:
                               return "Random";
                             case Algorithm::kQuasiRandom:
                               return "QuasiRandom";
                             case Algorithm::kGpBandit:
                               return "GpBandit";
                             case Algorithm::kTpe:
                               return "Tpe";
                             case Algorithm::kGrid:  // grid_suggester_test.cc
                               return "Grid";
                           }
                           return "Unknown";
                         });

TEST(QuasiRandomSuggesterTest, CoversEveryCategoryWithinTheFirstFour) {
  SearchSpace space = MixedSpace();
  for (uint64_t seed = 0; seed < 20; ++seed) {
    // Both as one batch and one trial at a time.
    SuggestRequest batch = Request(&space, 0, 4, seed);
    std::set<double> from_batch, one_by_one;
    const std::vector<Assignment> points =
        QuasiRandomSuggester().Suggest(batch).value();
    for (const Assignment& a : points) {
      from_batch.insert(a[4]);
    }
    for (int t = 0; t < 4; ++t) {
      SuggestRequest single = Request(&space, t, 1, seed);
      one_by_one.insert(QuasiRandomSuggester().Suggest(single).value()[0][4]);
    }
    EXPECT_EQ(from_batch, (std::set<double>{0, 1, 2, 3})) << seed;
    EXPECT_EQ(one_by_one, from_batch) << seed;
  }
}

TEST(QuasiRandomSuggesterTest, BatchEqualsConsecutiveSingles) {
  SearchSpace space = MixedSpace();
  SuggestRequest batch = Request(&space, 10, 3, 2);
  const std::vector<Assignment> points =
      QuasiRandomSuggester().Suggest(batch).value();
  for (int i = 0; i < 3; ++i) {
    SuggestRequest single = Request(&space, 10 + i, 1, 2);
    EXPECT_EQ(QuasiRandomSuggester().Suggest(single).value()[0], points[i]);
  }
}

TEST(QuasiRandomSuggesterTest, RejectsTooManyDimensions) {
  std::vector<ParameterConfig> params(SobolSequence::kMaxDimension + 1);
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].name = "x" + std::to_string(i);
  }
  SearchSpace space = SearchSpace::Create(params).value();
  SuggestRequest request = Request(&space, 0, 1, 0);
  EXPECT_THAT(QuasiRandomSuggester().Suggest(request).status().message(),
              HasSubstr("at most 1111 parameters"));
}

TEST(AlgorithmNameTest, RoundTrips) {
  for (Algorithm a :
       {Algorithm::kRandom, Algorithm::kQuasiRandom, Algorithm::kGpBandit,
        Algorithm::kTpe, Algorithm::kGrid}) {
    EXPECT_EQ(ParseAlgorithm(AlgorithmName(a)).value(), a);
  }
  EXPECT_THAT(
      ParseAlgorithm("random").status().message(),
      HasSubstr("expected one of RANDOM, QUASI_RANDOM, GP_BANDIT, TPE, GRID"));
}

}  // namespace
}  // namespace hypertune::optimizer
