// GP_BANDIT's transfer from earlier studies (transfer.h): a GP on the
// earlier studies' completed trials of one objective (each study's values
// warped on their own) becomes the mean function of this study's GP for
// that objective, weighted by how well it predicts this study's targets.
// Objective k of this study learns from objective k of each earlier study
// (PriorStudy::trials' values). Not thread-safe: one per suggester.
#ifndef HYPERTUNE_OPTIMIZER_GP_BANDIT_TRANSFER_PRIOR_H_
#define HYPERTUNE_OPTIMIZER_GP_BANDIT_TRANSFER_PRIOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <Eigen/Core>

#include "absl/status/statusor.h"
#include "optimizer/gp_bandit/metric_model.h"
#include "optimizer/gp_bandit/options.h"
#include "optimizer/search_space.h"
#include "optimizer/suggester.h"
#include "optimizer/transfer.h"

namespace hypertune::optimizer::gp_bandit {

// The transfer prior's GP on the earlier studies' trials, and the data it
// was fitted on (the cache key).
struct PriorFit {
  uint64_t seed;
  Eigen::MatrixXd x;  // Model coordinates; unshared ones 0.
  Eigen::VectorXd y;  // Each study's values warped on their own.
  std::vector<bool> shared;
  std::shared_ptr<const TransferMean> mean;  // Weight 1, offset 0.
  Fit fit;
  Eigen::MatrixXd anchors;  // The best prior trials, best first.
};

class TransferPriors {
 public:
  // REQUIRES: options outlives this object.
  explicit TransferPriors(const GpBanditOptions& options)
      : options_(&options) {}

  // The fitted prior of objective `objective` from `priors`, from the cache
  // when it holds the same data; null if they hold no trial of it or the
  // fit fails. REQUIRES: a flat space
  const PriorFit* ForObjective(const SearchSpace& space, uint64_t seed,
                               const std::vector<PriorStudy>& priors,
                               int objective);

 private:
  const GpBanditOptions* options_;
  // Per objective.
  std::vector<std::optional<PriorFit>> fits_;
};

// An objective's model with a transfer prior: the model without it (fits'
// Build, as for any metric), the weighted prior added as its mean
// function; with fewer than kMinModelPoints trials, the hyperparameter
// prior's mode.
absl::StatusOr<MetricModel> BuildTransferModel(
    const SearchSpace& space, uint64_t seed, const Eigen::MatrixXd& x,
    const Eigen::VectorXd& y, Targets targets, const std::vector<int>* subset,
    bool allow_local, const PriorFit& prior, MetricFits& fits);

}  // namespace hypertune::optimizer::gp_bandit

#endif  // HYPERTUNE_OPTIMIZER_GP_BANDIT_TRANSFER_PRIOR_H_
