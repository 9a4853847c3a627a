#include "optimizer/conditional.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hypertune::optimizer {
namespace {

std::string Where(size_t i, const std::string& name) {
  return absl::StrCat("parameters[", i, "] (\"", name, "\")");
}

absl::Status Invalid(size_t i, const ParameterConfig& p,
                     const std::string& field, const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(Where(i, p.name), field, ": ", problem));
}

const char* TypeName(ParameterType type) {
  switch (type) {
    case ParameterType::kDouble:
      return "DOUBLE";
    case ParameterType::kInteger:
      return "INTEGER";
    case ParameterType::kDiscrete:
      return "DISCRETE";
    case ParameterType::kCategorical:
      return "CATEGORICAL";
  }
  return "UNKNOWN";
}

// Empty if `v` is a value of `parent`'s domain, else why not.
std::string NotInDomain(const ParameterConfig& parent, size_t parent_index,
                        double v) {
  const std::string of = absl::StrCat(" of ", Where(parent_index, parent.name));
  switch (parent.type) {
    case ParameterType::kCategorical:
      if (std::floor(v) == v && v >= 0 &&
          v < static_cast<double>(parent.categories.size())) {
        return "";
      }
      return absl::StrCat(v, " is not a category index", of, ", which has ",
                          parent.categories.size(), " categories");
    case ParameterType::kDiscrete:
      if (std::binary_search(parent.values.begin(), parent.values.end(), v)) {
        return "";
      }
      return absl::StrCat(v, " is not one of the values", of);
    case ParameterType::kInteger:
      if (std::isfinite(v) && std::floor(v) == v && v >= parent.min &&
          v <= parent.max) {
        return "";
      }
      return absl::StrCat(v, " is not an integer in [", parent.min, ", ",
                          parent.max, "]", of);
    case ParameterType::kDouble:
      break;
  }
  return "the parent has no discrete values";
}

// i's ancestors, nearest first. REQUIRES: the parents form no cycle.
std::vector<int> Ancestors(const std::vector<ParameterConfig>& params, int i) {
  std::vector<int> out;
  for (int k = params[i].parent; k != kNoParent; k = params[k].parent) {
    out.push_back(k);
  }
  return out;
}

}  // namespace

bool HasConditions(const std::vector<ParameterConfig>& params) {
  return std::any_of(
      params.begin(), params.end(),
      [](const ParameterConfig& p) { return p.parent != kNoParent; });
}

absl::Status ValidateTree(const std::vector<ParameterConfig>& params) {
  const int n = static_cast<int>(params.size());
  for (int i = 0; i < n; ++i) {
    const ParameterConfig& p = params[i];
    if (p.parent == kNoParent) {
      if (!p.parent_values.empty()) {
        return Invalid(i, p, ".parent_values",
                       "given, but the parameter has no parent");
      }
      continue;
    }
    if (p.parent < 0 || p.parent >= n || p.parent == i) {
      return Invalid(
          i, p, ".parent",
          absl::StrCat(p.parent, " is not the index of another parameter"));
    }
    const ParameterConfig& parent = params[p.parent];
    if (parent.type == ParameterType::kDouble) {
      return Invalid(i, p, ".parent",
                     absl::StrCat(Where(p.parent, parent.name), " is ",
                                  TypeName(parent.type),
                                  "; a parent must be CATEGORICAL, DISCRETE "
                                  "or INTEGER"));
    }
    if (p.parent_values.empty()) {
      return Invalid(i, p, ".parent_values",
                     "must list at least one value of the parent");
    }
    for (size_t k = 0; k < p.parent_values.size(); ++k) {
      const std::string field = absl::StrCat(".parent_values[", k, "]");
      const std::string problem = NotInDomain(
          parent, static_cast<size_t>(p.parent), p.parent_values[k]);
      if (!problem.empty()) return Invalid(i, p, field, problem);
      for (size_t m = 0; m < k; ++m) {
        if (p.parent_values[m] == p.parent_values[k]) {
          return Invalid(i, p, field,
                         absl::StrCat(p.parent_values[k],
                                      " repeats parent_values[", m, "]"));
        }
      }
    }
  }
  // Cycles: follow parents from each parameter; more than n steps means a
  // cycle, reported from its smallest index.
  for (int i = 0; i < n; ++i) {
    std::vector<int> chain = {i};
    for (int k = params[i].parent; k != kNoParent; k = params[k].parent) {
      if (k == i) {
        std::vector<std::string> names;
        for (int c : chain) names.push_back(Where(c, params[c].name));
        names.push_back(Where(i, params[i].name));
        return Invalid(i, params[i], ".parent",
                       absl::StrCat("the parents form a cycle: ",
                                    absl::StrJoin(names, " -> ")));
      }
      if (static_cast<int>(chain.size()) > n) break;  // A cycle above i.
      chain.push_back(k);
    }
  }
  return absl::OkStatus();
}

