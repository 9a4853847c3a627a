// What `hypertune worker` does with a trial once its program has ended: a
// pure decision from how the program ended and the metrics it printed.
//
// Thread safety: pure function.
#ifndef HYPERTUNE_CLI_TRIAL_OUTCOME_H_
#define HYPERTUNE_CLI_TRIAL_OUTCOME_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/subprocess.h"
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
};

struct TrialOutcome {
  enum class Kind {
    kComplete,      // CompleteTrial with `metrics` at `step`.
    kInfeasible,    // CompleteTrial infeasible with `reason`: the parameters.
    kWorkerFailed,  // CompleteTrial worker_failed with `reason`: not the
                    // parameters; the server queues the trial again.
    kLeave,         // Nothing: the lease runs out and the server decides.
  };
  Kind kind = Kind::kLeave;
  // kWorkerFailed by SIGTERM: the machine is being taken away, which the
  // server counts as a preemption, not against the trial's retries.
  bool preempted = false;
  Metrics metrics;
  int64_t step = 0;
  std::string reason;
};

// Decides the trial's fate. `required` are the metrics a result needs (the
// study's objectives, the primary first, then its constraints); final
// metrics without one of them, or with a NaN, make the trial infeasible. A
// trial stopped early needs only the primary objective.
//
// A timeout, a non-zero exit and a crash (a signal a program raises through
// its own fault: SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS)
// are the parameters' doing: infeasible. Any other signal came from outside
// (an operator, the OOM killer, a scheduler), as does the worker's own
// SIGTERM ("worker preempted") or SIGINT passed on: the worker failed, and
// the trial goes back to the queue unless the program finished it cleanly.
TrialOutcome DecideOutcome(const TrialRun& run,
                           const std::vector<std::string>& required);

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_TRIAL_OUTCOME_H_
