#include "cli/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/args.h"
#include "cli/json_config.h"
#include "cli/worker/worker_protocol.h"
#include "common/proto_json.h"
#include "common/study_metrics.h"

namespace hypertune::cli {
namespace {

using ::hypertune::StudyMetrics;

const char* FormatName(OutputFormat format) {
  switch (format) {
    case OutputFormat::kTable:
      return "table";
    case OutputFormat::kJson:
      return "json";
    case OutputFormat::kCsv:
      return "csv";
  }
  return "?";
}

std::string ObjectiveText(const StudyMetrics::Objective& o) {
  return absl::StrCat(o.name, o.maximize ? " (MAXIMIZE)" : " (MINIMIZE)");
}

// "memory <= 16", "acc >= 0.9", "t in [1, 2]".
std::string ConstraintText(const StudyMetrics::Constraint& c) {
  if (!std::isfinite(c.lower)) {
    return absl::StrCat(c.name, " <= ", DoubleText(c.upper));
  }
  if (!std::isfinite(c.upper)) {
    return absl::StrCat(c.name, " >= ", DoubleText(c.lower));
  }
  return absl::StrCat(c.name, " in [", DoubleText(c.lower), ", ",
                      DoubleText(c.upper), "]");
}

std::string ObjectivesText(const StudyMetrics& metrics) {
  return absl::StrJoin(metrics.objectives(), ", ",
                       [](std::string* out, const StudyMetrics::Objective& o) {
                         out->append(ObjectiveText(o));
                       });
}

std::string ParameterText(const v1::ParameterSpec& p) {
  auto scale = [](v1::Scale s) {
    return s == v1::LOG ? std::string(" log") : std::string();
  };
  switch (p.kind_case()) {
    case v1::ParameterSpec::kDoubleSpec:
      return absl::StrCat("double [", DoubleText(p.double_spec().min()), ", ",
                          DoubleText(p.double_spec().max()), "]",
                          scale(p.double_spec().scale()));
    case v1::ParameterSpec::kIntegerSpec:
      return absl::StrCat("integer [", p.integer_spec().min(), ", ",
                          p.integer_spec().max(), "]",
                          scale(p.integer_spec().scale()));
    case v1::ParameterSpec::kDiscreteSpec:
      return absl::StrCat("discrete {",
                          absl::StrJoin(p.discrete_spec().values(), ", ",
                                        [](std::string* out, double v) {
                                          out->append(DoubleText(v));
                                        }),
                          "}");
    case v1::ParameterSpec::kCategoricalSpec:
      return absl::StrCat("categorical {",
                          absl::StrJoin(p.categorical_spec().values(), ", "),
                          "}");
    case v1::ParameterSpec::KIND_NOT_SET:
      break;
  }
  return "unset";
}

int64_t TotalTrials(const v1::Study& study) {
  int64_t total = 0;
  for (const auto& [state, count] : study.trial_counts()) total += count;
  return total;
}

int64_t CountOf(const v1::Study& study, const char* state) {
  auto it = study.trial_counts().find(state);
  return it == study.trial_counts().end() ? 0 : it->second;
}

}  // namespace

absl::StatusOr<OutputFormat> ParseFormat(
    const std::optional<std::string>& flag, OutputFormat fallback,
    std::initializer_list<OutputFormat> allowed) {
  if (!flag.has_value()) return fallback;
  std::vector<std::string> names;
  for (OutputFormat format : allowed) {
    if (absl::AsciiStrToLower(*flag) == FormatName(format)) return format;
    names.push_back(FormatName(format));
  }
  return UsageError(absl::StrCat("--format: \"", *flag, "\" is not one of ",
                                 absl::StrJoin(names, ", ")));
}

absl::StatusOr<std::vector<v1::Trial::State>> ParseTrialStates(
    const std::vector<std::string>& values) {
  std::vector<v1::Trial::State> states;
  for (const std::string& value : values) {
    for (absl::string_view piece :
         absl::StrSplit(value, ',', absl::SkipEmpty())) {
      std::string name =
          absl::AsciiStrToUpper(absl::StripAsciiWhitespace(piece));
      v1::Trial::State state;
      if (!v1::Trial::State_Parse(name, &state) ||
          state == v1::Trial::STATE_UNSPECIFIED) {
        std::vector<std::string> names;
        for (int i = v1::Trial::State_MIN + 1; i <= v1::Trial::State_MAX; ++i) {
          if (v1::Trial::State_IsValid(i)) {
            names.push_back(
                v1::Trial::State_Name(static_cast<v1::Trial::State>(i)));
          }
        }
        return UsageError(absl::StrCat("--state: \"", piece,
                                       "\" is not one of ",
                                       absl::StrJoin(names, ", ")));
      }
      states.push_back(state);
    }
  }
  return states;
}

std::string KeepNegativeZero(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  JsonStrings strings;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    out.push_back(c);
    if (strings.Inside(c)) continue;
    // A number token "-0" ends where no digit, '.', or exponent follows.
    if (c == '-' && i + 1 < json.size() && json[i + 1] == '0') {
      const char next = i + 2 < json.size() ? json[i + 2] : ' ';
      if (!absl::ascii_isdigit(static_cast<unsigned char>(next)) &&
          next != '.' && next != 'e' && next != 'E') {
        out.append("0.0");
        ++i;
      }
    }
  }
  return out;
}

