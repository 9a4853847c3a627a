// QUASI_RANDOM: points of the scrambled Sobol sequence (sobol.h) scrambled by
// the request's seed, decoded into the search space. The i-th of `count`
// points is number trials_created + i, so a study walks the sequence in order
// and every block of 2^m trials is a (t,m,d)-net. Ignores the history.
// Stateless; safe to share between threads.
#ifndef HYPERTUNE_OPTIMIZER_QUASI_RANDOM_SUGGESTER_H_
#define HYPERTUNE_OPTIMIZER_QUASI_RANDOM_SUGGESTER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "optimizer/suggester.h"

namespace hypertune::optimizer {

class QuasiRandomSuggester final : public Suggester {
 public:
  // INVALID_ARGUMENT also when the space has more than
  // SobolSequence::kMaxDimension parameters.
  absl::StatusOr<std::vector<Assignment>> Suggest(
      const SuggestRequest& request) override;
  bool UsesHistory() const override { return false; }
};

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_QUASI_RANDOM_SUGGESTER_H_
