// Search spaces the optimizer's tests share.
#ifndef HYPERTUNE_TESTS_OPTIMIZER_SPACES_H_
#define HYPERTUNE_TESTS_OPTIMIZER_SPACES_H_

#include <vector>

#include "absl/strings/str_cat.h"
#include "optimizer/search_space.h"

namespace hypertune::optimizer {

// [lo, hi]^d as linear doubles x0, x1, ...
inline SearchSpace Box(int d, double lo = 0, double hi = 1) {
  std::vector<ParameterConfig> params(d);
  for (int j = 0; j < d; ++j) {
    params[j].name = absl::StrCat("x", j);
    params[j].min = lo;
    params[j].max = hi;
  }
  return SearchSpace::Create(params).value();
}

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_TESTS_OPTIMIZER_SPACES_H_
