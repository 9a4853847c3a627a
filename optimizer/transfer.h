// Transfer from earlier studies (SuggestRequest::priors): their completed
// trials inform this study's model as a prior mean, never as its own data.
//
// As OSS Vizier's stacked residual GPs (Golovin et al., "Google Vizier",
// KDD 2017, section 3.3), a GP fitted on the earlier studies' trials gives
// a prediction m(x), and this study's GP models what is left:
//   f(x) = weight (m(x) - mean of m over own trials) + GP(x),
// the level being the GP's constant mean. The GP keeps the hyperparameters
// it has without a prior, so that at weight 0 it is that model exactly.
// Unlike Vizier, the weight is not fixed at 1: it is the posterior mean of
// a Bayesian linear regression of this study's targets on m (prior
// weight ~ N(1, 1), unit residual variance, as the targets are
// standardized): with no own data the prior is taken as it is; as own
// trials accrue, the weight settles where they put it, near 1 for a
// related study and towards 0 for an unrelated one, whose prior then
// fades out (Rasmussen and Williams, section 2.7, treat such explicit
// basis functions exactly). Where own trials lie, the residual GP
// overrides the prior either way.
#ifndef HYPERTUNE_OPTIMIZER_TRANSFER_H_
#define HYPERTUNE_OPTIMIZER_TRANSFER_H_

#include <vector>

#include <Eigen/Core>

#include "optimizer/gp.h"

namespace hypertune::optimizer {

struct PriorWeight {
  double weight = 1.0;
  double offset = 0.0;
};

// The weight and offset for own targets t at whose points the prior
// predicts m: weight = (1 + sum m~ t~) / (1 + sum m~^2) (m~, t~ centred),
// floored at 0; offset = -weight mean(m), centring the prior on the own
// trials. No own data: {1, 0}.
// REQUIRES: prior_at_own.size() == own_targets.size()
PriorWeight FitPriorWeight(const Eigen::VectorXd& prior_at_own,
                           const Eigen::VectorXd& own_targets);

// offset + weight m(x), m the posterior mean of a GP fitted on the earlier
// studies' trials, over the coordinates they share with this study (the
// others read as 0 on both sides, so the prior ignores them).
class TransferMean final : public MeanFunction {
 public:
  // REQUIRES: shared.size() == the model's dimension
  TransferMean(GaussianProcess prior, std::vector<bool> shared,
               PriorWeight weight);

  double Value(const Eigen::VectorXd& x, Eigen::VectorXd* grad) const override;
  Eigen::VectorXd Values(const Eigen::MatrixXd& xs) const override;

  // The same prior with another weight.
  TransferMean WithWeight(PriorWeight weight) const {
    return TransferMean(prior_, shared_, weight);
  }
  // m itself (weight 1, offset 0) at each row of xs.
  Eigen::VectorXd Unweighted(const Eigen::MatrixXd& xs) const;
  const PriorWeight& weight() const { return weight_; }

  // xs with the coordinates not shared set to 0.
  static Eigen::MatrixXd Project(const std::vector<bool>& shared,
                                 Eigen::MatrixXd xs);

 private:
  GaussianProcess prior_;
  std::vector<bool> shared_;
  PriorWeight weight_;
};

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_TRANSFER_H_
