// StudyService: the logic of every hypertune.v1 RPC, on API messages and
// absl::Status, independent of gRPC so that tests and fuzzers can drive it
// directly. Each method validates its request, takes the study's locks
// where it reads and then writes (study_runtime.h) and saves through the
// store. Its parts share one StudyContext: Leases (leases.h) grant and
// expire trials, Suggestions (suggestions.h) runs the optimizer.
// grpc_service.h adapts it to gRPC.
//
// Thread-safe: methods may run concurrently. Calls that change a study as a
// whole are serialized per study; calls that change one trial only against
// those and against calls on the same trial.
#ifndef HYPERTUNE_SERVICE_RPC_STUDY_SERVICE_H_
#define HYPERTUNE_SERVICE_RPC_STUDY_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"
#include "service/rpc/access.h"
#include "service/rpc/change_notifier.h"
#include "service/rpc/curve_cache.h"
#include "service/rpc/leases.h"
#include "service/rpc/study_context.h"
#include "service/rpc/study_import.h"
#include "service/rpc/suggestions.h"
#include "storage/study_store.h"

namespace hypertune::service {

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
  // changes (a batch) after `watch.after`, with the access checked again
  // and NOT_FOUND once the study watched is deleted. The caller advances
  // `after` as it delivers them, and reads again from there: a slow reader
  // holds one batch, never a backlog. changes() counts trial writes.
  struct Watch {
    std::string study_name;
    int64_t incarnation = 0;  // the study's create_time_ms
    int64_t after = 0;
  };
  absl::StatusOr<Watch> OpenWatch(const v1::WatchTrialsRequest& request,
                                  const Principal& caller);
  // At most kWatchBatchChanges changes, and no more than kWatchBatchBytes
  // of trials but for the first change (a trial may be larger).
  struct WatchBatch {
    std::vector<storage::TrialChange> changes;
    size_t bytes = 0;   // the trials' serialized size
    bool full = false;  // cut short by a limit: more may be waiting
  };
  static constexpr int kWatchBatchChanges = 500;
  static constexpr size_t kWatchBatchBytes = size_t{1} << 20;
  absl::StatusOr<WatchBatch> ReadWatch(const Watch& watch,
                                       const Principal& caller);
  ChangeNotifier& changes() { return context_.changes(); }

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
  // The study is stored IMPORTING until its last chunk is in: a server
  // killed meanwhile removes it on its next start (RemoveInterruptedImports,
  // part of RecoverOnStart); every other failure stores nothing.
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
  // Removes the studies an import left IMPORTING (the server stopped before
  // their last trial was stored).
  absl::Status RemoveInterruptedImports();
  // What a server does when it starts, or takes over as leader, before it
  // serves: RemoveInterruptedImports, then ExtendLeasesOnStart.
  absl::Status RecoverOnStart();

