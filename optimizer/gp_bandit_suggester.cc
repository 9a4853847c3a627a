#include "optimizer/gp_bandit_suggester.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "optimizer/cost_model.h"
#include "optimizer/fidelity.h"
#include "optimizer/gp_bandit/acquisition_stack.h"
#include "optimizer/gp_bandit/coordinates.h"
#include "optimizer/gp_bandit/models.h"
#include "optimizer/gp_bandit/pending_region.h"
#include "optimizer/gp_bandit/pick.h"
#include "optimizer/initial_design.h"
#include "optimizer/learning_curve_model.h"
#include "optimizer/metrics.h"
#include "optimizer/sobol.h"
#include "optimizer/splitmix.h"

namespace hypertune::optimizer {

using gp_bandit::AcquisitionStack;
using gp_bandit::Coordinates;
using gp_bandit::CostTerm;
using gp_bandit::EncodedHistory;
using gp_bandit::IncumbentRegion;
using gp_bandit::kMinModelPoints;
using gp_bandit::MetricModel;
using gp_bandit::Models;

namespace {

// The cost exponent of cost-cooled EI for `request` (cost_model.h): from
// the budget left after the initial design, else from the trials left.
double CostExponent(const SuggestRequest& request, int initial) {
  const CostAwareness& cost = request.cost;
  if (cost.budget > 0) {
    double initial_spent = 0;
    for (size_t i = 0;
         i < std::min(request.history.size(), static_cast<size_t>(initial));
         ++i) {
      initial_spent += request.history[i].cost;
    }
    return CostCoolingExponent(cost.budget, cost.spent, initial_spent);
  }
  if (cost.max_trials > 0) {
    if (cost.max_trials <= initial) return 0.0;
    return std::clamp(
        static_cast<double>(cost.max_trials - request.trials_created) /
            static_cast<double>(cost.max_trials - initial),
        0.0, 1.0);
  }
  return 1.0;
}

}  // namespace

std::string_view GpBanditFallbackLabel(GpBanditFallback reason) {
  switch (reason) {
    case GpBanditFallback::kNone:
      return "";
    case GpBanditFallback::kModelFailed:
      return "model_failed";
    case GpBanditFallback::kNoNewPoint:
      return "no_new_point";
    case GpBanditFallback::kSpaceExhausted:
      return "space_exhausted";
  }
  return "";
}

// One Suggest call past validation: the history encoded once, the models
// built at the first point that needs them, and each stage of the loop as
// one method. Lives for one call.
class GpBanditSuggester::Batch {
 public:
  Batch(GpBanditSuggester& owner, const SuggestRequest& request);

  // Whether TPE takes over (options.h, tpe_fallback_above).
  bool DelegatesToTpe() const {
    return owner_.options_.tpe_fallback_above > 0 &&
           history_.completed() > owner_.options_.tpe_fallback_above;
  }
  // Whether the batch's point i comes from the initial design (or, with a
  // transfer prior, from the prior's best guess, which needs the models).
  bool InDesign(int i) const;
  // The initial design's point for the batch's point i.
  Assignment DesignPoint(int i) const;
  // Models -> acquisition stack -> maximize -> pick, for the batch's point
  // i; an untried quasi-random point if the models fail or no new point is
  // found.
  Assignment ModelPoint(int i);
  // Fantasy: `a` becomes a pending trial for the batch's later points.
  void AddPending(const Assignment& a);

 private:
  int64_t Index(int i) const { return request_.trials_created + i; }
  uint64_t PickSeed(int i) const {
    return MixSeeds(request_.seed, static_cast<uint64_t>(Index(i)));
  }
  // Builds the models with the pending trials and this batch's earlier
  // picks as fantasies, and the region the picks made with trials pending
  // search. False if they cannot be built (fallback_detail_ says why).
  bool BuildModels(int i);
  std::optional<CostTerm> Cost() const;
  // The acquisition optimizer's points in [lower, upper], best first.
  std::vector<ScoredPoint> Maximize(const Acquisition& acquisition,
                                    const Eigen::VectorXd& lower,
                                    const Eigen::VectorXd& upper,
                                    uint64_t seed) const;
  // An untried quasi-random point for the batch's point i (the Sobol point
  // itself if none is left), recording `reason` if it is the call's first
  // fallback.
  Assignment Fallback(int i, GpBanditFallback reason);

