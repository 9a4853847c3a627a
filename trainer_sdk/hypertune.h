// The hypertune trainer SDK: what a training program links to get trials from
// hypertuned and report their metrics.
//
//   hypertune::Client client;
//   while (true) {
//     auto trial = client.NextTrial("my-study");
//     if (!trial.ok()) return Fail(trial.status());
//     if (!trial->has_value()) break;           // budget spent
//     double lr = (*trial)->Double("lr").value();
//     ... (*trial)->Report(epoch, {{"loss", loss}}); ...
//     (*trial)->Complete({{"loss", loss}});
//   }
//
// Every call goes over gRPC with a deadline per attempt and retries with
// jittered exponential backoff where a retry is safe. Errors are absl::Status
// carrying the gRPC code and message; nothing throws.
//
// Leases: a trial from NextTrial is held under a lease that a background
// thread renews (Heartbeat, every third of the study's lease) until the trial
// is completed, marked infeasible, given back, or its last handle destroyed;
// a trial dropped unfinished is handed to another worker once its lease runs
// out. Renewals and the trial's end carry the device-seconds used since the
// lease was taken (wall seconds x ClientOptions::devices), so the time of
// every attempt counts, paused ones and given-back ones included.
//
// Attempts: a trial handed out again after its worker was lost begins a new
// attempt (attempt()). With a checkpoint (checkpoint_uri(), holding step
// checkpoint_step()), it resumes there and its measurements() continue the
// curve; without one it starts afresh from step 1, and the earlier attempt's
// curve is kept apart (proto().earlier_attempts()), never its result.
//
// Several processes per trial (torchrun, DDP): under `hypertune worker`, the
// trial attached by NextTrial reports from rank 0 only ($RANK, else
// $LOCAL_RANK; unset = 0). On the other ranks Report, Complete,
// MarkInfeasible, GiveBack and SetCheckpoint do nothing and succeed, while
// Report, Heartbeat and ShouldStop read the trial's state, so that every
// rank learns of an early stop, a pause or rank 0's end of the trial
// (should_stop()).
//
// Thread safety: a Client may be shared by any number of threads (it owns one
// channel; copies share it). A Trial is a handle: copies share its lease (one
// renewal thread, which keeps the channel alive and is joined when the last
// copy goes); distinct Trial objects may be used from distinct threads, one
// Trial object from one thread at a time.
#ifndef HYPERTUNE_TRAINER_SDK_HYPERTUNE_H_
#define HYPERTUNE_TRAINER_SDK_HYPERTUNE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune {

namespace internal {
class ClientCore;
class ClientIdSlot;
class LeaseKeeper;
}  // namespace internal

// Metric name -> value, e.g. {{"loss", 0.31}, {"accuracy", 0.92}}.
using Metrics = std::map<std::string, double>;

inline constexpr char kDefaultServer[] = "127.0.0.1:50051";
// The port of an address given without one ("HOST" means HOST:50051).
inline constexpr int kDefaultPort = 50051;

