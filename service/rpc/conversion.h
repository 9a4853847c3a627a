// Conversions between the API's messages and the optimizer's types. The only
// place that knows both: the optimizer never sees protobuf.
#ifndef HYPERTUNE_SERVICE_RPC_CONVERSION_H_
#define HYPERTUNE_SERVICE_RPC_CONVERSION_H_

#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/study_metrics.h"
#include "google/protobuf/repeated_field.h"
#include "hypertune/v1/hypertune.pb.h"
#include "optimizer/early_stopping.h"
#include "optimizer/search_space.h"
#include "optimizer/suggester.h"

namespace hypertune::service {

using ParameterValues = google::protobuf::RepeatedPtrField<v1::ParameterValue>;

// The search space of `spec`. INVALID_ARGUMENT naming
// `study.spec.parameters[i]` if a parameter is unusable.
absl::StatusOr<optimizer::SearchSpace> ToSearchSpace(const v1::StudySpec& spec);

// What a study's search space must be to be created or updated: usable
// (ToSearchSpace), and, for a GRID study, a grid (optimizer::GridSize):
// grid_points on every DOUBLE parameter, at most optimizer::kMaxGridPoints
// points. INVALID_ARGUMENT naming the field otherwise.
absl::Status CheckSearchSpace(const v1::StudySpec& spec);

// The optimizer's algorithm for `algorithm`; INVALID_ARGUMENT for values
// the API does not define. REQUIRES: algorithm != ALGORITHM_UNSPECIFIED.
absl::StatusOr<optimizer::Algorithm> ToOptimizerAlgorithm(
    v1::Algorithm algorithm);

// The assignment that `values` gives: every active parameter of `space`
// exactly once, each valid, and no inactive one (kInactive in its slot).
// INVALID_ARGUMENT naming `field` and the parameter otherwise.
absl::StatusOr<optimizer::Assignment> ToAssignment(
    const std::string& field, const optimizer::SearchSpace& space,
    const ParameterValues& values);

// As ToAssignment for a partial configuration: parameters not given hold
// kInactive, and the values given are checked for name and type only
// (SearchSpace::Complete checks the rest).
absl::StatusOr<optimizer::Assignment> ToPartialAssignment(
    const std::string& field, const optimizer::SearchSpace& space,
    const ParameterValues& values);

// The API's parameter values for a valid assignment, in the space's order;
// inactive parameters (kInactive) are left out.
ParameterValues ToParameterValues(const optimizer::SearchSpace& space,
                                  const optimizer::Assignment& assignment);

// The primary objective of `measurement` (study_metrics.h) turned into
// maximization, or nullopt if the measurement lacks it.
std::optional<double> MaximizedObjective(const v1::StudySpec& spec,
                                         const v1::Measurement& measurement);

// The metrics the optimizer models, in the order ToHistory gives their
// values: the objectives (turned into maximization), then the constraints
// with their bounds.
std::vector<optimizer::MetricConfig> ToMetricConfigs(
    const StudyMetrics& metrics);

// The values of `m` in ToMetricConfigs' order, or nullopt when it lacks one.
std::optional<std::vector<double>> ModelValues(const StudyMetrics& metrics,
                                               const v1::Measurement& m);

// The measurement a finished trial is judged by: its final measurement, else
// its last intermediate one. Null if it has neither.
const v1::Measurement* ResultMeasurement(const v1::Trial& trial);

// What the model learns from `trials`, in the metrics form of
// optimizer::SuggestRequest (ToMetricConfigs' values; an infinite objective
// is modelled as the worst value seen): COMPLETED and STOPPED trials whose
// result has every modelled metric as data, INFEASIBLE to avoid, unfinished
// ones as pending; FAILED trials (and ones whose parameters no longer fit
// `space`) are left out. Each observation carries its trial's id. With
// `primary_only` the values are of the primary objective alone (model-based
// multi-fidelity, whose rungs measure it: optimizer/fidelity.h).
std::vector<optimizer::Observation> ToHistory(
    const v1::StudySpec& spec, const optimizer::SearchSpace& space,
    const std::vector<v1::Trial>& trials, bool primary_only = false);

// What `trial` cost, for cost-aware search: its device-seconds, or with
// spec.cost_metric that metric of its result measurement; 0 if unknown.
double TrialCost(const v1::StudySpec& spec, const v1::Trial& trial);

// An earlier study (`prior_spec`, `prior_trials`) as a transfer prior of a
// study over `space`: its COMPLETED trials with their objectives, in the
// prior's order up to the first a trial lacks, turned into maximization
// (objective k of this study learns from the prior's objective k);
// parameters matched to `space` by name and kind (shared), the others
// holding placeholders. Trials with a shared value outside `space`'s
// domain, or without the primary objective, are left out.
optimizer::PriorStudy ToPriorStudy(const optimizer::SearchSpace& space,
                                   const v1::StudySpec& spec,
                                   const v1::StudySpec& prior_spec,
                                   const std::vector<v1::Trial>& prior_trials);

// The early-stopping rule of `spec` with the API's defaults filled in
// (Rule::kNone when it sets none). maximize follows the objective's goal.
optimizer::EarlyStoppingConfig ToEarlyStoppingConfig(const v1::StudySpec& spec);

// How the rule of `spec` judges several objectives: as it sets, else
// FIRST_OBJECTIVE with promote_by_model (its model reads one objective),
// HYPERVOLUME with two objectives (it kept the most hypervolume, at a cost
// that stays small in two dimensions), EPSILON_NET with more
// (docs/early-stopping.md).
v1::EarlyStoppingSpec::MultiObjective MultiObjectiveOf(
    const v1::StudySpec& spec);

// The learning curves of `trials` (the objective of each intermediate
// measurement, as measured) for the early-stopping rules. FAILED and
// INFEASIBLE trials are left out.
std::vector<optimizer::TrialCurve> ToCurves(
    const v1::StudySpec& spec, const std::vector<v1::Trial>& trials);

// What the learning-curve model reads (promote_by_model): the curves of
// `trials` (as ToCurves) whose parameters are an assignment of `space`, and
// those assignments, in the same order. Trials of an older spec whose
// parameters no longer fit are left out.
struct ModelledCurves {
  std::vector<optimizer::TrialCurve> curves;
  std::vector<optimizer::Assignment> parameters;
};
ModelledCurves ToModelledCurves(const v1::StudySpec& spec,
                                const optimizer::SearchSpace& space,
                                const std::vector<v1::Trial>& trials);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_CONVERSION_H_
