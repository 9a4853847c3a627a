#include "testing/conditional_problems.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hypertune::bench {
namespace {

namespace opt = ::hypertune::optimizer;
using opt::Assignment;
using opt::kNoParent;
using opt::ParameterConfig;
using opt::ParameterType;
using opt::Scale;
using Clock = std::chrono::steady_clock;

}  // namespace

ParameterConfig CategoricalParameter(std::string name,
                                     std::vector<std::string> categories,
                                     int parent, std::vector<double> values) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = ParameterType::kCategorical;
  p.categories = std::move(categories);
  p.parent = parent;
  p.parent_values = std::move(values);
  return p;
}

ParameterConfig NumericParameter(std::string name, double min, double max,
                                 int parent, std::vector<double> values,
                                 Scale scale, ParameterType type) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = type;
  p.min = min;
  p.max = max;
  p.scale = scale;
  p.parent = parent;
  p.parent_values = std::move(values);
  return p;
}

ParameterConfig DiscreteParameter(std::string name, std::vector<double> values,
                                  int parent,
                                  std::vector<double> parent_values) {
  ParameterConfig p;
  p.name = std::move(name);
  p.type = ParameterType::kDiscrete;
  p.values = std::move(values);
  p.parent = parent;
  p.parent_values = std::move(parent_values);
  return p;
}

namespace {

TreeProblem Jenatton() {
  // 0 x1, 1 x2, 2 x3, 3 x4, 4 x5, 5 x6, 6 x7, 7 r8, 8 r9.
  std::vector<ParameterConfig> p = {
      CategoricalParameter("x1", {"0", "1"}),
      CategoricalParameter("x2", {"0", "1"}, 0, {0}),
      CategoricalParameter("x3", {"0", "1"}, 0, {1}),
      NumericParameter("x4", -1, 1, 1, {0}),
      NumericParameter("x5", -1, 1, 1, {1}),
      NumericParameter("x6", -1, 1, 2, {0}),
      NumericParameter("x7", -1, 1, 2, {1}),
      NumericParameter("r8", 0, 1, 0, {0}),
      NumericParameter("r9", 0, 1, 0, {1})};
  auto f = [](const Assignment& x) {
    if (x[0] == 0) {
      return x[1] == 0 ? x[3] * x[3] + 0.1 + x[7] : x[4] * x[4] + 0.2 + x[7];
    }
    return x[2] == 0 ? x[5] * x[5] + 0.3 + x[8] : x[6] * x[6] + 0.4 + x[8];
  };
  return {"jenatton", std::move(p), f, 0.1};
}

double Sq(double v) { return v * v; }

TreeProblem Training() {
  // 0 optimizer, 1 sgd_lr, 2 momentum, 3 adam_lr, 4 beta1, 5 beta2,
  // 6 rms_lr, 7 rho, 8 model, 9 layers, 10 width, 11 depth, 12 width_mult,
  // 13 weight_decay, 14 batch_size.
  std::vector<ParameterConfig> p = {
      CategoricalParameter("optimizer", {"sgd", "adam", "rmsprop"}),
      NumericParameter("sgd_lr", 1e-4, 1, 0, {0}, Scale::kLog),
      NumericParameter("momentum", 0, 0.99, 0, {0}),
      NumericParameter("adam_lr", 1e-5, 1e-1, 0, {1}, Scale::kLog),
      NumericParameter("beta1", 0.8, 0.999, 0, {1}),
      NumericParameter("beta2", 0.9, 0.9999, 0, {1}),
      NumericParameter("rms_lr", 1e-5, 1e-1, 0, {2}, Scale::kLog),
      NumericParameter("rho", 0.8, 0.99, 0, {2}),
      CategoricalParameter("model", {"mlp", "resnet"}),
      NumericParameter("layers", 1, 8, 8, {0}, Scale::kLinear,
                       ParameterType::kInteger),
      NumericParameter("width", 16, 1024, 8, {0}, Scale::kLog,
                       ParameterType::kInteger),
      DiscreteParameter("depth", {18, 34, 50, 101}, 8, {1}),
      NumericParameter("width_mult", 0.5, 2, 8, {1}),
      NumericParameter("weight_decay", 1e-6, 1e-2, kNoParent, {}, Scale::kLog),
      DiscreteParameter("batch_size", {32, 64, 128, 256})};
  auto f = [](const Assignment& x) {
    double v = 0;
    switch (static_cast<int>(x[0])) {
      case 0:  // sgd: best 0.10 at lr 0.1, momentum 0.9.
        v += 0.10 + Sq((std::log10(x[1]) + 1) / 1.5) + Sq(x[2] - 0.9);
        break;
      case 1:  // adam: best 0.05 at lr 1e-3, beta1 0.9, beta2 0.999.
        v += 0.05 + Sq((std::log10(x[3]) + 3) / 1.5) + 2 * Sq(x[4] - 0.9) +
             Sq((std::log10(1 - x[5]) + 3) / 2);
        break;
      default:  // rmsprop: best 0.15 at lr 3e-4, rho 0.9.
        v += 0.15 + Sq((std::log10(x[6]) + 3.5) / 1.5) + Sq(x[7] - 0.9);
        break;
    }
    if (x[8] == 0) {  // mlp: best 0.3 at 3 layers of 256.
      v += 0.3 + 0.02 * Sq(x[9] - 3) + Sq((std::log2(x[10]) - 8) / 3);
    } else {  // resnet: best 0 at depth 34, multiplier 1.25.
      const double depth = x[11] == 18   ? 0.08
                           : x[11] == 34 ? 0.0
                           : x[11] == 50 ? 0.02
                                         : 0.06;
      v += depth + 0.3 * Sq(x[12] - 1.25);
    }
    v += 0.1 * Sq((std::log10(x[13]) + 4) / 2);
    v += x[14] == 32 ? 0.03 : x[14] == 64 ? 0.01 : x[14] == 128 ? 0.0 : 0.02;
    return v;
  };
  return {"training", std::move(p), f, 0.05};
}

}  // namespace

