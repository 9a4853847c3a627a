#include "cli/trial_file.h"

#include <google/protobuf/descriptor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/format.h"
#include "cli/json_config.h"
#include "common/proto_json.h"
#include "common/trial_csv.h"

namespace hypertune::cli {
namespace {

absl::Status LineError(const std::string& source, int line,
                       absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat(source, ":", line, ": ", message));
}

// The line (1-based) of byte `offset` in `text`.
int LineAt(std::string_view text, size_t offset) {
  int line = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') ++line;
  }
  return line;
}

// ----- JSON -----

struct JsonObject {
  std::string_view text;
  int line = 0;
};

// The trial objects of a JSON trial file: the elements of the "trials"
// array of a ListTrialsResponse document, or each top-level object of JSON
// lines. A bracket scanner (strings and escapes respected), so that each
// object can be parsed on its own and errors can name its line.
absl::StatusOr<std::vector<JsonObject>> SplitJsonObjects(
    std::string_view text, const std::string& source) {
  std::vector<JsonObject> top;  // top-level values
  std::vector<char> stack;
  JsonStrings strings;
  size_t start = 0;
  int line = 1;
  int start_line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (strings.Inside(c)) continue;
    switch (c) {
      case '{':
      case '[':
        if (stack.empty()) {
          start = i;
          start_line = line;
        }
        stack.push_back(c);
        break;
      case '}':
      case ']':
        if (stack.empty() || (c == '}') != (stack.back() == '{')) {
          return LineError(
              source, line,
              absl::StrCat("unexpected '", std::string(1, c), "'"));
        }
        stack.pop_back();
        if (stack.empty()) {
          top.push_back({text.substr(start, i + 1 - start), start_line});
        }
        break;
      default:
        if (stack.empty() &&
            !absl::ascii_isspace(static_cast<unsigned char>(c))) {
          return LineError(source, line,
                           "expected a JSON object (a trial per line, or the "
                           "document of `hypertune trials --format json`)");
        }
    }
  }
  if (!stack.empty()) {
    return LineError(source, start_line, "a JSON value that never ends");
  }
  // One document {"trials": [...]}: its array's objects, found again with
  // their lines.
  if (top.size() == 1) {
    std::string_view doc = top[0].text;
    size_t key = doc.find_first_not_of(" \t\r\n", 1);
    if (key != std::string_view::npos &&
        doc.substr(key).starts_with("\"trials\"")) {
      std::vector<JsonObject> trials;
      const size_t base = static_cast<size_t>(doc.data() - text.data());
      int depth = 0;
      JsonStrings doc_strings;
      for (size_t i = 0; i < doc.size(); ++i) {
        const char c = doc[i];
        if (doc_strings.Inside(c)) continue;
        if (c == '{' || c == '[') {
          if (depth == 2 && c == '{') start = i;
          ++depth;
        } else if (c == '}' || c == ']') {
          --depth;
          if (depth == 2 && c == '}') {
            trials.push_back(
                {doc.substr(start, i + 1 - start), LineAt(text, base + start)});
          }
        }
      }
      return trials;
    }
  }
  return top;
}

// ----- CSV -----

struct CsvRecord {
  std::vector<std::string> fields;
  int line = 0;
};

// RFC 4180 records (quoted fields may hold commas, quotes and newlines),
// each with the line it starts on; blank lines are skipped.
absl::StatusOr<std::vector<CsvRecord>> ParseCsv(std::string_view text,
                                                const std::string& source) {
  std::vector<CsvRecord> records;
  CsvRecord record;
  std::string field;
  bool quoted = false;
  bool field_started = false;
  bool field_quoted = false;
  int line = 1;
  record.line = 1;
  // The formula guard of a text field (common/trial_csv.h) is not part of
  // the text: "'=1+2" reads back as =1+2.
  auto end_field = [&] {
    if (field_quoted && field.size() > 1 && field[0] == '\'' &&
        NeedsFormulaGuard(std::string_view(field).substr(1))) {
      field.erase(0, 1);
    }
    record.fields.push_back(std::move(field));
    field.clear();
    field_quoted = false;
  };
  auto end_record = [&] {
    end_field();
    const bool blank = record.fields.size() == 1 && record.fields[0].empty();
    if (!blank) records.push_back(std::move(record));
    record = CsvRecord();
    field_started = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"' && !field_started) {
      quoted = true;
      field_started = true;
      field_quoted = true;
    } else if (c == ',') {
      end_field();
      field_started = false;
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      continue;
    } else if (c == '\n') {
      end_record();
      ++line;
      record.line = line;
    } else {
      field += c;
      field_started = true;
    }
  }
  if (quoted)
    return LineError(source, record.line, "a quoted field never ends");
  if (field_started || !record.fields.empty()) end_record();
  return records;
}

