#include "service/rpc/study_import.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/rpc/conversion.h"
#include "service/rpc/priors.h"
#include "service/rpc/status_macros.h"
#include "service/rpc/study_service.h"
#include "service/rpc/validation.h"

namespace hypertune::service {
namespace {

// Trials parsed and stored at once by ImportStudy.
constexpr size_t kImportChunk = 1000;

absl::Status Invalid(const std::string& field, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

absl::Status CheckNonNegative(const std::string& field, int64_t value) {
  if (value >= 0) return absl::OkStatus();
  return Invalid(field, absl::StrCat("must be >= 0, got ", value));
}

// Imported totals (device-seconds, cost) stay far below where adding
// reports to them could overflow.
constexpr double kMaxImportedTotal = 1e18;

absl::Status CheckFiniteNonNegative(const std::string& field, double value) {
  if (value >= 0 && value <= kMaxImportedTotal) return absl::OkStatus();
  return Invalid(field,
                 absl::StrCat("must be a number from 0 to 1e18, got ", value));
}

absl::Status CheckObjective(const std::string& field, const v1::StudySpec& spec,
                            const v1::Measurement& final_measurement) {
  if (MaximizedObjective(spec, final_measurement)) return absl::OkStatus();
  return Invalid(
      absl::StrCat(field, ".final_measurement.metrics"),
      absl::StrFormat("missing the objective \"%s\"", spec.metrics(0).name()));
}

}  // namespace

absl::StatusOr<ImportedStudy> ReadImportStream(
    absl::FunctionRef<bool(v1::ImportStudyRequest&)> next) {
  ImportedStudy imported;
  v1::ImportStudyRequest message;
  size_t bytes = 0;
  bool first = true;
  while (next(message)) {
    if (first != message.has_study()) {
      return absl::InvalidArgumentError(
          first ? "study: the first message of ImportStudy must carry the study"
                : "study: only the first message of ImportStudy carries the "
                  "study");
    }
    bytes += message.ByteSizeLong();
    if (bytes > kMaxImportBytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "trials: the import passes %d bytes, the limit", kMaxImportBytes));
    }
    if (first) imported.study = std::move(*message.mutable_study());
    for (const v1::Trial& trial : message.trials()) {
      imported.trials.push_back(trial.SerializeAsString());
    }
    message.Clear();
    first = false;
  }
  if (first) {
    return absl::InvalidArgumentError(
        "study: ImportStudy received no message carrying the study");
  }
  return imported;
}

