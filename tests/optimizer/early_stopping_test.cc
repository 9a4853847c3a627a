#include "optimizer/early_stopping.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "optimizer/fidelity.h"
#include "testing/learning_curves.h"
#include "tests/optimizer/spaces.h"

namespace hypertune::optimizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Rule = EarlyStoppingConfig::Rule;
using Status = TrialCurve::Status;

TrialCurve Curve(int64_t id, Status status, std::vector<double> values,
                 int64_t first_step = 1) {
  TrialCurve curve;
  curve.id = id;
  curve.status = status;
  for (size_t i = 0; i < values.size(); ++i) {
    curve.points.emplace_back(first_step + static_cast<int64_t>(i), values[i]);
  }
  return curve;
}

TrialCurve Points(int64_t id, Status status,
                  std::vector<std::pair<int64_t, double>> points) {
  TrialCurve curve;
  curve.id = id;
  curve.status = status;
  curve.points = std::move(points);
  return curve;
}

std::vector<TrialCurve> Negated(std::vector<TrialCurve> study) {
  for (TrialCurve& curve : study) {
    for (auto& point : curve.points) point.second = -point.second;
  }
  return study;
}

// --- Median -----------------------------------------------------------------

EarlyStoppingConfig Median() {
  EarlyStoppingConfig config;
  config.rule = Rule::kMedian;
  config.grace_steps = 1;
  config.min_trials = 3;
  return config;
}

// Finished trials whose running averages at step 2 are 0.55, 0.35 and 0.75
// (median 0.55); a finished trial that stopped at step 1 has no say at step 2.
std::vector<TrialCurve> MedianStudy(std::vector<double> running) {
  return {Curve(1, Status::kFinished, {0.5, 0.6, 0.7, 0.8}),
          Curve(2, Status::kFinished, {0.3, 0.4, 0.5, 0.6}),
          Curve(3, Status::kFinished, {0.7, 0.8, 0.9, 1.0}),
          Curve(4, Status::kFinished, {0.01}),
          Curve(5, Status::kRunning, {0.0, 0.0, 0.0}),
          Curve(9, Status::kRunning, std::move(running))};
}

TEST(MedianTest, StopsBelowTheMedianOfRunningAverages) {
  const auto study = MedianStudy({0.2, 0.5});
  const Decision d = DecideTrial(Median(), study, 9);
  EXPECT_EQ(d.action, Action::kStop);
  EXPECT_THAT(d.reason, HasSubstr("median: best 0.5 at step 2"));
  EXPECT_THAT(d.reason, HasSubstr("median 0.55 of 3 finished trials"));
}

TEST(MedianTest, ContinuesAtOrAboveTheMedian) {
  EXPECT_EQ(DecideTrial(Median(), MedianStudy({0.2, 0.56}), 9).action,
            Action::kContinue);
  EXPECT_EQ(DecideTrial(Median(), MedianStudy({0.2, 0.55}), 9).action,
            Action::kContinue);
}

TEST(MedianTest, JudgesTheBestSoFarNotTheLatestValue) {
  EXPECT_EQ(DecideTrial(Median(), MedianStudy({0.58, 0.3}), 9).action,
            Action::kContinue);
}

TEST(MedianTest, MinimizeMirrorsMaximize) {
  EarlyStoppingConfig config = Median();
  config.maximize = false;
  EXPECT_EQ(DecideTrial(config, Negated(MedianStudy({0.2, 0.5})), 9).action,
            Action::kStop);
  EXPECT_EQ(DecideTrial(config, Negated(MedianStudy({0.2, 0.56})), 9).action,
            Action::kContinue);
}

TEST(MedianTest, GracePeriodIsRespected) {
  EarlyStoppingConfig config = Median();
  config.grace_steps = 3;
  EXPECT_EQ(DecideTrial(config, MedianStudy({0.2, 0.5}), 9).action,
            Action::kContinue);
  // At step 3 the median of running averages is 0.6: 0.5 is worse.
  EXPECT_EQ(DecideTrial(config, MedianStudy({0.2, 0.5, 0.5}), 9).action,
            Action::kStop);
}

