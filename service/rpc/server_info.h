// What clients would otherwise copy from the server's source: its version,
// limits (common/limits.h) and name rules (GetServerInfo), and the role
// each metric of a study plays (Study.metric_roles). Clients read these
// (the Python client caches the server info per Client) instead of keeping
// their own copies.
//
// Thread safety: pure functions.
#ifndef HYPERTUNE_SERVICE_RPC_SERVER_INFO_H_
#define HYPERTUNE_SERVICE_RPC_SERVER_INFO_H_

#include <vector>

#include "common/identifier.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::service {

// Study names (ValidateStudyName).
inline constexpr char kStudyNamePattern[] =
    "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$";
// hypertuned's version, as the Python package (python/pyproject.toml).
inline constexpr char kServerVersion[] = "0.1.0";

// GetServerInfo's answer.
v1::ServerInfo ServerInfoAnswer();

// The role of each of `spec`'s metrics, in order, resolved by StudyMetrics'
// rule (common/study_metrics.h): OBJECTIVE, CONSTRAINT or RECORDED.
std::vector<v1::MetricSpec::Role> ResolvedMetricRoles(
    const v1::StudySpec& spec);

// Sets study.metric_roles from its spec (an answer's last step).
void PublishMetricRoles(v1::Study& study);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_SERVER_INFO_H_