// Columns of the CLI's and the HTTP API's trial CSV that are neither
// parameters nor metrics.
const absl::flat_hash_set<std::string>& TrialColumnNames() {
  static const auto* names =
      new absl::flat_hash_set<std::string>{"id",
                                           "state",
                                           "step",
                                           "elapsed_seconds",
                                           "client_id",
                                           "infeasible_reason",
                                           "failure_reason",
                                           "stop_reason",
                                           "create_time_ms",
                                           "start_time_ms",
                                           "end_time_ms",
                                           "retry_count",
                                           "preemption_count",
                                           "measurements",
                                           "last_step",
                                           "device_seconds",
                                           "cost",
                                           "warm_start",
                                           "checkpoint_uri",
                                           "log_path"};
  return *names;
}

enum class ColumnKind { kParameter, kMetric, kTrial };

struct Column {
  ColumnKind kind;
  std::string name;
  const v1::ParameterSpec* parameter = nullptr;
};

absl::StatusOr<TrialFile> ParseCsvTrials(std::string_view text,
                                         const std::string& source,
                                         const v1::Study& study) {
  absl::StatusOr<std::vector<CsvRecord>> records = ParseCsv(text, source);
  if (!records.ok()) return records.status();
  TrialFile file;
  if (records->empty()) return file;
  std::map<std::string, const v1::ParameterSpec*> parameters;
  for (const v1::ParameterSpec& p : study.spec().parameters()) {
    parameters[p.name()] = &p;
  }
  const CsvRecord& header = records->front();
  std::vector<Column> columns;
  for (const std::string& raw : header.fields) {
    std::string name(absl::StripAsciiWhitespace(raw));
    Column column{ColumnKind::kMetric, name};
    const bool param_prefix = absl::StartsWith(name, "param:");
    const bool metric_prefix = absl::StartsWith(name, "metric:");
    if (param_prefix || metric_prefix)
      column.name = name.substr(name.find(':') + 1);
    if (param_prefix || (!metric_prefix && parameters.contains(name))) {
      column.kind = ColumnKind::kParameter;
      auto it = parameters.find(column.name);
      if (it == parameters.end()) {
        return LineError(
            source, header.line,
            absl::StrCat("column \"", name, "\": study \"", study.name(),
                         "\" has no such parameter"));
      }
      column.parameter = it->second;
    } else if (metric_prefix) {
      column.kind = ColumnKind::kMetric;
    } else if (TrialColumnNames().contains(name)) {
      column.kind = ColumnKind::kTrial;
    }
    columns.push_back(std::move(column));
  }
  for (size_t r = 1; r < records->size(); ++r) {
    const CsvRecord& row = (*records)[r];
    if (row.fields.size() != columns.size()) {
      return LineError(source, row.line,
                       absl::StrCat(row.fields.size(),
                                    " fields, but the header "
                                    "has ",
                                    columns.size()));
    }
    v1::Trial trial;
    bool skip = false;
    v1::Measurement& final_m = *trial.mutable_final_measurement();
    for (size_t i = 0; i < columns.size(); ++i) {
      const Column& column = columns[i];
      const std::string& cell = row.fields[i];
      auto bad = [&](absl::string_view what) {
        return LineError(
            source, row.line,
            absl::StrCat(column.name, ": \"", cell, "\" is not ", what));
      };
      if (column.kind == ColumnKind::kTrial) {
        if (column.name == "state" && !cell.empty()) {
          v1::Trial::State state;
          if (!v1::Trial::State_Parse(absl::AsciiStrToUpper(cell), &state)) {
            return bad("a trial state");
          }
          skip = state != v1::Trial::COMPLETED;
        } else if (column.name == "step" && !cell.empty()) {
          int64_t step = 0;
          if (!absl::SimpleAtoi(cell, &step)) return bad("an integer");
          final_m.set_step(step);
        } else if (column.name == "elapsed_seconds" && !cell.empty()) {
          double seconds = 0;
          if (!absl::SimpleAtod(cell, &seconds)) return bad("a number");
          final_m.set_elapsed_seconds(seconds);
        }
        continue;
      }
      if (cell.empty()) continue;  // absent (an inactive parameter)
      if (column.kind == ColumnKind::kMetric) {
        double value = 0;
        if (!absl::SimpleAtod(cell, &value)) return bad("a number");
        (*final_m.mutable_metrics())[column.name] = value;
        continue;
      }
      absl::StatusOr<v1::ParameterValue> value =
          ParseParameterValue(*column.parameter, cell);
      if (!value.ok()) {
        return LineError(source, row.line,
                         std::string(value.status().message()));
      }
      *trial.add_parameters() = *std::move(value);
    }
    if (skip) {
      file.skipped_lines.push_back(row.line);
      continue;
    }
    if (final_m.metrics().empty()) {
      return LineError(source, row.line,
                       "final_measurement.metrics: the row has no metric "
                       "value");
    }
    file.trials.push_back(std::move(trial));
    file.lines.push_back(row.line);
  }
  return file;
}

}  // namespace

