// The multi-objective early-stopping benchmark. Two objectives per epoch t
// of each configuration of the Fashion-MNIST table
// (benchmarks/learning_curves/fashion_mnist.jsonl, the reference trainer on
// one thread): val_accuracy[t] (maximized) and the mean of epoch_seconds[1..t]
// (minimized: the configuration's training seconds per epoch so far, as
// measured when the table was made; at the last epoch, its training time
// over 16). Nothing is trained again: the second objective is derived from
// the table's own columns, so the table stays the one shipped.
//
// Per seed, the 256 configurations run in an order shuffled by the seed
// (trial k runs the k-th), `workers` at a time, one epoch each per tick, as
// hypertune-bench early-stopping and peers_optuna_pruners.py simulate a
// study: free workers take the next configuration at the start of a tick,
// and after each epoch the rule (optimizer::DecideTrial) continues or stops
// the trial. Every epoch run counts, a stopped trial's too. The study's
// answer is the Pareto front of its trials that ran the full 16 epochs; the
// measure is the hypervolume of that front (accuracy and seconds per
// epoch) as a fraction of the whole
// pool's at full budget: the epochs until it reaches --target, and the
// fraction reached after 512, 1024 and 2048 epochs; and the epochs until it
// reaches the hypervolume that first-objective-only ASHA (one worker) ends
// the same seed's pool with (the issue's "epochs to the same
// hypervolume"). The reference point is
// the pool front's nadir less a tenth of the front's range.
#include "benchmarks/mo_early_stopping.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "optimizer/early_stopping.h"
#include "optimizer/pareto.h"

namespace hypertune::bench {
namespace {

using optimizer::Action;
using optimizer::EarlyStoppingConfig;
using optimizer::TrialCurve;
using Rule = EarlyStoppingConfig::Rule;
using Mo = EarlyStoppingConfig::MultiObjective;

struct Table {
  int max_resource = 0;
  // acc[i][t - 1], secs[i][t - 1] (running mean): configuration i at epoch t.
  std::vector<std::vector<double>> acc, secs;
};

bool LoadTable(const std::string& path, Table& table) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    const nlohmann::json row = nlohmann::json::parse(line);
    if (header) {
      table.max_resource = row.at("max_resource").get<int>();
      header = false;
      continue;
    }
    std::vector<double> acc = row.at("val_accuracy").get<std::vector<double>>();
    std::vector<double> seconds =
        row.at("epoch_seconds").get<std::vector<double>>();
    std::vector<double> mean(seconds.size());
    double sum = 0;
    for (size_t t = 0; t < seconds.size(); ++t) {
      sum += seconds[t];
      mean[t] = sum / static_cast<double>(t + 1);
    }
    table.acc.push_back(std::move(acc));
    table.secs.push_back(std::move(mean));
  }
  return !table.acc.empty();
}

// The hypervolume of (acc, -secs) rows above the reference.
double FrontVolume(const std::vector<std::pair<double, double>>& points,
                   const Eigen::Vector2d& reference) {
  if (points.empty()) return 0;
  Eigen::MatrixXd y(points.size(), 2);
  for (size_t i = 0; i < points.size(); ++i) {
    y(i, 0) = points[i].first;
    y(i, 1) = -points[i].second;
  }
  return optimizer::Hypervolume(y, reference);
}

