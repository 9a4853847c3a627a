// StudyService: the logic of every hypertune.v1 RPC, on API messages and
// absl::Status, independent of gRPC so that tests and fuzzers can drive it
// directly. Each method validates its request, takes the study's locks
// where it reads and then writes (study_runtime.h), calls the optimizer and
// saves through the store.
// grpc_service.h adapts it to gRPC.
//
// Thread-safe: methods may run concurrently. Calls that change a study as a
// whole are serialized per study; calls that change one trial only against
// those and against calls on the same trial.
#ifndef HYPERTUNE_SERVICE_STUDY_SERVICE_H_
#define HYPERTUNE_SERVICE_STUDY_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"
#include "service/access.h"
#include "service/background_pool.h"
#include "service/change_notifier.h"
#include "service/conversion.h"
#include "service/study_import.h"
#include "service/study_runtime.h"
#include "service/suggestion_plan.h"
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

class StudyService {
 public:
  // REQUIRES: `store` outlives the service.
  StudyService(storage::StudyStore* store, ServiceOptions options);

  // Every method acts for `caller` and checks its access (access.h) on the
  // study row it reads under the same lock as the work it does. The default
  // caller is a server without auth.
  absl::StatusOr<v1::Study> CreateStudy(
      const v1::CreateStudyRequest& request,
      const Principal& caller = Principal::AuthOff());
  absl::StatusOr<v1::Study> GetStudy(
      const v1::GetStudyRequest& request,
      const Principal& caller = Principal::AuthOff());
  // The studies `caller` may read.
  absl::StatusOr<v1::ListStudiesResponse> ListStudies(
      const v1::ListStudiesRequest& request,
      const Principal& caller = Principal::AuthOff());
  absl::StatusOr<v1::DeleteStudyResponse> DeleteStudy(
      const v1::DeleteStudyRequest& request,
      const Principal& caller = Principal::AuthOff());
  absl::StatusOr<v1::Study> SetStudyState(
      const v1::SetStudyStateRequest& request,
      const Principal& caller = Principal::AuthOff());
  // Changes the spec fields of request.update_mask (study_update.h), records
  // the change in the study's history and reopens a COMPLETED study whose
  // budget it raises.
  absl::StatusOr<v1::Study> UpdateStudy(
      const v1::UpdateStudyRequest& request,
      const Principal& caller = Principal::AuthOff());
  // Sets the study's budget, spec.max_trials (0 = unlimited), for `caller`
  // with write access. INVALID_ARGUMENT naming max_trials unless it is 0 or
  // above the trials created so far (and at most 2^31 - 1). Raising the
  // budget (a larger number, or 0 after a limit) of a COMPLETED study makes
  // it ACTIVE again; other states are kept. A narrow stand-in, used by the
  // HTTP API's budget button: UpdateStudy of max_trials, refusing a budget
  // the study has already used.
  absl::StatusOr<v1::Study> SetMaxTrials(
      const std::string& name, int64_t max_trials,
      const Principal& caller = Principal::AuthOff());
  // A consistent copy of the live database at request.destination_path, made
  // while serving (storage's online backup). An admin's call when auth is on.
  absl::StatusOr<v1::BackupResponse> Backup(
      const v1::BackupRequest& request,
      const Principal& caller = Principal::AuthOff());
  // Gives the study to request.owner: an admin may for any study, an owner
  // for its own. The caller checks that the new owner is known.
  absl::StatusOr<v1::Study> SetStudyOwner(
      const v1::SetStudyOwnerRequest& request,
      const Principal& caller = Principal::AuthOff());

