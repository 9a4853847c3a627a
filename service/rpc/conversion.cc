#include "service/rpc/conversion.h"

#include <cmath>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/study_metrics.h"
#include "optimizer/grid_suggester.h"
#include "service/rpc/conditional_spec.h"
#include "service/rpc/status_macros.h"

namespace hypertune::service {
namespace {

namespace opt = ::hypertune::optimizer;

opt::Scale ToScale(v1::Scale scale) {
  return scale == v1::LOG ? opt::Scale::kLog : opt::Scale::kLinear;
}

opt::ParameterConfig ToParameterConfig(const v1::ParameterSpec& p) {
  opt::ParameterConfig c;
  c.name = p.name();
  switch (p.kind_case()) {
    case v1::ParameterSpec::kDoubleSpec:
      c.type = opt::ParameterType::kDouble;
      c.min = p.double_spec().min();
      c.max = p.double_spec().max();
      c.scale = ToScale(p.double_spec().scale());
      c.grid_points = p.double_spec().grid_points();
      break;
    case v1::ParameterSpec::kIntegerSpec:
      c.type = opt::ParameterType::kInteger;
      c.min = static_cast<double>(p.integer_spec().min());
      c.max = static_cast<double>(p.integer_spec().max());
      c.scale = ToScale(p.integer_spec().scale());
      c.grid_points = p.integer_spec().grid_points();
      break;
    case v1::ParameterSpec::kDiscreteSpec:
      c.type = opt::ParameterType::kDiscrete;
      c.values.assign(p.discrete_spec().values().begin(),
                      p.discrete_spec().values().end());
      break;
    case v1::ParameterSpec::kCategoricalSpec:
      c.type = opt::ParameterType::kCategorical;
      c.categories.assign(p.categorical_spec().values().begin(),
                          p.categorical_spec().values().end());
      break;
    case v1::ParameterSpec::KIND_NOT_SET:
      break;
  }
  return c;
}

// The numeric value of `v`, if it holds a number.
std::optional<double> NumericValue(const v1::ParameterValue& v) {
  switch (v.value_case()) {
    case v1::ParameterValue::kDoubleValue:
      return v.double_value();
    case v1::ParameterValue::kIntValue:
      return static_cast<double>(v.int_value());
    default:
      return std::nullopt;
  }
}

}  // namespace

absl::StatusOr<opt::SearchSpace> ToSearchSpace(const v1::StudySpec& spec) {
  std::vector<opt::ParameterConfig> configs;
  configs.reserve(spec.parameters_size());
  for (int i = 0; i < spec.parameters_size(); ++i) {
    if (spec.parameters(i).kind_case() == v1::ParameterSpec::KIND_NOT_SET) {
      return absl::InvalidArgumentError(
          absl::StrCat("study.spec.parameters[", i, "]: no kind set"));
    }
    configs.push_back(ToParameterConfig(spec.parameters(i)));
  }
  HT_RETURN_IF_ERROR(ResolveParents(spec, configs));
  absl::StatusOr<opt::SearchSpace> space =
      opt::SearchSpace::Create(std::move(configs));
  if (!space.ok()) {
    return absl::Status(space.status().code(),
                        absl::StrCat("study.spec.", space.status().message()));
  }
  return space;
}

absl::Status CheckSearchSpace(const v1::StudySpec& spec) {
  absl::StatusOr<opt::SearchSpace> space = ToSearchSpace(spec);
  if (!space.ok()) return space.status();
  if (spec.algorithm() != v1::GRID) return absl::OkStatus();
  absl::Status grid = opt::GridSize(*space).status();
  if (grid.ok()) return grid;
  return absl::Status(grid.code(), absl::StrCat("study.spec.", grid.message()));
}

absl::StatusOr<opt::Algorithm> ToOptimizerAlgorithm(v1::Algorithm algorithm) {
  switch (algorithm) {
    case v1::RANDOM:
      return opt::Algorithm::kRandom;
    case v1::QUASI_RANDOM:
      return opt::Algorithm::kQuasiRandom;
    case v1::GP_BANDIT:
      return opt::Algorithm::kGpBandit;
    case v1::TPE:
      return opt::Algorithm::kTpe;
    case v1::GRID:
      return opt::Algorithm::kGrid;
    case v1::PBT:  // the initial population: random (service/rpc/pbt.h)
      return opt::Algorithm::kRandom;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("study.spec.algorithm: unknown algorithm ",
                       static_cast<int>(algorithm)));
  }
}