TEST(MedianTest, TooFewFinishedTrialsContinue) {
  EarlyStoppingConfig config = Median();
  config.min_trials = 4;  // Only 3 finished trials reached step 2.
  EXPECT_EQ(DecideTrial(config, MedianStudy({0.2, 0.5}), 9).action,
            Action::kContinue);
  // Past every finished curve: nobody to compare with.
  EXPECT_EQ(
      DecideTrial(Median(), MedianStudy({0.0, 0.0, 0.0, 0.0, 0.0}), 9).action,
      Action::kContinue);
}

TEST(MedianTest, DefaultMinTrialsIsFive) {
  EarlyStoppingConfig config = Median();
  config.min_trials = 0;  // 5: only 3 finished trials reached step 2.
  EXPECT_EQ(DecideTrial(config, MedianStudy({0.2, 0.5}), 9).action,
            Action::kContinue);
  auto study = MedianStudy({0.2, 0.5});
  study.push_back(Curve(6, Status::kFinished, {0.6, 0.6}));
  study.push_back(Curve(7, Status::kFinished, {0.2, 0.2}));
  // Averages 0.55, 0.35, 0.75, 0.6, 0.2: median 0.55.
  EXPECT_EQ(DecideTrial(config, study, 9).action, Action::kStop);
}

TEST(MedianTest, UnknownTrialAndNoRuleContinue) {
  const auto study = MedianStudy({0.2, 0.5});
  EXPECT_EQ(DecideTrial(Median(), study, 42).action, Action::kContinue);
  EarlyStoppingConfig none;
  EXPECT_EQ(DecideTrial(none, study, 9).action, Action::kContinue);
}

// --- Percentile -------------------------------------------------------------

// Five finished trials at 0.1 .. 0.5 (step 1), and trial 9 at `value`.
std::vector<TrialCurve> PercentileStudy(double value) {
  std::vector<TrialCurve> study;
  for (int i = 1; i <= 5; ++i) {
    study.push_back(Curve(i, Status::kFinished, {0.1 * i}));
  }
  study.push_back(Curve(9, Status::kRunning, {value}));
  return study;
}

TEST(PercentileTest, KeepsTheTopShare) {
  EarlyStoppingConfig config;
  config.rule = Rule::kPercentile;
  config.percentile = 25;  // Top quarter: cut at the 75th percentile, 0.4.
  EXPECT_EQ(DecideTrial(config, PercentileStudy(0.39), 9).action,
            Action::kStop);
  EXPECT_THAT(DecideTrial(config, PercentileStudy(0.39), 9).reason,
              HasSubstr("top-25% cut 0.4 of 5"));
  EXPECT_EQ(DecideTrial(config, PercentileStudy(0.4), 9).action,
            Action::kContinue);
  config.percentile = 50;  // The median, 0.3.
  EXPECT_EQ(DecideTrial(config, PercentileStudy(0.29), 9).action,
            Action::kStop);
  EXPECT_EQ(DecideTrial(config, PercentileStudy(0.31), 9).action,
            Action::kContinue);
  config.percentile = 90;  // Cut at the 10th percentile, interpolated: 0.14.
  EXPECT_EQ(DecideTrial(config, PercentileStudy(0.13), 9).action,
            Action::kStop);
  EXPECT_EQ(DecideTrial(config, PercentileStudy(0.15), 9).action,
            Action::kContinue);
}

TEST(PercentileTest, MinimizeCutsAtTheLowQuantile) {
  EarlyStoppingConfig config;
  config.rule = Rule::kPercentile;
  config.maximize = false;
  config.percentile = 25;  // Lowest quarter kept: cut at 0.2.
  EXPECT_EQ(DecideTrial(config, PercentileStudy(0.21), 9).action,
            Action::kStop);
  EXPECT_EQ(DecideTrial(config, PercentileStudy(0.2), 9).action,
            Action::kContinue);
}

// --- ASHA -------------------------------------------------------------------

EarlyStoppingConfig Asha(bool pause = false) {
  EarlyStoppingConfig config;
  config.rule = Rule::kAsha;
  config.min_resource = 1;
  config.max_resource = 9;
  config.reduction_factor = 3;
  config.min_trials = 1;
  config.pause_at_rungs = pause;
  return config;
}

