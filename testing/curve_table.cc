#include "testing/curve_table.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "optimizer/early_stopping.h"
#include "optimizer/learning_curve_model.h"
#include "optimizer/search_space.h"
#include "optimizer/splitmix.h"
#include "optimizer/suggester.h"
#include "testing/learning_curves.h"

namespace hypertune::bench {
namespace {

using optimizer::Assignment;
using optimizer::ParameterConfig;
using optimizer::TrialCurve;

constexpr double kSyntheticNoise = 0.005;

absl::StatusOr<ParameterConfig> ToParameter(const nlohmann::json& p) {
  ParameterConfig config;
  config.name = p.at("name").get<std::string>();
  const std::string type = p.at("type").get<std::string>();
  if (type == "double") {
    config.type = optimizer::ParameterType::kDouble;
  } else if (type == "integer") {
    config.type = optimizer::ParameterType::kInteger;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "space: parameter ", config.name, ": unknown type ", type));
  }
  config.min = p.at("min").get<double>();
  config.max = p.at("max").get<double>();
  config.scale = p.at("scale").get<std::string>() == "log"
                     ? optimizer::Scale::kLog
                     : optimizer::Scale::kLinear;
  return config;
}

absl::StatusOr<CurveTable> ParseTable(std::ifstream& in) {
  CurveTable table;
  std::string line;
  int number = 0;
  bool maximize = true;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const nlohmann::json row = nlohmann::json::parse(line);
    if (number == 1) {
      table.name = row.at("table").get<std::string>();
      table.max_resource = row.at("max_resource").get<int64_t>();
      maximize = row.at("goal").get<std::string>() == "maximize";
      for (const nlohmann::json& p : row.at("space")) {
        absl::StatusOr<ParameterConfig> config = ToParameter(p);
        if (!config.ok()) return config.status();
        table.parameters.push_back(*std::move(config));
      }
      continue;
    }
    Assignment x;
    for (const ParameterConfig& p : table.parameters) {
      x.push_back(row.at("params").at(p.name).get<double>());
    }
    std::vector<double> curve =
        row.at("val_accuracy").get<std::vector<double>>();
    std::vector<double> seconds =
        row.at("epoch_seconds").get<std::vector<double>>();
    if (static_cast<int64_t>(curve.size()) != table.max_resource ||
        seconds.size() != curve.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", number, ": expected ", table.max_resource,
                       " epochs, got ", curve.size()));
    }
    if (!maximize) {
      for (double& v : curve) v = -v;
    }
    table.configs.push_back(std::move(x));
    table.curves.push_back(std::move(curve));
    table.seconds.push_back(std::move(seconds));
  }
  return table;
}

}  // namespace

absl::StatusOr<CurveTable> LoadCurveTable(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  absl::StatusOr<CurveTable> table;
  try {
    table = ParseTable(in);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
  if (!table.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", table.status().message()));
  }
  if (table->configs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no configurations"));
  }
  absl::StatusOr<optimizer::SearchSpace> space =
      optimizer::SearchSpace::Create(table->parameters);
  if (!space.ok()) return space.status();
  table->optimum = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < table->configs.size(); ++i) {
    if (absl::Status s = space->Validate(table->configs[i]); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": configuration ", i, ": ", s.message()));
    }
    table->optimum = std::max(table->optimum, table->curves[i].back());
  }
  return table;
}

