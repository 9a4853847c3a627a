#include "service/optuna/optuna_storage.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/limits.h"
#include "nlohmann/json.hpp"
#include "service/rpc/optuna_space.h"
#include "service/rpc/status_macros.h"
#include "service/rpc/validation.h"

namespace hypertune::service {
namespace {

using Json = nlohmann::json;

constexpr char kStudyIdAttribute[] = "optuna.study_id";
constexpr char kUserAttrs[] = "optuna.user_attrs";
constexpr char kSystemAttrs[] = "optuna.system_attrs";
constexpr char kParams[] = "optuna.params";
constexpr char kDistributions[] = "optuna.distributions";
// Who holds a RUNNING trial: an Optuna process, without a lease.
constexpr char kOptunaClient[] = "optuna";
constexpr int kTrialIdBits = 32;

int64_t EncodeTrialId(int64_t study_id, int64_t id) {
  return (study_id << kTrialIdBits) | id;
}
int64_t StudyIdOf(int64_t trial_id) { return trial_id >> kTrialIdBits; }
int64_t LocalIdOf(int64_t trial_id) {
  return trial_id & ((int64_t{1} << kTrialIdBits) - 1);
}

bool IsStoreOnly(const v1::Study& study) {
  auto it = study.attributes().find(kOptunaStorageAttribute);
  return it != study.attributes().end() && it->second == kOptunaStorageGrpc;
}

int64_t StudyIdAttribute(const v1::Study& study) {
  auto it = study.attributes().find(kStudyIdAttribute);
  int64_t id = 0;
  if (it == study.attributes().end() || !absl::SimpleAtoi(it->second, &id)) {
    return 0;
  }
  return id;
}

bool IsFinished(v1::Trial::State state) {
  return state == v1::Trial::COMPLETED || state == v1::Trial::STOPPED ||
         state == v1::Trial::INFEASIBLE || state == v1::Trial::FAILED;
}

// A JSON object kept in attribute `key` of `attributes` (empty if absent or
// unreadable).
Json ReadObject(const google::protobuf::Map<std::string, std::string>& attrs,
                const char* key) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return Json::object();
  Json parsed = Json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  return parsed.is_object() ? parsed : Json::object();
}

void WriteObject(google::protobuf::Map<std::string, std::string>& attrs,
                 const char* key, const Json& object) {
  if (object.empty()) {
    attrs.erase(key);
  } else {
    attrs[key] = object.dump();
  }
}

// The JSON object's string values as a map (attribute texts).
void CopyTexts(const Json& object,
               google::protobuf::Map<std::string, std::string>& out) {
  for (const auto& [key, value] : object.items()) {
    if (value.is_string()) out[key] = value.get<std::string>();
  }
}

// The metric names of a study with `n` objectives.
std::string MetricName(int n, int i) {
  return n == 1 ? std::string("value") : absl::StrCat("value_", i);
}

std::string FormatTime(int64_t unix_ms) {
  if (unix_ms <= 0) return "";
  return absl::FormatTime("%Y-%m-%d %H:%M:%E6S", absl::FromUnixMillis(unix_ms),
                          absl::LocalTimeZone());
}

absl::StatusOr<int64_t> ParseTime(const std::string& field,
                                  const std::string& text) {
  if (text.empty()) return 0;
  absl::Time time;
  std::string error;
  if (!absl::ParseTime("%Y-%m-%d %H:%M:%E*S", text, absl::LocalTimeZone(),
                       &time, &error)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": \"", text, "\" is not YYYY-MM-DD HH:MM:SS.ffffff"));
  }
  return absl::ToUnixMillis(time);
}

optuna::TrialState ToOptunaState(v1::Trial::State state) {
  switch (state) {
    case v1::Trial::REQUESTED:
      return optuna::WAITING;
    case v1::Trial::COMPLETED:
      return optuna::COMPLETE;
    case v1::Trial::STOPPED:
      return optuna::PRUNED;
    case v1::Trial::INFEASIBLE:
    case v1::Trial::FAILED:
      return optuna::FAIL;
    default:
      return optuna::RUNNING;
  }
}

absl::StatusOr<v1::Trial::State> FromOptunaState(const std::string& field,
                                                 int state) {
  switch (state) {
    case optuna::WAITING:
      return v1::Trial::REQUESTED;
    case optuna::RUNNING:
      return v1::Trial::ACTIVE;
    case optuna::COMPLETE:
      return v1::Trial::COMPLETED;
    case optuna::PRUNED:
      return v1::Trial::STOPPED;
    case optuna::FAIL:
      return v1::Trial::FAILED;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", state, " is not an Optuna trial state"));
  }
}

// The directions of a study, from its objectives' goals.
std::vector<optuna::StudyDirection> Directions(const v1::Study& study) {
  std::vector<optuna::StudyDirection> out;
  for (const v1::MetricSpec& metric : study.spec().metrics()) {
    out.push_back(metric.goal() == v1::MetricSpec::MAXIMIZE ? optuna::MAXIMIZE
                                                            : optuna::MINIMIZE);
  }
  return out;
}

optuna::Study ToOptunaStudy(const v1::Study& study) {
  optuna::Study out;
  out.set_study_id(StudyIdAttribute(study));
  out.set_study_name(study.name());
  for (optuna::StudyDirection d : Directions(study)) out.add_directions(d);
  CopyTexts(ReadObject(study.attributes(), kUserAttrs),
            *out.mutable_user_attributes());
  CopyTexts(ReadObject(study.attributes(), kSystemAttrs),
            *out.mutable_system_attributes());
  return out;
}

