// Early stopping with several objectives and constraints: the MO-ASHA rung
// order (fronts, epsilon-net, hypervolume contribution), the rules on every
// objective, and the constraint forecast.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "optimizer/early_stopping.h"
#include "optimizer/mo_early_stopping.h"

namespace hypertune::optimizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Rule = EarlyStoppingConfig::Rule;
using Mo = EarlyStoppingConfig::MultiObjective;
using Status = TrialCurve::Status;

Eigen::MatrixXd Rows(std::vector<std::vector<double>> rows) {
  Eigen::MatrixXd y(rows.size(), rows.front().size());
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j) y(i, j) = rows[i][j];
  }
  return y;
}

// A trial reporting (objective 1, objective 2) at steps 1, 2, ...
TrialCurve Curve2(int64_t id, Status status,
                  std::vector<std::pair<double, double>> values) {
  TrialCurve curve;
  curve.id = id;
  curve.status = status;
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t step = static_cast<int64_t>(i) + 1;
    curve.points.emplace_back(step, values[i].first);
    curve.metrics.push_back({step, {values[i].first, values[i].second}, {}});
  }
  return curve;
}

// --- The rung order ---------------------------------------------------------

TEST(OrderRungTest, FrontsComeFirstAndTheNetSpreadsOverTheFront) {
  // Rows 0-3 are the front of a maximized pair; rows 4 and 5 are dominated
  // (row 5 only by row 4's front... row 4 is in front 1, row 5 in front 2).
  const Eigen::MatrixXd y = Rows(
      {{1.0, 0.0}, {0.9, 0.5}, {0.0, 1.0}, {0.5, 0.9}, {0.4, 0.4}, {0.3, 0.3}});
  std::vector<int> fronts;
  const std::vector<int> order = OrderRung(y, FrontOrder::kEpsilonNet, &fronts);
  EXPECT_THAT(fronts, ElementsAre(0, 0, 0, 0, 1, 2));
  // The best in the first objective, then the far end of the front, then
  // the points in between (farthest first), then the next fronts.
  ASSERT_EQ(order.size(), 6u);
  EXPECT_EQ(order[0], 0);
  EXPECT_EQ(order[1], 2);
  EXPECT_EQ(order[4], 4);
  EXPECT_EQ(order[5], 5);
  // First-objective order would take row 1 second; the net takes the other
  // end, so a top-2 cut keeps both ends of the front.
  EXPECT_THAT(std::vector<int>(order.begin() + 2, order.begin() + 4),
              ::testing::UnorderedElementsAre(1, 3));
}

TEST(OrderRungTest, EpsilonNetIsAFarthestPointTraversal) {
  // On a line: 0, then the far end, then the middle, then the quarters.
  const Eigen::MatrixXd points =
      Rows({{1.0, 0.0}, {0.75, 0.25}, {0.5, 0.5}, {0.25, 0.75}, {0.0, 1.0}});
  EXPECT_THAT(EpsilonNetOrder(points), ElementsAre(0, 4, 2, 1, 3));
  // Every prefix covers the rest within the distance to the next point.
  const std::vector<int> order = EpsilonNetOrder(points);
  for (size_t k = 1; k + 1 < order.size(); ++k) {
    double next = 0;
    for (size_t i = k; i < order.size(); ++i) {
      double nearest = std::numeric_limits<double>::infinity();
      for (size_t t = 0; t < k; ++t) {
        nearest = std::min(
            nearest, (points.row(order[i]) - points.row(order[t])).norm());
      }
      if (i == k) next = nearest;
      EXPECT_LE(nearest, next + 1e-12) << "prefix " << k << " point " << i;
    }
  }
}

