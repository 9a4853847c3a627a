#include "optimizer/gp_bandit_suggester.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "optimizer/gp_bandit/coordinates.h"
#include "optimizer/gp_bandit/models.h"
#include "optimizer/gp_bandit/pending_region.h"
#include "optimizer/gp_bandit/pick.h"
#include "optimizer/initial_design.h"
#include "optimizer/metrics.h"
#include "optimizer/splitmix.h"
#include "tests/optimizer/spaces.h"

namespace hypertune::optimizer {
namespace {

// Maximized: -(x - 0.3)^2 - (y + 0.7)^2 on [-2, 2]^2, optimum 0.
double Quadratic(const Assignment& a) {
  return -std::pow(a[0] - 0.3, 2) - std::pow(a[1] + 0.7, 2);
}

// Runs `trials` sequential trials of `f`; returns the history.
std::vector<Observation> RunStudy(Suggester& s, const SearchSpace& space,
                                  double (*f)(const Assignment&), int trials,
                                  uint64_t seed) {
  return RunSequentialStudy(
      s, space, trials, seed, {}, [f](const Assignment& a) {
        return Observation{a, Outcome::kCompleted, {f(a)}};
      });
}

double Best(const std::vector<Observation>& h) {
  double best = -1e300;
  for (const Observation& o : h) {
    if (o.outcome == Outcome::kCompleted) best = std::max(best, o.values[0]);
  }
  return best;
}

// The best completed trial of h.
const Observation& Incumbent(const std::vector<Observation>& h) {
  const Observation* incumbent = &h.front();
  for (const Observation& o : h) {
    if (o.values[0] > incumbent->values[0]) incumbent = &o;
  }
  return *incumbent;
}

// A request for `count` trials after the completed `history`.
SuggestRequest NextRequest(const SearchSpace& space,
                           const std::vector<Observation>& history,
                           uint64_t seed, int count = 1) {
  SuggestRequest r;
  r.space = &space;
  r.history = history;
  r.trials_created = static_cast<int64_t>(history.size());
  r.count = count;
  r.seed = seed;
  return r;
}

TEST(GpBanditTest, FindsTheOptimumOfAQuadraticWithin30Trials) {
  const SearchSpace space = Box(2, -2, 2);
  for (uint64_t seed : {0, 1, 2}) {
    GpBanditSuggester gp;
    const std::vector<Observation> h = RunStudy(gp, space, Quadratic, 30, seed);
    EXPECT_GT(Best(h), -1e-3) << "seed " << seed;
    EXPECT_TRUE(gp.last_fallback_reason().empty());
  }
}

TEST(GpBanditTest, RefitCheckpointsEveryTrialThenEveryTenPercent) {
  EXPECT_EQ(GpBanditSuggester::LastRefitCheckpoint(2), 2);
  EXPECT_EQ(GpBanditSuggester::LastRefitCheckpoint(19), 19);
  EXPECT_EQ(GpBanditSuggester::LastRefitCheckpoint(20), 20);
  EXPECT_EQ(GpBanditSuggester::LastRefitCheckpoint(24), 20);
  EXPECT_EQ(GpBanditSuggester::LastRefitCheckpoint(25), 25);
  // Steps of c / 10 past 50.
  EXPECT_EQ(
      GpBanditSuggester::LastRefitCheckpoint(1000) +
              std::max(5, GpBanditSuggester::LastRefitCheckpoint(1000) / 10) >
          1000,
      true);
}

// A long-lived instance (with caches) and a fresh one for every request
// must agree bit for bit, across the warm-refit, incremental and local
// regimes (small thresholds reach all three quickly).
TEST(GpBanditTest, FreshInstanceReplayingARequestAgrees) {
  GpBanditOptions options;
  options.warm_refit_below = 12;
  options.max_local_points = 30;
  options.max_fit_points = 25;
  options.acquisition_optimizer.raw_samples = 128;
  const SearchSpace space = Box(3);
  GpBanditSuggester long_lived(options);
  std::vector<Observation> history;
  for (int t = 0; t < 40; ++t) {
    SuggestRequest r;
    r.space = &space;
    r.history = history;
    r.trials_created = t;
    r.seed = 5;
    // Every third request is a batch of 2 with one trial pending.
    r.count = t % 3 == 0 ? 2 : 1;
    const std::vector<Assignment> a = long_lived.Suggest(r).value();
    GpBanditSuggester fresh(options);
    EXPECT_EQ(fresh.Suggest(r).value(), a) << "trial " << t;
    EXPECT_EQ(long_lived.Suggest(r).value(), a) << "trial " << t;
    const Assignment& x = a.front();
    history.push_back(
        {x, Outcome::kCompleted, {-std::pow(x[0] - 0.2, 2) - x[1] * x[2]}});
  }
}

// With few trials the acquisition averages over hyperparameter draws, so
// the pick differs from the MAP-only one; past integrate_below both are the
// MAP model's.
TEST(GpBanditTest, AveragesOverHyperparameterDrawsOnlyWhileTrialsAreFew) {
  const SearchSpace space = Box(2, -2, 2);
  GpBanditOptions map_only;
  map_only.hyperparameter_draws = 0;
  GpBanditOptions integrated;
  integrated.integrate_below = 12;
  GpBanditSuggester driver;
  const std::vector<Observation> h = RunStudy(driver, space, Quadratic, 14, 4);
  auto pick = [&](const GpBanditOptions& options, int n) {
    SuggestRequest r;
    r.space = &space;
    r.history.assign(h.begin(), h.begin() + n);
    r.trials_created = n;
    r.seed = 4;
    GpBanditSuggester gp(options);
    return gp.Suggest(r).value().front();
  };
  int differ = 0;
  for (int n = 6; n <= 12; ++n)
    differ += pick(map_only, n) != pick(integrated, n);
  EXPECT_GE(differ, 4);
  EXPECT_EQ(pick(map_only, 13), pick(integrated, 13));
  EXPECT_EQ(pick(map_only, 14), pick(integrated, 14));
}

// With a trial pending the pending points' fantasies already spread the
// picks, and the draws sent them over the cube (options.h,
// hyperparameter_draws): the picks are the MAP model's even with few
// trials.
TEST(GpBanditTest, PicksMadeWithTrialsPendingUseTheMapFitAlone) {
  const SearchSpace space = Box(2, -2, 2);
  GpBanditOptions map_only;
  map_only.hyperparameter_draws = 0;
  GpBanditSuggester driver;
  const std::vector<Observation> h = RunStudy(driver, space, Quadratic, 13, 4);
  for (int n = 6; n <= 12; ++n) {
    SuggestRequest r;
    r.space = &space;
    r.history.assign(h.begin(), h.begin() + n);
    r.history.push_back({h[n].x, Outcome::kPending});
    r.trials_created = n + 1;
    r.seed = 4;
    GpBanditSuggester integrated, map(map_only);
    EXPECT_EQ(integrated.Suggest(r).value(), map.Suggest(r).value())
        << n << " completed";
  }
}

// A pending point is believed at its posterior mean; one predicted to beat
// the best raises the bar the later picks must beat (models.h,
// AddFantasy), one predicted worse leaves it.
TEST(GpBanditModelsTest, APendingPointPredictedToImproveRaisesTheBar) {
  const SearchSpace space = Box(2, -2, 2);
  // Six trials around the optimum (0.3, -0.7), none on it, so that the
  // posterior mean peaks above the best of them.
  std::vector<Observation> six;
  for (const Assignment& a : std::vector<Assignment>{{-1.5, -1.5},
                                                     {1.5, 1.5},
                                                     {-1.5, 1.5},
                                                     {1.5, -1.5},
                                                     {0, 0},
                                                     {1, -1.5}}) {
    six.push_back({a, Outcome::kCompleted, {Quadratic(a)}});
  }
  const SuggestRequest r = NextRequest(space, six, 1);
  const gp_bandit::Coordinates coords(space);
  const gp_bandit::EncodedHistory history = gp_bandit::EncodeHistory(r, coords);
  const std::vector<MetricConfig> metrics = MetricsOf(r);
  const GpBanditOptions options;
  std::vector<gp_bandit::MetricFits> fits;
  fits.emplace_back(options);
  const gp_bandit::ModelInputs inputs{&space,   &coords, &history,
                                      &metrics, r.seed,  {}};
  gp_bandit::Models models =
      gp_bandit::BuildModels(inputs, options, fits).value();
  auto mean_at = [&](const Eigen::VectorXd& x) {
    Eigen::VectorXd mean, var;
    models.objectives[0].gp.Predict(x.transpose(), &mean, &var);
    return mean[0];
  };
  // The posterior mean's best point on a grid of the unit cube, and a
  // corner far from the optimum (0.3, -0.7).
  Eigen::VectorXd promising(2), poor(2), x(2);
  double promising_mean = -1e300;
  for (int i = 0; i <= 100; ++i) {
    for (int j = 0; j <= 100; ++j) {
      x << i / 100.0, j / 100.0;
      const double mean = mean_at(x);
      if (mean > promising_mean) {
        promising_mean = mean;
        promising = x;
      }
    }
  }
  poor << 0, 1;
  const double observed_best = models.best;
  ASSERT_GT(promising_mean, observed_best);
  ASSERT_FALSE(models.draws.empty());  // 6 trials, none pending.
  const double poor_mean = mean_at(poor);
  ASSERT_LT(poor_mean, observed_best);

  models.AddFantasy(poor);
  EXPECT_TRUE(models.draws.empty());
  EXPECT_EQ(models.best, observed_best);
  EXPECT_NEAR(mean_at(poor), poor_mean, 1e-3);
  models.AddFantasy(promising);
  EXPECT_NEAR(models.best, promising_mean, 1e-12);
  EXPECT_NEAR(mean_at(promising), promising_mean, 1e-3);
  EXPECT_EQ(models.incumbent,
            coords.FromAssignment(space, Incumbent(r.history).x));
}

// Jobs handed to a background runner, run only when the test says so.
struct HeldJobs {
  std::vector<BackgroundJob> jobs;
  FitRunner Runner() {
    return [this](BackgroundJob job) { jobs.push_back(std::move(job)); };
  }
};

SuggestRequest RequestAt(const SearchSpace& space,
                         const std::vector<Observation>& history) {
  SuggestRequest r;
  r.space = &space;
  r.history = history;
  r.trials_created = static_cast<int64_t>(history.size());
  r.seed = 3;
  return r;
}

std::vector<Observation> RandomHistory(int n) {
  std::vector<Observation> history;
  for (int i = 0; i < n; ++i) {
    const Assignment x = {std::fmod(0.37 * i + 0.1, 1.0),
                          std::fmod(0.61 * i + 0.3, 1.0),
                          std::fmod(0.83 * i + 0.7, 1.0)};
    history.push_back(
        {x, Outcome::kCompleted, {-std::pow(x[0] - 0.2, 2) - x[1] * x[2]}});
  }
  return history;
}

// Past warm_refit_below, a due fit goes to the runner and the suggestion
// is made with the last one at once; one fit runs at a time; a finished fit
// is taken up by the next suggestion, which then agrees with a suggester
// that fitted on the request path.
TEST(GpBanditTest, LargeFitsRunInTheBackgroundOneAtATime) {
  GpBanditOptions synchronous;
  synchronous.warm_refit_below = 10;
  synchronous.acquisition_optimizer.raw_samples = 128;
  GpBanditOptions background = synchronous;
  HeldJobs held;
  background.background_fits = held.Runner();
  const SearchSpace space = Box(3);
  GpBanditSuggester gp(background);
  std::vector<Observation> history = RandomHistory(12);

  // A fresh instance has fitted nothing: it suggests with the prior's
  // mode and hands checkpoint 12's fit over.
  ASSERT_TRUE(gp.Suggest(RequestAt(space, history)).ok());
  ASSERT_EQ(held.jobs.size(), 1u);
  // Checkpoint 13 is due too, but one fit runs at a time.
  history = RandomHistory(13);
  ASSERT_TRUE(gp.Suggest(RequestAt(space, history)).ok());
  ASSERT_EQ(held.jobs.size(), 1u);

  const std::atomic<bool> go{false};
  held.jobs[0](go);  // Fits checkpoint 12.
  // Taken up; checkpoint 13's fit is handed over in turn.
  ASSERT_TRUE(gp.Suggest(RequestAt(space, history)).ok());
  ASSERT_EQ(held.jobs.size(), 2u);
  held.jobs[1](go);
  const std::vector<Assignment> after =
      gp.Suggest(RequestAt(space, history)).value();
  EXPECT_EQ(held.jobs.size(), 2u) << "checkpoint 13 is fitted now";
  GpBanditSuggester on_request_path(synchronous);
  EXPECT_EQ(on_request_path.Suggest(RequestAt(space, history)).value(), after);
}

TEST(GpBanditTest, AStoppedBackgroundFitIsDroppedAndAskedForAgain) {
  GpBanditOptions options;
  options.warm_refit_below = 10;
  options.acquisition_optimizer.raw_samples = 128;
  HeldJobs held;
  options.background_fits = held.Runner();
  const SearchSpace space = Box(3);
  auto gp = std::make_unique<GpBanditSuggester>(options);
  ASSERT_TRUE(gp->Suggest(RequestAt(space, RandomHistory(13))).ok());
  ASSERT_EQ(held.jobs.size(), 1u);
  const std::atomic<bool> stop{true};
  held.jobs[0](stop);  // Its study was deleted, say: nothing is kept.
  ASSERT_TRUE(gp->Suggest(RequestAt(space, RandomHistory(13))).ok());
  ASSERT_EQ(held.jobs.size(), 2u) << "the dropped fit is asked for again";

  // A job outlives its suggester: it stops at once and touches nothing
  // that went with it.
  gp.reset();
  const std::atomic<bool> go{false};
  held.jobs[1](go);
}

// Maximized: a bumpy function on [-2, 2]^2 with several local optima.
double Bumpy(const Assignment& a) {
  return std::sin(3 * a[0]) * std::cos(2 * a[1]) -
         0.1 * (a[0] * a[0] + a[1] * a[1]);
}

TEST(GpBanditTest, BatchesAndPendingTrialsAreNotNearDuplicates) {
  const SearchSpace space = Box(2, -2, 2);
  auto distance = [](const Assignment& a, const Assignment& b) {
    return std::hypot(a[0] - b[0], a[1] - b[1]) / 4;  // Unit-cube units.
  };
  for (uint64_t seed : {3, 4}) {
    GpBanditSuggester gp;
    const std::vector<Observation> history =
        RunStudy(gp, space, Bumpy, 12, seed);
    SuggestRequest r;
    r.space = &space;
    r.history = history;
    r.trials_created = 12;
    r.count = 4;
    r.seed = seed;
    const std::vector<Assignment> batch = gp.Suggest(r).value();
    ASSERT_EQ(batch.size(), 4u);
    for (size_t i = 0; i < batch.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        EXPECT_GT(distance(batch[i], batch[j]), 0.01)
            << i << " " << j << " seed " << seed << " (" << batch[i][0] << ","
            << batch[i][1] << ") (" << batch[j][0] << "," << batch[j][1] << ")";
      }
    }
    // One at a time with the earlier picks pending: the same behaviour.
    SuggestRequest single = r;
    single.count = 1;
    std::vector<Assignment> picks;
    for (int i = 0; i < 4; ++i) {
      picks.push_back(gp.Suggest(single).value().front());
      for (size_t j = 0; j + 1 < picks.size(); ++j) {
        EXPECT_GT(distance(picks.back(), picks[j]), 0.01) << i << " " << j;
      }
      single.history.push_back({picks.back(), Outcome::kPending});
      ++single.trials_created;
    }
  }
}

// Largest distance, in unit-cube units along one dimension, from `center`
// to a point of `batch` past its first (the space Box(2, -2, 2)).
double FarthestAlongADimension(const std::vector<Assignment>& batch,
                               const Assignment& center) {
  double farthest = 0;
  for (size_t i = 1; i < batch.size(); ++i) {
    const Assignment& a = batch[i];
    for (int j = 0; j < 2; ++j) {
      farthest = std::max(farthest, std::abs(a[j] - center[j]) / 4);
    }
  }
  return farthest;
}

// Past the search, while the sequential run refines around its best, the
// picks made with trials pending stay within a lengthscale of it, at most
// 0.3 (options.h, pending_region_half_width), where without the region the
// liar's fantasies can spread them over the cube.
TEST(GpBanditTest, PicksWithTrialsPendingRefineWhereTheSequentialPickWould) {
  const SearchSpace space = Box(2, -2, 2);
  int kept_local = 0;
  for (uint64_t seed : {0, 1, 2, 3}) {
    GpBanditSuggester sequential;
    const std::vector<Observation> history =
        RunStudy(sequential, space, Bumpy, 40, seed);
    const Assignment& incumbent = Incumbent(history).x;
    const SuggestRequest r = NextRequest(space, history, seed, 4);
    GpBanditOptions off;
    off.pending_region_half_width = 0;
    GpBanditSuggester on_gp, off_gp(off);
    const std::vector<Assignment> on_batch = on_gp.Suggest(r).value();
    const std::vector<Assignment> off_batch = off_gp.Suggest(r).value();
    // The batch's first pick is the sequential one, alike with and without.
    EXPECT_EQ(on_batch.front(), off_batch.front()) << "seed " << seed;
    const double on = FarthestAlongADimension(on_batch, incumbent);
    const double without = FarthestAlongADimension(off_batch, incumbent);
    EXPECT_LE(on, 0.3) << "seed " << seed;
    kept_local += without > 0.3;
  }
  // Seeds 1, 2 and 3 spread to 0.75, 0.37 and 0.40 without the region.
  EXPECT_GE(kept_local, 1);
}

TEST(IncumbentRegionTest, ALengthscaleEachWayCappedAndClippedToTheBox) {
  const SearchSpace space = Box(3);
  const gp_bandit::Coordinates coords(space);
  const gp_bandit::IncumbentRegion region(
      coords, Eigen::Vector3d(0.5, 0.05, 0.9), Eigen::Vector3d(0.1, 0.2, 2),
      Eigen::Vector3d::Zero(), Eigen::Vector3d::Ones(), 0.3);
  EXPECT_NEAR(region.lower[0], 0.4, 1e-12);
  EXPECT_NEAR(region.upper[0], 0.6, 1e-12);
  EXPECT_NEAR(region.lower[1], 0.0, 1e-12);  // clipped
  EXPECT_NEAR(region.upper[1], 0.25, 1e-12);
  EXPECT_NEAR(region.lower[2], 0.6, 1e-12);  // capped at 0.3
  EXPECT_NEAR(region.upper[2], 1.0, 1e-12);
  EXPECT_TRUE(region.Contains(coords, Eigen::Vector3d(0.45, 0.2, 0.7)));
  EXPECT_FALSE(region.Contains(coords, Eigen::Vector3d(0.45, 0.3, 0.7)));
}

// Maximized: depends on x0 only.
double FirstCoordinateOnly(const Assignment& a) {
  return -std::pow(a[0] - 0.3, 2);
}

// Of x1..x7 of the next suggestion, how many lie within 0.1 of the
// incumbent's (the pull leaves a tenth of the distance: pick.h).
int KeptIncumbentValues(const GpBanditOptions& options, uint64_t seed) {
  const SearchSpace space = Box(8);
  GpBanditSuggester gp(options);
  const std::vector<Observation> history =
      RunStudy(gp, space, FirstCoordinateOnly, 16, seed);
  const Assignment& incumbent = Incumbent(history).x;
  const Assignment a =
      gp.Suggest(NextRequest(space, history, seed)).value().front();
  int kept = 0;
  for (int j = 1; j < 8; ++j) kept += std::abs(a[j] - incumbent[j]) < 0.1;
  return kept;
}

TEST(GpBanditTest, KeepsTheIncumbentsValuesAlongIrrelevantDimensions) {
  for (uint64_t seed : {0, 1}) {
    // Under the bounded lengthscales no dimension looks irrelevant to the
    // acquisition; the pull is tested on the fit's own.
    GpBanditOptions on;
    on.max_acquisition_lengthscale = 0;
    GpBanditOptions off = on;
    off.incumbent_pull_tolerance = 0;
    const int kept_off = KeptIncumbentValues(off, seed);
    const int kept_on = KeptIncumbentValues(on, seed);
    // The acquisition is ~flat along x1..x7: often near the incumbent's
    // values there (perturbed incumbents often win without the pull too).
    EXPECT_GE(kept_on, 3) << "seed " << seed;
    EXPECT_GE(kept_on, kept_off) << "seed " << seed;
  }
}

TEST(GpBanditTest, SteersAwayFromInfeasibleRegion) {
  // Maximize x0 + x1 on [0,1]^2, but x0 > 0.7 is infeasible.
  const SearchSpace space = Box(2);
  GpBanditSuggester gp;
  std::vector<Observation> history;
  int infeasible_after_design = 0;
  for (int t = 0; t < 30; ++t) {
    SuggestRequest r;
    r.space = &space;
    r.history = history;
    r.trials_created = t;
    r.seed = 1;
    const Assignment a = gp.Suggest(r).value().front();
    if (a[0] > 0.7) {
      history.push_back({a, Outcome::kInfeasible});
      // The optimum sits on the boundary, so probing just past it is fine;
      // deep inside the infeasible region is not.
      if (t >= 10 && a[0] > 0.8) ++infeasible_after_design;
    } else {
      history.push_back({a, Outcome::kCompleted, {a[0] + a[1]}});
    }
  }
  EXPECT_LE(infeasible_after_design, 3);
  EXPECT_GT(Best(history), 1.6);
}

TEST(GpBanditTest, MixedSpaceFindsTheGoodCategory) {
  ParameterConfig x, n, c;
  x.name = "x";
  n.name = "n";
  n.type = ParameterType::kInteger;
  n.min = 1;
  n.max = 8;
  c.name = "c";
  c.type = ParameterType::kCategorical;
  c.categories = {"a", "b", "c", "d"};
  const SearchSpace space = SearchSpace::Create({x, n, c}).value();
  auto f = [](const Assignment& a) {
    return -std::pow(a[0] - 0.6, 2) - 0.05 * std::abs(a[1] - 3) +
           (a[2] == 2 ? 1.0 : 0.0);
  };
  GpBanditSuggester gp;
  std::vector<Observation> history;
  for (int t = 0; t < 25; ++t) {
    SuggestRequest r;
    r.space = &space;
    r.history = history;
    r.trials_created = t;
    const Assignment a = gp.Suggest(r).value().front();
    ASSERT_TRUE(space.Validate(a).ok());
    history.push_back({a, Outcome::kCompleted, {f(a)}});
  }
  EXPECT_GT(Best(history), 0.95);
}

// k in [1, 25] and p in [1, 4]: a kNN classifier's 100 configurations.
SearchSpace KnnSpace() {
  std::vector<ParameterConfig> p(2);
  p[0].name = "k";
  p[0].type = ParameterType::kInteger;
  p[0].min = 1;
  p[0].max = 25;
  p[1].name = "p";
  p[1].type = ParameterType::kInteger;
  p[1].min = 1;
  p[1].max = 4;
  return SearchSpace::Create(p).value();
}

// A cross-validated accuracy: smooth in k and p, with fold noise.
double KnnAccuracy(const Assignment& a, SplitMix64& noise) {
  return 0.95 - 0.001 * std::pow(a[0] - 9, 2) - 0.01 * std::abs(a[1] - 2) +
         0.01 * noise.NextNormal();
}

// The centre's cell recurs in the Sobol sequence (point 6 decodes to the
// centre's (13, 3) under seed 1): the design skips points already taken.
TEST(GpBanditTest, TheFirstBatchHoldsNoConfigurationTwice) {
  const SearchSpace space = KnnSpace();
  for (uint64_t seed : {1, 2, 3}) {
    GpBanditSuggester gp;
    SuggestRequest r;
    r.space = &space;
    r.count = 8;
    r.seed = seed;
    const std::vector<Assignment> batch = gp.Suggest(r).value();
    ASSERT_EQ(batch.size(), 8u);
    const AssignmentSet distinct(batch.begin(), batch.end());
    EXPECT_EQ(distinct.size(), 8u) << "seed " << seed;
    EXPECT_EQ(batch.front(), (Assignment{13, 3})) << "the centre first";
  }
}

// Batches of 8 for 16 rounds on the 100 configurations: every one is
// tried before any repeats (the acquisition's points are all evaluated ones
// from round 6 on; the best untried one is then picked among the
// enumerated configurations), and only an exhausted space is said to be.
TEST(GpBanditTest, ASmallDiscreteSpaceIsExhaustedBeforeAnyRepeat) {
  const SearchSpace space = KnnSpace();
  GpBanditSuggester gp;
  SplitMix64 noise(100);
  std::vector<Observation> history;
  AssignmentSet tried;
  for (int round = 0; round < 16; ++round) {
    const std::vector<Assignment> batch =
        gp.Suggest(NextRequest(space, history, 0, 8)).value();
    const bool exhausted = tried.size() + batch.size() > 100;
    for (const Assignment& a : batch) {
      if (tried.size() < 100) {
        EXPECT_FALSE(tried.contains(a))
            << "round " << round << ": (" << a[0] << ", " << a[1]
            << ") again with " << tried.size() << " of 100 tried";
      }
      tried.insert(a);
      history.push_back({a, Outcome::kCompleted, {KnnAccuracy(a, noise)}});
    }
    EXPECT_EQ(gp.last_fallback_reason(), exhausted ? "space_exhausted" : "")
        << "round " << round;
  }
  EXPECT_EQ(tried.size(), 100u);
}

TEST(GpBanditPickTest, FiniteSpacesAreEnumeratedInCanonicalForm) {
  EXPECT_EQ(gp_bandit::FiniteSpacePoints(KnnSpace(), 4096)->size(), 100u);
  EXPECT_FALSE(gp_bandit::FiniteSpacePoints(KnnSpace(), 99).has_value());
  EXPECT_FALSE(gp_bandit::FiniteSpacePoints(Box(1), 4096).has_value());
  // A category with an integer child under its first value only: the
  // child's three values there, one point under the second.
  std::vector<ParameterConfig> p(2);
  p[0].name = "kind";
  p[0].type = ParameterType::kCategorical;
  p[0].categories = {"a", "b"};
  p[1].name = "n";
  p[1].type = ParameterType::kInteger;
  p[1].min = 1;
  p[1].max = 3;
  p[1].parent = 0;
  p[1].parent_values = {0};
  const SearchSpace tree = SearchSpace::Create(p).value();
  const std::vector<Assignment> points =
      gp_bandit::FiniteSpacePoints(tree, 4096).value();
  ASSERT_EQ(points.size(), 4u);
  for (const Assignment& a : points) EXPECT_TRUE(tree.Validate(a).ok());
}

TEST(GpBanditPickTest, TheDesignAndTheFallbackSkipTakenPoints) {
  const SearchSpace space = KnnSpace();
  const gp_bandit::Coordinates coords(space);
  AssignmentSet taken = {{13, 3}};
  const Assignment centre =
      gp_bandit::DesignPoint(space, coords, 1, 0, nullptr, {});
  EXPECT_EQ(centre, (Assignment{13, 3}));
  EXPECT_FALSE(taken.contains(
      gp_bandit::DesignPoint(space, coords, 1, 0, nullptr, taken)));
  // All but one configuration taken: the Sobol points miss it, the
  // enumeration finds it.
  taken.clear();
  const std::vector<Assignment> all =
      gp_bandit::FiniteSpacePoints(space, 4096).value();
  for (const Assignment& a : all) {
    if (a != Assignment{7, 4}) taken.insert(a);
  }
  EXPECT_EQ(gp_bandit::UntriedPoint(space, 1, 50, taken), (Assignment{7, 4}));
  taken.insert({7, 4});
  EXPECT_FALSE(gp_bandit::UntriedPoint(space, 1, 50, taken).has_value());
}

// The documented PyTorch example's space.
SearchSpace TorchSpace() {
  std::vector<ParameterConfig> p(5);
  p[0].name = "lr";
  p[0].min = 0.003;
  p[0].max = 0.3;
  p[0].scale = Scale::kLog;
  p[1].name = "momentum";
  p[1].min = 0.5;
  p[1].max = 0.98;
  p[2].name = "weight_decay";
  p[2].min = 1e-6;
  p[2].max = 1e-2;
  p[2].scale = Scale::kLog;
  p[3].name = "batch_size";
  p[3].type = ParameterType::kDiscrete;
  p[3].values = {32, 64, 128, 256};
  p[4].name = "dropout";
  p[4].min = 0;
  p[4].max = 0.5;
  return SearchSpace::Create(p).value();
}

// A validation accuracy over that space, with noise.
double TorchAccuracy(const Assignment& a, SplitMix64& noise) {
  return 0.9 - 0.05 * std::pow(std::log10(a[0]) + 1.3, 2) -
         0.05 * std::pow(a[1] - 0.85, 2) -
         0.002 * std::pow(std::log10(a[2]) + 4, 2) -
         0.01 * std::abs(std::log2(a[3]) - 7) - 0.02 * a[4] +
         0.003 * noise.NextNormal();
}

// The pull toward the incumbent moved a double onto the incumbent's value,
// and the next incumbent passed it on: one learning rate in 7 of 16 trials
// (10 of 16 for seed 0 here), 2-3 copied values a trial. Doubles now stop
// short of the incumbent's value. Bounds may repeat (an optimum on the
// boundary).
TEST(GpBanditTest, DoublesAreNotCopiedFromTrialToTrial) {
  const SearchSpace space = TorchSpace();
  int copies = 0;
  for (uint64_t seed : {0, 1, 2, 3}) {
    GpBanditSuggester gp;
    SplitMix64 noise(seed + 7);
    const std::vector<Observation> history = RunSequentialStudy(
        gp, space, 16, seed, nullptr, [&](const Assignment& a) {
          return Observation{a, Outcome::kCompleted, {TorchAccuracy(a, noise)}};
        });
    for (int j : {0, 1, 2, 4}) {
      const ParameterConfig& p = space.parameters()[j];
      std::map<double, int> uses;
      for (const Observation& o : history) ++uses[o.x[j]];
      for (const auto& [value, n] : uses) {
        if (value == p.min || value == p.max) continue;
        EXPECT_LE(n, 2) << p.name << " = " << value << ", seed " << seed;
        copies += n - 1;
      }
    }
  }
  // About 24 a seed before.
  EXPECT_LE(copies, 4);
}

TEST(GpBanditTest, FallbackLabelsAreStable) {
  EXPECT_EQ(GpBanditFallbackLabel(GpBanditFallback::kNone), "");
  EXPECT_EQ(GpBanditFallbackLabel(GpBanditFallback::kModelFailed),
            "model_failed");
  EXPECT_EQ(GpBanditFallbackLabel(GpBanditFallback::kNoNewPoint),
            "no_new_point");
  EXPECT_EQ(GpBanditFallbackLabel(GpBanditFallback::kSpaceExhausted),
            "space_exhausted");
  // Through the interface the service holds.
  const std::unique_ptr<Suggester> gp = MakeSuggester(Algorithm::kGpBandit);
  EXPECT_EQ(gp->last_fallback_reason(), "");
}

TEST(InitialDesignTest, CentreThenSobol) {
  EXPECT_EQ(InitialDesignSize(1, 1), 3);
  EXPECT_EQ(InitialDesignSize(4, 1), 5);
  EXPECT_EQ(InitialDesignSize(30, 1), 10);
  EXPECT_EQ(InitialDesignSize(1, 2), 5);
  EXPECT_EQ(InitialDesignSize(4, 3), 8);
  EXPECT_EQ(InitialDesignSize(30, 2), 10);
  EXPECT_EQ(InitialDesignPoint(3, 7, 0), Eigen::VectorXd::Constant(3, 0.5));
  EXPECT_NE(InitialDesignPoint(3, 7, 1), InitialDesignPoint(3, 8, 1));
}

}  // namespace
}  // namespace hypertune::optimizer