std::vector<TreeProblem> TreeProblems() { return {Jenatton(), Training()}; }

absl::StatusOr<TreeProblem> FindTreeProblem(const std::string& name) {
  for (TreeProblem& p : TreeProblems()) {
    if (p.name == name) return std::move(p);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown tree problem \"", name, "\" (known: jenatton, training)"));
}

std::vector<ParameterConfig> Flattened(
    std::vector<ParameterConfig> parameters) {
  for (ParameterConfig& p : parameters) {
    p.parent = kNoParent;
    p.parent_values.clear();
  }
  return parameters;
}

absl::StatusOr<RegretRun> RunTreeRegret(const TreeProblem& problem,
                                        bool flatten,
                                        const RegretOptions& options) {
  if (options.parallel != 1) {
    return absl::InvalidArgumentError("tree problems run sequentially");
  }
  absl::StatusOr<opt::SearchSpace> space = opt::SearchSpace::Create(
      flatten ? Flattened(problem.parameters) : problem.parameters);
  if (!space.ok()) return space.status();
  const auto suggester = opt::MakeSuggester(options.algorithm);
  const Clock::time_point start = Clock::now();
  opt::SuggestRequest request;
  request.space = &*space;
  request.seed = options.seed;
  RegretRun run;
  double best = INFINITY;
  for (int t = 0; t < options.trials; ++t) {
    request.trials_created = t;
    absl::StatusOr<std::vector<Assignment>> x = suggester->Suggest(request);
    if (!x.ok()) return x.status();
    const double y = problem.f(x->front());
    best = std::min(best, y);
    run.best_regret.push_back(best - problem.minimum);
    request.history.push_back(
        {std::move(x->front()), opt::Outcome::kCompleted, {-y}});
  }
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return run;
}

absl::StatusOr<LatencyResult> MeasureTreeLatency(opt::Algorithm algorithm,
                                                 bool flatten, int history,
                                                 int rounds) {
  // 0 branch; 1..3 always; 4 + 4 b + k: child k of branch b.
  std::vector<ParameterConfig> params = {
      CategoricalParameter("branch", {"a", "b", "c", "d"})};
  for (int k = 0; k < 3; ++k)
    params.push_back(NumericParameter(absl::StrCat("x", k), 0, 1));
  for (int b = 0; b < 4; ++b) {
    for (int k = 0; k < 4; ++k) {
      params.push_back(NumericParameter(absl::StrCat("b", b, "_", k), 0, 1, 0,
                                        {static_cast<double>(b)}));
    }
  }
  absl::StatusOr<opt::SearchSpace> space =
      opt::SearchSpace::Create(flatten ? Flattened(params) : params);
  if (!space.ok()) return space.status();
  auto f = [](const Assignment& x) {
    const int b = static_cast<int>(x[0]);
    double v = 0.1 * b;
    for (int k = 1; k < 4; ++k) v += Sq(x[k] - 0.3);
    for (int k = 0; k < 4; ++k) v += Sq(x[4 + 4 * b + k] - 0.3);
    return v;
  };
  const auto suggester = opt::MakeSuggester(algorithm);
  std::mt19937_64 rng(0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<opt::Observation> trials;
  for (int i = 0; i < history; ++i) {
    Eigen::VectorXd u(space->dim());
    for (int j = 0; j < space->dim(); ++j) u[j] = unit(rng);
    Assignment x = space->Decode(u);
    const double y = f(x);
    trials.push_back({std::move(x), opt::Outcome::kCompleted, {-y}});
  }
  std::vector<double> ms;
  for (int r = 0; r < rounds; ++r) {
    opt::SuggestRequest request;
    request.space = &*space;
    request.history = trials;
    request.trials_created = static_cast<int64_t>(trials.size());
    const Clock::time_point start = Clock::now();
    absl::StatusOr<std::vector<Assignment>> x = suggester->Suggest(request);
    ms.push_back(1000 *
                 std::chrono::duration<double>(Clock::now() - start).count());
    if (!x.ok()) return x.status();
    const double y = f(x->front());
    trials.push_back({std::move(x->front()), opt::Outcome::kCompleted, {-y}});
  }
  return LatencyResult{Percentile(ms, 50), Percentile(ms, 95),
                       *std::max_element(ms.begin(), ms.end())};
}

}  // namespace hypertune::bench
