// What `hypertune worker` does with a trial once its program has ended: a
// pure decision from how the program ended and the metrics it printed.
//
// Thread safety: pure function.
#ifndef HYPERTUNE_TRAINER_SDK_CLI_TRIAL_OUTCOME_H_
#define HYPERTUNE_TRAINER_SDK_CLI_TRIAL_OUTCOME_H_

#include <cstdint>
#include <optional>
#include <string>

#include "trainer_sdk/cli/subprocess.h"
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
  // The worker was told to stop (SIGINT/SIGTERM) and passed it on.
  bool interrupted = false;
  // The server asked the trial to stop early and the worker ended it.
  bool stop_requested = false;
};

struct TrialOutcome {
  enum class Kind {
    kComplete,    // CompleteTrial with `metrics` at `step`.
    kInfeasible,  // CompleteTrial infeasible with `reason`.
    kLeave,       // Nothing: the lease runs out and the server decides.
  };
  Kind kind = Kind::kLeave;
  Metrics metrics;
  int64_t step = 0;
  std::string reason;
};

// Decides the trial's fate. `objective` is the study's first metric; final
// metrics without it, or with a NaN, make the trial infeasible.
TrialOutcome DecideOutcome(const TrialRun& run, const std::string& objective);

}  // namespace hypertune::cli

#endif  // HYPERTUNE_TRAINER_SDK_CLI_TRIAL_OUTCOME_H_
