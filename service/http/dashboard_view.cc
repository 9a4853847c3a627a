#include "service/http/dashboard_view.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/proto_json.h"
#include "common/study_metrics.h"
#include "optimizer/importance.h"
#include "service/rpc/conversion.h"

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

// `values` as a JSON array in `spec`'s parameter order, null where a
// parameter has no value.
void AppendParameters(
    const v1::StudySpec& spec,
    const google::protobuf::RepeatedPtrField<v1::ParameterValue>& values,
    std::string* out) {
  out->push_back('[');
  for (int i = 0; i < spec.parameters_size(); ++i) {
    if (i > 0) out->push_back(',');
    const std::string& name = spec.parameters(i).name();
    // Trials keep their values in the spec's order: look there first.
    const v1::ParameterValue* value = nullptr;
    if (i < values.size() && values[i].name() == name) {
      value = &values[i];
    } else {
      for (const v1::ParameterValue& p : values) {
        if (p.name() == name) value = &p;
      }
    }
    if (value == nullptr) {
      out->append("null");
    } else {
      AppendParameter(*value, out);
    }
  }
  out->push_back(']');
}

// PBT's exploits of a trial (Trial.exploits), oldest first.
void AppendExploits(const v1::StudySpec& spec, const v1::Trial& trial,
                    std::string* out) {
  out->append(",\"exploits\":[");
  for (int i = 0; i < trial.exploits_size(); ++i) {
    const v1::PbtExploit& e = trial.exploits(i);
    if (i > 0) out->push_back(',');
    absl::StrAppend(out, "{\"step\":", e.step(),
                    ",\"donor\":", e.donor_trial_id(),
                    ",\"checkpoint_step\":", e.checkpoint_step(),
                    ",\"time_ms\":", e.time_ms(), ",\"value\":");
    AppendJsonNumber(e.value(), out);
    out->append(",\"donor_value\":");
    AppendJsonNumber(e.donor_value(), out);
    out->append(",\"params_before\":");
    AppendParameters(spec, e.parameters_before(), out);
    out->append(",\"params\":");
    AppendParameters(spec, e.parameters(), out);
    out->push_back('}');
  }
  out->push_back(']');
}

}  // namespace

void AppendCompactTrial(const v1::Study& study, const v1::Trial& trial,
                        std::string* out) {
  const v1::StudySpec& spec = study.spec();
  absl::StrAppend(out, "{\"id\":", trial.id(), ",\"state\":");
  AppendJsonString(v1::Trial::State_Name(trial.state()), out);
  out->append(",\"params\":");
  AppendParameters(spec, trial.parameters(), out);
  out->append(",\"metrics\":[");
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
  absl::StrAppend(out, ",\"measurements\":", trial.measurements_size());
  if (trial.attempt() > 1)
    absl::StrAppend(out, ",\"attempt\":", trial.attempt());
  if (trial.has_feasible()) {
    out->append(trial.feasible() ? ",\"feasible\":true"
                                 : ",\"feasible\":false");
  }
  if (trial.warm_start()) out->append(",\"warm_start\":true");
  if (trial.exploits_size() > 0) AppendExploits(spec, trial, out);
  out->push_back('}');
}

std::string CompactChangesPageJson(
    const v1::Study& study, const std::vector<storage::TrialChange>& changes,
    int64_t after, bool more) {
  std::string body = "{\"events\":[";
  // Grown once, from the first trial's size: each regrowth of a string of
  // megabytes copies it and makes the allocator consolidate its free lists.
  int64_t last = after;
  for (size_t i = 0; i < changes.size(); ++i) {
    if (i > 0) body.push_back(',');
    absl::StrAppend(&body, "{\"sequence\":", changes[i].sequence,
                    ",\"trial\":");
    AppendCompactTrial(study, changes[i].trial, &body);
    if (i == 0) body.reserve(body.size() * (changes.size() + 1) * 5 / 4);
    body.push_back('}');
    last = changes[i].sequence;
  }
  // As the full feed: the sequence as a string (an int64 in the mapping).
  absl::StrAppend(&body, "],\"last_sequence\":\"", last,
                  "\",\"more\":", more ? "true" : "false", "}");
  return body;
}

