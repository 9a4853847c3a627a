// StudyContext: what the parts of the service share (the store, the
// options, each study's runtime, the change feed, the fit threads), and the
// few steps every part takes the same way: read a study for a caller, save
// a trial and wake the watchers, tell the time.
//
// Thread-safe.
#ifndef HYPERTUNE_SERVICE_RPC_STUDY_CONTEXT_H_
#define HYPERTUNE_SERVICE_RPC_STUDY_CONTEXT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"
#include "service/rpc/access.h"
#include "service/rpc/change_notifier.h"
#include "service/rpc/study_runtime.h"
#include "service/server/background_pool.h"
#include "storage/study_store.h"

namespace hypertune::service {

class Metrics;

struct ServiceOptions {
  // The algorithm of studies that name none. Default GP_BANDIT.
  v1::Algorithm default_algorithm = v1::GP_BANDIT;
  // How long a granted trial is held before its lease runs out, for studies
  // that set no lease_seconds. Default 60 s.
  int64_t lease_ms = 60'000;
  // Retries of a trial whose worker was lost, for studies that set no
  // max_retries. Default 2.
  int max_retries = 2;
  // The clock, in unix milliseconds. Default: the system clock.
  std::function<int64_t()> now_ms;
  // Where suggestion latencies and lease expiries are counted (/metrics);
  // null: nowhere. REQUIRES: outlives the service.
  Metrics* metrics = nullptr;
  // Threads that run GP_BANDIT's large model fits off the request path
  // (GpBanditOptions::background_fits). 0: on the request path, so that a
  // seed and a history always give the same suggestion. Default 1.
  int fit_threads = 1;
  // The folder Backup writes in (backup_path.h); empty: Backup is refused.
  // hypertuned's default: the SQLite database's folder.
  std::string backup_dir;
};

class StudyContext {
 public:
  // REQUIRES: `store` outlives the context.
  StudyContext(storage::StudyStore* store, ServiceOptions options);

  storage::StudyStore& store() const { return *store_; }
  const ServiceOptions& options() const { return options_; }
  StudyRuntimes& runtimes() { return runtimes_; }
  ChangeNotifier& changes() { return changes_; }
  // Null for fit_threads 0.
  BackgroundPool* fits() const { return fits_.get(); }

  int64_t Now() const;
  // Stores `trial`, which the caller read as `read` and changed (its state
  // only through trial_state.h), if the stored trial is still `read`
  // (ABORTED otherwise); wakes the watchers.
  absl::Status SaveTrial(const storage::TrialVersion& read,
                         const v1::Trial& trial);
  // Stores new trials of study `study_name` in one transaction (ids in
  // order); wakes the watchers.
  absl::StatusOr<std::vector<v1::Trial>> SaveNewTrials(
      const std::string& study_name, std::vector<v1::Trial> trials);
  // Study `name` if `caller` may `access` it. REQUIRES: the study's lock
  // held (in some mode) when the caller goes on to act on the study.
  absl::StatusOr<v1::Study> LoadStudyFor(const Principal& caller,
                                         const std::string& name,
                                         Access access);
  // The runtime of study `name`, made on first use of a study that exists
  // (NOT_FOUND otherwise), so that calls naming studies that never existed
  // leave nothing behind.
  absl::StatusOr<StudyRuntime*> RuntimeOf(const std::string& name);
  // How many warm-start trials `study` holds (they do not count against
  // max_trials), counted once per study incarnation and kept by the
  // imports. REQUIRES: runtime.mu held.
  absl::StatusOr<int64_t> WarmStartTrials(StudyRuntime& runtime,
                                          const v1::Study& study)
      ABSL_SHARED_LOCKS_REQUIRED(runtime.mu);

 private:
  storage::StudyStore* const store_;
  const ServiceOptions options_;
  // Before runtimes_: their suggesters hand it jobs until they go.
  std::unique_ptr<BackgroundPool> fits_;
  StudyRuntimes runtimes_;
  ChangeNotifier changes_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_STUDY_CONTEXT_H_