  absl::StatusOr<v1::SuggestTrialsResponse> SuggestTrials(
      const v1::SuggestTrialsRequest& request,
      const Principal& caller = Principal::AuthOff());
  absl::StatusOr<v1::Trial> CreateTrial(
      const v1::CreateTrialRequest& request,
      const Principal& caller = Principal::AuthOff());
  absl::StatusOr<v1::Trial> GetTrial(
      const v1::GetTrialRequest& request,
      const Principal& caller = Principal::AuthOff());
  absl::StatusOr<v1::ListTrialsResponse> ListTrials(
      const v1::ListTrialsRequest& request,
      const Principal& caller = Principal::AuthOff());
  absl::StatusOr<v1::Trial> AddMeasurement(
      const v1::AddMeasurementRequest& request,
      const Principal& caller = Principal::AuthOff());
  absl::StatusOr<v1::Trial> CompleteTrial(
      const v1::CompleteTrialRequest& request,
      const Principal& caller = Principal::AuthOff());
  absl::StatusOr<v1::ListOptimalTrialsResponse> ListOptimalTrials(
      const v1::ListOptimalTrialsRequest& request,
      const Principal& caller = Principal::AuthOff());
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest& request,
      const Principal& caller = Principal::AuthOff());

  // Early stopping. A study's rule (spec.early_stopping) judges each ACTIVE
  // trial when it reports a measurement: STOPPING (its worker completes it,
  // STOPPED) or, with ASHA's pause_at_rungs, PAUSED at a rung (resumed from
  // its checkpoint when promoted: SuggestTrials hands promotions out before
  // new configurations). CheckEarlyStopping judges the trial again now;
  // StopTrial stops it by hand (REQUESTED and PAUSED ones at once).
  absl::StatusOr<v1::CheckEarlyStoppingResponse> CheckEarlyStopping(
      const v1::CheckEarlyStoppingRequest& request,
      const Principal& caller = Principal::AuthOff());
  absl::StatusOr<v1::Trial> StopTrial(
      const v1::StopTrialRequest& request,
      const Principal& caller = Principal::AuthOff());

  // Streams the study's trial changes after request.after_sequence: calls
  // `emit` with each trial at its latest change, in sequence order, then
  // waits for more. A trial that changes several times between two reads is
  // sent once, as it is now, so a watcher that resumes from the last
  // sequence it saw ends with every trial as stored, nothing missed or
  // repeated. Returns OK once `emit` returns false or `cancelled` returns
  // true (polled at least every 250 ms); NOT_FOUND if the study does not
  // exist or is deleted meanwhile.
  absl::Status WatchTrials(
      const v1::WatchTrialsRequest& request,
      const std::function<bool(const v1::TrialEvent&)>& emit,
      const std::function<bool()>& cancelled,
      const Principal& caller = Principal::AuthOff());
  // WatchTrials in steps, for a caller that must not block a thread (the
  // gRPC stream: watch_streams.h). OpenWatch checks the request and the
  // caller's access and returns where the watch starts; ReadWatch, the next
  // changes (at most a batch) after `watch.after`, with the access checked
  // again and NOT_FOUND once the study watched is deleted. The caller
  // advances `after` as it delivers them. changes() counts trial writes.
  struct Watch {
    std::string study_name;
    int64_t incarnation = 0;  // the study's create_time_ms
    int64_t after = 0;
  };
  absl::StatusOr<Watch> OpenWatch(const v1::WatchTrialsRequest& request,
                                  const Principal& caller);
  absl::StatusOr<std::vector<storage::TrialChange>> ReadWatch(
      const Watch& watch, const Principal& caller);
  // True when a batch was so full that more changes may be waiting.
  static bool WatchBatchFull(size_t changes);
  ChangeNotifier& changes() { return changes_; }

  // One page of the change feed WatchTrials streams: at most `limit` changes
  // after sequence `after`.
  absl::StatusOr<std::vector<storage::TrialChange>> ListTrialChanges(
      const std::string& study_name, int64_t after, int limit,
      const Principal& caller = Principal::AuthOff());

  // Import (study_import.h, defined in study_import.cc). ImportStudy
  // recreates an exported study with its trials, all or nothing;
  // ALREADY_EXISTS if the name is taken; CANCELLED, storing nothing, when
  // `abandoned` (null: never) says the caller is gone. ImportTrials adds
  // warm-start results to a study.
  // The trials arrive serialized (ImportedStudy), and are parsed a chunk at
  // a time, so that an import's memory stays near its size on the wire.
  // Each chunk is its own transaction: a server killed while they are
  // stored leaves the study with part of its trials (delete it and import
  // again); every other failure stores nothing.
  absl::StatusOr<v1::Study> ImportStudy(
      ImportedStudy imported, const Principal& caller = Principal::AuthOff(),
      const std::function<bool()>& abandoned = nullptr);
  absl::StatusOr<v1::Study> ImportStudy(
      v1::Study study, std::vector<v1::Trial> trials,
      const Principal& caller = Principal::AuthOff(),
      const std::function<bool()>& abandoned = nullptr);
  absl::StatusOr<v1::ImportTrialsResponse> ImportTrials(
      const v1::ImportTrialsRequest& request,
      const Principal& caller = Principal::AuthOff());

  // Leases. A running trial whose lease ran out goes back to REQUESTED
  // (keeping its measurements and checkpoint) while it has retries left, else
  // it is FAILED. ExpireLeases does this for every study; a sweeper calls it
  // periodically, and SuggestTrials does it for its own study first.
  absl::Status ExpireLeases();
  // Gives every running trial a full lease from now: server downtime never
  // costs a worker its trial. Called once when the server starts.
  absl::Status ExtendLeasesOnStart();

 private:
  int64_t Now() const;
  // Stores `trial`, which the caller read as `read` and changed (its state
  // only through trial_state.h), if the stored trial is still `read`
  // (ABORTED otherwise); wakes the watchers.
  absl::Status SaveTrial(const storage::TrialVersion& read,
                         const v1::Trial& trial);
  absl::StatusOr<std::vector<v1::Trial>> SaveNewTrials(
      const std::string& study_name, std::vector<v1::Trial> trials);
  // Applies the study's early-stopping rule to ACTIVE `trial` (with its
  // newest measurement, not yet saved): STOPPING or PAUSED with the reason,
  // or unchanged. REQUIRES: the trial (TrialLock) or the study locked.
  absl::Status ApplyEarlyStopping(const v1::Study& study, v1::Trial& trial);
  // Cost accounting: `seconds` of device time more for `trial` (and its
  // cost at the study's price); SaveStudyCost adds them to the stored
  // study's totals.
  static void AddDeviceSeconds(double seconds, const v1::Study& study,
                               v1::Trial& trial);
  absl::Status SaveStudyCost(const std::string& study_name, double seconds);
  // The study and trial a request names. REQUIRES: the trial (TrialLock) or
  // the study locked.
  struct StudyAndTrial {
    v1::Study study;
    v1::Trial trial;
  };
  absl::StatusOr<StudyAndTrial> LoadStudyAndTrial(const Principal& caller,
                                                  const std::string& study_name,
                                                  int64_t trial_id);
  // Study `name` if `caller` may `access` it. REQUIRES: the study's lock
  // held (in some mode) when the caller goes on to act on the study.
  absl::StatusOr<v1::Study> LoadStudyFor(const Principal& caller,
                                         const std::string& name,
                                         Access access);
  // The study with its trial counts filled in, if `caller` may read it.
  absl::StatusOr<v1::Study> LoadStudyWithCounts(const Principal& caller,
                                                const std::string& name);
  // The runtime of study `name`, made on first use of a study that exists
  // (NOT_FOUND otherwise), so that calls naming studies that never existed
  // leave nothing behind.
  absl::StatusOr<StudyRuntime*> RuntimeOf(const std::string& name);
  // Grants `trial` to `client_id`: ACTIVE, a new lease epoch and expiry.
  absl::Status Grant(const v1::Study& study, v1::Trial& trial,
                     const std::string& client_id, int64_t now) const;
  int64_t LeaseMs(const v1::Study& study) const;
  // How many warm-start trials `study` holds (they do not count against
  // max_trials), counted once per study incarnation and kept by the
  // imports. REQUIRES: runtime.mu held.
  absl::StatusOr<int64_t> WarmStartTrials(StudyRuntime& runtime,
                                          const v1::Study& study)
      ABSL_SHARED_LOCKS_REQUIRED(runtime.mu);
  // How a trial lost its worker: the worker itself (its lease ran out, it
  // failed), which spends max_retries, or its machine, taken away with
  // notice (a spot preemption), which spends max_preemptions.
  enum class Loss { kWorkerLost, kPreempted };
  // The worker holding `trial` is gone (`reason`, `loss`): back to
  // REQUESTED while that loss's allowance remains, else FAILED (STOPPING
  // ones are STOPPED).
  absl::Status Release(const v1::Study& study, v1::Trial& trial,
                       const std::string& reason, Loss loss) const;
  // Release of the trial read as `read`, saved; returns it as stored.
  absl::StatusOr<v1::Trial> ReleaseAndSave(const v1::Study& study,
                                           const v1::Trial& read,
                                           const std::string& reason);
  // Expires the run-out leases of active study `name` if any may have run
  // out, taking runtime.mu exclusively only then.
  absl::Status ExpireLeasesIfDue(StudyRuntime& runtime, const std::string& name,
                                 int64_t now) ABSL_LOCKS_EXCLUDED(runtime.mu);
  // Expires the run-out leases of `study`, whose runtime is `runtime`.
  // REQUIRES: runtime.mu held exclusively.
  absl::Status ExpireLeasesLocked(StudyRuntime& runtime, const v1::Study& study,
                                  int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(runtime.mu);
  // Serves a batch of coalesced SuggestTrials requests on study `name`,
  // setting each ticket's result. REQUIRES: the caller leads `runtime`'s
  // suggestion queue.
  void ServeSuggestions(StudyRuntime& runtime, const std::string& name,
                        const std::vector<SuggestQueue::Ticket*>& batch)
      ABSL_LOCKS_EXCLUDED(runtime.mu);
  // What PlanSuggestions needs of study `name`. REQUIRES: runtime.mu held.
  absl::Status LoadSuggestionState(const std::string& name,
                                   SuggestionState& state);
  // Stops the paused trials no promotion will resume, then marks the study
  // COMPLETED. REQUIRES: runtime.mu held.
  absl::Status CompleteStudy(const v1::Study& study,
                             const std::vector<v1::Trial>& unpromotable,
                             int64_t now);
  // Proposes plan.total_fresh new trials without the lock, then, under it
  // (shared), stores them granted to their requesters and adds them to
  // `responses`. REQUIRES: as ServeSuggestions; runtime.mu not held.
  absl::Status ProposeAndStore(
      StudyRuntime& runtime, const SuggestionState& state,
      const std::vector<v1::Trial>& snapshot,
      const std::vector<SuggestQueue::Ticket*>& batch,
      const SuggestionPlan& plan,
      std::vector<v1::SuggestTrialsResponse>& responses)
      ABSL_LOCKS_EXCLUDED(runtime.mu);
  // Makes runtime.suggester the model of `study`'s current incarnation,
  // and loads its prior studies' trials into runtime.priors.
  // REQUIRES: as ServeSuggestions.
  absl::Status PrepareSuggester(StudyRuntime& runtime, const v1::Study& study);
  // `count` new trials (parameters only) from `suggester`, given the
  // history in `snapshot`. REQUIRES: no other call uses `suggester`
  // meanwhile; for the study's own (runtime.suggester), as ServeSuggestions,
  // without the study's lock (a fit may take a while).
  absl::StatusOr<std::vector<v1::Trial>> ProposeTrials(
      optimizer::Suggester& suggester,
      const std::vector<optimizer::PriorStudy>& priors, const v1::Study& study,
      const std::vector<v1::Trial>& snapshot, int count,
      int64_t trials_created);
  // The earlier studies the study transfers from (spec.prior_studies).
  absl::StatusOr<std::vector<optimizer::PriorStudy>> LoadPriors(
      const v1::Study& study);
  // A partial configuration (CreateTrialRequest.partial) of study `name`
  // completed by the study's algorithm from the history so far; the fit
  // runs without the study's lock. REQUIRES: not the study's lock.
  absl::StatusOr<ParameterValues> CompletePartialTrial(
      StudyRuntime& runtime, const std::string& name,
      const ParameterValues& given, const Principal& caller)
      ABSL_LOCKS_EXCLUDED(runtime.mu);

  storage::StudyStore* const store_;
  const ServiceOptions options_;
  // Before runtimes_: their suggesters hand it jobs until they go.
  std::unique_ptr<BackgroundPool> fits_;  // Null for fit_threads 0.
  StudyRuntimes runtimes_;
  ChangeNotifier changes_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_STUDY_SERVICE_H_