absl::Status PrepareImportedTrial(const v1::StudySpec& spec,
                                  const optimizer::SearchSpace& space,
                                  const std::string& study_name, int index,
                                  int64_t now, v1::Trial& trial) {
  const std::string field = absl::StrCat("trials[", index, "]");
  auto sub = [&](const char* name) { return absl::StrCat(field, ".", name); };
  if (trial.id() != index + 1) {
    return Invalid(sub("id"),
                   absl::StrFormat("must be %d, got %d (trials come in id "
                                   "order, dense from 1)",
                                   index + 1, trial.id()));
  }
  if (!v1::Trial::State_IsValid(trial.state()) ||
      trial.state() == v1::Trial::STATE_UNSPECIFIED) {
    return Invalid(sub("state"), "must be a trial state");
  }
  trial.set_study_name(study_name);

  absl::StatusOr<optimizer::Assignment> x =
      ToAssignment(sub("parameters"), space, trial.parameters());
  if (x.ok()) {
    *trial.mutable_parameters() = ToParameterValues(space, *x);
  } else if (trial.state() != v1::Trial::FAILED) {
    // A FAILED trial may have failed before all its parameters were chosen
    // (an Optuna trial, say); the model leaves FAILED trials out.
    return x.status();
  }
  for (int j = 0; j < trial.measurements_size(); ++j) {
    HT_RETURN_IF_ERROR(
        ValidateMeasurement(absl::StrCat(field, ".measurements[", j, "]"),
                            trial.measurements(j), true));
  }
  if (trial.has_final_measurement()) {
    HT_RETURN_IF_ERROR(ValidateMeasurement(sub("final_measurement"),
                                           trial.final_measurement(), false));
  }
  for (int a = 0; a < trial.earlier_attempts_size(); ++a) {
    const v1::Attempt& attempt = trial.earlier_attempts(a);
    const std::string at = absl::StrCat(field, ".earlier_attempts[", a, "]");
    for (int j = 0; j < attempt.measurements_size(); ++j) {
      HT_RETURN_IF_ERROR(
          ValidateMeasurement(absl::StrCat(at, ".measurements[", j, "]"),
                              attempt.measurements(j), true));
    }
    HT_RETURN_IF_ERROR(
        ValidateClientId(absl::StrCat(at, ".client_id"), attempt.client_id()));
    HT_RETURN_IF_ERROR(ValidateText(absl::StrCat(at, ".end_reason"),
                                    attempt.end_reason(), kMaxReasonBytes));
    HT_RETURN_IF_ERROR(CheckNonNegative(absl::StrCat(at, ".end_time_ms"),
                                        attempt.end_time_ms()));
    HT_RETURN_IF_ERROR(CheckFiniteNonNegative(
        absl::StrCat(at, ".device_seconds"), attempt.device_seconds()));
  }
  if (trial.state() == v1::Trial::COMPLETED) {
    HT_RETURN_IF_ERROR(CheckObjective(field, spec, trial.final_measurement()));
  } else if (trial.warm_start()) {
    return Invalid(sub("warm_start"), "only a COMPLETED trial is a warm start");
  }
  HT_RETURN_IF_ERROR(ValidateClientId(sub("client_id"), trial.client_id()));
  HT_RETURN_IF_ERROR(ValidateAttributes(sub("attributes"), trial.attributes()));
  for (const auto& [name, text, limit] :
       {std::tuple{"checkpoint_uri", &trial.checkpoint_uri(), kMaxUriBytes},
        std::tuple{"log_path", &trial.log_path(), kMaxUriBytes},
        std::tuple{"infeasible_reason", &trial.infeasible_reason(),
                   kMaxReasonBytes},
        std::tuple{"failure_reason", &trial.failure_reason(), kMaxReasonBytes},
        std::tuple{"stop_reason", &trial.stop_reason(), kMaxReasonBytes}}) {
    HT_RETURN_IF_ERROR(ValidateText(sub(name), *text, limit));
  }
  for (const auto& [name, value] :
       {std::pair{"create_time_ms", trial.create_time_ms()},
        std::pair{"start_time_ms", trial.start_time_ms()},
        std::pair{"end_time_ms", trial.end_time_ms()},
        std::pair{"lease_expire_time_ms", trial.lease_expire_time_ms()},
        std::pair{"lease_epoch", trial.lease_epoch()},
        std::pair{"retry_count", int64_t{trial.retry_count()}},
        std::pair{"attempt", int64_t{trial.attempt()}},
        std::pair{"checkpoint_step", trial.checkpoint_step()}}) {
    HT_RETURN_IF_ERROR(CheckNonNegative(sub(name), value));
  }
  HT_RETURN_IF_ERROR(
      CheckFiniteNonNegative(sub("device_seconds"), trial.device_seconds()));
  HT_RETURN_IF_ERROR(CheckFiniteNonNegative(sub("cost"), trial.cost()));
  HT_RETURN_IF_ERROR(CheckFiniteNonNegative(sub("lease_device_seconds"),
                                            trial.lease_device_seconds()));

  // No worker of this server holds a trial: see the header comment.
  switch (trial.state()) {
    case v1::Trial::ACTIVE:
      trial.set_state(v1::Trial::REQUESTED);
      trial.set_lease_expire_time_ms(0);
      break;
    case v1::Trial::STOPPING:
      trial.set_state(v1::Trial::STOPPED);
      trial.set_lease_expire_time_ms(0);
      trial.set_end_time_ms(now);
      if (!trial.has_final_measurement() && trial.measurements_size() > 0) {
        *trial.mutable_final_measurement() =
            trial.measurements(trial.measurements_size() - 1);
      }
      break;
    case v1::Trial::REQUESTED:
    case v1::Trial::PAUSED:
      trial.set_lease_expire_time_ms(0);
      break;
    default:
      break;
  }
  return ValidateTrialSize(field, trial);
}

