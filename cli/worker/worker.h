// `hypertune worker`: runs a program once per trial of a study, in N
// parallel slots, and reports what the programs print.
//
// Each slot asks SuggestTrials for one trial under its own client id
// (<host>-<pid>-<slot>), records the trial's log file on it, runs the command
// with the trial's parameters in its environment and `{param}` arguments,
// holds the lease meanwhile (the SDK renews it, reporting the program's
// device-seconds; a lease lost to another worker ends the program), turns
// `hypertune:` lines into measurements, checkpoints and infeasible
// verdicts, and completes the trial from the way the program ended
// (trial_outcome.h) unless the program completed it itself. A program
// never outlives the worker (subprocess.h's OrphanGuard).
//
// Thread safety: RunWorkerCommand runs on the main thread and joins its slot
// threads before returning. It installs SIGINT/SIGTERM handlers for its run:
// the first signal is passed on to the programs, no new trial starts, and
// the trials the programs did not finish are given back to the queue as
// preempted; a second signal kills the programs.
#ifndef HYPERTUNE_CLI_WORKER_WORKER_H_
#define HYPERTUNE_CLI_WORKER_WORKER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/commands.h"

namespace hypertune::cli {

struct WorkerOptions {
  std::string study;
  // Trials run at once, each in its own slot.
  int parallel = 1;
  // GPUs (ordinals or UUIDs), gpus_per_trial per slot: slot k's program
  // sees only gpus[(k-1)*g .. k*g-1] (CUDA_VISIBLE_DEVICES), and its
  // device-seconds count them all. Empty: no pinning, one device.
  std::vector<std::string> gpus;
  // The GPUs each trial gets (--gpus-per-trial); divides gpus.size().
  int gpus_per_trial = 1;
  // Trials this worker runs at most; none = until the study completes.
  std::optional<int64_t> max_trials;
  // A program running longer is ended and its trial made infeasible.
  std::optional<double> timeout_seconds;
  // The worker stops after this many trials in a row whose program failed
  // to run at all (ended FAILED or infeasible without reporting a metric);
  // 0: never. Default 5.
  int max_consecutive_failures = 5;
  // The worker stops when its first `early_failures` trials all failed
  // alike within seconds (the same non-zero exit status or signal, no
  // metric): the program or its environment is broken, whatever the
  // parameters. Those trials are held meanwhile and all given back to the
  // queue. 0: never. Default 3.
  int early_failures = 3;
  // Per-trial log files go to <log_dir>/trial-<id>.log.
  std::string log_dir;
  // The program and its arguments (with `{param}` placeholders).
  std::vector<std::string> command;
  // --wandb: `command` is the study's W&B sweep command (wandb_command.h),
  // taken from the study instead of the command line.
  bool wandb = false;
};

// Parses `worker NAME [--parallel N | --gpus LIST [--gpus-per-trial G]]
// [--max-trials M] [--timeout S] [--log-dir DIR]
// [--max-consecutive-failures N] [--early-failures N] -- CMD ARGS... |
// --wandb` (the
// arguments after "worker"). --gpus 0,1,2,3 runs one slot per GPU, or per
// group of G. The log dir defaults to ./hypertune-logs/<study>. Usage errors
// otherwise.
absl::StatusOr<WorkerOptions> ParseWorkerArgs(const Args& args);

// OK if `program` (a worker's CMD) names an executable file, directly or
// through PATH, or holds a `{param}` placeholder; NOT_FOUND naming it
// otherwise.
absl::Status CheckProgram(const std::string& program);

// The program's environment: `base` (NAME=value entries, e.g. environ)
// with each of `vars` set, replacing an entry of the same name.
std::vector<std::string> ProgramEnvironment(
    const std::vector<std::string>& base,
    const std::vector<std::pair<std::string, std::string>>& vars);

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_WORKER_WORKER_H_