CurveTable MakeSyntheticCurveTable(int configs, int64_t max_resource,
                                   uint64_t seed) {
  CurveTable table;
  table.name = absl::StrCat("synthetic-", seed);
  table.max_resource = max_resource;
  for (int j = 0; j < 4; ++j) {
    ParameterConfig p;
    p.name = absl::StrCat("x", j);
    table.parameters.push_back(std::move(p));
  }
  optimizer::SplitMix64 rng(optimizer::MixSeeds(seed, 0x7AB1E));
  const double cx = 0.2 + 0.6 * rng.NextUnit();
  const double cy = 0.2 + 0.6 * rng.NextUnit();
  table.optimum = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < configs; ++i) {
    Assignment x(4);
    for (double& v : x) v = rng.NextUnit();
    const double d2 = (x[0] - cx) * (x[0] - cx) + (x[1] - cy) * (x[1] - cy);
    const double a = 0.6 + 0.3 * std::exp(-d2 / 0.125) + 0.05 * (1 - x[2]);
    const double c = 0.15 * std::pow(2.0 / 0.15, x[2]);
    const double b = 0.1 + 0.4 * x[3];
    std::vector<double> curve(max_resource);
    for (int64_t t = 1; t <= max_resource; ++t) {
      curve[t - 1] = a - b * std::pow(static_cast<double>(t), -c) +
                     kSyntheticNoise * rng.NextNormal();
    }
    table.optimum = std::max(table.optimum, curve.back());
    table.configs.push_back(std::move(x));
    table.curves.push_back(std::move(curve));
    table.seconds.push_back(std::vector<double>(max_resource, 1.0));
  }
  return table;
}

