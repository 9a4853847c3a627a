#include "service/rpc/study_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/study_metrics.h"
#include "google/protobuf/io/coded_stream.h"
#include "optimizer/early_stopping.h"
#include "optimizer/learning_curve_model.h"
#include "optimizer/pareto.h"
#include "service/rpc/attempts.h"
#include "service/rpc/backup_path.h"
#include "service/rpc/conversion.h"
#include "service/rpc/curve_cache.h"
#include "service/rpc/pbt.h"
#include "service/rpc/priors.h"
#include "service/rpc/server_info.h"
#include "service/rpc/status_macros.h"
#include "service/rpc/study_update.h"
#include "service/rpc/trial_state.h"
#include "service/rpc/validation.h"

namespace hypertune::service {
namespace {

constexpr int kDefaultPageSize = 100;
// WatchTrials: changes read per store query, the pause after a read that
// found changes, and how long to wait for a change before checking whether
// the watcher is gone.
constexpr absl::Duration kWatchPause = absl::Milliseconds(200);
constexpr absl::Duration kWatchPoll = absl::Milliseconds(200);

bool IsRunning(v1::Trial::State state) {
  return state == v1::Trial::ACTIVE || state == v1::Trial::STOPPING;
}

std::string TrialRef(const v1::Trial& trial) {
  return absl::StrFormat("trial %d of study \"%s\"", trial.id(),
                         trial.study_name());
}

// Fencing: FAILED_PRECONDITION unless the caller's epoch is the trial's
// current one, so a worker that lost its lease can never overwrite the work of
// the trial's next owner. (CLI users acting by hand pass the current epoch.)
absl::Status CheckEpoch(const v1::Trial& trial, int64_t lease_epoch) {
  if (lease_epoch < 1) {
    return absl::InvalidArgumentError(
        "lease_epoch: required; the epoch the trial was granted under");
  }
  if (lease_epoch == trial.lease_epoch()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "lease_epoch: %s is held under epoch %d, not %d (a newer worker owns it)",
      TrialRef(trial), trial.lease_epoch(), lease_epoch));
}

absl::Status CheckRunning(const v1::Trial& trial, const std::string& action) {
  if (IsRunning(trial.state())) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s is %s; %s only while it is ACTIVE or STOPPING", TrialRef(trial),
      v1::Trial::State_Name(trial.state()), action));
}

bool SameMetrics(const v1::Measurement& a, const v1::Measurement& b) {
  if (a.metrics().size() != b.metrics().size()) return false;
  for (const auto& [name, value] : a.metrics()) {
    auto it = b.metrics().find(name);
    if (it == b.metrics().end()) return false;
    // Bitwise-equal doubles (+-Infinity included) are the same report.
    if (!(it->second == value)) return false;
  }
  return true;
}

bool HasEarlyStopping(const v1::StudySpec& spec) {
  return spec.early_stopping().rule() !=
         v1::EarlyStoppingSpec::RULE_UNSPECIFIED;
}

// The best of the feasible COMPLETED `trials` (ties: the earliest), or with
// several objectives their Pareto front, by id.
std::vector<const v1::Trial*> OptimalTrials(
    const StudyMetrics& metrics, const std::vector<v1::Trial>& trials) {
  std::vector<const v1::Trial*> candidates;
  std::vector<std::vector<double>> values;
  for (const v1::Trial& t : trials) {
    if (t.state() != v1::Trial::COMPLETED) continue;
    if (!metrics.Feasible(t.final_measurement()).value_or(false)) continue;
    std::vector<double> y;
    for (const StudyMetrics::Objective& o : metrics.objectives()) {
      auto it = t.final_measurement().metrics().find(o.name);
      if (it == t.final_measurement().metrics().end()) break;
      y.push_back(o.maximize ? it->second : -it->second);
    }
    if (y.size() != metrics.objectives().size() || y.empty()) continue;
    candidates.push_back(&t);
    values.push_back(std::move(y));
  }
  if (candidates.empty()) return {};
  if (!metrics.multi_objective()) {
    size_t best = 0;
    for (size_t i = 1; i < candidates.size(); ++i) {
      if (values[i][0] > values[best][0]) best = i;
    }
    return {candidates[best]};
  }
  Eigen::MatrixXd y(static_cast<Eigen::Index>(values.size()),
                    static_cast<Eigen::Index>(values[0].size()));
  for (size_t i = 0; i < values.size(); ++i) {
    for (size_t k = 0; k < values[i].size(); ++k) {
      y(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(k)) =
          values[i][k];
    }
  }
  std::vector<const v1::Trial*> front;
  for (int row : optimizer::ParetoFrontRows(y)) {
    front.push_back(candidates[static_cast<size_t>(row)]);
  }
  return front;
}

// Records on a finished `trial` whether its result meets the study's
// constraints (left unset without constraints, or when a constrained metric
// is missing: a trial stopped early).
void SetFeasible(const StudyMetrics& metrics, v1::Trial& trial) {
  trial.clear_feasible();
  if (metrics.constraints().empty()) return;
  if (std::optional<bool> feasible =
          metrics.Feasible(trial.final_measurement())) {
    trial.set_feasible(*feasible);
  }
}

// The last step of every Study answer: the metrics' resolved roles
// published, and, for a study stored before its record of changes counted
// toward its size (a parameter list recorded whole), which can pass what an
// answer may carry, its largest change texts cut, oldest first, until it
// fits.
void FitStudyAnswer(v1::Study& study) {
  PublishMetricRoles(study);
  for (v1::StudyChange& change : *study.mutable_changes()) {
    if (study.ByteSizeLong() <= kMaxStudyBytes) return;
    for (v1::StudyChange::Field& field : *change.mutable_fields()) {
      for (std::string* text :
           {field.mutable_before(), field.mutable_after()}) {
        if (text->size() <= kMaxChangeTextBytes) continue;
        const size_t was = text->size();
        text->resize(kMaxChangeTextBytes);
        absl::StrAppend(text, "... (cut from ", was, " bytes)");
      }
    }
  }
}

absl::StatusOr<int64_t> ParsePageToken(const std::string& token) {
  if (token.empty()) return 0;
  int64_t after_id = 0;
  if (!absl::SimpleAtoi(token, &after_id) || after_id < 0) {
    return absl::InvalidArgumentError(
        "page_token: not a token from a previous ListTrials response");
  }
  return after_id;
}

// A report the study can read: its early-stopping rule reads the primary
// objective, so a measurement without it (a misspelt name, say) would leave
// the rule blind for the whole trial.
absl::Status CheckReportable(const v1::Study& study, const v1::Measurement& m) {
  const std::string objective = StudyMetrics(study.spec()).primary().name;
  if (m.metrics().contains(objective)) return absl::OkStatus();
  std::vector<std::string> names;
  for (const v1::MetricSpec& metric : study.spec().metrics()) {
    names.push_back(absl::StrCat("\"", metric.name(), "\""));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "measurement.metrics: no value for the objective \"%s\" (the study's "
      "metrics: %s; others may be recorded beside it)",
      objective, absl::StrJoin(names, ", ")));
}

