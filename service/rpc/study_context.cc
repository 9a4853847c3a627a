#include "service/rpc/study_context.h"

#include <chrono>
#include <utility>

#include "service/rpc/status_macros.h"

namespace hypertune::service {

StudyContext::StudyContext(storage::StudyStore* store, ServiceOptions options)
    : store_(store),
      options_(std::move(options)),
      fits_(options_.fit_threads > 0
                ? std::make_unique<BackgroundPool>(options_.fit_threads)
                : nullptr) {}

int64_t StudyContext::Now() const {
  if (options_.now_ms) return options_.now_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::Status StudyContext::SaveTrial(const storage::TrialVersion& read,
                                     const v1::Trial& trial) {
  HT_RETURN_IF_ERROR(store_->UpdateTrialIf(trial, read));
  changes_.Notify();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Trial>> StudyContext::SaveNewTrials(
    const std::string& study_name, std::vector<v1::Trial> trials) {
  absl::StatusOr<std::vector<v1::Trial>> stored =
      store_->CreateTrials(study_name, std::move(trials));
  if (stored.ok()) changes_.Notify();
  return stored;
}

absl::StatusOr<v1::Study> StudyContext::LoadStudyFor(const Principal& caller,
                                                     const std::string& name,
                                                     Access access) {
  absl::StatusOr<v1::Study> study = store_->GetStudy(name);
  if (!study.ok()) return study.status();
  HT_RETURN_IF_ERROR(CheckAccess(caller, *study, access));
  return study;
}

absl::StatusOr<StudyRuntime*> StudyContext::RuntimeOf(const std::string& name) {
  if (StudyRuntime* runtime = runtimes_.Find(name)) return runtime;
  HT_RETURN_IF_ERROR(store_->GetStudy(name).status());
  return &runtimes_.For(name);
}

absl::StatusOr<int64_t> StudyContext::WarmStartTrials(StudyRuntime& runtime,
                                                      const v1::Study& study) {
  absl::MutexLock lock(&runtime.warm_start_mu);
  if (runtime.warm_start.study_created_ms == study.create_time_ms()) {
    return runtime.warm_start.n;
  }
  storage::TrialQuery query;
  query.states = {v1::Trial::COMPLETED};
  absl::StatusOr<std::vector<v1::Trial>> completed =
      store_->ListTrials(study.name(), query);
  if (!completed.ok()) return completed.status();
  int64_t n = 0;
  for (const v1::Trial& t : *completed) n += t.warm_start() ? 1 : 0;
  runtime.warm_start = {study.create_time_ms(), n};
  return n;
}

}  // namespace hypertune::service
