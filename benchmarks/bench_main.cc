// hypertune-bench: the benchmark driver (BENCHMARKS.md).
//
//   hypertune-bench regret [--functions branin2,hartmann6] [--trials 100]
//                          [--seeds 20] [--parallel 1] [--algorithm A]
//   hypertune-bench latency [--dim 5] [--history 1000] [--algorithm A]
//
// Prints one JSON object per line in the schema of shared/peers/
// optuna_peer.py. Usage errors: a message on stderr and exit status 2;
// failures while running: exit status 1.
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "benchmarks/functions.h"
#include "benchmarks/regret.h"
#include "optimizer/suggester.h"

namespace hypertune::bench {
namespace {

using optimizer::Algorithm;

constexpr Algorithm kDefaultAlgorithm = Algorithm::kGpBandit;

constexpr int kUsageError = 2;

constexpr char kUsage[] =
    "usage:\n"
    "  hypertune-bench regret [--functions F1,F2,...] [--trials N] "
    "[--seeds N]\n"
    "                         [--parallel P] [--algorithm A]\n"
    "  hypertune-bench latency [--dim D] [--history N] [--algorithm A]\n"
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

int Regret(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags = Flags::Parse(
      args, {"functions", "trials", "seeds", "parallel", "algorithm"});
  if (!flags.ok()) return UsageError(flags.status());
  std::vector<std::string> all_names;
  for (const BenchmarkFunction& f : PublicSuite()) all_names.push_back(f.name);
  const std::string names =
      flags->String("functions", absl::StrJoin(all_names, ","));
  std::vector<BenchmarkFunction> functions;
  const std::vector<std::string> parts = absl::StrSplit(names, ',');
  for (const std::string& name : parts) {
    absl::StatusOr<BenchmarkFunction> f = FindFunction(name);
    if (!f.ok()) return UsageError(f.status());
    functions.push_back(*std::move(f));
  }
  const absl::StatusOr<int> trials = flags->Int("trials", 100, 1);
  const absl::StatusOr<int> seeds = flags->Int("seeds", 20, 1);
  const absl::StatusOr<int> parallel = flags->Int("parallel", 1, 1);
  const absl::StatusOr<Algorithm> algorithm = flags->Algo();
  for (const absl::Status& s : {trials.status(), seeds.status(),
                                parallel.status(), algorithm.status()}) {
    if (!s.ok()) return UsageError(s);
  }

  const std::string label = OptimizerLabel(*algorithm, *parallel);
  for (const BenchmarkFunction& f : functions) {
    for (int seed = 0; seed < *seeds; ++seed) {
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

int Latency(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags =
      Flags::Parse(args, {"dim", "history", "algorithm"});
  if (!flags.ok()) return UsageError(flags.status());
  const absl::StatusOr<int> dim = flags->Int("dim", 5, 1);
  const absl::StatusOr<int> history = flags->Int("history", 1000, 0);
  const absl::StatusOr<Algorithm> algorithm = flags->Algo();
  for (const absl::Status& s :
       {dim.status(), history.status(), algorithm.status()}) {
    if (!s.ok()) return UsageError(s);
  }
  absl::StatusOr<LatencyResult> result =
      MeasureLatency(*algorithm, *dim, *history);
  if (!result.ok()) return Failure(result.status());
  nlohmann::ordered_json line = {{"optimizer", OptimizerLabel(*algorithm, 1)},
                                 {"dim", *dim},
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
  return UsageError(absl::InvalidArgumentError(
      absl::StrCat("unknown subcommand \"", argv[1], "\"")));
}

}  // namespace
}  // namespace hypertune::bench

int main(int argc, char** argv) { return hypertune::bench::Main(argc, argv); }
