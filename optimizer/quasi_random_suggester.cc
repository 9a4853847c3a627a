#include "optimizer/quasi_random_suggester.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "optimizer/sobol.h"

namespace hypertune::optimizer {

absl::StatusOr<std::vector<Assignment>> QuasiRandomSuggester::Suggest(
    const SuggestRequest& request) {
  if (absl::Status s = ValidateRequest(request); !s.ok()) return s;
  const SearchSpace& space = *request.space;
  if (space.dim() > SobolSequence::kMaxDimension) {
    return absl::InvalidArgumentError(absl::StrCat(
        "QUASI_RANDOM supports at most ", SobolSequence::kMaxDimension,
        " parameters, the search space has ", space.dim()));
  }
  constexpr int64_t kMaxIndex = (int64_t{1} << SobolSequence::kBits) - 1;
  if (request.trials_created > kMaxIndex - request.count) {
    return absl::InvalidArgumentError(
        absl::StrCat("trials_created: ", request.trials_created,
                     " is past the end of the Sobol sequence"));
  }
  const SobolSequence sobol(space.dim(), request.seed);
  std::vector<Assignment> out;
  out.reserve(request.count);
  for (int i = 0; i < request.count; ++i) {
    out.push_back(space.Decode(sobol.Point(request.trials_created + i)));
  }
  return out;
}

}  // namespace hypertune::optimizer