// The Optuna parameters and distributions of a trial that hypertune wrote
// (one that hypertune.optuna.Sampler added after a switch), from its
// parameter values and the study's space: DOUBLE is a FloatDistribution,
// INTEGER an IntDistribution, DISCRETE and CATEGORICAL a
// CategoricalDistribution of their values (the value's index inside).
void DeriveOptunaParams(const v1::Study& study, const v1::Trial& trial,
                        optuna::Trial& out) {
  for (const v1::ParameterValue& value : trial.parameters()) {
    const auto& specs = study.spec().parameters();
    auto spec = std::find_if(
        specs.begin(), specs.end(),
        [&](const v1::ParameterSpec& p) { return p.name() == value.name(); });
    if (spec == specs.end()) continue;
    Json distribution;
    double internal = 0;
    switch (spec->kind_case()) {
      case v1::ParameterSpec::kDoubleSpec:
        distribution = {{"name", "FloatDistribution"},
                        {"attributes",
                         {{"low", spec->double_spec().min()},
                          {"high", spec->double_spec().max()},
                          {"log", spec->double_spec().scale() == v1::LOG},
                          {"step", nullptr}}}};
        internal = value.double_value();
        break;
      case v1::ParameterSpec::kIntegerSpec:
        distribution = {{"name", "IntDistribution"},
                        {"attributes",
                         {{"low", spec->integer_spec().min()},
                          {"high", spec->integer_spec().max()},
                          {"log", spec->integer_spec().scale() == v1::LOG},
                          {"step", 1}}}};
        internal = static_cast<double>(value.int_value());
        break;
      case v1::ParameterSpec::kDiscreteSpec: {
        const auto& values = spec->discrete_spec().values();
        auto at = std::find(values.begin(), values.end(), value.double_value());
        if (at == values.end()) continue;
        distribution = {
            {"name", "CategoricalDistribution"},
            {"attributes",
             {{"choices", std::vector<double>(values.begin(), values.end())}}}};
        internal = static_cast<double>(at - values.begin());
        break;
      }
      case v1::ParameterSpec::kCategoricalSpec: {
        const auto& values = spec->categorical_spec().values();
        auto at = std::find(values.begin(), values.end(), value.string_value());
        if (at == values.end()) continue;
        distribution = {{"name", "CategoricalDistribution"},
                        {"attributes",
                         {{"choices", std::vector<std::string>(
                                          values.begin(), values.end())}}}};
        internal = static_cast<double>(at - values.begin());
        break;
      }
      default:
        continue;
    }
    (*out.mutable_params())[value.name()] = internal;
    (*out.mutable_distributions())[value.name()] = distribution.dump();
  }
}

optuna::Trial ToOptunaTrial(const v1::Study& study, const v1::Trial& trial) {
  optuna::Trial out;
  out.set_trial_id(EncodeTrialId(StudyIdAttribute(study), trial.id()));
  out.set_number(trial.id() - 1);
  out.set_state(ToOptunaState(trial.state()));
  const int n = study.spec().metrics_size();
  const auto& finals = trial.final_measurement().metrics();
  if (!finals.empty()) {
    for (int i = 0; i < n; ++i) {
      auto it = finals.find(MetricName(n, i));
      if (it == finals.end()) break;
      out.add_values(it->second);
    }
  }
  out.set_datetime_start(FormatTime(trial.start_time_ms()));
  out.set_datetime_complete(FormatTime(trial.end_time_ms()));
  if (trial.attributes().contains(kParams)) {
    const Json params = ReadObject(trial.attributes(), kParams);
    for (const auto& [name, value] : params.items()) {
      if (value.is_number()) {
        (*out.mutable_params())[name] = value.get<double>();
      }
    }
    CopyTexts(ReadObject(trial.attributes(), kDistributions),
              *out.mutable_distributions());
  } else {
    DeriveOptunaParams(study, trial, out);
  }
  CopyTexts(ReadObject(trial.attributes(), kUserAttrs),
            *out.mutable_user_attributes());
  CopyTexts(ReadObject(trial.attributes(), kSystemAttrs),
            *out.mutable_system_attributes());
  const std::string first = MetricName(n, 0);
  for (const v1::Measurement& m : trial.measurements()) {
    auto it = m.metrics().find(first);
    if (it != m.metrics().end()) {
      (*out.mutable_intermediate_values())[m.step()] = it->second;
    }
  }
  return out;
}