namespace {

// `config` without its parent link, for the spaces below: a space of one
// parameter, or of the parameters present in every trial of a subset. No
// parameter is conditional there, and a parent index would point into the
// study's whole space (a space of one conditional parameter failed to
// build: "parent: 0 is not the index of another parameter").
optimizer::ParameterConfig Unconditional(optimizer::ParameterConfig config) {
  config.parent = optimizer::kNoParent;
  config.parent_values.clear();
  return config;
}

// The metric whose importances are asked for: `name` among the spec's
// metrics, or the first objective when `name` is empty.
struct ImportanceMetric {
  std::string name;
  bool maximize = true;
};

absl::StatusOr<ImportanceMetric> ResolveMetric(const v1::StudySpec& spec,
                                               const std::string& name) {
  if (name.empty()) {
    const StudyMetrics metrics(spec);
    if (metrics.objectives().empty()) return ImportanceMetric{};
    return ImportanceMetric{metrics.primary().name, metrics.primary().maximize};
  }
  std::vector<std::string> names;
  for (const v1::MetricSpec& m : spec.metrics()) {
    if (m.name() == name) {
      return ImportanceMetric{name, m.goal() != v1::MetricSpec::MINIMIZE};
    }
    names.push_back(m.name());
  }
  return absl::InvalidArgumentError(
      absl::StrCat("metric: \"", absl::CHexEscape(name),
                   "\" is not a metric of the study (its metrics: ",
                   absl::StrJoin(names, ", "), ")"));
}

// One parameter's value in `space` (a space of that parameter alone), or
// nullopt when `trial` lacks it (an inactive conditional parameter) or its
// value no longer fits.
std::optional<double> ParameterValue(const optimizer::SearchSpace& space,
                                     const v1::Trial& trial) {
  ParameterValues one;
  for (const v1::ParameterValue& v : trial.parameters()) {
    if (v.name() == space.parameters()[0].name) *one.Add() = v;
  }
  if (one.empty()) return std::nullopt;
  absl::StatusOr<optimizer::Assignment> a = ToAssignment("", space, one);
  if (!a.ok()) return std::nullopt;
  return (*a)[0];
}

struct ImportancePoint {
  std::vector<std::optional<double>> x;  // per parameter; nullopt: absent
  double y = 0.0;                        // maximized
};

}  // namespace

