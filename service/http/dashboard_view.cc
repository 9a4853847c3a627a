#include "service/http/dashboard_view.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "optimizer/importance.h"
#include "service/conversion.h"
#include "service/http/json.h"

namespace hypertune::service {
namespace {

// Fitted per request: 32 trees of at most 2,048 points each keep a study of
// 10,000 trials to a fraction of a second (importance.h).
constexpr int kImportanceTrees = 32;
constexpr int kImportancePointsPerTree = 2048;

void AppendParameter(const v1::ParameterValue& value, std::string* out) {
  switch (value.value_case()) {
    case v1::ParameterValue::kDoubleValue:
      AppendJsonNumber(value.double_value(), out);
      break;
    case v1::ParameterValue::kIntValue:
      absl::StrAppend(out, value.int_value());
      break;
    case v1::ParameterValue::kStringValue:
      AppendJsonString(value.string_value(), out);
      break;
    default:
      out->append("null");
  }
}

const std::string& ReasonOf(const v1::Trial& trial) {
  static const std::string* const kNone = new std::string();
  switch (trial.state()) {
    case v1::Trial::INFEASIBLE:
      return trial.infeasible_reason();
    case v1::Trial::STOPPING:
    case v1::Trial::STOPPED:
    case v1::Trial::PAUSED:
      return trial.stop_reason();
    case v1::Trial::COMPLETED:
      return *kNone;
    default:
      return trial.failure_reason();
  }
}

}  // namespace

void AppendCompactTrial(const v1::Study& study, const v1::Trial& trial,
                        std::string* out) {
  const v1::StudySpec& spec = study.spec();
  absl::StrAppend(out, "{\"id\":", trial.id(), ",\"state\":");
  AppendJsonString(v1::Trial::State_Name(trial.state()), out);
  out->append(",\"params\":[");
  for (int i = 0; i < spec.parameters_size(); ++i) {
    if (i > 0) out->push_back(',');
    const std::string& name = spec.parameters(i).name();
    // Trials keep their values in the spec's order: look there first.
    const v1::ParameterValue* value = nullptr;
    if (i < trial.parameters_size() && trial.parameters(i).name() == name) {
      value = &trial.parameters(i);
    } else {
      for (const v1::ParameterValue& p : trial.parameters()) {
        if (p.name() == name) value = &p;
      }
    }
    if (value == nullptr) {
      out->append("null");
    } else {
      AppendParameter(*value, out);
    }
  }
  out->append("],\"metrics\":[");
  const bool finished = trial.state() == v1::Trial::COMPLETED ||
                        trial.state() == v1::Trial::STOPPED;
  const v1::Measurement* result = finished ? ResultMeasurement(trial) : nullptr;
  for (int i = 0; i < spec.metrics_size(); ++i) {
    if (i > 0) out->push_back(',');
    const auto& metrics = result == nullptr
                              ? v1::Measurement::default_instance().metrics()
                              : result->metrics();
    auto it = metrics.find(spec.metrics(i).name());
    if (it == metrics.end()) {
      out->append("null");
    } else {
      AppendJsonNumber(it->second, out);
    }
  }
  out->append("],\"curve\":[");
  const std::string objective =
      spec.metrics_size() > 0 ? spec.metrics(0).name() : "";
  bool first = true;
  for (const v1::Measurement& m : trial.measurements()) {
    auto it = m.metrics().find(objective);
    if (it == m.metrics().end()) continue;
    if (!first) out->push_back(',');
    first = false;
    absl::StrAppend(out, "[", m.step(), ",");
    AppendJsonNumber(it->second, out);
    out->push_back(']');
  }
  out->append("],\"reason\":");
  AppendJsonString(ReasonOf(trial), out);
  absl::StrAppend(out, ",\"create_time_ms\":", trial.create_time_ms(),
                  ",\"start_time_ms\":", trial.start_time_ms(),
                  ",\"end_time_ms\":", trial.end_time_ms(),
                  ",\"device_seconds\":");
  AppendJsonNumber(trial.device_seconds(), out);
  out->append(",\"cost\":");
  AppendJsonNumber(trial.cost(), out);
  absl::StrAppend(out, ",\"measurements\":", trial.measurements_size(), "}");
}

std::string CompactChangesPageJson(
    const v1::Study& study, const std::vector<storage::TrialChange>& changes,
    int64_t after, bool more) {
  std::string body = "{\"events\":[";
  int64_t last = after;
  for (size_t i = 0; i < changes.size(); ++i) {
    if (i > 0) body.push_back(',');
    absl::StrAppend(&body, "{\"sequence\":", changes[i].sequence,
                    ",\"trial\":");
    AppendCompactTrial(study, changes[i].trial, &body);
    body.push_back('}');
    last = changes[i].sequence;
  }
  // As the full feed: the sequence as a string (an int64 in the mapping).
  absl::StrAppend(&body, "],\"last_sequence\":\"", last,
                  "\",\"more\":", more ? "true" : "false", "}");
  return body;
}

absl::StatusOr<std::string> ImportanceJson(
    const v1::Study& study, const std::vector<v1::Trial>& completed) {
  const v1::StudySpec& spec = study.spec();
  absl::StatusOr<optimizer::SearchSpace> space = ToSearchSpace(spec);
  if (!space.ok()) return space.status();
  std::vector<optimizer::Assignment> points;
  std::vector<double> values;
  for (const v1::Trial& trial : completed) {
    if (trial.state() != v1::Trial::COMPLETED) continue;
    const v1::Measurement* result = ResultMeasurement(trial);
    if (result == nullptr) continue;
    std::optional<double> y = MaximizedObjective(spec, *result);
    if (!y || std::isnan(*y)) continue;
    absl::StatusOr<optimizer::Assignment> point =
        ToAssignment("parameters", *space, trial.parameters());
    if (!point.ok()) continue;
    points.push_back(*std::move(point));
    values.push_back(*y);
  }
  // Infinities as the worst finite value (maximized: the smallest).
  double worst = std::numeric_limits<double>::infinity();
  for (double y : values) {
    if (std::isfinite(y)) worst = std::min(worst, y);
  }
  size_t kept = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      if (!std::isfinite(worst)) continue;  // no finite value at all
      values[i] = worst;
    }
    if (kept != i) {
      points[kept] = std::move(points[i]);
      values[kept] = values[i];
    }
    ++kept;
  }
  points.resize(kept);
  values.resize(kept);

  std::string body = "{\"method\":\"fanova\",\"objective\":";
  AppendJsonString(spec.metrics_size() > 0 ? spec.metrics(0).name() : "",
                   &body);
  absl::StrAppend(&body, ",\"trials\":", points.size());
  if (points.size() < 2) {
    body.append(
        ",\"trees\":0,\"varying_trees\":0,\"parameters\":[],\"message\":"
        "\"needs at least 2 completed trials with a finite objective\"}");
    return body;
  }
  optimizer::ImportanceOptions options;
  options.num_trees = kImportanceTrees;
  options.max_points_per_tree = kImportancePointsPerTree;
  options.seed = spec.seed();
  absl::StatusOr<optimizer::ImportanceResult> result =
      optimizer::FanovaImportance(*space, points, values, options);
  if (!result.ok()) return result.status();
  absl::StrAppend(&body, ",\"trees\":", result->trees,
                  ",\"varying_trees\":", result->varying_trees,
                  ",\"parameters\":[");
  for (int i = 0; i < spec.parameters_size(); ++i) {
    if (i > 0) body.push_back(',');
    body.append("{\"name\":");
    AppendJsonString(spec.parameters(i).name(), &body);
    body.append(",\"importance\":");
    AppendJsonNumber(result->parameters[i].fraction, &body);
    body.append(",\"stddev\":");
    AppendJsonNumber(result->parameters[i].stddev, &body);
    body.push_back('}');
  }
  body.append("]");
  if (result->varying_trees == 0) {
    body.append(
        ",\"message\":\"every completed trial has the same objective\"");
  }
  body.append("}");
  return body;
}

}  // namespace hypertune::service
