#include "optimizer/early_stopping.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "optimizer/mo_early_stopping.h"

namespace hypertune::optimizer {
namespace {

using Rule = EarlyStoppingConfig::Rule;
using Status = TrialCurve::Status;

bool IsAsha(const EarlyStoppingConfig& config) {
  return config.rule == Rule::kAsha || config.rule == Rule::kHyperband;
}

bool IsDone(Status status) {
  return status == Status::kFinished || status == Status::kStopping;
}

// Whether `a` is strictly better than `b`.
bool Better(double a, double b, bool maximize) {
  return maximize ? a > b : a < b;
}

// min_trials, 0 resolved to the rule's default.
int MinTrials(const EarlyStoppingConfig& config) {
  if (config.min_trials > 0) return config.min_trials;
  return IsAsha(config) ? 1 : 5;
}

const TrialCurve* Find(std::span<const TrialCurve> study, int64_t id) {
  for (const TrialCurve& curve : study) {
    if (curve.id == id) return &curve;
  }
  return nullptr;
}

// The index of the last finite point, or -1.
int LastFinite(const TrialCurve& curve) {
  for (int i = static_cast<int>(curve.points.size()) - 1; i >= 0; --i) {
    if (std::isfinite(curve.points[i].second)) return i;
  }
  return -1;
}

// The index of the first finite point at a step >= `step`, or -1.
int FirstAtOrPast(const TrialCurve& curve, int64_t step) {
  for (size_t i = 0; i < curve.points.size(); ++i) {
    if (curve.points[i].first >= step &&
        std::isfinite(curve.points[i].second)) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// The value at quantile q in [0, 1] of `values`, linearly interpolated
// between order statistics (numpy's default). REQUIRES: values non-empty.
double Quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] +
         (pos - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

std::string Num(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.4g", x);
  return buffer;
}

// `x` as the shortest decimal that reads back as x: what the user wrote, in
// an error about it (%.4g would show 1000001 as 1e+06).
std::string Exact(double x) {
  char buffer[32];
  if (std::abs(x) < 1e15 && x == std::floor(x)) {  // integral: all its digits
    std::snprintf(buffer, sizeof(buffer), "%.0f", x);
    return buffer;
  }
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, x);
    if (std::strtod(buffer, nullptr) == x) break;
  }
  return buffer;
}

absl::Status Invalid(const char* field, const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("early_stopping.", field, ": ", problem));
}

Decision PercentileDecision(const EarlyStoppingConfig& config,
                            std::span<const TrialCurve> study,
                            const TrialCurve& trial) {
  const int last = LastFinite(trial);
  if (last < 0) return {};
  const int64_t step = trial.points[last].first;
  if (step < config.grace_steps) return {};
  double best = trial.points[last].second;
  for (const auto& [s, v] : trial.points) {
    if (s <= step && std::isfinite(v) && Better(v, best, config.maximize)) {
      best = v;
    }
  }
  // The running averages at `step` of the finished trials that reached it.
  std::vector<double> averages;
  for (const TrialCurve& other : study) {
    if (other.id == trial.id || !IsDone(other.status)) continue;
    if (FirstAtOrPast(other, step) < 0) continue;
    double sum = 0.0;
    int count = 0;
    for (const auto& [s, v] : other.points) {
      if (s <= step && std::isfinite(v)) {
        sum += v;
        ++count;
      }
    }
    if (count > 0) averages.push_back(sum / count);
  }
  const int n = static_cast<int>(averages.size());
  if (n < MinTrials(config)) return {};
  const bool median = config.rule == Rule::kMedian;
  const double kept = (median ? 50.0 : config.percentile) / 100.0;
  // The cut the best `kept` share reaches: a high quantile when maximizing.
  const double cut =
      Quantile(std::move(averages), config.maximize ? 1.0 - kept : kept);
  if (!Better(cut, best, config.maximize)) return {};
  const std::string what =
      median ? absl::StrCat("median ", Num(cut))
             : absl::StrCat("the top-", Num(config.percentile), "% cut ",
                            Num(cut));
  return {Action::kStop,
          absl::StrCat(median ? "median" : "percentile", ": best ", Num(best),
                       " at step ", step, " is worse than ", what, " of ", n,
                       " finished trials")};
}

// A study as the multi-objective rules read it: each curve's points are the
// measurements with every objective finite (value: the first objective),
// and vectors[c][i] the maximized objectives of curves[c].points[i].
struct ObjectiveView {
  std::vector<TrialCurve> curves;
  std::vector<std::vector<Eigen::VectorXd>> vectors;
};

ObjectiveView ViewObjectives(const EarlyStoppingConfig& config,
                             std::span<const TrialCurve> study) {
  const size_t m = config.objectives_maximize.size();
  ObjectiveView view;
  for (const TrialCurve& curve : study) {
    TrialCurve kept;
    kept.id = curve.id;
    kept.status = curve.status;
    std::vector<Eigen::VectorXd> vectors;
    for (const TrialCurve::Metrics& point : curve.metrics) {
      if (point.objectives.size() != m) continue;
      Eigen::VectorXd y(m);
      bool finite = true;
      for (size_t j = 0; j < m; ++j) {
        const double v = point.objectives[j];
        finite = finite && std::isfinite(v);
        y[j] = config.objectives_maximize[j] ? v : -v;
      }
      if (!finite) continue;
      kept.points.emplace_back(point.step, point.objectives[0]);
      vectors.push_back(std::move(y));
    }
    view.curves.push_back(std::move(kept));
    view.vectors.push_back(std::move(vectors));
  }
  return view;
}

struct RungEntry {
  int64_t id;
  double value;
  const TrialCurve* curve;
  // Several objectives: the place in the rung's order and the front.
  int rank = 0;
  int front = 0;
};

// The trials of `bracket` that reached `rung`, best first (ties to the
// smaller id), with their value at the rung. With `vectors` (parallel to
// `study`, ObjectiveView's), in the rung's multi-objective order instead.
std::vector<RungEntry> RungStandings(
    const EarlyStoppingConfig& config, std::span<const TrialCurve> study,
    int bracket, int64_t rung,
    const std::vector<std::vector<Eigen::VectorXd>>* vectors = nullptr) {
  std::vector<RungEntry> entries;
  std::vector<const Eigen::VectorXd*> ys;
  for (size_t c = 0; c < study.size(); ++c) {
    const TrialCurve& curve = study[c];
    if (BracketOf(config, curve.id) != bracket) continue;
    const int i = FirstAtOrPast(curve, rung);
    if (i < 0) continue;
    entries.push_back({curve.id, curve.points[i].second, &curve});
    if (vectors != nullptr) ys.push_back(&(*vectors)[c][i]);
  }
  if (vectors == nullptr) {
    std::sort(entries.begin(), entries.end(),
              [&](const RungEntry& a, const RungEntry& b) {
                if (a.value != b.value) {
                  return Better(a.value, b.value, config.maximize);
                }
                return a.id < b.id;
              });
    for (size_t k = 0; k < entries.size(); ++k) {
      entries[k].rank = static_cast<int>(k);
    }
    return entries;
  }
  // Rows by ascending id, so that OrderRung's ties go to the smaller id.
  std::vector<size_t> by_id(entries.size());
  for (size_t k = 0; k < by_id.size(); ++k) by_id[k] = k;
  std::sort(by_id.begin(), by_id.end(),
            [&](size_t a, size_t b) { return entries[a].id < entries[b].id; });
  Eigen::MatrixXd y(
      static_cast<Eigen::Index>(entries.size()),
      static_cast<Eigen::Index>(config.objectives_maximize.size()));
  for (size_t k = 0; k < by_id.size(); ++k) {
    y.row(static_cast<Eigen::Index>(k)) = ys[by_id[k]]->transpose();
  }
  std::vector<int> fronts;
  const std::vector<int> order =
      OrderRung(y,
                config.multi_objective ==
                        EarlyStoppingConfig::MultiObjective::kHypervolume
                    ? FrontOrder::kHypervolume
                    : FrontOrder::kEpsilonNet,
                &fronts);
  std::vector<RungEntry> ordered;
  for (size_t k = 0; k < order.size(); ++k) {
    RungEntry entry = entries[by_id[order[k]]];
    entry.rank = static_cast<int>(k);
    entry.front = fronts[order[k]];
    ordered.push_back(entry);
  }
  return ordered;
}

int TopCount(const EarlyStoppingConfig& config, size_t n, bool at_least_one) {
  const int top = static_cast<int>(
      std::floor(static_cast<double>(n) / config.reduction_factor + 1e-9));
  return std::min(static_cast<int>(n), at_least_one ? std::max(1, top) : top);
}

Decision AshaDecision(
    const EarlyStoppingConfig& config, std::span<const TrialCurve> study,
    const TrialCurve& trial,
    const std::vector<std::vector<Eigen::VectorXd>>* vectors) {
  const int last = LastFinite(trial);
  if (last < 0) return {};
  const int64_t step = trial.points[last].first;
  // The highest rung this point is the first to reach.
  int64_t previous = std::numeric_limits<int64_t>::min();
  for (int i = 0; i < last; ++i) {
    if (std::isfinite(trial.points[i].second)) {
      previous = std::max(previous, trial.points[i].first);
    }
  }
  const int bracket = BracketOf(config, trial.id);
  std::optional<int64_t> rung;
  for (int64_t r : RungResources(config, bracket)) {
    if (previous < r && r <= step) rung = r;
  }
  if (!rung) return {};
  const std::vector<RungEntry> standings =
      RungStandings(config, study, bracket, *rung, vectors);
  const size_t n = standings.size();
  size_t rank = 0;
  while (rank < n && standings[rank].id != trial.id) ++rank;
  assert(rank < n);
  const std::string name = config.rule == Rule::kAsha
                               ? "asha"
                               : absl::StrCat("hyperband[", bracket, "]");
  const std::string where =
      vectors == nullptr
          ? absl::StrCat(name, ": ", Num(standings[rank].value), " at rung ",
                         *rung, " ranks ", rank + 1, " of ", n)
          : absl::StrCat(
                name, ": at rung ", *rung, " ranks ", rank + 1, " of ", n,
                " (front ", standings[rank].front + 1, ", ",
                config.multi_objective ==
                        EarlyStoppingConfig::MultiObjective::kHypervolume
                    ? "hypervolume contribution"
                    : "epsilon-net",
                " within it)");
  if (config.promote_by_model) {
    return {Action::kPause,
            absl::StrCat(where,
                         "; paused: the learning-curve model decides "
                         "whether it goes on")};
  }
  const int top = TopCount(config, n, !config.pause_at_rungs);
  if (static_cast<int>(rank) < top) {
    return {Action::kContinue,
            absl::StrCat(where, "; the top ", top, " go on")};
  }
  if (config.pause_at_rungs) {
    return {Action::kPause,
            absl::StrCat(where, "; paused until in the top 1/",
                         Num(config.reduction_factor), " (now ", top, ")")};
  }
  if (static_cast<int>(n) < MinTrials(config)) {
    return {Action::kContinue,
            absl::StrCat(where, "; fewer than ", MinTrials(config),
                         " trials reached it")};
  }
  return {Action::kStop, absl::StrCat(where, "; only the top ", top, " go on")};
}

// The median or percentile rule on every objective: objective j judged on
// its own (its direction, its finished trials' running averages); the trial
// is stopped only when every objective stops it.
Decision EveryObjectiveDecision(const EarlyStoppingConfig& config,
                                std::span<const TrialCurve> study,
                                const TrialCurve& trial) {
  std::vector<std::string> reasons;
  for (size_t j = 0; j < config.objectives_maximize.size(); ++j) {
    EarlyStoppingConfig one = config;
    one.maximize = config.objectives_maximize[j];
    std::vector<TrialCurve> curves;
    const TrialCurve* mine = nullptr;
    for (const TrialCurve& curve : study) {
      TrialCurve c;
      c.id = curve.id;
      c.status = curve.status;
      for (const TrialCurve::Metrics& point : curve.metrics) {
        if (j < point.objectives.size()) {
          c.points.emplace_back(point.step, point.objectives[j]);
        }
      }
      curves.push_back(std::move(c));
    }
    for (const TrialCurve& c : curves) {
      if (c.id == trial.id) mine = &c;
    }
    const Decision d = PercentileDecision(one, curves, *mine);
    if (d.action != Action::kStop) return {};
    reasons.push_back(absl::StrCat("objective ", j + 1, ": ", d.reason));
  }
  return {Action::kStop, absl::StrCat("worse than the cut on every objective; ",
                                      absl::StrJoin(reasons, "; "))};
}

// A stop when a constraint's forecast at max_resource misses its bound.
std::optional<Decision> ConstraintDecision(const EarlyStoppingConfig& config,
                                           const TrialCurve& trial) {
  for (size_t c = 0; c < config.constraints.size(); ++c) {
    std::vector<std::pair<int64_t, double>> points;
    for (const TrialCurve::Metrics& point : trial.metrics) {
      if (c < point.constraints.size()) {
        points.emplace_back(point.step, point.constraints[c]);
      }
    }
    const EarlyStoppingConfig::Bound& bound = config.constraints[c];
    const std::optional<ConstraintForecast> forecast = ForecastConstraint(
        points, config.max_resource, bound.lower, bound.upper);
    if (!forecast || !forecast->misses) continue;
    const std::string name =
        bound.name.empty() ? absl::StrCat("constraint ", c + 1) : bound.name;
    return Decision{
        Action::kStop,
        absl::StrCat("constraint: ", name, " is predicted to end at ",
                     Num(forecast->linear), " +- ",
                     Num(forecast->linear_margin), " (linear) or ",
                     Num(forecast->log_linear), " +- ",
                     Num(forecast->log_linear_margin), " (log-linear) at step ",
                     config.max_resource, ", outside [", Num(bound.lower), ", ",
                     Num(bound.upper), "]")};
  }
  return std::nullopt;
}

}  // namespace