// Grows `study`'s space by `incoming` (a parameter as InferOptunaSpace maps
// one distribution): a new parameter is appended, a range widens, a
// DISCRETE parameter's values are joined. INVALID_ARGUMENT where Optuna
// would refuse the distribution too (another kind or scale, other
// categorical choices); false when the space cannot hold it (too many
// values), so that the trial keeps the value in its Optuna attributes only.
absl::StatusOr<bool> GrowSpace(const std::string& optuna_name,
                               const v1::ParameterSpec& incoming,
                               v1::Study& study) {
  auto* params = study.mutable_spec()->mutable_parameters();
  auto it = std::find_if(
      params->begin(), params->end(),
      [&](const v1::ParameterSpec& p) { return p.name() == incoming.name(); });
  if (it == params->end()) {
    *study.mutable_spec()->add_parameters() = incoming;
    return true;
  }
  v1::ParameterSpec& have = *it;
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("distribution: parameter \"",
                                                   optuna_name, "\" of study ",
                                                   study.name(), " ", why));
  };
  if (have.kind_case() != incoming.kind_case()) {
    return refuse("was set before with a distribution of another kind");
  }
  switch (have.kind_case()) {
    case v1::ParameterSpec::kDoubleSpec: {
      auto& d = *have.mutable_double_spec();
      if (d.scale() != incoming.double_spec().scale()) {
        return refuse("was set before with another log setting");
      }
      d.set_min(std::min(d.min(), incoming.double_spec().min()));
      d.set_max(std::max(d.max(), incoming.double_spec().max()));
      return true;
    }
    case v1::ParameterSpec::kIntegerSpec: {
      auto& d = *have.mutable_integer_spec();
      if (d.scale() != incoming.integer_spec().scale()) {
        return refuse("was set before with another log setting");
      }
      d.set_min(std::min(d.min(), incoming.integer_spec().min()));
      d.set_max(std::max(d.max(), incoming.integer_spec().max()));
      return true;
    }
    case v1::ParameterSpec::kDiscreteSpec: {
      std::vector<double> values(have.discrete_spec().values().begin(),
                                 have.discrete_spec().values().end());
      values.insert(values.end(), incoming.discrete_spec().values().begin(),
                    incoming.discrete_spec().values().end());
      std::sort(values.begin(), values.end());
      values.erase(std::unique(values.begin(), values.end()), values.end());
      if (values.size() > static_cast<size_t>(kMaxValuesPerParameter)) {
        return false;
      }
      have.mutable_discrete_spec()->mutable_values()->Assign(values.begin(),
                                                             values.end());
      return true;
    }
    case v1::ParameterSpec::kCategoricalSpec: {
      const auto& a = have.categorical_spec().values();
      const auto& b = incoming.categorical_spec().values();
      if (!std::equal(a.begin(), a.end(), b.begin(), b.end())) {
        return refuse("was set before with other categorical choices");
      }
      return true;
    }
    default:
      return false;
  }
}

// Sets `value` (a hypertune parameter value of `spec_name`) on `trial`,
// keeping the trial's parameters in the order of the study's space.
void PlaceParameter(const v1::Study& study, v1::ParameterValue value,
                    v1::Trial& trial) {
  std::vector<v1::ParameterValue> values(trial.parameters().begin(),
                                         trial.parameters().end());
  values.erase(std::remove_if(values.begin(), values.end(),
                              [&](const v1::ParameterValue& v) {
                                return v.name() == value.name();
                              }),
               values.end());
  values.push_back(std::move(value));
  auto rank = [&](const std::string& name) {
    const auto& params = study.spec().parameters();
    for (int i = 0; i < params.size(); ++i) {
      if (params[i].name() == name) return i;
    }
    return params.size();
  };
  std::stable_sort(
      values.begin(), values.end(),
      [&](const v1::ParameterValue& a, const v1::ParameterValue& b) {
        return rank(a.name()) < rank(b.name());
      });
  trial.clear_parameters();
  for (v1::ParameterValue& v : values) *trial.add_parameters() = std::move(v);
}

// Sets parameter `name` of `trial` to Optuna's `internal` value under
// `distribution` (Optuna's JSON), growing `study`'s space (its `changed`
// set when it grew). `field` names the request's fields in errors.
absl::Status SetParameter(const std::string& field, const std::string& name,
                          double internal, const std::string& distribution,
                          v1::Study& study, bool& changed, v1::Trial& trial) {
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, "param_name: empty"));
  }
  if (!std::isfinite(internal)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, "param_value_internal: ", internal, " for \"", name,
                     "\" is not a finite number"));
  }
  v1::InferOptunaSpaceRequest infer;
  infer.add_distributions(distribution);
  v1::OptunaTrial& one = *infer.add_trials();
  one.set_state("COMPLETE");
  v1::OptunaParam& param = *one.add_params();
  param.set_name(name);
  param.set_distribution(0);
  param.set_value(internal);
  absl::StatusOr<v1::InferOptunaSpaceResponse> space = InferOptunaSpace(infer);
  if (!space.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, "distribution of \"", name, "\": ", space.status().message()));
  }
  if (space->parameters_size() != 1 || space->trials_size() != 1 ||
      !space->trials(0).kept() || space->trials(0).parameters_size() != 1) {
    std::string why =
        space->trials_size() == 1 ? space->trials(0).reason() : "";
    if (why.empty() && space->left_out_size() > 0) {
      why = space->left_out(0).reason();
    }
    return absl::InvalidArgumentError(
        absl::StrCat(field, "param_value_internal: ", internal,
                     " does not fit the distribution of \"", name, "\"",
                     why.empty() ? "" : ": ", why));
  }
  const v1::ParameterSpec& spec = space->parameters(0).spec();
  const v1::Study before = study;
  absl::StatusOr<bool> grown = GrowSpace(name, spec, study);
  if (!grown.ok()) return grown.status();
  if (before.spec().SerializeAsString() != study.spec().SerializeAsString()) {
    changed = true;
  }
  if (*grown) PlaceParameter(study, space->trials(0).parameters(0), trial);

  Json params = ReadObject(trial.attributes(), kParams);
  Json distributions = ReadObject(trial.attributes(), kDistributions);
  params[name] = internal;
  distributions[name] = distribution;
  WriteObject(*trial.mutable_attributes(), kParams, params);
  WriteObject(*trial.mutable_attributes(), kDistributions, distributions);
  return absl::OkStatus();
}