// ValidateTrialSize of the trial with `m` appended, from the stored sizes.
absl::Status CheckAppendFits(const storage::TrialHead& head,
                             const v1::Measurement& m) {
  if (head.measurements + 1 > kMaxMeasurementsPerTrial) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "measurement: trial %d would hold %d measurements, over the limit of "
        "%d per trial",
        head.trial.id(), head.measurements + 1, kMaxMeasurementsPerTrial));
  }
  const size_t bytes =
      head.trial.ByteSizeLong() + static_cast<size_t>(head.measurement_bytes) +
      1 /* the field's tag */ +
      google::protobuf::io::CodedOutputStream::VarintSize64(m.ByteSizeLong()) +
      m.ByteSizeLong();
  if (bytes > kMaxTrialBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "measurement: trial %d would take %d bytes, over the limit of %d per "
        "trial",
        head.trial.id(), bytes, kMaxTrialBytes));
  }
  return absl::OkStatus();
}

// What a CompleteTrial request (not giving the trial back) settles its
// trial as.
struct Outcome {
  // FAILED, INFEASIBLE, COMPLETED or STOPPED.
  v1::Trial::State state = v1::Trial::STATE_UNSPECIFIED;
  std::string reason;  // the failure's or the infeasibility's
  v1::Measurement final_measurement;
};

// The outcome `request` asks of `trial`: FAILED (STOPPED if its stop was
// already decided) with a reason, INFEASIBLE with a reason, or a final
// measurement (the latest one if it brings none). A trial stopped early is
// judged on the primary objective alone (what early stopping reads); a
// completed one needs every objective and constraint.
absl::StatusOr<Outcome> OutcomeOf(const v1::CompleteTrialRequest& request,
                                  const v1::Study& study,
                                  const v1::Trial& trial) {
  const bool stopping = trial.state() == v1::Trial::STOPPING;
  if (request.failed()) {
    return Outcome{v1::Trial::FAILED,
                   request.failure_reason().empty() ? "the trial's code failed"
                                                    : request.failure_reason(),
                   {}};
  }
  if (request.infeasible()) {
    return Outcome{v1::Trial::INFEASIBLE,
                   request.infeasible_reason().empty()
                       ? "marked infeasible"
                       : request.infeasible_reason(),
                   {}};
  }
  Outcome outcome{stopping ? v1::Trial::STOPPED : v1::Trial::COMPLETED, "",
                  request.final_measurement()};
  v1::Measurement& final_m = outcome.final_measurement;
  if (final_m.metrics().empty() && trial.measurements_size() > 0) {
    final_m = trial.measurements(trial.measurements_size() - 1);
  }
  const StudyMetrics metrics(study.spec());
  const std::optional<std::string> missing =
      stopping ? (metrics.MaximizedPrimary(final_m)
                      ? std::nullopt
                      : std::optional<std::string>(metrics.primary().name))
               : metrics.Missing(final_m);
  if (missing) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "final_measurement.metrics: missing \"%s\" (a result needs every "
        "objective and constraint; or mark the trial infeasible)",
        *missing));
  }
  return outcome;
}

// OK if settled `trial` already has `outcome`: the call is a retry.
absl::Status CheckSameOutcome(const v1::Trial& trial, const Outcome& outcome) {
  if (outcome.state == v1::Trial::FAILED) {
    if (trial.state() == v1::Trial::FAILED &&
        trial.failure_reason() == outcome.reason) {
      return absl::OkStatus();
    }
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is already %s", TrialRef(trial),
                        v1::Trial::State_Name(trial.state())));
  }
  const bool same_kind = outcome.state == v1::Trial::INFEASIBLE
                             ? trial.state() == v1::Trial::INFEASIBLE
                             : trial.state() == v1::Trial::COMPLETED ||
                                   trial.state() == v1::Trial::STOPPED;
  if (same_kind && trial.infeasible_reason() == outcome.reason &&
      SameMetrics(trial.final_measurement(), outcome.final_measurement)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrFormat("%s is already %s with a different result",
                      TrialRef(trial), v1::Trial::State_Name(trial.state())));
}

// Settles running `trial` as `outcome`, in memory.
absl::Status Settle(const StudyMetrics& metrics, int64_t now,
                    const Outcome& outcome, v1::Trial& trial) {
  if (outcome.state == v1::Trial::FAILED) {
    // The stop was decided before the failure: the stop stands.
    if (trial.state() == v1::Trial::STOPPING) {
      return StopNow(trial, trial.stop_reason(), now);
    }
    HT_RETURN_IF_ERROR(Transition(trial, v1::Trial::FAILED));
    trial.set_failure_reason(outcome.reason);
    return absl::OkStatus();
  }
  HT_RETURN_IF_ERROR(Transition(trial, outcome.state));
  trial.set_infeasible_reason(outcome.reason);
  *trial.mutable_final_measurement() = outcome.final_measurement;
  if (outcome.state != v1::Trial::INFEASIBLE) SetFeasible(metrics, trial);
  return absl::OkStatus();
}

}  // namespace

StudyService::StudyService(storage::StudyStore* store, ServiceOptions options)
    : curve_store_(store, &curves_),
      context_(&curve_store_, std::move(options)),
      leases_(context_),
      suggestions_(context_, leases_) {}

absl::StatusOr<v1::SuggestTrialsResponse> StudyService::SuggestTrials(
    const v1::SuggestTrialsRequest& request, const Principal& caller) {
  return suggestions_.SuggestTrials(request, caller);
}

absl::Status StudyService::ExpireLeases() { return leases_.ExpireAll(); }

absl::Status StudyService::ExtendLeasesOnStart() {
  return leases_.ExtendOnStart();
}

absl::Status StudyService::RecoverOnStart() {
  HT_RETURN_IF_ERROR(RemoveInterruptedImports());
  return ExtendLeasesOnStart();
}

absl::StatusOr<v1::Study> StudyService::CreateStudy(
    const v1::CreateStudyRequest& request, const Principal& caller) {
  v1::Study study = request.study();
  // The owner is whoever calls, never what the request claims.
  study.set_owner(caller.owner);
  v1::StudySpec& spec = *study.mutable_spec();
  // Before validation, which checks what needs GP_BANDIT.
  if (spec.algorithm() == v1::ALGORITHM_UNSPECIFIED) {
    spec.set_algorithm(context_.options().default_algorithm);
  }
  HT_RETURN_IF_ERROR(ValidateStudy(study));
  HT_RETURN_IF_ERROR(ToOptimizerAlgorithm(spec.algorithm()).status());
  HT_RETURN_IF_ERROR(CheckSearchSpace(spec));
  HT_RETURN_IF_ERROR(BindPriors(context_, caller, study));
  // Early stopping of several objectives: the default written out
  // (docs/early-stopping.md), so that clients show what the server does.
  if (HasEarlyStopping(spec) && StudyMetrics(spec).multi_objective() &&
      spec.early_stopping().multi_objective() ==
          v1::EarlyStoppingSpec::MULTI_OBJECTIVE_UNSPECIFIED) {
    spec.mutable_early_stopping()->set_multi_objective(MultiObjectiveOf(spec));
  }
  // A PBT study's trials are its population (service/rpc/pbt.h).
  if (IsPbt(spec)) spec.set_max_trials(spec.pbt().population_size());
  study.set_state(v1::Study::ACTIVE);
  study.set_create_time_ms(context_.Now());
  study.clear_trial_counts();
  study.clear_device_seconds();
  study.clear_cost();
  study.clear_changes();
  study.clear_metric_roles();  // output only
  // Under the study's lock: a call that found no such study a moment ago
  // cannot act on this one before it exists with its owner.
  absl::MutexLock lock(&context_.runtimes().For(study.name()).mu);
  HT_RETURN_IF_ERROR(context_.store().CreateStudy(study));
  FitStudyAnswer(study);
  return study;
}

