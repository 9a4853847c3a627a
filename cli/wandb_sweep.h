// A Weights & Biases sweep configuration (the YAML file `wandb sweep` reads)
// made a hypertune study: `hypertune study create --from-wandb sweep.yaml`.
//
// What maps (docs/wandb-sweeps.md has the table):
//   method bayes|random|grid   -> GP_BANDIT | RANDOM | GRID
//   metric {name, goal}        -> the one objective (goal minimize by default)
//   metrics [{name, goal}...]  -> several objectives (a Pareto front)
//   parameters                 -> the search space; a nested `parameters`
//                                 block names its children "outer.inner"
//   early_terminate hyperband  -> ASHA (W&B's hyperband is one bracket that
//                                 stops, never pauses), when its rungs are
//                                 W&B's bands exactly
//   run_cap                    -> max_trials
//   name                       -> the study's name (unless one is given)
//   program, command, project, entity, description
//                              -> the study's attributes wandb.* (the worker
//                                 runs `command` from them: wandb_command.h)
// A distribution is mapped only where hypertune draws from the same set with
// the same scale (uniform, int_uniform, log_uniform(_values),
// inv_log_uniform(_values), q_uniform, q_log_uniform(_values) with q = 1,
// values, value); the rest (normal, beta, probabilities...), metric targets
// and W&B's Launch keys are refused by name. Every problem names the key's
// path and its line, all of them in one answer.
//
// Pure functions of the text; thread-safe.
#ifndef HYPERTUNE_CLI_WANDB_SWEEP_H_
#define HYPERTUNE_CLI_WANDB_SWEEP_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::cli {

// The study attributes that keep what the worker needs to run the sweep's
// command, and what hypertune does not use but keeps.
inline constexpr char kWandbProgram[] = "wandb.program";
// The sweep's `command` as a JSON array of strings; absent: W&B's default,
// ${env} ${interpreter} ${program} ${args}.
inline constexpr char kWandbCommand[] = "wandb.command";
// A JSON array of the parameters whose values are YAML booleans (held as
// the categories "True" and "False", as Python writes them).
inline constexpr char kWandbBooleans[] = "wandb.booleans";

struct WandbSweep {
  // name, spec and attributes; ready for CreateStudy.
  v1::Study study;
  // What was read and kept without effect on the search, one line each
  // (e.g. "project: kept as attribute wandb.project"), for the user.
  std::vector<std::string> notes;
};

// Reads the sweep configuration `yaml`. `source` names the file in errors;
// `name`, when not empty, is the study's name instead of the sweep's.
// INVALID_ARGUMENT "SOURCE:LINE: PATH: PROBLEM" (several: "SOURCE: N
// problems:" then one "  SOURCE:LINE: PATH: PROBLEM" per line) for a YAML
// syntax error, an unknown key, a distribution or key hypertune cannot
// honour exactly, or a value of the wrong type.
absl::StatusOr<WandbSweep> ParseWandbSweep(std::string_view yaml,
                                           std::string_view source,
                                           std::string_view name = "");

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_WANDB_SWEEP_H_