absl::StatusOr<std::string> ImportanceJson(
    const v1::Study& study, const std::vector<v1::Trial>& completed,
    const std::string& metric_name) {
  const v1::StudySpec& spec = study.spec();
  absl::StatusOr<ImportanceMetric> metric = ResolveMetric(spec, metric_name);
  if (!metric.ok()) return metric.status();
  absl::StatusOr<optimizer::SearchSpace> space = ToSearchSpace(spec);
  if (!space.ok()) return space.status();
  const int dim = space->dim();
  std::vector<optimizer::SearchSpace> singles;
  for (const optimizer::ParameterConfig& p : space->parameters()) {
    absl::StatusOr<optimizer::SearchSpace> one =
        optimizer::SearchSpace::Create({Unconditional(p)});
    if (!one.ok()) return one.status();
    singles.push_back(*std::move(one));
  }
  std::vector<ImportancePoint> points;
  for (const v1::Trial& trial : completed) {
    if (trial.state() != v1::Trial::COMPLETED) continue;
    const v1::Measurement* result = ResultMeasurement(trial);
    if (result == nullptr) continue;
    auto value = result->metrics().find(metric->name);
    if (value == result->metrics().end() || std::isnan(value->second)) {
      continue;
    }
    ImportancePoint point;
    point.y = metric->maximize ? value->second : -value->second;
    bool any = false;
    for (int j = 0; j < dim; ++j) {
      point.x.push_back(ParameterValue(singles[j], trial));
      any = any || point.x.back().has_value();
    }
    if (any) points.push_back(std::move(point));
  }
  // Infinities as the worst finite value (maximized: the smallest).
  double worst = std::numeric_limits<double>::infinity();
  for (const ImportancePoint& p : points) {
    if (std::isfinite(p.y)) worst = std::min(worst, p.y);
  }
  std::vector<ImportancePoint> kept;
  for (ImportancePoint& p : points) {
    if (!std::isfinite(p.y)) {
      if (!std::isfinite(worst)) continue;  // no finite value at all
      p.y = worst;
    }
    kept.push_back(std::move(p));
  }

  std::string body = "{\"method\":\"fanova\",\"objective\":";
  AppendJsonString(metric->name, &body);
  absl::StrAppend(&body, ",\"trials\":", kept.size());
  if (kept.size() < 2) {
    body.append(
        ",\"trees\":0,\"varying_trees\":0,\"parameters\":[],\"message\":"
        "\"needs at least 2 completed trials with a value of the metric\"}");
    return body;
  }
  optimizer::ImportanceOptions options;
  options.num_trees = kImportanceTrees;
  options.max_points_per_tree = kImportancePointsPerTree;
  options.seed = spec.seed();

  // Each parameter's importance over the trials where it is present, in
  // the forest over the parameters present in all of those trials. Without
  // conditional parameters that is one forest over every trial and
  // parameter, and every share comes from it.
  struct Share {
    double fraction = 0.0;
    double stddev = 0.0;
    size_t trials = 0;
  };
  std::vector<Share> shares(dim);
  std::vector<char> done(dim, 0);
  int trees = 0;
  int varying_trees = 0;
  bool conditional = false;
  for (int j = 0; j < dim; ++j) {
    if (done[j]) continue;
    std::vector<const ImportancePoint*> with;
    for (const ImportancePoint& p : kept) {
      if (p.x[j]) with.push_back(&p);
    }
    if (with.size() != kept.size()) conditional = true;
    shares[j].trials = with.size();
    if (with.size() < 2) {
      done[j] = 1;
      continue;
    }
    std::vector<int> sub;  // parameters present in all of `with`
    for (int k = 0; k < dim; ++k) {
      bool all = true;
      for (const ImportancePoint* p : with) all = all && p->x[k].has_value();
      if (all) sub.push_back(k);
    }
    std::vector<optimizer::ParameterConfig> configs;
    for (int k : sub) configs.push_back(Unconditional(space->parameters()[k]));
    absl::StatusOr<optimizer::SearchSpace> sub_space =
        optimizer::SearchSpace::Create(configs);
    if (!sub_space.ok()) return sub_space.status();
    std::vector<optimizer::Assignment> xs;
    std::vector<double> ys;
    for (const ImportancePoint* p : with) {
      optimizer::Assignment a;
      for (int k : sub) a.push_back(*p->x[k]);
      xs.push_back(std::move(a));
      ys.push_back(p->y);
    }
    absl::StatusOr<optimizer::ImportanceResult> result =
        optimizer::FanovaImportance(*sub_space, xs, ys, options);
    if (!result.ok()) return result.status();
    trees = std::max(trees, result->trees);
    varying_trees = std::max(varying_trees, result->varying_trees);
    // The same forest answers for every parameter with the same trials.
    for (size_t s = 0; s < sub.size(); ++s) {
      const int k = sub[s];
      size_t present = 0;
      for (const ImportancePoint& p : kept) present += p.x[k].has_value();
      if (k != j && present != with.size()) continue;
      shares[k] = {result->parameters[s].fraction, result->parameters[s].stddev,
                   with.size()};
      done[k] = 1;
    }
  }
  absl::StrAppend(
      &body, ",\"trees\":", trees, ",\"varying_trees\":", varying_trees,
      ",\"conditional\":", conditional ? "true" : "false", ",\"parameters\":[");
  for (int i = 0; i < dim; ++i) {
    if (i > 0) body.push_back(',');
    body.append("{\"name\":");
    AppendJsonString(spec.parameters(i).name(), &body);
    body.append(",\"importance\":");
    AppendJsonNumber(shares[i].fraction, &body);
    body.append(",\"stddev\":");
    AppendJsonNumber(shares[i].stddev, &body);
    absl::StrAppend(&body, ",\"trials\":", shares[i].trials);
    body.push_back('}');
  }
  body.append("]");
  if (varying_trees == 0) {
    body.append(
        ",\"message\":\"every completed trial has the same objective\"");
  }
  body.append("}");
  return body;
}

}  // namespace hypertune::service
