#include "optimizer/tpe/groups.h"

#include <algorithm>
#include <map>
#include <utility>

namespace hypertune::optimizer::tpe {

std::vector<std::vector<int>> ParameterGroups(const SearchSpace& space) {
  // A parameter is active exactly when its parent is active and holds one
  // of its parent_values, so (parent, parent_values) decides where it is
  // active: equal keys, equal activity.
  using Key = std::pair<int, std::vector<double>>;
  std::map<Key, int> group_of;
  std::vector<std::vector<int>> groups;
  for (int i : space.parents_first()) {
    const ParameterConfig& p = space.parameters()[i];
    std::vector<double> values = p.parent_values;
    std::sort(values.begin(), values.end());
    const auto [it, inserted] = group_of.try_emplace(
        Key{p.parent, std::move(values)}, static_cast<int>(groups.size()));
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  for (std::vector<int>& g : groups) std::sort(g.begin(), g.end());
  return groups;
}

}  // namespace hypertune::optimizer::tpe