double StudyService::CountDeviceSeconds(double grant_total,
                                        const v1::Study& study,
                                        v1::Trial& trial) {
  const double seconds = CountGrantDeviceSeconds(trial, grant_total);
  trial.set_device_seconds(trial.device_seconds() + seconds);
  trial.set_cost(trial.device_seconds() / 3600.0 *
                 study.spec().price_per_device_hour());
  return seconds;
}

absl::Status StudyService::SaveStudyCost(const std::string& study_name,
                                         double seconds) {
  if (seconds <= 0) return absl::OkStatus();
  // Atomic in the store: completions of other trials run concurrently.
  return context_.store().ModifyStudy(study_name, [seconds](v1::Study& study) {
    study.set_device_seconds(study.device_seconds() + seconds);
    study.set_cost(study.device_seconds() / 3600.0 *
                   study.spec().price_per_device_hour());
  });
}

absl::StatusOr<v1::Study> StudyService::LoadStudyWithCounts(
    const Principal& caller, const std::string& name) {
  absl::StatusOr<v1::Study> study =
      context_.LoadStudyFor(caller, name, Access::kRead);
  if (!study.ok()) return study.status();
  FitStudyAnswer(*study);
  auto counts = context_.store().CountTrials(name);
  if (!counts.ok()) return counts.status();
  for (const auto& [state, n] : *counts) {
    (*study->mutable_trial_counts())[v1::Trial::State_Name(state)] = n;
  }
  return study;
}

absl::StatusOr<v1::Study> StudyService::GetStudy(
    const v1::GetStudyRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateStudyName("name", request.name()));
  return LoadStudyWithCounts(caller, request.name());
}

absl::StatusOr<v1::ListStudiesResponse> StudyService::ListStudies(
    const v1::ListStudiesRequest& request, const Principal& caller) {
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: must be >= 0, got ", request.page_size()));
  }
  const int page_size = request.page_size() == 0
                            ? kMaxPageSize
                            : std::min(request.page_size(), kMaxPageSize);
  absl::StatusOr<std::vector<v1::Study>> studies =
      context_.store().ListStudies();
  if (!studies.ok()) return studies.status();
  v1::ListStudiesResponse response;
  ResponseBudget budget;
  for (const v1::Study& study : *studies) {
    // By name: the token is the last name of the previous page.
    if (!request.page_token().empty() && study.name() <= request.page_token()) {
      continue;
    }
    if (!CheckAccess(caller, study, Access::kRead).ok()) continue;
    if (response.studies_size() == page_size) {
      response.set_next_page_token(
          response.studies(response.studies_size() - 1).name());
      break;
    }
    absl::StatusOr<v1::Study> full = LoadStudyWithCounts(caller, study.name());
    // A study deleted (or given away) since the listing is left out.
    if (absl::IsNotFound(full.status()) ||
        absl::IsPermissionDenied(full.status())) {
      continue;
    }
    if (!full.ok()) return full.status();
    if (!budget.Take(*full)) {
      response.set_next_page_token(
          response.studies(response.studies_size() - 1).name());
      break;
    }
    *response.add_studies() = *std::move(full);
  }
  return response;
}

absl::StatusOr<v1::DeleteStudyResponse> StudyService::DeleteStudy(
    const v1::DeleteStudyRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateStudyName("name", request.name()));
  absl::StatusOr<StudyRuntime*> runtime = context_.RuntimeOf(request.name());
  if (!runtime.ok()) return runtime.status();
  absl::MutexLock lock(&(*runtime)->mu);
  HT_RETURN_IF_ERROR(
      context_.LoadStudyFor(caller, request.name(), Access::kWrite).status());
  HT_RETURN_IF_ERROR(context_.store().DeleteStudy(request.name()));
  (*runtime)->lease_check = {};  // a study of the same name starts afresh
  (*runtime)->suggestions.DiscardModel();
  absl::MutexLock count_lock(&(*runtime)->warm_start_mu);
  (*runtime)->warm_start = {};
  return v1::DeleteStudyResponse();
}

absl::StatusOr<v1::Study> StudyService::SetStudyState(
    const v1::SetStudyStateRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateStudyName("name", request.name()));
  if (request.state() != v1::Study::ACTIVE &&
      request.state() != v1::Study::PAUSED &&
      request.state() != v1::Study::COMPLETED) {
    return absl::InvalidArgumentError(
        "state: must be ACTIVE, PAUSED or COMPLETED");
  }
  absl::StatusOr<StudyRuntime*> runtime = context_.RuntimeOf(request.name());
  if (!runtime.ok()) return runtime.status();
  absl::MutexLock lock(&(*runtime)->mu);
  absl::StatusOr<v1::Study> study =
      context_.LoadStudyFor(caller, request.name(), Access::kWrite);
  if (!study.ok()) return study.status();
  if (request.state() == v1::Study::ACTIVE &&
      study->state() != v1::Study::ACTIVE) {
    // Resumed with its budget spent, it would complete again at the next
    // suggestion: say so now, and how to go on.
    absl::StatusOr<absl::flat_hash_map<v1::Trial::State, int64_t>> counts =
        context_.store().CountTrials(request.name());
    if (!counts.ok()) return counts.status();
    int64_t created = 0;
    for (const auto& [state, n] : *counts) created += n;
    const v1::StudySpec& spec = study->spec();
    if (spec.max_trials() > 0 && created >= spec.max_trials()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "study \"%s\" has used its budget of max_trials %d; raise it "
          "(hypertune study update %s --max-trials N), which also makes it "
          "ACTIVE",
          request.name(), spec.max_trials(), request.name()));
    }
    if (spec.max_device_hours() > 0 &&
        study->device_seconds() >= spec.max_device_hours() * 3600.0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "study \"%s\" has used its budget of max_device_hours %s; raise "
          "it (hypertune study update %s --max-device-hours H), which also "
          "makes it ACTIVE",
          request.name(), absl::StrCat(spec.max_device_hours()),
          request.name()));
    }
  }
  study->set_state(request.state());
  HT_RETURN_IF_ERROR(context_.store().UpdateStudy(*study));
  return LoadStudyWithCounts(caller, request.name());
}

