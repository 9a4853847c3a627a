// A study's search space as the optimizer sees it, and its encoding into the
// unit cube [0,1]^d on which every algorithm works.
//
// Pure math: knows nothing of protobuf, gRPC or storage. Immutable once built;
// safe to share between threads.
#ifndef HYPERTUNE_OPTIMIZER_SEARCH_SPACE_H_
#define HYPERTUNE_OPTIMIZER_SEARCH_SPACE_H_

#include <string>
#include <vector>

#include <Eigen/Core>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hypertune::optimizer {

enum class ParameterType { kDouble, kInteger, kDiscrete, kCategorical };
enum class Scale { kLinear, kLog };

struct ParameterConfig {
  std::string name;
  ParameterType type = ParameterType::kDouble;
  // kDouble and kInteger: the closed range. kLog requires min > 0.
  double min = 0.0;
  double max = 1.0;
  Scale scale = Scale::kLinear;
  // kDiscrete: the allowed values, strictly increasing.
  std::vector<double> values;
  // kCategorical: the category names.
  std::vector<std::string> categories;
};

// One value per parameter, in the search space's order: the number itself for
// numeric parameters, the category's index for categorical ones.
using Assignment = std::vector<double>;

class SearchSpace {
 public:
  // Returns INVALID_ARGUMENT naming the parameter if a config is unusable
  // (empty name, duplicate name, min > max, log scale with min <= 0, fewer
  // than one value or category, unsorted or repeated discrete values).
  static absl::StatusOr<SearchSpace> Create(std::vector<ParameterConfig> params);

  const std::vector<ParameterConfig>& parameters() const { return params_; }
  int dim() const { return static_cast<int>(params_.size()); }

  // Maps a point of [0,1]^d to a valid assignment: doubles by their scale,
  // integers padded by half a step and rounded, discrete values and
  // categories by equal-width bins. Coordinates outside [0,1] are clamped.
  Assignment Decode(const Eigen::VectorXd& unit) const;

  // The inverse of Decode for valid assignments: Decode(Encode(a)) == a.
  // Discrete values and categories map to the centre of their bin.
  // REQUIRES: Validate(a).ok()
  Eigen::VectorXd Encode(const Assignment& a) const;

  // OK if `a` has one in-range value per parameter (integers integral,
  // discrete values among the allowed ones, category indices in range);
  // otherwise INVALID_ARGUMENT naming the parameter.
  absl::Status Validate(const Assignment& a) const;

 private:
  explicit SearchSpace(std::vector<ParameterConfig> params)
      : params_(std::move(params)) {}
  std::vector<ParameterConfig> params_;
};

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_SEARCH_SPACE_H_
