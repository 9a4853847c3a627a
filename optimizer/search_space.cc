#include "optimizer/search_space.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "optimizer/conditional.h"

namespace hypertune::optimizer {
namespace {

// Bounds on integer parameters: 2^40. A coordinate in [0,1] resolves about
// 2^-53, so this leaves every integer's cell (1 / range of the unit interval,
// less in log scale) hundreds of times wider than the rounding error, and
// Decode(Encode(a)) == a holds.
constexpr double kMaxIntegerMagnitude = 1099511627776.0;

std::string Where(size_t i, const std::string& name) {
  return absl::StrCat("parameters[", i, "] (\"", name, "\")");
}

absl::Status Invalid(size_t i, const std::string& name,
                     const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(Where(i, name), ": ", problem));
}

bool IsIntegral(double v) { return std::isfinite(v) && std::floor(v) == v; }

absl::Status CheckRange(size_t i, const ParameterConfig& p) {
  if (!std::isfinite(p.min) || !std::isfinite(p.max)) {
    return Invalid(
        i, p.name,
        absl::StrCat("bounds must be finite, got [", p.min, ", ", p.max, "]"));
  }
  if (p.min > p.max) {
    return Invalid(i, p.name,
                   absl::StrCat("min must not exceed max, got min ", p.min,
                                " > max ", p.max));
  }
  // Scaling to [0, 1] divides by the width.
  if (!std::isfinite(p.max - p.min)) {
    return Invalid(i, p.name,
                   absl::StrCat("the width max - min must be finite, got [",
                                p.min, ", ", p.max, "]"));
  }
  if (p.type == ParameterType::kInteger) {
    if (!IsIntegral(p.min) || !IsIntegral(p.max)) {
      return Invalid(i, p.name,
                     absl::StrCat("integer bounds must be integral, got [",
                                  p.min, ", ", p.max, "]"));
    }
    if (std::abs(p.min) > kMaxIntegerMagnitude ||
        std::abs(p.max) > kMaxIntegerMagnitude) {
      return Invalid(i, p.name, "integer bounds must lie within +-2^40");
    }
  }
  if (p.scale == Scale::kLog && p.min <= 0) {
    return Invalid(i, p.name,
                   absl::StrCat("log scale requires min > 0, got ", p.min));
  }
  if (p.grid_points < 0 || p.grid_points > kMaxGridPointsPerParameter) {
    return Invalid(
        i, p.name,
        absl::StrCat("grid_points must be between 0 and ",
                     kMaxGridPointsPerParameter, ", got ", p.grid_points));
  }
  return absl::OkStatus();
}

absl::Status CheckConfig(size_t i, const ParameterConfig& p) {
  switch (p.type) {
    case ParameterType::kDouble:
    case ParameterType::kInteger:
      return CheckRange(i, p);
    case ParameterType::kDiscrete:
      if (p.values.empty()) {
        return Invalid(i, p.name,
                       "discrete parameter needs at least one value");
      }
      for (size_t k = 0; k < p.values.size(); ++k) {
        if (!std::isfinite(p.values[k])) {
          return Invalid(i, p.name,
                         absl::StrCat("values[", k, "] must be finite, got ",
                                      p.values[k]));
        }
        if (k > 0 && !(p.values[k - 1] < p.values[k])) {
          return Invalid(
              i, p.name,
              absl::StrCat("values must be strictly increasing, got values[",
                           k - 1, "] = ", p.values[k - 1], " and values[", k,
                           "] = ", p.values[k]));
        }
      }
      return absl::OkStatus();
    case ParameterType::kCategorical: {
      if (p.categories.empty()) {
        return Invalid(i, p.name,
                       "categorical parameter needs at least one category");
      }
      absl::flat_hash_set<std::string> seen;
      for (size_t k = 0; k < p.categories.size(); ++k) {
        if (p.categories[k].empty()) {
          return Invalid(i, p.name,
                         absl::StrCat("categories[", k, "] is empty"));
        }
        if (!seen.insert(p.categories[k]).second) {
          return Invalid(i, p.name,
                         absl::StrCat("categories[", k, "] (\"",
                                      p.categories[k], "\") is repeated"));
        }
      }
      return absl::OkStatus();
    }
  }
  return Invalid(i, p.name, "unknown parameter type");
}

// Index of the equal-width bin of [0,1] holding u, one of n bins.
size_t Bin(double u, size_t n) {
  return std::min(static_cast<size_t>(u * static_cast<double>(n)), n - 1);
}

double BinCentre(size_t k, size_t n) {
  return (static_cast<double>(k) + 0.5) / static_cast<double>(n);
}

// The padded interval [min - 0.5, max + 0.5] that integers are decoded from,
// in the coordinates of the scale (log for kLog).
std::pair<double, double> IntegerSpan(const ParameterConfig& p) {
  if (p.scale == Scale::kLog) {
    return {std::log(p.min - 0.5), std::log(p.max + 0.5)};
  }
  return {p.min - 0.5, p.max + 0.5};
}

double DecodeOne(const ParameterConfig& p, double u) {
  if (std::isnan(u)) u = 0.5;
  u = std::clamp(u, 0.0, 1.0);
  switch (p.type) {
    case ParameterType::kDouble: {
      // The bounds themselves, exactly, which the formulas may miss by an ulp.
      if (u == 0.0) return p.min;
      if (u == 1.0) return p.max;
      double x;
      if (p.scale == Scale::kLog) {
        const double lo = std::log(p.min), hi = std::log(p.max);
        x = std::exp(lo + u * (hi - lo));
      } else {
        x = p.min + u * (p.max - p.min);
      }
      return std::clamp(x, p.min, p.max);
    }
    case ParameterType::kInteger: {
      const auto [lo, hi] = IntegerSpan(p);
      double t = lo + u * (hi - lo);
      if (p.scale == Scale::kLog) t = std::exp(t);
      return std::clamp(std::round(t), p.min, p.max);
    }
    case ParameterType::kDiscrete:
      return p.values[Bin(u, p.values.size())];
    case ParameterType::kCategorical:
      return static_cast<double>(Bin(u, p.categories.size()));
  }
  return 0.0;
}

double EncodeOne(const ParameterConfig& p, double v) {
  switch (p.type) {
    case ParameterType::kDouble:
      if (p.min == p.max) return 0.5;
      if (p.scale == Scale::kLog) {
        const double lo = std::log(p.min), hi = std::log(p.max);
        return std::clamp((std::log(v) - lo) / (hi - lo), 0.0, 1.0);
      }
      return std::clamp((v - p.min) / (p.max - p.min), 0.0, 1.0);
    case ParameterType::kInteger: {
      const auto [lo, hi] = IntegerSpan(p);
      // Centre of v's rounding cell [v - 0.5, v + 0.5] in the scale's
      // coordinates; for log, the geometric mean sqrt(v^2 - 1/4), which lies
      // strictly inside the cell and so rounds back to v.
      const double centre = p.scale == Scale::kLog
                                ? 0.5 * (std::log(v - 0.5) + std::log(v + 0.5))
                                : v;
      return (centre - lo) / (hi - lo);
    }
    case ParameterType::kDiscrete: {
      const auto it = std::lower_bound(p.values.begin(), p.values.end(), v);
      return BinCentre(static_cast<size_t>(it - p.values.begin()),
                       p.values.size());
    }
    case ParameterType::kCategorical:
      return BinCentre(static_cast<size_t>(v), p.categories.size());
  }
  return 0.5;
}

}  // namespace

