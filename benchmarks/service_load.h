// The service throughput benchmark (BENCHMARKS.md section 3): hypertuned on a
// SQLite file in its own process, W concurrent SDK clients on loopback, each
// looping suggest -> `reports` measurements -> complete until the study's
// budget of `trials` is spent.
#ifndef HYPERTUNE_BENCHMARKS_SERVICE_LOAD_H_
#define HYPERTUNE_BENCHMARKS_SERVICE_LOAD_H_

#include <string>

#include "absl/status/statusor.h"

namespace hypertune::bench {

struct ServiceLoadOptions {
  int workers = 16;
  // Trial cycles in all, across workers.
  int trials = 800;
  int reports = 3;
  // The study's algorithm, as the API spells it.
  std::string algorithm = "RANDOM";
  // The hypertuned program to start.
  std::string hypertuned;
  // hypertuned --durability full (every commit fsynced).
  bool durable_full = false;
  // The database to serve (a PostgreSQL URL); empty (default): a fresh
  // SQLite file.
  std::string db;
};

struct ServiceLoadResult {
  int trials = 0;  // Completed trial cycles.
  double seconds = 0;
  double rpc_p50_ms = 0;
  double rpc_p99_ms = 0;
  int errors = 0;  // Calls that failed after the SDK's retries.
};

absl::StatusOr<ServiceLoadResult> RunServiceLoad(
    const ServiceLoadOptions& options);

}  // namespace hypertune::bench

#endif  // HYPERTUNE_BENCHMARKS_SERVICE_LOAD_H_
