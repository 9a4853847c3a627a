// Client: one method per RPC, each through ClientCore::Call, and NextTrial.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/message_differencer.h"
#include "trainer_sdk/client_core.h"
#include "trainer_sdk/grpc_status.h"
#include "trainer_sdk/hypertune.h"
#include "trainer_sdk/lease_keeper.h"

namespace hypertune {

std::chrono::milliseconds BackoffDelay(int attempt,
                                       std::chrono::milliseconds initial,
                                       std::chrono::milliseconds max,
                                       double jitter) {
  std::chrono::milliseconds delay = initial;
  for (int i = 1; i < attempt && delay < max; ++i) delay *= 2;
  delay = std::min(delay, max);
  return std::chrono::milliseconds(
      static_cast<int64_t>(static_cast<double>(delay.count()) * jitter));
}

namespace {

using internal::Retry;

// NextTrial's wait while the study is at its parallel limit or paused.
constexpr std::chrono::milliseconds kWaitInitial{200};
constexpr std::chrono::milliseconds kWaitMax{2000};

std::string EnvOr(const char* name, std::string fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  return value;
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    return "localhost";
  }
  return host;
}

// Whether `stored` holds exactly the metrics `sent` asked for; an empty
// `sent` accepts whatever the server chose (the last measurement).
bool HoldsMetrics(const v1::Measurement& stored, const v1::Measurement& sent) {
  if (sent.metrics().empty()) return true;
  if (stored.metrics().size() != sent.metrics().size()) return false;
  for (const auto& [name, value] : sent.metrics()) {
    auto it = stored.metrics().find(name);
    if (it == stored.metrics().end() || !(it->second == value)) return false;
  }
  return true;
}

}  // namespace

std::string WithDefaultPort(const std::string& address) {
  if (address.empty() || absl::StrContains(address, "://") ||
      absl::StartsWith(address, "unix:") ||
      absl::StartsWith(address, "unix-abstract:") ||
      absl::StartsWith(address, "dns:") || absl::StartsWith(address, "ipv4:") ||
      absl::StartsWith(address, "ipv6:")) {
    return address;
  }
  const size_t bracket = address.rfind(']');
  const std::string_view host_part =
      bracket == std::string::npos ? std::string_view(address)
                                   : std::string_view(address).substr(bracket);
  // One colon or more outside brackets: a port, or a bare IPv6 address.
  if (host_part.find(':') != std::string_view::npos) return address;
  return absl::StrCat(address, ":", kDefaultPort);
}

ClientOptions ResolveClientOptions(ClientOptions options) {
  if (options.server.empty()) {
    options.server = EnvOr("HYPERTUNE_SERVER", kDefaultServer);
  }
  std::vector<std::string> servers =
      absl::StrSplit(options.server, ',', absl::SkipWhitespace());
  for (std::string& server : servers) {
    server = WithDefaultPort(std::string(absl::StripAsciiWhitespace(server)));
  }
  options.server = absl::StrJoin(servers, ",");
  if (options.client_id.empty()) {
    options.client_id =
        EnvOr("HYPERTUNE_CLIENT_ID", absl::StrCat(HostName(), "-", getpid()));
  }
  if (options.token.empty()) options.token = EnvOr("HYPERTUNE_TOKEN", "");
  if (options.tls_ca.empty()) options.tls_ca = EnvOr("HYPERTUNE_TLS_CA", "");
  if (options.tls_cert.empty()) {
    options.tls_cert = EnvOr("HYPERTUNE_TLS_CERT", "");
  }
  if (options.tls_key.empty()) options.tls_key = EnvOr("HYPERTUNE_TLS_KEY", "");
  if (options.max_attempts < 1) options.max_attempts = 1;
  if (options.devices < 1) {
    const std::string visible = EnvOr("CUDA_VISIBLE_DEVICES", "");
    options.devices = visible.empty()
                          ? 1
                          : static_cast<int>(std::count(visible.begin(),
                                                        visible.end(), ',')) +
                                1;
  }
  return options;
}

Client::Client(ClientOptions options)
    : core_(std::make_shared<internal::ClientCore>(
          ResolveClientOptions(std::move(options)))) {}

const std::string& Client::client_id() const {
  return core_->options().client_id;
}

const ClientOptions& Client::options() const { return core_->options(); }