// Sets the trial's values as its final measurement (none: left as is).
absl::Status SetValues(const std::string& field, const v1::Study& study,
                       const google::protobuf::RepeatedField<double>& values,
                       v1::Trial& trial) {
  if (values.empty()) return absl::OkStatus();
  const int n = study.spec().metrics_size();
  if (values.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, "values: ", values.size(), " given, study ",
                     study.name(), " has ", n, " direction(s)"));
  }
  v1::Measurement final_measurement;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(values[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "values[", i, "]: NaN is not a value"));
    }
    (*final_measurement.mutable_metrics())[MetricName(n, i)] = values[i];
  }
  const int64_t last =
      trial.measurements().empty()
          ? 0
          : trial.measurements(trial.measurements_size() - 1).step();
  final_measurement.set_step(last);
  *trial.mutable_final_measurement() = std::move(final_measurement);
  return absl::OkStatus();
}

// Records intermediate `value` at `step`: a step already recorded is
// overwritten, as Optuna does; the curve stays ordered by step.
absl::Status SetIntermediate(const std::string& field, const v1::Study& study,
                             int64_t step, double value, v1::Trial& trial) {
  if (std::isnan(value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, "intermediate_value: NaN at step ", step, " is not a value"));
  }
  if (step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, "step: ", step, " is negative"));
  }
  const std::string metric = MetricName(study.spec().metrics_size(), 0);
  auto* curve = trial.mutable_measurements();
  auto at = std::lower_bound(
      curve->begin(), curve->end(), step,
      [](const v1::Measurement& m, int64_t s) { return m.step() < s; });
  if (at != curve->end() && at->step() == step) {
    at->mutable_metrics()->clear();
    (*at->mutable_metrics())[metric] = value;
    return absl::OkStatus();
  }
  v1::Measurement m;
  m.set_step(step);
  (*m.mutable_metrics())[metric] = value;
  const int index = static_cast<int>(at - curve->begin());
  curve->Add(std::move(m));
  for (int i = curve->size() - 1; i > index; --i) curve->SwapElements(i, i - 1);
  return absl::OkStatus();
}

// Moves `trial` to `state` at `now`, as Optuna's set_trial_state_values.
void EnterState(v1::Trial::State state, int64_t now, v1::Trial& trial) {
  trial.set_state(state);
  if (state == v1::Trial::ACTIVE) {
    trial.set_start_time_ms(now);
    trial.set_client_id(kOptunaClient);
    trial.set_lease_epoch(trial.lease_epoch() + 1);
    trial.set_attempt(trial.attempt() + 1);
    // No lease: the trial runs until Optuna says otherwise.
    trial.set_lease_expire_time_ms(std::numeric_limits<int64_t>::max());
  } else {
    trial.set_lease_expire_time_ms(0);
  }
  if (IsFinished(state)) {
    trial.set_end_time_ms(now);
    if (state == v1::Trial::STOPPED) trial.set_stop_reason("pruned by Optuna");
    if (state == v1::Trial::FAILED) {
      trial.set_failure_reason("failed in Optuna (FAIL)");
    }
  }
}

absl::Status CheckTrialLimits(const v1::Trial& trial) {
  HT_RETURN_IF_ERROR(
      ValidateAttributes(absl::StrCat("trial ", trial.id(),
                                      " attributes (Optuna's parameters, "
                                      "distributions and attributes)"),
                         trial.attributes()));
  return ValidateTrialSize(absl::StrCat("trial ", trial.id()), trial);
}

absl::Status AttributeValue(const std::string& key, const std::string& value) {
  if (key.empty()) return absl::InvalidArgumentError("key: empty");
  if (value.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("value of \"", key, "\": empty (JSON text expected)"));
  }
  return absl::OkStatus();
}

}  // namespace

OptunaStorage::OptunaStorage(storage::StudyStore* store,
                             std::function<int64_t()> now_ms)
    : store_(store), now_ms_(std::move(now_ms)) {}

int64_t OptunaStorage::Now() const {
  return now_ms_ ? now_ms_() : absl::ToUnixMillis(absl::Now());
}

absl::StatusOr<std::string> OptunaStorage::StudyName(int64_t study_id) {
  {
    absl::MutexLock lock(&ids_mu_);
    auto it = ids_.find(study_id);
    if (it != ids_.end()) return it->second;
  }
  absl::StatusOr<std::vector<v1::Study>> studies = store_->ListStudies();
  if (!studies.ok()) return studies.status();
  absl::MutexLock lock(&ids_mu_);
  ids_.clear();
  for (const v1::Study& study : *studies) {
    if (IsStoreOnly(study)) ids_[StudyIdAttribute(study)] = study.name();
  }
  auto it = ids_.find(study_id);
  if (it == ids_.end()) {
    return absl::NotFoundError(
        absl::StrCat("study_id: no Optuna study has id ", study_id));
  }
  return it->second;
}

absl::StatusOr<v1::Study> OptunaStorage::LoadStudyByName(
    const std::string& name, const Principal& caller, Access access) {
  absl::StatusOr<v1::Study> study = store_->GetStudy(name);
  if (!study.ok()) return study.status();
  HT_RETURN_IF_ERROR(CheckAccess(caller, *study, access));
  if (!IsStoreOnly(*study)) {
    return absl::NotFoundError(absl::StrCat(
        "study ", name,
        " is a hypertune study, not one created through Optuna's storage "
        "(use hypertune.optuna.Sampler or import-optuna for it)"));
  }
  return study;
}

