#include "testing/regret.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace hypertune::bench {
namespace {

using optimizer::Assignment;
using optimizer::Observation;
using optimizer::Outcome;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Eigen::VectorXd ToVector(const Assignment& a) {
  return Eigen::Map<const Eigen::VectorXd>(a.data(),
                                           static_cast<Eigen::Index>(a.size()));
}

double Bowl(const Eigen::VectorXd& x) {
  return (x.array() - 0.3).square().sum();
}

}  // namespace

absl::StatusOr<optimizer::SearchSpace> SpaceFor(const BenchmarkFunction& f) {
  std::vector<optimizer::ParameterConfig> params(f.bounds.size());
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].name = absl::StrCat("x", i);
    params[i].type = optimizer::ParameterType::kDouble;
    params[i].min = f.bounds[i].first;
    params[i].max = f.bounds[i].second;
  }
  return optimizer::SearchSpace::Create(std::move(params));
}

absl::StatusOr<RegretRun> RunRegret(const BenchmarkFunction& f,
                                    const RegretOptions& options) {
  assert(options.trials >= 1 && options.parallel >= 1);
  absl::StatusOr<optimizer::SearchSpace> space = SpaceFor(f);
  if (!space.ok()) return space.status();
  const auto suggester = optimizer::MakeSuggester(options.algorithm);
  const Clock::time_point start = Clock::now();

  // Trials in creation order; with FIFO completion the pending ones are
  // always the last few.
  std::vector<Observation> trials;
  size_t completed = 0;
  RegretRun run;
  double best = std::numeric_limits<double>::infinity();
  double spent = 0;
  auto complete_oldest = [&] {
    Observation& o = trials[completed++];
    const double y = f.f(ToVector(o.x));
    o.outcome = Outcome::kCompleted;
    o.values = {-y};
    best = std::min(best, y);
    run.best_regret.push_back(best - f.minimum);
    if (options.cost) {
      o.cost = options.cost(ToVector(o.x));
      spent += o.cost;
      run.cumulative_cost.push_back(spent);
    }
  };

  for (int t = 0; t < options.trials; ++t) {
    if (options.cost_budget > 0 && spent >= options.cost_budget) break;
    optimizer::SuggestRequest request;
    request.space = &*space;
    request.history = trials;
    request.trials_created = t;
    request.count = 1;
    request.seed = options.seed;
    request.cost = {.enabled = options.cost_aware,
                    .budget = options.cost_budget,
                    .spent = spent,
                    .max_trials = options.trials};
    request.priors = &options.priors;
    absl::StatusOr<std::vector<Assignment>> x = suggester->Suggest(request);
    if (!x.ok()) return x.status();
    trials.push_back({std::move(x->front()), Outcome::kPending});
    if (trials.size() - completed == static_cast<size_t>(options.parallel)) {
      complete_oldest();
    }
  }
  while (completed < trials.size()) complete_oldest();
  run.seconds = SecondsSince(start);
  run.trials = std::move(trials);
  return run;
}

BenchmarkFunction RelatedTask(const BenchmarkFunction& f, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  Eigen::VectorXd shift(f.dim());
  for (int j = 0; j < f.dim(); ++j) {
    const auto [lo, hi] = f.bounds[static_cast<size_t>(j)];
    shift[j] =
        (unit(rng) < 0.5 ? -1 : 1) * (0.01 + 0.03 * unit(rng)) * (hi - lo);
  }
  const double scale = 0.9 + 0.2 * unit(rng);
  const double offset = 0.1 * f.minimum + 1.0;
  BenchmarkFunction related = f;
  related.name = absl::StrCat(f.name, "-related");
  related.f = [g = f.f, shift, scale, offset](const Eigen::VectorXd& x) {
    return scale * g(x - shift) + offset;
  };
  related.minimum = scale * f.minimum + offset;
  return related;
}

std::string OptimizerLabel(optimizer::Algorithm algorithm, int parallel) {
  std::string label = absl::StrCat(
      "hypertune-",
      absl::AsciiStrToLower(std::string(optimizer::AlgorithmName(algorithm))));
  if (parallel > 1) absl::StrAppend(&label, "-p", parallel);
  return label;
}

absl::StatusOr<LatencyResult> MeasureLatency(
    optimizer::Algorithm algorithm, int dim, int history, int rounds,
    optimizer::FitRunner background_fits) {
  assert(dim >= 1 && history >= 0 && rounds >= 1);
  const BenchmarkFunction bowl{
      "bowl", Bowl, std::vector<std::pair<double, double>>(dim, {0.0, 1.0}),
      0.0};
  absl::StatusOr<optimizer::SearchSpace> space = SpaceFor(bowl);
  if (!space.ok()) return space.status();
  const auto suggester =
      optimizer::MakeSuggester(algorithm, std::move(background_fits));

  std::mt19937_64 rng(0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<Observation> trials;
  trials.reserve(history + rounds);
  for (int i = 0; i < history; ++i) {
    Assignment x(dim);
    for (double& v : x) v = unit(rng);
    const double y = Bowl(ToVector(x));
    trials.push_back({std::move(x), Outcome::kCompleted, {-y}});
  }

  std::vector<double> ms;
  for (int r = 0; r < rounds; ++r) {
    optimizer::SuggestRequest request;
    request.space = &*space;
    request.history = trials;
    request.trials_created = static_cast<int64_t>(trials.size());
    request.seed = 0;
    const Clock::time_point start = Clock::now();
    absl::StatusOr<std::vector<Assignment>> x = suggester->Suggest(request);
    ms.push_back(1000 * SecondsSince(start));
    if (!x.ok()) return x.status();
    const double y = Bowl(ToVector(x->front()));
    trials.push_back({std::move(x->front()), Outcome::kCompleted, {-y}});
  }
  return LatencyResult{Percentile(ms, 50), Percentile(ms, 95),
                       *std::max_element(ms.begin(), ms.end())};
}

double Percentile(std::vector<double> values, double p) {
  assert(!values.empty());
  std::sort(values.begin(), values.end());
  const double rank = p / 100 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] +
         (rank - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

}  // namespace hypertune::bench
