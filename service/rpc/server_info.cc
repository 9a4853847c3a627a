#include "service/rpc/server_info.h"

#include <set>
#include <string>
#include <vector>

#include "common/limits.h"
#include "common/study_metrics.h"

namespace hypertune::service {

v1::ServerInfo ServerInfoAnswer() {
  v1::ServerInfo info;
  info.set_version(kServerVersion);
  info.set_identifier_pattern(kIdentifierPattern);
  info.set_study_name_pattern(kStudyNamePattern);
  v1::ServerLimits& l = *info.mutable_limits();
  l.set_max_request_bytes(kMaxRequestBytes);
  l.set_max_name_bytes(static_cast<int64_t>(kMaxNameBytes));
  l.set_max_parameters(kMaxParameters);
  l.set_max_values_per_parameter(kMaxValuesPerParameter);
  l.set_max_category_bytes(static_cast<int64_t>(kMaxCategoryBytes));
  l.set_max_parent_values_per_study(kMaxParentValuesPerStudy);
  l.set_max_metrics_per_study(kMaxMetricsPerStudy);
  l.set_max_attributes(kMaxAttributes);
  l.set_max_attribute_value_bytes(
      static_cast<int64_t>(kMaxAttributeValueBytes));
  l.set_max_metrics_per_measurement(kMaxMetricsPerMeasurement);
  l.set_max_measurements_per_trial(kMaxMeasurementsPerTrial);
  l.set_max_client_id_bytes(static_cast<int64_t>(kMaxClientIdBytes));
  l.set_max_uri_bytes(static_cast<int64_t>(kMaxUriBytes));
  l.set_max_reason_bytes(static_cast<int64_t>(kMaxReasonBytes));
  l.set_max_suggest_count(kMaxSuggestCount);
  l.set_max_page_size(kMaxPageSize);
  return info;
}

std::vector<v1::MetricSpec::Role> ResolvedMetricRoles(
    const v1::StudySpec& spec) {
  const StudyMetrics metrics(spec);
  std::set<std::string> objectives;
  std::set<std::string> constraints;
  for (const StudyMetrics::Objective& o : metrics.objectives()) {
    objectives.insert(o.name);
  }
  for (const StudyMetrics::Constraint& c : metrics.constraints()) {
    constraints.insert(c.name);
  }
  std::vector<v1::MetricSpec::Role> roles;
  for (const v1::MetricSpec& m : spec.metrics()) {
    roles.push_back(objectives.contains(m.name()) ? v1::MetricSpec::OBJECTIVE
                    : constraints.contains(m.name())
                        ? v1::MetricSpec::CONSTRAINT
                        : v1::MetricSpec::RECORDED);
  }
  return roles;
}

void PublishMetricRoles(v1::Study& study) {
  study.clear_metric_roles();
  for (v1::MetricSpec::Role role : ResolvedMetricRoles(study.spec())) {
    study.add_metric_roles(role);
  }
}

}  // namespace hypertune::service