absl::StatusOr<std::optional<Trial>> Client::NextTrial(
    const std::string& study) const {
  const char* env_trial = std::getenv("HYPERTUNE_TRIAL_ID");
  const char* env_study = std::getenv("HYPERTUNE_STUDY");
  if (env_trial != nullptr && env_study != nullptr && study == env_study) {
    // This process runs under `hypertune worker`: one trial, the worker's.
    if (!internal::TakeWorkerTrial()) return std::nullopt;
    int64_t id = 0;
    if (!absl::SimpleAtoi(env_trial, &id)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "HYPERTUNE_TRIAL_ID: \"", env_trial, "\" is not a trial id"));
    }
    absl::StatusOr<Trial> stored = GetTrial(study, id);
    if (!stored.ok()) return stored.status();
    v1::Trial proto = stored->proto();
    // Act under the worker's epoch: if the trial has moved on to another
    // holder since, the server refuses our reports instead of mixing them in.
    int64_t epoch = 0;
    const char* env_epoch = std::getenv("HYPERTUNE_LEASE_EPOCH");
    if (env_epoch != nullptr && absl::SimpleAtoi(env_epoch, &epoch)) {
      proto.set_lease_epoch(epoch);
    }
    // The worker renews the lease; this handle only reports, and only on
    // rank 0 of several processes (torchrun).
    Trial trial(core_, std::move(proto), nullptr);
    trial.reports_ = internal::ProcessRank() == 0;
    return std::optional<Trial>(std::move(trial));
  }

  std::shared_ptr<internal::ClientIdSlot> slot =
      internal::AcquireClientIdSlot(client_id());
  for (int wait = 1;; ++wait) {
    absl::StatusOr<v1::SuggestTrialsResponse> response =
        Suggest(study, 1, slot->client_id());
    if (!response.ok()) {
      slot->Release();
      return response.status();
    }
    if (response->trials_size() > 0) {
      return std::optional<Trial>(Trial(core_,
                                        std::move(*response->mutable_trials(0)),
                                        slot, options().heartbeats));
    }
    if (response->study_state() == v1::Study::COMPLETED) {
      slot->Release();
      return std::nullopt;
    }
    internal::SleepBackoff(wait, kWaitInitial, kWaitMax);
  }
}

Trial Client::Hold(v1::Trial trial, int devices) const {
  return Trial(core_, std::move(trial), nullptr, options().heartbeats, devices);
}

absl::StatusOr<Trial> Client::GetTrial(const std::string& study,
                                       int64_t id) const {
  v1::GetTrialRequest request;
  request.set_study_name(study);
  request.set_trial_id(id);
  v1::Trial response;
  absl::Status status =
      core_->Call("GetTrial", Retry::kIdempotent, [&](grpc::ClientContext& c) {
        return core_->stub().GetTrial(&c, request, &response);
      });
  if (!status.ok()) return status;
  return Trial(core_, std::move(response), nullptr);
}

