// A study's search space as the optimizer sees it, and its encoding into the
// unit cube [0,1]^d on which every algorithm works.
//
// Pure math: knows nothing of protobuf, gRPC or storage. Immutable once built;
// safe to share between threads.
#ifndef HYPERTUNE_OPTIMIZER_SEARCH_SPACE_H_
#define HYPERTUNE_OPTIMIZER_SEARCH_SPACE_H_

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hypertune::optimizer {

enum class ParameterType { kDouble, kInteger, kDiscrete, kCategorical };
enum class Scale { kLinear, kLog };

// ParameterConfig::parent of a parameter that is always active.
inline constexpr int kNoParent = -1;
// The most values GRID takes of one parameter (ParameterConfig::grid_points,
// or an INTEGER range without it).
inline constexpr int kMaxGridPointsPerParameter = 10'000;
// The value an Assignment holds for an inactive parameter.
inline constexpr double kInactive = std::numeric_limits<double>::quiet_NaN();

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
  // kDouble and kInteger, read by GRID only (grid_suggester.h): how many
  // values evenly spaced in the scale the grid tries, 0 to
  // kMaxGridPointsPerParameter; 0 (default) for none, which an INTEGER reads
  // as every integer of its range.
  int grid_points = 0;
  // kDiscrete: the allowed values, strictly increasing.
  std::vector<double> values;
  // kCategorical: the category names.
  std::vector<std::string> categories;
  // Conditional parameters (conditional.h): the index of the parameter this
  // one depends on, kNoParent (default) for one that is always active. The
  // parent is CATEGORICAL, DISCRETE or INTEGER.
  int parent = kNoParent;
  // With a parent: the parent's values under which this one is active
  // (category indices for a CATEGORICAL parent). Empty otherwise.
  std::vector<double> parent_values;
};

// One value per parameter, in the search space's order: the number itself for
// numeric parameters, the category's index for categorical ones, kInactive
// (NaN) for a parameter that is inactive under its parent's value.
using Assignment = std::vector<double>;

class SearchSpace {
 public:
  // Returns INVALID_ARGUMENT naming the parameter if a config is unusable
  // (empty name, duplicate name, non-finite or non-integral bounds, min > max,
  // log scale with min <= 0, fewer than one value or category, unsorted or
  // repeated discrete values, empty or repeated category names), if the
  // parents do not form a tree (ValidateTree in conditional.h), or if there
  // are no parameters at all.
  static absl::StatusOr<SearchSpace> Create(
      std::vector<ParameterConfig> params);

  const std::vector<ParameterConfig>& parameters() const { return params_; }
  // `parameters[i] ("name")`: how errors about parameter i name it.
  std::string Label(int i) const;
  int dim() const { return static_cast<int>(params_.size()); }
  // Whether some parameter has a parent.
  bool conditional() const { return conditional_; }
  // Parameter indices, parents before their children.
  const std::vector<int>& parents_first() const { return order_; }
  // Whether each parameter is active under `a` (only parents' slots read).
  // REQUIRES: a.size() == dim()
  std::vector<bool> Active(const Assignment& a) const;

  // Maps a point of [0,1]^d to a valid assignment: doubles by their scale,
  // integers padded by half a step and rounded, discrete values and
  // categories by equal-width bins. Coordinates outside [0,1] are clamped
  // (NaN reads as 0.5). Parameters inactive under the decoded parents'
  // values get kInactive, whatever their coordinate. Always returns a valid
  // assignment.
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
  // centre of their cell (in the scale's measure). An inactive parameter's
  // coordinate is 0.5 (a placeholder: models must not read it as a value).
  // REQUIRES: Validate(a).ok()
  Eigen::VectorXd Encode(const Assignment& a) const;

  // OK if `a` has one in-range value per active parameter (integers
  // integral, discrete values among the allowed ones, category indices in
  // range) and kInactive for each inactive one; otherwise INVALID_ARGUMENT
  // naming the parameter.
  absl::Status Validate(const Assignment& a) const;

  // A partial assignment completed: the values `fixed` holds (kInactive,
  // NaN, for those not given) kept, every other parameter taken from
  // `proposal`. A parameter that turns active only under a fixed parent's
  // value (inactive in the proposal) gets the centre of its range.
  // INVALID_ARGUMENT naming the parameter for a fixed value out of range,
  // for a fixed child whose parent is not fixed, or for one left inactive by
  // its parent's value.
  // REQUIRES: fixed.size() == dim(), Validate(proposal).ok()
  absl::StatusOr<Assignment> Complete(const Assignment& fixed,
                                      const Assignment& proposal) const;

 private:
  explicit SearchSpace(std::vector<ParameterConfig> params);
  std::vector<ParameterConfig> params_;
  std::vector<int> order_;
  bool conditional_ = false;
};

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_SEARCH_SPACE_H_
