#include "optimizer/gp_bandit_suggester.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>
#include <utility>

#include "optimizer/cost_model.h"
#include "optimizer/fidelity.h"
#include "optimizer/gp_bandit/acquisition_stack.h"
#include "optimizer/gp_bandit/coordinates.h"
#include "optimizer/gp_bandit/models.h"
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
using gp_bandit::kMinModelPoints;
using gp_bandit::MetricModel;
using gp_bandit::Models;
using gp_bandit::PriorFit;

GpBanditSuggester::GpBanditSuggester(GpBanditOptions options)
    : options_(std::move(options)), cost_fits_(options_), priors_(options_) {}

double GpBanditSuggester::CostExponent(const SuggestRequest& request,
                                       int initial) {
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

absl::StatusOr<std::vector<Assignment>> GpBanditSuggester::Suggest(
    const SuggestRequest& request) {
  if (absl::Status s = ValidateSobolRequest(request, "GP_BANDIT"); !s.ok()) {
    return s;
  }
  if (request.fidelity != nullptr) {
    // Learning-curve studies: the model of all the curves proposes once it
    // has data (learning_curve_model.h); otherwise one fidelity's model.
    if (request.fidelity->rule.promote_by_model) {
      if (std::optional<std::vector<Assignment>> points =
              ProposeFromCurves(request)) {
        return *std::move(points);
      }
    }
    return Suggest(AtOneFidelity(request));
  }
  const SearchSpace& space = *request.space;
  const Coordinates coords(space);
  const int d = coords.dim();
  fallback_reason_.clear();

  // Encode.
  EncodedHistory history = gp_bandit::EncodeHistory(request, coords);
  const int n = history.completed();
  if (options_.tpe_fallback_above > 0 && n > options_.tpe_fallback_above) {
    return tpe_.Suggest(request);
  }
  const std::vector<MetricConfig> metrics = MetricsOf(request);
  while (fits_.size() < metrics.size()) fits_.emplace_back(options_);
  const int initial =
      options_.initial_trials > 0
          ? options_.initial_trials
          : InitialDesignSize(d, static_cast<int>(metrics.size()));
  const int64_t history_size = static_cast<int64_t>(request.history.size());
  gp_bandit::ModelInputs inputs{&space,           &coords,      &history,
                                &metrics, request.seed, {}};
  if (request.priors != nullptr && !request.priors->empty() &&
      coords.tree.empty()) {
    for (int c = 0; c < history.num_objectives(); ++c) {
      inputs.priors.push_back(priors_.ForObjective(
          space,
          c == 0 ? request.seed
                 : MixSeeds(request.seed, static_cast<uint64_t>(c)),
          *request.priors, c));
    }
  }
  // With one objective and no constraints, a transfer prior's best guess
  // replaces the initial design's first Sobol point (after the centre);
  // the rest of the design stays, so that an unrelated prior is found out
  // (transfer.h).
  const bool prior_pick_allowed =
      history.plain() && !inputs.priors.empty() && inputs.priors[0] != nullptr;
  // Cost-aware: the log-cost model, once two trials have a cost; without
  // it the search is merely cost-blind.
  std::optional<MetricModel> cost_model;
  const double cost_exponent = CostExponent(request, initial);
  if (history.costed_x.rows() >= kMinModelPoints && cost_exponent > 0) {
    absl::StatusOr<MetricModel> cost = cost_fits_.Build(
        space, request.seed, history.costed_x, history.log_costs,
        gp_bandit::Targets::kStandardized, nullptr, /*allow_local=*/false);
    if (cost.ok()) cost_model = *std::move(cost);
  }
  auto fallback = [&](int i, const std::string& reason) {
    if (fallback_reason_.empty()) {
      fallback_reason_ = reason;
      std::cerr << "hypertune: GP_BANDIT fell back to quasi-random points: "
                << reason << "\n";
    }
    return space.Decode(
        SobolSequence(d, request.seed).Point(request.trials_created + i));
  };

  auto cost_term = [&]() -> std::optional<CostTerm> {
    if (!cost_model) return std::nullopt;
    return CostTerm{&cost_model->gp, cost_exponent, cost_model->target_scale};
  };
  // The acquisition optimizer's points in [lower, upper], best first.
  auto maximize = [&](const Acquisition& acquisition, const Models& m,
                      const Eigen::VectorXd& lower,
                      const Eigen::VectorXd& upper, uint64_t pick_seed) {
    const AcquisitionDomain domain{
        coords.categories, lower, upper,
        [&](Eigen::VectorXd& x) { coords.Snap(space, x); }};
    AcquisitionOptimizerOptions search = options_.acquisition_optimizer;
    search.distinct_results = true;
    return MaximizeAcquisition(acquisition, domain, m.anchors,
                               m.perturbation_scale, pick_seed, search);
  };
  // Whether the picks made with trials pending may search only the
  // incumbent's region (options.h, pending_region_half_width).
  auto may_follow = [&](const Models& m) {
    return options_.pending_region_half_width > 0 && m.plain &&
           coords.tree.empty() && m.incumbent.size() == d;
  };
  // That region, if the pick made without the pending trials (the best of
  // `sequential`) lies in it: the picks made with them then search only
  // there.
  auto region_to_follow = [&](const Models& m,
                              const std::vector<ScoredPoint>& sequential)
      -> std::optional<gp_bandit::IncumbentRegion> {
    if (!may_follow(m) || sequential.empty()) return std::nullopt;
    gp_bandit::IncumbentRegion region(
        coords, m.incumbent, m.objectives[0].lengthscales, m.box_lower,
        m.box_upper, options_.pending_region_half_width);
    if (!region.Contains(coords, sequential.front().x)) return std::nullopt;
    return region;
  };

  std::vector<Assignment> out;
  std::vector<Eigen::VectorXd> picks;  // This batch's points, model coords.
  std::optional<Models> models;
  std::optional<gp_bandit::IncumbentRegion> pending_region;
  bool models_failed = false;
  for (int i = 0; i < request.count; ++i) {
    const int64_t index = request.trials_created + i;
    const bool prior_pick =
        prior_pick_allowed && history_size + i == std::min(1, initial - 1);
    Assignment a;
    if (!prior_pick && (history_size + i < initial || n < kMinModelPoints)) {
      // Initial design.
      a = gp_bandit::DesignPoint(space, coords, request.seed, index,
                                 cost_model ? &cost_model->gp : nullptr,
                                 history.taken);
    } else if (models_failed) {
      a = fallback(i, fallback_reason_);
    } else {
      // Models, conditioned on the pending trials and this batch so far.
      if (!models) {
        absl::StatusOr<Models> built =
            gp_bandit::BuildModels(inputs, options_, fits_);
        if (built.ok()) {
          models = *std::move(built);
          if (!history.pending.empty() && may_follow(*models)) {
            const uint64_t seed = MixSeeds(request.seed,
                                           static_cast<uint64_t>(index));
            const AcquisitionStack sequential(*models, cost_term(), options_,
                                              seed);
            pending_region = region_to_follow(
                *models, maximize(sequential.top(), *models,
                                  models->box_lower, models->box_upper, seed));
          }
          for (const Eigen::VectorXd& p : history.pending) {
            models->AddFantasy(p);
          }
          for (const Eigen::VectorXd& p : picks) models->AddFantasy(p);
        } else {
          models_failed = true;
          a = fallback(i, std::string(built.status().message()));
        }
      }
      if (models) {
        // Acquisition stack -> maximize -> pick.
        const uint64_t pick_seed =
            MixSeeds(request.seed, static_cast<uint64_t>(index));
        const AcquisitionStack stack(*models, cost_term(), options_,
                                     pick_seed);
        const bool pending = !history.pending.empty() || i > 0;
        const bool local = pending && pending_region.has_value();
        const std::vector<ScoredPoint> ranked = maximize(
            stack.top(), *models,
            local ? pending_region->lower : models->box_lower,
            local ? pending_region->upper : models->box_upper, pick_seed);
        // A batch's first pick is the sequential one.
        if (!pending) pending_region = region_to_follow(*models, ranked);
        std::optional<Assignment> picked = gp_bandit::PickNew(
            ranked, stack.top(), coords, space, models->incumbent,
            options_.incumbent_pull_tolerance, history.taken);
        a = picked ? *std::move(picked)
                   : fallback(i,
                              "no finite, new point maximizes the "
                              "acquisition");
      }
    }
    history.taken.insert(a);
    const Eigen::VectorXd x = coords.FromAssignment(space, a);
    picks.push_back(x);
    if (models) {
      // The batch's later picks are made with this one pending.
      models->AddFantasy(x);
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace hypertune::optimizer