std::vector<int> Order(int n, int seed) {
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(static_cast<uint64_t>(seed) * 7919 + 1);
  for (int i = n - 1; i > 0; --i) {
    const int j = static_cast<int>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

struct Policy {
  std::string name;
  Rule rule;
  Mo mode;
};

// (epochs, hypervolume fraction) after each full-budget completion.
std::vector<std::pair<int64_t, double>> Simulate(
    const Table& table, const std::vector<int>& order,
    const EarlyStoppingConfig& config, int workers,
    const Eigen::Vector2d& reference, double pool_volume) {
  const int n = static_cast<int>(order.size());
  std::vector<TrialCurve> curves;
  curves.reserve(n);
  std::vector<int> running(workers, -1);  // index into curves
  int started = 0;
  int64_t epochs = 0;
  std::vector<std::pair<double, double>> done;
  std::vector<std::pair<int64_t, double>> trajectory;
  for (;;) {
    for (int w = 0; w < workers; ++w) {
      if (running[w] < 0 && started < n) {
        TrialCurve c;
        c.id = started + 1;
        curves.push_back(std::move(c));
        running[w] = started++;
      }
    }
    if (std::all_of(running.begin(), running.end(),
                    [](int r) { return r < 0; })) {
      break;
    }
    for (int w = 0; w < workers; ++w) {
      if (running[w] < 0) continue;
      TrialCurve& c = curves[running[w]];
      const int config_index = order[running[w]];
      const int64_t t = static_cast<int64_t>(c.points.size()) + 1;
      const double acc = table.acc[config_index][t - 1];
      const double secs = table.secs[config_index][t - 1];
      c.points.emplace_back(t, acc);
      c.metrics.push_back({t, {acc, secs}, {}});
      ++epochs;
      if (t >= table.max_resource) {
        c.status = TrialCurve::Status::kFinished;
        running[w] = -1;
        done.emplace_back(acc, secs);
        trajectory.emplace_back(epochs,
                                FrontVolume(done, reference) / pool_volume);
        continue;
      }
      if (optimizer::DecideTrial(config, curves, c.id).action ==
          Action::kStop) {
        curves[running[w]].status = TrialCurve::Status::kFinished;
        running[w] = -1;
      }
    }
  }
  return trajectory;
}

// The epochs at which the trajectory first reaches `target` (the pool's
// epochs without stopping, n * max_resource + 1, when never).
int64_t EpochsTo(const std::vector<std::pair<int64_t, double>>& trajectory,
                 double target, int64_t never) {
  for (const auto& [epochs, fraction] : trajectory) {
    if (fraction >= target - 1e-12) return epochs;
  }
  return never;
}

double FractionAt(const std::vector<std::pair<int64_t, double>>& trajectory,
                  int64_t epochs) {
  double fraction = 0;
  for (const auto& [e, f] : trajectory) {
    if (e > epochs) break;
    fraction = f;
  }
  return fraction;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int MoEarlyStopping(const std::vector<std::string>& args) {
  std::string table_path = "benchmarks/learning_curves/fashion_mnist.jsonl";
  std::string out;
  int seeds = 20;
  double eta = 3;
  double target = 0.95;
  std::vector<int> worker_counts = {1, 4};
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    const std::string& flag = args[i];
    const std::string& value = args[i + 1];
    if (flag == "--table") {
      table_path = value;
    } else if (flag == "--seeds") {
      seeds = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--eta") {
      eta = std::max(2.0, std::atof(value.c_str()));
    } else if (flag == "--target") {
      target = std::atof(value.c_str());
    } else if (flag == "--out") {
      out = value;
    } else if (flag == "--workers") {
      worker_counts.clear();
      for (size_t p = 0; p < value.size();) {
        const size_t comma = value.find(',', p);
        worker_counts.push_back(
            std::max(1, std::atoi(value.substr(p, comma - p).c_str())));
        p = comma == std::string::npos ? value.size() : comma + 1;
      }
    } else {
      std::fprintf(stderr, "mo-early-stopping: unknown flag %s\n",
                   flag.c_str());
      return 2;
    }
  }
  if (args.size() % 2 != 0) {
    std::fprintf(stderr, "mo-early-stopping: flag %s needs a value\n",
                 args.back().c_str());
    return 2;
  }
  Table table;
  if (!LoadTable(table_path, table)) {
    std::fprintf(stderr, "mo-early-stopping: cannot read %s\n",
                 table_path.c_str());
    return 1;
  }
  const int n = static_cast<int>(table.acc.size());
  // The reference point: the pool's Pareto front at full budget, its nadir
  // less a tenth of its range (optimizer::InferReferencePoint, BoTorch's
  // convention), so the measure looks at the front and not at the diverged
  // or slowest configurations far below it.
  std::vector<std::pair<double, double>> pool;
  Eigen::MatrixXd y(n, 2);
  for (int i = 0; i < n; ++i) {
    const double acc = table.acc[i].back(), secs = table.secs[i].back();
    pool.emplace_back(acc, secs);
    y(i, 0) = acc;
    y(i, 1) = -secs;
  }
  const std::vector<int> front_rows = optimizer::ParetoFrontRows(y);
  Eigen::MatrixXd front(front_rows.size(), 2);
  for (size_t k = 0; k < front_rows.size(); ++k) {
    front.row(k) = y.row(front_rows[k]);
  }
  const Eigen::Vector2d reference = optimizer::InferReferencePoint(front, 1e-3);
  const double pool_volume = FrontVolume(pool, reference);
  // The measure: per seed, the hypervolume first-objective-only ASHA
  // ends with (its whole pool run), and the epochs each policy needs to
  // reach it.
  auto make_config = [&](Rule rule, Mo mode) {
    EarlyStoppingConfig config;
    config.rule = rule;
    config.maximize = true;
    config.objectives_maximize = {true, false};
    config.multi_objective = mode;
    config.min_resource = 1;
    config.max_resource = table.max_resource;
    config.reduction_factor = eta;
    return config;
  };
  std::vector<double> baseline;
  for (int seed = 0; seed < seeds; ++seed) {
    const auto trajectory = Simulate(
        table, Order(n, seed), make_config(Rule::kAsha, Mo::kFirstObjective), 1,
        reference, pool_volume);
    baseline.push_back(trajectory.empty() ? 0.0 : trajectory.back().second);
  }
  if (!out.empty()) {
    nlohmann::ordered_json suite = {
        {"asha_first_hv", baseline},
        {"table", table_path},
        {"max_resource", table.max_resource},
        {"reference", {reference[0], -reference[1]}},
        {"pool_hypervolume", pool_volume},
        {"target", target},
        {"acc", table.acc},
        {"secs", table.secs}};
    nlohmann::json orders = nlohmann::json::array();
    for (int seed = 0; seed < seeds; ++seed) orders.push_back(Order(n, seed));
    suite["orders"] = orders;
    std::ofstream(out) << suite.dump() << "\n";
  }

  const std::vector<Policy> policies = {
      {"none", Rule::kNone, Mo::kFirstObjective},
      {"median-first", Rule::kMedian, Mo::kFirstObjective},
      {"median-every", Rule::kMedian, Mo::kEpsilonNet},
      {"asha-first", Rule::kAsha, Mo::kFirstObjective},
      {"asha-epsnet", Rule::kAsha, Mo::kEpsilonNet},
      {"asha-hv", Rule::kAsha, Mo::kHypervolume},
      {"hyperband-first", Rule::kHyperband, Mo::kFirstObjective},
      {"hyperband-epsnet", Rule::kHyperband, Mo::kEpsilonNet}};
  const int64_t never = static_cast<int64_t>(n) * table.max_resource + 1;
  std::fprintf(stderr, "%-18s %7s %12s %10s %8s %8s %8s %8s %14s\n", "policy",
               "workers", "epochs_mean", "epochs_p50", "reached", "hv@512",
               "hv@1024", "hv@2048", "to_asha1_hv");
  for (int workers : worker_counts) {
    for (const Policy& policy : policies) {
      const EarlyStoppingConfig config = make_config(policy.rule, policy.mode);
      std::vector<double> epochs, at512, at1024, at2048, to_baseline;
      double reached = 0;
      for (int seed = 0; seed < seeds; ++seed) {
        const auto trajectory = Simulate(table, Order(n, seed), config, workers,
                                         reference, pool_volume);
        const int64_t e = EpochsTo(trajectory, target, never);
        epochs.push_back(static_cast<double>(e));
        reached += e < never;
        at512.push_back(FractionAt(trajectory, 512));
        at1024.push_back(FractionAt(trajectory, 1024));
        at2048.push_back(FractionAt(trajectory, 2048));
        to_baseline.push_back(
            static_cast<double>(EpochsTo(trajectory, baseline[seed], never)));
      }
      const auto mean = [](const std::vector<double>& v) {
        double s = 0;
        for (double x : v) s += x;
        return s / static_cast<double>(v.size());
      };
      nlohmann::ordered_json line = {
          {"benchmark", "mo_early_stopping"},
          {"optimizer", "hypertune-" + policy.name},
          {"workers", workers},
          {"seeds", seeds},
          {"eta", eta},
          {"target_hypervolume_fraction", target},
          {"mean_epochs_to_target", mean(epochs)},
          {"median_epochs_to_target", Median(epochs)},
          {"reached_fraction", reached / seeds},
          {"mean_hv_at_512", mean(at512)},
          {"mean_hv_at_1024", mean(at1024)},
          {"mean_hv_at_2048", mean(at2048)},
          {"mean_epochs_to_asha_first_hv", mean(to_baseline)},
          {"epochs_to_target", epochs},
          {"epochs_to_asha_first_hv", to_baseline}};
      std::cout << line.dump() << std::endl;
      std::fprintf(stderr,
                   "%-18s %7d %12.1f %10.1f %8.2f %8.3f %8.3f %8.3f %14.1f\n",
                   policy.name.c_str(), workers, mean(epochs), Median(epochs),
                   reached / seeds, mean(at512), mean(at1024), mean(at2048),
                   mean(to_baseline));
    }
  }
  return 0;
}

}  // namespace hypertune::bench