bool JudgesSeveralObjectives(const EarlyStoppingConfig& config) {
  return config.objectives_maximize.size() > 1 &&
         config.multi_objective !=
             EarlyStoppingConfig::MultiObjective::kFirstObjective;
}

absl::Status ValidateEarlyStoppingConfig(const EarlyStoppingConfig& config) {
  if (!config.objectives_maximize.empty() &&
      config.objectives_maximize.front() != config.maximize) {
    return Invalid("multi_objective",
                   "the first objective's direction must be `maximize`'s");
  }
  if (config.stop_on_constraints) {
    if (config.rule == Rule::kNone) {
      return Invalid("stop_on_constraints",
                     "needs a rule (MEDIAN, PERCENTILE, ASHA or HYPERBAND)");
    }
    if (config.constraints.empty()) {
      return Invalid("stop_on_constraints",
                     "the study has no CONSTRAINT metric to forecast");
    }
    if (config.max_resource < 1 ||
        config.max_resource > EarlyStoppingConfig::kMaxResource) {
      return Invalid("max_resource",
                     absl::StrCat("stop_on_constraints forecasts at the final "
                                  "step: must be in [1, 2^53], got ",
                                  config.max_resource));
    }
  }
  if (config.promote_by_model && JudgesSeveralObjectives(config)) {
    return Invalid("multi_objective",
                   "promote_by_model's learning-curve model reads one "
                   "objective: set FIRST_OBJECTIVE");
  }
  switch (config.rule) {
    case Rule::kNone:
      return absl::OkStatus();
    case Rule::kMedian:
    case Rule::kPercentile:
      if (config.grace_steps < 0) {
        return Invalid("grace_steps",
                       absl::StrCat("must be >= 0, got ", config.grace_steps));
      }
      if (config.min_trials < 0) {
        return Invalid(
            "min_trials",
            absl::StrCat("must be >= 0 (0: the rule's default), got ",
                         config.min_trials));
      }
      if (config.rule == Rule::kPercentile &&
          !(config.percentile > 0.0 && config.percentile < 100.0)) {
        return Invalid("percentile", absl::StrCat("must be in (0, 100), got ",
                                                  Num(config.percentile)));
      }
      if (config.pause_at_rungs) {
        return Invalid("pause_at_rungs",
                       "only for the ASHA and HYPERBAND rules");
      }
      if (config.promote_by_model) {
        return Invalid("promote_by_model",
                       "only for the ASHA and HYPERBAND rules");
      }
      return absl::OkStatus();
    case Rule::kAsha:
    case Rule::kHyperband:
      break;
  }
  if (config.min_resource < 1) {
    return Invalid("min_resource",
                   absl::StrCat("must be >= 1, got ", config.min_resource));
  }
  if (config.max_resource > EarlyStoppingConfig::kMaxResource) {
    return Invalid(
        "max_resource",
        absl::StrCat("must be <= 2^53 (", EarlyStoppingConfig::kMaxResource,
                     "), got ", config.max_resource));
  }
  if (config.max_resource < config.min_resource) {
    return Invalid("max_resource", absl::StrCat("must be >= min_resource (",
                                                config.min_resource, "), got ",
                                                config.max_resource));
  }
  if (!(config.reduction_factor >= 2.0 &&
        config.reduction_factor <= EarlyStoppingConfig::kMaxReductionFactor)) {
    return Invalid("reduction_factor",
                   absl::StrCat("must be in [2, ",
                                Exact(EarlyStoppingConfig::kMaxReductionFactor),
                                "], got ", Exact(config.reduction_factor)));
  }
  if (config.min_trials < 0) {
    return Invalid("min_trials",
                   absl::StrCat("must be >= 0 (0: the rule's default), got ",
                                config.min_trials));
  }
  if (config.promote_by_model && !config.pause_at_rungs) {
    return Invalid("promote_by_model",
                   "needs pause_at_rungs: the model resumes paused trials");
  }
  if (config.rule == Rule::kHyperband) {
    const int most = MaxBrackets(config);
    if (config.brackets < 0 || config.brackets > most) {
      return Invalid("brackets",
                     absl::StrCat("must be in [0, ", most,
                                  "] (0 = all; floor(log_eta(max_resource / "
                                  "min_resource)) + 1 = ",
                                  most, "), got ", config.brackets));
    }
  }
  return absl::OkStatus();
}

