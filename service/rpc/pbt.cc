#include "service/rpc/pbt.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/study_metrics.h"
#include "optimizer/pbt.h"
#include "optimizer/splitmix.h"
#include "service/rpc/attempts.h"
#include "service/rpc/conversion.h"

namespace hypertune::service {
namespace {

namespace opt = ::hypertune::optimizer;

constexpr int kMaxPopulation = 1000;
constexpr int kMaxFactors = 16;

opt::PbtOptions ToPbtOptions(const v1::PbtSpec& pbt) {
  opt::PbtOptions options;
  if (pbt.quantile_fraction() > 0) {
    options.quantile_fraction = pbt.quantile_fraction();
  }
  if (pbt.has_resample_probability()) {
    options.resample_probability = pbt.resample_probability();
  }
  if (pbt.perturbation_factors_size() > 0) {
    options.perturbation_factors.assign(pbt.perturbation_factors().begin(),
                                        pbt.perturbation_factors().end());
  }
  options.min_ready_members = pbt.min_ready_members() > 0
                                  ? pbt.min_ready_members()
                                  : std::max(2, pbt.population_size() / 2);
  return options;
}

// The ranking metric's name and whether it is maximized.
StudyMetrics::Objective RankingMetric(const v1::StudySpec& spec) {
  const std::string& name = spec.pbt().metric();
  if (!name.empty()) {
    for (const v1::MetricSpec& m : spec.metrics()) {
      if (m.name() == name) return {name, m.goal() != v1::MetricSpec::MINIMIZE};
    }
  }
  return StudyMetrics(spec).primary();
}

// Members that can be ranked: queued, running or paused, never settled.
bool IsLive(v1::Trial::State state) {
  return state == v1::Trial::REQUESTED || state == v1::Trial::ACTIVE ||
         state == v1::Trial::PAUSED;
}

// The latest value of `metric` in `trial`'s curve, maximized.
std::optional<double> LatestValue(const v1::Trial& trial,
                                  const StudyMetrics::Objective& metric) {
  for (int i = trial.measurements_size() - 1; i >= 0; --i) {
    auto it = trial.measurements(i).metrics().find(metric.name);
    if (it == trial.measurements(i).metrics().end()) continue;
    if (std::isnan(it->second)) return std::nullopt;
    return metric.maximize ? it->second : -it->second;
  }
  return std::nullopt;
}

// Whether `trial` has a checkpoint of its own training to give: none
// exploited since, or one saved a whole interval past its latest exploit's.
// A member that just exploited holds its donor's checkpoint and value; as a
// donor it would pass its untried parameters on, and exploits would cascade
// down a chain onto one checkpoint in a single round.
bool CanDonate(const v1::Trial& trial, int64_t interval) {
  if (trial.checkpoint_uri().empty()) return false;
  if (trial.exploits_size() == 0) return true;
  return trial.checkpoint_step() >=
         trial.exploits(trial.exploits_size() - 1).checkpoint_step() + interval;
}

int64_t Interval(const v1::StudySpec& spec) {
  return std::max<int64_t>(1, spec.pbt().perturbation_interval());
}

}  // namespace

bool IsPbt(const v1::StudySpec& spec) { return spec.algorithm() == v1::PBT; }

bool PbtDue(const v1::StudySpec& spec, const v1::Trial& member,
            int64_t previous_step, int64_t step) {
  const int64_t interval = Interval(spec);
  if (member.exploits_size() > 0 &&
      step < member.exploits(member.exploits_size() - 1).checkpoint_step() +
                 interval) {
    return false;
  }
  const int64_t before = previous_step < 0 ? -1 : previous_step / interval;
  return step / interval > before && step >= interval;
}

absl::Status ValidatePbt(const v1::StudySpec& spec) {
  if (!IsPbt(spec)) {
    if (spec.has_pbt()) {
      return absl::InvalidArgumentError(
          "study.spec.pbt: set only with algorithm PBT");
    }
    return absl::OkStatus();
  }
  const v1::PbtSpec& pbt = spec.pbt();
  auto bad = [](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("study.spec.pbt.", field, ": ", why));
  };
  if (pbt.population_size() < 2 || pbt.population_size() > kMaxPopulation) {
    return bad("population_size",
               absl::StrCat("must be 2 to ", kMaxPopulation, " (got ",
                            pbt.population_size(), ")"));
  }
  if (pbt.perturbation_interval() < 1) {
    return bad("perturbation_interval", "must be at least 1 step");
  }
  if (!(pbt.quantile_fraction() >= 0 && pbt.quantile_fraction() <= 0.5)) {
    return bad("quantile_fraction", "must be in (0, 0.5] (0 = 0.25)");
  }
  if (pbt.has_resample_probability() &&
      !(pbt.resample_probability() >= 0 && pbt.resample_probability() <= 1)) {
    return bad("resample_probability", "must be in [0, 1]");
  }
  if (pbt.perturbation_factors_size() > kMaxFactors) {
    return bad("perturbation_factors",
               absl::StrCat("at most ", kMaxFactors, " factors"));
  }
  for (double f : pbt.perturbation_factors()) {
    if (!(std::isfinite(f) && f > 0)) {
      return bad("perturbation_factors", "each must be finite and positive");
    }
  }
  if (pbt.min_ready_members() != 0 &&
      (pbt.min_ready_members() < 2 ||
       pbt.min_ready_members() > pbt.population_size())) {
    return bad("min_ready_members", "must be 0 or 2 to population_size");
  }
  if (!pbt.metric().empty()) {
    bool found = false;
    for (const v1::MetricSpec& m : spec.metrics())
      found |= m.name() == pbt.metric();
    if (!found) {
      return bad("metric", absl::StrCat("\"", pbt.metric(),
                                        "\" is not one of study.spec.metrics"));
    }
  }
  if (spec.max_trials() != 0 && spec.max_trials() != pbt.population_size()) {
    return absl::InvalidArgumentError(
        "study.spec.max_trials: a PBT study's trials are its population: 0 or "
        "pbt.population_size");
  }
  if (spec.early_stopping().rule() != v1::EarlyStoppingSpec::RULE_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        "study.spec.early_stopping: PBT replaces early stopping (its bottom "
        "members exploit instead); leave it unset");
  }
  for (const v1::ParameterSpec& p : spec.parameters()) {
    if (!p.parent().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "study.spec.parameters: PBT does not support conditional "
          "parameters (\"",
          p.name(), "\" has a parent)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> JudgePbtMember(const v1::Study& study,
                                    const std::vector<v1::Trial>& population,
                                    v1::Trial& member, int64_t now_ms) {
  const v1::StudySpec& spec = study.spec();
  const StudyMetrics::Objective metric = RankingMetric(spec);
  const std::optional<double> own = LatestValue(member, metric);
  if (!own.has_value() || member.measurements_size() == 0) return false;

  const int64_t interval = Interval(spec);
  std::vector<opt::PbtMember> ranked = {{member.id(), *own, false}};
  for (const v1::Trial& t : population) {
    if (t.id() == member.id() || !IsLive(t.state())) continue;
    std::optional<double> value = LatestValue(t, metric);
    if (!value.has_value()) continue;
    ranked.push_back({t.id(), *value, CanDonate(t, interval)});
  }
  const int64_t step =
      member.measurements(member.measurements_size() - 1).step();
  const opt::PbtOptions options = ToPbtOptions(spec.pbt());
  // The exploit's number too: a member judged again at the same step (its
  // donor's checkpoint step plus an interval can repeat) draws afresh.
  const uint64_t seed = opt::MixSeeds(
      opt::MixSeeds(
          opt::MixSeeds(spec.seed(), static_cast<uint64_t>(member.id())),
          static_cast<uint64_t>(step)),
      static_cast<uint64_t>(member.exploits_size()));
  const std::optional<int64_t> donor_id =
      opt::ChooseDonor(ranked, member.id(), options, seed);
  if (!donor_id.has_value()) return false;
  const v1::Trial* donor = nullptr;
  double donor_value = 0;
  for (const v1::Trial& t : population) {
    if (t.id() == *donor_id) donor = &t;
  }
  for (const opt::PbtMember& m : ranked) {
    if (m.id == *donor_id) donor_value = m.value;
  }
  if (donor == nullptr) return false;

  absl::StatusOr<opt::SearchSpace> space = ToSearchSpace(spec);
  if (!space.ok()) return space.status();
  absl::StatusOr<opt::Assignment> from =
      ToAssignment("donor parameters", *space, donor->parameters());
  if (!from.ok()) return from.status();
  const opt::Assignment explored =
      opt::Explore(*space, *from, options, opt::MixSeeds(seed, 1));

  v1::PbtExploit exploit;
  exploit.set_number(member.exploits_size() + 1);
  exploit.set_step(step);
  exploit.set_time_ms(now_ms);
  exploit.set_donor_trial_id(donor->id());
  exploit.set_checkpoint_uri(donor->checkpoint_uri());
  exploit.set_checkpoint_step(donor->checkpoint_step());
  *exploit.mutable_parameters_before() = member.parameters();
  *exploit.mutable_parameters() = ToParameterValues(*space, explored);
  exploit.set_value(metric.maximize ? *own : -*own);
  exploit.set_donor_value(metric.maximize ? donor_value : -donor_value);

  // Its curve moves to earlier_attempts (it is not the one its model
  // continues any more), without beginning a new attempt.
  v1::Attempt moved =
      EndingAttempt(member,
                    absl::StrCat("exploited trial ", donor->id(),
                                 "'s checkpoint at step ", step),
                    now_ms);
  for (v1::Measurement& m : *member.mutable_measurements()) {
    *moved.add_measurements() = std::move(m);
  }
  member.clear_measurements();
  *member.add_earlier_attempts() = std::move(moved);
  // The curve its model now continues: the donor's, up to the checkpoint.
  for (const v1::Measurement& m : donor->measurements()) {
    if (m.step() <= donor->checkpoint_step()) *member.add_measurements() = m;
  }
  *member.mutable_parameters() = exploit.parameters();
  member.set_checkpoint_uri(donor->checkpoint_uri());
  member.set_checkpoint_step(donor->checkpoint_step());
  *member.add_exploits() = std::move(exploit);
  TrimEarlierCurves(member);  // the schedule stays
  return true;
}

}  // namespace hypertune::service