namespace {

// `values` by the space's order; a root parameter not given is an error
// unless `partial`.
absl::StatusOr<opt::Assignment> ParseAssignment(const std::string& field,
                                                const opt::SearchSpace& space,
                                                const ParameterValues& values,
                                                bool partial) {
  absl::flat_hash_map<absl::string_view, const v1::ParameterValue*> by_name;
  for (const v1::ParameterValue& v : values) {
    if (!by_name.emplace(v.name(), &v).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: parameter \"%s\" given twice", field,
                          absl::CHexEscape(v.name())));
    }
  }
  opt::Assignment assignment;
  assignment.reserve(space.dim());
  for (const opt::ParameterConfig& p : space.parameters()) {
    auto it = by_name.find(p.name);
    if (it == by_name.end() && (partial || p.parent != opt::kNoParent)) {
      // Absent: right for an inactive parameter; Validate below names an
      // active one.
      assignment.push_back(opt::kInactive);
      continue;
    }
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: parameter \"%s\" is missing", field, p.name));
    }
    const v1::ParameterValue& v = *it->second;
    by_name.erase(it);
    if (p.type == opt::ParameterType::kCategorical) {
      if (v.value_case() != v1::ParameterValue::kStringValue) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: parameter \"%s\" is categorical and needs string_value", field,
            p.name));
      }
      auto cat =
          std::find(p.categories.begin(), p.categories.end(), v.string_value());
      if (cat == p.categories.end()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: parameter \"%s\": unknown category \"%s\"",
                            field, p.name, absl::CHexEscape(v.string_value())));
      }
      assignment.push_back(static_cast<double>(cat - p.categories.begin()));
      continue;
    }
    std::optional<double> number = NumericValue(v);
    if (!number) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: parameter \"%s\" needs a number (double_value or int_value)",
          field, p.name));
    }
    if (std::isnan(*number)) {  // NaN means "absent" to the optimizer
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: parameter \"%s\" is NaN; leave it out to have it chosen", field,
          p.name));
    }
    assignment.push_back(*number);
  }
  if (!by_name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: unknown parameter \"%s\"", field,
                        absl::CHexEscape(by_name.begin()->first)));
  }
  return assignment;
}

}  // namespace

absl::StatusOr<opt::Assignment> ToAssignment(const std::string& field,
                                             const opt::SearchSpace& space,
                                             const ParameterValues& values) {
  absl::StatusOr<opt::Assignment> assignment =
      ParseAssignment(field, space, values, false);
  if (!assignment.ok()) return assignment;
  if (absl::Status s = space.Validate(*assignment); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", s.message()));
  }
  return assignment;
}

absl::StatusOr<opt::Assignment> ToPartialAssignment(
    const std::string& field, const opt::SearchSpace& space,
    const ParameterValues& values) {
  return ParseAssignment(field, space, values, true);
}

ParameterValues ToParameterValues(const opt::SearchSpace& space,
                                  const opt::Assignment& assignment) {
  ParameterValues values;
  for (int i = 0; i < space.dim(); ++i) {
    const opt::ParameterConfig& p = space.parameters()[i];
    if (std::isnan(assignment[i])) continue;  // Inactive: absent.
    v1::ParameterValue* v = values.Add();
    v->set_name(p.name);
    switch (p.type) {
      case opt::ParameterType::kDouble:
      case opt::ParameterType::kDiscrete:
        v->set_double_value(assignment[i]);
        break;
      case opt::ParameterType::kInteger:
        v->set_int_value(static_cast<int64_t>(std::llround(assignment[i])));
        break;
      case opt::ParameterType::kCategorical:
        v->set_string_value(p.categories[static_cast<size_t>(assignment[i])]);
        break;
    }
  }
  return values;
}

