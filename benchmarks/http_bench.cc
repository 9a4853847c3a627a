// hypertune_http_bench: the HTTP read API on a study of 10,000 trials with
// 10 measurements each. Prints the time to serve a page of 1,000 trials, the
// whole CSV and the whole change feed, full and compact (what the dashboard
// loads). Timings are from the client on loopback, so they bound the
// server's from above. The dashboard in a browser is measured by
// hypertune_dashboard_bench (benchmarks/dashboard_bench.cc), on the studies
// that `write` below writes.
//
//   hypertune_http_bench [TRIALS] [MEASUREMENTS]
//   hypertune_http_bench load [WORKERS] [TRIALS] [WATCHERS]
//   hypertune_http_bench write DB TOKENS [TRIALS] [MEASUREMENTS]
//
// `load` runs WORKERS gRPC workers (suggest, 3 reports, complete) through
// TRIALS trials twice, without and with WATCHERS dashboards reading the
// study's event stream, and prints both throughputs. `write` writes the
// dashboard's studies (testing/http_test_util.h: WriteDashboardStudies,
// "bench" with TRIALS x MEASUREMENTS, owner alice) into the SQLite file DB
// and the token file TOKENS (alice-secret-token, bob-secret-token).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/proto_json.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "storage/open_store.h"
#include "testing/http_test_util.h"
// After Eigen (through the server): httplib.h brings <resolv.h>'s `_res`.
#include "httplib.h"

namespace {

using hypertune::test::HttpGet;
using hypertune::test::kAliceToken;
using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

struct Summary {
  double median = 0, max = 0;
};

Summary Summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.back()};
}

