// hypertune: the command-line client of hypertuned.
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "trainer_sdk/hypertune.h"

namespace {

using hypertune::cli::Args;
using hypertune::cli::CommandContext;

constexpr char kUsage[] =
    "usage: hypertune [--server HOST:PORT[,HOST:PORT...]] [--token T]\n"
    "                 [--tls-ca F [--tls-cert F --tls-key F]] <command> "
    "[args]\n"
    "\n"
    "Talks to hypertuned at --server, else $HYPERTUNE_SERVER, else\n"
    "127.0.0.1:50051; of several servers sharing a PostgreSQL database, to\n"
    "the one that leads (a standby names it). --token (else $HYPERTUNE_TOKEN) "
    "is the bearer token of\n"
    "servers with auth; prefer the variable, which `ps` does not show.\n"
    "--tls-ca (else $HYPERTUNE_TLS_CA) is the PEM file of the CA that signed\n"
    "the server's certificate: talk TLS. --tls-cert and --tls-key (else\n"
    "$HYPERTUNE_TLS_CERT, $HYPERTUNE_TLS_KEY) are this client's certificate\n"
    "and key, for servers that require one (mutual TLS).\n"
    "\n"
    "Studies:\n"
    "  study create --config FILE [--warm-start-from OTHER[,OTHER...]]\n"
    "               [--transfer-from OTHER[,OTHER...]]\n"
    "                                 create a study from its JSON config\n"
    "  study list                     list the studies\n"
    "  study get NAME                 show a study\n"
    "  study best NAME                show its best trials\n"
    "  study update NAME --max-trials N ...\n"
    "                                 change its budget, lease or search "
    "space\n"
    "  study history NAME             list its updates\n"
    "  study delete NAME              delete a study and its trials\n"
    "  study pause|resume NAME        stop or restart its suggestions\n"
    "  study chown NAME OWNER         give a study to another owner (an\n"
    "                                 admin's call, or its owner's)\n"
    "Trials:\n"
    "  trials NAME [--state S]        list a study's trials\n"
    "  trial enqueue NAME P=V... [--partial]\n"
    "                                 queue a trial to run next\n"
    "  suggest NAME [--count K]       ask for trials to run\n"
    "  report NAME TRIAL_ID --step N METRIC=VALUE...\n"
    "                                 record an intermediate measurement\n"
    "  complete NAME TRIAL_ID METRIC=VALUE... | --infeasible REASON\n"
    "           | --worker-failed REASON\n"
    "                                 finish a trial, or give it back\n"
    "  heartbeat NAME TRIAL_ID [--checkpoint URI]\n"
    "                                 renew a trial's lease\n"
    "  stop NAME TRIAL_ID [--reason TEXT]\n"
    "                                 stop a trial early\n"
    "  watch NAME [--after SEQ]       print trial changes as they happen\n"
    "  trials import NAME FILE        add results from a trials CSV/JSON file\n"
    "                                 as warm-start trials\n"
    "Moving studies:\n"
    "  export NAME > FILE             write a study and its trials (JSON "
    "lines)\n"
    "  import FILE [--name NEW]       recreate an exported study\n"
    "  import-optuna FILE [--study NAME]\n"
    "                                 import studies from an Optuna SQLite "
    "file\n"
    "  admin backup FILE              copy the live database (on the server)\n"
    "Running:\n"
    "  worker NAME [--parallel N] -- CMD [ARG...]\n"
    "                                 run CMD once per trial of the study\n"
    "  launch slurm NAME --workers N [--time T] -- CMD [ARG...]\n"
    "                                 run N workers as a Slurm job array\n"
    "\n"
    "`hypertune COMMAND --help` describes a command. Tables, JSON (protobuf's\n"
    "JSON mapping with the API's field names) or CSV with --format. Errors\n"
    "print `error: CODE: message` and exit 1; usage errors exit 2.\n";

struct Command {
  const char* name;
  absl::Status (*run)(const CommandContext&, const Args&);
  const char* usage;
};

const Command kCommands[] = {
    {"study", hypertune::cli::RunStudyCommand, hypertune::cli::kStudyUsage},
    {"trials", hypertune::cli::RunTrialsCommand, hypertune::cli::kTrialsUsage},
    {"trial", hypertune::cli::RunTrialCommand, hypertune::cli::kTrialUsage},
    {"suggest", hypertune::cli::RunSuggestCommand,
     hypertune::cli::kSuggestUsage},
    {"report", hypertune::cli::RunReportCommand, hypertune::cli::kReportUsage},
    {"complete", hypertune::cli::RunCompleteCommand,
     hypertune::cli::kCompleteUsage},
    {"heartbeat", hypertune::cli::RunHeartbeatCommand,
     hypertune::cli::kHeartbeatUsage},
    {"worker", hypertune::cli::RunWorkerCommand, hypertune::cli::kWorkerUsage},
    {"launch", hypertune::cli::RunLaunchCommand, hypertune::cli::kLaunchUsage},
    {"watch", hypertune::cli::RunWatchCommand, hypertune::cli::kWatchUsage},
    {"stop", hypertune::cli::RunStopCommand, hypertune::cli::kStopUsage},
    {"export", hypertune::cli::RunExportCommand, hypertune::cli::kExportUsage},
    {"import", hypertune::cli::RunImportCommand, hypertune::cli::kImportUsage},
    {"import-optuna", hypertune::cli::RunImportOptunaCommand,
     hypertune::cli::kImportOptunaUsage},
    {"admin", hypertune::cli::RunAdminCommand, hypertune::cli::kAdminUsage},
};

const Command* FindCommand(const std::string& name) {
  for (const Command& command : kCommands) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

int UsageFailure(const std::string& message, const char* usage) {
  std::cerr << "error: " << message << "\n\n" << usage;
  return 2;
}

// Whether `args` ask for help before any "--".
bool WantsHelp(const Args& args) {
  for (const std::string& arg : args) {
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-h") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Args args(argv + 1, argv + argc);
  hypertune::ClientOptions options;
  size_t i = 0;
  // The flags before the command, each `--name value` or `--name=value`.
  const struct {
    const char* name;
    std::string* value;
    const char* wants;
  } kGlobalFlags[] = {
      {"--server", &options.server, "HOST:PORT"},
      {"--token", &options.token, "a token"},
      {"--tls-ca", &options.tls_ca, "a PEM file"},
      {"--tls-cert", &options.tls_cert, "a PEM file"},
      {"--tls-key", &options.tls_key, "a PEM file"},
  };
  for (; i < args.size() && absl::StartsWith(args[i], "-"); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    bool known = false;
    for (const auto& flag : kGlobalFlags) {
      const std::string name = flag.name;
      std::string value;
      if (arg == name) {
        if (i + 1 < args.size()) value = args[++i];
      } else if (absl::StartsWith(arg, name + "=")) {
        value = arg.substr(name.size() + 1);
      } else {
        continue;
      }
      if (value.empty()) {
        return UsageFailure(name + " needs " + flag.wants, kUsage);
      }
      *flag.value = std::move(value);
      known = true;
      break;
    }
    if (!known) return UsageFailure("unknown flag " + arg, kUsage);
  }
  if (i == args.size()) return UsageFailure("no command given", kUsage);
  const std::string& name = args[i];
  Args rest(args.begin() + static_cast<ptrdiff_t>(i) + 1, args.end());
  if (name == "help") {
    const Command* about = rest.empty() ? nullptr : FindCommand(rest[0]);
    std::cout << (about != nullptr ? about->usage : kUsage);
    return 0;
  }
  const Command* command = FindCommand(name);
  if (command == nullptr) {
    return UsageFailure("unknown command \"" + name + "\"", kUsage);
  }
  if (WantsHelp(rest)) {
    std::cout << command->usage;
    return 0;
  }

  hypertune::Client client(options);
  CommandContext context{options, client, std::cout, std::cerr,
                         isatty(STDOUT_FILENO) == 1};
  absl::Status status = command->run(context, rest);
  std::cout.flush();
  if (status.ok()) return 0;
  if (hypertune::cli::IsUsageError(status)) {
    return UsageFailure(std::string(status.message()), command->usage);
  }
  if (status.code() == absl::StatusCode::kCancelled) {
    std::cerr << "hypertune: " << status.message() << "\n";
    return 130;
  }
  std::cerr << "error: " << absl::StatusCodeToString(status.code()) << ": "
            << status.message() << "\n";
  return 1;
}