// Five finished trials with these values at step 1, and trial 6 running.
std::vector<TrialCurve> RungStudy(TrialCurve running) {
  std::vector<TrialCurve> study;
  const double values[] = {0.5, 0.9, 0.3, 0.7, 0.1};
  for (int i = 0; i < 5; ++i) {
    study.push_back(Curve(i + 1, Status::kFinished, {values[i]}));
  }
  study.push_back(std::move(running));
  return study;
}

TEST(AshaTest, RungsGrowByEta) {
  EXPECT_THAT(RungResources(Asha(), 0), ElementsAre(1, 3));
  EarlyStoppingConfig config = Asha();
  config.min_resource = 2;
  config.max_resource = 100;
  EXPECT_THAT(RungResources(config, 0), ElementsAre(2, 6, 18, 54));
  EXPECT_EQ(BracketOf(config, 7), 0);
  EXPECT_EQ(NumBrackets(config), 1);
}

TEST(AshaTest, TopOneOverEtaOfTheRungContinues) {
  // Six at rung 1: the top 2 (0.9 and 0.8) go on.
  const Decision keep =
      DecideTrial(Asha(), RungStudy(Curve(6, Status::kRunning, {0.8})), 6);
  EXPECT_EQ(keep.action, Action::kContinue);
  EXPECT_THAT(keep.reason, HasSubstr("ranks 2 of 6"));
  const Decision stop =
      DecideTrial(Asha(), RungStudy(Curve(6, Status::kRunning, {0.6})), 6);
  EXPECT_EQ(stop.action, Action::kStop);
  EXPECT_THAT(stop.reason, HasSubstr("asha: 0.6 at rung 1 ranks 3 of 6"));
}

TEST(AshaTest, TiesGoToTheEarlierTrial) {
  // 0.9 ties with trial 2; trial 2 ranks first, trial 6 second: kept.
  EXPECT_EQ(DecideTrial(Asha(), RungStudy(Curve(6, Status::kRunning, {0.9})), 6)
                .action,
            Action::kContinue);
  // 0.7 ties with trial 4: after it for trial 6 (third, stopped), before
  // it for trial 0 (second, kept; trial 4 is then third).
  EXPECT_EQ(DecideTrial(Asha(), RungStudy(Curve(6, Status::kRunning, {0.7})), 6)
                .action,
            Action::kStop);
  const auto study = RungStudy(Curve(0, Status::kRunning, {0.7}));
  EXPECT_EQ(DecideTrial(Asha(), study, 0).action, Action::kContinue);
  EXPECT_EQ(DecideTrial(Asha(), study, 4).action, Action::kStop);
}

TEST(AshaTest, OnlyThePointReachingARungIsJudged) {
  // Step 2 is between rungs: no decision, however bad.
  EXPECT_EQ(
      DecideTrial(Asha(), RungStudy(Curve(6, Status::kRunning, {0.6, 0.0})), 6)
          .action,
      Action::kContinue);
  // A repeated step (resumed from an older checkpoint) is not a new arrival.
  EXPECT_EQ(
      DecideTrial(Asha(),
                  RungStudy(Points(6, Status::kRunning, {{1, 0.95}, {1, 0.0}})),
                  6)
          .action,
      Action::kContinue);
  // At or past max_resource the trial finishes by itself.
  EXPECT_EQ(DecideTrial(Asha(),
                        RungStudy(Points(6, Status::kRunning,
                                         {{1, 0.95}, {3, 0.95}, {9, 0.0}})),
                        6)
                .action,
            Action::kContinue);
}

TEST(AshaTest, JumpingOverRungsIsJudgedAtTheHighest) {
  // Trial 6 reports step 3 first; at rung 3 it is alone: kept.
  auto study = RungStudy(Points(6, Status::kRunning, {{3, 0.05}}));
  const Decision d = DecideTrial(Asha(), study, 6);
  EXPECT_EQ(d.action, Action::kContinue);
  EXPECT_THAT(d.reason, HasSubstr("rung 3 ranks 1 of 1"));
}

