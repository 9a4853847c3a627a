#include "benchmarks/service_load.h"

#include <stdlib.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "testing/regret.h"
#include "testing/test_server.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

v1::Study LoadStudy(const ServiceLoadOptions& options) {
  v1::Study study;
  study.set_name("load");
  v1::StudySpec& spec = *study.mutable_spec();
  for (int i = 0; i < 5; ++i) {
    v1::ParameterSpec* p = spec.add_parameters();
    p->set_name(absl::StrCat("x", i));
    p->mutable_double_spec()->set_min(0);
    p->mutable_double_spec()->set_max(1);
  }
  v1::MetricSpec* metric = spec.add_metrics();
  metric->set_name("loss");
  metric->set_goal(v1::MetricSpec::MINIMIZE);
  v1::Algorithm algorithm = v1::RANDOM;
  v1::Algorithm_Parse(options.algorithm, &algorithm);
  spec.set_algorithm(algorithm);
  spec.set_max_trials(options.trials);
  return study;
}

// One worker's loop; returns its completed cycles, appending each call's
// latency in ms and counting failed calls.
int RunWorker(const Client& client, const ServiceLoadOptions& options,
              std::vector<double>* latencies_ms, int* errors) {
  auto timed = [&](auto&& call) {
    Clock::time_point start = Clock::now();
    auto result = call();
    latencies_ms->push_back(
        std::chrono::duration<double, std::milli>(Clock::now() - start)
            .count());
    if (!result.ok()) ++*errors;
    return result;
  };
  int cycles = 0;
  while (true) {
    auto suggested = timed([&] { return client.Suggest("load", 1); });
    if (!suggested.ok()) return cycles;
    if (suggested->trials().empty()) return cycles;  // budget spent
    const v1::Trial& trial = suggested->trials(0);
    double loss = 0;
    for (const v1::ParameterValue& p : trial.parameters()) {
      loss += p.double_value() * p.double_value();
    }
    for (int step = 0; step < options.reports; ++step) {
      v1::AddMeasurementRequest report;
      report.set_study_name("load");
      report.set_trial_id(trial.id());
      report.set_lease_epoch(trial.lease_epoch());
      report.mutable_measurement()->set_step(step);
      (*report.mutable_measurement()->mutable_metrics())["loss"] = loss + step;
      // A failed report is counted by `timed`; the cycle goes on.
      timed([&] { return client.AddMeasurement(report); }).IgnoreError();
    }
    v1::CompleteTrialRequest complete;
    complete.set_study_name("load");
    complete.set_trial_id(trial.id());
    complete.set_lease_epoch(trial.lease_epoch());
    (*complete.mutable_final_measurement()->mutable_metrics())["loss"] = loss;
    if (timed([&] { return client.CompleteTrial(complete); }).ok()) ++cycles;
  }
}

}  // namespace

absl::StatusOr<ServiceLoadResult> RunServiceLoad(
    const ServiceLoadOptions& options) {
  std::string dir_pattern =
      (fs::temp_directory_path() / "hypertune-load-XXXXXX").string();
  if (mkdtemp(dir_pattern.data()) == nullptr) {
    return absl::InternalError("cannot create a temporary directory");
  }
  const fs::path dir = dir_pattern;
  ServiceLoadResult result;
  {
    test::ServerProcessOptions server_options;
    server_options.program = options.hypertuned;
    server_options.db_path =
        options.db.empty() ? (dir / "load.db").string() : options.db;
    server_options.extra_args = {"--durability",
                                 options.durable_full ? "full" : "normal"};
    auto server = test::ServerProcess::Start(server_options);
    if (!server.ok()) return server.status();
    ClientOptions admin_options;
    admin_options.server = (*server)->address();
    admin_options.client_id = "bench-admin";
    absl::StatusOr<v1::Study> created =
        Client(admin_options).CreateStudy(LoadStudy(options));
    if (!created.ok()) return created.status();

    std::vector<std::vector<double>> latencies(options.workers);
    std::vector<int> errors(options.workers, 0), cycles(options.workers, 0);
    std::vector<std::thread> threads;
    Clock::time_point start = Clock::now();
    for (int w = 0; w < options.workers; ++w) {
      threads.emplace_back([&, w] {
        ClientOptions client_options;
        client_options.server = (*server)->address();
        client_options.client_id = absl::StrCat("bench-", w);
        Client client(client_options);
        cycles[w] = RunWorker(client, options, &latencies[w], &errors[w]);
      });
    }
    for (std::thread& t : threads) t.join();
    result.seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<double> all;
    for (int w = 0; w < options.workers; ++w) {
      result.trials += cycles[w];
      result.errors += errors[w];
      all.insert(all.end(), latencies[w].begin(), latencies[w].end());
    }
    result.rpc_p50_ms = Percentile(all, 50);
    result.rpc_p99_ms = Percentile(all, 99);
    (*server)->Kill(SIGTERM);
  }
  fs::remove_all(dir);
  return result;
}

}  // namespace hypertune::bench