absl::StatusOr<v1::Study> OptunaStorage::LoadStudy(int64_t study_id,
                                                   const Principal& caller,
                                                   Access access) {
  absl::StatusOr<std::string> name = StudyName(study_id);
  if (!name.ok()) return name.status();
  absl::StatusOr<v1::Study> study = LoadStudyByName(*name, caller, access);
  if (absl::IsNotFound(study.status()) ||
      (study.ok() && StudyIdAttribute(*study) != study_id)) {
    // Deleted (or replaced by a namesake) since the ids were read.
    absl::MutexLock lock(&ids_mu_);
    ids_.erase(study_id);
    return absl::NotFoundError(
        absl::StrCat("study_id: no Optuna study has id ", study_id));
  }
  return study;
}

absl::StatusOr<optuna::CreateNewStudyReply> OptunaStorage::CreateNewStudy(
    const optuna::CreateNewStudyRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateStudyName("study_name", request.study_name()));
  if (request.directions().empty()) {
    return absl::InvalidArgumentError("directions: at least one");
  }
  for (int d : request.directions()) {
    if (d != optuna::MINIMIZE && d != optuna::MAXIMIZE) {
      return absl::InvalidArgumentError(
          absl::StrCat("directions: ", d, " is neither MINIMIZE nor MAXIMIZE"));
    }
  }
  absl::MutexLock write(&write_mu_);
  absl::StatusOr<std::vector<v1::Study>> studies = store_->ListStudies();
  if (!studies.ok()) return studies.status();
  int64_t next_id = 1;
  for (const v1::Study& s : *studies) {
    if (s.name() == request.study_name()) {
      return absl::AlreadyExistsError(
          absl::StrCat("study_name: a study named ", s.name(), " exists"));
    }
    if (IsStoreOnly(s)) next_id = std::max(next_id, StudyIdAttribute(s) + 1);
  }
  v1::Study study;
  study.set_name(request.study_name());
  study.set_state(v1::Study::ACTIVE);
  study.set_create_time_ms(Now());
  if (caller.checked) study.set_owner(caller.owner);
  v1::StudySpec& spec = *study.mutable_spec();
  const int n = request.directions_size();
  for (int i = 0; i < n; ++i) {
    v1::MetricSpec& metric = *spec.add_metrics();
    metric.set_name(MetricName(n, i));
    metric.set_goal(request.directions(i) == optuna::MAXIMIZE
                        ? v1::MetricSpec::MAXIMIZE
                        : v1::MetricSpec::MINIMIZE);
    metric.set_role(v1::MetricSpec::OBJECTIVE);
    study.add_metric_roles(v1::MetricSpec::OBJECTIVE);
  }
  // Optuna runs each trial once. Optuna samples; hypertune's GP suggests
  // only if the study is switched to hypertune.optuna.Sampler.
  spec.set_max_retries(0);
  spec.set_algorithm(v1::GP_BANDIT);
  (*study.mutable_attributes())[kOptunaStorageAttribute] = kOptunaStorageGrpc;
  (*study.mutable_attributes())[kStudyIdAttribute] = absl::StrCat(next_id);
  HT_RETURN_IF_ERROR(store_->CreateStudy(study));
  {
    absl::MutexLock lock(&ids_mu_);
    ids_[next_id] = study.name();
  }
  optuna::CreateNewStudyReply reply;
  reply.set_study_id(next_id);
  return reply;
}

absl::StatusOr<optuna::DeleteStudyReply> OptunaStorage::DeleteStudy(
    const optuna::DeleteStudyRequest& request, const Principal& caller) {
  absl::MutexLock write(&write_mu_);
  absl::StatusOr<v1::Study> study =
      LoadStudy(request.study_id(), caller, Access::kWrite);
  if (!study.ok()) return study.status();
  HT_RETURN_IF_ERROR(store_->DeleteStudy(study->name()));
  absl::MutexLock lock(&ids_mu_);
  ids_.erase(request.study_id());
  return optuna::DeleteStudyReply();
}

absl::Status OptunaStorage::SetStudyAttribute(int64_t study_id,
                                              const std::string& key,
                                              const std::string& value,
                                              const char* attribute,
                                              const Principal& caller) {
  HT_RETURN_IF_ERROR(AttributeValue(key, value));
  absl::MutexLock write(&write_mu_);
  absl::StatusOr<v1::Study> study = LoadStudy(study_id, caller, Access::kWrite);
  if (!study.ok()) return study.status();
  Json object = ReadObject(study->attributes(), attribute);
  object[key] = value;
  v1::Study changed = *study;
  WriteObject(*changed.mutable_attributes(), attribute, object);
  HT_RETURN_IF_ERROR(
      ValidateAttributes(absl::StrCat("study ", study->name(), " attributes"),
                         changed.attributes()));
  return store_->ModifyStudy(study->name(), [&](v1::Study& stored) {
    WriteObject(*stored.mutable_attributes(), attribute, object);
  });
}

absl::StatusOr<optuna::SetStudyUserAttributeReply>
OptunaStorage::SetStudyUserAttribute(
    const optuna::SetStudyUserAttributeRequest& request,
    const Principal& caller) {
  HT_RETURN_IF_ERROR(SetStudyAttribute(request.study_id(), request.key(),
                                       request.value(), kUserAttrs, caller));
  return optuna::SetStudyUserAttributeReply();
}

absl::StatusOr<optuna::SetStudySystemAttributeReply>
OptunaStorage::SetStudySystemAttribute(
    const optuna::SetStudySystemAttributeRequest& request,
    const Principal& caller) {
  HT_RETURN_IF_ERROR(SetStudyAttribute(request.study_id(), request.key(),
                                       request.value(), kSystemAttrs, caller));
  return optuna::SetStudySystemAttributeReply();
}