absl::StatusOr<v1::Study> StudyService::UpdateStudy(
    const v1::UpdateStudyRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateStudyName("name", request.name()));
  absl::StatusOr<StudyRuntime*> runtime = context_.RuntimeOf(request.name());
  if (!runtime.ok()) return runtime.status();
  absl::MutexLock lock(&(*runtime)->mu);
  absl::StatusOr<v1::Study> study =
      context_.LoadStudyFor(caller, request.name(), Access::kWrite);
  if (!study.ok()) return study.status();
  absl::StatusOr<v1::StudySpec> merged =
      MergeStudyUpdate(study->spec(), request.spec(), request.update_mask());
  if (!merged.ok()) return merged.status();
  v1::Study updated = *study;
  *updated.mutable_spec() = *std::move(merged);
  // Validity first: a NaN bound is bad input, not a narrowing.
  HT_RETURN_IF_ERROR(ValidateStudy(updated));
  HT_RETURN_IF_ERROR(CheckSearchSpace(updated.spec()));
  const auto& paths = request.update_mask().paths();
  if (std::find(paths.begin(), paths.end(), "parameters") != paths.end()) {
    absl::StatusOr<std::vector<v1::Trial>> trials =
        context_.store().ListTrials(request.name(), {});
    if (!trials.ok()) return trials.status();
    HT_RETURN_IF_ERROR(
        CheckParametersGrow(study->spec(), updated.spec(), *trials));
  }
  std::vector<v1::StudyChange::Field> fields =
      RecordChanges(study->spec(), updated.spec(), request.update_mask());
  if (fields.empty()) return LoadStudyWithCounts(caller, request.name());
  if (study->changes_size() >= kMaxStudyChanges) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "study \"%s\" has %d recorded changes, the limit; export it and "
        "import it under a new name to start a new record",
        request.name(), kMaxStudyChanges));
  }
  v1::StudyChange change;
  change.set_time_ms(context_.Now());
  change.set_who(caller.owner.empty() ? "(auth off)" : caller.owner);
  for (v1::StudyChange::Field& f : fields) *change.add_fields() = std::move(f);
  *updated.add_changes() = change;
  // The study as it would be stored, record included, must stay readable.
  if (const size_t bytes = updated.ByteSizeLong(); bytes > kMaxStudyBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "spec: the update would make study \"%s\" %d bytes serialized "
        "(spec and record of changes), over the limit of %d per study",
        request.name(), bytes, kMaxStudyBytes));
  }
  const bool reopen = study->state() == v1::Study::COMPLETED &&
                      RaisesBudget(study->spec(), updated.spec());
  // Modified in place: completions may be adding to its cost meanwhile.
  HT_RETURN_IF_ERROR(
      context_.store().ModifyStudy(request.name(), [&](v1::Study& stored) {
        *stored.mutable_spec() = updated.spec();
        *stored.add_changes() = change;
        if (reopen) stored.set_state(v1::Study::ACTIVE);
      }));
  // A new search space needs a new model (its encodings changed).
  (*runtime)->suggestions.DiscardModel();
  return LoadStudyWithCounts(caller, request.name());
}

absl::StatusOr<v1::Study> StudyService::SetMaxTrials(const std::string& name,
                                                     int64_t max_trials,
                                                     const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateStudyName("name", name));
  if (max_trials < 0 || max_trials > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_trials: must be from 0 (unlimited) to ",
        std::numeric_limits<int32_t>::max(), ", got ", max_trials));
  }
  HT_RETURN_IF_ERROR(
      context_.LoadStudyFor(caller, name, Access::kWrite).status());
  auto counts = context_.store().CountTrials(name);
  if (!counts.ok()) return counts.status();
  // Counted as the suggestion plan counts the budget: every trial created.
  int64_t created = 0;
  for (const auto& [state, n] : *counts) created += n;
  if (max_trials != 0 && max_trials <= created) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_trials: must be 0 (unlimited) or above the ", created,
        " trials study \"", name, "\" has created, got ", max_trials));
  }
  v1::UpdateStudyRequest update;
  update.set_name(name);
  update.mutable_spec()->set_max_trials(static_cast<int32_t>(max_trials));
  update.mutable_update_mask()->add_paths("max_trials");
  return UpdateStudy(update, caller);
}

absl::StatusOr<v1::BackupResponse> StudyService::Backup(
    const v1::BackupRequest& request, const Principal& caller) {
  if (caller.checked && !caller.admin) {
    // The path is on the server's machine: only its operator may name one.
    return absl::PermissionDeniedError(
        "Backup: an admin's call (a token whose owner is admin)");
  }
  HT_RETURN_IF_ERROR(ValidateText("destination_path",
                                  request.destination_path(), kMaxUriBytes));
  absl::StatusOr<std::string> path =
      ResolveBackupPath(context_.options().backup_dir,
                        request.destination_path(), request.overwrite());
  if (!path.ok()) return path.status();
  const auto start = std::chrono::steady_clock::now();
  HT_RETURN_IF_ERROR(context_.store().Backup(*path));
  v1::BackupResponse response;
  response.set_destination_path(*path);
  std::error_code error;
  const auto bytes = std::filesystem::file_size(*path, error);
  response.set_bytes(error ? 0 : static_cast<int64_t>(bytes));
  response.set_duration_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - start)
          .count());
  return response;
}

absl::StatusOr<v1::Study> StudyService::SetStudyOwner(
    const v1::SetStudyOwnerRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateStudyName("name", request.name()));
  HT_RETURN_IF_ERROR(ValidateOwner("owner", request.owner()));
  absl::StatusOr<StudyRuntime*> runtime = context_.RuntimeOf(request.name());
  if (!runtime.ok()) return runtime.status();
  absl::MutexLock lock(&(*runtime)->mu);
  absl::StatusOr<v1::Study> study =
      context_.LoadStudyFor(caller, request.name(), Access::kWrite);
  if (!study.ok()) return study.status();
  study->set_owner(request.owner());
  HT_RETURN_IF_ERROR(context_.store().UpdateStudy(*study));
  // Read back as the new owner: the caller may have just given it away.
  Principal owner = caller;
  owner.owner = request.owner();
  return LoadStudyWithCounts(owner, request.name());
}

absl::StatusOr<v1::Trial> StudyService::CreateTrial(
    const v1::CreateTrialRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateStudyName("study_name", request.study_name()));
  const v1::Trial& given = request.trial();
  v1::Trial trial;
  switch (given.state()) {
    case v1::Trial::STATE_UNSPECIFIED:
    case v1::Trial::REQUESTED:
      HT_RETURN_IF_ERROR(Transition(trial, v1::Trial::REQUESTED));
      break;
    case v1::Trial::COMPLETED:
      HT_RETURN_IF_ERROR(Transition(trial, v1::Trial::COMPLETED));
      break;
    default:
      return absl::InvalidArgumentError(
          "trial.state: must be REQUESTED (queue it) or COMPLETED (a known "
          "result)");
  }
  if (request.partial() && trial.state() != v1::Trial::REQUESTED) {
    return absl::InvalidArgumentError(
        "partial: only a queued (REQUESTED) trial may leave parameters to "
        "the algorithm; a COMPLETED result names every parameter");
  }
  HT_RETURN_IF_ERROR(
      ValidateAttributes("trial.attributes", given.attributes()));
  *trial.mutable_attributes() = given.attributes();
  const std::string& name = request.study_name();
  absl::StatusOr<StudyRuntime*> runtime = context_.RuntimeOf(name);
  if (!runtime.ok()) return runtime.status();
  if (request.partial()) {
    // Completed and stored in the study's suggestion queue.
    *trial.mutable_parameters() = given.parameters();
    return suggestions_.CreatePartialTrial(**runtime, name, trial, caller);
  }
  const ParameterValues& parameters = given.parameters();
  absl::MutexLock lock(&(*runtime)->mu);
  absl::StatusOr<v1::Study> study =
      context_.LoadStudyFor(caller, name, Access::kWrite);
  if (!study.ok()) return study.status();
  absl::StatusOr<optimizer::SearchSpace> space = ToSearchSpace(study->spec());
  if (!space.ok()) return space.status();
  absl::StatusOr<optimizer::Assignment> x =
      ToAssignment("trial.parameters", *space, parameters);
  if (!x.ok()) return x.status();
  // Stored in canonical form: spec order, the spec's value types.
  *trial.mutable_parameters() = ToParameterValues(*space, *x);

  const int64_t now = context_.Now();
  trial.set_create_time_ms(now);
  if (trial.state() == v1::Trial::COMPLETED) {
    HT_RETURN_IF_ERROR(ValidateMeasurement("trial.final_measurement",
                                           given.final_measurement(), true));
    const StudyMetrics metrics(study->spec());
    if (std::optional<std::string> missing =
            metrics.Missing(given.final_measurement())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "trial.final_measurement.metrics: missing \"%s\" (a result needs "
          "every objective and constraint)",
          *missing));
    }
    *trial.mutable_final_measurement() = given.final_measurement();
    SetFeasible(metrics, trial);
    trial.set_start_time_ms(now);
    trial.set_end_time_ms(now);
  }
  absl::StatusOr<std::vector<v1::Trial>> stored =
      context_.SaveNewTrials(name, {std::move(trial)});
  if (!stored.ok()) return stored.status();
  return std::move(stored->front());
}

