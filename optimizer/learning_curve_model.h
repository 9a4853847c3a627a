// Model-based multi-fidelity for ASHA or Hyperband in pause mode
// (EarlyStoppingConfig::promote_by_model): one Gaussian process over
// (parameters, log resource), fitted to every trial's values at the rungs it
// reached (the joint kernel over configuration and resource, as MOBSTER's:
// Klein et al., "Model-based asynchronous hyperparameter and neural
// architecture search", 2020), predicts each configuration's value at
// max_resource. It decides which paused trials go on, with ASHA's ranking
// (ModelPromotions), and which configurations start (ProposeFromCurves):
// where BOHB's model sees one rung, this one reads every curve and aims at
// the final value. With Hyperband, "ASHA" below is the rule's brackets,
// each ranked on its own, and one model reads the curves of them all.
//
// Pure functions; thread-safe.
#ifndef HYPERTUNE_OPTIMIZER_LEARNING_CURVE_MODEL_H_
#define HYPERTUNE_OPTIMIZER_LEARNING_CURVE_MODEL_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <Eigen/Core>

#include "optimizer/early_stopping.h"
#include "optimizer/gp.h"
#include "optimizer/gp_bandit/coordinates.h"
#include "optimizer/search_space.h"
#include "optimizer/suggester.h"

namespace hypertune::optimizer {

// The joint model of a study's learning curves: a GP over (parameters,
// level), the level being log resource scaled onto [0, 1] between the first
// rung and max_resource, fitted to every trial's first value in each [rung,
// next rung) it reached (maximized, standardized, less each level's median
// gain over the level below). Numeric parameters and the level share a
// Matern-5/2 kernel; categorical ones are compared for equality only
// (MakeMixedKernel), so the order their categories are listed in does not
// matter.
class LearningCurveModel {
 public:
  struct Posterior {
    double mean, sd;
  };
  // The model, or none while fewer than MinTrialsAtFidelity(dim + 1)
  // trials have a value at some rung (or the fit fails).
  // REQUIRES: config is valid with rungs; parameters.size() ==
  // study.size(), parameters[i] the assignment of study[i]
  static std::optional<LearningCurveModel> Fit(
      const EarlyStoppingConfig& config, const SearchSpace& space,
      std::span<const TrialCurve> study,
      std::span<const Assignment> parameters);

  // The latent value at max_resource of the configuration `unit` (an
  // encoded assignment), standardized.
  Posterior Final(const Eigen::VectorXd& unit) const;
  // P(final value > bar), the bar being the best final value seen or,
  // before any trial finished, the best a started trial is expected to
  // reach.
  double ChanceToBeatBar(const Eigen::VectorXd& unit) const;
  // log E[max(final - bar, 0)].
  double LogImprovementOverBar(const Eigen::VectorXd& unit) const;
  // Conditions on the configuration `unit` reaching the model's mean at the
  // first rung.
  void AddBelief(const Eigen::VectorXd& unit);
  // Whether some trial reached max_resource (the bar is then a value seen).
  bool finished() const { return finished_; }

 private:
  LearningCurveModel(GaussianProcess gp, gp_bandit::Coordinates coords,
                     double final_offset)
      : gp_(std::move(gp)),
        coords_(std::move(coords)),
        final_offset_(final_offset) {}
  // Models the values less each level's offset (its mean gain).
  GaussianProcess gp_;
  // The parameters' coordinates in gp_ (CurveInput).
  gp_bandit::Coordinates coords_;
  double final_offset_;
  double bar_ = 0;
  bool finished_ = false;
};

// The paused trials to resume now, most promising first, each to its next
// rung (or max_resource). Once a trial reached max_resource: ASHA's
// promotions, less those with under a 5% chance to beat the bar (as Domhan
// et al., IJCAI 2015, end a run whose extrapolated curve is that unlikely to
// win, with a joint model instead of one per curve), plus paused trials
// ASHA passes over that have at least a 25% chance to beat it (a slow
// start). Before, ASHA's promotions ordered by that chance. ASHA's own
// Promotions while there is no model, and when `draining` (no new
// configuration will start): then each rung's best still goes on to
// max_resource.
// Leaves the model it fitted (none when draining) in *fitted if not null,
// for ProposeFromCurves (FidelityHistory::model).
// REQUIRES: as LearningCurveModel::Fit, with promote_by_model
std::vector<Promotion> ModelPromotions(
    const EarlyStoppingConfig& config, const SearchSpace& space,
    std::span<const TrialCurve> study, std::span<const Assignment> parameters,
    bool draining, std::optional<LearningCurveModel>* fitted = nullptr);

// Whether the running trial `trial_id`, which DecideTrial pauses at a rung,
// is the one ModelPromotions would resume first once it is paused: it then
// goes on at once, and its worker keeps training instead of saving a
// checkpoint only to load it again.
// REQUIRES: as ModelPromotions
bool ResumesAtOnce(const EarlyStoppingConfig& config, const SearchSpace& space,
                   std::span<const TrialCurve> study,
                   std::span<const Assignment> parameters, int64_t trial_id);

// GP_BANDIT's proposals for a study with promote_by_model: `request.count`
// configurations, each the one of quasi-random points and of steps around
// the configurations expected to end best, whose final value has the
// largest expected improvement over the bar; running trials without a
// value yet and earlier proposals of the batch count at the model's mean
// on the first rung. The model is request.fidelity's own if it has one, else
// fitted here. None without request.fidelity or while there is no model
// (the caller then proposes as it would without it).
// REQUIRES: ValidateRequest(request).ok()
std::optional<std::vector<Assignment>> ProposeFromCurves(
    const SuggestRequest& request);

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_LEARNING_CURVE_MODEL_H_