struct ClientOptions {
  // host:port of hypertuned; "" -> $HYPERTUNE_SERVER, else kDefaultServer.
  // A host without a port gets kDefaultPort. Several servers sharing one
  // PostgreSQL database, comma-separated ("a:50051,b:50051"): calls go to
  // the one that leads, following a standby's pointer to the leader and
  // trying the others when one cannot be reached.
  std::string server;
  // Who holds the trials this client asks for; "" -> $HYPERTUNE_CLIENT_ID,
  // else "<host>-<pid>".
  std::string client_id;
  // Deadline of each attempt of a call.
  std::chrono::milliseconds call_timeout{30000};
  // Attempts per call on UNAVAILABLE (and DEADLINE_EXCEEDED where a repeat
  // is harmless); at least 1.
  int max_attempts = 8;
  // Backoff between attempts: doubles from initial to max, with jitter.
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{5000};
  // Bearer token sent with every call, for servers run with an auth token
  // file; "" -> $HYPERTUNE_TOKEN; empty = none.
  std::string token;
  // PEM file of the CA that signed the server's certificate: talk TLS.
  // "" -> $HYPERTUNE_TLS_CA; empty = plaintext.
  std::string tls_ca;
  // PEM files of this client's certificate and private key, for servers that
  // require client certificates (mutual TLS); need tls_ca.
  // "" -> $HYPERTUNE_TLS_CERT / $HYPERTUNE_TLS_KEY; empty = none.
  std::string tls_cert;
  std::string tls_key;
  // Trials from NextTrial renew their lease from a background thread.
  // Default true; false leaves renewal to Report and Heartbeat calls.
  bool heartbeats = true;
  // Between background renewals; 0 (default) = a third of what is left of
  // the trial's lease, as the server sets it (lease_expire_time_ms).
  std::chrono::milliseconds heartbeat_interval{0};
  // Devices a trial of this process uses: its device-seconds (what the
  // server bills) are its wall seconds times this. 0 (default) = the number
  // of entries in $CUDA_VISIBLE_DEVICES, else 1.
  int devices = 0;
};

// The wait before retry number `attempt` (1 = the first retry) of the SDK's
// policy: min(max, initial * 2^(attempt-1)) scaled by `jitter`, which is in
// [0.5, 1]. For runners that wait and ask again as the SDK does.
std::chrono::milliseconds BackoffDelay(int attempt,
                                       std::chrono::milliseconds initial,
                                       std::chrono::milliseconds max,
                                       double jitter);

// Returns `options` with server, client_id, token and TLS files filled in
// from the environment or the defaults where empty, the server's port
// defaulted (WithDefaultPort), devices counted, and max_attempts at least 1.
ClientOptions ResolveClientOptions(ClientOptions options);

// `address` with ":50051" appended when it names a host without a port
// ("gpu-box", "[::1]"); unchanged with a port or a gRPC scheme ("unix:",
// "dns:///...") and for a bare IPv6 address.
std::string WithDefaultPort(const std::string& address);

class Trial;

class Client {
 public:
  // Connects lazily: no call is made until the first RPC.
  explicit Client(ClientOptions options = {});

  // The next trial for this process, or nullopt when the study is COMPLETED
  // (its budget is spent).
  //
  // Under `hypertune worker` ($HYPERTUNE_TRIAL_ID set and $HYPERTUNE_STUDY
  // equal to `study`) the first call returns the trial the worker holds, with
  // the worker's lease epoch, and later calls return nullopt: the worker runs
  // one program per trial and renews its lease. Otherwise it asks
  // SuggestTrials, waiting (0.2 s doubling to 2 s) while the study is at its
  // parallel limit or paused, and the trial's lease is renewed in the
  // background (ClientOptions::heartbeats).
  //
  // Threads may call NextTrial concurrently on one Client (or on Clients with
  // the same client_id): each concurrent caller asks under its own id
  // (client_id, client_id-1, client_id-2, ...), so each gets its own trial;
  // an id is reused once its trial is completed, marked infeasible or given
  // back.
  absl::StatusOr<std::optional<Trial>> NextTrial(
      const std::string& study) const;

  // The trial as stored; the handle mutates with the stored lease epoch.
  absl::StatusOr<Trial> GetTrial(const std::string& study, int64_t id) const;

  // A handle on `trial`, granted to this client by Suggest, that holds its
  // lease as NextTrial's trials do (renewed in the background unless
  // ClientOptions::heartbeats is false). For runners such as `hypertune
  // worker` that ask for trials themselves. `devices`: what the trial's
  // program uses, for its device-seconds; 0 = ClientOptions::devices.
  Trial Hold(v1::Trial trial, int devices = 0) const;

