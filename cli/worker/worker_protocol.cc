#include "cli/worker/worker_protocol.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace hypertune::cli {
namespace {

constexpr std::string_view kPrefix = "hypertune:";

absl::string_view AV(std::string_view s) { return {s.data(), s.size()}; }

bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '.' || c == '-' || c == '/';
}

// Splits `token` ("name=value") into its name and number.
absl::Status ParseAssignment(std::string_view token, std::string* name,
                             std::string_view* value) {
  size_t eq = token.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", AV(token), "\" is not name=value"));
  }
  std::string_view n = token.substr(0, eq);
  for (char c : n) {
    if (!IsNameChar(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", AV(token),
                       "\": a metric name has letters, digits and \"_.-/\""));
    }
  }
  *name = std::string(n);
  *value = token.substr(eq + 1);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> ParseNumber(std::string_view text) {
  std::string_view digits = text;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  double value = 0.0;
  const char* end = digits.data() + digits.size();
  auto [ptr, ec] = std::from_chars(digits.data(), end, value);
  if (ec == std::errc::invalid_argument || ptr != end) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", AV(text), "\" is not a number"));
  }
  if (ec == std::errc::result_out_of_range) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", AV(text), "\" is out of the range of a double"));
  }
  return value;
}

absl::StatusOr<std::optional<DirectiveLine>> ParseDirectiveLine(
    std::string_view line) {
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(AV(line));
  if (!absl::ConsumePrefix(&rest, AV(kPrefix))) return std::nullopt;
  rest = absl::StripAsciiWhitespace(rest);
  DirectiveLine directive;
  if (absl::ConsumePrefix(&rest, "infeasible=")) {
    directive.kind = DirectiveLine::Kind::kInfeasible;
    directive.value = std::string(rest);
    return std::optional<DirectiveLine>(std::move(directive));
  }
  if (!absl::ConsumePrefix(&rest, "checkpoint=")) return std::nullopt;
  directive.kind = DirectiveLine::Kind::kCheckpoint;
  std::vector<absl::string_view> words =
      absl::StrSplit(rest, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (words.empty() || rest.empty() || rest.front() == ' ' ||
      rest.front() == '\t') {
    return absl::InvalidArgumentError("checkpoint= needs a URI");
  }
  directive.value = std::string(words[0]);
  for (size_t i = 1; i < words.size(); ++i) {
    absl::string_view step = words[i];
    if (i > 1 || !absl::ConsumePrefix(&step, "step=")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", words[i], "\": after checkpoint=URI only step=N may follow"));
    }
    if (!absl::SimpleAtoi(step, &directive.step) || directive.step < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint step \"", step, "\" is not an integer >= 0"));
    }
  }
  return std::optional<DirectiveLine>(std::move(directive));
}

absl::StatusOr<std::optional<MetricsLine>> ParseMetricsLine(
    std::string_view line) {
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(AV(line));
  if (!absl::ConsumePrefix(&rest, AV(kPrefix))) return std::nullopt;
  rest = absl::StripAsciiWhitespace(rest);  // Also a trailing "\r".

  MetricsLine parsed;
  for (absl::string_view piece :
       absl::StrSplit(rest, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    std::string_view token(piece.data(), piece.size());
    std::string name;
    std::string_view value;
    if (absl::Status s = ParseAssignment(token, &name, &value); !s.ok()) {
      return s;
    }
    if (name == "step") {
      int64_t step = 0;
      if (parsed.step.has_value()) {
        return absl::InvalidArgumentError("step appears twice");
      }
      if (!absl::SimpleAtoi(AV(value), &step) || step < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("step \"", AV(value), "\" is not an integer >= 0"));
      }
      parsed.step = step;
      continue;
    }
    absl::StatusOr<double> number = ParseNumber(value);
    if (!number.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric \"", name, "\": ", number.status().message()));
    }
    if (!parsed.metrics.emplace(name, *number).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric \"", name, "\" appears twice"));
    }
  }
  if (parsed.metrics.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no name=value metric after \"", AV(kPrefix), "\""));
  }
  return std::optional<MetricsLine>(std::move(parsed));
}