absl::StatusOr<v1::Trial> WarmStartTrial(const std::string& field,
                                         const v1::StudySpec& spec,
                                         const optimizer::SearchSpace& space,
                                         const v1::Trial& given, int64_t now) {
  if (given.state() != v1::Trial::STATE_UNSPECIFIED &&
      given.state() != v1::Trial::COMPLETED) {
    return Invalid(absl::StrCat(field, ".state"),
                   absl::StrCat("must be COMPLETED (a known result), got ",
                                v1::Trial::State_Name(given.state())));
  }
  absl::StatusOr<optimizer::Assignment> x = ToAssignment(
      absl::StrCat(field, ".parameters"), space, given.parameters());
  if (!x.ok()) return x.status();
  HT_RETURN_IF_ERROR(
      ValidateMeasurement(absl::StrCat(field, ".final_measurement"),
                          given.final_measurement(), true));
  HT_RETURN_IF_ERROR(CheckObjective(field, spec, given.final_measurement()));
  v1::Trial trial;
  trial.set_state(v1::Trial::COMPLETED);
  *trial.mutable_parameters() = ToParameterValues(space, *x);
  *trial.mutable_final_measurement() = given.final_measurement();
  HT_RETURN_IF_ERROR(ValidateAttributes(absl::StrCat(field, ".attributes"),
                                        given.attributes()));
  *trial.mutable_attributes() = given.attributes();
  trial.set_warm_start(true);
  trial.set_create_time_ms(now);
  trial.set_start_time_ms(now);
  trial.set_end_time_ms(now);
  HT_RETURN_IF_ERROR(ValidateTrialSize(field, trial));
  return trial;
}

// ----- StudyService's import methods -----

absl::StatusOr<v1::Study> StudyService::ImportStudy(
    v1::Study study, std::vector<v1::Trial> trials, const Principal& caller,
    const std::function<bool()>& abandoned) {
  ImportedStudy imported{std::move(study), {}};
  imported.trials.reserve(trials.size());
  for (const v1::Trial& trial : trials) {
    imported.trials.push_back(trial.SerializeAsString());
  }
  trials.clear();
  return ImportStudy(std::move(imported), caller, abandoned);
}

