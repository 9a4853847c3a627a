// common/: what the service and the CLI both read of the API's messages,
// below both (neither reaches into the other).
//
// A study's metrics by role (proto MetricSpec.Role): its objectives, its
// constraints and the recorded rest. A study whose metrics set no role has
// one objective, its first metric; once any metric sets a role, those that
// set none are recorded.
//
// Thread-safe: an immutable value.
#ifndef HYPERTUNE_COMMON_STUDY_METRICS_H_
#define HYPERTUNE_COMMON_STUDY_METRICS_H_

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "hypertune/v1/hypertune.pb.h"

namespace hypertune {

class StudyMetrics {
 public:
  struct Objective {
    std::string name;
    bool maximize = true;
  };
  struct Constraint {
    std::string name;
    // The value must lie in [lower, upper]; either may be infinite.
    double lower = -std::numeric_limits<double>::infinity();
    double upper = std::numeric_limits<double>::infinity();
  };

  // The roles of `spec`'s metrics. A spec without any objective (refused by
  // validation) has none.
  explicit StudyMetrics(const v1::StudySpec& spec);

  const std::vector<Objective>& objectives() const { return objectives_; }
  const std::vector<Constraint>& constraints() const { return constraints_; }
  // The first objective: what early stopping judges, and the answer of a
  // study with one objective. REQUIRES: objectives() not empty.
  const Objective& primary() const { return objectives_.front(); }
  bool multi_objective() const { return objectives_.size() > 1; }

  // The names a result must carry: every objective and constraint, in that
  // order.
  std::vector<std::string> RequiredNames() const;

  // The first required metric `m` lacks, or nullopt when it has them all.
  std::optional<std::string> Missing(const v1::Measurement& m) const;

  // Whether `m` meets every constraint (true without constraints); nullopt
  // when it lacks a constrained metric.
  std::optional<bool> Feasible(const v1::Measurement& m) const;

  // The primary objective of `m` turned into maximization, or nullopt when
  // `m` lacks it.
  std::optional<double> MaximizedPrimary(const v1::Measurement& m) const;

 private:
  std::vector<Objective> objectives_;
  std::vector<Constraint> constraints_;
};

}  // namespace hypertune

#endif  // HYPERTUNE_COMMON_STUDY_METRICS_H_