std::optional<double> MaximizedObjective(const v1::StudySpec& spec,
                                         const v1::Measurement& measurement) {
  return StudyMetrics(spec).MaximizedPrimary(measurement);
}

std::vector<opt::MetricConfig> ToMetricConfigs(const StudyMetrics& metrics) {
  std::vector<opt::MetricConfig> configs;
  for (size_t i = 0; i < metrics.objectives().size(); ++i) {
    configs.push_back({opt::MetricRole::kObjective});
  }
  for (const StudyMetrics::Constraint& c : metrics.constraints()) {
    configs.push_back({opt::MetricRole::kConstraint, c.lower, c.upper});
  }
  return configs;
}

std::optional<std::vector<double>> ModelValues(const StudyMetrics& metrics,
                                               const v1::Measurement& m) {
  std::vector<double> values;
  for (const StudyMetrics::Objective& o : metrics.objectives()) {
    auto it = m.metrics().find(o.name);
    if (it == m.metrics().end()) return std::nullopt;
    values.push_back(o.maximize ? it->second : -it->second);
  }
  for (const StudyMetrics::Constraint& c : metrics.constraints()) {
    auto it = m.metrics().find(c.name);
    if (it == m.metrics().end()) return std::nullopt;
    values.push_back(it->second);
  }
  return values;
}

const v1::Measurement* ResultMeasurement(const v1::Trial& trial) {
  if (trial.has_final_measurement() &&
      !trial.final_measurement().metrics().empty()) {
    return &trial.final_measurement();
  }
  if (trial.measurements_size() > 0) {
    return &trial.measurements(trial.measurements_size() - 1);
  }
  return nullptr;
}

std::vector<opt::Observation> ToHistory(const v1::StudySpec& spec,
                                        const opt::SearchSpace& space,
                                        const std::vector<v1::Trial>& trials,
                                        bool primary_only) {
  const StudyMetrics metrics(spec);
  std::vector<opt::Observation> history;
  history.reserve(trials.size());
  for (const v1::Trial& trial : trials) {
    opt::Observation obs;
    switch (trial.state()) {
      case v1::Trial::COMPLETED:
      case v1::Trial::STOPPED: {
        const v1::Measurement* m = ResultMeasurement(trial);
        std::optional<std::vector<double>> values;
        if (m != nullptr && primary_only) {
          if (std::optional<double> v = metrics.MaximizedPrimary(*m)) {
            values = std::vector<double>{*v};
          }
        } else if (m != nullptr) {
          values = ModelValues(metrics, *m);
        }
        if (!values) continue;  // a result without every modelled metric
        obs.outcome = opt::Outcome::kCompleted;
        obs.values = *std::move(values);
        break;
      }
      case v1::Trial::INFEASIBLE:
        obs.outcome = opt::Outcome::kInfeasible;
        break;
      case v1::Trial::FAILED:
        continue;
      default:
        obs.outcome = opt::Outcome::kPending;
        break;
    }
    absl::StatusOr<opt::Assignment> x =
        ToAssignment("trial.parameters", space, trial.parameters());
    if (!x.ok()) continue;
    obs.x = *std::move(x);
    obs.trial_id = trial.id();
    if (spec.cost_aware()) obs.cost = TrialCost(spec, trial);
    history.push_back(std::move(obs));
  }
  return history;
}

double TrialCost(const v1::StudySpec& spec, const v1::Trial& trial) {
  if (spec.cost_metric().empty()) return trial.device_seconds();
  const v1::Measurement* m = ResultMeasurement(trial);
  if (m == nullptr) return 0;
  const auto it = m->metrics().find(spec.cost_metric());
  if (it == m->metrics().end()) return 0;
  return std::isfinite(it->second) && it->second > 0 ? it->second : 0;
}

