// `hypertune launch slurm`: runs `hypertune worker` on a Slurm cluster, one
// worker per task of a job array.
//
// The launcher writes a batch script whose only job is to `exec` the worker
// (so that the worker is the batch shell's process and gets the signals
// Slurm sends it) and submits it with `sbatch --parsable --array=0-(N-1)
// --signal=B:TERM@NOTICE --requeue ...`. Slurm's notice (before the time
// limit, or on preemption) thus reaches the worker as SIGTERM, and the
// worker gives its trial back with its checkpoint for another task.
//
// The pure pieces (parsing, Slurm's time format, shell quoting, the script
// and the sbatch command line) are functions of their inputs, for tests.
//
// Thread safety: pure functions; RunLaunchCommand runs on the main thread.
#ifndef HYPERTUNE_CLI_LAUNCH_COMMANDS_H_
#define HYPERTUNE_CLI_LAUNCH_COMMANDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cli/commands.h"

namespace hypertune::cli {

struct SlurmLaunchOptions {
  std::string study;
  // Array tasks, one worker (one trial at a time) each. At least 1.
  int workers = 0;
  // GPUs per task (--gres=gpu:G); 0: none asked.
  int gpus_per_worker = 0;
  // Slurm's time limit as given ("" = the partition's default).
  std::string time;
  // Its seconds; -1 when unlimited or not given.
  int64_t time_seconds = -1;
  // "" = the cluster's default partition.
  std::string partition;
  // Seconds before the time limit at which Slurm sends SIGTERM to the
  // worker (--signal=B:TERM@notice). Default 120.
  int notice_seconds = 120;
  // More sbatch arguments, each passed as one argument, after ours (so they
  // override them).
  std::vector<std::string> sbatch_args;
  // Print the script and the command; submit nothing, write nothing.
  bool dry_run = false;
  // Where the script and the tasks' output files go; default
  // ./hypertune-slurm/<study>.
  std::string script_dir;
  // The worker's arguments after "worker": NAME --parallel 1, the worker
  // flags given (--log-dir, --timeout, ...), "--" and the command.
  std::vector<std::string> worker_args;
  // The command (after "--"), also in worker_args.
  std::vector<std::string> command;
};

// Parses `slurm NAME --workers N [--gpus-per-worker G] [--time T]
// [--partition P] [--notice S] [--sbatch-arg ARG]... [--script-dir DIR]
// [--dry-run] [--log-dir DIR] [--timeout S] [--max-trials M]
// [--max-consecutive-failures K] -- CMD ARGS...` (the arguments after
// "launch"). The worker flags are checked as `hypertune worker` checks them.
// Usage errors naming the flag otherwise.
absl::StatusOr<SlurmLaunchOptions> ParseSlurmLaunchArgs(const Args& args);

// Seconds of a Slurm time limit: "M", "M:S", "H:M:S", "D-H", "D-H:M",
// "D-H:M:S"; -1 for "INFINITE" / "UNLIMITED" (any case). INVALID_ARGUMENT
// otherwise. 0 asks for no limit, as in Slurm: -1.
absl::StatusOr<int64_t> ParseSlurmTime(absl::string_view text);

// `arg` as one word for bash: as is when made only of characters that are
// never special (letters, digits, and "@%+=:,./_-", not starting with '='),
// else single-quoted, each ' written as '\''. "" becomes ''.
std::string ShellQuote(absl::string_view arg);
// The words quoted and joined by spaces.
std::string ShellJoin(const std::vector<std::string>& words);

// What the script and the sbatch command are made of, resolved on the
// submitting machine.
struct SlurmJobContext {
  // The hypertune program the tasks run (an absolute path).
  std::string hypertune;
  // The global flags for the workers (--server ADDRESS, TLS files); never
  // the token.
  std::vector<std::string> global_flags;
  // The folder the tasks start in (sbatch --chdir): where the launch ran.
  std::string work_dir;
  // Absolute: the script's folder.
  std::string script_dir;
};

// The batch script's path and the output file pattern, in script_dir.
std::string SlurmScriptPath(const SlurmJobContext& context);
std::string SlurmOutputPattern(const SlurmJobContext& context);

// The sbatch command line (argv, "sbatch" first) that submits the script.
std::vector<std::string> SbatchCommand(const SlurmLaunchOptions& options,
                                       const SlurmJobContext& context);

// The batch script: unsets the variables of an enclosing trial, names the
// worker's client id after the task, and execs `hypertune GLOBAL_FLAGS
// worker WORKER_ARGS`, every word quoted.
std::string SlurmBatchScript(const SlurmLaunchOptions& options,
                             const SlurmJobContext& context);

// Whether `server` (HOST:PORT, or a comma-separated list) names only
// loopback hosts (127.x, localhost, ::1), which no other node reaches.
bool IsLoopbackServer(absl::string_view server);

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_LAUNCH_COMMANDS_H_
