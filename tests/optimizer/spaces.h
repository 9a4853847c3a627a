// Search spaces, and a study loop, that the optimizer's tests share.
#ifndef HYPERTUNE_TESTS_OPTIMIZER_SPACES_H_
#define HYPERTUNE_TESTS_OPTIMIZER_SPACES_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "optimizer/search_space.h"
#include "optimizer/suggester.h"

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

// Runs `trials` sequential trials of `suggester` on `space`: `configure`
// (if any) adds to each request, `observe` completes each suggestion.
// Returns the history.
inline std::vector<Observation> RunSequentialStudy(
    Suggester& suggester, const SearchSpace& space, int trials, uint64_t seed,
    const std::function<void(SuggestRequest&)>& configure,
    const std::function<Observation(const Assignment&)>& observe) {
  std::vector<Observation> history;
  for (int t = 0; t < trials; ++t) {
    SuggestRequest r;
    r.space = &space;
    r.history = history;
    r.trials_created = t;
    r.seed = seed;
    if (configure) configure(r);
    history.push_back(observe(suggester.Suggest(r).value().front()));
  }
  return history;
}

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_TESTS_OPTIMIZER_SPACES_H_