int MaxBrackets(const EarlyStoppingConfig& config) {
  if (!IsAsha(config)) return 1;
  // In doubles: with the validated bounds r * eta stays finite and exact
  // enough, where an integer product could overflow.
  int s = 0;
  const double max = static_cast<double>(config.max_resource);
  double r = static_cast<double>(config.min_resource);
  while (std::round(r * config.reduction_factor) <= max) {
    r *= config.reduction_factor;
    ++s;
  }
  return s + 1;
}

int NumBrackets(const EarlyStoppingConfig& config) {
  if (config.rule != Rule::kHyperband) return 1;
  return config.brackets == 0 ? MaxBrackets(config) : config.brackets;
}

int BracketOf(const EarlyStoppingConfig& config, int64_t trial_id) {
  const int brackets = NumBrackets(config);
  if (brackets <= 1) return 0;
  // Hyperband's allocation n_s = ceil((s_max + 1) eta^s / (s + 1)) for
  // bracket b = s_max - s, as shares of the brackets in use.
  const int s_max = MaxBrackets(config) - 1;
  std::vector<double> weights(brackets);
  double total = 0.0;
  for (int b = 0; b < brackets; ++b) {
    const int s = s_max - b;
    weights[b] =
        std::ceil((s_max + 1) * std::pow(config.reduction_factor, s) / (s + 1));
    total += weights[b];
  }
  // A Weyl sequence (golden-ratio steps) over [0, 1): deterministic,
  // equidistributed, and consecutive ids land far apart, so the brackets
  // interleave.
  const double u = std::fmod(
      static_cast<double>(static_cast<uint64_t>(trial_id) % (1ULL << 40)) *
          0.6180339887498949,
      1.0);
  double cumulative = 0.0;
  for (int b = 0; b < brackets; ++b) {
    cumulative += weights[b] / total;
    if (u < cumulative) return b;
  }
  return brackets - 1;
}

