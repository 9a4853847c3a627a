// hypertune-bench: the benchmark driver (BENCHMARKS.md).
//
//   hypertune-bench regret [--functions branin2,hartmann6] [--trials 100]
//                          [--seeds 20] [--first-seed 0] [--parallel 1]
//                          [--algorithm A]
//   hypertune-bench latency [--dim 5] [--history 1000] [--algorithm A]
//   hypertune-bench service [--workers 16] [--trials 800] [--reports 3]
//                           [--algorithm RANDOM] [--durability normal|full]
//                           [--hypertuned PATH]
//   hypertune-bench failover [--kills 20] [--workers 16] [--trials 600]
//   hypertune-bench soak [--minutes 10] [--workers 64] [--reports 5]
//                        [--report-ms 200] [--algorithm RANDOM] [--seed 1]
//   hypertune-bench early-stopping [--configs 400] [--seeds 20]
//                        [--workers 4] [--max-resource 81]
//                        [--min-resource 1] [--eta 3] [--out suite.json]
//   hypertune-bench multi-fidelity [--table PATH|synthetic] [--seeds 20]
//                        [--workers 1,4] [--policies asha-random,asha-gp,
//                        model,hyperband-gp,hyperband-model] [--eta 2]
//                        [--tolerance 0.01]
//                        [--out table.json]
//   hypertune-bench multi-objective [--problems zdt1,zdt2,zdt3,dtlz2]
//                        [--trials 100] [--seeds 10] [--parallel 1]
//                        [--algorithm A]
//   hypertune-bench constrained [--problems gardner,gramacy,branin_disc]
//                        [--trials 50] [--seeds 10] [--parallel 1]
//                        [--algorithm A]
//   hypertune-bench metrics-latency [--dim 10] [--history 500]
//                        [--objectives 2] [--constraints 1] [--algorithm A]
//   hypertune-bench conditional [--functions jenatton,training]
//                        [--trials 100] [--seeds 20] [--algorithm A]
//                        [--flatten]
//   hypertune-bench conditional-latency [--history 1000] [--algorithm A]
//                        [--flatten]
//   hypertune-bench cost [--functions F1,F2,...] [--trials 50] [--seeds 20]
//   hypertune-bench transfer [--functions F1,F2,...] [--trials 25]
//                        [--prior-trials 50] [--seeds 20]
//
// Prints one JSON object per line in the schema of shared/peers/
// optuna_peer.py. Usage errors: a message on stderr and exit status 2;
// failures while running: exit status 1.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "benchmarks/mo_early_stopping.h"
#include "benchmarks/service_load.h"
#include "optimizer/early_stopping.h"
#include "optimizer/suggester.h"
#include "service/server/background_pool.h"
#include "testing/chaos.h"
#include "testing/conditional_problems.h"
#include "testing/curve_table.h"
#include "testing/learning_curves.h"
#include "testing/mo_functions.h"
#include "testing/multi_objective.h"
#include "testing/postgres_server.h"
#include "testing/regret.h"
#include "testing/test_functions.h"

namespace hypertune::bench {
namespace {

using optimizer::Algorithm;

constexpr Algorithm kDefaultAlgorithm = Algorithm::kGpBandit;

constexpr int kUsageError = 2;

constexpr char kUsage[] =
    "usage:\n"
    "  hypertune-bench regret [--functions F1,F2,...] [--trials N] "
    "[--seeds N]\n"
    "                         [--first-seed S] [--parallel P] [--algorithm A]\n"
    "  hypertune-bench latency [--dim D] [--history N] [--algorithm A]\n"
    "                          [--fit-threads T]\n"
    "  hypertune-bench service [--workers W] [--trials T] [--reports R]\n"
    "                          [--algorithm A] [--durability normal|full]\n"
    "                          [--hypertuned PATH] [--store sqlite|postgres]\n"
    "  hypertune-bench failover [--kills K] [--workers W] [--trials N]\n"
    "  hypertune-bench soak [--minutes M] [--workers W] [--reports R]\n"
    "                       [--report-ms MS] [--algorithm A] [--seed S]\n"
    "  hypertune-bench early-stopping [--configs N] [--seeds S] [--workers W]\n"
    "                       [--max-resource R] [--min-resource R] [--eta E]\n"
    "                       [--out SUITE.json]\n"
    "  hypertune-bench multi-fidelity [--table PATH|synthetic] [--seeds S]\n"
    "                       [--workers 1,4] [--policies P1,P2,...] [--eta E]\n"
    "                       [--min-resource R] [--configs N] [--tolerance F]\n"
    "                       [--out TABLE.json]\n"
    "  hypertune-bench mo-early-stopping [--table PATH] [--seeds S]\n"
    "                       [--workers 1,4] [--eta E] [--target F]\n"
    "                       [--out SUITE.json]\n"
    "  hypertune-bench multi-objective [--problems P1,P2,...] [--trials N]\n"
    "                       [--seeds N] [--parallel P] [--algorithm A]\n"
    "  hypertune-bench constrained [--problems P1,P2,...] [--trials N]\n"
    "                       [--seeds N] [--parallel P] [--algorithm A]\n"
    "  hypertune-bench metrics-latency [--dim D] [--history N]\n"
    "                       [--objectives K] [--constraints C] [--algorithm "
    "A]\n"
    "  hypertune-bench conditional [--functions jenatton,training] [--trials "
    "N]\n"
    "                       [--seeds N] [--algorithm A] [--flatten]\n"
    "  hypertune-bench conditional-latency [--history N] [--algorithm A]\n"
    "                       [--flatten]\n"
    "  hypertune-bench cost [--functions F1,F2,...] [--trials N] [--seeds N]\n"
    "  hypertune-bench transfer [--functions F1,F2,...] [--trials N]\n"
    "                       [--prior-trials N] [--seeds N]\n"
    "algorithms: GP_BANDIT (default), TPE, RANDOM, QUASI_RANDOM\n";

// `--name value` or `--name=value` flags, checked against the names a
// subcommand knows.
class Flags {
 public:
  static absl::StatusOr<Flags> Parse(const std::vector<std::string>& args,
                                     const std::set<std::string>& known) {
    Flags flags;
    for (size_t i = 0; i < args.size(); ++i) {
      std::string_view arg = args[i];
      if (arg.substr(0, 2) != "--") {
        return absl::InvalidArgumentError(
            absl::StrCat("unexpected argument \"", args[i], "\""));
      }
      arg.remove_prefix(2);
      std::string name, value;
      if (const size_t eq = arg.find('='); eq != std::string_view::npos) {
        name = std::string(arg.substr(0, eq));
        value = std::string(arg.substr(eq + 1));
      } else {
        name = std::string(arg);
        if (i + 1 >= args.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("flag --", name, " needs a value"));
        }
        value = args[++i];
      }
      if (!known.contains(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown flag --", name, " (known: --",
                         absl::StrJoin(known, ", --"), ")"));
      }
      flags.values_[name] = value;
    }
    return flags;
  }