absl::StatusOr<v1::Study> StudyService::ImportStudy(
    ImportedStudy imported, const Principal& caller,
    const std::function<bool()>& abandoned) {
  v1::Study& study = imported.study;
  std::vector<std::string>& trials = imported.trials;
  auto gone = [&] { return abandoned != nullptr && abandoned(); };
  const absl::Status cancelled = absl::CancelledError(absl::StrFormat(
      "ImportStudy of \"%s\": the client cancelled or passed its deadline "
      "before the import was stored; nothing was stored",
      study.name()));
  // The owner is whoever imports, as for CreateStudy.
  study.set_owner(caller.owner);
  study.clear_trial_counts();
  HT_RETURN_IF_ERROR(ValidateStudy(study));
  v1::StudySpec& spec = *study.mutable_spec();
  if (spec.algorithm() == v1::ALGORITHM_UNSPECIFIED) {
    spec.set_algorithm(context_.options().default_algorithm);
  }
  HT_RETURN_IF_ERROR(ToOptimizerAlgorithm(spec.algorithm()).status());
  absl::StatusOr<optimizer::SearchSpace> space = ToSearchSpace(spec);
  if (!space.ok()) return space.status();
  // As CreateStudy: the importer must be allowed to read each prior.
  HT_RETURN_IF_ERROR(BindPriors(context_, caller, study));
  if (study.state() == v1::Study::STATE_UNSPECIFIED) {
    study.set_state(v1::Study::ACTIVE);
  }
  if (study.state() != v1::Study::ACTIVE &&
      study.state() != v1::Study::PAUSED &&
      study.state() != v1::Study::COMPLETED) {
    return Invalid("study.state", "must be ACTIVE, PAUSED or COMPLETED");
  }
  HT_RETURN_IF_ERROR(
      CheckNonNegative("study.create_time_ms", study.create_time_ms()));
  const int64_t now = context_.Now();
  if (study.create_time_ms() == 0) study.set_create_time_ms(now);
  HT_RETURN_IF_ERROR(
      CheckFiniteNonNegative("study.device_seconds", study.device_seconds()));
  HT_RETURN_IF_ERROR(CheckFiniteNonNegative("study.cost", study.cost()));
  // Every trial checked before any is stored, one parsed at a time; kept as
  // it is to be stored.
  int64_t warm_start = 0;
  for (size_t i = 0; i < trials.size(); ++i) {
    v1::Trial trial;
    if (!trial.ParseFromString(trials[i])) {
      return Invalid(absl::StrCat("trials[", i, "]"), "not a Trial message");
    }
    HT_RETURN_IF_ERROR(PrepareImportedTrial(spec, *space, study.name(),
                                            static_cast<int>(i), now, trial));
    if (trial.warm_start()) ++warm_start;
    trials[i] = trial.SerializeAsString();
  }

  StudyRuntime& runtime = context_.runtimes().For(study.name());
  absl::MutexLock lock(&runtime.mu);
  if (gone()) return cancelled;
  // Stored IMPORTING until the last chunk is in, then given its state in
  // one write: a server killed in between removes it when it starts again
  // (RemoveInterruptedImports), so the import lands whole or not at all.
  const v1::Study::State imported_state = study.state();
  study.set_state(v1::Study::IMPORTING);
  HT_RETURN_IF_ERROR(context_.store().CreateStudy(study));
  // Stored a chunk at a time, each freed once stored; the study's lock
  // keeps every call on it waiting until the last chunk is in.
  absl::Status stored = absl::OkStatus();
  for (size_t begin = 0; begin < trials.size() && stored.ok();
       begin += kImportChunk) {
    const size_t end = std::min(trials.size(), begin + kImportChunk);
    std::vector<v1::Trial> chunk(end - begin);
    for (size_t i = begin; i < end; ++i) {
      chunk[i - begin].ParseFromString(trials[i]);
      std::string().swap(trials[i]);
    }
    stored = context_.SaveNewTrials(study.name(), std::move(chunk)).status();
    if (stored.ok() && gone()) stored = cancelled;
  }
  // A caller gone meanwhile never learns the import landed: undo it, so
  // that its retry does not meet ALREADY_EXISTS.
  if (stored.ok() && gone()) stored = cancelled;
  if (stored.ok()) {
    stored = context_.store().ModifyStudy(
        study.name(), [&](v1::Study& s) { s.set_state(imported_state); });
  }
  if (!stored.ok()) {
    // All or nothing: the study goes with its trials.
    context_.store().DeleteStudy(study.name()).IgnoreError();
    return stored;
  }
  {
    absl::MutexLock count_lock(&runtime.warm_start_mu);
    runtime.warm_start = {study.create_time_ms(), warm_start};
  }
  runtime.lease_check = {};
  return LoadStudyWithCounts(caller, study.name());
}