TEST(AshaTest, FirstArrivalsContinueUntilMinTrials) {
  EarlyStoppingConfig config = Asha();
  config.min_trials = 7;
  EXPECT_EQ(DecideTrial(config, RungStudy(Curve(6, Status::kRunning, {0.6})), 6)
                .action,
            Action::kContinue);
  // With min_trials 1, the second arrival is stopped when worse than the
  // first (top max(1, floor(2/3)) = 1).
  std::vector<TrialCurve> two = {Curve(1, Status::kFinished, {0.5}),
                                 Curve(2, Status::kRunning, {0.4})};
  EXPECT_EQ(DecideTrial(Asha(), two, 2).action, Action::kStop);
  config.min_trials = 0;  // The ASHA default is 1.
  EXPECT_EQ(DecideTrial(config, two, 2).action, Action::kStop);
  EXPECT_EQ(DecideTrial(Asha(), {two.data(), 1}, 1).action, Action::kContinue);
}

TEST(AshaTest, MinimizeMirrorsMaximize) {
  EarlyStoppingConfig config = Asha();
  config.maximize = false;
  EXPECT_EQ(
      DecideTrial(config, Negated(RungStudy(Curve(6, Status::kRunning, {0.8}))),
                  6)
          .action,
      Action::kContinue);
  EXPECT_EQ(
      DecideTrial(config, Negated(RungStudy(Curve(6, Status::kRunning, {0.6}))),
                  6)
          .action,
      Action::kStop);
}

// --- ASHA pause mode and promotions ----------------------------------------

TEST(AshaPauseTest, PausesAtARungUnlessAlreadyInTheTop) {
  // Two at rung 1: floor(2/3) = 0 promotable, so even the best pauses.
  std::vector<TrialCurve> study = {Curve(1, Status::kPaused, {0.5}),
                                   Curve(2, Status::kRunning, {0.9})};
  Decision d = DecideTrial(Asha(true), study, 2);
  EXPECT_EQ(d.action, Action::kPause);
  EXPECT_THAT(d.reason, HasSubstr("paused"));
  // A third arrival that is best goes on at once; one that is not pauses.
  study.push_back(Curve(3, Status::kRunning, {0.95}));
  study[1].status = Status::kPaused;
  EXPECT_EQ(DecideTrial(Asha(true), study, 3).action, Action::kContinue);
  study[2].points[0].second = 0.6;
  EXPECT_EQ(DecideTrial(Asha(true), study, 3).action, Action::kPause);
  // Now trial 2 (0.9) is the top 1 of 3: promoted to rung 3.
  study[2].status = Status::kPaused;
  const std::vector<Promotion> p = Promotions(Asha(true), study);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].trial_id, 2);
  EXPECT_EQ(p[0].rung, 1);
  EXPECT_EQ(p[0].next_budget, 3);
  // Without pause mode there are no promotions.
  EXPECT_THAT(Promotions(Asha(false), study), IsEmpty());
}

// Rung 1 holds 18 trials; 7, 8, 9 and 2 went on to rung 3 and paused there;
// 4 and 6 are paused at rung 1 in the top 6; 1, 3, 5 are paused below it.
std::vector<TrialCurve> PromotionStudy() {
  std::vector<TrialCurve> study = {
      Curve(1, Status::kPaused, {0.5}),
      Points(2, Status::kPaused, {{1, 0.9}, {2, 0.9}, {3, 0.95}}),
      Curve(3, Status::kPaused, {0.3}),
      Curve(4, Status::kPaused, {0.86}),
      Curve(5, Status::kPaused, {0.2}),
      Curve(6, Status::kPaused, {0.85}),
      Points(7, Status::kPaused, {{1, 0.99}, {3, 0.9}}),
      Points(8, Status::kPaused, {{1, 0.98}, {3, 0.99}}),
      Points(9, Status::kPaused, {{1, 0.97}, {3, 0.5}})};
  for (int id = 10; id <= 18; ++id) {
    study.push_back(Curve(id, Status::kFinished, {0.1}));
  }
  return study;
}

TEST(AshaPauseTest, PromotionsHighestRungFirstThenBest) {
  const std::vector<Promotion> p = Promotions(Asha(true), PromotionStudy());
  ASSERT_EQ(p.size(), 3u);
  // Rung 3: four trials, top 1 is 8 (0.99), resumed to max_resource.
  EXPECT_EQ(p[0].trial_id, 8);
  EXPECT_EQ(p[0].rung, 3);
  EXPECT_EQ(p[0].next_budget, 9);
  // Rung 1: 18 trials, top 6 = 7, 8, 9, 2 (gone on), then 4 and 6 (paused).
  EXPECT_EQ(p[1].trial_id, 4);
  EXPECT_EQ(p[1].rung, 1);
  EXPECT_EQ(p[1].next_budget, 3);
  EXPECT_EQ(p[2].trial_id, 6);
}