 private:
  // Applies the study's early-stopping rule to ACTIVE `trial`, as stored
  // (its measurements ignored: the rule reads the stored curve from
  // curves_) with `appended` added to its curve (null: none; a report not
  // yet saved): STOPPING or PAUSED with the reason, or unchanged.
  // REQUIRES: the trial (TrialLock) or the study locked.
  absl::Status ApplyEarlyStopping(const v1::Study& study, v1::Trial& trial,
                                  const v1::Measurement* appended);
  // Cost accounting: the grant holding `trial` reports `grant_total`
  // device-seconds in all; its growth is added to the trial (and its cost at
  // the study's price) and returned, for SaveStudyCost to add to the stored
  // study's totals.
  static double CountDeviceSeconds(double grant_total, const v1::Study& study,
                                   v1::Trial& trial);
  absl::Status SaveStudyCost(const std::string& study_name, double seconds);
  // The end of CompleteTrial for `trial`, settled in memory from the row
  // read as `read`: the request's attributes and device time added, ended
  // now, saved with the study's cost. REQUIRES: the trial locked.
  absl::Status SaveSettled(const v1::CompleteTrialRequest& request,
                           const v1::Study& study,
                           const storage::TrialVersion& read, v1::Trial& trial);
  // CompleteTrial's two halves: its worker gives the trial back
  // (worker_failed: it runs again while it has retries), or settles it
  // (failed, infeasible, or a result).
  absl::StatusOr<v1::Trial> GiveBackTrial(
      const v1::CompleteTrialRequest& request, const Principal& caller);
  absl::StatusOr<v1::Trial> FinishTrial(const v1::CompleteTrialRequest& request,
                                        const Principal& caller);
  // One trial write: the trial as loaded under its lock (TrialLock), with
  // its study.
  struct TrialWrite {
    v1::Study study;
    // The trial, whole (TrialRead::kWhole), or its head (kHead: without its
    // measurements, whose count, size and latest one the head gives, so
    // that a report costs the same however long the curve is).
    storage::TrialHead head;
    v1::Trial& trial() { return head.trial; }
  };
  enum class TrialRead { kWhole, kHead };
  // Who writes: the worker holding the trial's lease under `lease_epoch`,
  // fenced (it writes only while the trial runs under that epoch, so a
  // worker that lost its lease never overwrites its successor's work; the
  // answer names `action`), or the study's side (a user's stop, the
  // early-stopping rule), which holds no lease.
  struct Writer {
    static Writer LeaseHolder(int64_t lease_epoch, std::string_view action) {
      return {true, lease_epoch, action};
    }
    static Writer StudySide() { return {false, 0, {}}; }
    bool fenced;
    int64_t lease_epoch;
    std::string_view action;
  };
  // The one path of a write to one trial: checks the address, locks the
  // trial, loads it with its study (write access checked), lets `answer`
  // reply without writing (a retry of what already happened, or a late word
  // of a worker on a trial it no longer runs: true when it replied), then
  // fences per `writer` and runs `mutate`, which changes the trial and saves
  // it from the version read.
  using Answer = absl::FunctionRef<absl::StatusOr<bool>(TrialWrite&)>;
  using Mutation = absl::FunctionRef<absl::Status(
      TrialWrite&, const storage::TrialVersion& read)>;
  absl::Status MutateTrial(const Principal& caller,
                           const std::string& study_name, int64_t trial_id,
                           TrialRead read, const Writer& writer, Answer answer,
                           Mutation mutate);
  static absl::StatusOr<bool> NoAnswer(TrialWrite&) { return false; }
  // A worker's word on its trial after the trial was PAUSED (or, with
  // `settled_too`, settled) under the worker's own `lease_epoch`: the time it
  // reports is saved, and true says the call is answered.
  absl::StatusOr<bool> AnswerPausedWorker(const std::string& study_name,
                                          int64_t lease_epoch,
                                          double device_seconds,
                                          TrialWrite& write, bool settled_too);
  // The stored measurement of a report `m` whose step the trial already
  // holds, if it has the same metrics (a retry); else INVALID_ARGUMENT.
  absl::StatusOr<v1::Measurement> RecordedStep(const TrialWrite& write,
                                               const v1::Measurement& m);
  // A PBT member's report `m` that crossed its perturbation interval: judged
  // against the population (pbt.h); if it exploited, the trial is saved with
  // the report and its new curve, write.trial() becomes its head, and true
  // is returned (the caller must not append `m` again).
  absl::StatusOr<bool> ExploitIfBehind(TrialWrite& write,
                                       const v1::Measurement& m,
                                       const storage::TrialVersion& read);
  // The study with its trial counts filled in, if `caller` may read it.
  absl::StatusOr<v1::Study> LoadStudyWithCounts(const Principal& caller,
                                                const std::string& name);

  // The curves early stopping reads, kept current by every trial write:
  // the context's store is curve_store_, which passes each call to the
  // store given and tells curves_ of the writes.
  CurveCache curves_;
  CurveTrackingStore curve_store_;
  StudyContext context_;
  Leases leases_;
  Suggestions suggestions_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_STUDY_SERVICE_H_