absl::Status StudyService::RemoveInterruptedImports() {
  absl::StatusOr<std::vector<v1::Study>> studies =
      context_.store().ListStudies();
  if (!studies.ok()) return studies.status();
  for (const v1::Study& study : *studies) {
    if (study.state() != v1::Study::IMPORTING) continue;
    HT_RETURN_IF_ERROR(context_.store().DeleteStudy(study.name()));
    std::cerr << "hypertuned: removed study \"" << study.name()
              << "\", whose import was cut short (import it again)\n";
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::ImportTrialsResponse> StudyService::ImportTrials(
    const v1::ImportTrialsRequest& request, const Principal& caller) {
  const std::string& name = request.study_name();
  HT_RETURN_IF_ERROR(ValidateStudyName("study_name", name));
  absl::flat_hash_set<std::string> sources;
  for (int i = 0; i < request.from_studies_size(); ++i) {
    const std::string field = absl::StrCat("from_studies[", i, "]");
    const std::string& source = request.from_studies(i);
    HT_RETURN_IF_ERROR(ValidateStudyName(field, source));
    if (source == name) {
      return Invalid(field, "a study cannot warm-start from itself");
    }
    if (!sources.insert(source).second) {
      return Invalid(field, absl::StrCat("\"", source, "\" is named twice"));
    }
  }
  // The sources' COMPLETED trials first, each under its own study's lock
  // (never two studies' locks at once); they never change once COMPLETED.
  std::vector<v1::Trial> candidates;
  for (const std::string& source : request.from_studies()) {
    absl::StatusOr<StudyRuntime*> runtime = context_.RuntimeOf(source);
    if (!runtime.ok()) return runtime.status();
    absl::ReaderMutexLock lock(&(*runtime)->mu);
    HT_RETURN_IF_ERROR(
        context_.LoadStudyFor(caller, source, Access::kRead).status());
    storage::TrialQuery query;
    query.states = {v1::Trial::COMPLETED};
    absl::StatusOr<std::vector<v1::Trial>> completed =
        context_.store().ListTrials(source, query);
    if (!completed.ok()) return completed.status();
    for (v1::Trial& t : *completed) candidates.push_back(std::move(t));
  }

  absl::StatusOr<StudyRuntime*> runtime = context_.RuntimeOf(name);
  if (!runtime.ok()) return runtime.status();
  absl::MutexLock lock(&(*runtime)->mu);
  absl::StatusOr<v1::Study> study =
      context_.LoadStudyFor(caller, name, Access::kWrite);
  if (!study.ok()) return study.status();
  absl::StatusOr<optimizer::SearchSpace> space = ToSearchSpace(study->spec());
  if (!space.ok()) return space.status();
  const int64_t now = context_.Now();
  std::vector<v1::Trial> trials;
  for (int i = 0; i < request.trials_size(); ++i) {
    absl::StatusOr<v1::Trial> trial =
        WarmStartTrial(absl::StrCat("trials[", i, "]"), study->spec(), *space,
                       request.trials(i), now);
    if (!trial.ok()) return trial.status();
    trials.push_back(*std::move(trial));
  }
  v1::ImportTrialsResponse response;
  for (const v1::Trial& candidate : candidates) {
    v1::Trial given;
    *given.mutable_parameters() = candidate.parameters();
    *given.mutable_final_measurement() = candidate.final_measurement();
    absl::StatusOr<v1::Trial> trial =
        WarmStartTrial("trial", study->spec(), *space, given, now);
    if (!trial.ok()) {
      response.set_skipped(response.skipped() + 1);
      continue;
    }
    trials.push_back(*std::move(trial));
  }
  if (trials.empty()) return response;
  const int64_t count = static_cast<int64_t>(trials.size());
  absl::StatusOr<std::vector<v1::Trial>> stored =
      context_.SaveNewTrials(name, std::move(trials));
  if (!stored.ok()) return stored.status();
  response.set_imported(count);
  response.set_first_trial_id(stored->front().id());
  absl::MutexLock count_lock(&(*runtime)->warm_start_mu);
  if ((*runtime)->warm_start.study_created_ms == study->create_time_ms()) {
    (*runtime)->warm_start.n += count;
  }
  return response;
}

}  // namespace hypertune::service
