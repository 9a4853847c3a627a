// The chaos harness: hypertuned as a process on a fixed loopback port, a
// study with short leases, and worker processes (tests/service/
// chaos_worker.cc) that loop NextTrial -> reports -> Complete, while the
// harness SIGKILLs and restarts the server and SIGKILLs (and replaces)
// workers. Once the study is finished (or the time is up, when the workers
// are stopped) and the leases have run out, it checks what the service
// promises:
//   - every completion a worker saw acknowledged is stored, COMPLETED, with
//     the acknowledged value, and no trial was acknowledged with two values
//     (a second holder would have sent another value);
//   - no trial is left ACTIVE with an expired lease;
//   - retry_count <= max_retries for every trial not FAILED, and a FAILED
//     trial has used them all;
//   - trial ids are dense from 1 (and, for a finished study, max_trials of
//     them, all finished);
//   - the server stops cleanly on SIGTERM and PRAGMA integrity_check of its
//     file is "ok";
//   - workers met no error outside those chaos explains (server down, lease
//     lost) and exited only when the study was COMPLETED or killed.
// Used by tests/service/chaos_test.cc (a short run that must find nothing)
// and `hypertune-bench soak` (minutes, printing the figures).
//
// Thread safety: RunChaos runs one experiment on the calling thread, which
// starts every process; run one at a time per directory.
#ifndef HYPERTUNE_TESTING_CHAOS_H_
#define HYPERTUNE_TESTING_CHAOS_H_

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hypertune::bench {

struct ChaosOptions {
  // The hypertuned and chaos_worker programs.
  std::string hypertuned;
  std::string worker;
  // A directory for the database, the workers' acknowledgement files and
  // error files; it must exist.
  std::string dir;
  // A PostgreSQL URL: the database, shared by two servers, a leader and a
  // standby (service/server/leadership.h), whose addresses the workers get as a
  // list. Each server kill then SIGKILLs the leader: the standby takes
  // over, and the killed one comes back (after server_downtime) as the new
  // standby. Empty (default): one server on an SQLite file in `dir`.
  std::string db_url;

  // Worker processes running at once.
  int workers = 8;
  // The study's max_trials; 0 = unlimited (the run ends at `duration`).
  int trials = 120;
  // The study's algorithm, as the API spells it.
  std::string algorithm = "RANDOM";
  int lease_seconds = 1;
  int max_retries = 2;
  // Reports per trial, and the work (sleep) before each.
  int reports = 3;
  int report_ms = 30;

  // Kills when this fraction of `trials` has been acknowledged (each once).
  std::vector<double> server_kills_at;
  std::vector<double> worker_kills_at;
  // Kills at random intervals in [min, max]; max 0 = none.
  std::chrono::milliseconds server_kill_min{0};
  std::chrono::milliseconds server_kill_max{0};
  std::chrono::milliseconds worker_kill_min{0};
  std::chrono::milliseconds worker_kill_max{0};
  // How long the server stays down after each kill before it is restarted.
  std::chrono::milliseconds server_downtime{0};
  // A killed worker is replaced by a new process (a new client id).
  bool replace_killed_workers = true;

  // The run ends when the study is COMPLETED or after this long; the
  // workers still running are then stopped.
  std::chrono::milliseconds duration{std::chrono::minutes(2)};
  // Seeds the choice of victims and kill intervals.
  uint64_t seed = 1;
  // Progress lines (kills, restarts), if set.
  std::ostream* log = nullptr;
};

struct ChaosResult {
  int64_t trials = 0;        // Trials the study has.
  int64_t acknowledged = 0;  // Distinct trials acknowledged to a worker.
  int64_t completed = 0;     // COMPLETED trials.
  int64_t requeued = 0;      // Times a lost trial went back to REQUESTED.
  int64_t failed = 0;        // FAILED trials (retries spent).
  int64_t server_kills = 0;
  int64_t worker_kills = 0;
  // With db_url: per leader kill, the milliseconds until the standby
  // answered as the leader.
  std::vector<double> takeover_ms;
  // Worker errors other than the expected ones (also in `violations`).
  int64_t unexpected_errors = 0;
  bool study_completed = false;
  double seconds = 0;
  // Broken promises, one line each; empty when all held.
  std::vector<std::string> violations;
};

// Runs one experiment. Errors: the programs cannot be started, the study
// cannot be created, or the final state cannot be read (the violations are
// results, not errors).
absl::StatusOr<ChaosResult> RunChaos(const ChaosOptions& options);

}  // namespace hypertune::bench

#endif  // HYPERTUNE_TESTING_CHAOS_H_