absl::StatusOr<optuna::GetStudyIdFromNameReply>
OptunaStorage::GetStudyIdFromName(
    const optuna::GetStudyIdFromNameRequest& request, const Principal& caller) {
  absl::StatusOr<v1::Study> study =
      LoadStudyByName(request.study_name(), caller, Access::kRead);
  if (!study.ok()) return study.status();
  optuna::GetStudyIdFromNameReply reply;
  reply.set_study_id(StudyIdAttribute(*study));
  return reply;
}

absl::StatusOr<optuna::GetStudyNameFromIdReply>
OptunaStorage::GetStudyNameFromId(
    const optuna::GetStudyNameFromIdRequest& request, const Principal& caller) {
  absl::StatusOr<v1::Study> study =
      LoadStudy(request.study_id(), caller, Access::kRead);
  if (!study.ok()) return study.status();
  optuna::GetStudyNameFromIdReply reply;
  reply.set_study_name(study->name());
  return reply;
}

absl::StatusOr<optuna::GetStudyDirectionsReply>
OptunaStorage::GetStudyDirections(
    const optuna::GetStudyDirectionsRequest& request, const Principal& caller) {
  absl::StatusOr<v1::Study> study =
      LoadStudy(request.study_id(), caller, Access::kRead);
  if (!study.ok()) return study.status();
  optuna::GetStudyDirectionsReply reply;
  for (optuna::StudyDirection d : Directions(*study)) reply.add_directions(d);
  return reply;
}

absl::StatusOr<optuna::GetStudyUserAttributesReply>
OptunaStorage::GetStudyUserAttributes(
    const optuna::GetStudyUserAttributesRequest& request,
    const Principal& caller) {
  absl::StatusOr<v1::Study> study =
      LoadStudy(request.study_id(), caller, Access::kRead);
  if (!study.ok()) return study.status();
  optuna::GetStudyUserAttributesReply reply;
  *reply.mutable_user_attributes() = ToOptunaStudy(*study).user_attributes();
  return reply;
}

absl::StatusOr<optuna::GetStudySystemAttributesReply>
OptunaStorage::GetStudySystemAttributes(
    const optuna::GetStudySystemAttributesRequest& request,
    const Principal& caller) {
  absl::StatusOr<v1::Study> study =
      LoadStudy(request.study_id(), caller, Access::kRead);
  if (!study.ok()) return study.status();
  optuna::GetStudySystemAttributesReply reply;
  *reply.mutable_system_attributes() =
      ToOptunaStudy(*study).system_attributes();
  return reply;
}

absl::StatusOr<optuna::GetAllStudiesReply> OptunaStorage::GetAllStudies(
    const optuna::GetAllStudiesRequest&, const Principal& caller) {
  absl::StatusOr<std::vector<v1::Study>> studies = store_->ListStudies();
  if (!studies.ok()) return studies.status();
  std::vector<optuna::Study> listed;
  for (const v1::Study& study : *studies) {
    if (!IsStoreOnly(study) ||
        !CheckAccess(caller, study, Access::kRead).ok()) {
      continue;
    }
    listed.push_back(ToOptunaStudy(study));
  }
  std::sort(listed.begin(), listed.end(),
            [](const optuna::Study& a, const optuna::Study& b) {
              return a.study_id() < b.study_id();
            });
  optuna::GetAllStudiesReply reply;
  for (optuna::Study& s : listed) *reply.add_studies() = std::move(s);
  return reply;
}

absl::StatusOr<optuna::CreateNewTrialReply> OptunaStorage::CreateNewTrial(
    const optuna::CreateNewTrialRequest& request, const Principal& caller) {
  absl::MutexLock write(&write_mu_);
  absl::StatusOr<v1::Study> study =
      LoadStudy(request.study_id(), caller, Access::kWrite);
  if (!study.ok()) return study.status();
  const int64_t now = Now();
  v1::Trial trial;
  trial.set_create_time_ms(now);
  bool space_changed = false;
  if (request.template_trial_is_none()) {
    EnterState(v1::Trial::ACTIVE, now, trial);
  } else {
    const optuna::Trial& t = request.template_trial();
    absl::StatusOr<v1::Trial::State> state =
        FromOptunaState("template_trial.state", t.state());
    if (!state.ok()) return state.status();
    for (const auto& [name, value] : t.params()) {
      auto d = t.distributions().find(name);
      if (d == t.distributions().end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "template_trial.distributions: none for parameter \"", name, "\""));
      }
      HT_RETURN_IF_ERROR(SetParameter("template_trial.", name, value, d->second,
                                      *study, space_changed, trial));
    }
    std::vector<std::pair<int64_t, double>> steps(
        t.intermediate_values().begin(), t.intermediate_values().end());
    std::sort(steps.begin(), steps.end());
    for (const auto& [step, value] : steps) {
      HT_RETURN_IF_ERROR(
          SetIntermediate("template_trial.", *study, step, value, trial));
    }
    HT_RETURN_IF_ERROR(SetValues("template_trial.", *study, t.values(), trial));
    Json user = Json::object();
    Json system = Json::object();
    for (const auto& [key, value] : t.user_attributes()) {
      HT_RETURN_IF_ERROR(AttributeValue(key, value));
      user[key] = value;
    }
    for (const auto& [key, value] : t.system_attributes()) {
      HT_RETURN_IF_ERROR(AttributeValue(key, value));
      system[key] = value;
    }
    WriteObject(*trial.mutable_attributes(), kUserAttrs, user);
    WriteObject(*trial.mutable_attributes(), kSystemAttrs, system);
    EnterState(*state, now, trial);
    absl::StatusOr<int64_t> start =
        ParseTime("template_trial.datetime_start", t.datetime_start());
    if (!start.ok()) return start.status();
    absl::StatusOr<int64_t> end =
        ParseTime("template_trial.datetime_complete", t.datetime_complete());
    if (!end.ok()) return end.status();
    // The template's times where it has them, else now (EnterState's).
    if (*start > 0 && *state != v1::Trial::REQUESTED) {
      trial.set_start_time_ms(*start);
    }
    if (*end > 0 && IsFinished(*state)) trial.set_end_time_ms(*end);
  }
  HT_RETURN_IF_ERROR(CheckTrialLimits(trial));
  if (space_changed) {
    const v1::StudySpec grown = study->spec();
    HT_RETURN_IF_ERROR(store_->ModifyStudy(
        study->name(),
        [&](v1::Study& stored) { *stored.mutable_spec() = grown; }));
  }
  absl::StatusOr<std::vector<v1::Trial>> created =
      store_->CreateTrials(study->name(), {std::move(trial)});
  if (!created.ok()) return created.status();
  optuna::CreateNewTrialReply reply;
  reply.set_trial_id(EncodeTrialId(request.study_id(), created->front().id()));
  return reply;
}