opt::PriorStudy ToPriorStudy(const opt::SearchSpace& space,
                             const v1::StudySpec& spec,
                             const v1::StudySpec& prior_spec,
                             const std::vector<v1::Trial>& prior_trials) {
  opt::PriorStudy prior;
  absl::flat_hash_map<std::string, v1::ParameterSpec::KindCase> prior_kinds;
  for (const v1::ParameterSpec& p : prior_spec.parameters()) {
    prior_kinds[p.name()] = p.kind_case();
  }
  absl::flat_hash_set<std::string> shared;
  for (const v1::ParameterSpec& p : spec.parameters()) {
    const auto it = prior_kinds.find(p.name());
    const bool same = it != prior_kinds.end() && it->second == p.kind_case();
    prior.shared.push_back(same);
    if (same) shared.insert(p.name());
  }
  // Values for the parameters the prior lacks; the prior ignores them.
  const ParameterValues placeholders = ToParameterValues(
      space, space.Decode(Eigen::VectorXd::Constant(space.dim(), 0.5)));
  const StudyMetrics prior_metrics(prior_spec);
  for (const v1::Trial& trial : prior_trials) {
    if (trial.state() != v1::Trial::COMPLETED) continue;
    const v1::Measurement* m = ResultMeasurement(trial);
    if (m == nullptr) continue;
    // The prior's objectives in its order, maximized, up to the first it
    // lacks: objective k of this study learns from objective k of it.
    std::vector<double> objectives;
    for (const StudyMetrics::Objective& o : prior_metrics.objectives()) {
      const auto it = m->metrics().find(o.name);
      if (it == m->metrics().end() || std::isnan(it->second)) break;
      objectives.push_back(o.maximize ? it->second : -it->second);
    }
    if (objectives.empty()) continue;
    ParameterValues values;
    for (const v1::ParameterValue& v : trial.parameters()) {
      if (shared.contains(v.name())) *values.Add() = v;
    }
    for (const v1::ParameterValue& v : placeholders) {
      if (!shared.contains(v.name())) *values.Add() = v;
    }
    absl::StatusOr<opt::Assignment> x =
        ToAssignment("trial.parameters", space, values);
    if (!x.ok()) continue;  // Outside this study's domain.
    prior.trials.push_back(
        {*std::move(x), opt::Outcome::kCompleted, std::move(objectives)});
  }
  return prior;
}

v1::EarlyStoppingSpec::MultiObjective MultiObjectiveOf(
    const v1::StudySpec& spec) {
  const v1::EarlyStoppingSpec& es = spec.early_stopping();
  if (es.multi_objective() !=
      v1::EarlyStoppingSpec::MULTI_OBJECTIVE_UNSPECIFIED)
    return es.multi_objective();
  if (es.promote_by_model()) return v1::EarlyStoppingSpec::FIRST_OBJECTIVE;
  return StudyMetrics(spec).objectives().size() == 2
             ? v1::EarlyStoppingSpec::HYPERVOLUME
             : v1::EarlyStoppingSpec::EPSILON_NET;
}

opt::EarlyStoppingConfig ToEarlyStoppingConfig(const v1::StudySpec& spec) {
  using Rule = opt::EarlyStoppingConfig::Rule;
  const v1::EarlyStoppingSpec& es = spec.early_stopping();
  opt::EarlyStoppingConfig config;
  switch (es.rule()) {
    case v1::EarlyStoppingSpec::MEDIAN:
      config.rule = Rule::kMedian;
      break;
    case v1::EarlyStoppingSpec::PERCENTILE:
      config.rule = Rule::kPercentile;
      break;
    case v1::EarlyStoppingSpec::ASHA:
      config.rule = Rule::kAsha;
      break;
    case v1::EarlyStoppingSpec::HYPERBAND:
      config.rule = Rule::kHyperband;
      break;
    default:
      config.rule = Rule::kNone;
      break;
  }
  const StudyMetrics metrics(spec);
  config.maximize = metrics.objectives().empty() || metrics.primary().maximize;
  if (es.grace_steps() != 0) config.grace_steps = es.grace_steps();
  if (es.min_trials() != 0) config.min_trials = es.min_trials();
  if (es.percentile() != 0) config.percentile = es.percentile();
  if (es.min_resource() != 0) config.min_resource = es.min_resource();
  config.max_resource = es.max_resource();
  if (es.reduction_factor() != 0) {
    config.reduction_factor = es.reduction_factor();
  }
  config.brackets = es.brackets();
  config.pause_at_rungs = es.pause_at_rungs();
  config.promote_by_model = es.promote_by_model();
  using Mo = opt::EarlyStoppingConfig::MultiObjective;
  switch (MultiObjectiveOf(spec)) {
    case v1::EarlyStoppingSpec::FIRST_OBJECTIVE:
      config.multi_objective = Mo::kFirstObjective;
      break;
    case v1::EarlyStoppingSpec::HYPERVOLUME:
      config.multi_objective = Mo::kHypervolume;
      break;
    default:
      config.multi_objective = Mo::kEpsilonNet;
      break;
  }
  if (metrics.multi_objective()) {
    for (const StudyMetrics::Objective& o : metrics.objectives()) {
      config.objectives_maximize.push_back(o.maximize);
    }
  }
  for (const StudyMetrics::Constraint& c : metrics.constraints()) {
    config.constraints.push_back({c.name, c.lower, c.upper});
  }
  config.stop_on_constraints = es.stop_on_constraints();
  return config;
}