absl::StatusOr<std::string> ExportLine(
    const google::protobuf::Message& message) {
  // Map entries by key: equal studies export the same text.
  return ToJson(message, JsonStyle{.sorted_map_keys = true});
}

absl::StatusOr<v1::ParameterValue> ParseParameterValue(
    const v1::ParameterSpec& spec, const std::string& text) {
  auto refuse = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.name(), ": \"", text, "\" is not ", what));
  };
  v1::ParameterValue value;
  value.set_name(spec.name());
  switch (spec.kind_case()) {
    case v1::ParameterSpec::kIntegerSpec: {
      int64_t n = 0;
      if (!absl::SimpleAtoi(text, &n)) return refuse("an integer");
      value.set_int_value(n);
      break;
    }
    case v1::ParameterSpec::kCategoricalSpec:
      value.set_string_value(text);
      break;
    default: {
      double x = 0;
      if (!absl::SimpleAtod(text, &x)) return refuse("a number");
      value.set_double_value(x);
    }
  }
  return value;
}

bool ExportReader::NextLine() {
  while (std::getline(in_, line_)) {
    ++line_number_;
    if (!absl::StripAsciiWhitespace(line_).empty()) return true;
  }
  return false;
}

absl::StatusOr<v1::Study> ExportReader::ReadStudy() {
  if (!NextLine()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_, ": empty; an export begins with the study's line"));
  }
  v1::Study study;
  if (absl::Status s = ParseJsonConfig(
          line_, absl::StrCat(source_, ":", line_number_), &study);
      !s.ok()) {
    return s;
  }
  return study;
}

absl::StatusOr<bool> ExportReader::NextTrial(v1::Trial& trial) {
  if (!NextLine()) return false;
  trial.Clear();
  if (absl::Status s = ParseJsonConfig(
          line_, absl::StrCat(source_, ":", line_number_), &trial);
      !s.ok()) {
    return s;
  }
  trial_lines_.push_back(line_number_);
  return true;
}

absl::StatusOr<ExportFile> ParseExportFile(std::string_view text,
                                           const std::string& source) {
  std::istringstream in{std::string(text)};
  ExportReader reader(in, source);
  ExportFile file;
  absl::StatusOr<v1::Study> study = reader.ReadStudy();
  if (!study.ok()) return study.status();
  file.study = *std::move(study);
  v1::Trial trial;
  while (true) {
    absl::StatusOr<bool> more = reader.NextTrial(trial);
    if (!more.ok()) return more.status();
    if (!*more) break;
    file.trials.push_back(std::move(trial));
  }
  file.trial_lines = reader.trial_lines();
  return file;
}

absl::StatusOr<TrialFile> ParseTrialFile(std::string_view text,
                                         const std::string& source,
                                         const v1::Study& study) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '{') {
    return ParseCsvTrials(text, source, study);
  }
  absl::StatusOr<std::vector<JsonObject>> objects =
      SplitJsonObjects(text, source);
  if (!objects.ok()) return objects.status();
  TrialFile file;
  for (const JsonObject& object : *objects) {
    v1::Trial trial;
    if (absl::Status s = ParseJsonConfig(
            object.text, absl::StrCat(source, ":", object.line), &trial);
        !s.ok()) {
      return s;
    }
    if (trial.state() != v1::Trial::STATE_UNSPECIFIED &&
        trial.state() != v1::Trial::COMPLETED) {
      file.skipped_lines.push_back(object.line);
      continue;
    }
    v1::Trial result;
    *result.mutable_parameters() = trial.parameters();
    *result.mutable_final_measurement() = trial.final_measurement();
    file.trials.push_back(std::move(result));
    file.lines.push_back(object.line);
  }
  return file;
}

absl::Status AtFileLine(const absl::Status& status, const std::string& source,
                        const std::function<int(int)>& line_of) {
  absl::string_view message = status.message();
  if (!absl::ConsumePrefix(&message, "trials[")) return status;
  const size_t close = message.find(']');
  int index = 0;
  if (close == std::string_view::npos ||
      !absl::SimpleAtoi(message.substr(0, close), &index)) {
    return status;
  }
  message.remove_prefix(close + 1);
  absl::ConsumePrefix(&message, ".");
  absl::ConsumePrefix(&message, ": ");
  return absl::Status(status.code(),
                      absl::StrCat(source, ":", line_of(index), ": ", message));
}

}  // namespace hypertune::cli