absl::Status OptunaStorage::WriteTrial(
    int64_t trial_id, const Principal& caller,
    const std::function<absl::Status(v1::Study&, v1::Trial&)>& change) {
  absl::MutexLock write(&write_mu_);
  absl::StatusOr<v1::Study> study =
      LoadStudy(StudyIdOf(trial_id), caller, Access::kWrite);
  if (!study.ok()) {
    if (absl::IsNotFound(study.status())) {
      return absl::NotFoundError(
          absl::StrCat("trial_id: no Optuna trial has id ", trial_id));
    }
    return study.status();
  }
  absl::StatusOr<v1::Trial> trial =
      store_->GetTrial(study->name(), LocalIdOf(trial_id));
  if (absl::IsNotFound(trial.status())) {
    return absl::NotFoundError(
        absl::StrCat("trial_id: no Optuna trial has id ", trial_id));
  }
  if (!trial.ok()) return trial.status();
  if (IsFinished(trial->state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "trial_id: trial ", trial->id() - 1, " of study ", study->name(),
        " is finished (", v1::Trial::State_Name(trial->state()),
        ") and cannot be updated"));
  }
  const storage::TrialVersion read = storage::TrialVersion::Of(*trial);
  const std::string spec_before = study->spec().SerializeAsString();
  HT_RETURN_IF_ERROR(change(*study, *trial));
  HT_RETURN_IF_ERROR(CheckTrialLimits(*trial));
  if (study->spec().SerializeAsString() != spec_before) {
    const v1::StudySpec grown = study->spec();
    HT_RETURN_IF_ERROR(store_->ModifyStudy(
        study->name(),
        [&](v1::Study& stored) { *stored.mutable_spec() = grown; }));
  }
  return store_->UpdateTrialIf(*trial, read);
}

absl::StatusOr<optuna::SetTrialParameterReply> OptunaStorage::SetTrialParameter(
    const optuna::SetTrialParameterRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(WriteTrial(
      request.trial_id(), caller, [&](v1::Study& study, v1::Trial& trial) {
        bool changed = false;
        return SetParameter("", request.param_name(),
                            request.param_value_internal(),
                            request.distribution(), study, changed, trial);
      }));
  return optuna::SetTrialParameterReply();
}

absl::StatusOr<optuna::GetTrialIdFromStudyIdTrialNumberReply>
OptunaStorage::GetTrialIdFromStudyIdTrialNumber(
    const optuna::GetTrialIdFromStudyIdTrialNumberRequest& request,
    const Principal& caller) {
  absl::StatusOr<v1::Study> study =
      LoadStudy(request.study_id(), caller, Access::kRead);
  if (!study.ok()) return study.status();
  const int64_t id = request.trial_number() + 1;
  absl::Status found = id >= 1 && id < (int64_t{1} << kTrialIdBits)
                           ? store_->GetTrial(study->name(), id).status()
                           : absl::NotFoundError("");
  if (absl::IsNotFound(found)) {
    return absl::NotFoundError(absl::StrCat("trial_number: study ",
                                            study->name(), " has no trial ",
                                            request.trial_number()));
  }
  HT_RETURN_IF_ERROR(found);
  optuna::GetTrialIdFromStudyIdTrialNumberReply reply;
  reply.set_trial_id(EncodeTrialId(request.study_id(), id));
  return reply;
}

absl::StatusOr<optuna::SetTrialStateValuesReply>
OptunaStorage::SetTrialStateValues(
    const optuna::SetTrialStateValuesRequest& request,
    const Principal& caller) {
  absl::StatusOr<v1::Trial::State> state =
      FromOptunaState("state", request.state());
  if (!state.ok()) return state.status();
  bool updated = true;
  absl::Status written = WriteTrial(
      request.trial_id(), caller, [&](v1::Study& study, v1::Trial& trial) {
        if (*state == v1::Trial::ACTIVE &&
            trial.state() != v1::Trial::REQUESTED) {
          // Another process took this WAITING trial first.
          updated = false;
          return absl::OkStatus();
        }
        HT_RETURN_IF_ERROR(SetValues("", study, request.values(), trial));
        EnterState(*state, Now(), trial);
        return absl::OkStatus();
      });
  // A write that changed nothing stores the same trial: harmless.
  HT_RETURN_IF_ERROR(written);
  optuna::SetTrialStateValuesReply reply;
  reply.set_trial_updated(updated);
  return reply;
}

