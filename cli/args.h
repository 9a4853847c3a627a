// Command-line parsing for the `hypertune` CLI, on CLI11 (libcli11-dev):
// flags of the form `--name value` / `--name=value`, positional arguments,
// and everything after `--` kept verbatim (the worker's command). Errors are
// usage errors: the CLI prints them with the command's usage and exits 2.
//
// Thread safety: pure functions and value types.
#ifndef HYPERTUNE_CLI_ARGS_H_
#define HYPERTUNE_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hypertune::cli {

struct FlagSpec {
  // Without the leading "--".
  std::string name;
  bool takes_value = true;
  // May be given more than once (GetAll).
  bool repeated = false;
};

struct ParsedArgs {
  std::vector<std::string> positional;
  // Everything after "--", verbatim.
  std::vector<std::string> rest;
  bool has_separator = false;
  // Flag name -> its values in order ("" for flags without a value).
  std::map<std::string, std::vector<std::string>, std::less<>> flags;

  bool Has(std::string_view flag) const;
  // The flag's value, nullopt if absent.
  std::optional<std::string> Get(std::string_view flag) const;
  std::vector<std::string> GetAll(std::string_view flag) const;
  // The flag as an integer >= `min`, `fallback` if absent; a usage error
  // naming the flag otherwise.
  absl::StatusOr<int64_t> GetInt(std::string_view flag, int64_t fallback,
                                 int64_t min) const;
  // The flag as a finite number > 0, nullopt if absent.
  absl::StatusOr<std::optional<double>> GetPositiveDouble(
      std::string_view flag) const;
};

// Parses `args` against `flags`. A flag's value is the next token, whatever
// it looks like, or what follows "=" ("--name=" is the empty value). `--`
// ends the flags when allow_separator; a token "-5" (a number) is
// positional. Usage errors for an unknown flag, a missing or unexpected
// value, a repeated non-repeatable flag.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& flags,
                                     bool allow_separator = false);

// An INVALID_ARGUMENT status marked as a misuse of the command line.
absl::Status UsageError(std::string_view message);
bool IsUsageError(const absl::Status& status);
// `status` as a usage error when it is INVALID_ARGUMENT (a bad argument
// value found by a parser), unchanged otherwise.
absl::Status AsUsageError(absl::Status status);

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_ARGS_H_