// int64 as JSON numbers: the CLI's readers (Python, protobuf's parser, jq)
// read them exactly.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  return ::hypertune::ToJson(message,
                             {.int64_as_numbers = true, .multiline = true}) +
         "\n";
}

absl::StatusOr<std::string> ToJsonLine(
    const google::protobuf::Message& message) {
  return ::hypertune::ToJson(message, {.int64_as_numbers = true});
}

std::string FormatTable(const Grid& grid) {
  std::vector<size_t> widths;
  for (const Row& row : grid) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string out;
  for (const Row& row : grid) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) line += "  ";
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size(), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  return out;
}

std::string FormatShort(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6g", value);
  return buffer;
}

std::string FormatTimeMs(int64_t unix_ms) {
  if (unix_ms == 0) return "";
  std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M:%S", &tm);
  return buffer;
}

namespace {

// The parameter and metric columns of a trial table.
struct TrialColumns {
  std::vector<std::string> parameters;
  std::vector<std::string> metrics;
};

TrialColumns ColumnsOf(const v1::Study* study,
                       const std::vector<v1::Trial>& trials) {
  std::vector<std::string> params;
  std::vector<std::string> metrics;
  std::set<std::string> seen_params;
  std::set<std::string> seen_metrics;
  if (study != nullptr) {
    for (const v1::ParameterSpec& p : study->spec().parameters()) {
      if (seen_params.insert(p.name()).second) params.push_back(p.name());
    }
    for (const v1::MetricSpec& m : study->spec().metrics()) {
      if (seen_metrics.insert(m.name()).second) metrics.push_back(m.name());
    }
  }
  std::set<std::string> extra_metrics;
  for (const v1::Trial& trial : trials) {
    for (const v1::ParameterValue& p : trial.parameters()) {
      if (seen_params.insert(p.name()).second) params.push_back(p.name());
    }
    for (const auto& [name, value] : trial.final_measurement().metrics()) {
      if (!seen_metrics.contains(name)) extra_metrics.insert(name);
    }
  }
  metrics.insert(metrics.end(), extra_metrics.begin(), extra_metrics.end());
  return {std::move(params), std::move(metrics)};
}

}  // namespace

