#include "optimizer/suggester.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "optimizer/gp_bandit_suggester.h"
#include "optimizer/grid_suggester.h"
#include "optimizer/quasi_random_suggester.h"
#include "optimizer/random_suggester.h"
#include "optimizer/sobol.h"
#include "optimizer/tpe_suggester.h"

namespace hypertune::optimizer {
namespace {

constexpr Algorithm kAlgorithms[] = {
    Algorithm::kRandom, Algorithm::kQuasiRandom, Algorithm::kGpBandit,
    Algorithm::kTpe, Algorithm::kGrid};

}  // namespace

std::unique_ptr<Suggester> MakeSuggester(Algorithm algorithm,
                                         FitRunner background_fits) {
  switch (algorithm) {
    case Algorithm::kRandom:
      return std::make_unique<RandomSuggester>();
    case Algorithm::kQuasiRandom:
      return std::make_unique<QuasiRandomSuggester>();
    case Algorithm::kGpBandit: {
      GpBanditOptions options;
      options.background_fits = std::move(background_fits);
      return std::make_unique<GpBanditSuggester>(std::move(options));
    }
    case Algorithm::kTpe:
      return std::make_unique<TpeSuggester>();
    case Algorithm::kGrid:
      return std::make_unique<GridSuggester>();
  }
  return std::make_unique<RandomSuggester>();
}

namespace {

// The checks of SuggestRequest::cost and ::priors.
absl::Status ValidateCostAndPriors(const SuggestRequest& request) {
  const CostAwareness& cost = request.cost;
  if (!(std::isfinite(cost.budget) && cost.budget >= 0) ||
      !(std::isfinite(cost.spent) && cost.spent >= 0) || cost.max_trials < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cost: budget, spent and max_trials must be finite and not negative, "
        "got ",
        cost.budget, ", ", cost.spent, ", ", cost.max_trials));
  }
  for (size_t i = 0; i < request.history.size(); ++i) {
    const double c = request.history[i].cost;
    if (!(std::isfinite(c) && c >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "history[", i, "].cost: must be finite and not negative, got ", c));
    }
  }
  if (request.priors == nullptr) return absl::OkStatus();
  const size_t dim = request.space->parameters().size();
  for (size_t p = 0; p < request.priors->size(); ++p) {
    const PriorStudy& prior = (*request.priors)[p];
    if (prior.shared.size() != dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("priors[", p, "].shared: ", prior.shared.size(),
                       " entries for ", dim, " parameters"));
    }
    for (size_t i = 0; i < prior.trials.size(); ++i) {
      const Observation& o = prior.trials[i];
      if (o.outcome != Outcome::kCompleted || o.values.empty() ||
          std::any_of(o.values.begin(), o.values.end(),
                      [](double v) { return std::isnan(v); })) {
        return absl::InvalidArgumentError(
            absl::StrCat("priors[", p, "].trials[", i,
                         "]: must be a completed trial with values, none NaN"));
      }
      if (absl::Status s = request.space->Validate(o.x); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("priors[", p, "].trials[", i, "]: ", s.message()));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRequest(const SuggestRequest& request) {
  if (request.space == nullptr) {
    return absl::InvalidArgumentError("space: no search space given");
  }
  if (request.count < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("count: must be at least 1, got ", request.count));
  }
  if (request.trials_created < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trials_created: must not be negative, got ", request.trials_created));
  }
  for (size_t i = 0; i < request.history.size(); ++i) {
    if (absl::Status s = request.space->Validate(request.history[i].x);
        !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("history[", i, "]: ", s.message()));
    }
  }
  if (absl::Status s = ValidateCostAndPriors(request); !s.ok()) return s;
  bool has_objective = request.metrics.empty();
  for (size_t j = 0; j < request.metrics.size(); ++j) {
    const MetricConfig& m = request.metrics[j];
    if (m.role == MetricRole::kObjective) {
      has_objective = true;
    } else if (!(m.lower < m.upper)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics[", j, "]: constraint bounds must satisfy ",
                       "lower < upper, got [", m.lower, ", ", m.upper, "]"));
    }
  }
  if (!has_objective) {
    return absl::InvalidArgumentError("metrics: no objective among them");
  }
  for (size_t i = 0; i < request.history.size(); ++i) {
    const Observation& o = request.history[i];
    if (o.outcome != Outcome::kCompleted) continue;
    const size_t metrics = std::max<size_t>(request.metrics.size(), 1);
    if (o.values.size() != metrics) {
      return absl::InvalidArgumentError(
          absl::StrCat("history[", i, "].values: ", o.values.size(),
                       " values for ", metrics, " metrics"));
    }
    for (size_t j = 0; j < o.values.size(); ++j) {
      if (std::isnan(o.values[j])) {
        return absl::InvalidArgumentError(
            absl::StrCat("history[", i, "].values[", j, "]: NaN"));
      }
    }
  }
  return absl::OkStatus();
}

std::string_view AlgorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kRandom:
      return "RANDOM";
    case Algorithm::kQuasiRandom:
      return "QUASI_RANDOM";
    case Algorithm::kGpBandit:
      return "GP_BANDIT";
    case Algorithm::kTpe:
      return "TPE";
    case Algorithm::kGrid:
      return "GRID";
  }
  return "UNKNOWN";
}

absl::StatusOr<Algorithm> ParseAlgorithm(std::string_view name) {
  for (Algorithm a : kAlgorithms) {
    if (name == AlgorithmName(a)) return a;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "algorithm: unknown \"", std::string(name), "\", expected one of ",
      absl::StrJoin(kAlgorithms, ", ", [](std::string* out, Algorithm a) {
        out->append(AlgorithmName(a));
      })));
}

absl::Status ValidateSobolRequest(const SuggestRequest& request,
                                  const std::string& algorithm) {
  if (absl::Status s = ValidateRequest(request); !s.ok()) return s;
  if (request.space->dim() > SobolSequence::kMaxDimension) {
    return absl::InvalidArgumentError(absl::StrCat(
        algorithm, " supports at most ", SobolSequence::kMaxDimension,
        " parameters, the search space has ", request.space->dim()));
  }
  constexpr int64_t kMaxIndex = (int64_t{1} << SobolSequence::kBits) - 1;
  if (request.trials_created > kMaxIndex - request.count) {
    return absl::InvalidArgumentError(
        absl::StrCat("trials_created: ", request.trials_created,
                     " is past the end of the Sobol sequence"));
  }
  return absl::OkStatus();
}

}  // namespace hypertune::optimizer