std::vector<int64_t> RungResources(const EarlyStoppingConfig& config,
                                   int bracket) {
  std::vector<int64_t> rungs;
  if (!IsAsha(config)) return rungs;
  const double max = static_cast<double>(config.max_resource);
  double r = static_cast<double>(config.min_resource) *
             std::pow(config.reduction_factor, bracket);
  // Compared as doubles: r may pass INT64_MAX before the loop ends.
  while (std::round(r) < max) {
    rungs.push_back(std::llround(r));
    r *= config.reduction_factor;
  }
  return rungs;
}

Decision DecideTrial(const EarlyStoppingConfig& config,
                     std::span<const TrialCurve> study, int64_t trial_id) {
  const TrialCurve* trial = Find(study, trial_id);
  if (trial == nullptr) return {};
  if (config.stop_on_constraints) {
    if (std::optional<Decision> d = ConstraintDecision(config, *trial)) {
      return *d;
    }
  }
  const bool several = JudgesSeveralObjectives(config);
  switch (config.rule) {
    case Rule::kNone:
      return {};
    case Rule::kMedian:
    case Rule::kPercentile:
      return several ? EveryObjectiveDecision(config, study, *trial)
                     : PercentileDecision(config, study, *trial);
    case Rule::kAsha:
    case Rule::kHyperband:
      if (several) {
        const ObjectiveView view = ViewObjectives(config, study);
        return AshaDecision(config, view.curves, *Find(view.curves, trial_id),
                            &view.vectors);
      }
      return AshaDecision(config, study, *trial, nullptr);
  }
  return {};
}