absl::StatusOr<TableSimResult> SimulateTableStudy(
    const CurveTable& table, const TableSimOptions& options) {
  const optimizer::EarlyStoppingConfig& config = options.config;
  if (absl::Status s = optimizer::ValidateEarlyStoppingConfig(config);
      !s.ok()) {
    return s;
  }
  if (config.max_resource != table.max_resource) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_resource ", config.max_resource,
                     " differs from the table's ", table.max_resource));
  }
  absl::StatusOr<optimizer::SearchSpace> space =
      optimizer::SearchSpace::Create(table.parameters);
  if (!space.ok()) return space.status();
  const int pool = static_cast<int>(table.configs.size());
  Eigen::MatrixXd unit(pool, space->dim());
  for (int i = 0; i < pool; ++i) {
    unit.row(i) = space->Encode(table.configs[i]).transpose();
  }
  const double target =
      table.optimum - options.tolerance * std::abs(table.optimum);
  std::unique_ptr<optimizer::Suggester> suggester =
      optimizer::MakeSuggester(options.algorithm);

  // Trial k (id k + 1) runs configuration config_of[k].
  std::vector<TrialCurve> study;
  std::vector<Assignment> parameters;
  std::vector<int> config_of;
  std::vector<bool> used(pool, false);
  std::vector<int> worker_trial(options.workers, -1);
  TableSimResult result;
  double best_reported = -std::numeric_limits<double>::infinity();

  // The configuration the algorithm proposes, as the nearest unused one.
  auto nearest_unused = [&](const Assignment& x) {
    const Eigen::VectorXd at = space->Encode(x);
    int nearest = -1;
    double nearest_d2 = std::numeric_limits<double>::infinity();
    for (int i = 0; i < pool; ++i) {
      if (used[i]) continue;
      const double d2 = (unit.row(i).transpose() - at).squaredNorm();
      if (d2 < nearest_d2) {
        nearest_d2 = d2;
        nearest = i;
      }
    }
    return nearest;
  };
  // promote_by_model: the model the promotions were just chosen with, which
  // the proposal starts from, as in the service.
  std::optional<optimizer::LearningCurveModel> curve_model;
  auto propose = [&]() -> absl::StatusOr<int> {
    optimizer::SuggestRequest request;
    request.space = &*space;
    const optimizer::FidelityHistory fidelity{
        config, study, curve_model ? &*curve_model : nullptr};
    request.fidelity = &fidelity;
    for (size_t k = 0; k < study.size(); ++k) {
      optimizer::Observation o{.x = parameters[k], .trial_id = study[k].id};
      if (study[k].status == TrialCurve::Status::kFinished) {
        o.outcome = optimizer::Outcome::kCompleted;
        o.values = {study[k].points.back().second};
      }
      request.history.push_back(std::move(o));
    }
    request.trials_created = static_cast<int64_t>(study.size());
    request.seed = options.seed;
    absl::StatusOr<std::vector<Assignment>> x = suggester->Suggest(request);
    if (!x.ok()) return x.status();
    return nearest_unused(x->front());
  };

  // Hands a free worker its next trial: a promotion first, else a new
  // configuration. Returns false when there is nothing to hand out.
  auto assign = [&](int w) -> absl::StatusOr<bool> {
    const bool draining = static_cast<int>(study.size()) == pool;
    const std::vector<optimizer::Promotion> promotions =
        config.promote_by_model
            ? optimizer::ModelPromotions(config, *space, study, parameters,
                                         draining, &curve_model)
            : optimizer::Promotions(config, study, draining);
    if (!promotions.empty()) {
      const int k = static_cast<int>(promotions.front().trial_id - 1);
      study[k].status = TrialCurve::Status::kRunning;
      worker_trial[w] = k;
      ++result.resumes;
      return true;
    }
    if (draining) return false;
    absl::StatusOr<int> next = propose();
    if (!next.ok()) return next.status();
    used[*next] = true;
    TrialCurve curve;
    curve.id = static_cast<int64_t>(study.size()) + 1;
    curve.status = TrialCurve::Status::kRunning;
    study.push_back(std::move(curve));
    parameters.push_back(table.configs[*next]);
    config_of.push_back(*next);
    worker_trial[w] = static_cast<int>(study.size()) - 1;
    ++result.trials;
    return true;
  };

  while (true) {
    bool busy = false;
    for (int w = 0; w < options.workers; ++w) {
      if (worker_trial[w] < 0) {
        const absl::Time start = absl::Now();
        absl::StatusOr<bool> assigned = assign(w);
        if (!assigned.ok()) return assigned.status();
        result.decision_ms.push_back(
            absl::ToDoubleMilliseconds(absl::Now() - start));
      }
      busy = busy || worker_trial[w] >= 0;
    }
    if (!busy) break;
    // One tick: every busy worker runs one epoch and reports it.
    for (int w = 0; w < options.workers; ++w) {
      const int k = worker_trial[w];
      if (k < 0) continue;
      const int c = config_of[k];
      const int64_t step = static_cast<int64_t>(study[k].points.size()) + 1;
      ++result.epochs;
      result.seconds += table.seconds[c][step - 1];
      EpochOutcome outcome = RunEpoch(
          config, study, k, table.curves[c][step - 1], table.max_resource);
      // As the service: a trial the model would resume first goes on.
      if (config.promote_by_model &&
          study[k].status == TrialCurve::Status::kPaused) {
        const absl::Time start = absl::Now();
        const bool at_once = optimizer::ResumesAtOnce(config, *space, study,
                                                      parameters, study[k].id);
        result.rung_ms.push_back(
            absl::ToDoubleMilliseconds(absl::Now() - start));
        if (at_once) {
          study[k].status = TrialCurve::Status::kRunning;
          outcome = EpochOutcome::kGoesOn;
          ++result.continued_at_rungs;
        }
      }
      if (outcome != EpochOutcome::kGoesOn) worker_trial[w] = -1;
      if (outcome != EpochOutcome::kFullBudget) continue;
      best_reported = std::max(best_reported, study[k].points.back().second);
      result.final_value = best_reported;
      if (result.final_value >= target) {
        result.reached = true;
        return result;
      }
    }
  }
  return result;
}

absl::Status WriteCurveTablesJson(const std::vector<CurveTable>& tables,
                                  double tolerance, const std::string& path) {
  nlohmann::ordered_json root;
  root["tolerance"] = tolerance;
  root["tables"] = nlohmann::ordered_json::array();
  for (const CurveTable& table : tables) {
    absl::StatusOr<optimizer::SearchSpace> space =
        optimizer::SearchSpace::Create(table.parameters);
    if (!space.ok()) return space.status();
    std::vector<std::vector<double>> unit;
    for (const Assignment& x : table.configs) {
      const Eigen::VectorXd u = space->Encode(x);
      unit.emplace_back(u.data(), u.data() + u.size());
    }
    root["tables"].push_back({{"name", table.name},
                              {"max_resource", table.max_resource},
                              {"optimum", table.optimum},
                              {"unit", unit},
                              {"curves", table.curves},
                              {"seconds", table.seconds}});
  }
  std::ofstream out(path);
  out << root.dump() << "\n";
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace hypertune::bench
