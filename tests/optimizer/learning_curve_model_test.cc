#include "optimizer/learning_curve_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "optimizer/early_stopping.h"
#include "optimizer/suggester.h"
#include "testing/curve_table.h"
#include "tests/optimizer/spaces.h"

namespace hypertune::optimizer {
namespace {

using ::testing::HasSubstr;
using Rule = EarlyStoppingConfig::Rule;
using Status = TrialCurve::Status;

// ASHA in pause mode over 27 epochs, rungs 1, 3, 9, decided by the model.
EarlyStoppingConfig ModelAsha() {
  EarlyStoppingConfig config;
  config.rule = Rule::kAsha;
  config.min_resource = 1;
  config.max_resource = 27;
  config.reduction_factor = 3;
  config.pause_at_rungs = true;
  config.promote_by_model = true;
  return config;
}

// A learning curve whose end depends on x: it rises towards 1 - (x - 0.7)^2.
double Value(double x, int64_t epoch) {
  return 1.0 - (x - 0.7) * (x - 0.7) -
         0.3 * std::pow(static_cast<double>(epoch), -0.5);
}

// A trial of configuration x that reported epochs 1 .. last.
TrialCurve Trial(int64_t id, double x, int64_t last, Status status) {
  TrialCurve curve;
  curve.id = id;
  curve.status = status;
  for (int64_t t = 1; t <= last; ++t) curve.points.emplace_back(t, Value(x, t));
  return curve;
}

struct Study {
  std::vector<TrialCurve> curves;
  std::vector<Assignment> parameters;
  void Add(double x, int64_t last, Status status) {
    curves.push_back(
        Trial(static_cast<int64_t>(curves.size()) + 1, x, last, status));
    parameters.push_back({x});
  }
};

// Twelve configurations paused at the first rung, evenly over [0, 1].
Study FirstRung() {
  Study study;
  for (int i = 0; i < 12; ++i) study.Add((i + 0.5) / 12, 1, Status::kPaused);
  return study;
}

TEST(LearningCurveModelTest, NoModelUntilEnoughTrialsReachTheFirstRung) {
  const SearchSpace space = Box(1);
  Study study;
  for (int i = 0; i < 3; ++i) study.Add(0.1 + 0.3 * i, 1, Status::kPaused);
  // max(4, dim + 2) trials are needed: 3 are too few, and promotions are
  // then ASHA's own (none: floor(3 / 3) = 1 goes on, the best).
  EXPECT_FALSE(LearningCurveModel::Fit(ModelAsha(), space, study.curves,
                                       study.parameters)
                   .has_value());
  const std::vector<Promotion> asha =
      Promotions(ModelAsha(), study.curves, false);
  const std::vector<Promotion> model = ModelPromotions(
      ModelAsha(), space, study.curves, study.parameters, false);
  ASSERT_EQ(model.size(), asha.size());
  for (size_t i = 0; i < model.size(); ++i) {
    EXPECT_EQ(model[i].trial_id, asha[i].trial_id);
  }
}

TEST(LearningCurveModelTest, ExpectsMoreOfConfigurationsWhoseCurvesEndHigher) {
  const SearchSpace space = Box(1);
  Study study = FirstRung();
  // Two of them went on to the end: the model learns how curves rise.
  study.curves[3] = Trial(4, study.parameters[3][0], 27, Status::kFinished);
  study.curves[10] = Trial(11, study.parameters[10][0], 27, Status::kFinished);
  const std::optional<LearningCurveModel> model = LearningCurveModel::Fit(
      ModelAsha(), space, study.curves, study.parameters);
  ASSERT_TRUE(model.has_value());
  EXPECT_TRUE(model->finished());
  const double near_best = model->Final(space.Encode({0.7})).mean;
  const double far = model->Final(space.Encode({0.05})).mean;
  EXPECT_GT(near_best, far + 0.5);  // standardized units
  EXPECT_GT(model->ChanceToBeatBar(space.Encode({0.7})),
            model->ChanceToBeatBar(space.Encode({0.05})));
}

// The trials that `promotions` resume.
std::set<int64_t> TrialIds(const std::vector<Promotion>& promotions) {
  std::set<int64_t> ids;
  for (const Promotion& p : promotions) ids.insert(p.trial_id);
  return ids;
}

// FirstRung, where a configuration short of the optimum (x = 0.54) finished,
// and two at the low end, which ended far below it. Three more at the low
// end reached rung 3: ASHA promotes the best of them (trial 3, x = 0.21),
// second of the six there; and trials 8, 9, 10 (x = 0.62, 0.71, 0.79) from
// rung 1.
Study OneFinishedNearTheOptimum() {
  Study study = FirstRung();
  study.curves[6] = Trial(7, study.parameters[6][0], 27, Status::kFinished);
  study.Add(0.0, 27, Status::kFinished);
  study.Add(0.08, 27, Status::kFinished);
  for (int i : {0, 1, 2}) {
    study.curves[i] = Trial(i + 1, study.parameters[i][0], 3, Status::kPaused);
  }
  return study;
}

TEST(LearningCurveModelTest, LeavesHopelessPromotionsPausedAndOrdersByChance) {
  const SearchSpace space = Box(1);
  const Study study = OneFinishedNearTheOptimum();
  const std::set<int64_t> asha_ids =
      TrialIds(Promotions(ModelAsha(), study.curves, false));
  for (int64_t id : {3, 8, 9, 10}) ASSERT_TRUE(asha_ids.contains(id)) << id;

  const std::vector<Promotion> model = ModelPromotions(
      ModelAsha(), space, study.curves, study.parameters, false);
  const std::optional<LearningCurveModel> fit = LearningCurveModel::Fit(
      ModelAsha(), space, study.curves, study.parameters);
  ASSERT_TRUE(fit.has_value());
  std::set<int64_t> model_ids;
  double previous = 1.0;
  for (const Promotion& p : model) {
    model_ids.insert(p.trial_id);
    EXPECT_TRUE(asha_ids.contains(p.trial_id)) << p.trial_id;
    // The most promising first.
    const double chance =
        fit->ChanceToBeatBar(space.Encode(study.parameters[p.trial_id - 1]));
    EXPECT_LE(chance, previous);
    previous = chance;
  }
  // Its region ends low: the model leaves it paused; those that end above
  // the finished one go on (in order of their chance, checked above).
  EXPECT_FALSE(model_ids.contains(3));
  EXPECT_EQ(model_ids, (std::set<int64_t>{8, 9, 10}));
  // Draining: ASHA's promotions as they are, so the study still ends.
  const std::vector<Promotion> draining =
      ModelPromotions(ModelAsha(), space, study.curves, study.parameters, true);
  EXPECT_EQ(draining.size(),
            Promotions(ModelAsha(), study.curves, true).size());
}

// Slow starters: a paused trial that ASHA passes over goes on when the
// model gives it at least a 25% chance to beat the best finished trial, so
// that a configuration which ranks low at every rung is not left paused
// until the study drains.
TEST(LearningCurveModelTest, ResumesASlowStarterWithAQuarterChance) {
  const SearchSpace space = Box(1);
  // Near the optimum, but 0.16 below its curve at the first rung: ASHA
  // passes it over, and the model gives it a chance between 25% and 50%
  // (about 36%).
  Study study = OneFinishedNearTheOptimum();
  study.Add(0.66, 1, Status::kPaused);
  study.curves.back().points[0].second -= 0.16;
  const std::set<int64_t> asha_ids =
      TrialIds(Promotions(ModelAsha(), study.curves, false));
  const std::optional<LearningCurveModel> fit = LearningCurveModel::Fit(
      ModelAsha(), space, study.curves, study.parameters);
  ASSERT_TRUE(fit.has_value());
  const std::set<int64_t> model_ids = TrialIds(ModelPromotions(
      ModelAsha(), space, study.curves, study.parameters, false));
  int slow_starters = 0;
  for (size_t i = 0; i < study.curves.size(); ++i) {
    const int64_t id = study.curves[i].id;
    if (study.curves[i].status != Status::kPaused || asha_ids.contains(id)) {
      continue;
    }
    const double chance =
        fit->ChanceToBeatBar(space.Encode(study.parameters[i]));
    EXPECT_EQ(model_ids.contains(id), chance >= 0.25) << id << " " << chance;
    slow_starters += model_ids.contains(id);
  }
  const double slow =
      fit->ChanceToBeatBar(space.Encode(study.parameters.back()));
  EXPECT_GE(slow, 0.25);
  EXPECT_LT(slow, 0.5);
  EXPECT_FALSE(asha_ids.contains(study.curves.back().id));
  EXPECT_TRUE(model_ids.contains(study.curves.back().id));
  EXPECT_GE(slow_starters, 1);
}

TEST(LearningCurveModelTest, OnlyTheTrialResumedFirstGoesOnAtOnce) {
  const SearchSpace space = Box(1);
  const Study study = OneFinishedNearTheOptimum();
  const std::vector<Promotion> order = ModelPromotions(
      ModelAsha(), space, study.curves, study.parameters, false);
  ASSERT_GE(order.size(), 2u);
  // Each in turn has just reached its rung (running): it goes on at once
  // only if the model would resume it before every paused trial.
  auto reaches_rung = [&](int64_t id) {
    std::vector<TrialCurve> curves = study.curves;
    curves[id - 1].status = Status::kRunning;
    return ResumesAtOnce(ModelAsha(), space, curves, study.parameters, id);
  };
  EXPECT_TRUE(reaches_rung(order[0].trial_id));
  EXPECT_FALSE(reaches_rung(order[1].trial_id));
  EXPECT_FALSE(reaches_rung(3));  // hopeless: stays paused
}

// A request for `count` proposals from the curves of `study`, every trial
// running (pending), through `fidelity`.
SuggestRequest ProposalRequest(const SearchSpace& space, const Study& study,
                               const FidelityHistory& fidelity, int count) {
  SuggestRequest request;
  request.space = &space;
  request.fidelity = &fidelity;
  for (size_t i = 0; i < study.curves.size(); ++i) {
    request.history.push_back({.x = study.parameters[i],
                               .outcome = Outcome::kPending,
                               .trial_id = study.curves[i].id});
  }
  request.trials_created = static_cast<int64_t>(study.curves.size());
  request.count = count;
  return request;
}

TEST(LearningCurveModelTest,
     GpBanditProposesWhereCurvesEndBestAndSpreadsABatch) {
  const SearchSpace space = Box(1);
  const Study study = FirstRung();
  FidelityHistory fidelity{ModelAsha(), study.curves};
  SuggestRequest request = ProposalRequest(space, study, fidelity, 3);
  const std::optional<std::vector<Assignment>> proposals =
      ProposeFromCurves(request);
  ASSERT_TRUE(proposals.has_value());
  ASSERT_EQ(proposals->size(), 3u);
  EXPECT_NEAR((*proposals)[0][0], 0.7, 0.15);
  // Each proposal counts as running for the next: no two alike.
  const std::set<double> distinct = {(*proposals)[0][0], (*proposals)[1][0],
                                     (*proposals)[2][0]};
  EXPECT_EQ(distinct.size(), 3u);
  // GP_BANDIT proposes the same when the study promotes by model.
  request.count = 1;
  const std::vector<Assignment> suggested =
      MakeSuggester(Algorithm::kGpBandit)->Suggest(request).value();
  EXPECT_EQ(suggested.front(), ProposeFromCurves(request)->front());
}

TEST(LearningCurveModelTest, TheProposalStartsFromThePromotionsModel) {
  const SearchSpace space = Box(1);
  const Study study = FirstRung();
  std::optional<LearningCurveModel> fitted;
  ModelPromotions(ModelAsha(), space, study.curves, study.parameters, false,
                  &fitted);
  ASSERT_TRUE(fitted.has_value());
  FidelityHistory fidelity{ModelAsha(), study.curves};
  SuggestRequest request = ProposalRequest(space, study, fidelity, 3);
  const std::optional<std::vector<Assignment>> own = ProposeFromCurves(request);
  ASSERT_TRUE(own.has_value());
  // Fitted on the same curves: the same proposals, without a second fit.
  fidelity.model = &*fitted;
  EXPECT_EQ(ProposeFromCurves(request), own);
  // The model given is the one used: one of other curves proposes
  // otherwise.
  const Study other = OneFinishedNearTheOptimum();
  const std::optional<LearningCurveModel> elsewhere = LearningCurveModel::Fit(
      ModelAsha(), space, other.curves, other.parameters);
  ASSERT_TRUE(elsewhere.has_value());
  fidelity.model = &*elsewhere;
  EXPECT_NE(ProposeFromCurves(request), own);
  // Draining fits nothing, and leaves no model behind.
  ModelPromotions(ModelAsha(), space, study.curves, study.parameters, true,
                  &fitted);
  EXPECT_FALSE(fitted.has_value());
}

// x in [0, 1] and an optimizer whose categories are listed in `order`.
SearchSpace WithOptimizer(const std::vector<std::string>& order) {
  ParameterConfig x;
  x.name = "x";
  ParameterConfig optimizer;
  optimizer.name = "optimizer";
  optimizer.type = ParameterType::kCategorical;
  optimizer.categories = order;
  return SearchSpace::Create({x, optimizer}).value();
}

TEST(LearningCurveModelTest, CategoriesAreUnordered) {
  // adam and sgd end 0.5 higher than rmsprop and adagrad. Listed so that
  // the good two are neighbours in one space and ends in the other, the
  // model must predict the same: categories are compared for equality only,
  // never placed on a line.
  const std::vector<std::string> names = {"sgd", "adam", "rmsprop", "adagrad"};
  const std::vector<std::string> reordered = {"adam", "rmsprop", "adagrad",
                                              "sgd"};
  auto index_in = [](const std::vector<std::string>& order,
                     const std::string& name) {
    return static_cast<double>(std::find(order.begin(), order.end(), name) -
                               order.begin());
  };
  Study in_names, in_reordered;
  for (int i = 0; i < 16; ++i) {
    const double x = (i + 0.5) / 16;
    const std::string& optimizer = names[i % 4];
    const bool good = optimizer == "adam" || optimizer == "sgd";
    const int64_t last = i == 5 || i == 10 ? 27 : 1;
    const Status status = last == 27 ? Status::kFinished : Status::kPaused;
    TrialCurve curve = Trial(i + 1, x, last, status);
    for (auto& point : curve.points) point.second -= good ? 0.0 : 0.5;
    in_names.curves.push_back(curve);
    in_names.parameters.push_back({x, index_in(names, optimizer)});
    in_reordered.curves.push_back(curve);
    in_reordered.parameters.push_back({x, index_in(reordered, optimizer)});
  }
  const SearchSpace names_space = WithOptimizer(names);
  const SearchSpace reordered_space = WithOptimizer(reordered);
  const std::optional<LearningCurveModel> a = LearningCurveModel::Fit(
      ModelAsha(), names_space, in_names.curves, in_names.parameters);
  const std::optional<LearningCurveModel> b =
      LearningCurveModel::Fit(ModelAsha(), reordered_space, in_reordered.curves,
                              in_reordered.parameters);
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(b.has_value());
  for (const std::string& optimizer : names) {
    for (const double x : {0.1, 0.5, 0.7}) {
      const LearningCurveModel::Posterior pa =
          a->Final(names_space.Encode({x, index_in(names, optimizer)}));
      const LearningCurveModel::Posterior pb =
          b->Final(reordered_space.Encode({x, index_in(reordered, optimizer)}));
      EXPECT_NEAR(pa.mean, pb.mean, 1e-6) << optimizer << " at x = " << x;
      EXPECT_NEAR(pa.sd, pb.sd, 1e-6) << optimizer << " at x = " << x;
    }
  }
  // And it learned the categories' effect.
  EXPECT_GT(a->Final(names_space.Encode({0.7, 1.0})).mean,
            a->Final(names_space.Encode({0.7, 2.0})).mean + 0.5);
}

TEST(LearningCurveModelTest, ProposesNothingTheStudyAlreadyHas) {
  ParameterConfig n;
  n.name = "n";
  n.type = ParameterType::kInteger;
  n.min = 1;
  n.max = 8;
  const SearchSpace space = SearchSpace::Create({n}).value();
  // Seven of the eight values ran to the first rung, the best near n = 6.
  std::vector<TrialCurve> curves;
  SuggestRequest request;
  request.space = &space;
  for (int v = 1; v <= 7; ++v) {
    curves.push_back(Trial(v, (v - 0.5) / 8.0, 1, Status::kPaused));
    request.history.push_back({.x = {static_cast<double>(v)},
                               .outcome = Outcome::kPending,
                               .trial_id = v});
  }
  FidelityHistory fidelity{ModelAsha(), curves};
  request.fidelity = &fidelity;
  request.trials_created = 7;
  const std::optional<std::vector<Assignment>> last =
      ProposeFromCurves(request);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->front(), Assignment{8});
  // All eight taken: no proposal, and GP_BANDIT proposes as without it.
  curves.push_back(Trial(8, 7.5 / 8.0, 1, Status::kPaused));
  request.history.push_back(
      {.x = {8.0}, .outcome = Outcome::kPending, .trial_id = 8});
  fidelity.curves = curves;
  request.trials_created = 8;
  EXPECT_FALSE(ProposeFromCurves(request).has_value());
  EXPECT_TRUE(MakeSuggester(Algorithm::kGpBandit)->Suggest(request).ok());
}

TEST(LearningCurveModelTest, EveryRungPausesAndTheConfigIsValidated) {
  Study study = FirstRung();
  // Even the best trial at a rung pauses: the model decides. (Plain ASHA
  // lets the best of three at rung 3 go on at once.)
  study.curves[7] = Trial(8, study.parameters[7][0], 3, Status::kPaused);
  study.curves[9] = Trial(10, study.parameters[9][0], 3, Status::kPaused);
  study.curves[8] = Trial(9, study.parameters[8][0], 3, Status::kRunning);
  EXPECT_EQ(DecideTrial(ModelAsha(), study.curves, 9).action, Action::kPause);
  EarlyStoppingConfig plain = ModelAsha();
  plain.promote_by_model = false;
  EXPECT_EQ(DecideTrial(plain, study.curves, 9).action, Action::kContinue);

  EarlyStoppingConfig c = ModelAsha();
  c.pause_at_rungs = false;
  EXPECT_THAT(ValidateEarlyStoppingConfig(c).message(),
              HasSubstr("early_stopping.promote_by_model: needs "
                        "pause_at_rungs"));
  c = ModelAsha();
  c.rule = Rule::kHyperband;
  EXPECT_TRUE(ValidateEarlyStoppingConfig(c).ok());
  c.rule = Rule::kMedian;
  c.pause_at_rungs = false;
  EXPECT_THAT(ValidateEarlyStoppingConfig(c).message(),
              HasSubstr("early_stopping.promote_by_model: only for the ASHA "
                        "and HYPERBAND rules"));
}

TEST(LearningCurveModelTest, HyperbandBracketsShareOneModel) {
  // Brackets 0..3 over 27 epochs: rungs {1, 3, 9}, {3, 9}, {9}, none.
  EarlyStoppingConfig config = ModelAsha();
  config.rule = Rule::kHyperband;
  ASSERT_EQ(NumBrackets(config), 4);
  const SearchSpace space = Box(1);
  Study study;
  for (int i = 0; i < 24; ++i) {
    const int64_t id = i + 1;
    const std::vector<int64_t> rungs =
        RungResources(config, BracketOf(config, id));
    // Each trial paused at its bracket's first rung; without rungs, done.
    const int64_t last = rungs.empty() ? 27 : rungs.front();
    study.Add((i + 0.5) / 24, last,
              rungs.empty() ? Status::kFinished : Status::kPaused);
  }
  std::set<int> brackets;
  for (const TrialCurve& curve : study.curves) {
    brackets.insert(BracketOf(config, curve.id));
  }
  ASSERT_EQ(brackets.size(), 4u);

  const std::optional<LearningCurveModel> model =
      LearningCurveModel::Fit(config, space, study.curves, study.parameters);
  ASSERT_TRUE(model.has_value());
  EXPECT_TRUE(model->finished());
  EXPECT_GT(model->Final(space.Encode({0.7})).mean,
            model->Final(space.Encode({0.05})).mean + 0.5);
  // Every promotion takes a trial from the rung of its own bracket it
  // paused at to that bracket's next rung.
  const std::vector<Promotion> promotions = ModelPromotions(
      config, space, study.curves, study.parameters, /*draining=*/false);
  ASSERT_FALSE(promotions.empty());
  for (const Promotion& p : promotions) {
    const std::optional<Promotion> own =
        PromotionOf(config, study.curves[p.trial_id - 1]);
    ASSERT_TRUE(own.has_value()) << p.trial_id;
    EXPECT_EQ(p.rung, own->rung) << p.trial_id;
    EXPECT_EQ(p.next_budget, own->next_budget) << p.trial_id;
  }
  // The first resumed is near the optimum.
  EXPECT_NEAR(study.parameters[promotions.front().trial_id - 1][0], 0.7, 0.15);
}

// --- The benchmark's tables (testing/curve_table.h) ------------------------

TEST(CurveTableTest, TheShippedFashionMnistTableLoads) {
  const absl::StatusOr<bench::CurveTable> table =
      bench::LoadCurveTable(std::string(HYPERTUNE_SOURCE_DIR) +
                            "/benchmarks/learning_curves/fashion_mnist.jsonl");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_GE(table->configs.size(), 200u);
  EXPECT_EQ(table->max_resource, 16);
  EXPECT_EQ(table->parameters.size(), 6u);
  for (size_t i = 0; i < table->configs.size(); ++i) {
    ASSERT_EQ(table->curves[i].size(), 16u);
    for (double v : table->curves[i]) {
      EXPECT_TRUE(v >= 0 && v <= 1) << "configuration " << i;
    }
  }
  EXPECT_GT(table->optimum, 0.5);
}

TEST(CurveTableTest, AMalformedTableIsRefusedNamingTheLine) {
  const std::string path = ::testing::TempDir() + "/bad_table.jsonl";
  std::ofstream(path)
      << R"({"table": "t", "max_resource": 2, "goal": "maximize", "space": )"
      << R"([{"name": "lr", "type": "double", "min": 0.1, "max": 1, )"
      << R"("scale": "log"}]})"
      << "\n"
      << R"({"params": {"lr": 0.5}, "val_accuracy": [0.1], )"
      << R"("epoch_seconds": [1]})"
      << "\n";
  const absl::Status status = bench::LoadCurveTable(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("line 2: expected 2 epochs"));
}

TEST(CurveTableTest, TheModelsStudyReachesTheTargetOnASyntheticTable) {
  const bench::CurveTable table =
      bench::MakeSyntheticCurveTable(60, 27, /*seed=*/1);
  for (int workers : {1, 3}) {
    bench::TableSimOptions options;
    options.workers = workers;
    options.config = ModelAsha();
    const bench::TableSimResult r =
        bench::SimulateTableStudy(table, options).value();
    EXPECT_TRUE(r.reached) << workers;
    EXPECT_GE(r.final_value, table.optimum - 0.01 * std::abs(table.optimum));
    // The model moved trials past rungs: resumed, or on at once.
    EXPECT_GT(r.resumes + r.continued_at_rungs, 0);
    // Fewer epochs than training every configuration to the end.
    EXPECT_LT(r.epochs, 60 * 27);
    EXPECT_GT(r.seconds, 0);
  }
}

}  // namespace
}  // namespace hypertune::optimizer