  absl::StatusOr<int> Int(const std::string& name, int fallback,
                          int min_value) const {
    const auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    int value;
    if (!absl::SimpleAtoi(it->second, &value) || value < min_value) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": expected an integer >= ", min_value,
                       ", got \"", it->second, "\""));
    }
    return value;
  }

  absl::StatusOr<double> Double(const std::string& name, double fallback,
                                double min_value) const {
    const auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    double value;
    if (!absl::SimpleAtod(it->second, &value) || !(value >= min_value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": expected a number >= ", min_value,
                       ", got \"", it->second, "\""));
    }
    return value;
  }

  std::string String(const std::string& name,
                     const std::string& fallback) const {
    const auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }

  absl::StatusOr<Algorithm> Algo() const {
    const auto it = values_.find("algorithm");
    if (it == values_.end()) return kDefaultAlgorithm;
    absl::StatusOr<Algorithm> a = optimizer::ParseAlgorithm(it->second);
    if (!a.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", a.status().message()));
    }
    return a;
  }

 private:
  std::map<std::string, std::string> values_;
};

int UsageError(const absl::Status& status) {
  std::cerr << "hypertune-bench: " << status.message() << "\n" << kUsage;
  return kUsageError;
}

int Failure(const absl::Status& status) {
  std::cerr << "hypertune-bench: " << status << "\n";
  return 1;
}

// --functions (default: the public suite).
absl::StatusOr<std::vector<BenchmarkFunction>> Functions(const Flags& flags) {
  std::vector<std::string> all_names;
  for (const BenchmarkFunction& f : PublicSuite()) all_names.push_back(f.name);
  const std::string names =
      flags.String("functions", absl::StrJoin(all_names, ","));
  std::vector<BenchmarkFunction> functions;
  const std::vector<std::string> parts = absl::StrSplit(names, ',');
  for (const std::string& name : parts) {
    absl::StatusOr<BenchmarkFunction> f = FindFunction(name);
    if (!f.ok()) return f.status();
    functions.push_back(*std::move(f));
  }
  return functions;
}

// The median; infinite when an infinite value decides it.
double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : values[n / 2 - 1] / 2 + values[n / 2] / 2;
}

int Regret(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags = Flags::Parse(
      args,
      {"functions", "trials", "seeds", "first-seed", "parallel", "algorithm"});
  if (!flags.ok()) return UsageError(flags.status());
  const absl::StatusOr<std::vector<BenchmarkFunction>> functions =
      Functions(*flags);
  if (!functions.ok()) return UsageError(functions.status());
  const absl::StatusOr<int> trials = flags->Int("trials", 100, 1);
  const absl::StatusOr<int> seeds = flags->Int("seeds", 20, 1);
  const absl::StatusOr<int> first_seed = flags->Int("first-seed", 0, 0);
  const absl::StatusOr<int> parallel = flags->Int("parallel", 1, 1);
  const absl::StatusOr<Algorithm> algorithm = flags->Algo();
  for (const absl::Status& s :
       {trials.status(), seeds.status(), first_seed.status(), parallel.status(),
        algorithm.status()}) {
    if (!s.ok()) return UsageError(s);
  }

  const std::string label = OptimizerLabel(*algorithm, *parallel);
  for (const BenchmarkFunction& f : *functions) {
    for (int seed = *first_seed; seed < *first_seed + *seeds; ++seed) {
      const RegretOptions options{.algorithm = *algorithm,
                                  .trials = *trials,
                                  .parallel = *parallel,
                                  .seed = static_cast<uint64_t>(seed)};
      absl::StatusOr<RegretRun> run = RunRegret(f, options);
      if (!run.ok()) return Failure(run.status());
      nlohmann::ordered_json line = {
          {"optimizer", label},     {"function", f.name},
          {"dim", f.dim()},         {"seed", seed},
          {"trials", *trials},      {"best_regret", run->best_regret},
          {"seconds", run->seconds}};
      std::cout << line.dump() << std::endl;
    }
  }
  return 0;
}

// The cost surface of the cost suite: 10^(u0 + u1), u the unit-cube
// coordinates of the first two dimensions: a 100-fold range, as batch size
// and width give a training run.
double CostSurface(const BenchmarkFunction& f, const Eigen::VectorXd& x) {
  double exponent = 0;
  for (int j = 0; j < std::min(2, f.dim()); ++j) {
    const auto [lo, hi] = f.bounds[static_cast<size_t>(j)];
    exponent += (x[j] - lo) / (hi - lo);
  }
  return std::pow(10.0, exponent);
}

