#include "testing/multi_objective.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "optimizer/pareto.h"

namespace hypertune::bench {
namespace {

using optimizer::Assignment;
using optimizer::MetricConfig;
using optimizer::MetricRole;
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

double Percentile(std::vector<double> values, double p) {
  assert(!values.empty());
  std::sort(values.begin(), values.end());
  const double rank = p / 100 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] +
         (rank - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

// The simulated study shared by both protocols: `evaluate` maps a point to
// its metric values (as the optimizer sees them); `record` sees each
// completed trial's point in completion order.
template <typename Evaluate, typename Record>
absl::Status RunStudy(const optimizer::SearchSpace& space,
                      const std::vector<MetricConfig>& metrics,
                      const MetricsRunOptions& options, Evaluate evaluate,
                      Record record) {
  assert(options.trials >= 1 && options.parallel >= 1);
  const auto suggester = optimizer::MakeSuggester(options.algorithm);
  // Trials in creation order; with FIFO completion the pending ones are
  // always the last few.
  std::vector<Observation> trials;
  size_t completed = 0;
  auto complete_oldest = [&] {
    Observation& o = trials[completed++];
    const Eigen::VectorXd x = ToVector(o.x);
    o.outcome = Outcome::kCompleted;
    o.values = evaluate(x);
    record(x);
  };
  for (int t = 0; t < options.trials; ++t) {
    optimizer::SuggestRequest request;
    request.space = &space;
    request.history = trials;
    request.trials_created = t;
    request.count = 1;
    request.seed = options.seed;
    request.metrics = metrics;
    absl::StatusOr<std::vector<Assignment>> x = suggester->Suggest(request);
    if (!x.ok()) return x.status();
    trials.push_back({std::move(x->front()), Outcome::kPending});
    if (trials.size() - completed == static_cast<size_t>(options.parallel)) {
      complete_oldest();
    }
  }
  while (completed < trials.size()) complete_oldest();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<optimizer::SearchSpace> BoxSpace(
    const std::vector<std::pair<double, double>>& bounds) {
  std::vector<optimizer::ParameterConfig> params(bounds.size());
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].name = absl::StrCat("x", i);
    params[i].type = optimizer::ParameterType::kDouble;
    params[i].min = bounds[i].first;
    params[i].max = bounds[i].second;
  }
  return optimizer::SearchSpace::Create(std::move(params));
}

absl::StatusOr<MultiObjectiveRun> RunMultiObjective(
    const MultiObjectiveProblem& problem, const MetricsRunOptions& options) {
  absl::StatusOr<optimizer::SearchSpace> space = BoxSpace(problem.bounds);
  if (!space.ok()) return space.status();
  const std::vector<MetricConfig> metrics(problem.objectives, MetricConfig{});
  const Clock::time_point start = Clock::now();
  // Outcomes negated: the hypervolume (pareto.h) is of maximized values.
  std::vector<Eigen::VectorXd> outcomes;
  MultiObjectiveRun run;
  const Eigen::VectorXd reference = -problem.reference;
  absl::Status s = RunStudy(
      *space, metrics, options,
      [&](const Eigen::VectorXd& x) {
        // The optimizer maximizes: the objectives negated.
        const Eigen::VectorXd f = -problem.f(x);
        return std::vector<double>(f.data(), f.data() + f.size());
      },
      [&](const Eigen::VectorXd& x) {
        outcomes.push_back(-problem.f(x));
        Eigen::MatrixXd y(outcomes.size(), problem.objectives);
        for (size_t i = 0; i < outcomes.size(); ++i) {
          y.row(static_cast<Eigen::Index>(i)) = outcomes[i].transpose();
        }
        run.hypervolume_fraction.push_back(
            optimizer::Hypervolume(y, reference) / problem.front_hypervolume);
      });
  if (!s.ok()) return s;
  run.seconds = SecondsSince(start);
  return run;
}

absl::StatusOr<ConstrainedRun> RunConstrained(
    const ConstrainedProblem& problem, const MetricsRunOptions& options) {
  absl::StatusOr<optimizer::SearchSpace> space = BoxSpace(problem.bounds);
  if (!space.ok()) return space.status();
  std::vector<MetricConfig> metrics = {MetricConfig{}};
  for (int c = 0; c < problem.num_constraints; ++c) {
    metrics.push_back({MetricRole::kConstraint,
                       -std::numeric_limits<double>::infinity(), 0.0});
  }
  const Clock::time_point start = Clock::now();
  ConstrainedRun run;
  double best = std::numeric_limits<double>::infinity();
  absl::Status s = RunStudy(
      *space, metrics, options,
      [&](const Eigen::VectorXd& x) {
        std::vector<double> values = {-problem.f(x)};
        const Eigen::VectorXd c = problem.constraints(x);
        values.insert(values.end(), c.data(), c.data() + c.size());
        return values;
      },
      [&](const Eigen::VectorXd& x) {
        if ((problem.constraints(x).array() <= 0).all()) {
          best = std::min(best, problem.f(x));
        }
        run.best_regret.push_back(std::isfinite(best)
                                      ? best - problem.minimum
                                      : problem.infeasible_regret);
      });
  if (!s.ok()) return s;
  run.seconds = SecondsSince(start);
  return run;
}

absl::StatusOr<MetricsLatency> MeasureMetricsLatency(
    optimizer::Algorithm algorithm, int dim, int history, int objectives,
    int constraints, int rounds) {
  assert(dim >= 1 && history >= 0 && objectives >= 1 && constraints >= 0 &&
         rounds >= 1);
  absl::StatusOr<optimizer::SearchSpace> space =
      BoxSpace(std::vector<std::pair<double, double>>(dim, {0.0, 1.0}));
  if (!space.ok()) return space.status();
  std::vector<MetricConfig> metrics(objectives, MetricConfig{});
  for (int c = 0; c < constraints; ++c) {
    metrics.push_back({MetricRole::kConstraint,
                       -std::numeric_limits<double>::infinity(), 0.0});
  }
  auto evaluate = [&](const Assignment& a) {
    const Eigen::VectorXd x = ToVector(a);
    std::vector<double> values;
    for (int k = 0; k < objectives; ++k) {
      const double centre =
          objectives == 1 ? 0.3 : 0.3 + 0.4 * k / (objectives - 1);
      values.push_back(-(x.array() - centre).square().sum());
    }
    for (int c = 0; c < constraints; ++c) {
      values.push_back(x.sum() - dim * (0.5 + 0.1 * c));
    }
    return values;
  };
  const auto suggester = optimizer::MakeSuggester(algorithm);
  // The same random trials as `hypertune-bench latency` (regret.cc).
  std::mt19937_64 rng(0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<Observation> trials;
  trials.reserve(history + rounds);
  for (int i = 0; i < history; ++i) {
    Assignment x(dim);
    for (double& v : x) v = unit(rng);
    Observation o{x, Outcome::kCompleted, evaluate(x)};
    trials.push_back(std::move(o));
  }
  std::vector<double> ms;
  for (int r = 0; r < rounds; ++r) {
    optimizer::SuggestRequest request;
    request.space = &*space;
    request.history = trials;
    request.trials_created = static_cast<int64_t>(trials.size());
    request.seed = 0;
    request.metrics = metrics;
    const Clock::time_point start = Clock::now();
    absl::StatusOr<std::vector<Assignment>> x = suggester->Suggest(request);
    ms.push_back(1000 * SecondsSince(start));
    if (!x.ok()) return x.status();
    Observation o{x->front(), Outcome::kCompleted, evaluate(x->front())};
    trials.push_back(std::move(o));
  }
  return MetricsLatency{Percentile(ms, 50), Percentile(ms, 95),
                        *std::max_element(ms.begin(), ms.end())};
}

}  // namespace hypertune::bench
