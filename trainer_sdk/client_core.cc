#include "trainer_sdk/client_core.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "trainer_sdk/grpc_status.h"

namespace hypertune::internal {
namespace {

// Large trial listings (many measurements) exceed gRPC's 4 MiB default.
constexpr int kMaxReceiveMessageBytes = 64 << 20;

// CANCELLED on a call: a unary call's context is never cancelled here, so
// it is the server's doing (a hypertuned stopping cancels what it has not
// answered), and a call safe to repeat is repeated.
bool Retryable(absl::StatusCode code, Retry retry) {
  if (code == absl::StatusCode::kUnavailable) return true;
  return retry == Retry::kIdempotent &&
         (code == absl::StatusCode::kDeadlineExceeded ||
          code == absl::StatusCode::kCancelled);
}

class ClientIdTable {
 public:
  int Acquire(const std::string& base) {
    absl::MutexLock lock(&mu_);
    std::vector<bool>& busy = busy_[base];
    auto free = std::find(busy.begin(), busy.end(), false);
    int index = static_cast<int>(free - busy.begin());
    if (free == busy.end()) {
      busy.push_back(true);
    } else {
      *free = true;
    }
    return index;
  }

  void Release(const std::string& base, int index) {
    absl::MutexLock lock(&mu_);
    busy_[base][index] = false;
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::vector<bool>> busy_
      ABSL_GUARDED_BY(mu_);
};

ClientIdTable& Table() {
  static auto* table = new ClientIdTable;  // Never destroyed: used at exit.
  return *table;
}

// The contents of the file named by option `field`.
absl::StatusOr<std::string> ReadFile(const char* field,
                                     const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    // Not FAILED_PRECONDITION: to a trial's calls that means a lost lease.
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": cannot read \"", path, "\": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(
    const ClientOptions& options) {
  if (options.tls_ca.empty()) {
    if (!options.tls_cert.empty() || !options.tls_key.empty()) {
      return absl::InvalidArgumentError(
          "tls_cert, tls_key: a client certificate needs TLS; give the "
          "server's CA too (tls_ca)");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "tls_cert, tls_key: the client certificate and its key go together");
  }
  grpc::SslCredentialsOptions ssl;
  absl::StatusOr<std::string> ca = ReadFile("tls_ca", options.tls_ca);
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *std::move(ca);
  if (!options.tls_cert.empty()) {
    absl::StatusOr<std::string> cert = ReadFile("tls_cert", options.tls_cert);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFile("tls_key", options.tls_key);
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

ClientCore::ClientCore(ClientOptions resolved) : options_(std::move(resolved)) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      Credentials(options_);
  if (!credentials.ok()) {
    setup_error_ = credentials.status();
    credentials = grpc::InsecureChannelCredentials();  // Never used.
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  // Reconnect within ~0.1-1 s of a restarted server instead of gRPC's
  // default backoff of several seconds, which can outlast a trial's lease.
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 100);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // No service config from DNS: its retryPolicy would retry beneath Call
  // (client_core.h says why ours), multiplying the attempts unseen.
  args.SetInt(GRPC_ARG_SERVICE_CONFIG_DISABLE_RESOLUTION, 1);
  servers_ = absl::StrSplit(options_.server, ',', absl::SkipEmpty());
  if (servers_.empty()) servers_.push_back(options_.server);
  for (const std::string& server : servers_) {
    stubs_.push_back(v1::HyperTune::NewStub(
        grpc::CreateCustomChannel(server, *credentials, args)));
  }
}

bool ClientCore::MoveOn(const absl::Status& status) const {
  if (servers_.size() < 2) return false;
  // A standby's answer (service/server/leadership.h).
  constexpr absl::string_view kLeaderIs = "the leader is at ";
  const absl::string_view message = status.message();
  if (const size_t at = message.find(kLeaderIs);
      at != absl::string_view::npos) {
    absl::string_view leader = message.substr(at + kLeaderIs.size());
    leader = leader.substr(0, leader.find_first_of(" ;,)"));
    for (size_t i = 0; i < servers_.size(); ++i) {
      if (servers_[i] == leader) {
        return current_.exchange(i) != i;
      }
    }
  }
  size_t now = current_.load();
  current_.compare_exchange_strong(now, (now + 1) % servers_.size());
  return false;
}

absl::Status ClientCore::PrepareContext(
    grpc::ClientContext& context, std::chrono::milliseconds timeout) const {
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  if (!options_.token.empty()) {
    context.AddMetadata("authorization",
                        absl::StrCat("Bearer ", options_.token));
  }
  return setup_error_;
}

absl::Status ClientCore::Call(
    const char* rpc, Retry retry,
    absl::FunctionRef<grpc::Status(grpc::ClientContext&)> attempt,
    int* attempts) const {
  absl::Status status;
  int made = 0;
  while (true) {
    grpc::ClientContext context;
    if (absl::Status s = PrepareContext(context, options_.call_timeout);
        !s.ok()) {
      return s;
    }
    status = ToAbslStatus(attempt(context));
    ++made;
    if (status.ok() || !Retryable(status.code(), retry) ||
        made >= options_.max_attempts) {
      break;
    }
    if (status.code() == absl::StatusCode::kUnavailable && MoveOn(status)) {
      continue;  // To the leader a standby named: at once.
    }
    SleepBackoff(made, options_.initial_backoff, options_.max_backoff);
  }
  if (attempts != nullptr) *attempts = made;
  if (!status.ok() && Retryable(status.code(), retry)) {
    return absl::Status(
        status.code(),
        absl::StrCat(
            rpc, " to ", options_.server, " failed after ", made,
            made == 1 ? " attempt: " : " attempts: ", status.message(),
            status.code() == absl::StatusCode::kUnavailable
                ? absl::StrCat(" (is hypertuned running at ", options_.server,
                               "? Start it with `hypertuned --db FILE`, or "
                               "give its address with --server HOST[:PORT] "
                               "or $HYPERTUNE_SERVER)")
                : ""));
  }
  return status;
}

void SleepBackoff(int attempt, std::chrono::milliseconds initial,
                  std::chrono::milliseconds max) {
  thread_local absl::BitGen bitgen;
  double jitter = absl::Uniform(bitgen, 0.5, 1.0);
  std::this_thread::sleep_for(BackoffDelay(attempt, initial, max, jitter));
}

ClientIdSlot::ClientIdSlot(std::string base, int index)
    : base_(std::move(base)),
      index_(index),
      client_id_(index == 0 ? base_ : absl::StrCat(base_, "-", index)) {}

void ClientIdSlot::Release() {
  if (!released_.exchange(true)) Table().Release(base_, index_);
}

std::shared_ptr<ClientIdSlot> AcquireClientIdSlot(const std::string& base) {
  return std::make_shared<ClientIdSlot>(base, Table().Acquire(base));
}

bool TakeWorkerTrial() {
  static std::atomic<bool> taken{false};
  return !taken.exchange(true);
}

int ProcessRank() {
  for (const char* name : {"RANK", "LOCAL_RANK"}) {
    const char* value = std::getenv(name);
    int rank = 0;
    if (value != nullptr && absl::SimpleAtoi(value, &rank)) return rank;
  }
  return 0;
}

}  // namespace hypertune::internal
