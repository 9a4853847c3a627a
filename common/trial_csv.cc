#include "common/trial_csv.h"

#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace hypertune {
namespace {

constexpr const char* kFixedColumns[] = {"id",
                                         "state",
                                         "client_id",
                                         "create_time_ms",
                                         "start_time_ms",
                                         "end_time_ms",
                                         "retry_count",
                                         "preemption_count",
                                         "measurements",
                                         "last_step",
                                         "device_seconds",
                                         "cost",
                                         "infeasible_reason",
                                         "failure_reason",
                                         "feasible"};

// The characters that make a spreadsheet read a cell as a formula (OWASP,
// "CSV Injection").
bool StartsFormula(char c) {
  return c == '=' || c == '+' || c == '-' || c == '@' || c == '\t' || c == '\r';
}

// A text field (never a number: -1.5 stays a number).
void AppendField(std::string_view field, std::string* out) {
  const bool guard = NeedsFormulaGuard(field);
  const bool padded =
      !field.empty() && (field.front() == ' ' || field.front() == '\t' ||
                         field.back() == ' ' || field.back() == '\t');
  if (!guard && !padded &&
      field.find_first_of(",\"\r\n") == std::string_view::npos) {
    out->append(field);
    return;
  }
  out->push_back('"');
  if (guard) out->push_back('\'');
  for (char c : field) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

}  // namespace

bool NeedsFormulaGuard(std::string_view field) {
  if (field.empty()) return false;
  if (StartsFormula(field[0])) return true;
  return field[0] == '\'' && field.size() > 1 &&
         (StartsFormula(field[1]) || field[1] == '\'');
}

std::string CsvField(std::string_view field) {
  std::string out;
  AppendField(field, &out);
  return out;
}

void AppendCsvHeader(const v1::Study& study, std::string* out) {
  bool first = true;
  for (const char* column : kFixedColumns) {
    if (!first) out->push_back(',');
    first = false;
    out->append(column);
  }
  for (const v1::ParameterSpec& p : study.spec().parameters()) {
    out->push_back(',');
    AppendField(absl::StrCat("param:", p.name()), out);
  }
  for (const v1::MetricSpec& m : study.spec().metrics()) {
    out->push_back(',');
    AppendField(absl::StrCat("metric:", m.name()), out);
  }
  out->append("\r\n");
}

void AppendCsvRow(const v1::Study& study, const v1::Trial& trial,
                  std::string* out) {
  const int64_t last_step =
      trial.measurements_size() > 0
          ? trial.measurements(trial.measurements_size() - 1).step()
          : 0;
  absl::StrAppend(out, trial.id(), ",", v1::Trial::State_Name(trial.state()),
                  ",");
  AppendField(trial.client_id(), out);
  absl::StrAppend(out, ",", trial.create_time_ms(), ",", trial.start_time_ms(),
                  ",", trial.end_time_ms(), ",", trial.retry_count(), ",",
                  trial.preemption_count(), ",", trial.measurements_size(), ",",
                  last_step, ",", DoubleText(trial.device_seconds()), ",",
                  DoubleText(trial.cost()), ",");
  AppendField(trial.infeasible_reason(), out);
  out->push_back(',');
  AppendField(trial.failure_reason(), out);
  out->push_back(',');
  if (trial.has_feasible()) out->append(trial.feasible() ? "true" : "false");
  // Parameters are stored in spec order, but match by name to be safe.
  for (int i = 0; i < study.spec().parameters_size(); ++i) {
    out->push_back(',');
    const std::string& name = study.spec().parameters(i).name();
    const v1::ParameterValue* value = nullptr;
    if (i < trial.parameters_size() && trial.parameters(i).name() == name) {
      value = &trial.parameters(i);
    } else {
      for (const v1::ParameterValue& v : trial.parameters()) {
        if (v.name() == name) value = &v;
      }
    }
    if (value == nullptr) continue;
    switch (value->value_case()) {
      case v1::ParameterValue::kDoubleValue:
        out->append(DoubleText(value->double_value()));
        break;
      case v1::ParameterValue::kIntValue:
        absl::StrAppend(out, value->int_value());
        break;
      case v1::ParameterValue::kStringValue:
        AppendField(value->string_value(), out);
        break;
      case v1::ParameterValue::VALUE_NOT_SET:
        break;
    }
  }
  const auto& metrics = trial.final_measurement().metrics();
  for (const v1::MetricSpec& m : study.spec().metrics()) {
    out->push_back(',');
    auto it = metrics.find(m.name());
    if (it != metrics.end()) out->append(DoubleText(it->second));
  }
  out->append("\r\n");
}

}  // namespace hypertune
