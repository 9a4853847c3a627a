#include "trainer_sdk/client_core.h"

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "trainer_sdk/grpc_status.h"

namespace hypertune::internal {
namespace {

// Large trial listings (many measurements) exceed gRPC's 4 MiB default.
constexpr int kMaxReceiveMessageBytes = 64 << 20;

bool Retryable(absl::StatusCode code, Retry retry) {
  if (code == absl::StatusCode::kUnavailable) return true;
  return retry == Retry::kIdempotent &&
         code == absl::StatusCode::kDeadlineExceeded;
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

}  // namespace

ClientCore::ClientCore(ClientOptions resolved) : options_(std::move(resolved)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  channel_ = grpc::CreateCustomChannel(
      options_.server, grpc::InsecureChannelCredentials(), args);
  stub_ = v1::HyperTune::NewStub(channel_);
}

absl::Status ClientCore::Call(
    const char* rpc, Retry retry,
    absl::FunctionRef<grpc::Status(grpc::ClientContext&)> attempt,
    int* attempts) const {
  absl::Status status;
  int made = 0;
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         options_.call_timeout);
    status = ToAbslStatus(attempt(context));
    ++made;
    if (status.ok() || !Retryable(status.code(), retry) ||
        made >= options_.max_attempts) {
      break;
    }
    SleepBackoff(made, options_.initial_backoff, options_.max_backoff);
  }
  if (attempts != nullptr) *attempts = made;
  if (!status.ok() && Retryable(status.code(), retry)) {
    return absl::Status(
        status.code(),
        absl::StrCat(rpc, " to ", options_.server, " failed after ", made,
                     made == 1 ? " attempt: " : " attempts: ",
                     status.message()));
  }
  return status;
}

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

}  // namespace hypertune::internal
