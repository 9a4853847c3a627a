// The command of a W&B sweep, run by `hypertune worker NAME --wandb` once
// per trial with W&B's macros (docs/wandb-sweeps.md):
//   ${env}                    /usr/bin/env
//   ${interpreter}            python3
//   ${program}                the sweep's program
//   ${envvar:NAME}            $NAME of the worker's environment
//   ${args}                   --name=value for each parameter
//   ${args_no_hyphens}        name=value
//   ${args_no_boolean_flags}  --name=value, but a boolean parameter is
//                             --name when True and left out when False
//   ${args_json}              the parameters as one JSON object (nested
//                             parameters nested again)
//   ${args_json_file}         the path of a file holding that JSON, written
//                             before the program starts and removed after
// A macro is a whole word of the command, as in W&B; other words are kept
// as they are. Values are written as `{param}` writes them (the integer,
// the shortest decimal of a double, the category; booleans True/False).
// The command and program come from the study's wandb.* attributes
// (wandb_sweep.h), so every worker of the sweep runs the same command.
//
// Thread safety: pure functions; a WandbRun is owned by one thread.
#ifndef HYPERTUNE_CLI_WORKER_WANDB_COMMAND_H_
#define HYPERTUNE_CLI_WORKER_WANDB_COMMAND_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/worker/worker_protocol.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::cli {

// The study's W&B command (W&B's default, ${env} ${interpreter} ${program}
// ${args}, when the sweep gave none) with the macros that are the same for
// every trial expanded; the per-trial ${args...} macros are kept.
// FAILED_PRECONDITION when the study was not created from a W&B sweep, or
// when the command uses ${program} and the sweep has none; NOT_FOUND when
// the program is not a file (relative to the working directory, as for
// `wandb agent`) or an ${envvar:NAME} is unset in `getenv`.
absl::StatusOr<std::vector<std::string>> WandbCommandTemplate(
    const v1::Study& study,
    const std::function<const char*(const char*)>& getenv = ::getenv);

// The parameters as W&B's ${args_json} writes them: a JSON object whose
// nested parameters ("optimizer.lr") are nested objects, booleans JSON
// booleans, integer-valued numbers of a list of values integers.
std::string WandbArgsJson(const v1::Study& study,
                          const ParameterValues& parameters);

// `command` (from WandbCommandTemplate) for one trial: each ${args...}
// macro replaced by its words; ${args_json_file} by `json_file`.
std::vector<std::string> ExpandWandbCommand(
    const std::vector<std::string>& command, const v1::Study& study,
    const ParameterValues& parameters, const std::string& json_file);

// One trial's command, holding the ${args_json_file} file (when the command
// has that macro) from Prepare until it is destroyed.
class WandbRun {
 public:
  // Expands `command` and writes `json_file` if the command names it.
  // INTERNAL when the file cannot be written.
  static absl::StatusOr<WandbRun> Prepare(
      const std::vector<std::string>& command, const v1::Study& study,
      const ParameterValues& parameters, const std::string& json_file);

  WandbRun(WandbRun&& other) noexcept;
  WandbRun& operator=(WandbRun&&) = delete;
  WandbRun(const WandbRun&) = delete;
  ~WandbRun();

  const std::vector<std::string>& argv() const { return argv_; }

 private:
  WandbRun() = default;
  std::vector<std::string> argv_;
  // The file to remove; empty when none was written.
  std::string written_;
};

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_WORKER_WANDB_COMMAND_H_
