// Internals of the SDK shared by Client and Trial: the channel (plaintext or
// TLS) and stub, the retry loop every RPC goes through (each attempt carrying
// the bearer token), and the process-wide table of client ids that lets
// concurrent NextTrial callers hold distinct trials.
//
// Why a retry loop of our own (Call) and not gRPC's retry policy (a service
// config's retryPolicy, grpc/proposal A6): that policy retries on one
// channel, before any response headers, at most 5 attempts under one
// deadline for them all, within a 256 KiB buffer of the request, and does
// not tell the caller how many attempts it made. Call also
// - moves to another server: the leader a standby names, or the next one
//   listed (MoveOn), which a per-channel policy cannot (retrying a standby's
//   UNAVAILABLE on its own channel would only delay the move);
// - rides out a restart or a preemption of the server: max_attempts is the
//   user's, not capped at 5;
// - gives each attempt its own deadline, so that DEADLINE_EXCEEDED (and a
//   stopping server's CANCELLED) can be retried for calls safe to repeat;
// - retries client streams of any size (ImportStudy's trials, re-read from
//   their source);
// - counts attempts: the final error names them, and callers read them
//   (ImportStudy).
// What gRPC does do underneath, unconfigured: reconnecting (the channel
// arguments set its backoff) and the transparent retry of a call that never
// left the client. Its retry policy stays off: the channels take no service
// config from DNS, which could add it beneath Call and multiply the
// attempts unseen. The Python client's _retry.py is the same loop.
//
// Thread safety: ClientCore is immutable after construction and safe to share;
// the client id table is guarded by its own mutex.
#ifndef HYPERTUNE_TRAINER_SDK_CLIENT_CORE_H_
#define HYPERTUNE_TRAINER_SDK_CLIENT_CORE_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "hypertune/v1/hypertune.grpc.pb.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune::internal {

// Which failures a call retries.
enum class Retry {
  // UNAVAILABLE only: the server most likely never saw the request.
  kUnavailable,
  // UNAVAILABLE, DEADLINE_EXCEEDED and CANCELLED (by a server shutting
  // down): repeating the call is harmless.
  kIdempotent,
};

class ClientCore {
 public:
  // REQUIRES: `resolved` went through ResolveClientOptions. TLS files that
  // cannot be read make every call fail with setup_error().
  explicit ClientCore(ClientOptions resolved);

  const ClientOptions& options() const { return options_; }
  // The stub of the server calls go to now (of several: the leader, as far
  // as this client knows). REQUIRES: setup_error() is OK.
  v1::HyperTune::Stub& stub() const { return *stubs_[current_.load()]; }
  // Why no call can be made (a TLS file could not be read), or OK.
  const absl::Status& setup_error() const { return setup_error_; }

  // Readies `context` for one attempt: a deadline `timeout` from now and the
  // bearer token. Returns setup_error().
  absl::Status PrepareContext(grpc::ClientContext& context,
                              std::chrono::milliseconds timeout) const;

  // Runs `attempt` (one RPC on a fresh context carrying the deadline) until it
  // succeeds, fails in a way `retry` does not cover, or max_attempts are
  // spent, sleeping a jittered backoff between attempts. With several
  // servers, an UNAVAILABLE moves the calls to the leader a standby names,
  // else to the next server. Returns the last status; a retried failure's
  // message names the RPC, the server and the attempts. Sets *attempts (if
  // given) to the number of attempts made.
  absl::Status Call(
      const char* rpc, Retry retry,
      absl::FunctionRef<grpc::Status(grpc::ClientContext&)> attempt,
      int* attempts = nullptr) const;

 private:
  // After an UNAVAILABLE `status` from the current server: moves to the
  // leader it names, else to the next server. Returns whether it moved to
  // a named leader (worth trying at once, without a backoff).
  bool MoveOn(const absl::Status& status) const;

  ClientOptions options_;
  absl::Status setup_error_;
  std::vector<std::string> servers_;  // options_.server, split
  std::vector<std::unique_ptr<v1::HyperTune::Stub>> stubs_;
  mutable std::atomic<size_t> current_{0};
};

// Sleeps BackoffDelay with a random jitter.
void SleepBackoff(int attempt, std::chrono::milliseconds initial,
                  std::chrono::milliseconds max);

// One of the ids a process asks for trials under, held by one NextTrial
// caller until its trial is finished. Index 0 is the base client id itself,
// index k > 0 is "<base>-<k>".
class ClientIdSlot {
 public:
  ClientIdSlot(std::string base, int index);
  ClientIdSlot(const ClientIdSlot&) = delete;
  ClientIdSlot& operator=(const ClientIdSlot&) = delete;

  const std::string& client_id() const { return client_id_; }
  int index() const { return index_; }
  // Makes the id available to the next NextTrial caller. Idempotent.
  void Release();

 private:
  std::string base_;
  int index_;
  std::string client_id_;
  std::atomic<bool> released_{false};
};

// Holds the lowest free id of `base` in this process. A slot is freed by
// Release() only: a trial dropped unfinished keeps its id busy, so that the
// next caller does not get that same trial back.
std::shared_ptr<ClientIdSlot> AcquireClientIdSlot(const std::string& base);

// True exactly once per process: whether the caller may take the trial a
// `hypertune worker` handed to this process.
bool TakeWorkerTrial();

// This process's rank among the processes of one trial (torchrun and the
// like): $RANK, else $LOCAL_RANK; 0 when neither is set or is a number.
int ProcessRank();

}  // namespace hypertune::internal

#endif  // HYPERTUNE_TRAINER_SDK_CLIENT_CORE_H_