TEST(AshaPauseTest, PromotedTrialsFillTheirPlaces) {
  // Once 8 runs again, rung 3's single place is taken: no promotion there.
  auto study = PromotionStudy();
  study[7].status = Status::kRunning;
  study[7].points.emplace_back(4, 0.99);
  const std::vector<Promotion> p = Promotions(Asha(true), study);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].trial_id, 4);
  EXPECT_EQ(p[1].trial_id, 6);
}

TEST(AshaPauseTest, DrainingPromotesEachRungsBestAndTheRestAreUnpromotable) {
  std::vector<TrialCurve> study = {Curve(1, Status::kPaused, {0.5}),
                                   Curve(2, Status::kPaused, {0.9})};
  EXPECT_THAT(Promotions(Asha(true), study), IsEmpty());
  const std::vector<Promotion> p =
      Promotions(Asha(true), study, /*draining=*/true);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].trial_id, 2);
  EXPECT_THAT(UnpromotableTrials(Asha(true), study), ElementsAre(1));
  EXPECT_THAT(UnpromotableTrials(Asha(true), PromotionStudy()),
              ElementsAre(1, 2, 3, 5, 7, 9));
}

// --- Hyperband --------------------------------------------------------------

EarlyStoppingConfig Hyperband(int brackets = 0) {
  EarlyStoppingConfig config;
  config.rule = Rule::kHyperband;
  config.min_resource = 1;
  config.max_resource = 27;
  config.reduction_factor = 3;
  config.brackets = brackets;
  config.min_trials = 1;
  return config;
}

TEST(HyperbandTest, BracketRungs) {
  EXPECT_EQ(MaxBrackets(Hyperband()), 4);
  EXPECT_EQ(NumBrackets(Hyperband()), 4);
  EXPECT_EQ(NumBrackets(Hyperband(2)), 2);
  EXPECT_THAT(RungResources(Hyperband(), 0), ElementsAre(1, 3, 9));
  EXPECT_THAT(RungResources(Hyperband(), 1), ElementsAre(3, 9));
  EXPECT_THAT(RungResources(Hyperband(), 2), ElementsAre(9));
  EXPECT_THAT(RungResources(Hyperband(), 3), IsEmpty());
}

TEST(HyperbandTest, BracketsAreWeightedAsHyperbandAllocates) {
  // Weights ceil(4 * 3^s / (s + 1)) for s = 3, 2, 1, 0: 27, 12, 6, 4 of 49.
  std::map<int, int> counts;
  for (int64_t id = 1; id <= 4900; ++id) ++counts[BracketOf(Hyperband(), id)];
  EXPECT_NEAR(counts[0], 2700, 10);
  EXPECT_NEAR(counts[1], 1200, 10);
  EXPECT_NEAR(counts[2], 600, 10);
  EXPECT_NEAR(counts[3], 400, 10);
  // Deterministic, and consecutive ids interleave.
  EXPECT_EQ(BracketOf(Hyperband(), 17), BracketOf(Hyperband(), 17));
  std::map<int, int> first;
  for (int64_t id = 1; id <= 10; ++id) ++first[BracketOf(Hyperband(), id)];
  EXPECT_GE(first.size(), 3u);
  // Two brackets: only the two most aggressive, 27 : 12.
  counts.clear();
  for (int64_t id = 1; id <= 3900; ++id) {
    ++counts[BracketOf(Hyperband(2), id)];
  }
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_NEAR(counts[0], 2700, 10);
}

