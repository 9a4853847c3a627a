#include "common/study_metrics.h"

namespace hypertune {

StudyMetrics::StudyMetrics(const v1::StudySpec& spec) {
  bool any_role = false;
  for (const v1::MetricSpec& m : spec.metrics()) {
    any_role = any_role || m.role() != v1::MetricSpec::ROLE_UNSPECIFIED;
  }
  for (int i = 0; i < spec.metrics_size(); ++i) {
    const v1::MetricSpec& m = spec.metrics(i);
    const bool objective =
        any_role ? m.role() == v1::MetricSpec::OBJECTIVE : i == 0;
    if (objective) {
      objectives_.push_back({m.name(), m.goal() != v1::MetricSpec::MINIMIZE});
    } else if (m.role() == v1::MetricSpec::CONSTRAINT) {
      Constraint c;
      c.name = m.name();
      if (m.has_lower_bound()) c.lower = m.lower_bound();
      if (m.has_upper_bound()) c.upper = m.upper_bound();
      constraints_.push_back(std::move(c));
    }
  }
}

std::vector<std::string> StudyMetrics::RequiredNames() const {
  std::vector<std::string> names;
  for (const Objective& o : objectives_) names.push_back(o.name);
  for (const Constraint& c : constraints_) names.push_back(c.name);
  return names;
}

std::optional<std::string> StudyMetrics::Missing(
    const v1::Measurement& m) const {
  for (const std::string& name : RequiredNames()) {
    if (!m.metrics().contains(name)) return name;
  }
  return std::nullopt;
}

std::optional<bool> StudyMetrics::Feasible(const v1::Measurement& m) const {
  bool feasible = true;
  for (const Constraint& c : constraints_) {
    auto it = m.metrics().find(c.name);
    if (it == m.metrics().end()) return std::nullopt;
    // NaN never arrives (validation); +-infinity is outside any finite
    // bound it passes.
    feasible = feasible && it->second >= c.lower && it->second <= c.upper;
  }
  return feasible;
}

std::optional<double> StudyMetrics::MaximizedPrimary(
    const v1::Measurement& m) const {
  if (objectives_.empty()) return std::nullopt;
  auto it = m.metrics().find(primary().name);
  if (it == m.metrics().end()) return std::nullopt;
  return primary().maximize ? it->second : -it->second;
}

}  // namespace hypertune
