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
// Thread safety: a Client may be shared by any number of threads (it owns one
// channel; copies share it). A Trial is a value-like handle: distinct Trial
// objects may be used from distinct threads, one Trial object from one thread
// at a time.
#ifndef HYPERTUNE_TRAINER_SDK_HYPERTUNE_H_
#define HYPERTUNE_TRAINER_SDK_HYPERTUNE_H_

#include <chrono>
#include <cstdint>
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

namespace v1 = ::hypertune::v1;

namespace internal {
class ClientCore;
class ClientIdSlot;
}  // namespace internal

// Metric name -> value, e.g. {{"loss", 0.31}, {"accuracy", 0.92}}.
using Metrics = std::map<std::string, double>;

inline constexpr char kDefaultServer[] = "127.0.0.1:50051";

struct ClientOptions {
  // host:port of hypertuned; "" -> $HYPERTUNE_SERVER, else kDefaultServer.
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
};

// Returns `options` with server and client_id filled in from the environment
// or the defaults where empty, and max_attempts at least 1.
ClientOptions ResolveClientOptions(ClientOptions options);

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
  // one program per trial. Otherwise it asks SuggestTrials, waiting (0.2 s
  // doubling to 2 s) while the study is at its parallel limit or paused.
  //
  // Threads may call NextTrial concurrently on one Client (or on Clients with
  // the same client_id): each concurrent caller asks under its own id
  // (client_id, client_id-1, client_id-2, ...), so each gets its own trial;
  // an id is reused once its trial is completed or marked infeasible.
  absl::StatusOr<std::optional<Trial>> NextTrial(const std::string& study) const;

  // The trial as stored; the handle mutates with the stored lease epoch.
  absl::StatusOr<Trial> GetTrial(const std::string& study, int64_t id) const;

  // One call per RPC, each with the deadline and retry policy above.
  absl::StatusOr<v1::Study> CreateStudy(const v1::Study& study) const;
  absl::StatusOr<v1::Study> GetStudy(const std::string& name) const;
  absl::StatusOr<std::vector<v1::Study>> ListStudies() const;
  absl::Status DeleteStudy(const std::string& name) const;
  absl::StatusOr<v1::Study> SetStudyState(const std::string& name,
                                          v1::Study::State state) const;
  // Asks for up to `count` trials held by `client_id` ("" = this client's).
  absl::StatusOr<v1::SuggestTrialsResponse> Suggest(
      const std::string& study, int count,
      const std::string& client_id = "") const;
  absl::StatusOr<v1::Trial> CreateTrial(const std::string& study,
                                        const v1::Trial& trial) const;
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
// Copies share the Client's channel (and the NextTrial id it was given).
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
  absl::Status Complete(const Metrics& metrics);
  absl::Status MarkInfeasible(const std::string& reason);
  // Renews the lease (for long steps without a Report), optionally recording
  // a checkpoint to resume from. Returns whether the server asks the trial
  // to stop early.
  absl::StatusOr<bool> Heartbeat(const std::string& checkpoint_uri = "");

 private:
  friend class Client;
  Trial(std::shared_ptr<internal::ClientCore> core, v1::Trial proto,
        std::shared_ptr<internal::ClientIdSlot> slot);

  // The client this handle calls through; FAILED_PRECONDITION if detached.
  absl::StatusOr<Client> Attached() const;
  double ElapsedSeconds() const;
  absl::Status Finish(v1::CompleteTrialRequest request);

  std::shared_ptr<internal::ClientCore> core_;
  v1::Trial proto_;
  // Set when the trial came from NextTrial: released when it is finished.
  std::shared_ptr<internal::ClientIdSlot> slot_;
  std::chrono::steady_clock::time_point attached_at_;
  // Seconds the trial had run (by its start time) when this handle was made.
  double elapsed_at_attach_ = 0.0;
  int64_t last_step_ = 0;
};

}  // namespace hypertune

#endif  // HYPERTUNE_TRAINER_SDK_HYPERTUNE_H_
