#include "optimizer/quasi_random_suggester.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "optimizer/sobol.h"

namespace hypertune::optimizer {

absl::StatusOr<std::vector<Assignment>> QuasiRandomSuggester::Suggest(
    const SuggestRequest& request) {
  if (absl::Status s = ValidateSobolRequest(request, "QUASI_RANDOM"); !s.ok()) {
    return s;
  }
  const SearchSpace& space = *request.space;
  const SobolSequence sobol(space.dim(), request.seed);
  std::vector<Assignment> out;
  out.reserve(request.count);
  for (int i = 0; i < request.count; ++i) {
    out.push_back(space.Decode(sobol.Point(request.trials_created + i)));
  }
  return out;
}

}  // namespace hypertune::optimizer