absl::StatusOr<SearchSpace> SearchSpace::Create(
    std::vector<ParameterConfig> params) {
  if (params.empty()) {
    return absl::InvalidArgumentError(
        "parameters: a search space needs at least one parameter");
  }
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < params.size(); ++i) {
    const ParameterConfig& p = params[i];
    if (p.name.empty()) return Invalid(i, p.name, "name must not be empty");
    if (!names.insert(p.name).second) {
      return Invalid(i, p.name, "name is used by an earlier parameter");
    }
    if (absl::Status s = CheckConfig(i, p); !s.ok()) return s;
  }
  if (absl::Status s = ValidateTree(params); !s.ok()) return s;
  return SearchSpace(std::move(params));
}

SearchSpace::SearchSpace(std::vector<ParameterConfig> params)
    : params_(std::move(params)),
      order_(ParentsFirstOrder(params_)),
      conditional_(HasConditions(params_)) {}

std::string SearchSpace::Label(int i) const {
  return Where(i, params_[i].name);
}

std::vector<bool> SearchSpace::Active(const Assignment& a) const {
  assert(a.size() == params_.size());
  return ActiveParameters(params_, order_, a);
}

Assignment SearchSpace::Decode(const Eigen::VectorXd& unit) const {
  assert(unit.size() == dim());
  Assignment a(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    a[i] = DecodeOne(params_[i], unit[static_cast<Eigen::Index>(i)]);
  }
  if (conditional_) {
    const std::vector<bool> active = Active(a);
    for (size_t i = 0; i < a.size(); ++i) {
      if (!active[i]) a[i] = kInactive;
    }
  }
  return a;
}