absl::StatusOr<v1::Trial> StudyService::GetTrial(
    const v1::GetTrialRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateStudyName("study_name", request.study_name()));
  HT_RETURN_IF_ERROR(ValidateTrialId("trial_id", request.trial_id()));
  absl::StatusOr<StudyRuntime*> runtime =
      context_.RuntimeOf(request.study_name());
  if (!runtime.ok()) return runtime.status();
  absl::ReaderMutexLock lock(&(*runtime)->mu);
  HT_RETURN_IF_ERROR(
      context_.LoadStudyFor(caller, request.study_name(), Access::kRead)
          .status());
  return context_.store().GetTrial(request.study_name(), request.trial_id());
}

absl::StatusOr<v1::ListTrialsResponse> StudyService::ListTrials(
    const v1::ListTrialsRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateStudyName("study_name", request.study_name()));
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: must be >= 0, got ", request.page_size()));
  }
  absl::StatusOr<int64_t> after_id = ParsePageToken(request.page_token());
  if (!after_id.ok()) return after_id.status();
  int page_size = request.page_size() == 0
                      ? kDefaultPageSize
                      : std::min(request.page_size(), kMaxPageSize);

  storage::TrialQuery query;
  for (int state : request.states()) {
    if (!v1::Trial::State_IsValid(state) ||
        state == v1::Trial::STATE_UNSPECIFIED) {
      return absl::InvalidArgumentError(
          absl::StrCat("states: ", state, " is not a trial state"));
    }
    query.states.push_back(static_cast<v1::Trial::State>(state));
  }
  query.after_id = *after_id;
  query.limit = page_size + 1;  // One more tells whether a next page exists.
  absl::StatusOr<StudyRuntime*> runtime =
      context_.RuntimeOf(request.study_name());
  if (!runtime.ok()) return runtime.status();
  absl::ReaderMutexLock lock(&(*runtime)->mu);
  HT_RETURN_IF_ERROR(
      context_.LoadStudyFor(caller, request.study_name(), Access::kRead)
          .status());
  absl::StatusOr<std::vector<v1::Trial>> trials =
      context_.store().ListTrials(request.study_name(), query);
  if (!trials.ok()) return trials.status();

  v1::ListTrialsResponse response;
  ResponseBudget budget;
  bool more = static_cast<int>(trials->size()) > page_size;
  if (more) trials->resize(page_size);
  for (v1::Trial& t : *trials) {
    // A page ends early rather than outgrow a client's receive limit.
    if (!budget.Take(t)) {
      more = true;
      break;
    }
    *response.add_trials() = std::move(t);
  }
  if (more) {
    response.set_next_page_token(
        absl::StrCat(response.trials(response.trials_size() - 1).id()));
  }
  return response;
}

absl::Status StudyService::MutateTrial(const Principal& caller,
                                       const std::string& study_name,
                                       int64_t trial_id, TrialRead read,
                                       const Writer& writer, Answer answer,
                                       Mutation mutate) {
  HT_RETURN_IF_ERROR(ValidateStudyName("study_name", study_name));
  HT_RETURN_IF_ERROR(ValidateTrialId("trial_id", trial_id));
  absl::StatusOr<StudyRuntime*> runtime = context_.RuntimeOf(study_name);
  if (!runtime.ok()) return runtime.status();
  TrialLock lock(**runtime, trial_id);
  TrialWrite write;
  if (read == TrialRead::kHead) {
    absl::StatusOr<v1::Study> study =
        context_.LoadStudyFor(caller, study_name, Access::kWrite);
    if (!study.ok()) return study.status();
    absl::StatusOr<storage::TrialHead> head =
        context_.store().GetTrialHead(study_name, trial_id);
    if (!head.ok()) return head.status();
    write = {*std::move(study), *std::move(head)};
  } else {
    absl::StatusOr<storage::StudyWithTrial> loaded =
        context_.store().GetStudyWithTrial(study_name, trial_id);
    if (!loaded.ok()) return loaded.status();
    HT_RETURN_IF_ERROR(CheckAccess(caller, loaded->study, Access::kWrite));
    if (!loaded->trial.ok()) return loaded->trial.status();
    write.study = std::move(loaded->study);
    write.head.trial = *std::move(loaded->trial);
  }
  absl::StatusOr<bool> answered = answer(write);
  if (!answered.ok()) return answered.status();
  if (*answered) return absl::OkStatus();
  if (writer.fenced) {
    HT_RETURN_IF_ERROR(CheckRunning(write.trial(), std::string(writer.action)));
    HT_RETURN_IF_ERROR(CheckEpoch(write.trial(), writer.lease_epoch));
  }
  return mutate(write, storage::TrialVersion::Of(write.trial()));
}

