// The multi-fidelity benchmark (`hypertune-bench multi-fidelity`): tables
// of configurations with every epoch's validation value, and an
// asynchronous study simulated over one that drives the service's pieces as
// the service does: the study's algorithm proposes each new configuration
// (from the learning curves, optimizer/fidelity.h), the nearest
// configuration of the table not yet started runs, DecideTrial judges every
// reported epoch and paused trials are resumed by the rule's Promotions
// (ASHA, or Hyperband's brackets) or, with
// promote_by_model, by the learning-curve model's (ModelPromotions). Cost is
// counted in epochs and in the table's device-seconds.
#ifndef HYPERTUNE_TESTING_CURVE_TABLE_H_
#define HYPERTUNE_TESTING_CURVE_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "optimizer/early_stopping.h"
#include "optimizer/search_space.h"
#include "optimizer/suggester.h"

namespace hypertune::bench {

struct CurveTable {
  std::string name;
  // The search space (SearchSpace::Create of these).
  std::vector<optimizer::ParameterConfig> parameters;
  // configs[i]: an assignment of that space.
  std::vector<optimizer::Assignment> configs;
  // curves[i][t - 1]: what config i reports at epoch t (maximized).
  std::vector<std::vector<double>> curves;
  // seconds[i][t - 1]: what epoch t of config i took.
  std::vector<std::vector<double>> seconds;
  int64_t max_resource = 0;
  // The best final value of the table.
  double optimum = 0;
};

// Reads a table written by benchmarks/learning_curves/make_fashion_table.py:
// a header line (space, max_resource, metric, goal) and one JSON line per
// configuration. INVALID_ARGUMENT naming the line for anything malformed.
absl::StatusOr<CurveTable> LoadCurveTable(const std::string& path);

// A synthetic table over [0, 1]^4 for `seed`: config x's curve is
//   y(t) = a(x) - b(x) t^(-c(x)) + N(0, 0.005^2),
// a = 0.6 + 0.3 exp(-|x01 - centre|^2 / 0.125) + 0.05 (1 - x2) (a bump at
// a centre drawn per seed), c = 0.15 (2 / 0.15)^x2 (fast starters end
// lower: curves cross), b = 0.1 + 0.4 x3; configurations uniform.
CurveTable MakeSyntheticCurveTable(int configs, int64_t max_resource,
                                   uint64_t seed);

struct TableSimOptions {
  // ASHA in pause mode, with or without promote_by_model;
  // max_resource the table's.
  optimizer::EarlyStoppingConfig config;
  // Proposes the new configurations.
  optimizer::Algorithm algorithm = optimizer::Algorithm::kGpBandit;
  // Simulated workers; each runs one epoch per tick.
  int workers = 1;
  // The target: the study's best full-budget trial (the best reported
  // final value) is within tolerance * |optimum| of the table's optimum.
  double tolerance = 0.01;
  uint64_t seed = 0;
};

struct TableSimResult {
  // Epochs and device-seconds spent (all workers) when the target was
  // first met, or in all when it never was.
  int64_t epochs = 0;
  double seconds = 0;
  bool reached = false;
  // The table's final value of the study's best.
  double final_value = 0;
  // Configurations started, resumes of paused trials (each a checkpoint
  // reload), and rungs a trial passed without pausing (ResumesAtOnce).
  int trials = 0;
  int resumes = 0;
  int continued_at_rungs = 0;
  // Milliseconds each hand-out took (promotions, or the proposal of a new
  // configuration): what a worker's SuggestTrials waits for.
  std::vector<double> decision_ms;
  // With promote_by_model, milliseconds each ResumesAtOnce took: what the
  // report that reaches a rung waits for.
  std::vector<double> rung_ms;
};

// Runs the study until the target is met or every configuration of the
// table is done. INVALID_ARGUMENT for an invalid config or a max_resource
// other than the table's.
absl::StatusOr<TableSimResult> SimulateTableStudy(
    const CurveTable& table, const TableSimOptions& options);

// Writes the tables for benchmarks/peers_optuna_table.py: {"tolerance",
// "tables": [{"name", "max_resource", "optimum", "unit": [[...]] (each
// configuration in the unit cube), "curves", "seconds"}]}.
absl::Status WriteCurveTablesJson(const std::vector<CurveTable>& tables,
                                  double tolerance, const std::string& path);

}  // namespace hypertune::bench

#endif  // HYPERTUNE_TESTING_CURVE_TABLE_H_