Grid TrialGrid(const v1::Study* study, const std::vector<v1::Trial>& trials) {
  const TrialColumns columns = ColumnsOf(study, trials);
  const bool constrained =
      study != nullptr && !StudyMetrics(study->spec()).constraints().empty();
  // PBT: each trial's lineage, its exploits as donor@step (docs/pbt.md).
  const bool exploited =
      std::any_of(trials.begin(), trials.end(),
                  [](const v1::Trial& t) { return t.exploits_size() > 0; });
  Grid grid;
  Row header = {"ID", "STATE"};
  header.insert(header.end(), columns.parameters.begin(),
                columns.parameters.end());
  header.insert(header.end(), columns.metrics.begin(), columns.metrics.end());
  header.push_back("STEP");
  if (constrained) header.push_back("FEASIBLE");
  if (exploited) header.push_back("EXPLOITED (donor@step)");
  header.push_back("REASON");
  grid.push_back(std::move(header));

  for (const v1::Trial& trial : trials) {
    Row row = {absl::StrCat(trial.id()), v1::Trial::State_Name(trial.state())};
    if (trial.warm_start()) row[1] += " (warm start)";
    for (const std::string& name : columns.parameters) {
      std::string cell;
      for (const v1::ParameterValue& p : trial.parameters()) {
        if (p.name() != name) continue;
        cell = p.value_case() == v1::ParameterValue::kDoubleValue
                   ? FormatShort(p.double_value())
                   : FormatParameterValue(p);
      }
      row.push_back(std::move(cell));
    }
    const auto& final_metrics = trial.final_measurement().metrics();
    for (const std::string& name : columns.metrics) {
      auto it = final_metrics.find(name);
      row.push_back(it == final_metrics.end() ? "" : FormatShort(it->second));
    }
    int64_t step = trial.final_measurement().step();
    for (const v1::Measurement& m : trial.measurements()) {
      step = std::max(step, m.step());
    }
    bool has_steps =
        trial.measurements_size() > 0 || trial.has_final_measurement();
    row.push_back(has_steps ? absl::StrCat(step) : "");
    if (constrained) {
      row.push_back(!trial.has_feasible() ? ""
                    : trial.feasible()    ? "yes"
                                          : "no");
    }
    if (exploited) {
      std::vector<std::string> lineage;
      for (const v1::PbtExploit& e : trial.exploits()) {
        lineage.push_back(absl::StrCat(e.donor_trial_id(), "@", e.step()));
      }
      row.push_back(absl::StrJoin(lineage, " "));
    }
    row.push_back(trial.infeasible_reason());
    grid.push_back(std::move(row));
  }
  return grid;
}

Grid StudyListGrid(const std::vector<v1::Study>& studies) {
  Grid grid = {{"NAME", "STATE", "ALGORITHM", "OBJECTIVE", "TRIALS", "ACTIVE",
                "CREATED"}};
  for (const v1::Study& study : studies) {
    const v1::StudySpec& spec = study.spec();
    std::string trials = absl::StrCat(TotalTrials(study));
    if (spec.max_trials() > 0) absl::StrAppend(&trials, "/", spec.max_trials());
    grid.push_back({study.name(), v1::Study::State_Name(study.state()),
                    v1::Algorithm_Name(spec.algorithm()),
                    ObjectivesText(StudyMetrics(spec)), trials,
                    absl::StrCat(CountOf(study, "ACTIVE")),
                    FormatTimeMs(study.create_time_ms())});
  }
  return grid;
}

std::string StateReason(const v1::Trial& trial) {
  switch (trial.state()) {
    case v1::Trial::STOPPING:
    case v1::Trial::STOPPED:
    case v1::Trial::PAUSED:
      return trial.stop_reason();
    case v1::Trial::INFEASIBLE:
      return trial.infeasible_reason();
    case v1::Trial::FAILED:
    case v1::Trial::REQUESTED:
      return trial.failure_reason();
    default:
      return "";
  }
}

std::string TrialEventLine(const v1::TrialEvent& event,
                           const std::string& objective) {
  const v1::Trial& trial = event.trial();
  std::string line = absl::StrCat("#", event.sequence(), " trial ", trial.id(),
                                  " ", v1::Trial::State_Name(trial.state()));
  const v1::Measurement* m =
      trial.has_final_measurement()
          ? &trial.final_measurement()
          : (trial.measurements_size() > 0
                 ? &trial.measurements(trial.measurements_size() - 1)
                 : nullptr);
  if (m != nullptr) {
    absl::StrAppend(&line, " step ", m->step());
    auto it = m->metrics().find(objective);
    if (it != m->metrics().end()) {
      absl::StrAppend(&line, " ", objective, "=", FormatShort(it->second));
    }
  }
  if (const std::string reason = StateReason(trial); !reason.empty()) {
    absl::StrAppend(&line, " (", reason, ")");
  }
  return line;
}