// Trials per second of `workers` workers through `trials` trials while
// `watchers` event streams of the study are read.
double LoadThroughput(int workers, int trials, int watchers) {
  hypertune::test::TempDir dir;
  auto server = hypertune::test::StartHttpServer(dir.File("db"), "");
  if (!server.ok()) return 0;
  auto stub = hypertune::test::MakeStub((*server)->address());
  {
    hypertune::v1::Study study = hypertune::test::MakeStudy("load", "");
    study.mutable_spec()->set_algorithm(hypertune::v1::RANDOM);
    study.mutable_spec()->set_max_trials(trials);
    grpc::ClientContext context;
    hypertune::v1::CreateStudyRequest request;
    *request.mutable_study() = study;
    hypertune::v1::Study created;
    if (!stub->CreateStudy(&context, request, &created).ok()) return 0;
  }
  std::atomic<bool> done{false};
  std::atomic<int64_t> events{0};
  std::vector<std::thread> watcher_threads;
  for (int i = 0; i < watchers; ++i) {
    watcher_threads.emplace_back([&, http = (*server)->http_address()] {
      httplib::Client client(absl::StrCat("http://", http));
      client.Get("/api/studies/load/events?after=0",
                 [&](const char* data, size_t size) {
                   for (size_t k = 0; k + 1 < size; ++k) {
                     events += data[k] == '\n' && data[k + 1] == '\n';
                   }
                   return !done.load();
                 });
    });
  }
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> worker_threads;
  for (int w = 0; w < workers; ++w) {
    worker_threads.emplace_back([&, w] {
      for (;;) {
        grpc::ClientContext context;
        hypertune::v1::SuggestTrialsRequest request;
        request.set_study_name("load");
        request.set_count(1);
        request.set_client_id(absl::StrCat("w", w));
        hypertune::v1::SuggestTrialsResponse response;
        if (!stub->SuggestTrials(&context, request, &response).ok() ||
            response.trials_size() == 0) {
          return;
        }
        const hypertune::v1::Trial& trial = response.trials(0);
        for (int step = 1; step <= 3; ++step) {
          grpc::ClientContext c;
          hypertune::v1::AddMeasurementRequest m;
          m.set_study_name("load");
          m.set_trial_id(trial.id());
          m.set_lease_epoch(trial.lease_epoch());
          m.mutable_measurement()->set_step(step);
          (*m.mutable_measurement()->mutable_metrics())["loss"] = 1.0 / step;
          hypertune::v1::Trial out;
          stub->AddMeasurement(&c, m, &out);
        }
        grpc::ClientContext c;
        hypertune::v1::CompleteTrialRequest complete;
        complete.set_study_name("load");
        complete.set_trial_id(trial.id());
        complete.set_lease_epoch(trial.lease_epoch());
        (*complete.mutable_final_measurement()->mutable_metrics())["loss"] =
            0.5;
        hypertune::v1::Trial out;
        stub->CompleteTrial(&c, complete, &out);
      }
    });
  }
  for (std::thread& t : worker_threads) t.join();
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  done.store(true);
  (*server)->Shutdown();
  for (std::thread& t : watcher_threads) t.join();
  if (watchers > 0) {
    std::printf("  %d watchers read %lld events\n", watchers,
                static_cast<long long>(events.load()));
  }
  return trials / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "load") {
    const int workers = argc > 2 ? std::atoi(argv[2]) : 64;
    const int trials = argc > 3 ? std::atoi(argv[3]) : 2000;
    const int watchers = argc > 4 ? std::atoi(argv[4]) : 10;
    // Alternating, twice each, to spread the machine's noise.
    double alone = 0, watched = 0;
    for (int round = 0; round < 2; ++round) {
      alone += LoadThroughput(workers, trials, 0) / 2;
      watched += LoadThroughput(workers, trials, watchers) / 2;
    }
    std::printf(
        "%d workers, %d trials: %.0f trials/s alone, %.0f trials/s "
        "with %d dashboards watching (%+.1f%%)\n",
        workers, trials, alone, watched, watchers,
        100.0 * (watched - alone) / alone);
    return 0;
  }
  if (argc > 3 && std::string(argv[1]) == "write") {
    const int trials = argc > 4 ? std::atoi(argv[4]) : 10000;
    const int measurements = argc > 5 ? std::atoi(argv[5]) : 10;
    if (absl::Status s = hypertune::test::WriteTokenFile(argv[3]); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
    auto written = hypertune::test::WriteDashboardStudies(
        argv[2], "bench", "alice", trials, measurements);
    if (!written.ok()) {
      std::fprintf(stderr, "%s\n",
                   std::string(written.status().message()).c_str());
      return 1;
    }
    std::printf(
        "wrote studies bench (%d trials x %d measurements), bench-b, "
        "all-infeasible into %s\n",
        trials, measurements, argv[2]);
    return 0;
  }
  const int trials = argc > 1 ? std::atoi(argv[1]) : 10000;
  const int measurements = argc > 2 ? std::atoi(argv[2]) : 10;
  hypertune::test::TempDir dir;
  if (!hypertune::test::WriteTokenFile(dir.File("tokens")).ok()) return 1;
  auto study = hypertune::test::MakeStudy("bench", "alice");
  const Clock::time_point write_start = Clock::now();
  absl::Status written = hypertune::test::WriteStudy(
      dir.File("db"), study,
      hypertune::test::MakeTrials(study, trials, measurements, 11));
  if (!written.ok()) {
    std::fprintf(stderr, "%s\n", std::string(written.message()).c_str());
    return 1;
  }
  std::printf("study: %d trials x %d measurements, written in %.0f ms\n",
              trials, measurements, Ms(write_start));
  {
    // The server-side parts of a page, in-process: the store's read and
    // the JSON mapping.
    hypertune::storage::StoreOptions store_options;
    store_options.path = dir.File("db");
    auto store = hypertune::storage::OpenStore(store_options);
    if (!store.ok()) return 1;
    hypertune::storage::TrialQuery query;
    query.after_id = trials / 2;
    query.limit = 1000;
    std::vector<double> read_ms, json_ms, ours_ms, feed_ms;
    for (int i = 0; i < 10; ++i) {
      Clock::time_point start = Clock::now();
      auto page = (*store)->ListTrials("bench", query);
      read_ms.push_back(Ms(start));
      start = Clock::now();
      hypertune::v1::ListTrialsResponse response;
      for (auto& t : *page) *response.add_trials() = std::move(t);
      google::protobuf::util::JsonPrintOptions options;
      options.preserve_proto_field_names = true;
      std::string out;
      (void)google::protobuf::util::MessageToJsonString(response, &out,
                                                        options);
      json_ms.push_back(Ms(start));
      start = Clock::now();
      out = hypertune::ToJson(response);
      ours_ms.push_back(Ms(start));
      start = Clock::now();
      auto changes = (*store)->ListTrialChanges("bench", trials / 2, 1000);
      feed_ms.push_back(Ms(start));
    }
    std::printf(
        "server-side parts of a 1000-trial page: store read median "
        "%.1f ms, JSON median %.1f ms (protobuf's printer: %.1f ms); "
        "change-feed read median %.1f ms\n",
        Summarize(read_ms).median, Summarize(ours_ms).median,
        Summarize(json_ms).median, Summarize(feed_ms).median);
  }
  auto server =
      hypertune::test::StartHttpServer(dir.File("db"), dir.File("tokens"));
  if (!server.ok()) return 1;
  const std::string http = (*server)->http_address();

  std::vector<double> page_ms;
  size_t page_bytes = 0;
  for (int i = 0; i < 20; ++i) {
    // Pages at different depths of the study.
    const std::string token =
        i % 2 == 0 ? "" : absl::StrCat((i * 997) % std::max(1, trials - 1000));
    const Clock::time_point start = Clock::now();
    auto reply = HttpGet(
        http, "/api/studies/bench/trials?page_size=1000&page_token=" + token,
        kAliceToken);
    page_ms.push_back(Ms(start));
    page_bytes = reply.body.size();
    if (reply.status != 200) return 1;
  }
  Summary page = Summarize(page_ms);
  std::printf(
      "GET trials?page_size=1000: median %.1f ms, max %.1f ms "
      "(%zu bytes)\n",
      page.median, page.max, page_bytes);

  std::vector<double> csv_ms;
  size_t csv_bytes = 0;
  for (int i = 0; i < 5; ++i) {
    const Clock::time_point start = Clock::now();
    auto reply = HttpGet(http, "/api/studies/bench/trials.csv", kAliceToken);
    csv_ms.push_back(Ms(start));
    csv_bytes = reply.body.size();
    if (reply.status != 200) return 1;
  }
  Summary csv = Summarize(csv_ms);
  std::printf(
      "GET trials.csv (all %d): median %.1f ms, max %.1f ms "
      "(%zu bytes)\n",
      trials, csv.median, csv.max, csv_bytes);

  std::vector<double> feed_ms;
  double fetch_ms = 0;
  for (int i = 0; i < 3; ++i) {
    const Clock::time_point start = Clock::now();
    std::string after = "0";
    for (;;) {
      const Clock::time_point fetch_start = Clock::now();
      auto reply =
          HttpGet(http, "/api/studies/bench/changes?limit=1000&after=" + after,
                  kAliceToken);
      fetch_ms += Ms(fetch_start);
      if (reply.status != 200) return 1;
      auto page = nlohmann::json::parse(reply.body);
      after = page["last_sequence"].get<std::string>();
      if (!page["more"].get<bool>()) break;
    }
    feed_ms.push_back(Ms(start));
  }
  Summary feed = Summarize(feed_ms);
  std::printf(
      "the whole change feed (the dashboard's load): median %.1f ms, "
      "max %.1f ms; of which HTTP %.1f ms a time, the rest parsing "
      "the JSON in the client\n",
      feed.median, feed.max, fetch_ms / 3);

  std::vector<double> compact_ms;
  size_t compact_bytes = 0;
  for (int i = 0; i < 3; ++i) {
    const Clock::time_point start = Clock::now();
    std::string after = "0";
    compact_bytes = 0;
    for (;;) {
      auto reply = HttpGet(http,
                           "/api/studies/bench/changes?view=compact&"
                           "limit=1000&after=" +
                               after,
                           kAliceToken);
      if (reply.status != 200) return 1;
      compact_bytes += reply.body.size();
      auto page = nlohmann::json::parse(reply.body);
      after = page["last_sequence"].get<std::string>();
      if (!page["more"].get<bool>()) break;
    }
    compact_ms.push_back(Ms(start));
  }
  Summary compact = Summarize(compact_ms);
  std::printf(
      "the whole compact change feed (view=compact): median %.1f ms, "
      "max %.1f ms, %zu bytes\n",
      compact.median, compact.max, compact_bytes);
  return 0;
}