TEST(OrderRungTest, HypervolumeOrderTakesTheKneeFirst) {
  // Scaled to [0, 1] with the reference at -0.1: the knee (0.8, 0.8) adds
  // 0.81, an end only 1.1 x 0.1 = 0.11 alone.
  const Eigen::MatrixXd y = Rows({{1.0, 0.0}, {0.8, 0.8}, {0.0, 1.0}});
  const std::vector<int> order = OrderRung(y, FrontOrder::kHypervolume);
  EXPECT_EQ(order[0], 1);
  // The epsilon-net starts from the first objective's best instead.
  EXPECT_EQ(OrderRung(y, FrontOrder::kEpsilonNet)[0], 0);
}

TEST(OrderRungTest, ScalesDoNotMatter) {
  // Objective 2 in thousands: the same order as in units.
  const Eigen::MatrixXd units =
      Rows({{1.0, 0.0}, {0.9, 0.5}, {0.0, 1.0}, {0.5, 0.9}});
  Eigen::MatrixXd thousands = units;
  thousands.col(1) *= 1000.0;
  EXPECT_EQ(OrderRung(units, FrontOrder::kEpsilonNet),
            OrderRung(thousands, FrontOrder::kEpsilonNet));
  EXPECT_EQ(OrderRung(units, FrontOrder::kHypervolume),
            OrderRung(thousands, FrontOrder::kHypervolume));
}

// --- MO-ASHA ----------------------------------------------------------------

EarlyStoppingConfig MoAsha(Mo mode) {
  EarlyStoppingConfig config;
  config.rule = Rule::kAsha;
  config.min_resource = 1;
  config.max_resource = 9;
  config.reduction_factor = 3;
  config.maximize = true;
  config.objectives_maximize = {true, false};  // accuracy up, seconds down
  config.multi_objective = mode;
  return config;
}

// Five trials at rung 1: trial 5 is the fastest (a front's end) but the
// least accurate; trials 2-4 are dominated by trial 1.
std::vector<TrialCurve> FiveAtRungOne() {
  return {Curve2(1, Status::kRunning, {{0.9, 5.0}}),
          Curve2(2, Status::kRunning, {{0.8, 6.0}}),
          Curve2(3, Status::kRunning, {{0.7, 7.0}}),
          Curve2(4, Status::kRunning, {{0.6, 8.0}}),
          Curve2(5, Status::kRunning, {{0.1, 1.0}})};
}

TEST(MoAshaTest, AFrontEndGoesOnWhereTheFirstObjectiveStopsIt) {
  const std::vector<TrialCurve> study = FiveAtRungOne();
  EarlyStoppingConfig config = MoAsha(Mo::kEpsilonNet);
  config.min_trials = 1;
  // Top floor(5 / 3) = 1: the first objective's best goes on ...
  EXPECT_EQ(DecideTrial(config, study, 1).action, Action::kContinue);
  // ... and trial 5, last by accuracy, is second in the net: stopped with
  // one place, but with six trials at the rung there are two places.
  EXPECT_EQ(DecideTrial(config, study, 5).action, Action::kStop);
  std::vector<TrialCurve> six = study;
  six.push_back(Curve2(6, Status::kRunning, {{0.5, 9.0}}));
  const Decision fast = DecideTrial(config, six, 5);
  EXPECT_EQ(fast.action, Action::kContinue);
  EXPECT_THAT(fast.reason, HasSubstr("ranks 2 of 6 (front 1, epsilon-net"));
  // First objective only: trial 5 is last, trial 2 goes on instead.
  EarlyStoppingConfig first = config;
  first.multi_objective = Mo::kFirstObjective;
  EXPECT_EQ(DecideTrial(first, six, 5).action, Action::kStop);
  EXPECT_EQ(DecideTrial(first, six, 2).action, Action::kContinue);
  EXPECT_EQ(DecideTrial(config, six, 2).action, Action::kStop);
}

TEST(MoAshaTest, DirectionsAreTheObjectives) {
  // Both minimized: the fastest, least accurate trial 5 now dominates
  // (lower "accuracy" and lower seconds): it ranks first.
  std::vector<TrialCurve> study = FiveAtRungOne();
  EarlyStoppingConfig config = MoAsha(Mo::kEpsilonNet);
  config.maximize = false;
  config.objectives_maximize = {false, false};
  const Decision d = DecideTrial(config, study, 5);
  EXPECT_EQ(d.action, Action::kContinue);
  EXPECT_THAT(d.reason, HasSubstr("ranks 1 of 5"));
  EXPECT_EQ(DecideTrial(config, study, 1).action, Action::kStop);
}