std::vector<opt::TrialCurve> ToCurves(const v1::StudySpec& spec,
                                      const std::vector<v1::Trial>& trials) {
  using Status = opt::TrialCurve::Status;
  std::vector<opt::TrialCurve> curves;
  curves.reserve(trials.size());
  const StudyMetrics metrics(spec);
  if (metrics.objectives().empty()) return curves;
  const std::string& objective = metrics.primary().name;
  // Every objective and constraint too, when the rule reads them.
  const opt::EarlyStoppingConfig rule = ToEarlyStoppingConfig(spec);
  const bool every_metric =
      opt::JudgesSeveralObjectives(rule) || rule.stop_on_constraints;
  const auto value = [](const v1::Measurement& m, const std::string& name) {
    auto it = m.metrics().find(name);
    return it == m.metrics().end() ? std::numeric_limits<double>::quiet_NaN()
                                   : it->second;
  };
  for (const v1::Trial& trial : trials) {
    opt::TrialCurve curve;
    switch (trial.state()) {
      case v1::Trial::COMPLETED:
      case v1::Trial::STOPPED:
        curve.status = Status::kFinished;
        break;
      case v1::Trial::STOPPING:
        curve.status = Status::kStopping;
        break;
      case v1::Trial::PAUSED:
        curve.status = Status::kPaused;
        break;
      case v1::Trial::REQUESTED:
      case v1::Trial::ACTIVE:
        curve.status = Status::kRunning;
        break;
      default:
        continue;
    }
    curve.id = trial.id();
    for (const v1::Measurement& m : trial.measurements()) {
      auto it = m.metrics().find(objective);
      if (it != m.metrics().end())
        curve.points.emplace_back(m.step(), it->second);
      if (!every_metric) continue;
      opt::TrialCurve::Metrics& point = curve.metrics.emplace_back();
      point.step = m.step();
      for (const StudyMetrics::Objective& o : metrics.objectives()) {
        point.objectives.push_back(value(m, o.name));
      }
      for (const StudyMetrics::Constraint& c : metrics.constraints()) {
        point.constraints.push_back(value(m, c.name));
      }
    }
    curves.push_back(std::move(curve));
  }
  return curves;
}

ModelledCurves ToModelledCurves(const v1::StudySpec& spec,
                                const opt::SearchSpace& space,
                                const std::vector<v1::Trial>& trials) {
  absl::flat_hash_map<int64_t, const v1::Trial*> by_id;
  for (const v1::Trial& t : trials) by_id[t.id()] = &t;
  ModelledCurves out;
  for (opt::TrialCurve& curve : ToCurves(spec, trials)) {
    absl::StatusOr<opt::Assignment> x = ToAssignment(
        "trial.parameters", space, by_id.at(curve.id)->parameters());
    if (!x.ok()) continue;
    out.parameters.push_back(*std::move(x));
    out.curves.push_back(std::move(curve));
  }
  return out;
}

}  // namespace hypertune::service
