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

// `message` in protobuf's JSON mapping with snake_case field names, indented,
// ending in a newline.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);
// ToJson on one line, without the trailing newline (JSON Lines).
absl::StatusOr<std::string> ToJsonLine(const google::protobuf::Message& message);

// Parses `json` (the JSON mapping; unknown fields are errors) into `message`.
// INVALID_ARGUMENT naming `source` and protobuf's complaint.
absl::Status FromJson(std::string_view json, std::string_view source,
                      google::protobuf::Message* message);

// One CSV field (RFC 4180): quoted when it holds a comma, a double quote, a
// CR or LF, or leading/trailing blanks; double quotes doubled.
std::string CsvField(std::string_view field);
// The grid as CSV, one line per row ending in "\n".
std::string FormatCsv(const Grid& grid);

// The grid as text: columns left-aligned to their widest cell, two spaces
// apart, no trailing blanks; one line per row ending in "\n".
std::string FormatTable(const Grid& grid);

// A number for humans: up to 6 significant digits.
std::string FormatShort(double value);

// "2024-05-01 12:03:04" (UTC) for unix milliseconds; "" for 0.
std::string FormatTimeMs(int64_t unix_ms);

enum class GridStyle {
  kTable,  // Upper-case fixed headers, short numbers, fewer columns.
  kCsv,    // Lower-case headers, exact numbers, every column.
};

// The parameter and metric columns of a trial grid: the study's parameters
// in order, then any others the trials carry; the study's metrics, then the
// trials' other final metrics by name. `study` may be null.
struct TrialColumns {
  std::vector<std::string> parameters;
  std::vector<std::string> metrics;
};
TrialColumns ColumnsOf(const v1::Study* study,
                       const std::vector<v1::Trial>& trials);

// One row per trial under a header: id, state, each parameter and final
// metric of `columns`, then the latest step, and for CSV elapsed_seconds and
// client_id; infeasible_reason last.
Grid TrialGrid(const TrialColumns& columns,
               const std::vector<v1::Trial>& trials, GridStyle style);
// TrialGrid with the columns of `study` and `trials`.
Grid TrialGrid(const v1::Study* study, const std::vector<v1::Trial>& trials,
               GridStyle style);

// One row per study: NAME STATE ALGORITHM OBJECTIVE TRIALS ACTIVE CREATED.
Grid StudyListGrid(const std::vector<v1::Study>& studies);

// A two-column description of one study (spec, budget, trial counts).
Grid StudyDetailGrid(const v1::Study& study);

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_FORMAT_H_