TEST(MoAshaTest, PausedTrialsArePromotedInTheRungsOrder) {
  std::vector<TrialCurve> study = FiveAtRungOne();
  study.push_back(Curve2(6, Status::kRunning, {{0.5, 9.0}}));
  for (TrialCurve& c : study) c.status = Status::kPaused;
  EarlyStoppingConfig config = MoAsha(Mo::kEpsilonNet);
  config.pause_at_rungs = true;
  const std::vector<Promotion> promotions = Promotions(config, study);
  ASSERT_EQ(promotions.size(), 2u);
  EXPECT_EQ(promotions[0].trial_id, 1);
  EXPECT_EQ(promotions[1].trial_id, 5);
  EXPECT_EQ(promotions[1].next_budget, 3);
  // By hypervolume contribution: the same two ends here (no knee).
  config.multi_objective = Mo::kHypervolume;
  std::vector<int64_t> ids;
  for (const Promotion& p : Promotions(config, study))
    ids.push_back(p.trial_id);
  EXPECT_THAT(ids, ::testing::UnorderedElementsAre(1, 5));
  // First objective: trials 1 and 2.
  config.multi_objective = Mo::kFirstObjective;
  ids.clear();
  for (const Promotion& p : Promotions(config, study))
    ids.push_back(p.trial_id);
  EXPECT_THAT(ids, ElementsAre(1, 2));
  // Draining: the unpromotable are the rest, whatever the order.
  config.multi_objective = Mo::kEpsilonNet;
  EXPECT_THAT(UnpromotableTrials(config, study), ElementsAre(2, 3, 4, 6));
}

TEST(MoAshaTest, ATrialWithoutEveryObjectiveIsNotRanked) {
  std::vector<TrialCurve> study = FiveAtRungOne();
  // Trial 6 reports accuracy only: it has no place in the rung.
  TrialCurve partial;
  partial.id = 6;
  partial.points = {{1, 0.99}};
  partial.metrics.push_back(
      {1, {0.99, std::numeric_limits<double>::quiet_NaN()}, {}});
  study.push_back(partial);
  EarlyStoppingConfig config = MoAsha(Mo::kEpsilonNet);
  EXPECT_EQ(DecideTrial(config, study, 6).action, Action::kContinue);
  EXPECT_THAT(DecideTrial(config, study, 6).reason, IsEmpty());
  // The others are ranked among five.
  EXPECT_THAT(DecideTrial(config, study, 1).reason, HasSubstr("of 5"));
}

// --- Median and percentile on every objective ------------------------------

TEST(MoMedianTest, StopsOnlyWhenWorseOnEveryObjective) {
  EarlyStoppingConfig config;
  config.rule = Rule::kMedian;
  config.min_trials = 3;
  config.objectives_maximize = {true, false};
  std::vector<TrialCurve> study = {
      Curve2(1, Status::kFinished, {{0.5, 5.0}, {0.6, 5.0}}),
      Curve2(2, Status::kFinished, {{0.6, 4.0}, {0.7, 4.0}}),
      Curve2(3, Status::kFinished, {{0.7, 3.0}, {0.8, 3.0}}),
      // Worse accuracy than the median (0.65 running average at step 2),
      // but faster than the median (4.0): it goes on.
      Curve2(4, Status::kRunning, {{0.3, 1.0}, {0.4, 1.0}}),
      // Worse on both: stopped.
      Curve2(5, Status::kRunning, {{0.3, 9.0}, {0.4, 9.0}})};
  EXPECT_EQ(DecideTrial(config, study, 4).action, Action::kContinue);
  const Decision d = DecideTrial(config, study, 5);
  EXPECT_EQ(d.action, Action::kStop);
  EXPECT_THAT(d.reason, HasSubstr("every objective"));
  EXPECT_THAT(d.reason, HasSubstr("objective 2: median"));
  // First objective only: trial 4 is stopped too.
  config.multi_objective = Mo::kFirstObjective;
  EXPECT_EQ(DecideTrial(config, study, 4).action, Action::kStop);
  // Percentile, keeping the top quarter: still both needed.
  config.multi_objective = Mo::kHypervolume;
  config.rule = Rule::kPercentile;
  config.percentile = 25;
  EXPECT_EQ(DecideTrial(config, study, 4).action, Action::kContinue);
  EXPECT_EQ(DecideTrial(config, study, 5).action, Action::kStop);
}