absl::StatusOr<v1::Trial> StudyService::AddMeasurement(
    const v1::AddMeasurementRequest& request, const Principal& caller) {
  const v1::Measurement& m = request.measurement();
  HT_RETURN_IF_ERROR(ValidateMeasurement("measurement", m, true));
  v1::Trial answer;
  // The answer: the trial as stored, with only the measurement reported.
  auto answer_with = [&answer](const v1::Trial& trial,
                               const v1::Measurement& reported) {
    answer = trial;
    *answer.add_measurements() = reported;
  };
  HT_RETURN_IF_ERROR(MutateTrial(
      caller, request.study_name(), request.trial_id(), TrialRead::kHead,
      Writer::LeaseHolder(request.lease_epoch(), "measurements are accepted"),
      NoAnswer, [&](TrialWrite& write, const storage::TrialVersion& read) {
        v1::Trial& trial = write.trial();
        const storage::TrialHead& head = write.head;
        HT_RETURN_IF_ERROR(CheckReportable(write.study, m));
        // A step already recorded: the same payload is a retry, anything
        // else an error; steps never go backwards.
        if (head.latest.has_value() && m.step() <= head.latest->step()) {
          absl::StatusOr<v1::Measurement> old = RecordedStep(write, m);
          if (!old.ok()) return old.status();
          answer_with(trial, *old);
          return absl::OkStatus();
        }
        HT_RETURN_IF_ERROR(CheckAppendFits(head, m));
        trial.set_lease_expire_time_ms(context_.Now() +
                                       leases_.LeaseMs(write.study));
        if (trial.state() == v1::Trial::ACTIVE && IsPbt(write.study.spec()) &&
            PbtDue(write.study.spec(), trial,
                   head.latest.has_value() ? head.latest->step() : -1,
                   m.step())) {
          absl::StatusOr<bool> exploited = ExploitIfBehind(write, m, read);
          if (!exploited.ok()) return exploited.status();
          if (*exploited) {
            answer_with(write.trial(), m);
            return absl::OkStatus();
          }
        }
        if (trial.state() == v1::Trial::ACTIVE) {
          HT_RETURN_IF_ERROR(ApplyEarlyStopping(write.study, trial, &m));
        }
        HT_RETURN_IF_ERROR(curve_store_.AppendMeasurementAt(trial, m, read,
                                                            head.measurements));
        context_.changes().Notify();
        answer_with(trial, m);
        return absl::OkStatus();
      }));
  return answer;
}

absl::StatusOr<bool> StudyService::ExploitIfBehind(
    TrialWrite& write, const v1::Measurement& m,
    const storage::TrialVersion& read) {
  v1::Trial& trial = write.trial();
  absl::StatusOr<std::vector<v1::Trial>> population =
      context_.store().ListTrials(trial.study_name(), storage::TrialQuery{});
  if (!population.ok()) return population.status();
  // The member whole: its head as renewed, its curve as stored (under its
  // lock), and the report.
  v1::Trial whole = trial;
  for (const v1::Trial& t : *population) {
    if (t.id() == trial.id()) *whole.mutable_measurements() = t.measurements();
  }
  *whole.add_measurements() = m;
  absl::StatusOr<bool> exploited =
      JudgePbtMember(write.study, *population, whole, context_.Now());
  if (!exploited.ok() || !*exploited) return exploited;
  HT_RETURN_IF_ERROR(context_.SaveTrial(read, whole));
  whole.clear_measurements();
  trial = std::move(whole);
  return true;
}

absl::StatusOr<v1::Measurement> StudyService::RecordedStep(
    const TrialWrite& write, const v1::Measurement& m) {
  const v1::Trial& trial = write.head.trial;
  const v1::Measurement& latest = *write.head.latest;
  std::optional<v1::Measurement> old;
  if (m.step() == latest.step()) {
    old = latest;
  } else {
    // An earlier step (rare): a retry of an earlier report, or an error.
    absl::StatusOr<v1::Trial> whole =
        context_.store().GetTrial(trial.study_name(), trial.id());
    if (!whole.ok()) return whole.status();
    for (const v1::Measurement& stored : whole->measurements()) {
      if (stored.step() == m.step()) {
        old = stored;
        break;
      }
    }
  }
  if (!old) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "measurement.step: %d is below the latest recorded step %d of %s",
        m.step(), latest.step(), TrialRef(trial)));
  }
  if (!SameMetrics(*old, m)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "measurement.step: step %d of %s was already recorded with other "
        "metrics",
        m.step(), TrialRef(trial)));
  }
  return *std::move(old);
}

absl::StatusOr<v1::Trial> StudyService::CompleteTrial(
    const v1::CompleteTrialRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateCompleteTrial(request));
  return request.worker_failed() ? GiveBackTrial(request, caller)
                                 : FinishTrial(request, caller);
}

absl::StatusOr<bool> StudyService::AnswerPausedWorker(
    const std::string& study_name, int64_t lease_epoch, double device_seconds,
    TrialWrite& write, bool settled_too) {
  v1::Trial& trial = write.trial();
  const bool paused_or_settled = trial.state() == v1::Trial::PAUSED ||
                                 (settled_too && IsFinal(trial.state()));
  if (!paused_or_settled || lease_epoch != trial.lease_epoch()) return false;
  // Its worker's word after the pause (or the end): the pause stands, and
  // the trial resumes from its checkpoint when promoted. The time it ran
  // counts.
  const storage::TrialVersion read = storage::TrialVersion::Of(trial);
  const double seconds = CountDeviceSeconds(device_seconds, write.study, trial);
  if (seconds > 0) {
    HT_RETURN_IF_ERROR(context_.SaveTrial(read, trial));
    HT_RETURN_IF_ERROR(SaveStudyCost(study_name, seconds));
  }
  return true;
}

absl::StatusOr<v1::Trial> StudyService::GiveBackTrial(
    const v1::CompleteTrialRequest& request, const Principal& caller) {
  v1::Trial answer;
  HT_RETURN_IF_ERROR(MutateTrial(
      caller, request.study_name(), request.trial_id(), TrialRead::kWhole,
      Writer::LeaseHolder(request.lease_epoch(), "its worker can give it up"),
      [&](TrialWrite& write) -> absl::StatusOr<bool> {
        absl::StatusOr<bool> late = AnswerPausedWorker(
            request.study_name(), request.lease_epoch(),
            request.device_seconds(), write, /*settled_too=*/false);
        answer = write.trial();
        return late;
      },
      [&](TrialWrite& write, const storage::TrialVersion& read) {
        v1::Trial& trial = write.trial();
        const double seconds =
            CountDeviceSeconds(request.device_seconds(), write.study, trial);
        const bool preempted = request.preempted();
        HT_RETURN_IF_ERROR(leases_.Release(
            write.study, trial,
            request.failure_reason().empty()
                ? (preempted ? "worker preempted" : "worker failed")
                : request.failure_reason(),
            preempted ? Leases::Loss::kPreempted : Leases::Loss::kWorkerLost));
        HT_RETURN_IF_ERROR(context_.SaveTrial(read, trial));
        HT_RETURN_IF_ERROR(SaveStudyCost(request.study_name(), seconds));
        answer = trial;
        return absl::OkStatus();
      }));
  return answer;
}

absl::StatusOr<v1::Trial> StudyService::FinishTrial(
    const v1::CompleteTrialRequest& request, const Principal& caller) {
  // What the request settles the trial as, worked out from the trial as
  // loaded; the same outcome again on a settled trial is a retry.
  Outcome outcome;
  v1::Trial answer;
  HT_RETURN_IF_ERROR(MutateTrial(
      caller, request.study_name(), request.trial_id(), TrialRead::kWhole,
      Writer::LeaseHolder(request.lease_epoch(), request.failed()
                                                     ? "it can be failed"
                                                     : "it can be completed"),
      [&](TrialWrite& write) -> absl::StatusOr<bool> {
        absl::StatusOr<bool> late = AnswerPausedWorker(
            request.study_name(), request.lease_epoch(),
            request.device_seconds(), write, /*settled_too=*/false);
        answer = write.trial();
        if (!late.ok() || *late) return late;
        absl::StatusOr<Outcome> wanted =
            OutcomeOf(request, write.study, write.trial());
        if (!wanted.ok()) return wanted.status();
        outcome = *std::move(wanted);
        if (!IsFinal(write.trial().state())) return false;
        HT_RETURN_IF_ERROR(CheckSameOutcome(write.trial(), outcome));
        return true;  // a retry of the call that settled it
      },
      [&](TrialWrite& write, const storage::TrialVersion& read) {
        v1::Trial& trial = write.trial();
        HT_RETURN_IF_ERROR(Settle(StudyMetrics(write.study.spec()),
                                  context_.Now(), outcome, trial));
        HT_RETURN_IF_ERROR(SaveSettled(request, write.study, read, trial));
        answer = trial;
        return absl::OkStatus();
      }));
  return answer;
}

