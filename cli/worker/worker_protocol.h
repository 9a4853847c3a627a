// The contract between `hypertune worker` and the program it runs, as pure
// functions: the metrics lines the program prints, the `{param}` placeholders
// in its arguments, and the HYPERTUNE_PARAMS JSON in its environment. Also
// the METRIC=VALUE lists of `hypertune report|complete`.
//
// Thread safety: pure functions.
#ifndef HYPERTUNE_CLI_WORKER_WORKER_PROTOCOL_H_
#define HYPERTUNE_CLI_WORKER_WORKER_PROTOCOL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/trial_csv.h"
#include "hypertune/v1/hypertune.pb.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune::cli {

using ParameterValues = google::protobuf::RepeatedPtrField<v1::ParameterValue>;

// A line `hypertune: name=value [name=value ...] [step=N]`.
struct MetricsLine {
  Metrics metrics;
  // Set for an intermediate measurement; unset for final metrics.
  std::optional<int64_t> step;
};

// Returns nullopt when `line` is not a metrics line (does not start with
// "hypertune:" after optional blanks), the parsed line when it is one, and
// INVALID_ARGUMENT naming the bad token when it is one but malformed. Values
// may be inf/-inf/nan (in any case); step is an integer >= 0.
absl::StatusOr<std::optional<MetricsLine>> ParseMetricsLine(
    std::string_view line);

// What a program tells the worker besides metrics, on a line of its own:
//   hypertune: infeasible=REASON        the parameters are bad (the rest of
//                                       the line is the reason)
//   hypertune: checkpoint=URI [step=N]  resume the trial from URI, which
//                                       holds step N (default: the latest
//                                       measured step)
struct DirectiveLine {
  enum class Kind { kInfeasible, kCheckpoint };
  Kind kind = Kind::kInfeasible;
  // The reason, or the URI.
  std::string value;
  int64_t step = 0;
};

// Returns nullopt when `line` is no directive (a metrics line or any other
// line), the directive when it is one, and INVALID_ARGUMENT when it is a
// malformed one (no URI, a step that is not an integer >= 0, extra words).
// A metric can therefore not be called "infeasible" or "checkpoint".
absl::StatusOr<std::optional<DirectiveLine>> ParseDirectiveLine(
    std::string_view line);

// Parses a whole decimal or exponent number, optionally signed, including
// inf, infinity and nan in any case. INVALID_ARGUMENT otherwise.
absl::StatusOr<double> ParseNumber(std::string_view text);

// Parses `name=value` arguments (`hypertune report|complete`). Errors name
// the argument: not name=value, not a number, NaN, or a repeated name.
// INVALID_ARGUMENT if `args` is empty.
absl::StatusOr<Metrics> ParseMetricAssignments(
    const std::vector<std::string>& args);

// The shortest decimal that reads back as `value` ("inf", "nan" too).
using ::hypertune::DoubleText;

// The value as a program argument: the integer, DoubleText of a double,
// the category string; "" when unset.
std::string FormatParameterValue(const v1::ParameterValue& value);

// The placeholders of `arg`: each `{name}` whose name looks like a
// parameter's (a letter or '_' first, then letters, digits and "._-"), in
// order. Braces around anything else (JSON) and shell variables (${NAME})
// are not placeholders.
std::vector<std::string> Placeholders(std::string_view arg);

// OK if every placeholder of `command` names a parameter of `spec`;
// INVALID_ARGUMENT naming the placeholder, its argument and the parameters
// otherwise (checked before any trial is taken).
absl::Status CheckPlaceholders(const std::vector<std::string>& command,
                               const v1::StudySpec& spec);

// Replaces each `{name}` in `arg` whose name is a parameter by its value
// (FormatParameterValue); other braces are kept as they are. With `spec`, a
// parameter of the study that the trial lacks (inactive under its parent's
// value) is replaced by the empty string.
std::string SubstituteParameters(std::string_view arg,
                                 const ParameterValues& parameters,
                                 const v1::StudySpec* spec = nullptr);

// HYPERTUNE_PARAMS: a flat JSON object {name: value} in parameter order;
// integers without a fraction, doubles as JSON numbers, categories as
// strings.
std::string ParametersJson(const ParameterValues& parameters);

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_WORKER_WORKER_PROTOCOL_H_
