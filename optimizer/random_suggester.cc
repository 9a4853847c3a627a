#include "optimizer/random_suggester.h"

#include <cstdint>
#include <random>
#include <vector>

#include "optimizer/splitmix.h"

namespace hypertune::optimizer {

absl::StatusOr<std::vector<Assignment>> RandomSuggester::Suggest(
    const SuggestRequest& request) {
  if (absl::Status s = ValidateRequest(request); !s.ok()) return s;
  const SearchSpace& space = *request.space;
  std::mt19937_64 rng(
      MixSeeds(request.seed, static_cast<uint64_t>(request.trials_created)));
  std::vector<Assignment> out;
  out.reserve(request.count);
  Eigen::VectorXd unit(space.dim());
  for (int i = 0; i < request.count; ++i) {
    // 53 random bits by hand: std::uniform_real_distribution's output is not
    // specified bit for bit across standard libraries.
    for (int j = 0; j < space.dim(); ++j) {
      unit[j] = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    }
    out.push_back(space.Decode(unit));
  }
  return out;
}

}  // namespace hypertune::optimizer