  GpBanditSuggester& owner_;
  const GpBanditOptions& options_;
  const SuggestRequest& request_;
  const SearchSpace& space_;
  const Coordinates coords_;
  EncodedHistory history_;
  const std::vector<MetricConfig> metrics_;
  const int initial_;
  gp_bandit::ModelInputs inputs_;
  // With one objective and no constraints, a transfer prior's best guess
  // replaces the initial design's first Sobol point (after the centre);
  // the rest of the design stays, so that an unrelated prior is found out
  // (transfer.h).
  bool prior_pick_allowed_ = false;
  // Cost-aware: the log-cost model, once two trials have a cost; without
  // it the search is merely cost-blind.
  std::optional<MetricModel> cost_model_;
  double cost_exponent_ = 0;
  std::optional<Models> models_;
  bool models_failed_ = false;
  std::optional<IncumbentRegion> pending_region_;
  // This batch's points so far, in model coordinates.
  std::vector<Eigen::VectorXd> picks_;
};

GpBanditSuggester::Batch::Batch(GpBanditSuggester& owner,
                                const SuggestRequest& request)
    : owner_(owner),
      options_(owner.options_),
      request_(request),
      space_(*request.space),
      coords_(space_),
      history_(gp_bandit::EncodeHistory(request, coords_)),
      metrics_(MetricsOf(request)),
      initial_(options_.initial_trials > 0
                   ? options_.initial_trials
                   : InitialDesignSize(coords_.dim(),
                                       static_cast<int>(metrics_.size()))),
      inputs_{&space_, &coords_, &history_, &metrics_, request.seed, {}} {
  if (DelegatesToTpe()) return;
  while (owner_.fits_.size() < metrics_.size()) {
    owner_.fits_.emplace_back(options_);
  }
  if (request.priors != nullptr && !request.priors->empty() &&
      coords_.tree.empty()) {
    for (int c = 0; c < history_.num_objectives(); ++c) {
      inputs_.priors.push_back(owner_.priors_.ForObjective(
          space_,
          c == 0 ? request.seed
                 : MixSeeds(request.seed, static_cast<uint64_t>(c)),
          *request.priors, c));
    }
  }
  prior_pick_allowed_ = history_.plain() && !inputs_.priors.empty() &&
                        inputs_.priors[0] != nullptr;
  cost_exponent_ = CostExponent(request, initial_);
  if (history_.costed_x.rows() >= kMinModelPoints && cost_exponent_ > 0) {
    absl::StatusOr<MetricModel> cost = owner_.cost_fits_.Build(
        space_, request.seed, history_.costed_x, history_.log_costs,
        gp_bandit::Targets::kStandardized, nullptr, /*allow_local=*/false);
    if (cost.ok()) cost_model_ = *std::move(cost);
  }
}

bool GpBanditSuggester::Batch::InDesign(int i) const {
  const int64_t trials = static_cast<int64_t>(request_.history.size()) + i;
  const bool prior_pick =
      prior_pick_allowed_ && trials == std::min(1, initial_ - 1);
  return !prior_pick &&
         (trials < initial_ || history_.completed() < kMinModelPoints);
}

Assignment GpBanditSuggester::Batch::DesignPoint(int i) const {
  return gp_bandit::DesignPoint(space_, coords_, request_.seed, Index(i),
                                cost_model_ ? &cost_model_->gp : nullptr,
                                history_.taken);
}

Assignment GpBanditSuggester::Batch::ModelPoint(int i) {
  if (!models_ && (models_failed_ || !BuildModels(i))) {
    return Fallback(i, GpBanditFallback::kModelFailed);
  }
  const uint64_t seed = PickSeed(i);
  const AcquisitionStack stack(*models_, Cost(), options_, seed);
  // A batch's first pick with nothing pending is the sequential one; the
  // picks made with trials pending search the pending region, if any.
  const bool pending = !history_.pending.empty() || i > 0;
  const bool local = pending && pending_region_.has_value();
  const std::vector<ScoredPoint> ranked =
      Maximize(stack.top(), local ? pending_region_->lower : models_->box_lower,
               local ? pending_region_->upper : models_->box_upper, seed);
  if (!pending) {
    pending_region_ =
        gp_bandit::PendingRegion(options_, coords_, *models_, ranked);
  }
  std::optional<Assignment> picked = gp_bandit::PickNew(
      ranked, stack.top(), coords_, space_, models_->incumbent,
      options_.incumbent_pull_tolerance, history_.taken);
  if (picked) return *std::move(picked);
  return Fallback(i, GpBanditFallback::kNoNewPoint);
}

bool GpBanditSuggester::Batch::BuildModels(int i) {
  absl::StatusOr<Models> built =
      gp_bandit::BuildModels(inputs_, options_, owner_.fits_);
  if (!built.ok()) {
    models_failed_ = true;
    if (owner_.fallback_detail_.empty()) {
      owner_.fallback_detail_ = std::string(built.status().message());
    }
    return false;
  }
  models_ = *std::move(built);
  if (!history_.pending.empty() &&
      gp_bandit::MayConfinePendingPicks(options_, coords_, *models_)) {
    // The pick the sequential run would make, before the fantasies.
    const uint64_t seed = PickSeed(i);
    const AcquisitionStack sequential(*models_, Cost(), options_, seed);
    pending_region_ =
        gp_bandit::PendingRegion(options_, coords_, *models_,
                                 Maximize(sequential.top(), models_->box_lower,
                                          models_->box_upper, seed));
  }
  for (const Eigen::VectorXd& p : history_.pending) models_->AddFantasy(p);
  for (const Eigen::VectorXd& p : picks_) models_->AddFantasy(p);
  return true;
}

std::optional<CostTerm> GpBanditSuggester::Batch::Cost() const {
  if (!cost_model_) return std::nullopt;
  return CostTerm{&cost_model_->gp, cost_exponent_, cost_model_->target_scale};
}

std::vector<ScoredPoint> GpBanditSuggester::Batch::Maximize(
    const Acquisition& acquisition, const Eigen::VectorXd& lower,
    const Eigen::VectorXd& upper, uint64_t seed) const {
  const AcquisitionDomain domain{
      coords_.categories, lower, upper,
      [&](Eigen::VectorXd& x) { coords_.Snap(space_, x); }};
  AcquisitionOptimizerOptions search = options_.acquisition_optimizer;
  search.distinct_results = true;
  return MaximizeAcquisition(acquisition, domain, models_->anchors,
                             models_->perturbation_scale, seed, search);
}

Assignment GpBanditSuggester::Batch::Fallback(int i, GpBanditFallback reason) {
  std::optional<Assignment> untried =
      gp_bandit::UntriedPoint(space_, request_.seed, Index(i), history_.taken);
  if (!untried) reason = GpBanditFallback::kSpaceExhausted;
  if (owner_.fallback_ == GpBanditFallback::kNone) owner_.fallback_ = reason;
  if (untried) return *std::move(untried);
  return space_.Decode(
      SobolSequence(coords_.dim(), request_.seed).Point(Index(i)));
}

void GpBanditSuggester::Batch::AddPending(const Assignment& a) {
  history_.taken.insert(a);
  const Eigen::VectorXd x = coords_.FromAssignment(space_, a);
  picks_.push_back(x);
  if (models_) models_->AddFantasy(x);
}

GpBanditSuggester::GpBanditSuggester(GpBanditOptions options)
    : options_(std::move(options)), cost_fits_(options_), priors_(options_) {}

absl::StatusOr<std::vector<Assignment>> GpBanditSuggester::Suggest(
    const SuggestRequest& request) {
  if (absl::Status s = ValidateSobolRequest(request, "GP_BANDIT"); !s.ok()) {
    return s;
  }
  if (request.fidelity != nullptr) return SuggestAtFidelity(request);
  fallback_ = GpBanditFallback::kNone;
  fallback_detail_.clear();
  Batch batch(*this, request);
  if (batch.DelegatesToTpe()) return tpe_.Suggest(request);
  std::vector<Assignment> out;
  for (int i = 0; i < request.count; ++i) {
    // Design point, or models -> acquisition stack -> maximize -> pick;
    // then the point joins the models as a fantasy.
    Assignment a =
        batch.InDesign(i) ? batch.DesignPoint(i) : batch.ModelPoint(i);
    batch.AddPending(a);
    out.push_back(std::move(a));
  }
  return out;
}

absl::StatusOr<std::vector<Assignment>> GpBanditSuggester::SuggestAtFidelity(
    const SuggestRequest& request) {
  if (request.fidelity->rule.promote_by_model) {
    if (std::optional<std::vector<Assignment>> points =
            ProposeFromCurves(request)) {
      return *std::move(points);
    }
  }
  return Suggest(AtOneFidelity(request));
}

}  // namespace hypertune::optimizer