TEST(HyperbandTest, TrialsCompeteOnlyWithinTheirBracket) {
  int64_t b0 = 0, b1 = 0, other_b1 = 0;
  for (int64_t id = 1; id < 100 && (!b0 || !b1 || !other_b1); ++id) {
    const int b = BracketOf(Hyperband(), id);
    if (b == 0 && !b0) b0 = id;
    if (b == 1 && b1 && !other_b1) other_b1 = id;
    if (b == 1 && !b1) b1 = id;
  }
  ASSERT_TRUE(b0 && b1 && other_b1);
  // A bracket-1 trial at step 1 is not at one of its rungs.
  std::vector<TrialCurve> study = {
      Curve(b0, Status::kFinished, {0.9, 0.9, 0.9}),
      Curve(b1, Status::kRunning, {0.1})};
  EXPECT_EQ(DecideTrial(Hyperband(), study, b1).action, Action::kContinue);
  // At step 3 it is alone in bracket 1 (the better bracket-0 trial is not
  // its competitor): kept.
  study[1] = Curve(b1, Status::kRunning, {0.1, 0.1, 0.1});
  const Decision d = DecideTrial(Hyperband(), study, b1);
  EXPECT_EQ(d.action, Action::kContinue);
  EXPECT_THAT(d.reason, HasSubstr("hyperband[1]: 0.1 at rung 3 ranks 1 of 1"));
  // A better bracket-1 trial makes it lose its rung.
  study.push_back(Curve(other_b1, Status::kFinished, {0.5, 0.5, 0.5}));
  EXPECT_EQ(DecideTrial(Hyperband(), study, b1).action, Action::kStop);
}

// --- Model-based multi-fidelity ---------------------------------------------

TEST(HighestRungTest, PicksTheHighestRungWithEnoughTrials) {
  std::vector<TrialCurve> study = {
      Curve(1, Status::kFinished, {0.1}),
      Curve(2, Status::kFinished, {0.2, 0.25, 0.3}),
      Curve(3, Status::kPaused, {0.3, 0.35, 0.4}),
      Points(4, Status::kFinished, {{1, 0.4}, {3, 0.5}, {9, 0.6}}),
      Curve(5, Status::kRunning, {0.5})};
  using Obs = std::vector<std::pair<int64_t, double>>;
  EXPECT_EQ(HighestRungObservations(Asha(), study, 1), (Obs{{4, 0.6}}));
  int64_t resource = -1;
  EXPECT_EQ(HighestRungObservations(Asha(), study, 3, &resource),
            (Obs{{2, 0.3}, {3, 0.4}, {4, 0.5}}));
  EXPECT_EQ(resource, 3);
  EXPECT_EQ(HighestRungObservations(Asha(), study, 5),
            (Obs{{1, 0.1}, {2, 0.2}, {3, 0.3}, {4, 0.4}, {5, 0.5}}));
  EXPECT_THAT(HighestRungObservations(Asha(), study, 6, &resource), IsEmpty());
  EXPECT_EQ(resource, 0);
  // Other rules: the last points of finished trials.
  EXPECT_EQ(HighestRungObservations(Median(), study, 3),
            (Obs{{1, 0.1}, {2, 0.3}, {4, 0.6}}));
}

TEST(AtOneFidelityTest, ModelsTheHighestRungAndKeepsPendingAndInfeasible) {
  FidelityHistory fidelity;
  fidelity.rule = Asha();
  fidelity.curves = {Curve(1, Status::kFinished, {0.1}),
                     Curve(2, Status::kFinished, {0.2, 0.25, 0.3}),
                     Curve(3, Status::kPaused, {0.3, 0.35, 0.4}),
                     Curve(4, Status::kFinished, {0.4, 0.45, 0.5}),
                     Curve(5, Status::kRunning, {0.5})};
  const SearchSpace space = Box(1);
  SuggestRequest r;
  r.space = &space;
  r.metrics = {{MetricRole::kObjective}, {MetricRole::kConstraint, 0, 1}};
  auto observation = [](int64_t id, Outcome outcome) {
    Observation o{{0.1 * static_cast<double>(id)}, outcome};
    if (outcome == Outcome::kCompleted) o.values = {9, 0.5};
    o.trial_id = id;
    return o;
  };
  for (int64_t id : {1, 2, 4, 7}) {
    r.history.push_back(observation(id, Outcome::kCompleted));
  }
  r.history.push_back(observation(3, Outcome::kPending));
  r.history.push_back(observation(5, Outcome::kPending));
  r.history.push_back(observation(6, Outcome::kInfeasible));
  EXPECT_EQ(AtOneFidelity(r).history.size(), r.history.size());
  r.fidelity = &fidelity;
  // Rung 1 is the highest that 4 trials (d + 1, at least 4) reached.
  const SuggestRequest at = AtOneFidelity(r);
  EXPECT_EQ(at.fidelity, nullptr);
  ASSERT_EQ(at.metrics.size(), 1u);
  EXPECT_EQ(at.metrics[0].role, MetricRole::kObjective);
  std::map<int64_t, std::pair<Outcome, std::vector<double>>> seen;
  for (const Observation& o : at.history) {
    seen[o.trial_id] = {o.outcome, o.values};
  }
  using Seen = std::pair<Outcome, std::vector<double>>;
  EXPECT_EQ(seen[1], (Seen{Outcome::kCompleted, {0.1}}));
  EXPECT_EQ(seen[2], (Seen{Outcome::kCompleted, {0.2}}));
  EXPECT_EQ(seen[3], (Seen{Outcome::kCompleted, {0.3}}));  // Paused there.
  EXPECT_EQ(seen[5], (Seen{Outcome::kCompleted, {0.5}}));
  EXPECT_EQ(seen[6], (Seen{Outcome::kInfeasible, {}}));
  EXPECT_FALSE(seen.contains(7));  // Completed, of another fidelity.
  EXPECT_TRUE(ValidateRequest(at).ok());
  // Minimized objectives arrive turned into maximization.
  fidelity.rule.maximize = false;
  for (const Observation& o : AtOneFidelity(r).history) {
    if (o.trial_id == 4) {
      EXPECT_EQ(o.values, std::vector<double>{-0.4});
    }
  }
}