std::optional<Promotion> PromotionOf(const EarlyStoppingConfig& config,
                                     const TrialCurve& curve) {
  const int last = LastFinite(curve);
  if (curve.status != Status::kPaused || last < 0) return std::nullopt;
  const int64_t step = curve.points[last].first;
  const std::vector<int64_t> rungs =
      RungResources(config, BracketOf(config, curve.id));
  // The highest rung of its bracket at or below its last step.
  std::optional<Promotion> promotion;
  for (size_t k = 0; k < rungs.size() && rungs[k] <= step; ++k) {
    const int64_t next =
        k + 1 < rungs.size() ? rungs[k + 1] : config.max_resource;
    promotion = Promotion{curve.id, rungs[k], next};
  }
  return promotion;
}

std::vector<Promotion> Promotions(const EarlyStoppingConfig& config,
                                  std::span<const TrialCurve> study,
                                  bool draining) {
  std::vector<Promotion> promotions;
  if (!IsAsha(config) || !config.pause_at_rungs) return promotions;
  struct Candidate {
    Promotion promotion;
    double value;
    int rank;
  };
  const bool several = JudgesSeveralObjectives(config);
  ObjectiveView view;
  if (several) {
    view = ViewObjectives(config, study);
    study = view.curves;
  }
  std::vector<Candidate> candidates;
  for (int bracket = 0; bracket < NumBrackets(config); ++bracket) {
    const std::vector<int64_t> rungs = RungResources(config, bracket);
    for (size_t k = 0; k < rungs.size(); ++k) {
      const std::vector<RungEntry> standings = RungStandings(
          config, study, bracket, rungs[k], several ? &view.vectors : nullptr);
      const int top = TopCount(config, standings.size(), draining);
      for (int i = 0; i < top; ++i) {
        const TrialCurve& curve = *standings[i].curve;
        if (curve.status != Status::kPaused) continue;
        const std::optional<Promotion> p = PromotionOf(config, curve);
        if (!p || p->rung != rungs[k]) continue;
        candidates.push_back({*p, standings[i].value, standings[i].rank});
      }
    }
  }
  std::sort(candidates.begin(), candidates.end(),
            [&](const Candidate& a, const Candidate& b) {
              if (a.promotion.rung != b.promotion.rung) {
                return a.promotion.rung > b.promotion.rung;
              }
              if (several && a.rank != b.rank) return a.rank < b.rank;
              if (!several && a.value != b.value) {
                return Better(a.value, b.value, config.maximize);
              }
              return a.promotion.trial_id < b.promotion.trial_id;
            });
  for (const Candidate& c : candidates) promotions.push_back(c.promotion);
  return promotions;
}