absl::StatusOr<v1::Study> Client::CreateStudy(const v1::Study& study) const {
  v1::CreateStudyRequest request;
  *request.mutable_study() = study;
  v1::Study response;
  int attempts = 0;
  absl::Status status = core_->Call(
      "CreateStudy", Retry::kUnavailable,
      [&](grpc::ClientContext& c) {
        return core_->stub().CreateStudy(&c, request, &response);
      },
      &attempts);
  if (status.code() == absl::StatusCode::kAlreadyExists && attempts > 1) {
    // An earlier attempt may have created it before its reply was lost.
    absl::StatusOr<v1::Study> existing = GetStudy(study.name());
    if (existing.ok() && google::protobuf::util::MessageDifferencer::Equals(
                             existing->spec(), study.spec())) {
      return existing;
    }
  }
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::Study> Client::GetStudy(const std::string& name) const {
  v1::GetStudyRequest request;
  request.set_name(name);
  v1::Study response;
  absl::Status status =
      core_->Call("GetStudy", Retry::kIdempotent, [&](grpc::ClientContext& c) {
        return core_->stub().GetStudy(&c, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<std::vector<v1::Study>> Client::ListStudies() const {
  std::vector<v1::Study> studies;
  v1::ListStudiesRequest request;
  do {
    v1::ListStudiesResponse response;
    absl::Status status = core_->Call(
        "ListStudies", Retry::kIdempotent, [&](grpc::ClientContext& c) {
          return core_->stub().ListStudies(&c, request, &response);
        });
    if (!status.ok()) return status;
    for (v1::Study& study : *response.mutable_studies()) {
      studies.push_back(std::move(study));
    }
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return studies;
}

absl::Status Client::DeleteStudy(const std::string& name) const {
  v1::DeleteStudyRequest request;
  request.set_name(name);
  v1::DeleteStudyResponse response;
  int attempts = 0;
  absl::Status status = core_->Call(
      "DeleteStudy", Retry::kIdempotent,
      [&](grpc::ClientContext& c) {
        return core_->stub().DeleteStudy(&c, request, &response);
      },
      &attempts);
  // Gone on a retry: an earlier attempt deleted it.
  if (status.code() == absl::StatusCode::kNotFound && attempts > 1) {
    return absl::OkStatus();
  }
  return status;
}

absl::StatusOr<v1::Study> Client::SetStudyState(const std::string& name,
                                                v1::Study::State state) const {
  v1::SetStudyStateRequest request;
  request.set_name(name);
  request.set_state(state);
  v1::Study response;
  absl::Status status = core_->Call(
      "SetStudyState", Retry::kIdempotent, [&](grpc::ClientContext& c) {
        return core_->stub().SetStudyState(&c, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::Study> Client::SetStudyOwner(
    const std::string& name, const std::string& owner) const {
  v1::SetStudyOwnerRequest request;
  request.set_name(name);
  request.set_owner(owner);
  v1::Study response;
  absl::Status status = core_->Call(
      "SetStudyOwner", Retry::kIdempotent, [&](grpc::ClientContext& c) {
        return core_->stub().SetStudyOwner(&c, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::Study> Client::UpdateStudy(
    const v1::UpdateStudyRequest& request) const {
  v1::Study response;
  // Idempotent: it sets values, and a repeat changes (and records) nothing.
  absl::Status status = core_->Call(
      "UpdateStudy", Retry::kIdempotent, [&](grpc::ClientContext& c) {
        return core_->stub().UpdateStudy(&c, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::BackupResponse> Client::Backup(
    const std::string& destination_path, bool overwrite) const {
  v1::BackupRequest request;
  request.set_destination_path(destination_path);
  request.set_overwrite(overwrite);
  v1::BackupResponse response;
  absl::Status status =
      core_->Call("Backup", Retry::kIdempotent, [&](grpc::ClientContext& c) {
        return core_->stub().Backup(&c, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::SuggestTrialsResponse> Client::Suggest(
    const std::string& study, int count, const std::string& client_id) const {
  v1::SuggestTrialsRequest request;
  request.set_study_name(study);
  request.set_count(count);
  request.set_client_id(client_id.empty() ? this->client_id() : client_id);
  v1::SuggestTrialsResponse response;
  // Asking again under the same client id returns the same trials.
  absl::Status status = core_->Call(
      "SuggestTrials", Retry::kIdempotent, [&](grpc::ClientContext& c) {
        response.Clear();
        return core_->stub().SuggestTrials(&c, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::Trial> Client::CreateTrial(const std::string& study,
                                              const v1::Trial& trial,
                                              bool partial) const {
  v1::CreateTrialRequest request;
  request.set_study_name(study);
  *request.mutable_trial() = trial;
  request.set_partial(partial);
  v1::Trial response;
  absl::Status status = core_->Call(
      "CreateTrial", Retry::kUnavailable, [&](grpc::ClientContext& c) {
        return core_->stub().CreateTrial(&c, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::ListTrialsResponse> Client::ListTrials(
    const v1::ListTrialsRequest& request) const {
  v1::ListTrialsResponse response;
  absl::Status status = core_->Call(
      "ListTrials", Retry::kIdempotent, [&](grpc::ClientContext& c) {
        response.Clear();
        return core_->stub().ListTrials(&c, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<std::vector<v1::Trial>> Client::ListAllTrials(
    const std::string& study,
    const std::vector<v1::Trial::State>& states) const {
  v1::ListTrialsRequest request;
  request.set_study_name(study);
  request.set_page_size(1000);
  for (v1::Trial::State state : states) request.add_states(state);
  std::vector<v1::Trial> trials;
  while (true) {
    absl::StatusOr<v1::ListTrialsResponse> page = ListTrials(request);
    if (!page.ok()) return page.status();
    for (v1::Trial& trial : *page->mutable_trials()) {
      trials.push_back(std::move(trial));
    }
    if (page->next_page_token().empty()) break;
    if (page->next_page_token() == request.page_token()) {
      return absl::InternalError(
          absl::StrCat("ListTrials of study \"", study,
                       "\" returned the same page token twice"));
    }
    request.set_page_token(page->next_page_token());
  }
  return trials;
}

absl::StatusOr<v1::ListOptimalTrialsResponse> Client::ListOptimalTrials(
    const std::string& study) const {
  v1::ListOptimalTrialsRequest request;
  request.set_study_name(study);
  v1::ListOptimalTrialsResponse response;
  absl::Status status = core_->Call(
      "ListOptimalTrials", Retry::kIdempotent, [&](grpc::ClientContext& c) {
        response.Clear();
        return core_->stub().ListOptimalTrials(&c, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::Trial> Client::AddMeasurement(
    const v1::AddMeasurementRequest& request) const {
  v1::Trial response;
  // The server treats a re-sent (step, metrics) as a no-op.
  absl::Status status = core_->Call(
      "AddMeasurement", Retry::kIdempotent, [&](grpc::ClientContext& c) {
        return core_->stub().AddMeasurement(&c, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::Trial> Client::CompleteTrial(
    const v1::CompleteTrialRequest& request) const {
  v1::Trial response;
  int attempts = 0;
  absl::Status status = core_->Call(
      "CompleteTrial", Retry::kIdempotent,
      [&](grpc::ClientContext& c) {
        return core_->stub().CompleteTrial(&c, request, &response);
      },
      &attempts);
  if (status.code() == absl::StatusCode::kFailedPrecondition && attempts > 1) {
    // The trial is no longer open: if an earlier attempt finished it as
    // asked before its reply was lost, that is our success.
    absl::StatusOr<Trial> stored =
        GetTrial(request.study_name(), request.trial_id());
    if (stored.ok()) {
      const v1::Trial& now = stored->proto();
      // Finished under our epoch with our result: the lost reply was ours.
      // Under a later epoch another worker finished it, whatever it stored.
      const bool ours = now.lease_epoch() == request.lease_epoch();
      bool as_asked = request.worker_failed()
                          ? (now.state() == v1::Trial::REQUESTED ||
                             now.state() == v1::Trial::FAILED ||
                             now.lease_epoch() > request.lease_epoch())
                      : request.infeasible()
                          ? ours && now.state() == v1::Trial::INFEASIBLE
                          : ours &&
                                (now.state() == v1::Trial::COMPLETED ||
                                 now.state() == v1::Trial::STOPPED) &&
                                HoldsMetrics(now.final_measurement(),
                                             request.final_measurement());
      if (as_asked) return now;
    }
  }
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::HeartbeatResponse> Client::Heartbeat(
    const v1::HeartbeatRequest& request) const {
  v1::HeartbeatResponse response;
  absl::Status status =
      core_->Call("Heartbeat", Retry::kIdempotent, [&](grpc::ClientContext& c) {
        return core_->stub().Heartbeat(&c, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::CheckEarlyStoppingResponse> Client::CheckEarlyStopping(
    const std::string& study, int64_t trial_id) const {
  v1::CheckEarlyStoppingRequest request;
  request.set_study_name(study);
  request.set_trial_id(trial_id);
  v1::CheckEarlyStoppingResponse response;
  absl::Status status = core_->Call(
      "CheckEarlyStopping", Retry::kIdempotent, [&](grpc::ClientContext& c) {
        return core_->stub().CheckEarlyStopping(&c, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::Trial> Client::StopTrial(const std::string& study,
                                            int64_t trial_id,
                                            const std::string& reason) const {
  v1::StopTrialRequest request;
  request.set_study_name(study);
  request.set_trial_id(trial_id);
  request.set_reason(reason);
  v1::Trial response;
  // Stopping a stopped trial returns it unchanged: safe to repeat.
  absl::Status status =
      core_->Call("StopTrial", Retry::kIdempotent, [&](grpc::ClientContext& c) {
        return core_->stub().StopTrial(&c, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::Status Client::WatchTrials(
    const std::string& study, int64_t after_sequence,
    const std::function<bool(const v1::TrialEvent&)>& on_event) const {
  v1::WatchTrialsRequest request;
  request.set_study_name(study);
  int failures = 0;
  while (true) {
    request.set_after_sequence(after_sequence);
    grpc::ClientContext context;
    // A stream has no deadline of its own: it lasts while the caller wants.
    if (absl::Status s =
            core_->PrepareContext(context, std::chrono::hours(24 * 365));
        !s.ok()) {
      return s;
    }
    std::unique_ptr<grpc::ClientReader<v1::TrialEvent>> reader =
        core_->stub().WatchTrials(&context, request);
    v1::TrialEvent event;
    bool wanted = true;
    while (wanted && reader->Read(&event)) {
      after_sequence = event.sequence();
      failures = 0;
      wanted = on_event(event);
    }
    if (!wanted) {
      context.TryCancel();
      reader->Finish();
      return absl::OkStatus();
    }
    absl::Status status = ToAbslStatus(reader->Finish());
    if (status.code() != absl::StatusCode::kUnavailable ||
        ++failures >= core_->options().max_attempts) {
      return status;
    }
    internal::SleepBackoff(failures, core_->options().initial_backoff,
                           core_->options().max_backoff);
  }
}

absl::StatusOr<v1::Study> Client::ImportStudy(const v1::Study& study,
                                              TrialSource& trials) const {
  constexpr size_t kMessageBytes = 1 << 20;
  v1::Study response;
  absl::Status source_error;
  int tries = 0;
  int64_t sent = 0;
  absl::Status status = core_->Call(
      "ImportStudy", Retry::kUnavailable, [&](grpc::ClientContext& c) {
        c.set_deadline(
            std::chrono::system_clock::now() +
            std::max<std::chrono::milliseconds>(core_->options().call_timeout,
                                                std::chrono::minutes(10)));
        ++tries;
        sent = 0;
        source_error = trials.Start();
        if (!source_error.ok()) return grpc::Status::CANCELLED;
        std::unique_ptr<grpc::ClientWriter<v1::ImportStudyRequest>> writer =
            core_->stub().ImportStudy(&c, &response);
        // Messages of about kMessageBytes, each built as it is sent: no
        // more than one message of trials is held.
        v1::ImportStudyRequest message;
        *message.mutable_study() = study;
        size_t bytes = study.ByteSizeLong();
        v1::Trial trial;
        while (true) {
          absl::StatusOr<bool> more = trials.Next(trial);
          if (!more.ok()) {
            // Cancelled mid-stream, the server stores nothing.
            source_error = more.status();
            c.TryCancel();
            writer->Finish().ok();
            return grpc::Status::CANCELLED;
          }
          if (!*more) break;
          const size_t size = trial.ByteSizeLong();
          if (bytes > 0 && bytes + size > kMessageBytes) {
            if (!writer->Write(message)) return writer->Finish();
            message.Clear();
            bytes = 0;
          }
          *message.add_trials() = std::move(trial);
          bytes += size;
          ++sent;
        }
        if (writer->Write(message)) writer->WritesDone();
        return writer->Finish();
      });
  if (!source_error.ok()) return source_error;
  if (status.code() == absl::StatusCode::kAlreadyExists && tries > 1) {
    // A retry meeting the study: the try before may have landed with its
    // answer lost (a server killed just after storing it). An interrupted
    // import leaves nothing (the server removes it on start), so the same
    // study, created when the exported one was, with every trial sent, is
    // this import.
    absl::StatusOr<v1::Study> stored = GetStudy(study.name());
    if (stored.ok() && stored->state() != v1::Study::IMPORTING &&
        study.create_time_ms() != 0 &&
        stored->create_time_ms() == study.create_time_ms()) {
      int64_t count = 0;
      for (const auto& [state, n] : stored->trial_counts()) count += n;
      if (count == sent) return stored;
    }
  }
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::Study> Client::ImportStudy(
    const v1::Study& study, const std::vector<v1::Trial>& trials) const {
  class VectorSource final : public TrialSource {
   public:
    explicit VectorSource(const std::vector<v1::Trial>& trials)
        : trials_(trials) {}
    absl::Status Start() override {
      next_ = 0;
      return absl::OkStatus();
    }
    absl::StatusOr<bool> Next(v1::Trial& trial) override {
      if (next_ == trials_.size()) return false;
      trial = trials_[next_++];
      return true;
    }

   private:
    const std::vector<v1::Trial>& trials_;
    size_t next_ = 0;
  };
  VectorSource source(trials);
  return ImportStudy(study, source);
}

absl::StatusOr<v1::ImportTrialsResponse> Client::ImportTrials(
    const v1::ImportTrialsRequest& request) const {
  v1::ImportTrialsResponse response;
  absl::Status status = core_->Call(
      "ImportTrials", Retry::kUnavailable, [&](grpc::ClientContext& c) {
        return core_->stub().ImportTrials(&c, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

}  // namespace hypertune