// Cost-aware against cost-blind GP_BANDIT, same seeds and the same money:
// per seed, the cost-blind run's `trials` trials cost C, and the
// cost-aware run gets C as its budget (its horizon; up to 4 x trials
// trials). The runs as JSON lines, then per function on stderr the median
// over seeds of the cost at which the cost-aware run first reaches the
// regret the cost-blind run ends with, as a fraction of C (inf: never).
int CostRuns(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags =
      Flags::Parse(args, {"functions", "trials", "seeds"});
  if (!flags.ok()) return UsageError(flags.status());
  const absl::StatusOr<std::vector<BenchmarkFunction>> functions =
      Functions(*flags);
  if (!functions.ok()) return UsageError(functions.status());
  const absl::StatusOr<int> trials = flags->Int("trials", 50, 1);
  const absl::StatusOr<int> seeds = flags->Int("seeds", 20, 1);
  for (const absl::Status& s : {trials.status(), seeds.status()}) {
    if (!s.ok()) return UsageError(s);
  }
  std::cerr << "function      blind regret  blind cost  aware regret  "
               "aware cost  cost to reach blind's regret (median ratio)\n";
  for (const BenchmarkFunction& f : *functions) {
    std::vector<double> ratios, blind_regret, blind_cost, aware_regret,
        aware_cost;
    for (int seed = 0; seed < *seeds; ++seed) {
      RegretRun runs[2];
      for (const bool aware : {false, true}) {
        const RegretOptions options{
            .trials = aware ? 4 * *trials : *trials,
            .seed = static_cast<uint64_t>(seed),
            .cost =
                [&f](const Eigen::VectorXd& x) { return CostSurface(f, x); },
            .cost_aware = aware,
            .cost_budget = aware ? runs[0].cumulative_cost.back() : 0};
        absl::StatusOr<RegretRun> run = RunRegret(f, options);
        if (!run.ok()) return Failure(run.status());
        nlohmann::ordered_json line = {
            {"optimizer",
             aware ? "hypertune-gp_bandit-cost_aware" : "hypertune-gp_bandit"},
            {"function", f.name},
            {"dim", f.dim()},
            {"seed", seed},
            {"trials", run->best_regret.size()},
            {"best_regret", run->best_regret},
            {"cumulative_cost", run->cumulative_cost},
            {"seconds", run->seconds}};
        std::cout << line.dump() << std::endl;
        runs[aware] = *std::move(run);
      }
      const RegretRun& blind = runs[0];
      const RegretRun& aware = runs[1];
      double reach = std::numeric_limits<double>::infinity();
      for (size_t k = 0; k < aware.best_regret.size(); ++k) {
        if (aware.best_regret[k] <= blind.best_regret.back()) {
          reach = aware.cumulative_cost[k];
          break;
        }
      }
      ratios.push_back(reach / blind.cumulative_cost.back());
      blind_regret.push_back(blind.best_regret.back());
      blind_cost.push_back(blind.cumulative_cost.back());
      aware_regret.push_back(aware.best_regret.back());
      aware_cost.push_back(aware.cumulative_cost.back());
    }
    std::cerr << absl::StrFormat(
        "%-12s  %12.4g  %10.4g  %12.4g  %10.4g  %.3f\n", f.name,
        Median(blind_regret), Median(blind_cost), Median(aware_regret),
        Median(aware_cost), Median(ratios));
  }
  return 0;
}

// Transfer: per function and seed, an earlier study of prior-trials
// GP_BANDIT trials on a related task (RelatedTask), then the study itself
// without a prior, with it, and with the prior's values shuffled among its
// trials (unrelated). The runs as JSON lines; per function on stderr the
// median regrets at 10 trials and at the end.
int TransferRuns(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags =
      Flags::Parse(args, {"functions", "trials", "prior-trials", "seeds"});
  if (!flags.ok()) return UsageError(flags.status());
  const absl::StatusOr<std::vector<BenchmarkFunction>> functions =
      Functions(*flags);
  if (!functions.ok()) return UsageError(functions.status());
  const absl::StatusOr<int> trials = flags->Int("trials", 25, 10);
  const absl::StatusOr<int> prior_trials = flags->Int("prior-trials", 50, 1);
  const absl::StatusOr<int> seeds = flags->Int("seeds", 20, 1);
  for (const absl::Status& s :
       {trials.status(), prior_trials.status(), seeds.status()}) {
    if (!s.ok()) return UsageError(s);
  }
  const char* const kinds[] = {"none", "related", "shuffled"};
  std::cerr << absl::StrFormat(
      "function      regret@10: none  related  shuffled   regret@%d: none  "
      "related  shuffled   related/none@10\n",
      *trials);
  for (const BenchmarkFunction& f : *functions) {
    std::vector<double> at10[3], at_end[3];
    for (int seed = 0; seed < *seeds; ++seed) {
      const uint64_t prior_seed = 1000 + static_cast<uint64_t>(seed);
      absl::StatusOr<RegretRun> earlier =
          RunRegret(RelatedTask(f, prior_seed),
                    {.trials = *prior_trials, .seed = prior_seed});
      if (!earlier.ok()) return Failure(earlier.status());
      const std::vector<bool> all_shared(static_cast<size_t>(f.dim()), true);
      optimizer::PriorStudy related{earlier->trials, all_shared};
      optimizer::PriorStudy shuffled = related;
      std::vector<double> values;
      for (const optimizer::Observation& o : shuffled.trials) {
        values.push_back(o.values[0]);
      }
      std::shuffle(values.begin(), values.end(), std::mt19937_64(prior_seed));
      for (size_t i = 0; i < values.size(); ++i) {
        shuffled.trials[i].values = {values[i]};
      }
      const std::vector<optimizer::PriorStudy> priors[3] = {
          {}, {related}, {shuffled}};
      for (int k = 0; k < 3; ++k) {
        absl::StatusOr<RegretRun> run =
            RunRegret(f, {.trials = *trials,
                          .seed = static_cast<uint64_t>(seed),
                          .priors = priors[k]});
        if (!run.ok()) return Failure(run.status());
        nlohmann::ordered_json line = {
            {"optimizer", absl::StrCat("hypertune-gp_bandit-prior_", kinds[k])},
            {"function", f.name},
            {"dim", f.dim()},
            {"seed", seed},
            {"trials", *trials},
            {"prior_trials", *prior_trials},
            {"best_regret", run->best_regret},
            {"seconds", run->seconds}};
        std::cout << line.dump() << std::endl;
        at10[k].push_back(run->best_regret[9]);
        at_end[k].push_back(run->best_regret.back());
      }
    }
    std::cerr << absl::StrFormat(
        "%-12s  %15.4g  %7.4g  %8.4g   %15.4g  %7.4g  %8.4g   %.3f\n", f.name,
        Median(at10[0]), Median(at10[1]), Median(at10[2]), Median(at_end[0]),
        Median(at_end[1]), Median(at_end[2]),
        Median(at10[1]) / std::max(Median(at10[0]), 1e-12));
  }
  return 0;
}

int Latency(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags =
      Flags::Parse(args, {"dim", "history", "algorithm", "fit-threads"});
  if (!flags.ok()) return UsageError(flags.status());
  const absl::StatusOr<int> dim = flags->Int("dim", 5, 1);
  const absl::StatusOr<int> history = flags->Int("history", 1000, 0);
  const absl::StatusOr<Algorithm> algorithm = flags->Algo();
  // As hypertuned's --fit-threads: 0 fits on the request path.
  const absl::StatusOr<int> fit_threads = flags->Int("fit-threads", 1, 0);
  for (const absl::Status& s : {dim.status(), history.status(),
                                algorithm.status(), fit_threads.status()}) {
    if (!s.ok()) return UsageError(s);
  }
  std::optional<service::BackgroundPool> fits;
  const service::StopFlag stop = std::make_shared<std::atomic<bool>>(false);
  if (*fit_threads > 0) fits.emplace(*fit_threads);
  absl::StatusOr<LatencyResult> result =
      MeasureLatency(*algorithm, *dim, *history, 20,
                     fits ? fits->RunnerFor(stop) : optimizer::FitRunner());
  if (!result.ok()) return Failure(result.status());
  nlohmann::ordered_json line = {{"optimizer", OptimizerLabel(*algorithm, 1)},
                                 {"dim", *dim},
                                 {"history", *history},
                                 {"fit_threads", *fit_threads},
                                 {"median_ms", result->median_ms},
                                 {"p95_ms", result->p95_ms},
                                 {"max_ms", result->max_ms}};
  std::cout << line.dump() << std::endl;
  return 0;
}