absl::Status StudyService::SaveSettled(const v1::CompleteTrialRequest& request,
                                       const v1::Study& study,
                                       const storage::TrialVersion& read,
                                       v1::Trial& trial) {
  for (const auto& [key, value] : request.attributes()) {
    (*trial.mutable_attributes())[key] = value;
  }
  HT_RETURN_IF_ERROR(ValidateAttributes("attributes", trial.attributes()));
  const double seconds =
      CountDeviceSeconds(request.device_seconds(), study, trial);
  trial.set_end_time_ms(context_.Now());
  trial.set_lease_expire_time_ms(0);
  HT_RETURN_IF_ERROR(context_.SaveTrial(read, trial));
  return SaveStudyCost(request.study_name(), seconds);
}

absl::StatusOr<v1::HeartbeatResponse> StudyService::Heartbeat(
    const v1::HeartbeatRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateHeartbeat(request));
  v1::HeartbeatResponse response;
  HT_RETURN_IF_ERROR(MutateTrial(
      caller, request.study_name(), request.trial_id(), TrialRead::kWhole,
      Writer::LeaseHolder(request.lease_epoch(), "its lease can be renewed"),
      [&](TrialWrite& write) -> absl::StatusOr<bool> {
        // Paused at a rung, or settled (by the program its worker ran,
        // say): its worker should wrap up; nothing to renew.
        absl::StatusOr<bool> late = AnswerPausedWorker(
            request.study_name(), request.lease_epoch(),
            request.device_seconds(), write, /*settled_too=*/true);
        if (late.ok() && *late) {
          response.set_should_stop(true);
          response.set_state(write.trial().state());
        }
        return late;
      },
      [&](TrialWrite& write, const storage::TrialVersion& read) {
        v1::Trial& trial = write.trial();
        trial.set_lease_expire_time_ms(context_.Now() +
                                       leases_.LeaseMs(write.study));
        // A bare renewal is not a change watchers need to see.
        bool changed = false;
        if (!request.checkpoint_uri().empty()) {
          changed = SetCheckpoint(trial, request.checkpoint_uri(),
                                  request.checkpoint_step());
        }
        if (!request.log_path().empty() &&
            request.log_path() != trial.log_path()) {
          trial.set_log_path(request.log_path());
          changed = true;
        }
        // Device time growing is no change watchers need either: stored
        // with the renewal, which rewrites the trial anyway.
        const double seconds =
            CountDeviceSeconds(request.device_seconds(), write.study, trial);
        HT_RETURN_IF_ERROR(changed ? context_.SaveTrial(read, trial)
                                   : context_.store().RenewTrialLease(trial));
        HT_RETURN_IF_ERROR(SaveStudyCost(request.study_name(), seconds));
        response.set_should_stop(trial.state() == v1::Trial::STOPPING);
        response.set_lease_expire_time_ms(trial.lease_expire_time_ms());
        response.set_state(trial.state());
        if (trial.exploits_size() > 0) {
          *response.mutable_latest_exploit() =
              trial.exploits(trial.exploits_size() - 1);
        }
        return absl::OkStatus();
      }));
  return response;
}

absl::Status StudyService::ApplyEarlyStopping(const v1::Study& study,
                                              v1::Trial& trial,
                                              const v1::Measurement* appended) {
  if (!HasEarlyStopping(study.spec())) return absl::OkStatus();
  const optimizer::EarlyStoppingConfig rule =
      ToEarlyStoppingConfig(study.spec());
  optimizer::Decision decision;
  // The study's curves from memory (curve_cache.h), not every trial read
  // again on each report.
  HT_RETURN_IF_ERROR(curves_.Judge(
      context_.store(), study, trial, appended,
      [&](const CurveCache::Curves& kept) {
        decision = optimizer::DecideTrial(rule, kept.curves, trial.id());
        if (decision.action != optimizer::Action::kPause ||
            !rule.promote_by_model || study.state() != v1::Study::ACTIVE ||
            kept.requested > 0) {
          return;
        }
        // The model may resume it first thing (as the plan would: the
        // study active and no queued trial to go before it): then it need
        // not stop. What ToModelledCurves makes of the study's trials.
        absl::StatusOr<optimizer::SearchSpace> space =
            ToSearchSpace(study.spec());
        if (!space.ok()) return;
        ModelledCurves modelled;
        for (const optimizer::TrialCurve& curve : kept.curves) {
          auto parameters = kept.parameters.find(curve.id);
          if (parameters == kept.parameters.end()) continue;
          absl::StatusOr<optimizer::Assignment> x =
              ToAssignment("trial.parameters", *space, parameters->second);
          if (!x.ok()) continue;
          modelled.parameters.push_back(*std::move(x));
          modelled.curves.push_back(curve);
        }
        if (optimizer::ResumesAtOnce(rule, *space, modelled.curves,
                                     modelled.parameters, trial.id())) {
          decision = {};
        }
      }));
  switch (decision.action) {
    case optimizer::Action::kContinue:
      break;
    case optimizer::Action::kStop:
      HT_RETURN_IF_ERROR(Transition(trial, v1::Trial::STOPPING));
      trial.set_stop_reason(decision.reason);
      break;
    case optimizer::Action::kPause:
      HT_RETURN_IF_ERROR(Transition(trial, v1::Trial::PAUSED));
      trial.set_stop_reason(decision.reason);
      trial.set_lease_expire_time_ms(0);
      break;
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::CheckEarlyStoppingResponse> StudyService::CheckEarlyStopping(
    const v1::CheckEarlyStoppingRequest& request, const Principal& caller) {
  v1::CheckEarlyStoppingResponse response;
  // The head alone: the curve is the cache's.
  HT_RETURN_IF_ERROR(MutateTrial(
      caller, request.study_name(), request.trial_id(), TrialRead::kHead,
      Writer::StudySide(), NoAnswer,
      [&](TrialWrite& write, const storage::TrialVersion& read) {
        v1::Trial& trial = write.trial();
        if (trial.state() == v1::Trial::ACTIVE) {
          // Judged again: trials finished since its last report may
          // decide it.
          HT_RETURN_IF_ERROR(ApplyEarlyStopping(write.study, trial, nullptr));
          if (trial.state() != read.state) {
            // Saved whole, with the curve read back under the same lock.
            absl::StatusOr<v1::Trial> whole = context_.store().GetTrial(
                request.study_name(), request.trial_id());
            if (!whole.ok()) return whole.status();
            *trial.mutable_measurements() =
                std::move(*whole->mutable_measurements());
            HT_RETURN_IF_ERROR(context_.SaveTrial(read, trial));
          }
        }
        response.set_should_stop(trial.state() == v1::Trial::STOPPING ||
                                 trial.state() == v1::Trial::PAUSED);
        response.set_reason(trial.stop_reason());
        response.set_state(trial.state());
        return absl::OkStatus();
      }));
  return response;
}

absl::StatusOr<v1::Trial> StudyService::StopTrial(
    const v1::StopTrialRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateText("reason", request.reason(), kMaxReasonBytes));
  const std::string reason =
      request.reason().empty() ? "stopped by request" : request.reason();
  v1::Trial answer;
  HT_RETURN_IF_ERROR(MutateTrial(
      caller, request.study_name(), request.trial_id(), TrialRead::kWhole,
      Writer::StudySide(), NoAnswer,
      [&](TrialWrite& write, const storage::TrialVersion& read) {
        v1::Trial& trial = write.trial();
        answer = trial;
        switch (trial.state()) {
          case v1::Trial::ACTIVE:
            // Its worker finishes it (STOPPED) when it hears should_stop.
            HT_RETURN_IF_ERROR(Transition(trial, v1::Trial::STOPPING));
            trial.set_stop_reason(reason);
            break;
          case v1::Trial::REQUESTED:
          case v1::Trial::PAUSED:
            HT_RETURN_IF_ERROR(StopNow(trial, reason, context_.Now()));
            break;
          case v1::Trial::STOPPING:
          case v1::Trial::STOPPED:
            return absl::OkStatus();  // already stopped: a retry
          default:
            return absl::FailedPreconditionError(absl::StrFormat(
                "%s is %s; only REQUESTED, ACTIVE or PAUSED trials can be "
                "stopped",
                TrialRef(trial), v1::Trial::State_Name(trial.state())));
        }
        HT_RETURN_IF_ERROR(context_.SaveTrial(read, trial));
        answer = trial;
        return absl::OkStatus();
      }));
  return answer;
}

absl::StatusOr<std::vector<storage::TrialChange>>
StudyService::ListTrialChanges(const std::string& study_name, int64_t after,
                               int limit, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateStudyName("study_name", study_name));
  absl::StatusOr<StudyRuntime*> runtime = context_.RuntimeOf(study_name);
  if (!runtime.ok()) return runtime.status();
  absl::ReaderMutexLock lock(&(*runtime)->mu);
  HT_RETURN_IF_ERROR(
      context_.LoadStudyFor(caller, study_name, Access::kRead).status());
  return context_.store().ListTrialChanges(study_name, after, limit);
}

