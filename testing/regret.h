// The in-process benchmark drivers of BENCHMARKS.md: simple regret of an
// optimizer on a benchmark function (section 1), and suggestion latency
// against a long history (section 2). No server, no storage: the optimizer
// library alone. Each call is self-contained and thread-compatible.
#ifndef HYPERTUNE_TESTING_REGRET_H_
#define HYPERTUNE_TESTING_REGRET_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "optimizer/search_space.h"
#include "optimizer/suggester.h"
#include "testing/test_functions.h"

namespace hypertune::bench {

struct RegretOptions {
  optimizer::Algorithm algorithm = optimizer::Algorithm::kGpBandit;
  // Trials per run (default 100).
  int trials = 100;
  // Simulated workers (default 1): each suggestion is made while
  // parallel - 1 earlier trials are pending; they complete oldest first.
  int parallel = 1;
  // The optimizer's seed (default 0).
  uint64_t seed = 0;
  // Optional: each trial's cost at its point (the function's domain);
  // RegretRun::cumulative_cost is then filled, and with cost_aware the
  // optimizer sees the costs (SuggestRequest::cost, horizon `trials`).
  std::function<double(const Eigen::VectorXd&)> cost = {};
  bool cost_aware = false;
  // With cost: the run ends once its trials have cost this much (0: no
  // limit), and a cost-aware optimizer takes it as its horizon.
  double cost_budget = 0;
  // Optional: earlier studies the optimizer transfers from.
  std::vector<optimizer::PriorStudy> priors = {};
};

struct RegretRun {
  // best_regret[k]: best value among the first k + 1 trials minus the known
  // minimum (trials in creation order, which is also completion order).
  std::vector<double> best_regret;
  // With RegretOptions::cost: the cost of the first k + 1 trials.
  std::vector<double> cumulative_cost;
  // The trials, completed, in creation order (values as the optimizer saw
  // them: -f).
  std::vector<optimizer::Observation> trials;
  // Wall time of the whole run, suggestions and evaluations.
  double seconds = 0;
};

// The search space of `f`: one linear double x0, x1, ... per dimension with
// the function's bounds.
absl::StatusOr<optimizer::SearchSpace> SpaceFor(const BenchmarkFunction& f);

// Minimizes `f` with `options.trials` trials of the optimizer (which
// maximizes, so it sees -f). Returns the optimizer's error if it fails.
// REQUIRES: options.trials >= 1, options.parallel >= 1
absl::StatusOr<RegretRun> RunRegret(const BenchmarkFunction& f,
                                    const RegretOptions& options);

// f shifted by a few percent of each range and scaled (seeded): a task
// related to f, as the same model tuned on new data is.
BenchmarkFunction RelatedTask(const BenchmarkFunction& f, uint64_t seed);

// The label the comparison groups runs by: "hypertune-quasi_random", with
// "-p4" appended for 4 parallel workers.
std::string OptimizerLabel(optimizer::Algorithm algorithm, int parallel);

struct LatencyResult {
  double median_ms = 0;
  double p95_ms = 0;
  double max_ms = 0;
};

// A study of `history` completed uniform random trials of the smooth
// sum((x - 0.3)^2) on [0,1]^dim (seed 0, as the peer), then `rounds` rounds
// of suggest + complete; returns statistics of the suggestion times.
// GP_BANDIT fits on `background_fits` if given (suggester.h).
// REQUIRES: dim >= 1, history >= 0, rounds >= 1
absl::StatusOr<LatencyResult> MeasureLatency(
    optimizer::Algorithm algorithm, int dim, int history, int rounds = 20,
    optimizer::FitRunner background_fits = {});

// The p-th percentile (0..100) of `values`, interpolating linearly between
// order statistics as numpy.percentile does. REQUIRES: !values.empty()
double Percentile(std::vector<double> values, double p);

}  // namespace hypertune::bench

#endif  // HYPERTUNE_TESTING_REGRET_H_