absl::StatusOr<optuna::SetTrialIntermediateValueReply>
OptunaStorage::SetTrialIntermediateValue(
    const optuna::SetTrialIntermediateValueRequest& request,
    const Principal& caller) {
  HT_RETURN_IF_ERROR(WriteTrial(
      request.trial_id(), caller, [&](v1::Study& study, v1::Trial& trial) {
        return SetIntermediate("", study, request.step(),
                               request.intermediate_value(), trial);
      }));
  return optuna::SetTrialIntermediateValueReply();
}

absl::Status OptunaStorage::SetTrialAttribute(int64_t trial_id,
                                              const std::string& key,
                                              const std::string& value,
                                              const char* attribute,
                                              const Principal& caller) {
  HT_RETURN_IF_ERROR(AttributeValue(key, value));
  return WriteTrial(trial_id, caller, [&](v1::Study&, v1::Trial& trial) {
    Json object = ReadObject(trial.attributes(), attribute);
    object[key] = value;
    WriteObject(*trial.mutable_attributes(), attribute, object);
    return absl::OkStatus();
  });
}

absl::StatusOr<optuna::SetTrialUserAttributeReply>
OptunaStorage::SetTrialUserAttribute(
    const optuna::SetTrialUserAttributeRequest& request,
    const Principal& caller) {
  HT_RETURN_IF_ERROR(SetTrialAttribute(request.trial_id(), request.key(),
                                       request.value(), kUserAttrs, caller));
  return optuna::SetTrialUserAttributeReply();
}

absl::StatusOr<optuna::SetTrialSystemAttributeReply>
OptunaStorage::SetTrialSystemAttribute(
    const optuna::SetTrialSystemAttributeRequest& request,
    const Principal& caller) {
  HT_RETURN_IF_ERROR(SetTrialAttribute(request.trial_id(), request.key(),
                                       request.value(), kSystemAttrs, caller));
  return optuna::SetTrialSystemAttributeReply();
}

absl::StatusOr<optuna::GetTrialReply> OptunaStorage::GetTrial(
    const optuna::GetTrialRequest& request, const Principal& caller) {
  const auto not_found = absl::NotFoundError(
      absl::StrCat("trial_id: no Optuna trial has id ", request.trial_id()));
  absl::StatusOr<v1::Study> study =
      LoadStudy(StudyIdOf(request.trial_id()), caller, Access::kRead);
  if (absl::IsNotFound(study.status())) return not_found;
  if (!study.ok()) return study.status();
  absl::StatusOr<v1::Trial> trial =
      store_->GetTrial(study->name(), LocalIdOf(request.trial_id()));
  if (absl::IsNotFound(trial.status())) return not_found;
  if (!trial.ok()) return trial.status();
  optuna::GetTrialReply reply;
  *reply.mutable_trial() = ToOptunaTrial(*study, *trial);
  return reply;
}

absl::StatusOr<optuna::GetTrialsReply> OptunaStorage::GetTrials(
    const optuna::GetTrialsRequest& request, const Principal& caller) {
  absl::StatusOr<v1::Study> study =
      LoadStudy(request.study_id(), caller, Access::kRead);
  if (!study.ok()) return study.status();
  // The trials above trial_id_greater_than, in this study's local ids.
  const int64_t above = request.trial_id_greater_than();
  storage::TrialQuery query;
  bool any_above = true;
  if (StudyIdOf(above) == request.study_id()) {
    query.after_id = LocalIdOf(above);
  } else if (above >= 0 && StudyIdOf(above) > request.study_id()) {
    any_above = false;
  }
  std::vector<v1::Trial> trials;
  if (any_above) {
    absl::StatusOr<std::vector<v1::Trial>> listed =
        store_->ListTrials(study->name(), query);
    if (!listed.ok()) return listed.status();
    trials = *std::move(listed);
  }
  std::vector<int64_t> included;
  for (int64_t id : request.included_trial_ids()) {
    if (StudyIdOf(id) != request.study_id()) continue;
    const int64_t local = LocalIdOf(id);
    if (any_above && local > query.after_id) continue;  // listed already
    included.push_back(local);
  }
  std::sort(included.begin(), included.end());
  included.erase(std::unique(included.begin(), included.end()), included.end());
  std::vector<v1::Trial> earlier;
  for (int64_t local : included) {
    absl::StatusOr<v1::Trial> trial = store_->GetTrial(study->name(), local);
    if (absl::IsNotFound(trial.status())) continue;
    if (!trial.ok()) return trial.status();
    earlier.push_back(*std::move(trial));
  }
  optuna::GetTrialsReply reply;
  for (const v1::Trial& t : earlier) {
    *reply.add_trials() = ToOptunaTrial(*study, t);
  }
  for (const v1::Trial& t : trials) {
    *reply.add_trials() = ToOptunaTrial(*study, t);
  }
  if (reply.ByteSizeLong() > kOptunaMaxReplyBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "study ", study->name(), ": its ", reply.trials_size(), " trials take ",
        reply.ByteSizeLong(), " bytes, more than one answer ",
        "of Optuna's protocol may (", kOptunaMaxReplyBytes, ")"));
  }
  return reply;
}

}  // namespace hypertune::service