absl::StatusOr<StudyService::Watch> StudyService::OpenWatch(
    const v1::WatchTrialsRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateStudyName("study_name", request.study_name()));
  if (request.after_sequence() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "after_sequence: must be >= 0, got ", request.after_sequence()));
  }
  absl::StatusOr<StudyRuntime*> runtime =
      context_.RuntimeOf(request.study_name());
  if (!runtime.ok()) return runtime.status();
  absl::ReaderMutexLock lock(&(*runtime)->mu);
  absl::StatusOr<v1::Study> study =
      context_.LoadStudyFor(caller, request.study_name(), Access::kRead);
  if (!study.ok()) return study.status();
  return Watch{request.study_name(), study->create_time_ms(),
               request.after_sequence()};
}

absl::StatusOr<StudyService::WatchBatch> StudyService::ReadWatch(
    const Watch& watch, const Principal& caller) {
  absl::StatusOr<StudyRuntime*> runtime = context_.RuntimeOf(watch.study_name);
  if (!runtime.ok()) return runtime.status();
  // The study watched, not a study of the same name made since (which may
  // be another owner's), with its access checked again.
  absl::ReaderMutexLock lock(&(*runtime)->mu);
  absl::StatusOr<v1::Study> study =
      context_.LoadStudyFor(caller, watch.study_name, Access::kRead);
  if (!study.ok()) return study.status();
  if (study->create_time_ms() != watch.incarnation) {
    return absl::NotFoundError(
        absl::StrCat("study \"", watch.study_name, "\" was deleted"));
  }
  // Read a page at a time, so that large trials are never held beyond the
  // batch's bytes and a page.
  constexpr int kPage = 50;
  WatchBatch batch;
  int64_t after = watch.after;
  while (batch.changes.size() < static_cast<size_t>(kWatchBatchChanges)) {
    absl::StatusOr<std::vector<storage::TrialChange>> page =
        context_.store().ListTrialChanges(watch.study_name, after, kPage);
    if (!page.ok()) return page.status();
    for (storage::TrialChange& change : *page) {
      const size_t size = change.trial.ByteSizeLong();
      if (!batch.changes.empty() && batch.bytes + size > kWatchBatchBytes) {
        batch.full = true;
        return batch;
      }
      batch.bytes += size;
      after = change.sequence;
      batch.changes.push_back(std::move(change));
    }
    if (page->size() < static_cast<size_t>(kPage)) return batch;
  }
  batch.full = true;
  return batch;
}

absl::Status StudyService::WatchTrials(
    const v1::WatchTrialsRequest& request,
    const std::function<bool(const v1::TrialEvent&)>& emit,
    const std::function<bool()>& cancelled, const Principal& caller) {
  absl::StatusOr<Watch> watch = OpenWatch(request, caller);
  if (!watch.ok()) return watch.status();
  while (!cancelled()) {
    // Read the generation before the store, so a write in between wakes us.
    const uint64_t seen = context_.changes().generation();
    absl::StatusOr<WatchBatch> batch = ReadWatch(*watch, caller);
    if (!batch.ok()) return batch.status();
    v1::TrialEvent event;
    for (storage::TrialChange& change : batch->changes) {
      event.set_sequence(change.sequence);
      *event.mutable_trial() = std::move(change.trial);
      if (!emit(event)) return absl::OkStatus();
      watch->after = change.sequence;
    }
    if (batch->full) continue;
    if (!batch->changes.empty()) {
      // Busy studies change constantly: batch them rather than read the
      // store after every write.
      absl::SleepFor(kWatchPause);
    }
    context_.changes().WaitForChange(seen, kWatchPoll);
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::ListOptimalTrialsResponse> StudyService::ListOptimalTrials(
    const v1::ListOptimalTrialsRequest& request, const Principal& caller) {
  HT_RETURN_IF_ERROR(ValidateStudyName("study_name", request.study_name()));
  absl::StatusOr<StudyRuntime*> runtime =
      context_.RuntimeOf(request.study_name());
  if (!runtime.ok()) return runtime.status();
  absl::ReaderMutexLock lock(&(*runtime)->mu);
  absl::StatusOr<v1::Study> study =
      context_.LoadStudyFor(caller, request.study_name(), Access::kRead);
  if (!study.ok()) return study.status();
  storage::TrialQuery query;
  query.states = {v1::Trial::COMPLETED};
  absl::StatusOr<std::vector<v1::Trial>> trials =
      context_.store().ListTrials(request.study_name(), query);
  if (!trials.ok()) return trials.status();

  v1::ListOptimalTrialsResponse response;
  ResponseBudget budget;
  for (const v1::Trial* t :
       OptimalTrials(StudyMetrics(study->spec()), *trials)) {
    if (!budget.Take(*t)) break;  // a front too large for one answer
    *response.add_trials() = *t;
  }
  return response;
}

}  // namespace hypertune::service