// --- Constraints ------------------------------------------------------------

TEST(ConstraintForecastTest, AGrowingMetricIsPredictedPastItsBound) {
  // Seconds grow by 10 a step: 100 at step 10, 30 at step 3.
  const std::vector<std::pair<int64_t, double>> points = {
      {1, 10.0}, {2, 20.0}, {3, 30.0}};
  const auto f = ForecastConstraint(points, 10, -INFINITY, 60.0);
  ASSERT_TRUE(f.has_value());
  EXPECT_NEAR(f->linear, 100.0, 1e-9);
  EXPECT_NEAR(f->linear_margin, 0.0, 1e-9);
  // Against log(1 + s) the points bend: a worse fit, predicting less, with
  // a wide margin; the linear line, exact, decides.
  EXPECT_LT(f->log_linear, 100.0);
  EXPECT_GT(f->log_linear_margin, 0.0);
  EXPECT_TRUE(f->misses);
  // With the bound at 1000 neither misses.
  EXPECT_FALSE(ForecastConstraint(points, 10, -INFINITY, 1000.0)->misses);
  // Two points or a last step at the final one: no forecast.
  EXPECT_FALSE(
      ForecastConstraint(std::span(points).first(2), 10, -INFINITY, 60.0)
          .has_value());
  EXPECT_FALSE(ForecastConstraint(points, 3, -INFINITY, 60.0).has_value());
}

TEST(ConstraintForecastTest, NoiseWithinTheBoundNeverStops) {
  // A level of 0.5 under a bound of 0.6 with noise of sd 0.05: over many
  // draws and every prefix of 3 to 8 points, never a predicted miss.
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0.0, 0.05);
  int forecasts = 0;
  for (int draw = 0; draw < 200; ++draw) {
    std::vector<std::pair<int64_t, double>> points;
    for (int64_t s = 1; s <= 8; ++s) {
      points.emplace_back(s, 0.5 + noise(rng));
      const auto f = ForecastConstraint(points, 50, -INFINITY, 0.6);
      if (!f) continue;
      ++forecasts;
      EXPECT_FALSE(f->misses) << "draw " << draw << " step " << s;
    }
  }
  EXPECT_EQ(forecasts, 200 * 6);
}

TEST(ConstraintForecastTest, AConstantOutsideTheBoundMisses) {
  // A model size that does not change with the steps, above its bound: a
  // miss; below its lower bound likewise.
  const std::vector<std::pair<int64_t, double>> size = {
      {1, 5e6}, {2, 5e6}, {3, 5e6}};
  EXPECT_TRUE(ForecastConstraint(size, 9, -INFINITY, 1e6)->misses);
  EXPECT_TRUE(ForecastConstraint(size, 9, 6e6, INFINITY)->misses);
  EXPECT_FALSE(ForecastConstraint(size, 9, 1e6, 6e6)->misses);
}

