// RANDOM: independent uniform points of the unit cube, decoded into the
// search space. Ignores the history. Deterministic: the generator is seeded
// from (seed, trials_created), so a repeated request gets the same points and
// the next request (one more trial created) different ones.
// Stateless; safe to share between threads.
#ifndef HYPERTUNE_OPTIMIZER_RANDOM_SUGGESTER_H_
#define HYPERTUNE_OPTIMIZER_RANDOM_SUGGESTER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "optimizer/suggester.h"

namespace hypertune::optimizer {

class RandomSuggester final : public Suggester {
 public:
  absl::StatusOr<std::vector<Assignment>> Suggest(
      const SuggestRequest& request) override;
  bool UsesHistory() const override { return false; }
};

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_RANDOM_SUGGESTER_H_
