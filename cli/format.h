// Output of the `hypertune` CLI: protobuf JSON with the proto's own field
// names, aligned text tables, and CSV; plus the grids (rows of cells) that
// the study and trial commands print in those formats.
//
// Thread safety: pure functions.
#ifndef HYPERTUNE_CLI_FORMAT_H_
#define HYPERTUNE_CLI_FORMAT_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/message.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::cli {

using Row = std::vector<std::string>;
using Grid = std::vector<Row>;  // The first row is the header.

enum class OutputFormat { kTable, kJson, kCsv };

// The --format value (`flag`; `fallback` when absent) among `allowed`; a
// usage error listing them otherwise.
absl::StatusOr<OutputFormat> ParseFormat(
    const std::optional<std::string>& flag, OutputFormat fallback,
    std::initializer_list<OutputFormat> allowed);

// Trial states from --state values, each a name or a comma-separated list
// of names in any case ("completed,INFEASIBLE"). Usage error naming a bad one.
absl::StatusOr<std::vector<v1::Trial::State>> ParseTrialStates(
    const std::vector<std::string>& values);

// `message` in protobuf's JSON mapping with snake_case field names, indented
// as protobuf's add_whitespace indents, ending in a newline; but int64 and
// uint64 values as JSON numbers ("id": 7), which that mapping quotes
// ("id": "7") for readers whose numbers are doubles (JavaScript's), and a
// negative zero as -0.0. Protobuf's readers, ParseJsonConfig and Python's
// json read either form exactly. Printed by the one printer of the service
// and the CLI, common/proto_json.h; never fails (the status is for callers
// written when it could).
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);
// ToJson on one line, without the trailing newline (JSON Lines).
absl::StatusOr<std::string> ToJsonLine(
    const google::protobuf::Message& message);

// `json` with each number -0 (outside strings) written -0.0, for JSON read
// from people and files. Protobuf's JSON reader, like most others, reads
// "-0" as the integer 0, losing the sign of a double's negative zero;
// "-0.0" keeps it.
std::string KeepNegativeZero(std::string_view json);

// (Reading JSON: cli/json_config.h.)

// The grid as text: columns left-aligned to their widest cell, two spaces
// apart, no trailing blanks; one line per row ending in "\n".
std::string FormatTable(const Grid& grid);

// A number for humans: up to 6 significant digits.
std::string FormatShort(double value);

// "2024-05-01 12:03:04" (UTC) for unix milliseconds; "" for 0.
std::string FormatTimeMs(int64_t unix_ms);

// One row per trial under a header: ID, STATE, each parameter (the study's
// in order, then any others the trials carry), each final metric (the
// study's, then the trials' others by name), the latest STEP, then FEASIBLE
// where the study has constraints, and REASON. Short numbers; `study` may be
// null. (CSV has its own schema: common/trial_csv.h.)
Grid TrialGrid(const v1::Study* study, const std::vector<v1::Trial>& trials);

// Why `trial` is in its state, where its state has a why: the stop reason
// of a STOPPING, STOPPED or PAUSED trial, the infeasible reason of an
// INFEASIBLE one, the failure reason of a FAILED one or of one given back to
// the queue (REQUESTED); "" otherwise. A reason left from an earlier attempt
// or state (a kill that was given back, a pause that was promoted) is not
// the trial's now.
std::string StateReason(const v1::Trial& trial);

// `hypertune watch`'s line for `event`: "#SEQ trial ID STATE [step S]
// [OBJECTIVE=V] [(StateReason)]", with the final measurement's step and
// value, else the latest intermediate one's.
std::string TrialEventLine(const v1::TrialEvent& event,
                           const std::string& objective);

// One row per study: NAME STATE ALGORITHM OBJECTIVE TRIALS ACTIVE CREATED.
Grid StudyListGrid(const std::vector<v1::Study>& studies);

// A two-column description of one study (spec, budget, trial counts).
Grid StudyDetailGrid(const v1::Study& study);

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_FORMAT_H_