Grid StudyDetailGrid(const v1::Study& study) {
  const v1::StudySpec& spec = study.spec();
  Grid grid;
  grid.push_back({"name", study.name()});
  grid.push_back({"state", v1::Study::State_Name(study.state())});
  grid.push_back({"algorithm", v1::Algorithm_Name(spec.algorithm())});
  const StudyMetrics metrics(spec);
  std::set<std::string> modelled;
  for (const StudyMetrics::Objective& o : metrics.objectives()) {
    grid.push_back({"objective", ObjectiveText(o)});
    modelled.insert(o.name);
  }
  for (const StudyMetrics::Constraint& c : metrics.constraints()) {
    grid.push_back({"constraint", ConstraintText(c)});
    modelled.insert(c.name);
  }
  for (const v1::MetricSpec& m : spec.metrics()) {
    if (!modelled.contains(m.name())) grid.push_back({"metric", m.name()});
  }
  for (const v1::ParameterSpec& p : spec.parameters()) {
    grid.push_back(
        {"parameter", absl::StrCat(p.name(), ": ", ParameterText(p))});
  }
  grid.push_back({"max_trials", spec.max_trials() > 0
                                    ? absl::StrCat(spec.max_trials())
                                    : "unlimited"});
  grid.push_back(
      {"max_parallel_trials", spec.max_parallel_trials() > 0
                                  ? absl::StrCat(spec.max_parallel_trials())
                                  : "unlimited"});
  // Sorted by state for a stable listing.
  std::map<std::string, int64_t> counts(study.trial_counts().begin(),
                                        study.trial_counts().end());
  std::vector<std::string> parts;
  for (const auto& [state, count] : counts) {
    parts.push_back(absl::StrCat(state, "=", count));
  }
  grid.push_back(
      {"trials",
       absl::StrCat(TotalTrials(study), parts.empty() ? "" : " (",
                    absl::StrJoin(parts, " "), parts.empty() ? "" : ")")});
  if (spec.has_early_stopping()) {
    // With several objectives, how they are judged; and the constraint
    // forecast when on (docs/early-stopping.md).
    const v1::EarlyStoppingSpec& es = spec.early_stopping();
    std::string rule = v1::EarlyStoppingSpec::Rule_Name(es.rule());
    if (es.multi_objective() !=
        v1::EarlyStoppingSpec::MULTI_OBJECTIVE_UNSPECIFIED) {
      absl::StrAppend(
          &rule, " (objectives: ",
          v1::EarlyStoppingSpec::MultiObjective_Name(es.multi_objective()),
          ")");
    }
    if (es.stop_on_constraints()) {
      absl::StrAppend(&rule, ", stops on constraint forecasts");
    }
    grid.push_back({"early_stopping", rule});
  }
  std::string device_hours = FormatShort(study.device_seconds() / 3600.0);
  if (spec.max_device_hours() > 0) {
    absl::StrAppend(&device_hours, " of ",
                    FormatShort(spec.max_device_hours()));
  }
  grid.push_back({"device_hours", device_hours});
  if (spec.price_per_device_hour() > 0) {
    grid.push_back(
        {"cost", absl::StrCat(FormatShort(study.cost()), " at ",
                              FormatShort(spec.price_per_device_hour()),
                              " per device-hour")});
  }
  if (spec.cost_aware()) {
    grid.push_back(
        {"cost_aware", spec.cost_metric().empty()
                           ? "yes (device-seconds)"
                           : absl::StrCat("yes (", spec.cost_metric(), ")")});
  }
  if (!spec.prior_studies().empty()) {
    grid.push_back(
        {"prior_studies", absl::StrJoin(spec.prior_studies(), ", ")});
  }
  grid.push_back({"created", FormatTimeMs(study.create_time_ms())});
  return grid;
}

}  // namespace hypertune::cli
