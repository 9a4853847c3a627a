// The online backup under load (issue 16's target: workers lose under 20%
// of their throughput while a 1 GB database is backed up).
//
//   hypertune_backup_bench [DB_MB] [WORKERS] [SECONDS]   (1024 16 10)
//
// Fills a database of DB_MB with finished trials (through the store, in
// large transactions), serves it, runs WORKERS clients that suggest and
// complete trials for SECONDS without a backup, then again while Backup
// copies it, and prints both rates and the backup's duration.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "service/server/server.h"
#include "storage/open_store.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune {
namespace {

v1::Study Study(const std::string& name) {
  v1::Study study;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    spec {
      parameters { name: "x" double_spec { min: 0 max: 1 } }
      metrics { name: "loss" goal: MINIMIZE }
      algorithm: RANDOM
    })pb",
                                                &study);
  study.set_name(name);
  return study;
}

// Fills `path` with about `megabytes` of COMPLETED trials of study "bulk".
bool Fill(const std::string& path, int64_t megabytes) {
  storage::StoreOptions options;
  options.path = path;
  auto store = storage::OpenStore(options);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return false;
  }
  if (!(*store)->CreateStudy(Study("bulk")).ok()) return false;
  // ~100 KB a trial: 1000 measurements of 8 metrics.
  v1::Trial trial;
  trial.set_state(v1::Trial::COMPLETED);
  v1::ParameterValue* x = trial.add_parameters();
  x->set_name("x");
  x->set_double_value(0.5);
  for (int step = 1; step <= 1000; ++step) {
    v1::Measurement* m = trial.add_measurements();
    m->set_step(step);
    for (int k = 0; k < 8; ++k) {
      (*m->mutable_metrics())[absl::StrCat("metric_", k)] = 1.0 / (step + k);
    }
  }
  *trial.mutable_final_measurement() = trial.measurements(999);
  const int64_t per_trial = static_cast<int64_t>(trial.ByteSizeLong());
  const int64_t trials = megabytes * (1 << 20) / per_trial;
  for (int64_t done = 0; done < trials; done += 100) {
    std::vector<v1::Trial> batch(std::min<int64_t>(100, trials - done), trial);
    if (!(*store)->CreateTrials("bulk", std::move(batch)).ok()) return false;
  }
  return true;
}

// Completed trials per second of `workers` clients while `going()` holds.
double Throughput(const std::string& address, int workers,
                  const std::function<bool()>& going) {
  std::atomic<int64_t> completed{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      ClientOptions options;
      options.server = address;
      options.client_id = absl::StrCat("w", w);
      Client client(options);
      while (!stop) {
        auto next = client.NextTrial("work");
        if (!next.ok() || !next->has_value()) return;
        if ((**next).Complete({{"loss", 0.5}}).ok()) ++completed;
      }
    });
  }
  const auto start = std::chrono::steady_clock::now();
  while (going()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  const int64_t counted = completed;
  stop = true;
  for (std::thread& t : threads) t.join();
  return static_cast<double>(counted) / elapsed;
}

int Run(int argc, char** argv) {
  const int64_t megabytes = argc > 1 ? std::atoll(argv[1]) : 1024;
  const int workers = argc > 2 ? std::atoi(argv[2]) : 16;
  const double seconds = argc > 3 ? std::atof(argv[3]) : 10;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      absl::StrCat("hypertune-backup-bench-", getpid());
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "live.db").string();
  const auto fill_start = std::chrono::steady_clock::now();
  if (!Fill(db, megabytes)) return 1;
  std::printf("filled %s: %.0f MB in %.1f s\n", db.c_str(),
              std::filesystem::file_size(db) / 1048576.0,
              std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            fill_start)
                  .count());

  service::ServerOptions options;
  options.db_path = db;
  options.listen = "127.0.0.1:0";
  auto server = service::Server::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  ClientOptions admin_options;
  admin_options.server = (*server)->address();
  admin_options.call_timeout = std::chrono::hours(1);
  Client admin(admin_options);
  if (!admin.CreateStudy(Study("work")).ok()) return 1;

  const auto window = std::chrono::steady_clock::now() +
                      std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::duration<double>(seconds));
  const double without = Throughput((*server)->address(), workers, [&] {
    return std::chrono::steady_clock::now() < window;
  });
  std::atomic<bool> backing_up{true};
  double backup_seconds = 0;
  std::thread backup([&] {
    const auto start = std::chrono::steady_clock::now();
    auto done = admin.Backup((dir / "copy.db").string());
    backup_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (!done.ok()) {
      std::fprintf(stderr, "backup: %s\n", done.status().ToString().c_str());
    }
    backing_up = false;
  });
  // Measured for exactly as long as the backup runs.
  const double during = Throughput((*server)->address(), workers,
                                   [&] { return backing_up.load(); });
  backup.join();
  std::printf(
      "workers %d: %.1f completions/s without a backup, %.1f during "
      "it (%.1f%% lost)\n",
      workers, without, during, 100.0 * (1 - during / without));
  std::printf("backup of %.0f MB: %.1f s\n",
              std::filesystem::file_size(dir / "copy.db") / 1048576.0,
              backup_seconds);
  server->reset();
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace hypertune

int main(int argc, char** argv) { return hypertune::Run(argc, argv); }