  // One call per RPC, each with the deadline and retry policy above.
  absl::StatusOr<v1::Study> CreateStudy(const v1::Study& study) const;
  absl::StatusOr<v1::Study> GetStudy(const std::string& name) const;
  absl::StatusOr<std::vector<v1::Study>> ListStudies() const;
  absl::Status DeleteStudy(const std::string& name) const;
  absl::StatusOr<v1::Study> SetStudyState(const std::string& name,
                                          v1::Study::State state) const;
  // Gives study `name` to `owner` (an admin's call, or its owner's).
  absl::StatusOr<v1::Study> SetStudyOwner(const std::string& name,
                                          const std::string& owner) const;
  // Changes the spec fields named by request.update_mask (a budget, the
  // lease, a wider search space); the study records the change.
  absl::StatusOr<v1::Study> UpdateStudy(
      const v1::UpdateStudyRequest& request) const;
  // Has the server copy its live database to `destination_path`, a file in
  // its backup directory (hypertuned --backup-dir); `overwrite` replaces an
  // earlier backup there. An admin's call when auth is on.
  absl::StatusOr<v1::BackupResponse> Backup(const std::string& destination_path,
                                            bool overwrite = false) const;
  // Asks for up to `count` trials held by `client_id` ("" = this client's).
  absl::StatusOr<v1::SuggestTrialsResponse> Suggest(
      const std::string& study, int count,
      const std::string& client_id = "") const;
  // `partial`: a REQUESTED trial whose parameters not given the study's
  // algorithm suggests (CreateTrialRequest.partial).
  absl::StatusOr<v1::Trial> CreateTrial(const std::string& study,
                                        const v1::Trial& trial,
                                        bool partial = false) const;
  absl::StatusOr<v1::ListTrialsResponse> ListTrials(
      const v1::ListTrialsRequest& request) const;
  // Every trial of `study` in `states` (empty = all), paging through
  // ListTrials.
  absl::StatusOr<std::vector<v1::Trial>> ListAllTrials(
      const std::string& study,
      const std::vector<v1::Trial::State>& states = {}) const;
  absl::StatusOr<v1::ListOptimalTrialsResponse> ListOptimalTrials(
      const std::string& study) const;
  absl::StatusOr<v1::Trial> AddMeasurement(
      const v1::AddMeasurementRequest& request) const;
  // A retry that finds the trial already in the requested final state
  // (the lost reply of an earlier attempt) counts as success.
  absl::StatusOr<v1::Trial> CompleteTrial(
      const v1::CompleteTrialRequest& request) const;
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest& request) const;
  // Judges the trial by the study's early-stopping rule now.
  absl::StatusOr<v1::CheckEarlyStoppingResponse> CheckEarlyStopping(
      const std::string& study, int64_t trial_id) const;
  // Stops the trial by hand ("" = "stopped by request").
  absl::StatusOr<v1::Trial> StopTrial(const std::string& study,
                                      int64_t trial_id,
                                      const std::string& reason = "") const;
  // Streams the study's trial changes after `after_sequence` to `on_event`
  // until it returns false (then OK) or the stream fails in a way a retry
  // does not cure. A dropped stream is opened again after the last sequence
  // seen, so no change is missed or repeated (within max_attempts).
  absl::Status WatchTrials(
      const std::string& study, int64_t after_sequence,
      const std::function<bool(const v1::TrialEvent&)>& on_event) const;

  // The trials of an import, read one at a time, so that none need be held
  // all at once. Start() (re)opens the source: a stream retried because the
  // server was unreachable sends them again from the first.
  class TrialSource {
   public:
    virtual ~TrialSource() = default;
    virtual absl::Status Start() = 0;
    // The next trial into `trial`: true, or false at the end.
    virtual absl::StatusOr<bool> Next(v1::Trial& trial) = 0;
  };
  // Recreates an exported study with its trials (the ImportStudy stream,
  // in messages of at most 1 MiB of trials), all or nothing: a source that
  // fails midway cancels the stream, so nothing is stored, and its error is
  // returned. The whole import has 10 minutes (or call_timeout if longer).
  absl::StatusOr<v1::Study> ImportStudy(const v1::Study& study,
                                        TrialSource& trials) const;
  absl::StatusOr<v1::Study> ImportStudy(
      const v1::Study& study, const std::vector<v1::Trial>& trials) const;
  // Adds warm-start results to a study.
  absl::StatusOr<v1::ImportTrialsResponse> ImportTrials(
      const v1::ImportTrialsRequest& request) const;

  const std::string& client_id() const;
  // The resolved options (server and client_id filled in).
  const ClientOptions& options() const;

 private:
  friend class Trial;
  explicit Client(std::shared_ptr<internal::ClientCore> core)
      : core_(std::move(core)) {}

  std::shared_ptr<internal::ClientCore> core_;
};

