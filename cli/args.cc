#include "cli/args.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hypertune::cli {
namespace {

constexpr char kUsagePayload[] = "type.hypertune.dev/cli.UsageError";

absl::string_view AV(std::string_view s) { return {s.data(), s.size()}; }

bool LooksNumeric(std::string_view token) {
  double ignored;
  return absl::SimpleAtod(AV(token), &ignored);
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
  ParsedArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& token = args[i];
    if (token == "--") {
      if (!allow_separator) return UsageError("unexpected \"--\"");
      parsed.has_separator = true;
      parsed.rest.assign(args.begin() + static_cast<ptrdiff_t>(i) + 1,
                         args.end());
      break;
    }
    if (token.size() < 2 || token[0] != '-' || LooksNumeric(token)) {
      parsed.positional.push_back(token);
      continue;
    }
    if (token[1] != '-') {
      return UsageError(absl::StrCat("unknown flag ", token));
    }
    std::string_view body = std::string_view(token).substr(2);
    std::optional<std::string> inline_value;
    if (size_t eq = body.find('='); eq != std::string_view::npos) {
      inline_value = std::string(body.substr(eq + 1));
      body = body.substr(0, eq);
    }
    auto spec = std::find_if(flags.begin(), flags.end(),
                             [&](const FlagSpec& f) { return f.name == body; });
    if (spec == flags.end()) {
      return UsageError(absl::StrCat("unknown flag --", AV(body)));
    }
    std::string value;
    if (spec->takes_value) {
      if (inline_value.has_value()) {
        value = *inline_value;
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return UsageError(absl::StrCat("--", spec->name, " needs a value"));
      }
    } else if (inline_value.has_value()) {
      return UsageError(absl::StrCat("--", spec->name, " takes no value"));
    }
    std::vector<std::string>& values = parsed.flags[spec->name];
    if (!values.empty() && !spec->repeated) {
      return UsageError(absl::StrCat("--", spec->name, " is given twice"));
    }
    values.push_back(std::move(value));
  }
  return parsed;
}

}  // namespace hypertune::cli