absl::StatusOr<Metrics> ParseMetricAssignments(
    const std::vector<std::string>& args) {
  if (args.empty()) {
    return absl::InvalidArgumentError("no METRIC=VALUE given");
  }
  Metrics metrics;
  for (const std::string& arg : args) {
    std::string name;
    std::string_view value;
    if (absl::Status s = ParseAssignment(arg, &name, &value); !s.ok()) {
      return s;
    }
    absl::StatusOr<double> number = ParseNumber(value);
    if (!number.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric \"", name, "\": ", number.status().message()));
    }
    if (std::isnan(*number)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metric \"", name,
          "\": NaN cannot be recorded (mark the trial --infeasible)"));
    }
    if (!metrics.emplace(name, *number).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric \"", name, "\" is given twice"));
    }
  }
  return metrics;
}

std::string FormatParameterValue(const v1::ParameterValue& value) {
  switch (value.value_case()) {
    case v1::ParameterValue::kDoubleValue:
      return DoubleText(value.double_value());
    case v1::ParameterValue::kIntValue:
      return absl::StrCat(value.int_value());
    case v1::ParameterValue::kStringValue:
      return value.string_value();
    case v1::ParameterValue::VALUE_NOT_SET:
      break;
  }
  return "";
}

std::vector<std::string> Placeholders(std::string_view arg) {
  std::vector<std::string> names;
  for (size_t open = arg.find('{'); open != std::string_view::npos;
       open = arg.find('{', open + 1)) {
    const size_t close = arg.find('}', open + 1);
    if (close == std::string_view::npos) break;
    // ${NAME} is a shell's variable, not a placeholder.
    if (open > 0 && arg[open - 1] == '$') continue;
    const std::string_view name = arg.substr(open + 1, close - open - 1);
    const bool identifier =
        !name.empty() &&
        (absl::ascii_isalpha(name.front()) || name.front() == '_') &&
        std::all_of(name.begin(), name.end(), [](char c) {
          return absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '-';
        });
    if (identifier) names.emplace_back(name);
  }
  return names;
}

absl::Status CheckPlaceholders(const std::vector<std::string>& command,
                               const v1::StudySpec& spec) {
  std::vector<std::string> known;
  for (const v1::ParameterSpec& p : spec.parameters())
    known.push_back(p.name());
  for (size_t i = 0; i < command.size(); ++i) {
    for (const std::string& name : Placeholders(command[i])) {
      if (std::find(known.begin(), known.end(), name) != known.end()) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "worker command: {", name, "} in argument ", i, " (\"", command[i],
          "\") is not a parameter of the study (its parameters: ",
          absl::StrJoin(known, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

std::string SubstituteParameters(std::string_view arg,
                                 const ParameterValues& parameters,
                                 const v1::StudySpec* spec) {
  std::string out;
  size_t i = 0;
  while (i < arg.size()) {
    size_t open = arg.find('{', i);
    if (open == std::string_view::npos) break;
    out.append(arg.substr(i, open - i));
    size_t close = arg.find('}', open + 1);
    if (close == std::string_view::npos) {
      i = open;
      break;
    }
    std::string_view name = arg.substr(open + 1, close - open - 1);
    const v1::ParameterValue* match = nullptr;
    for (const v1::ParameterValue& p : parameters) {
      if (p.name() == name) match = &p;
    }
    const bool inactive =
        match == nullptr && spec != nullptr &&
        std::any_of(
            spec->parameters().begin(), spec->parameters().end(),
            [&](const v1::ParameterSpec& p) { return p.name() == name; });
    if (match != nullptr || inactive) {
      if (match != nullptr) out += FormatParameterValue(*match);
      i = close + 1;
    } else {
      // Not a parameter: keep the brace and look again after it, so that
      // "{{lr}}" still substitutes the inner placeholder.
      out += '{';
      i = open + 1;
    }
  }
  out.append(arg.substr(std::min(i, arg.size())));
  return out;
}

std::string ParametersJson(const ParameterValues& parameters) {
  nlohmann::ordered_json object = nlohmann::ordered_json::object();
  for (const v1::ParameterValue& p : parameters) {
    switch (p.value_case()) {
      case v1::ParameterValue::kDoubleValue:
        object[p.name()] = p.double_value();
        break;
      case v1::ParameterValue::kIntValue:
        object[p.name()] = p.int_value();
        break;
      case v1::ParameterValue::kStringValue:
        object[p.name()] = p.string_value();
        break;
      case v1::ParameterValue::VALUE_NOT_SET:
        object[p.name()] = nullptr;
        break;
    }
  }
  return object.dump();
}

}  // namespace hypertune::cli
