#include "testing/learning_curves.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numbers>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "optimizer/early_stopping.h"
#include "optimizer/splitmix.h"

namespace hypertune::bench {
namespace {

using optimizer::Action;
using optimizer::EarlyStoppingConfig;
using optimizer::TrialCurve;

constexpr double kNoise = 0.005;

// A standard normal draw (Box-Muller), from two uniforms of `rng`.
double Normal(optimizer::SplitMix64& rng) {
  const double u1 = 1.0 - rng.NextUnit();  // (0, 1]: log is finite.
  const double u2 = rng.NextUnit();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace

CurveSuite MakeCurveSuite(int configs, int64_t max_resource, uint64_t seed) {
  CurveSuite suite;
  suite.seed = seed;
  suite.max_resource = max_resource;
  optimizer::SplitMix64 rng(optimizer::MixSeeds(seed, 0xC0FFEE));
  suite.optimum = -INFINITY;
  for (int i = 0; i < configs; ++i) {
    const double a = 0.60 + 0.35 * rng.NextUnit();
    const double b = 0.1 + 0.4 * rng.NextUnit();
    const double c = 0.15 * std::pow(2.0 / 0.15, rng.NextUnit());
    std::vector<double> curve(max_resource);
    for (int64_t t = 1; t <= max_resource; ++t) {
      curve[t - 1] =
          a - b * std::pow(static_cast<double>(t), -c) + kNoise * Normal(rng);
    }
    suite.curves.push_back(std::move(curve));
    suite.quality.push_back(
        a - b * std::pow(static_cast<double>(max_resource), -c));
    suite.optimum = std::max(suite.optimum, suite.quality.back());
  }
  return suite;
}

absl::StatusOr<StudySimResult> SimulateStudy(const CurveSuite& suite,
                                             const StudySimOptions& options) {
  const EarlyStoppingConfig& config = options.config;
  if (absl::Status s = optimizer::ValidateEarlyStoppingConfig(config);
      !s.ok()) {
    return s;
  }
  using Rule = EarlyStoppingConfig::Rule;
  const bool rungs =
      config.rule == Rule::kAsha || config.rule == Rule::kHyperband;
  if (rungs && config.max_resource != suite.max_resource) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_resource ", config.max_resource,
                     " differs from the suite's ", suite.max_resource));
  }
  const int pool = static_cast<int>(suite.curves.size());
  const int64_t full = suite.max_resource;
  const double target =
      suite.optimum - options.tolerance * std::abs(suite.optimum);
  const bool pause = rungs && config.pause_at_rungs;

  // Trial id k + 1 runs configuration k; study[k] is its curve.
  std::vector<TrialCurve> study;
  study.reserve(pool);
  std::vector<int> worker_trial(options.workers, -1);
  StudySimResult result;
  int64_t epochs = 0;
  double best_reported = -INFINITY;

  // Hands a free worker its next trial: a promotion first, else a new
  // configuration. Returns false when there is nothing to hand out.
  auto assign = [&](int w) {
    if (pause) {
      const std::vector<optimizer::Promotion> promotions =
          optimizer::Promotions(config, study, /*draining=*/
                                static_cast<int>(study.size()) == pool);
      if (!promotions.empty()) {
        const int k = static_cast<int>(promotions.front().trial_id - 1);
        study[k].status = TrialCurve::Status::kRunning;
        worker_trial[w] = k;
        ++result.paused_resumes;
        return true;
      }
    }
    if (static_cast<int>(study.size()) < pool) {
      TrialCurve curve;
      curve.id = static_cast<int64_t>(study.size()) + 1;
      curve.status = TrialCurve::Status::kRunning;
      curve.points.reserve(full);
      study.push_back(std::move(curve));
      worker_trial[w] = static_cast<int>(study.size()) - 1;
      ++result.trials;
      return true;
    }
    return false;
  };

  while (true) {
    bool busy = false;
    for (int w = 0; w < options.workers; ++w) {
      if (worker_trial[w] < 0) assign(w);
      busy = busy || worker_trial[w] >= 0;
    }
    if (!busy) break;
    // One tick: every busy worker runs one epoch and reports it.
    for (int w = 0; w < options.workers; ++w) {
      const int k = worker_trial[w];
      if (k < 0) continue;
      const int64_t step = static_cast<int64_t>(study[k].points.size()) + 1;
      ++epochs;
      const EpochOutcome outcome =
          RunEpoch(config, study, k, suite.curves[k][step - 1], full);
      if (outcome != EpochOutcome::kGoesOn) worker_trial[w] = -1;
      if (outcome != EpochOutcome::kFullBudget) continue;
      ++result.full_budget_trials;
      if (study[k].points.back().second > best_reported) {
        best_reported = study[k].points.back().second;
        result.final_quality = suite.quality[k];
      }
      if (result.final_quality >= target) {
        result.reached = true;
        result.epochs_to_target = epochs;
        return result;
      }
    }
  }
  // Nothing runs and nothing is left to start: the paused trials that no
  // promotion reaches are stopped (UnpromotableTrials is then every one).
  result.epochs_to_target = epochs;
  return result;
}

EpochOutcome RunEpoch(const EarlyStoppingConfig& config,
                      std::vector<TrialCurve>& study, size_t k, double value,
                      int64_t max_resource) {
  TrialCurve& trial = study[k];
  const int64_t step = trial.points.empty() ? 1 : trial.points.back().first + 1;
  trial.points.emplace_back(step, value);
  if (step >= max_resource) {
    trial.status = TrialCurve::Status::kFinished;
    return EpochOutcome::kFullBudget;
  }
  const optimizer::Decision d = optimizer::DecideTrial(config, study, trial.id);
  if (d.action == Action::kStop) {
    trial.status = TrialCurve::Status::kFinished;
    return EpochOutcome::kLeft;
  }
  if (d.action == Action::kPause) {
    trial.status = TrialCurve::Status::kPaused;
    return EpochOutcome::kLeft;
  }
  return EpochOutcome::kGoesOn;
}

absl::Status WriteSuitesJson(const std::vector<CurveSuite>& suites,
                             double tolerance, const std::string& path) {
  nlohmann::ordered_json root;
  root["max_resource"] = suites.empty() ? 0 : suites.front().max_resource;
  root["tolerance"] = tolerance;
  root["suites"] = nlohmann::ordered_json::array();
  for (const CurveSuite& suite : suites) {
    root["suites"].push_back({{"seed", suite.seed},
                              {"optimum", suite.optimum},
                              {"quality", suite.quality},
                              {"curves", suite.curves}});
  }
  std::ofstream out(path);
  out << root.dump() << "\n";
  out.close();
  if (!out) {
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

}  // namespace hypertune::bench
