// `hypertune admin backup FILE`: the server's operator's commands.
#include <chrono>

#include "absl/strings/str_cat.h"
#include "cli/args.h"
#include "cli/commands.h"

namespace hypertune::cli {

const char kAdminUsage[] =
    "usage: hypertune admin backup [--overwrite] FILE\n"
    "\n"
    "backup has hypertuned copy its live database to FILE, a file in the\n"
    "server's backup directory (hypertuned --backup-dir, default the\n"
    "database's folder; a relative FILE is taken in it), with SQLite's\n"
    "online backup while it keeps serving; `hypertuned --db FILE` on the\n"
    "copy starts as of that moment. An existing FILE is refused unless\n"
    "--overwrite, which replaces only an earlier backup. With auth on, a\n"
    "token whose owner is admin.\n";

absl::Status RunAdminCommand(const CommandContext& context, const Args& args) {
  if (args.empty() || args[0] != "backup") {
    return UsageError(args.empty() ? "admin needs a subcommand"
                                   : absl::StrCat("unknown admin subcommand \"",
                                                  args[0], "\""));
  }
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(Args(args.begin() + 1, args.end()),
                {FlagSpec{"overwrite", /*takes_value=*/false}});
  if (!parsed.ok()) return parsed.status();
  if (parsed->positional.size() != 1) {
    return UsageError("admin backup takes one FILE");
  }
  // A large database takes longer than an ordinary call's deadline.
  ClientOptions options = context.options;
  options.call_timeout = std::chrono::hours(24);
  options.max_attempts = 1;
  const Client client(options);
  absl::StatusOr<v1::BackupResponse> done =
      client.Backup(parsed->positional[0], parsed->Has("overwrite"));
  if (!done.ok()) return done.status();
  context.out << "backed up to " << done->destination_path() << " ("
              << done->bytes() << " bytes in " << done->duration_ms()
              << " ms)\n";
  return absl::OkStatus();
}

}  // namespace hypertune::cli
