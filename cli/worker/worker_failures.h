// The two watches of `hypertune worker` for a program that cannot run,
// whatever the parameters (a typo, a missing module, a wrong interpreter),
// so that the worker stops before the study's budget is spent on it:
//
// - early failures alike (--early-failures N): the worker's first N
//   programs all ended on their own within kQuickFailureSeconds with the
//   same non-zero exit status (or signal) and no metric. Any other end
//   among the first ones, or a program still running after
//   kQuickFailureSeconds, ends this watch for good. While it is open, the
//   trials of such failures are held, not settled: the worker gives them
//   all back once N fail alike (the environment's fault: a missing module
//   or command, exit 127), and settles them by the usual rule once the
//   watch ends otherwise.
// - failures to run in a row (--max-consecutive-failures N): N trials in a
//   row ended FAILED or INFEASIBLE without reporting a single metric, on
//   their own.
//
// Each gives the error that stops the worker: FAILED_PRECONDITION with the
// last log's tail.
//
// Thread safety: thread-safe; each slot reports its trials' ends.
#ifndef HYPERTUNE_CLI_WORKER_WORKER_FAILURES_H_
#define HYPERTUNE_CLI_WORKER_WORKER_FAILURES_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "cli/worker/subprocess.h"
#include "cli/worker/trial_outcome.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::cli {

// A program that fails sooner than this, as the worker's first ones all
// did, fails whatever its parameters (--early-failures).
inline constexpr double kQuickFailureSeconds = 10;

// What the early-failures watch makes of one of the worker's programs.
enum class EarlyVerdict {
  // Not watched (the watch is over or off): settle the trial as usual.
  kNone,
  // This end closed the watch (a metric, a success, a longer run, another
  // status): settle this trial and every held one as usual.
  kEnded,
  // A quick failure alike the earlier ones, fewer than N so far: hold the
  // trial until the watch decides.
  kHold,
  // N failed alike (or, with parallel slots, one more did after that):
  // give this trial and every held one back, and stop the worker.
  kEnvironment,
};

class FailureWatch {
 public:
  // `early_failures`, `max_consecutive_failures`: the N of each watch
  // (WorkerOptions); 0 or less turns it off.
  FailureWatch(int early_failures, int max_consecutive_failures)
      : early_failures_(early_failures),
        max_consecutive_failures_(max_consecutive_failures) {}

  // Judges `run` of trial `id`, which ran `program_seconds`.
  EarlyVerdict JudgeEarly(const TrialRun& run, double program_seconds,
                          int64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the watch, as a program still running after kQuickFailureSeconds
  // does. Returns whether it was open (the held trials are then to be
  // settled as usual).
  bool EndEarlyWatch() ABSL_LOCKS_EXCLUDED(mu_);

  // The reason to give a held trial back to the queue (the worker's
  // environment, not the parameters), and the error that stops the worker,
  // naming the failed trials and the tail of `log_path`, trial `id`'s log.
  std::string EarlyFailuresGiveBackReason(const ProgramExit& exit) const;
  absl::Status EarlyFailuresError(const ProgramExit& exit, int64_t id,
                                  const std::filesystem::path& log_path) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Counts `run`, whose trial this worker left in state `settled` (nullopt:
  // someone else settled it or it was left alone), towards the failures to
  // run in a row: one that ended FAILED or INFEASIBLE without a metric on
  // its own (not stopped, timed out, preempted or taken over) adds one; any
  // other completed, stopped, failed or infeasible trial starts the count
  // again; a trial given back or left changes nothing. FAILED_PRECONDITION,
  // with the tail of `log_path` (the trial's log), once the count reaches
  // max_consecutive_failures; OK otherwise.
  absl::Status CountFailureToRun(std::optional<v1::Trial::State> settled,
                                 const TrialRun& run,
                                 const std::filesystem::path& log_path)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int early_failures_;
  const int max_consecutive_failures_;

  mutable absl::Mutex mu_;
  // The worker's first trials whose programs failed alike, and how the
  // first of them ended; over once one ends otherwise. `early_reached_`:
  // early_failures_ of them failed alike.
  std::vector<int64_t> early_trials_ ABSL_GUARDED_BY(mu_);
  ProgramExit early_exit_ ABSL_GUARDED_BY(mu_);
  bool early_watch_over_ ABSL_GUARDED_BY(mu_) = false;
  bool early_reached_ ABSL_GUARDED_BY(mu_) = false;
  // Trials in a row whose program failed to run.
  int failures_in_a_row_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_WORKER_WORKER_FAILURES_H_