std::vector<int64_t> UnpromotableTrials(const EarlyStoppingConfig& config,
                                        std::span<const TrialCurve> study) {
  const std::vector<Promotion> promotions =
      Promotions(config, study, /*draining=*/true);
  std::vector<int64_t> ids;
  for (const TrialCurve& curve : study) {
    if (curve.status != Status::kPaused) continue;
    const bool promotable =
        std::any_of(promotions.begin(), promotions.end(),
                    [&](const Promotion& p) { return p.trial_id == curve.id; });
    if (!promotable) ids.push_back(curve.id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<std::pair<int64_t, double>> HighestRungObservations(
    const EarlyStoppingConfig& config, std::span<const TrialCurve> study,
    int min_points, int64_t* resource) {
  min_points = std::max(min_points, 1);
  std::vector<std::pair<int64_t, double>> observations;
  if (resource != nullptr) *resource = 0;
  if (!IsAsha(config)) {
    for (const TrialCurve& curve : study) {
      const int last = LastFinite(curve);
      if (IsDone(curve.status) && last >= 0) {
        observations.emplace_back(curve.id, curve.points[last].second);
      }
    }
    if (static_cast<int>(observations.size()) < min_points) return {};
    if (resource != nullptr) *resource = config.max_resource;
    std::sort(observations.begin(), observations.end());
    return observations;
  }
  std::vector<int64_t> resources = {config.max_resource};
  for (int bracket = 0; bracket < NumBrackets(config); ++bracket) {
    for (int64_t r : RungResources(config, bracket)) resources.push_back(r);
  }
  std::sort(resources.begin(), resources.end(), std::greater<>());
  resources.erase(std::unique(resources.begin(), resources.end()),
                  resources.end());
  for (int64_t r : resources) {
    observations.clear();
    for (const TrialCurve& curve : study) {
      const int i = FirstAtOrPast(curve, r);
      if (i >= 0) observations.emplace_back(curve.id, curve.points[i].second);
    }
    if (static_cast<int>(observations.size()) >= min_points) {
      if (resource != nullptr) *resource = r;
      std::sort(observations.begin(), observations.end());
      return observations;
    }
  }
  return {};
}

}  // namespace hypertune::optimizer