// --- Validation -------------------------------------------------------------

// The outside review's hang: max_resource near INT64_MAX made the bracket
// count's integer product wrap and its loop never end. Such specs are
// refused, naming the limit, and every spec within the limits is computed
// in bounded time with no overflow.
TEST(ValidateTest, HugeResourcesAndFactorsAreRefusedNamingTheLimit) {
  for (int64_t max : {int64_t{1} << 62, int64_t{4611686018427387904},
                      std::numeric_limits<int64_t>::max(),
                      EarlyStoppingConfig::kMaxResource + 1}) {
    for (Rule rule : {Rule::kAsha, Rule::kHyperband}) {
      EarlyStoppingConfig c = Hyperband();
      c.rule = rule;
      c.reduction_factor = 2;
      c.max_resource = max;
      const absl::Status status = ValidateEarlyStoppingConfig(c);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << max;
      EXPECT_THAT(std::string(status.message()),
                  HasSubstr("early_stopping.max_resource: must be <= 2^53"));
    }
  }
  for (double eta : {1e7, 1e300, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    EarlyStoppingConfig c = Hyperband();
    c.reduction_factor = eta;
    EXPECT_THAT(std::string(ValidateEarlyStoppingConfig(c).message()),
                HasSubstr("early_stopping.reduction_factor: must be in [2, "))
        << eta;
  }
  // The value as the user wrote it, not rounded to 1e+06.
  EarlyStoppingConfig c = Hyperband();
  c.reduction_factor = 1'000'001;
  EXPECT_THAT(std::string(ValidateEarlyStoppingConfig(c).message()),
              HasSubstr("must be in [2, 1000000], got 1000001"));
}

TEST(HyperbandTest, TheLargestResourcesStayExact) {
  EarlyStoppingConfig c = Hyperband();
  c.reduction_factor = 2;
  c.max_resource = EarlyStoppingConfig::kMaxResource;
  ASSERT_TRUE(ValidateEarlyStoppingConfig(c).ok());
  EXPECT_EQ(MaxBrackets(c), 54);  // 2^0 .. 2^53
  const std::vector<int64_t> rungs = RungResources(c, 0);
  ASSERT_EQ(rungs.size(), 53u);
  EXPECT_EQ(rungs.front(), 1);
  EXPECT_EQ(rungs.back(), int64_t{1} << 52);
  EXPECT_THAT(RungResources(c, 53), IsEmpty());
  const int bracket = BracketOf(c, std::numeric_limits<int64_t>::max());
  EXPECT_GE(bracket, 0);
  EXPECT_LT(bracket, 54);
  // The largest factor: one rung below max_resource.
  c.reduction_factor = EarlyStoppingConfig::kMaxReductionFactor;
  ASSERT_TRUE(ValidateEarlyStoppingConfig(c).ok());
  EXPECT_EQ(MaxBrackets(c), 3);  // 1, 1e6, 1e12 <= 2^53 < 1e18
  EXPECT_THAT(RungResources(c, 0),
              ElementsAre(1, 1'000'000, 1'000'000'000'000));
}

TEST(ValidateTest, NamesTheFieldAndTheProblem) {
  EXPECT_TRUE(ValidateEarlyStoppingConfig(EarlyStoppingConfig{}).ok());
  EXPECT_TRUE(ValidateEarlyStoppingConfig(Median()).ok());
  EXPECT_TRUE(ValidateEarlyStoppingConfig(Asha(true)).ok());
  EXPECT_TRUE(ValidateEarlyStoppingConfig(Hyperband(4)).ok());

  auto message = [](const EarlyStoppingConfig& config) {
    const absl::Status status = ValidateEarlyStoppingConfig(config);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    return std::string(status.message());
  };
  EarlyStoppingConfig c = Asha();
  c.min_resource = 3;
  c.max_resource = 1;
  EXPECT_EQ(message(c),
            "early_stopping.max_resource: must be >= min_resource (3), got 1");
  c = Asha();
  c.min_resource = 0;
  EXPECT_EQ(message(c), "early_stopping.min_resource: must be >= 1, got 0");
  c = Asha();
  c.reduction_factor = 1.5;
  EXPECT_EQ(
      message(c),
      "early_stopping.reduction_factor: must be in [2, 1000000], got 1.5");
  c = Hyperband(5);
  EXPECT_THAT(message(c),
              HasSubstr("early_stopping.brackets: must be in [0, 4]"));
  c = Median();
  c.grace_steps = -1;
  EXPECT_EQ(message(c), "early_stopping.grace_steps: must be >= 0, got -1");
  c = Median();
  c.min_trials = -1;
  EXPECT_EQ(message(c),
            "early_stopping.min_trials: must be >= 0 (0: the rule's default), "
            "got -1");
  c = Median();
  c.rule = Rule::kPercentile;
  c.percentile = 100;
  EXPECT_EQ(message(c),
            "early_stopping.percentile: must be in (0, 100), got 100");
  c = Median();
  c.pause_at_rungs = true;
  EXPECT_THAT(message(c), HasSubstr("early_stopping.pause_at_rungs"));
}

// --- The benchmark's simulated study (testing/learning_curves.h) ----------

TEST(SimulatedStudyTest, WithoutStoppingOneWorkerPaysFullBudgets) {
  const bench::CurveSuite suite = bench::MakeCurveSuite(60, 27, /*seed=*/3);
  bench::StudySimOptions options;
  options.workers = 1;
  const bench::StudySimResult r = bench::SimulateStudy(suite, options).value();
  // The target is met when the best reported final value belongs to a
  // configuration within 1% of the optimum: find that one by hand.
  double best = -1e9, quality = 0;
  int k = 0;
  for (; k < 60; ++k) {
    if (suite.curves[k].back() > best) {
      best = suite.curves[k].back();
      quality = suite.quality[k];
    }
    if (quality >= suite.optimum - 0.01 * std::abs(suite.optimum)) break;
  }
  ASSERT_LT(k, 60);
  EXPECT_TRUE(r.reached);
  EXPECT_EQ(r.epochs_to_target, 27 * (k + 1));
  EXPECT_EQ(r.trials, k + 1);
}

TEST(SimulatedStudyTest, PauseModeDrainsThePoolToAFullBudgetTrial) {
  const bench::CurveSuite suite = bench::MakeCurveSuite(20, 27, /*seed=*/5);
  bench::StudySimOptions options;
  options.workers = 3;
  options.tolerance = -1;  // Unreachable: the whole pool runs.
  options.config = Hyperband();
  options.config.pause_at_rungs = true;
  const bench::StudySimResult r = bench::SimulateStudy(suite, options).value();
  EXPECT_FALSE(r.reached);
  EXPECT_EQ(r.trials, 20);
  EXPECT_GT(r.paused_resumes, 0);
  EXPECT_GE(r.full_budget_trials, 1);
  EXPECT_LT(r.epochs_to_target, 20 * 27);
  // A config for another max_resource is refused.
  options.config.max_resource = 81;
  EXPECT_EQ(bench::SimulateStudy(suite, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hypertune::optimizer
