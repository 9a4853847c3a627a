#include "cli/args.h"

#include <CLI/CLI.hpp>
#include <cmath>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hypertune::cli {
namespace {

constexpr char kUsagePayload[] = "type.hypertune.dev/cli.UsageError";

absl::string_view AV(std::string_view s) { return {s.data(), s.size()}; }

// CLI11 reads "-5" as a positional but "-.5" or "-inf" as an unknown short
// flag, which it leaves among the extras: those are positionals too.
bool LooksNumeric(std::string_view token) {
  double ignored;
  return absl::SimpleAtod(AV(token), &ignored);
}

// CLI11 reads "--name=" as "--name" and takes the next token for its value,
// where ours is the empty value: a NUL after the "=" (no argv string holds
// one) keeps the value, and is dropped from what CLI11 hands back.
constexpr char kEmptyValue = '\0';

void DropEmptyValueMark(std::string& text) {
  if (text.ends_with(kEmptyValue)) text.pop_back();
}

// CLI11's ArgumentMismatch as our usage error. CLI11 names the option first:
// "--count: 1 required TEXT missing" (no value left on the line) or
// "verbose was given a disallowed flag override" (--verbose=1).
absl::Status ArgumentMismatch(std::string_view what,
                              const std::vector<FlagSpec>& flags) {
  std::string_view named = what.starts_with("--") ? what.substr(2) : what;
  for (const FlagSpec& spec : flags) {
    if (named.starts_with(spec.name) &&
        named.substr(spec.name.size()).find_first_of(": ") == 0) {
      return UsageError(absl::StrCat(
          "--", spec.name,
          spec.takes_value ? " needs a value" : " takes no value"));
    }
  }
  return UsageError(what);
}

}  // namespace

absl::Status UsageError(std::string_view message) {
  absl::Status status = absl::InvalidArgumentError(AV(message));
  status.SetPayload(kUsagePayload, absl::Cord());
  return status;
}

bool IsUsageError(const absl::Status& status) {
  return status.GetPayload(kUsagePayload).has_value();
}

absl::Status AsUsageError(absl::Status status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) return status;
  return UsageError(std::string(status.message()));
}

bool ParsedArgs::Has(std::string_view flag) const {
  return flags.find(flag) != flags.end();
}

std::optional<std::string> ParsedArgs::Get(std::string_view flag) const {
  auto it = flags.find(flag);
  if (it == flags.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> ParsedArgs::GetAll(std::string_view flag) const {
  auto it = flags.find(flag);
  if (it == flags.end()) return {};
  return it->second;
}

absl::StatusOr<int64_t> ParsedArgs::GetInt(std::string_view flag,
                                           int64_t fallback,
                                           int64_t min) const {
  std::optional<std::string> text = Get(flag);
  if (!text.has_value()) return fallback;
  int64_t value = 0;
  if (!absl::SimpleAtoi(*text, &value) || value < min) {
    return UsageError(absl::StrCat("--", AV(flag), ": \"", *text,
                                   "\" is not an integer >= ", min));
  }
  return value;
}

absl::StatusOr<std::optional<double>> ParsedArgs::GetPositiveDouble(
    std::string_view flag) const {
  std::optional<std::string> text = Get(flag);
  if (!text.has_value()) return std::nullopt;
  double value = 0;
  if (!absl::SimpleAtod(*text, &value) || !std::isfinite(value) || value <= 0) {
    return UsageError(
        absl::StrCat("--", AV(flag), ": \"", *text, "\" is not a number > 0"));
  }
  return value;
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& flags,
                                     bool allow_separator) {
  CLI::App app;
  // The commands answer --help before parsing (main.cc).
  app.set_help_flag();
  // Unknown flags, positionals and the "--" with what follows it stay in
  // app.remaining(), in order, for the loop below.
  app.allow_extras();
  std::vector<CLI::Option*> options;
  ParsedArgs parsed;
  try {
    for (const FlagSpec& spec : flags) {
      const std::string name = "--" + spec.name;
      CLI::Option* option = spec.takes_value
                                ? app.add_option(name)->allow_extra_args(false)
                                : app.add_flag(name)->disable_flag_override();
      // Counted below, to say "is given twice" in our words.
      option->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      options.push_back(option);
    }
    // CLI11 parses a reversed vector (it pops from the back).
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    for (std::string& token : reversed) {
      if (token.starts_with("--") && token.ends_with('=')) {
        token.push_back(kEmptyValue);
      }
    }
    app.parse(std::move(reversed));
  } catch (const CLI::ArgumentMismatch& e) {
    return ArgumentMismatch(e.what(), flags);
  } catch (const CLI::Error& e) {
    return UsageError(e.what());
  }
  for (size_t i = 0; i < flags.size(); ++i) {
    const FlagSpec& spec = flags[i];
    std::vector<std::string> values = options[i]->results();
    if (values.empty()) continue;
    for (std::string& value : values) DropEmptyValueMark(value);
    if (values.size() > 1 && !spec.repeated) {
      return UsageError(absl::StrCat("--", spec.name, " is given twice"));
    }
    // A flag without a value reads "" (CLI11 records "true").
    if (!spec.takes_value) values.assign(values.size(), "");
    parsed.flags[spec.name] = std::move(values);
  }
  for (std::string& token : app.remaining()) {
    DropEmptyValueMark(token);
    if (parsed.has_separator) {
      parsed.rest.push_back(std::move(token));
    } else if (token == "--") {
      if (!allow_separator) return UsageError("unexpected \"--\"");
      parsed.has_separator = true;
    } else if (token.size() > 1 && token[0] == '-' && !LooksNumeric(token)) {
      return UsageError(
          absl::StrCat("unknown flag ", token.substr(0, token.find('='))));
    } else {
      parsed.positional.push_back(std::move(token));
    }
  }
  return parsed;
}

}  // namespace hypertune::cli
