// A study's search space as the optimizer sees it, and its encoding into the
// unit cube [0,1]^d on which every algorithm works.
//
// Pure math: knows nothing of protobuf, gRPC or storage. Immutable once built;
// safe to share between threads.
#ifndef HYPERTUNE_OPTIMIZER_SEARCH_SPACE_H_
#define HYPERTUNE_OPTIMIZER_SEARCH_SPACE_H_

#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hypertune::optimizer {

enum class ParameterType { kDouble, kInteger, kDiscrete, kCategorical };
enum class Scale { kLinear, kLog };

// One parameter. Only the fields of its `type` are read.
struct ParameterConfig {
  std::string name;
  ParameterType type = ParameterType::kDouble;
  // kDouble and kInteger: the closed range, finite. kLog requires min > 0.
  // kInteger bounds are integral with magnitude at most 2^40.
  double min = 0.0;
  double max = 1.0;
  // kDouble and kInteger only; ignored for the other types.
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
  // (empty name, duplicate name, non-finite or non-integral bounds, min > max,
  // log scale with min <= 0, fewer than one value or category, unsorted or
  // repeated discrete values, empty or repeated category names), or if there
  // are no parameters at all.
  static absl::StatusOr<SearchSpace> Create(
      std::vector<ParameterConfig> params);

  const std::vector<ParameterConfig>& parameters() const { return params_; }
  int dim() const { return static_cast<int>(params_.size()); }

  // Maps a point of [0,1]^d to a valid assignment: doubles by their scale,
  // integers padded by half a step and rounded, discrete values and
  // categories by equal-width bins. Coordinates outside [0,1] are clamped
  // (NaN reads as 0.5). Always returns a valid assignment.
  //
  // Integers: linear scale maps [0,1] onto [min - 0.5, max + 0.5]; log scale
  // maps it log-uniformly onto [min - 0.5, max + 0.5] (min >= 1, so the
  // padded bound stays positive); then round to nearest and clamp. Each
  // integer thus owns the share of the unit interval that its rounding cell
  // [k - 0.5, k + 0.5] has in the scale's measure.
  // REQUIRES: unit.size() == dim()
  Assignment Decode(const Eigen::VectorXd& unit) const;

  // The inverse of Decode for valid assignments: Decode(Encode(a)) == a,
  // exactly for integers, discrete values and categories, and up to a few
  // ulps for doubles. Integers, discrete values and categories map to the
  // centre of their cell (in the scale's measure).
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