// The programs built next to this one.
std::filesystem::path BinDir() {
  std::error_code ignored;
  return std::filesystem::read_symlink("/proc/self/exe", ignored).parent_path();
}

// A chaos experiment's programs (next to this one) and a fresh temporary
// directory named after `name`, or the error.
absl::Status PrepareChaos(const std::string& name, ChaosOptions& options) {
  options.hypertuned = (BinDir() / "hypertuned").string();
  options.worker = (BinDir() / "hypertune-chaos-worker").string();
  std::string dir = (std::filesystem::temp_directory_path() /
                     absl::StrCat("hypertune-", name, "-XXXXXX"))
                        .string();
  if (mkdtemp(dir.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", dir));
  }
  options.dir = dir;
  return absl::OkStatus();
}

// Prints `line`; with violations, prints them (keeping the experiment's
// files) and returns 1, else removes the files and returns 0.
int ReportChaos(const std::string& name, const ChaosOptions& options,
                const ChaosResult& result, const nlohmann::ordered_json& line) {
  std::cout << line.dump() << std::endl;
  if (!result.violations.empty()) {
    for (const std::string& v : result.violations) {
      std::cerr << name << ": violation: " << v << "\n";
    }
    std::cerr << name << ": files kept in " << options.dir << "\n";
    return 1;
  }
  std::error_code ignored;
  std::filesystem::remove_all(options.dir, ignored);
  return 0;
}

int Service(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags =
      Flags::Parse(args, {"workers", "trials", "reports", "algorithm",
                          "durability", "hypertuned", "store"});
  if (!flags.ok()) return UsageError(flags.status());
  const absl::StatusOr<int> workers = flags->Int("workers", 16, 1);
  const absl::StatusOr<int> trials = flags->Int("trials", 800, 1);
  const absl::StatusOr<int> reports = flags->Int("reports", 3, 0);
  const absl::StatusOr<Algorithm> algorithm = flags->Algo();
  for (const absl::Status& s : {workers.status(), trials.status(),
                                reports.status(), algorithm.status()}) {
    if (!s.ok()) return UsageError(s);
  }
  const std::string durability = flags->String("durability", "normal");
  if (durability != "normal" && durability != "full") {
    return UsageError(absl::InvalidArgumentError(absl::StrCat(
        "--durability: normal or full, got \"", durability, "\"")));
  }
  const std::string store = flags->String("store", "sqlite");
  if (store != "sqlite" && store != "postgres") {
    return UsageError(absl::InvalidArgumentError(
        absl::StrCat("--store: sqlite or postgres, got \"", store, "\"")));
  }
  ServiceLoadOptions options;
  // postgres: a throwaway PostgreSQL server (testing/postgres_server.h).
  std::unique_ptr<test::PostgresServer> postgres;
  if (store == "postgres") {
    absl::StatusOr<std::unique_ptr<test::PostgresServer>> started =
        test::PostgresServer::Start();
    if (!started.ok()) return Failure(started.status());
    postgres = *std::move(started);
    absl::StatusOr<std::string> url = postgres->CreateDatabase("load");
    if (!url.ok()) return Failure(url.status());
    options.db = *url;
  }
  options.workers = *workers;
  options.trials = *trials;
  options.reports = *reports;
  // The service benchmark isolates the service with RANDOM by default.
  options.algorithm = flags->String("algorithm", "RANDOM");
  options.durable_full = durability == "full";
  // By default the hypertuned built next to this program.
  options.hypertuned =
      flags->String("hypertuned", (BinDir() / "hypertuned").string());
  absl::StatusOr<ServiceLoadResult> result = RunServiceLoad(options);
  if (!result.ok()) return Failure(result.status());
  nlohmann::ordered_json line = {
      {"optimizer", absl::StrCat("hypertune-", options.algorithm)},
      {"store", store},
      {"workers", options.workers},
      {"trials", result->trials},
      {"seconds", result->seconds},
      {"trials_per_s", result->trials / result->seconds},
      {"rpc_p50_ms", result->rpc_p50_ms},
      {"rpc_p99_ms", result->rpc_p99_ms},
      {"errors", result->errors}};
  std::cout << line.dump() << std::endl;
  return 0;
}

// The chaos soak (testing/chaos.h): hypertuned SIGKILLed every 20-40 s
// (down 0.5 s each time) and a worker every 3-8 s for --minutes, then every
// promise checked. Prints the figures as one JSON line; broken promises go to
// stderr, exit status 1.
int Soak(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags = Flags::Parse(
      args,
      {"minutes", "workers", "reports", "report-ms", "algorithm", "seed"});
  if (!flags.ok()) return UsageError(flags.status());
  const absl::StatusOr<int> minutes = flags->Int("minutes", 10, 1);
  const absl::StatusOr<int> workers = flags->Int("workers", 64, 1);
  const absl::StatusOr<int> reports = flags->Int("reports", 5, 0);
  const absl::StatusOr<int> report_ms = flags->Int("report-ms", 200, 0);
  const absl::StatusOr<int> seed = flags->Int("seed", 1, 0);
  for (const absl::Status& s :
       {minutes.status(), workers.status(), reports.status(),
        report_ms.status(), seed.status()}) {
    if (!s.ok()) return UsageError(s);
  }
  ChaosOptions options;
  // RANDOM by default, so that the soak stresses the service, not the model.
  options.algorithm = flags->String("algorithm", "RANDOM");
  if (absl::Status s = optimizer::ParseAlgorithm(options.algorithm).status();
      !s.ok()) {
    return UsageError(
        absl::InvalidArgumentError(absl::StrCat("--", s.message())));
  }
  if (absl::Status s = PrepareChaos("soak", options); !s.ok()) {
    return Failure(s);
  }
  options.workers = *workers;
  options.trials = 0;  // Unlimited: the soak ends by time.
  options.reports = *reports;
  options.report_ms = *report_ms;
  options.server_kill_min = std::chrono::seconds(20);
  options.server_kill_max = std::chrono::seconds(40);
  options.server_downtime = std::chrono::milliseconds(500);
  options.worker_kill_min = std::chrono::seconds(3);
  options.worker_kill_max = std::chrono::seconds(8);
  options.duration = std::chrono::minutes(*minutes);
  options.seed = static_cast<uint64_t>(*seed);
  options.log = &std::cerr;
  absl::StatusOr<ChaosResult> result = RunChaos(options);
  if (!result.ok()) return Failure(result.status());
  nlohmann::ordered_json line = {
      {"benchmark", "soak"},
      {"optimizer", absl::StrCat("hypertune-", options.algorithm)},
      {"minutes", *minutes},
      {"workers", options.workers},
      {"seconds", result->seconds},
      {"trials", result->trials},
      {"acknowledged", result->acknowledged},
      {"completed", result->completed},
      {"requeued", result->requeued},
      {"failed", result->failed},
      {"server_kills", result->server_kills},
      {"worker_kills", result->worker_kills},
      {"unexpected_errors", result->unexpected_errors},
      {"violations", result->violations.size()}};
  return ReportChaos("soak", options, *result, line);
}

// Failover on PostgreSQL (testing/chaos.h with db_url): a leader and its
// standby on a throwaway PostgreSQL server (testing/postgres_server.h), the
// leader SIGKILLed --kills times under --workers workers; prints the
// takeover times (kill to the standby answering) and the broken promises
// (acknowledged results lost, trials completed twice: chaos.h's checks) as
// one JSON line.
int Failover(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags =
      Flags::Parse(args, {"kills", "workers", "trials", "seed"});
  if (!flags.ok()) return UsageError(flags.status());
  const absl::StatusOr<int> kills = flags->Int("kills", 20, 1);
  const absl::StatusOr<int> workers = flags->Int("workers", 16, 1);
  const absl::StatusOr<int> trials = flags->Int("trials", 600, 1);
  const absl::StatusOr<int> seed = flags->Int("seed", 1, 0);
  for (const absl::Status& s :
       {kills.status(), workers.status(), trials.status(), seed.status()}) {
    if (!s.ok()) return UsageError(s);
  }
  absl::StatusOr<std::unique_ptr<test::PostgresServer>> postgres =
      test::PostgresServer::Start();
  if (!postgres.ok()) return Failure(postgres.status());
  absl::StatusOr<std::string> url = (*postgres)->CreateDatabase("failover");
  if (!url.ok()) return Failure(url.status());
  ChaosOptions options;
  if (absl::Status s = PrepareChaos("failover", options); !s.ok()) {
    return Failure(s);
  }
  options.db_url = *url;
  options.workers = *workers;
  options.trials = *trials;
  options.reports = 3;
  options.report_ms = 30;
  for (int k = 1; k <= *kills; ++k) {
    options.server_kills_at.push_back(0.9 * k / *kills);
  }
  options.server_downtime = std::chrono::milliseconds(200);
  options.duration = std::chrono::minutes(10);
  options.seed = static_cast<uint64_t>(*seed);
  options.log = &std::cerr;
  absl::StatusOr<ChaosResult> result = RunChaos(options);
  if (!result.ok()) return Failure(result.status());
  std::vector<double> takeover = result->takeover_ms;
  std::sort(takeover.begin(), takeover.end());
  nlohmann::ordered_json line = {
      {"benchmark", "failover"},
      {"workers", options.workers},
      {"seconds", result->seconds},
      {"trials", result->trials},
      {"acknowledged", result->acknowledged},
      {"completed", result->completed},
      {"requeued", result->requeued},
      {"leader_kills", result->server_kills},
      {"takeover_ms_p50", takeover.empty() ? 0 : takeover[takeover.size() / 2]},
      {"takeover_ms_max", takeover.empty() ? 0 : takeover.back()},
      {"unexpected_errors", result->unexpected_errors},
      {"violations", result->violations.size()}};
  return ReportChaos("failover", options, *result, line);
}

// The early-stopping benchmark (testing/learning_curves.h): every rule over
// the same synthetic learning curves, epochs until the study's best is within
// 1% of the pool's full-budget optimum. One JSON line per rule on stdout, a
// table on stderr; --out writes the curves for peers_optuna_pruners.py.
int EarlyStopping(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags =
      Flags::Parse(args, {"configs", "seeds", "workers", "max-resource",
                          "min-resource", "eta", "out"});
  if (!flags.ok()) return UsageError(flags.status());
  const absl::StatusOr<int> configs = flags->Int("configs", 400, 1);
  const absl::StatusOr<int> seeds = flags->Int("seeds", 20, 1);
  const absl::StatusOr<int> workers = flags->Int("workers", 4, 1);
  const absl::StatusOr<int> max_resource = flags->Int("max-resource", 81, 1);
  const absl::StatusOr<int> min_resource = flags->Int("min-resource", 1, 1);
  for (const absl::Status& s :
       {configs.status(), seeds.status(), workers.status(),
        max_resource.status(), min_resource.status()}) {
    if (!s.ok()) return UsageError(s);
  }
  const absl::StatusOr<double> eta = flags->Double("eta", 3, 2);
  if (!eta.ok()) return UsageError(eta.status());
  constexpr double kTolerance = 0.01;
  std::vector<CurveSuite> suites;
  for (int seed = 0; seed < *seeds; ++seed) {
    suites.push_back(MakeCurveSuite(*configs, *max_resource, seed));
  }
  if (const std::string out = flags->String("out", ""); !out.empty()) {
    if (absl::Status s = WriteSuitesJson(suites, kTolerance, out); !s.ok()) {
      return Failure(s);
    }
  }

  using Rule = optimizer::EarlyStoppingConfig::Rule;
  auto make = [&](std::string label, Rule rule, bool pause) {
    StudySimOptions o;
    o.label = std::move(label);
    o.workers = *workers;
    o.tolerance = kTolerance;
    o.config.rule = rule;
    o.config.maximize = true;
    o.config.min_resource = *min_resource;
    o.config.max_resource = *max_resource;
    o.config.reduction_factor = *eta;
    o.config.pause_at_rungs = pause;
    return o;
  };
  std::vector<StudySimOptions> runs = {
      make("none", Rule::kNone, false),
      make("median", Rule::kMedian, false),
      make("percentile25", Rule::kPercentile, false),
      make("asha", Rule::kAsha, false),
      make("asha-pause", Rule::kAsha, true),
      make("hyperband", Rule::kHyperband, false),
      make("hyperband-pause", Rule::kHyperband, true)};
  // min_trials stays 0, the rules' defaults (5 finished trials for median
  // and percentile, as Optuna's MedianPruner; 1 for ASHA, as its
  // SuccessiveHalvingPruner); percentile keeps the top quarter.
  for (StudySimOptions& o : runs) o.config.percentile = 25;

  struct Row {
    std::string label;
    double mean_epochs, median_epochs, reached, gap, trials;
  };
  std::vector<Row> rows;
  for (const StudySimOptions& o : runs) {
    std::vector<double> epochs;
    double reached = 0, gap = 0, trials = 0, resumes = 0;
    for (const CurveSuite& suite : suites) {
      absl::StatusOr<StudySimResult> r = SimulateStudy(suite, o);
      if (!r.ok()) return UsageError(r.status());
      epochs.push_back(static_cast<double>(r->epochs_to_target));
      reached += r->reached;
      gap += (suite.optimum - r->final_quality) / std::abs(suite.optimum);
      trials += r->trials;
      resumes += r->paused_resumes;
    }
    const double n = static_cast<double>(suites.size());
    double sum = 0;
    for (double e : epochs) sum += e;
    const Row row{.label = o.label,
                  .mean_epochs = sum / n,
                  .median_epochs = Percentile(epochs, 50),
                  .reached = reached / n,
                  .gap = gap / n,
                  .trials = trials / n};
    nlohmann::ordered_json line = {
        {"benchmark", "early_stopping"},
        {"optimizer", absl::StrCat("hypertune-", o.label)},
        {"workers", o.workers},
        {"configs", *configs},
        {"seeds", *seeds},
        {"max_resource", *max_resource},
        {"min_resource", *min_resource},
        {"eta", *eta},
        {"mean_epochs_to_target", row.mean_epochs},
        {"median_epochs_to_target", row.median_epochs},
        {"reached_fraction", row.reached},
        {"mean_final_gap", row.gap},
        {"mean_trials", row.trials},
        {"mean_resumes", resumes / n},
        {"epochs_to_target", epochs}};
    std::cout << line.dump() << std::endl;
    rows.push_back(row);
  }
  const double none = rows.front().mean_epochs;
  std::fprintf(stderr, "%-22s %12s %12s %8s %10s %8s %9s\n", "rule",
               "mean_epochs", "median", "reached", "final_gap", "trials",
               "vs_none");
  for (const Row& r : rows) {
    std::fprintf(stderr, "%-22s %12.1f %12.1f %8.2f %9.3f%% %8.1f %8.2fx\n",
                 r.label.c_str(), r.mean_epochs, r.median_epochs, r.reached,
                 100 * r.gap, r.trials, none / r.mean_epochs);
  }
  return 0;
}

// The multi-fidelity benchmark (testing/curve_table.h): ASHA in pause mode
// with random configurations, with GP_BANDIT's (BOHB-like), and with the
// learning-curve model's promotions (Hyperband's brackets instead of ASHA
// for the last two, hyperband-*), over a table of real learning curves
// (benchmarks/learning_curves/) or synthetic ones; epochs and
// device-seconds until the study's best full-budget trial is within 1% of
// the table's best. One JSON line per policy and worker count on stdout, a
// table on stderr; --out writes the table for peers_optuna_table.py.
int MultiFidelity(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags = Flags::Parse(
      args, {"table", "seeds", "workers", "policies", "eta", "min-resource",
             "configs", "max-resource", "out", "tolerance"});
  if (!flags.ok()) return UsageError(flags.status());
  const absl::StatusOr<int> seeds = flags->Int("seeds", 20, 1);
  const absl::StatusOr<int> min_resource = flags->Int("min-resource", 1, 1);
  const absl::StatusOr<int> configs = flags->Int("configs", 256, 1);
  const absl::StatusOr<int> max_resource = flags->Int("max-resource", 27, 1);
  for (const absl::Status& s : {seeds.status(), min_resource.status(),
                                configs.status(), max_resource.status()}) {
    if (!s.ok()) return UsageError(s);
  }
  const absl::StatusOr<double> eta = flags->Double("eta", 2, 2);
  const absl::StatusOr<double> tolerance = flags->Double("tolerance", 0.01, 0);
  for (const absl::Status& s : {eta.status(), tolerance.status()}) {
    if (!s.ok()) return UsageError(s);
  }
  std::vector<int> worker_counts;
  for (const std::string& w : std::vector<std::string>(
           absl::StrSplit(flags->String("workers", "1,4"), ','))) {
    int n = 0;
    if (!absl::SimpleAtoi(w, &n) || n < 1) {
      return UsageError(absl::InvalidArgumentError(absl::StrCat(
          "--workers: expected positive integers, got \"", w, "\"")));
    }
    worker_counts.push_back(n);
  }
  const std::string table_flag =
      flags->String("table", "benchmarks/learning_curves/fashion_mnist.jsonl");
  const bool synthetic = table_flag == "synthetic";
  std::vector<CurveTable> tables;
  if (synthetic) {
    for (int seed = 0; seed < *seeds; ++seed) {
      tables.push_back(MakeSyntheticCurveTable(*configs, *max_resource, seed));
    }
  } else {
    absl::StatusOr<CurveTable> table = LoadCurveTable(table_flag);
    if (!table.ok()) return Failure(table.status());
    tables.push_back(*std::move(table));
  }
  if (const std::string out = flags->String("out", ""); !out.empty()) {
    if (absl::Status s = WriteCurveTablesJson(tables, *tolerance, out);
        !s.ok()) {
      return Failure(s);
    }
  }

  using Rule = optimizer::EarlyStoppingConfig::Rule;
  struct Policy {
    std::string name;
    optimizer::Algorithm algorithm;
    bool model;
    Rule rule = Rule::kAsha;
  };
  const std::vector<Policy> known = {
      {"asha-random", optimizer::Algorithm::kRandom, false},
      {"asha-gp", optimizer::Algorithm::kGpBandit, false},
      {"model", optimizer::Algorithm::kGpBandit, true},
      {"hyperband-gp", optimizer::Algorithm::kGpBandit, false,
       Rule::kHyperband},
      {"hyperband-model", optimizer::Algorithm::kGpBandit, true,
       Rule::kHyperband}};
  std::vector<Policy> policies;
  for (const std::string& name : std::vector<std::string>(absl::StrSplit(
           flags->String("policies", "asha-random,asha-gp,model"), ','))) {
    auto it = std::find_if(known.begin(), known.end(),
                           [&](const Policy& p) { return p.name == name; });
    if (it == known.end()) {
      return UsageError(absl::InvalidArgumentError(
          absl::StrCat("--policies: unknown policy \"", name,
                       "\" (known: asha-random, asha-gp, model, hyperband-gp, "
                       "hyperband-model)")));
    }
    policies.push_back(*it);
  }

  std::fprintf(stderr, "%-12s %7s %10s %10s %10s %10s %8s %8s %8s\n", "policy",
               "workers", "epochs_p50", "epochs_avg", "secs_p50", "secs_avg",
               "reached", "trials", "resumes");
  for (int workers : worker_counts) {
    for (const Policy& policy : policies) {
      std::vector<double> epochs, seconds, decision_ms, rung_ms;
      double reached = 0, trials = 0, resumes = 0, continued = 0;
      for (int seed = 0; seed < *seeds; ++seed) {
        const CurveTable& table = tables[synthetic ? seed : 0];
        TableSimOptions o;
        o.algorithm = policy.algorithm;
        o.workers = workers;
        o.tolerance = *tolerance;
        o.seed = static_cast<uint64_t>(seed);
        o.config.rule = policy.rule;
        o.config.maximize = true;
        o.config.min_resource = *min_resource;
        o.config.max_resource = table.max_resource;
        o.config.reduction_factor = *eta;
        o.config.pause_at_rungs = true;
        o.config.promote_by_model = policy.model;
        absl::StatusOr<TableSimResult> r = SimulateTableStudy(table, o);
        if (!r.ok()) return UsageError(r.status());
        decision_ms.insert(decision_ms.end(), r->decision_ms.begin(),
                           r->decision_ms.end());
        rung_ms.insert(rung_ms.end(), r->rung_ms.begin(), r->rung_ms.end());
        epochs.push_back(static_cast<double>(r->epochs));
        seconds.push_back(r->seconds);
        reached += r->reached;
        trials += r->trials;
        resumes += r->resumes;
        continued += r->continued_at_rungs;
      }
      const double n = static_cast<double>(*seeds);
      auto mean = [&](const std::vector<double>& v) {
        double sum = 0;
        for (double e : v) sum += e;
        return sum / n;
      };
      // Only promote_by_model decides at rungs.
      auto rung_percentile = [&](double p) {
        return rung_ms.empty() ? 0.0 : Percentile(rung_ms, p);
      };
      nlohmann::ordered_json line = {
          {"benchmark", "multi_fidelity"},
          {"optimizer", absl::StrCat("hypertune-", policy.name)},
          {"table", synthetic ? "synthetic" : tables.front().name},
          {"workers", workers},
          {"seeds", *seeds},
          {"eta", *eta},
          {"min_resource", *min_resource},
          {"tolerance", *tolerance},
          {"median_epochs_to_target", Percentile(epochs, 50)},
          {"mean_epochs_to_target", mean(epochs)},
          {"median_seconds_to_target", Percentile(seconds, 50)},
          {"mean_seconds_to_target", mean(seconds)},
          {"reached_fraction", reached / n},
          {"mean_trials", trials / n},
          {"mean_resumes", resumes / n},
          {"mean_continued_at_rungs", continued / n},
          {"decision_ms_p50", Percentile(decision_ms, 50)},
          {"decision_ms_p95", Percentile(decision_ms, 95)},
          {"decision_ms_max", Percentile(decision_ms, 100)},
          {"rung_ms_p50", rung_percentile(50)},
          {"rung_ms_p95", rung_percentile(95)},
          {"rung_ms_max", rung_percentile(100)},
          {"epochs_to_target", epochs},
          {"seconds_to_target", seconds}};
      std::cout << line.dump() << std::endl;
      std::fprintf(stderr,
                   "%-12s %7d %10.1f %10.1f %10.1f %10.1f %8.2f %8.1f %8.1f\n",
                   policy.name.c_str(), workers, Percentile(epochs, 50),
                   mean(epochs), Percentile(seconds, 50), mean(seconds),
                   reached / n, trials / n, resumes / n);
    }
  }
  return 0;
}

// The multi-objective and constrained protocols (multi_objective.h): one
// JSON line per run, the hypervolume fraction or the best feasible regret
// after each trial.
int MetricsRuns(const std::vector<std::string>& args, bool constrained) {
  absl::StatusOr<Flags> flags = Flags::Parse(
      args, {"problems", "trials", "seeds", "parallel", "algorithm"});
  if (!flags.ok()) return UsageError(flags.status());
  std::vector<std::string> all_names;
  if (constrained) {
    for (const ConstrainedProblem& p : ConstrainedSuite()) {
      all_names.push_back(p.name);
    }
  } else {
    for (const MultiObjectiveProblem& p : MultiObjectiveSuite()) {
      all_names.push_back(p.name);
    }
  }
  const std::vector<std::string> names = absl::StrSplit(
      flags->String("problems", absl::StrJoin(all_names, ",")), ',');
  const absl::StatusOr<int> trials =
      flags->Int("trials", constrained ? 50 : 100, 1);
  const absl::StatusOr<int> seeds = flags->Int("seeds", 10, 1);
  const absl::StatusOr<int> parallel = flags->Int("parallel", 1, 1);
  const absl::StatusOr<Algorithm> algorithm = flags->Algo();
  for (const absl::Status& s : {trials.status(), seeds.status(),
                                parallel.status(), algorithm.status()}) {
    if (!s.ok()) return UsageError(s);
  }
  const std::string label = OptimizerLabel(*algorithm, *parallel);
  for (const std::string& name : names) {
    absl::StatusOr<ConstrainedProblem> cp = FindConstrainedProblem(name);
    absl::StatusOr<MultiObjectiveProblem> mp = FindMultiObjectiveProblem(name);
    if (constrained ? !cp.ok() : !mp.ok()) {
      return UsageError(constrained ? cp.status() : mp.status());
    }
    for (int seed = 0; seed < *seeds; ++seed) {
      const MetricsRunOptions options{.algorithm = *algorithm,
                                      .trials = *trials,
                                      .parallel = *parallel,
                                      .seed = static_cast<uint64_t>(seed)};
      nlohmann::ordered_json line;
      if (constrained) {
        absl::StatusOr<ConstrainedRun> run = RunConstrained(*cp, options);
        if (!run.ok()) return Failure(run.status());
        line = {{"optimizer", label},     {"function", name},
                {"dim", cp->dim()},       {"seed", seed},
                {"trials", *trials},      {"best_regret", run->best_regret},
                {"seconds", run->seconds}};
      } else {
        absl::StatusOr<MultiObjectiveRun> run = RunMultiObjective(*mp, options);
        if (!run.ok()) return Failure(run.status());
        line = {{"optimizer", label},
                {"function", name},
                {"dim", mp->dim()},
                {"objectives", mp->objectives},
                {"seed", seed},
                {"trials", *trials},
                {"hypervolume_fraction", run->hypervolume_fraction},
                {"seconds", run->seconds}};
      }
      std::cout << line.dump() << std::endl;
    }
  }
  return 0;
}

int MetricsLatencyCommand(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags = Flags::Parse(
      args, {"dim", "history", "objectives", "constraints", "algorithm"});
  if (!flags.ok()) return UsageError(flags.status());
  const absl::StatusOr<int> dim = flags->Int("dim", 10, 1);
  const absl::StatusOr<int> history = flags->Int("history", 500, 0);
  const absl::StatusOr<int> objectives = flags->Int("objectives", 2, 1);
  const absl::StatusOr<int> constraints = flags->Int("constraints", 1, 0);
  const absl::StatusOr<Algorithm> algorithm = flags->Algo();
  for (const absl::Status& s :
       {dim.status(), history.status(), objectives.status(),
        constraints.status(), algorithm.status()}) {
    if (!s.ok()) return UsageError(s);
  }
  absl::StatusOr<MetricsLatency> result = MeasureMetricsLatency(
      *algorithm, *dim, *history, *objectives, *constraints);
  if (!result.ok()) return Failure(result.status());
  nlohmann::ordered_json line = {{"optimizer", OptimizerLabel(*algorithm, 1)},
                                 {"dim", *dim},
                                 {"history", *history},
                                 {"objectives", *objectives},
                                 {"constraints", *constraints},
                                 {"median_ms", result->median_ms},
                                 {"p95_ms", result->p95_ms},
                                 {"max_ms", result->max_ms}};
  std::cout << line.dump() << std::endl;
  return 0;
}

// Conditional search spaces (conditional_problems.h): regret on the tree
// problems, labelled "hypertune-gp_bandit" on the tree and
// "hypertune-gp_bandit-flat" on the flattened space; one JSON line per run.
int ConditionalRuns(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  bool flatten = false;
  for (const std::string& a : args) {
    if (a == "--flatten") {
      flatten = true;
    } else {
      rest.push_back(a);
    }
  }
  absl::StatusOr<Flags> flags =
      Flags::Parse(rest, {"functions", "trials", "seeds", "algorithm"});
  if (!flags.ok()) return UsageError(flags.status());
  const std::vector<std::string> names =
      absl::StrSplit(flags->String("functions", "jenatton,training"), ',');
  const absl::StatusOr<int> trials = flags->Int("trials", 100, 1);
  const absl::StatusOr<int> seeds = flags->Int("seeds", 20, 1);
  const absl::StatusOr<Algorithm> algorithm = flags->Algo();
  for (const absl::Status& s :
       {trials.status(), seeds.status(), algorithm.status()}) {
    if (!s.ok()) return UsageError(s);
  }
  const std::string label =
      OptimizerLabel(*algorithm, 1) + (flatten ? "-flat" : "");
  for (const std::string& name : names) {
    absl::StatusOr<TreeProblem> problem = FindTreeProblem(name);
    if (!problem.ok()) return UsageError(problem.status());
    for (int seed = 0; seed < *seeds; ++seed) {
      const RegretOptions options{.algorithm = *algorithm,
                                  .trials = *trials,
                                  .parallel = 1,
                                  .seed = static_cast<uint64_t>(seed)};
      absl::StatusOr<RegretRun> run = RunTreeRegret(*problem, flatten, options);
      if (!run.ok()) return Failure(run.status());
      nlohmann::ordered_json line = {{"optimizer", label},
                                     {"function", name},
                                     {"dim", problem->parameters.size()},
                                     {"seed", seed},
                                     {"trials", *trials},
                                     {"best_regret", run->best_regret},
                                     {"seconds", run->seconds}};
      std::cout << line.dump() << std::endl;
    }
  }
  return 0;
}

int ConditionalLatency(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  bool flatten = false;
  for (const std::string& a : args) {
    if (a == "--flatten") {
      flatten = true;
    } else {
      rest.push_back(a);
    }
  }
  absl::StatusOr<Flags> flags = Flags::Parse(rest, {"history", "algorithm"});
  if (!flags.ok()) return UsageError(flags.status());
  const absl::StatusOr<int> history = flags->Int("history", 1000, 0);
  const absl::StatusOr<Algorithm> algorithm = flags->Algo();
  for (const absl::Status& s : {history.status(), algorithm.status()}) {
    if (!s.ok()) return UsageError(s);
  }
  absl::StatusOr<LatencyResult> result =
      MeasureTreeLatency(*algorithm, flatten, *history);
  if (!result.ok()) return Failure(result.status());
  nlohmann::ordered_json line = {
      {"optimizer", OptimizerLabel(*algorithm, 1) + (flatten ? "-flat" : "")},
      {"dim", 20},
      {"history", *history},
      {"median_ms", result->median_ms},
      {"p95_ms", result->p95_ms},
      {"max_ms", result->max_ms}};
  std::cout << line.dump() << std::endl;
  return 0;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    return UsageError(absl::InvalidArgumentError("missing subcommand"));
  }
  const std::string_view command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "regret") return Regret(args);
  if (command == "latency") return Latency(args);
  if (command == "service") return Service(args);
  if (command == "soak") return Soak(args);
  if (command == "failover") return Failover(args);
  if (command == "early-stopping") return EarlyStopping(args);
  if (command == "multi-fidelity") return MultiFidelity(args);
  if (command == "mo-early-stopping") return MoEarlyStopping(args);
  if (command == "multi-objective") return MetricsRuns(args, false);
  if (command == "constrained") return MetricsRuns(args, true);
  if (command == "metrics-latency") return MetricsLatencyCommand(args);
  if (command == "conditional") return ConditionalRuns(args);
  if (command == "conditional-latency") return ConditionalLatency(args);
  if (command == "cost") return CostRuns(args);
  if (command == "transfer") return TransferRuns(args);
  return UsageError(absl::InvalidArgumentError(
      absl::StrCat("unknown subcommand \"", argv[1], "\"")));
}

}  // namespace
}  // namespace hypertune::bench

int main(int argc, char** argv) {
  // As in hypertuned: no run-time lock-order checks while measuring.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return hypertune::bench::Main(argc, argv);
}
