#include "service/validation.h"

#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "optimizer/early_stopping.h"
#include "service/conversion.h"

namespace hypertune::service {
namespace {

constexpr size_t kMaxNameLength = 128;

absl::Status Invalid(const std::string& field, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

// Parameter and metric names appear in `{name}` substitutions, `name=value`
// metric lines and JSON keys, so they are identifiers: a letter or '_'
// first, then letters, digits and "._-".
absl::Status ValidateIdentifier(const std::string& field,
                                const std::string& name) {
  if (name.empty()) return Invalid(field, "must not be empty");
  if (name.size() > kMaxNameLength) {
    return Invalid(
        field, absl::StrFormat("longer than %d characters", kMaxNameLength));
  }
  char first = name.front();
  if (!((first >= 'a' && first <= 'z') || (first >= 'A' && first <= 'Z') ||
        first == '_')) {
    return Invalid(
        field, absl::StrFormat("\"%s\" must start with a letter or '_'", name));
  }
  for (char c : name) {
    if (!IsNameChar(c)) {
      return Invalid(field, absl::StrFormat("\"%s\" may contain only letters, "
                                            "digits and \"._-\"",
                                            absl::CHexEscape(name)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateStudyName(const std::string& field,
                               const std::string& name) {
  if (name.empty()) return Invalid(field, "must not be empty");
  if (name.size() > kMaxNameLength) {
    return Invalid(
        field, absl::StrFormat("longer than %d characters", kMaxNameLength));
  }
  for (char c : name) {
    if (!IsNameChar(c)) {
      return Invalid(
          field, absl::StrFormat("\"%s\" may contain only letters, digits and "
                                 "\"._-\"",
                                 absl::CHexEscape(name)));
    }
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
  const v1::StudySpec& spec = study.spec();
  if (spec.parameters_size() == 0) {
    return Invalid("study.spec.parameters",
                   "at least one parameter is required");
  }
  absl::flat_hash_set<std::string> names;
  for (int i = 0; i < spec.parameters_size(); ++i) {
    const v1::ParameterSpec& p = spec.parameters(i);
    std::string field = absl::StrCat("study.spec.parameters[", i, "]");
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
  }
  if (spec.metrics_size() == 0) {
    return Invalid("study.spec.metrics",
                   "at least one metric is required (the first is the "
                   "objective)");
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
    if (m.goal() != v1::MetricSpec::MAXIMIZE &&
        m.goal() != v1::MetricSpec::MINIMIZE) {
      return Invalid(absl::StrCat(field, ".goal"),
                     "must be MAXIMIZE or MINIMIZE");
    }
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
  return ValidateEarlyStopping(spec);
}

absl::Status ValidateEarlyStopping(const v1::StudySpec& spec) {
  const v1::EarlyStoppingSpec& es = spec.early_stopping();
  if (!v1::EarlyStoppingSpec::Rule_IsValid(es.rule())) {
    return Invalid("study.spec.early_stopping.rule",
                   absl::StrCat("unknown rule ", es.rule()));
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
    // DESIGN.md, "Multi-fidelity": the rule owns the resource.
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

}  // namespace hypertune::service