TEST(ConstraintForecastTest, ALevellingMetricIsReadOnTheLogLine) {
  // Accuracy that levels off, 0.5 + 0.05 log(1 + s): at step 100 it ends
  // at 0.731. The log line fits exactly and decides; the straight line
  // through the same points would overshoot (0.5 + ... > 1).
  std::vector<std::pair<int64_t, double>> points;
  for (int64_t s = 1; s <= 8; ++s) {
    points.emplace_back(s, 0.5 + 0.05 * std::log1p(static_cast<double>(s)));
  }
  const auto f = ForecastConstraint(points, 100, 0.75, INFINITY);
  ASSERT_TRUE(f.has_value());
  EXPECT_NEAR(f->log_linear, 0.5 + 0.05 * std::log(101.0), 1e-9);
  EXPECT_GT(f->linear, 0.75);
  EXPECT_TRUE(f->misses);  // needs 0.75: it will not get there
  EXPECT_FALSE(ForecastConstraint(points, 100, 0.7, INFINITY)->misses);
}

TEST(ConstraintStopTest, AnyRuleStopsATrialThatWillMissItsConstraint) {
  EarlyStoppingConfig config;
  config.rule = Rule::kMedian;
  config.max_resource = 10;
  config.stop_on_constraints = true;
  config.constraints = {{"seconds", -INFINITY, 60.0}};
  TrialCurve slow;
  slow.id = 1;
  TrialCurve fast;
  fast.id = 2;
  for (int64_t s = 1; s <= 3; ++s) {
    slow.points.emplace_back(s, 0.5);
    slow.metrics.push_back({s, {0.5}, {10.0 * s}});
    fast.points.emplace_back(s, 0.5);
    fast.metrics.push_back({s, {0.5}, {2.0 * s}});
  }
  const std::vector<TrialCurve> study = {slow, fast};
  const Decision d = DecideTrial(config, study, 1);
  EXPECT_EQ(d.action, Action::kStop);
  EXPECT_THAT(d.reason, HasSubstr("constraint: seconds is predicted to end"));
  EXPECT_EQ(DecideTrial(config, study, 2).action, Action::kContinue);
  // Off: the same trial goes on (the median rule has no finished trials).
  config.stop_on_constraints = false;
  EXPECT_EQ(DecideTrial(config, study, 1).action, Action::kContinue);
  // ASHA in pause mode stops it too rather than pausing it.
  config.stop_on_constraints = true;
  config.rule = Rule::kAsha;
  config.pause_at_rungs = true;
  config.max_resource = 10;
  EXPECT_EQ(DecideTrial(config, study, 1).action, Action::kStop);
}

// --- Validation -------------------------------------------------------------

TEST(MoValidationTest, NamesTheField) {
  auto message = [](const EarlyStoppingConfig& c) {
    return std::string(ValidateEarlyStoppingConfig(c).message());
  };
  EarlyStoppingConfig c = MoAsha(Mo::kEpsilonNet);
  EXPECT_TRUE(ValidateEarlyStoppingConfig(c).ok());
  c.objectives_maximize = {false, true};
  EXPECT_THAT(message(c), HasSubstr("early_stopping.multi_objective"));
  c = MoAsha(Mo::kEpsilonNet);
  c.pause_at_rungs = true;
  c.promote_by_model = true;
  EXPECT_THAT(message(c),
              HasSubstr("early_stopping.multi_objective: promote_by_model"));
  c.multi_objective = Mo::kFirstObjective;
  EXPECT_TRUE(ValidateEarlyStoppingConfig(c).ok());
  c = MoAsha(Mo::kEpsilonNet);
  c.stop_on_constraints = true;
  EXPECT_THAT(message(c),
              HasSubstr("early_stopping.stop_on_constraints: the study has no "
                        "CONSTRAINT"));
  c.constraints = {{"seconds", -INFINITY, 60.0}};
  EXPECT_TRUE(ValidateEarlyStoppingConfig(c).ok());
  c.rule = Rule::kMedian;
  c.max_resource = 0;
  EXPECT_THAT(message(c), HasSubstr("early_stopping.max_resource"));
  c.rule = Rule::kNone;
  EXPECT_THAT(message(c),
              HasSubstr("early_stopping.stop_on_constraints: needs a rule"));
}

}  // namespace
}  // namespace hypertune::optimizer
