// What `hypertune worker` does with a trial once its program has ended: a
// pure decision from how the program ended and the metrics it printed.
//
// Thread safety: pure function.
#ifndef HYPERTUNE_CLI_WORKER_TRIAL_OUTCOME_H_
#define HYPERTUNE_CLI_WORKER_TRIAL_OUTCOME_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/worker/subprocess.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune::cli {

// One run of a trial's program as the worker saw it.
struct TrialRun {
  ProgramExit exit;
  // The last metrics line without step=, if any.
  std::optional<Metrics> final_metrics;
  // The last metrics line with step=, and its step.
  std::optional<Metrics> step_metrics;
  int64_t last_step = 0;
  // The signal (SIGINT/SIGTERM) that told the worker to stop and that it
  // passed on to the program; 0 if none.
  int worker_signal = 0;
  // The server asked the trial to stop early and the worker ended it.
  bool stop_requested = false;
  // The lease was lost while the program ran (the trial went to another
  // worker) and the worker ended the program.
  bool lease_lost = false;
  // The program declared its trial infeasible (`hypertune: infeasible=...`),
  // with this reason.
  std::optional<std::string> infeasible_reason;
  // The program's last line of output that was not a `hypertune:` line
  // (stderr or stdout), for a failure's reason; "" if none.
  std::string last_line;
};

struct TrialOutcome {
  enum class Kind {
    kComplete,      // CompleteTrial with `metrics` at `step`.
    kInfeasible,    // CompleteTrial infeasible with `reason`: the parameters.
    kFailed,        // CompleteTrial failed with `reason`: the program, not
                    // the parameters; FAILED for good, out of the model.
    kWorkerFailed,  // CompleteTrial worker_failed with `reason`: not the
                    // parameters; the server queues the trial again.
    kLeave,         // Nothing: the lease runs out and the server decides.
  };
  Kind kind = Kind::kLeave;
  // kWorkerFailed by the worker's SIGTERM or SIGINT: the machine is being
  // taken away or the worker stopped by hand, which the server counts as a
  // preemption, not against the trial's retries.
  bool preempted = false;
  Metrics metrics;
  int64_t step = 0;
  std::string reason;
};

// Decides the trial's fate (DESIGN.md, "Trial states"). `required` are the
// metrics a result needs (the study's objectives, the primary first, then
// its constraints); final metrics without one of them, or with a NaN, make
// the trial infeasible. A trial stopped early needs only the primary
// objective.
//
// Infeasible (the parameters' doing): a NaN metric, a trial the program
// declared infeasible, a timeout and a crash (a signal a program raises
// through its own fault: SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP,
// SIGSYS). Failed (the program's doing, not the parameters'): a non-zero
// exit status ("exit status N: <its last line>") and an exit 0 without a
// metric. Any other signal came from outside (an operator, the OOM killer,
// a scheduler), as does the worker's own SIGTERM ("worker preempted") or
// SIGINT passed on: the worker failed, and the trial goes back to the queue
// unless the program finished it cleanly.
TrialOutcome DecideOutcome(const TrialRun& run,
                           const std::vector<std::string>& required);

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_WORKER_TRIAL_OUTCOME_H_