Eigen::VectorXd SearchSpace::Encode(const Assignment& a) const {
  assert(Validate(a).ok());
  Eigen::VectorXd unit(dim());
  for (size_t i = 0; i < params_.size(); ++i) {
    unit[static_cast<Eigen::Index>(i)] =
        std::isnan(a[i]) ? 0.5 : EncodeOne(params_[i], a[i]);
  }
  return unit;
}

absl::Status SearchSpace::Validate(const Assignment& a) const {
  if (a.size() != params_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("assignment has ", a.size(), " values, the search space ",
                     params_.size(), " parameters"));
  }
  const std::vector<bool> active =
      conditional_ ? Active(a) : std::vector<bool>(params_.size(), true);
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParameterConfig& p = params_[i];
    const double v = a[i];
    if (!active[i]) {
      if (std::isnan(v)) continue;
      return Invalid(
          i, p.name,
          absl::StrCat("is inactive (its parent \"", params_[p.parent].name,
                       "\" does not hold one of its parent values) but has "
                       "the value ",
                       v));
    }
    if (std::isnan(v) && p.parent != kNoParent) {
      return Invalid(
          i, p.name,
          absl::StrCat("is active (under its parent \"", params_[p.parent].name,
                       "\") but has no value"));
    }
    if (!std::isfinite(v)) {
      return Invalid(i, p.name, absl::StrCat("value must be finite, got ", v));
    }
    switch (p.type) {
      case ParameterType::kInteger:
        if (!IsIntegral(v)) {
          return Invalid(i, p.name,
                         absl::StrCat("value must be an integer, got ", v));
        }
        [[fallthrough]];
      case ParameterType::kDouble:
        if (v < p.min || v > p.max) {
          return Invalid(i, p.name,
                         absl::StrCat("value ", v, " is outside [", p.min, ", ",
                                      p.max, "]"));
        }
        break;
      case ParameterType::kDiscrete:
        if (!std::binary_search(p.values.begin(), p.values.end(), v)) {
          return Invalid(
              i, p.name,
              absl::StrCat("value ", v, " is not one of the allowed values"));
        }
        break;
      case ParameterType::kCategorical:
        if (!IsIntegral(v) || v < 0 ||
            v >= static_cast<double>(p.categories.size())) {
          return Invalid(
              i, p.name,
              absl::StrCat("category index must be an integer in [0, ",
                           p.categories.size(), "), got ", v));
        }
        break;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Assignment> SearchSpace::Complete(
    const Assignment& fixed, const Assignment& proposal) const {
  // Whatever the algorithm proposes: a child is active only by its parent's
  // value, so it is fixed only with its parent.
  for (int i = 0; i < dim(); ++i) {
    const int parent = params_[i].parent;
    if (!std::isnan(fixed[i]) && parent != kNoParent &&
        std::isnan(fixed[parent])) {
      return Invalid(i, params_[i].name,
                     absl::StrCat("is conditional on \"", params_[parent].name,
                                  "\"; fix the parent too"));
    }
  }
  Eigen::VectorXd unit = Encode(proposal);
  for (int i = 0; i < dim(); ++i) {
    if (std::isnan(fixed[i])) continue;
    // The parameter on its own: its coordinate whatever its parent.
    ParameterConfig alone = params_[i];
    alone.parent = kNoParent;
    alone.parent_values.clear();
    const SearchSpace one({std::move(alone)});
    if (absl::Status s = one.Validate({fixed[i]}); !s.ok()) {
      // Named by its index in this space, not in `one`.
      const absl::string_view message = s.message();
      return Invalid(i, params_[i].name,
                     std::string(message.substr(message.find(": ") + 2)));
    }
    unit[i] = one.Encode({fixed[i]})[0];
  }
  Assignment completed = Decode(unit);
  for (int i = 0; i < dim(); ++i) {
    if (std::isnan(fixed[i])) continue;
    if (std::isnan(completed[i])) {
      return Invalid(i, params_[i].name,
                     "is inactive under its parent's value; fix the parent "
                     "too");
    }
    completed[i] = fixed[i];  // Decode is exact up to a few ulps
  }
  return completed;
}

}  // namespace hypertune::optimizer
