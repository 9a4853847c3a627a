// The `hypertune` CLI's commands. Each parses its own arguments (after the
// command name) and talks to the server through the SDK's Client.
//
// Errors: usage errors (args.h IsUsageError) make the CLI print the command's
// usage and exit 2; CANCELLED means interrupted (exit 130); any other error
// is printed as `error: CODE: message` with exit status 1.
//
// Thread safety: a command runs on the main thread; the worker starts its
// own threads and joins them before returning.
#ifndef HYPERTUNE_CLI_COMMANDS_H_
#define HYPERTUNE_CLI_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune::cli {

struct CommandContext {
  // As given on the command line (server possibly empty: resolved by Client).
  ClientOptions options;
  const Client& client;
  std::ostream& out;
  std::ostream& err;
  // stdout is a terminal.
  bool interactive = false;
};

using Args = std::vector<std::string>;

absl::Status RunStudyCommand(const CommandContext& context, const Args& args);
absl::Status RunTrialsCommand(const CommandContext& context, const Args& args);
absl::Status RunTrialCommand(const CommandContext& context, const Args& args);
absl::Status RunSuggestCommand(const CommandContext& context, const Args& args);
absl::Status RunReportCommand(const CommandContext& context, const Args& args);
absl::Status RunCompleteCommand(const CommandContext& context,
                                const Args& args);
absl::Status RunHeartbeatCommand(const CommandContext& context,
                                 const Args& args);
absl::Status RunWorkerCommand(const CommandContext& context, const Args& args);
// launch_commands.cc: `launch slurm` (a job array of workers).
absl::Status RunLaunchCommand(const CommandContext& context, const Args& args);
absl::Status RunWatchCommand(const CommandContext& context, const Args& args);
absl::Status RunStopCommand(const CommandContext& context, const Args& args);
// export_commands.cc and optuna_import.cc.
absl::Status RunExportCommand(const CommandContext& context, const Args& args);
absl::Status RunAdminCommand(const CommandContext& context, const Args& args);
absl::Status RunImportCommand(const CommandContext& context, const Args& args);
absl::Status RunImportOptunaCommand(const CommandContext& context,
                                    const Args& args);
// `trials import NAME FILE` (args after "import").
absl::Status RunTrialsImport(const CommandContext& context, const Args& args);
// Copies the fitting COMPLETED trials of `sources` into study `name` as
// warm-start results (study create --warm-start-from).
absl::StatusOr<v1::ImportTrialsResponse> WarmStartFrom(
    const CommandContext& context, const std::string& name,
    const std::vector<std::string>& sources);
// Study names from flag values, each a name or a comma-separated list.
std::vector<std::string> SplitStudyList(const std::vector<std::string>& values);

extern const char kStudyUsage[];
extern const char kTrialsUsage[];
extern const char kTrialUsage[];
extern const char kSuggestUsage[];
extern const char kReportUsage[];
extern const char kCompleteUsage[];
extern const char kHeartbeatUsage[];
extern const char kWorkerUsage[];
extern const char kLaunchUsage[];
extern const char kWatchUsage[];
extern const char kStopUsage[];
extern const char kExportUsage[];
extern const char kAdminUsage[];
extern const char kImportUsage[];
extern const char kImportOptunaUsage[];
extern const char kTrialsImportUsage[];

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_COMMANDS_H_
