#include "service/rpc/conditional_spec.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/limits.h"

namespace hypertune::service {
namespace {

namespace opt = ::hypertune::optimizer;

absl::Status Invalid(int i, const std::string& field,
                     const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("study.spec.parameters[", i, "].", field, ": ", problem));
}

}  // namespace

absl::Status ResolveParents(const v1::StudySpec& spec,
                            std::vector<opt::ParameterConfig>& configs) {
  absl::flat_hash_map<std::string, int> index;
  for (int i = 0; i < spec.parameters_size(); ++i) {
    index.try_emplace(spec.parameters(i).name(), i);
  }
  for (int i = 0; i < spec.parameters_size(); ++i) {
    const v1::ParameterSpec& p = spec.parameters(i);
    if (p.parent_categories_size() > kMaxValuesPerParameter) {
      return Invalid(i, "parent_categories",
                     absl::StrCat(p.parent_categories_size(),
                                  " categories, over the limit of ",
                                  kMaxValuesPerParameter));
    }
    if (p.parent_values_size() > kMaxValuesPerParameter) {
      return Invalid(
          i, "parent_values",
          absl::StrCat(p.parent_values_size(), " values, over the limit of ",
                       kMaxValuesPerParameter));
    }
    if (p.parent().empty()) {
      if (p.parent_categories_size() > 0) {
        return Invalid(i, "parent_categories", "given without a parent");
      }
      if (p.parent_values_size() > 0) {
        return Invalid(i, "parent_values", "given without a parent");
      }
      continue;
    }
    const auto it = index.find(p.parent());
    if (it == index.end()) {
      return Invalid(i, "parent",
                     absl::StrCat("no parameter is named \"",
                                  absl::CHexEscape(p.parent()), "\""));
    }
    const int parent = it->second;
    if (parent == i) {
      return Invalid(i, "parent", "names the parameter itself");
    }
    const v1::ParameterSpec& q = spec.parameters(parent);
    const std::string of =
        absl::StrCat("parameters[", parent, "] (\"", q.name(), "\")");
    opt::ParameterConfig& c = configs[i];
    c.parent = parent;
    c.parent_values.clear();
    if (q.kind_case() == v1::ParameterSpec::kCategoricalSpec) {
      if (p.parent_values_size() > 0) {
        return Invalid(i, "parent_values",
                       absl::StrCat("the parent ", of,
                                    " is CATEGORICAL: list its categories "
                                    "in parent_categories"));
      }
      if (p.parent_categories_size() == 0) {
        return Invalid(i, "parent_categories",
                       absl::StrCat("must list at least one category of ", of));
      }
      const auto& categories = q.categorical_spec().values();
      for (int k = 0; k < p.parent_categories_size(); ++k) {
        const auto cat = std::find(categories.begin(), categories.end(),
                                   p.parent_categories(k));
        if (cat == categories.end()) {
          return Invalid(
              i, absl::StrCat("parent_categories[", k, "]"),
              absl::StrCat("\"", absl::CHexEscape(p.parent_categories(k)),
                           "\" is not a category of ", of));
        }
        const double value = static_cast<double>(cat - categories.begin());
        if (std::find(c.parent_values.begin(), c.parent_values.end(), value) !=
            c.parent_values.end()) {
          return Invalid(
              i, absl::StrCat("parent_categories[", k, "]"),
              absl::StrCat("\"", absl::CHexEscape(p.parent_categories(k)),
                           "\" is listed twice"));
        }
        c.parent_values.push_back(value);
      }
      continue;
    }
    if (p.parent_categories_size() > 0) {
      return Invalid(i, "parent_categories",
                     absl::StrCat("the parent ", of,
                                  " is not CATEGORICAL: list its values in "
                                  "parent_values"));
    }
    if (q.kind_case() == v1::ParameterSpec::kDoubleSpec) {
      return Invalid(i, "parent",
                     absl::StrCat(of,
                                  " is DOUBLE; a parent must be CATEGORICAL, "
                                  "DISCRETE or INTEGER"));
    }
    if (p.parent_values_size() == 0) {
      return Invalid(i, "parent_values",
                     absl::StrCat("must list at least one value of ", of));
    }
    for (int k = 0; k < p.parent_values_size(); ++k) {
      const double value = p.parent_values(k);
      if (std::find(c.parent_values.begin(), c.parent_values.end(), value) !=
          c.parent_values.end()) {
        return Invalid(i, absl::StrCat("parent_values[", k, "]"),
                       absl::StrCat(value, " is listed twice"));
      }
      c.parent_values.push_back(value);
    }
  }
  return absl::OkStatus();
}

}  // namespace hypertune::service
