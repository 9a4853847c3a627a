#include "service/rpc/validation.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/identifier.h"
#include "common/study_metrics.h"
#include "google/protobuf/generated_enum_reflection.h"
#include "optimizer/early_stopping.h"
#include "service/rpc/conversion.h"
#include "service/rpc/pbt.h"
#include "service/rpc/status_macros.h"

namespace hypertune::service {
namespace {

absl::Status Invalid(const std::string& field, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

// Parameter and metric names are identifiers (common/identifier.h).
absl::Status ValidateIdentifier(const std::string& field,
                                const std::string& name) {
  if (name.empty()) return Invalid(field, "must not be empty");
  if (name.size() > kMaxNameBytes) {
    return Invalid(field,
                   absl::StrFormat("longer than %d characters (the limit)",
                                   kMaxNameBytes));
  }
  if (!IsIdentifierStart(name.front())) {
    return Invalid(
        field, absl::StrFormat("\"%s\" must start with a letter or '_'", name));
  }
  for (char c : name) {
    if (!IsIdentifierChar(c)) {
      return Invalid(field, absl::StrFormat("\"%s\" may contain only letters, "
                                            "digits and \"._-\"",
                                            absl::CHexEscape(name)));
    }
  }
  return absl::OkStatus();
}

// "A, B or C": the names of enum E's values, without its UNSPECIFIED.
template <typename E>
std::string EnumNames() {
  const google::protobuf::EnumDescriptor* descriptor =
      google::protobuf::GetEnumDescriptor<E>();
  std::vector<std::string> names;
  for (int i = 0; i < descriptor->value_count(); ++i) {
    if (descriptor->value(i)->number() == 0) continue;
    names.push_back(descriptor->value(i)->name());
  }
  return absl::StrJoin(names, ", ");
}

// What a parameter may hold: a known scale, at most kMaxValuesPerParameter
// values, categories of at most kMaxCategoryBytes.
absl::Status ValidateParameterLimits(const std::string& field,
                                     const v1::ParameterSpec& p) {
  auto check_scale = [&](const char* kind, v1::Scale scale) {
    if (v1::Scale_IsValid(scale)) return absl::OkStatus();
    return Invalid(absl::StrCat(field, ".", kind, ".scale"),
                   absl::StrCat("unknown scale ", scale, " (one of ",
                                EnumNames<v1::Scale>(), ")"));
  };
  auto check_count = [&](const char* kind, int count) {
    if (count <= kMaxValuesPerParameter) return absl::OkStatus();
    return Invalid(absl::StrCat(field, ".", kind, ".values"),
                   absl::StrFormat("%d values, over the limit of %d", count,
                                   kMaxValuesPerParameter));
  };
  // A range of one value searches nothing: almost always a typo.
  auto check_width = [&](const char* kind, double min, double max) {
    if (min != max) return absl::OkStatus();
    return Invalid(
        absl::StrCat(field, ".", kind),
        absl::StrFormat("min equals max (%s): to fix \"%s\" at that value, "
                        "leave it out of the study and set it in the "
                        "program, or make it a discrete_spec of one value",
                        absl::StrCat(min), p.name()));
  };
  switch (p.kind_case()) {
    case v1::ParameterSpec::kDoubleSpec:
      HT_RETURN_IF_ERROR(check_width("double_spec", p.double_spec().min(),
                                     p.double_spec().max()));
      return check_scale("double_spec", p.double_spec().scale());
    case v1::ParameterSpec::kIntegerSpec:
      HT_RETURN_IF_ERROR(check_width(
          "integer_spec", static_cast<double>(p.integer_spec().min()),
          static_cast<double>(p.integer_spec().max())));
      return check_scale("integer_spec", p.integer_spec().scale());
    case v1::ParameterSpec::kDiscreteSpec:
      return check_count("discrete_spec", p.discrete_spec().values_size());
    case v1::ParameterSpec::kCategoricalSpec: {
      const auto& values = p.categorical_spec().values();
      HT_RETURN_IF_ERROR(check_count("categorical_spec", values.size()));
      for (int k = 0; k < values.size(); ++k) {
        HT_RETURN_IF_ERROR(ValidateText(
            absl::StrCat(field, ".categorical_spec.values[", k, "]"), values[k],
            kMaxCategoryBytes));
      }
      return absl::OkStatus();
    }
    case v1::ParameterSpec::KIND_NOT_SET:
      break;
  }
  return absl::OkStatus();
}

// Metric `i` of `spec`: a known role, a goal where it is an objective (with
// no roles, the first metric), bounds exactly where it is a constraint.
absl::Status ValidateMetricRole(const std::string& field,
                                const v1::StudySpec& spec, int i) {
  const v1::MetricSpec& m = spec.metrics(i);
  if (!v1::MetricSpec::Role_IsValid(m.role())) {
    return Invalid(absl::StrCat(field, ".role"),
                   absl::StrCat("unknown role ", m.role(), " (one of ",
                                EnumNames<v1::MetricSpec::Role>(), ")"));
  }
  bool any_role = false;
  for (const v1::MetricSpec& other : spec.metrics()) {
    any_role = any_role || other.role() != v1::MetricSpec::ROLE_UNSPECIFIED;
  }
  // Without roles the first metric is the objective and the rest recorded,
  // whose goal is informational (as a RECORDED metric's).
  const bool needs_goal =
      any_role ? m.role() == v1::MetricSpec::OBJECTIVE : i == 0;
  if (needs_goal && m.goal() != v1::MetricSpec::MAXIMIZE &&
      m.goal() != v1::MetricSpec::MINIMIZE) {
    return Invalid(
        absl::StrCat(field, ".goal"),
        absl::StrCat("must be MAXIMIZE or MINIMIZE, got ", m.goal()));
  }
  if (!needs_goal && m.goal() != v1::MetricSpec::GOAL_UNSPECIFIED &&
      !v1::MetricSpec::Goal_IsValid(m.goal())) {
    return Invalid(absl::StrCat(field, ".goal"),
                   absl::StrCat("unknown goal ", m.goal()));
  }
  const bool bounded = m.has_lower_bound() || m.has_upper_bound();
  if (m.role() != v1::MetricSpec::CONSTRAINT) {
    if (bounded) {
      return Invalid(
          field, absl::StrFormat("\"%s\" has a bound but is not a CONSTRAINT",
                                 m.name()));
    }
    return absl::OkStatus();
  }
  if (!bounded) {
    return Invalid(
        field, absl::StrFormat("constraint \"%s\" needs a lower_bound or an "
                               "upper_bound",
                               m.name()));
  }
  for (const auto& [name, has, value] :
       {std::tuple{"lower_bound", m.has_lower_bound(), m.lower_bound()},
        std::tuple{"upper_bound", m.has_upper_bound(), m.upper_bound()}}) {
    if (has && !std::isfinite(value)) {
      return Invalid(absl::StrCat(field, ".", name),
                     absl::StrCat("must be a finite number, got ", value));
    }
  }
  if (m.has_lower_bound() && m.has_upper_bound() &&
      !(m.lower_bound() < m.upper_bound())) {
    return Invalid(
        field, absl::StrCat("lower_bound ", m.lower_bound(),
                            " must be below upper_bound ", m.upper_bound()));
  }
  return absl::OkStatus();
}

// The cost-aware and transfer fields of study `study_name`'s spec: GP_BANDIT
// (the server's default filled in), with any objectives and constraints;
// cost_metric a recorded metric (no objective or constraint); prior_studies at
// most kMaxPriorStudies valid names, not the study itself, none twice, on a
// flat space. Whether they exist is the service's to check.
absl::Status ValidateCostAndTransfer(const std::string& study_name,
                                     const v1::StudySpec& spec) {
  if (!spec.cost_aware() && !spec.cost_metric().empty()) {
    return Invalid("study.spec.cost_metric", "needs cost_aware: true");
  }
  if (!spec.cost_aware() && spec.prior_studies().empty()) {
    return absl::OkStatus();
  }
  const std::string field =
      spec.cost_aware() ? "study.spec.cost_aware" : "study.spec.prior_studies";
  if (spec.algorithm() != v1::ALGORITHM_UNSPECIFIED &&
      spec.algorithm() != v1::GP_BANDIT) {
    return Invalid(field, absl::StrCat("needs algorithm GP_BANDIT, got ",
                                       v1::Algorithm_Name(spec.algorithm())));
  }
  const StudyMetrics metrics(spec);
  if (!spec.cost_metric().empty()) {
    const auto it = std::find_if(spec.metrics().begin(), spec.metrics().end(),
                                 [&](const v1::MetricSpec& m) {
                                   return m.name() == spec.cost_metric();
                                 });
    if (it == spec.metrics().end()) {
      return Invalid("study.spec.cost_metric",
                     absl::StrFormat("\"%s\" is not one of study.spec.metrics",
                                     spec.cost_metric()));
    }
    const std::vector<std::string> modelled = metrics.RequiredNames();
    if (std::find(modelled.begin(), modelled.end(), spec.cost_metric()) !=
        modelled.end()) {
      return Invalid("study.spec.cost_metric",
                     absl::StrFormat("\"%s\" is an objective or a "
                                     "constraint; name a recorded metric",
                                     spec.cost_metric()));
    }
  }
  if (spec.prior_studies_size() > kMaxPriorStudies) {
    return Invalid(
        "study.spec.prior_studies",
        absl::StrFormat("%d studies, over the limit of %d",
                        spec.prior_studies_size(), kMaxPriorStudies));
  }
  absl::flat_hash_set<std::string> priors;
  for (int i = 0; i < spec.prior_studies_size(); ++i) {
    const std::string prior_field =
        absl::StrCat("study.spec.prior_studies[", i, "]");
    const std::string& name = spec.prior_studies(i);
    HT_RETURN_IF_ERROR(ValidateStudyName(prior_field, name));
    if (name == study_name) {
      return Invalid(prior_field, "a study cannot be its own prior");
    }
    if (!priors.insert(name).second) {
      return Invalid(prior_field,
                     absl::StrFormat("\"%s\" is listed twice", name));
    }
  }
  if (!spec.prior_studies().empty()) {
    for (int i = 0; i < spec.parameters_size(); ++i) {
      if (!spec.parameters(i).parent().empty()) {
        return Invalid(absl::StrCat("study.spec.parameters[", i, "]"),
                       "transfer (prior_studies) needs a search space "
                       "without conditional parameters");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateStudyName(const std::string& field,
                               const std::string& name) {
  if (name.empty()) return Invalid(field, "must not be empty");
  if (name.size() > kMaxNameBytes) {
    return Invalid(field,
                   absl::StrFormat("longer than %d characters (the limit)",
                                   kMaxNameBytes));
  }
  for (char c : name) {
    if (!IsIdentifierChar(c)) {
      return Invalid(
          field, absl::StrFormat("\"%s\" may contain only letters, digits and "
                                 "\"._-\"",
                                 absl::CHexEscape(name)));
    }
  }
  // Names become file names (trial logs) and CLI arguments.
  if (!absl::ascii_isalnum(static_cast<unsigned char>(name.front()))) {
    return Invalid(field, absl::StrFormat("\"%s\" must begin with a letter or "
                                          "a digit",
                                          name));
  }
  return absl::OkStatus();
}

absl::Status ValidateOwner(const std::string& field, const std::string& owner) {
  return ValidateStudyName(field, owner);
}

absl::Status ValidateClientId(const std::string& field, const std::string& id) {
  return ValidateText(field, id, kMaxClientIdBytes);
}

absl::Status ValidateText(const std::string& field, const std::string& text,
                          size_t max_bytes) {
  if (text.size() <= max_bytes) return absl::OkStatus();
  return Invalid(field, absl::StrFormat("%d bytes, over the limit of %d",
                                        text.size(), max_bytes));
}

absl::Status ValidateTrialSize(const std::string& field,
                               const v1::Trial& trial) {
  if (trial.measurements_size() > kMaxMeasurementsPerTrial) {
    return Invalid(field,
                   absl::StrFormat("trial %d would hold %d measurements, over "
                                   "the limit of %d per trial",
                                   trial.id(), trial.measurements_size(),
                                   kMaxMeasurementsPerTrial));
  }
  const size_t bytes = trial.ByteSizeLong();
  if (bytes > kMaxTrialBytes) {
    return Invalid(field, absl::StrFormat("trial %d would take %d bytes, over "
                                          "the limit of %d per trial",
                                          trial.id(), bytes, kMaxTrialBytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateAttributes(
    const std::string& field,
    const google::protobuf::Map<std::string, std::string>& attributes) {
  if (attributes.size() > static_cast<size_t>(kMaxAttributes)) {
    return Invalid(field, absl::StrFormat("%d entries; at most %d",
                                          attributes.size(), kMaxAttributes));
  }
  for (const auto& [key, value] : attributes) {
    const std::string entry =
        absl::StrFormat("%s[\"%s\"]", field, absl::CHexEscape(key));
    if (key.empty()) return Invalid(field, "a key must not be empty");
    // Keys are names: they become CSV columns and dashboard labels.
    HT_RETURN_IF_ERROR(ValidateIdentifier(absl::StrCat(entry, " (key)"), key));
    HT_RETURN_IF_ERROR(ValidateText(entry, value, kMaxAttributeValueBytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateTrialId(const std::string& field, int64_t id) {
  if (id < 1) return Invalid(field, absl::StrCat("must be >= 1, got ", id));
  return absl::OkStatus();
}

absl::Status ValidateStudy(const v1::Study& study) {
  if (absl::Status s = ValidateStudyName("study.name", study.name()); !s.ok()) {
    return s;
  }
  if (const size_t bytes = study.ByteSizeLong(); bytes > kMaxStudyBytes) {
    return Invalid("study", absl::StrFormat("%d bytes serialized, over the "
                                            "limit of %d per study",
                                            bytes, kMaxStudyBytes));
  }
  HT_RETURN_IF_ERROR(
      ValidateAttributes("study.attributes", study.attributes()));
  const v1::StudySpec& spec = study.spec();
  if (spec.parameters_size() == 0) {
    return Invalid("study.spec.parameters",
                   "at least one parameter is required");
  }
  if (spec.parameters_size() > kMaxParameters) {
    return Invalid("study.spec.parameters",
                   absl::StrFormat("%d parameters, over the limit of %d",
                                   spec.parameters_size(), kMaxParameters));
  }
  absl::flat_hash_set<std::string> names;
  int parent_values =
      0;  // Conditions so far, against kMaxParentValuesPerStudy.
  for (int i = 0; i < spec.parameters_size(); ++i) {
    const v1::ParameterSpec& p = spec.parameters(i);
    std::string field = absl::StrCat("study.spec.parameters[", i, "]");
    parent_values += p.parent_categories_size() + p.parent_values_size();
    if (parent_values > kMaxParentValuesPerStudy) {
      return Invalid(
          absl::StrCat(field, p.parent_categories_size() > 0
                                  ? ".parent_categories"
                                  : ".parent_values"),
          absl::StrFormat("the conditions list %d parent categories and "
                          "values in all up to here, over the limit of %d "
                          "per study",
                          parent_values, kMaxParentValuesPerStudy));
    }
    if (absl::Status s =
            ValidateIdentifier(absl::StrCat(field, ".name"), p.name());
        !s.ok()) {
      return s;
    }
    if (!names.insert(p.name()).second) {
      return Invalid(
          field, absl::StrFormat("duplicate parameter name \"%s\"", p.name()));
    }
    if (p.kind_case() == v1::ParameterSpec::KIND_NOT_SET) {
      return Invalid(
          field,
          absl::StrFormat("\"%s\" needs one of double_spec, integer_spec, "
                          "discrete_spec or categorical_spec",
                          p.name()));
    }
    if (absl::Status s = ValidateParameterLimits(field, p); !s.ok()) return s;
  }
  if (spec.metrics_size() == 0) {
    return Invalid("study.spec.metrics",
                   "at least one metric is required (the first is the "
                   "objective)");
  }
  if (spec.metrics_size() > kMaxMetricsPerStudy) {
    return Invalid("study.spec.metrics",
                   absl::StrFormat("%d metrics, over the limit of %d",
                                   spec.metrics_size(), kMaxMetricsPerStudy));
  }
  absl::flat_hash_set<std::string> metric_names;
  for (int i = 0; i < spec.metrics_size(); ++i) {
    const v1::MetricSpec& m = spec.metrics(i);
    std::string field = absl::StrCat("study.spec.metrics[", i, "]");
    if (absl::Status s =
            ValidateIdentifier(absl::StrCat(field, ".name"), m.name());
        !s.ok()) {
      return s;
    }
    if (!metric_names.insert(m.name()).second) {
      return Invalid(field,
                     absl::StrFormat("duplicate metric name \"%s\"", m.name()));
    }
    if (absl::Status s = ValidateMetricRole(field, spec, i); !s.ok()) {
      return s;
    }
  }
  if (StudyMetrics(spec).objectives().empty()) {
    return Invalid("study.spec.metrics",
                   "no metric has role OBJECTIVE (a study needs at least one)");
  }
  if (!v1::Algorithm_IsValid(spec.algorithm())) {
    return Invalid("study.spec.algorithm",
                   absl::StrCat("unknown algorithm ", spec.algorithm(),
                                " (one of ", EnumNames<v1::Algorithm>(), ")"));
  }
  if (spec.lease_seconds() < 0 || spec.lease_seconds() > kMaxLeaseSeconds) {
    return Invalid("study.spec.lease_seconds",
                   absl::StrCat("must be from 1 to ", kMaxLeaseSeconds,
                                " (24 h), or 0 for the server's default; got ",
                                spec.lease_seconds()));
  }
  if (spec.has_max_retries() &&
      (spec.max_retries() < 0 || spec.max_retries() > kMaxRetries)) {
    return Invalid("study.spec.max_retries",
                   absl::StrCat("must be from 0 to ", kMaxRetries, ", got ",
                                spec.max_retries()));
  }
  if (spec.has_max_preemptions() &&
      (spec.max_preemptions() < 0 || spec.max_preemptions() > kMaxRetries)) {
    return Invalid("study.spec.max_preemptions",
                   absl::StrCat("must be from 0 to ", kMaxRetries, ", got ",
                                spec.max_preemptions()));
  }
  if (spec.max_trials() < 0) {
    return Invalid(
        "study.spec.max_trials",
        absl::StrCat("must be >= 0 (0 = unlimited), got ", spec.max_trials()));
  }
  if (spec.max_parallel_trials() < 0) {
    return Invalid("study.spec.max_parallel_trials",
                   absl::StrCat("must be >= 0 (0 = unlimited), got ",
                                spec.max_parallel_trials()));
  }
  for (const auto& [field, value] :
       {std::pair{"study.spec.price_per_device_hour",
                  spec.price_per_device_hour()},
        std::pair{"study.spec.max_device_hours", spec.max_device_hours()}}) {
    if (!(value >= 0) || std::isinf(value)) {
      return Invalid(field,
                     absl::StrCat("must be a finite number >= 0, got ", value));
    }
  }
  HT_RETURN_IF_ERROR(ValidateCostAndTransfer(study.name(), spec));
  HT_RETURN_IF_ERROR(ValidatePbt(spec));
  return ValidateEarlyStopping(spec);
}

absl::Status ValidateEarlyStopping(const v1::StudySpec& spec) {
  const v1::EarlyStoppingSpec& es = spec.early_stopping();
  if (!v1::EarlyStoppingSpec::Rule_IsValid(es.rule())) {
    return Invalid("study.spec.early_stopping.rule",
                   absl::StrCat("unknown rule ", es.rule(), " (one of ",
                                EnumNames<v1::EarlyStoppingSpec::Rule>(), ")"));
  }
  if (!v1::EarlyStoppingSpec::MultiObjective_IsValid(es.multi_objective())) {
    return Invalid(
        "study.spec.early_stopping.multi_objective",
        absl::StrCat("unknown value ", es.multi_objective(), " (one of ",
                     EnumNames<v1::EarlyStoppingSpec::MultiObjective>(), ")"));
  }
  const bool rungs = es.rule() == v1::EarlyStoppingSpec::ASHA ||
                     es.rule() == v1::EarlyStoppingSpec::HYPERBAND;
  if (rungs) {
    if (es.max_resource() <= 0) {
      return Invalid(
          "study.spec.early_stopping.max_resource",
          absl::StrCat("required for ",
                       v1::EarlyStoppingSpec::Rule_Name(es.rule()),
                       ": the steps of a full trial, got ", es.max_resource()));
    }
    // README, "Early stopping": the rule owns the resource.
    for (int i = 0; i < spec.parameters_size(); ++i) {
      if (spec.parameters(i).name() == "epochs") {
        return Invalid(
            absl::StrCat("study.spec.parameters[", i, "]"),
            absl::StrCat("\"epochs\" cannot be tuned with ",
                         v1::EarlyStoppingSpec::Rule_Name(es.rule()),
                         "; early_stopping.max_resource sets the epochs"));
      }
    }
  }
  if (!rungs && es.pause_at_rungs()) {
    return Invalid("study.spec.early_stopping.pause_at_rungs",
                   "only ASHA and HYPERBAND have rungs to pause at");
  }
  if (absl::Status s =
          optimizer::ValidateEarlyStoppingConfig(ToEarlyStoppingConfig(spec));
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("study.spec.", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ValidateMeasurement(const std::string& field,
                                 const v1::Measurement& measurement,
                                 bool require_metrics) {
  if (measurement.step() < 0) {
    return Invalid(absl::StrCat(field, ".step"),
                   absl::StrCat("must be >= 0, got ", measurement.step()));
  }
  if (!(measurement.elapsed_seconds() >= 0) ||
      std::isinf(measurement.elapsed_seconds())) {
    return Invalid(absl::StrCat(field, ".elapsed_seconds"),
                   "must be a finite number >= 0");
  }
  if (require_metrics && measurement.metrics().empty()) {
    return Invalid(absl::StrCat(field, ".metrics"),
                   "at least one metric is required");
  }
  if (measurement.metrics_size() > kMaxMetricsPerMeasurement) {
    return Invalid(
        absl::StrCat(field, ".metrics"),
        absl::StrFormat("%d metrics, over the limit of %d per "
                        "measurement",
                        measurement.metrics_size(), kMaxMetricsPerMeasurement));
  }
  for (const auto& [name, value] : measurement.metrics()) {
    std::string metric_field =
        absl::StrFormat("%s.metrics[\"%s\"]", field, absl::CHexEscape(name));
    if (absl::Status s = ValidateIdentifier(metric_field, name); !s.ok()) {
      return s;
    }
    if (std::isnan(value)) {
      return Invalid(metric_field, "NaN is not a metric value (+-Infinity is)");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateDeviceSeconds(const std::string& field, double seconds) {
  if (seconds >= 0 && seconds <= kMaxGrantDeviceSeconds) {
    return absl::OkStatus();
  }
  return Invalid(field, absl::StrFormat("must be a number from 0 to %.4g (%s), "
                                        "got %g",
                                        kMaxGrantDeviceSeconds,
                                        "1,024 devices for a year", seconds));
}

absl::Status ValidateCheckpointStep(const v1::HeartbeatRequest& request) {
  if (request.checkpoint_step() < 0) {
    return Invalid("checkpoint_step", absl::StrCat("must be >= 0, got ",
                                                   request.checkpoint_step()));
  }
  if (request.checkpoint_step() > 0 && request.checkpoint_uri().empty()) {
    return Invalid("checkpoint_step",
                   "given without checkpoint_uri (the step is the one that "
                   "checkpoint holds)");
  }
  return absl::OkStatus();
}

absl::Status ValidateHeartbeat(const v1::HeartbeatRequest& request) {
  HT_RETURN_IF_ERROR(ValidateClientId("client_id", request.client_id()));
  HT_RETURN_IF_ERROR(
      ValidateText("checkpoint_uri", request.checkpoint_uri(), kMaxUriBytes));
  HT_RETURN_IF_ERROR(
      ValidateText("log_path", request.log_path(), kMaxUriBytes));
  HT_RETURN_IF_ERROR(ValidateCheckpointStep(request));
  return ValidateDeviceSeconds("device_seconds", request.device_seconds());
}

absl::Status ValidateCompleteTrial(const v1::CompleteTrialRequest& request) {
  HT_RETURN_IF_ERROR(ValidateMeasurement("final_measurement",
                                         request.final_measurement(), false));
  HT_RETURN_IF_ERROR(
      ValidateDeviceSeconds("device_seconds", request.device_seconds()));
  HT_RETURN_IF_ERROR(ValidateText(
      "infeasible_reason", request.infeasible_reason(), kMaxReasonBytes));
  HT_RETURN_IF_ERROR(ValidateText("failure_reason", request.failure_reason(),
                                  kMaxReasonBytes));
  HT_RETURN_IF_ERROR(ValidateAttributes("attributes", request.attributes()));
  if (request.infeasible() + request.worker_failed() + request.failed() > 1) {
    return absl::InvalidArgumentError(
        "infeasible, worker_failed, failed: at most one (the parameters are "
        "bad, the worker is gone and the trial runs again, or something else "
        "failed for good)");
  }
  if (request.preempted() && !request.worker_failed()) {
    return absl::InvalidArgumentError(
        "preempted: only with worker_failed (the trial is given back because "
        "its machine was taken away)");
  }
  return absl::OkStatus();
}

}  // namespace hypertune::service