std::vector<int> ParentsFirstOrder(const std::vector<ParameterConfig>& params) {
  const int n = static_cast<int>(params.size());
  std::vector<int> depth(n);
  for (int i = 0; i < n; ++i) {
    depth[i] = static_cast<int>(Ancestors(params, i).size());
  }
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return depth[a] < depth[b]; });
  return order;
}

bool ActivatedBy(const ParameterConfig& child, double parent_value) {
  return std::find(child.parent_values.begin(), child.parent_values.end(),
                   parent_value) != child.parent_values.end();
}

std::vector<bool> ActiveParameters(const std::vector<ParameterConfig>& params,
                                   const std::vector<int>& order,
                                   const Assignment& a) {
  std::vector<bool> active(params.size(), true);
  for (int i : order) {
    const int parent = params[i].parent;
    if (parent == kNoParent) continue;
    active[i] = active[parent] && ActivatedBy(params[i], a[parent]);
  }
  return active;
}

bool SameAssignment(const Assignment& a, const Assignment& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool a_nan = std::isnan(a[i]), b_nan = std::isnan(b[i]);
    if (a_nan != b_nan || (!a_nan && a[i] != b[i])) return false;
  }
  return true;
}

bool AssignmentLess::operator()(const Assignment& a,
                                const Assignment& b) const {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const bool a_nan = std::isnan(a[i]), b_nan = std::isnan(b[i]);
    if (a_nan || b_nan) {
      if (a_nan && b_nan) continue;
      return a_nan;  // NaN sorts first.
    }
    if (a[i] < b[i]) return true;
    if (b[i] < a[i]) return false;
  }
  return a.size() < b.size();
}

std::vector<ConditionGroup> ConditionGroups(
    const std::vector<ParameterConfig>& params) {
  std::vector<ConditionGroup> groups(1);
  // (parent, sorted parent values) -> group index.
  std::map<std::pair<int, std::vector<double>>, int> index;
  std::vector<int> group_of(params.size(), 0);
  for (int i : ParentsFirstOrder(params)) {
    const ParameterConfig& p = params[i];
    if (p.parent == kNoParent) {
      groups[0].parameters.push_back(i);
      continue;
    }
    std::vector<double> values = p.parent_values;
    std::sort(values.begin(), values.end());
    auto [it, inserted] = index.try_emplace(std::make_pair(p.parent, values),
                                            static_cast<int>(groups.size()));
    if (inserted) {
      ConditionGroup g;
      g.parent = p.parent;
      g.parent_values = std::move(values);
      g.parent_group = group_of[p.parent];
      groups.push_back(std::move(g));
    }
    groups[it->second].parameters.push_back(i);
    group_of[i] = it->second;
  }
  for (ConditionGroup& g : groups) {
    std::sort(g.parameters.begin(), g.parameters.end());
  }
  return groups;
}

}  // namespace hypertune::optimizer