// A handle on one trial: its parameters, and the calls that report on it.
// Copies share the Client's channel, the NextTrial id it was given and its
// lease. Once the lease is lost (the server refuses our epoch: the trial
// went to another worker, or was finished by someone else), renewals stop
// and Report, Complete, MarkInfeasible, GiveBack and SetCheckpoint return
// that FAILED_PRECONDITION without calling the server.
class Trial {
 public:
  // A detached handle on `proto`: typed access works, calls that reach the
  // server return FAILED_PRECONDITION.
  explicit Trial(v1::Trial proto);

  int64_t id() const { return proto_.id(); }
  const std::string& study() const { return proto_.study_name(); }
  int64_t lease_epoch() const { return proto_.lease_epoch(); }
  // As last returned by the server.
  const v1::Trial& proto() const { return proto_; }
  const google::protobuf::RepeatedPtrField<v1::ParameterValue>& parameters()
      const {
    return proto_.parameters();
  }

  // Typed access by name. NOT_FOUND if the trial has no such parameter,
  // INVALID_ARGUMENT if its value is not of that kind.
  // Double: DOUBLE and DISCRETE values, and INTEGER ones widened.
  absl::StatusOr<double> Double(std::string_view name) const;
  // Int: INTEGER values, and DISCRETE ones that are whole numbers.
  absl::StatusOr<int64_t> Int(std::string_view name) const;
  // String: CATEGORICAL values.
  absl::StatusOr<std::string> String(std::string_view name) const;

  // Records an intermediate measurement at `step` (e.g. the epoch), with the
  // seconds since the trial started. Renews the lease. INVALID_ARGUMENT for a
  // NaN metric; FAILED_PRECONDITION once the trial is no longer ours.
  absl::Status Report(int64_t step, const Metrics& metrics);
  // Completes the trial with its final metrics (at the last reported step).
  // A NaN metric marks the trial INFEASIBLE instead: the parameters diverged.
  // On a trial paused at a rung (paused()), Complete and GiveBack only let go
  // of it: the server resumes it when promoted.
  absl::Status Complete(const Metrics& metrics);
  absl::Status MarkInfeasible(const std::string& reason);
  // Gives the trial back because this worker cannot finish it, not because
  // of its parameters: the server queues it for another worker, keeping its
  // measurements and checkpoint, while it has retries left (`preempted`:
  // the machine is being taken away, e.g. on SIGTERM, which spends
  // max_preemptions instead of max_retries), else marks it FAILED. Stops
  // the renewals.
  absl::Status GiveBack(const std::string& reason, bool preempted = false);
  // Renews the lease now, optionally recording a checkpoint to resume from
  // (holding `checkpoint_step`; 0 = the latest measured step). Returns
  // whether the server asks the trial to stop early.
  absl::StatusOr<bool> Heartbeat(const std::string& checkpoint_uri = "",
                                 int64_t checkpoint_step = 0);
  // Records `uri`, which holds step `step` (0 = the latest reported step),
  // as the place to resume this trial from should its worker die (a
  // Heartbeat carrying it). INVALID_ARGUMENT if empty or step < 0.
  absl::Status SetCheckpoint(const std::string& uri, int64_t step = 0);

  // The attempt this handle runs: 1 for a trial's first grant, one more for
  // each grant after a loss (1 from servers that predate attempts).
  int attempt() const { return proto_.attempt() > 0 ? proto_.attempt() : 1; }
  // The checkpoint to resume from: left by an earlier holder of the trial,
  // or set by SetCheckpoint. Empty if none.
  const std::string& checkpoint_uri() const { return proto_.checkpoint_uri(); }
  // The step that checkpoint_uri() holds; 0 if none.
  int64_t checkpoint_step() const { return proto_.checkpoint_step(); }
  // For runners that hold a trial's lease past its program's end (`hypertune
  // worker` deciding its fate): the devices are idle from now on, and the
  // renewals and the trial's end report the device-seconds used until now.
  void StopDeviceClock();
  // Whether this process reports on the trial: false on ranks other than 0
  // of a trial attached under `hypertune worker` (see the top of this file).
  bool reports() const { return reports_; }
  // Whether the server asked the trial to stop early (or paused it at an
  // ASHA rung), as of the last renewal or report. The program should then
  // save what it has and finish: Complete with its last metrics (the trial
  // becomes STOPPED; a paused one stays PAUSED, to be resumed from its
  // checkpoint when promoted).
  bool should_stop() const;
  // Whether the trial is paused at a rung (see should_stop).
  bool paused() const { return proto_.state() == v1::Trial::PAUSED; }
  // PBT (docs/pbt.md): the exploit that the last Report's answer made,
  // once: the trial then holds the donor's checkpoint (checkpoint_uri(),
  // checkpoint_step()) and its new parameters(), which the program loads
  // before going on from checkpoint_step() + 1. Nullopt otherwise.
  std::optional<v1::PbtExploit> TakeExploit();
  // PBT: the number of the trial's latest exploit as this handle knows it
  // (its reports and its lease's renewals); 0 if none. A runner that did
  // not start its program under that exploit restarts it.
  int latest_exploit() const;
  // Asks the server now (CheckEarlyStopping): the rule judges the trial
  // against the study's latest results. Returns should_stop() afterwards.
  absl::StatusOr<bool> ShouldStop();
  // Whether a background thread renews the lease now.
  bool heartbeating() const;
  // OK while the lease may still be this handle's; once it is lost, the
  // error that showed it (FAILED_PRECONDITION or NOT_FOUND). Detached
  // handles: FAILED_PRECONDITION.
  absl::Status lease_status() const { return Usable(); }

 private:
  friend class Client;
  // `renew`: renew the lease from a background thread (LeaseKeeper::Start).
  // `devices`: the program's, for its device-seconds; 0 = the options'.
  Trial(std::shared_ptr<internal::ClientCore> core, v1::Trial proto,
        std::shared_ptr<internal::ClientIdSlot> slot, bool renew = false,
        int devices = 0);

  // The client this handle calls through; FAILED_PRECONDITION if detached.
  absl::StatusOr<Client> Attached() const;
  double ElapsedSeconds() const;
  // Whether calls may still reach the server: attached and the lease not
  // known to be lost.
  absl::Status Usable() const;
  absl::Status Finish(v1::CompleteTrialRequest request);
  // On a rank that does not report: reads the trial's state (its stop or
  // pause), keeping this handle's lease epoch. Errors are ignored: the next
  // poll tries again.
  void Poll();

  std::shared_ptr<internal::ClientCore> core_;
  v1::Trial proto_;
  // The lease this handle (and its copies) holds; null when detached.
  std::shared_ptr<internal::LeaseKeeper> lease_;
  // Set when the trial came from NextTrial: released when it is finished.
  std::shared_ptr<internal::ClientIdSlot> slot_;
  std::chrono::steady_clock::time_point attached_at_;
  // Seconds the trial had run (by its start time) when this handle was made.
  double elapsed_at_attach_ = 0.0;
  int64_t last_step_ = 0;
  // The exploit Report took that TakeExploit has not handed out.
  std::optional<v1::PbtExploit> untaken_exploit_;
  // False on the ranks of a worker's trial other than 0 (see reports()).
  bool reports_ = true;
};

}  // namespace hypertune

#endif  // HYPERTUNE_TRAINER_SDK_HYPERTUNE_H_
