// ConnectionGate: the HTTP server's front door. httplib's own accept loop
// hands each connection straight to a thread and keeps no hold on it, so a
// client sending a header line every few seconds (slowloris) or a body a
// byte at a time keeps its thread for as long as it likes: httplib's read
// timeout is idle time, reset by every byte. The gate accepts on the
// listening socket itself instead, and
//   - refuses (closes at once, on its own thread) a connection from an
//     address that already has `max_per_address` open;
//   - with `wait_for_headers` (plain HTTP), keeps a new connection off the
//     worker threads until its whole header block has arrived (peeked, not
//     read), so that clients slow to send headers never hold a thread;
//   - enforces total deadlines: a request's headers must be in within
//     `header_timeout` of the connection's accept (or of the previous
//     answer on a kept-alive connection), and its body within
//     `body_timeout` of its headers. Past a deadline the socket is shut
//     down, which ends httplib's read; a waiting connection is closed;
//   - lifts the deadline only for a trusted request (an authenticated
//     caller, as the server judges it): an untrusted one must be read and
//     answered within header_timeout of its start, gets no keep-alive, and
//     at most `max_untrusted` of them are served at once, so that
//     unauthenticated clients can never hold the threads that
//     authenticated ones need.
// The handlers report each request's progress with the static functions
// below, which act on the connection the calling worker thread serves.
//
// Thread-safe.
#ifndef HYPERTUNE_SERVICE_HTTP_CONNECTION_GATE_H_
#define HYPERTUNE_SERVICE_HTTP_CONNECTION_GATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace httplib {
class TaskQueue;
}  // namespace httplib

namespace hypertune::service {

struct ConnectionGateOptions {
  // Connections one address may have open; more are closed at once.
  int max_per_address = 64;
  absl::Duration header_timeout = absl::Seconds(10);
  absl::Duration body_timeout = absl::Seconds(10);
  // Untrusted requests served at once; more are answered 503 at once.
  int max_untrusted = 256;
  // Hold new connections until their headers have arrived: only where the
  // bytes can be read as they come (plain HTTP, not TLS).
  bool wait_for_headers = true;
};

class ConnectionGate {
 public:
  // Serves connection `fd` on a worker thread and closes it.
  using Serve = std::function<void(int fd)>;

  // Accepts on `listen_fd` (bound and listening; the gate makes it
  // non-blocking but does not close it) on a thread of its own, and runs
  // `serve` for each admitted connection on `workers`. INTERNAL if the
  // gate's epoll set cannot be made.
  static absl::StatusOr<std::unique_ptr<ConnectionGate>> Start(
      int listen_fd, ConnectionGateOptions options,
      std::unique_ptr<httplib::TaskQueue> workers, Serve serve);

  // Stop() and Drain().
  ~ConnectionGate();

  // Stops accepting, closes the connections not yet handed to a worker and
  // shuts down those waiting for their next request or still within a
  // deadline; trusted requests being answered run on, and close once
  // answered. Idempotent.
  void Stop();
  // After Stop: returns once every worker has finished. Idempotent.
  void Drain();

  // About the request of the connection the calling thread serves (no-ops
  // on any other thread):
  // Its headers are in; `trusted`: its caller authenticated, so its
  // deadline is lifted (to body_timeout when `has_body`).
  static void HeadersIn(bool trusted, bool has_body);
  // Its body is in as well.
  static void BodyIn();
  // Takes one of the max_untrusted slots for it; false when none is free.
  static bool TakeUntrustedSlot();
  // Whether the connection closes once this request is answered (untrusted,
  // or the server is stopping).
  static bool ClosesAfterAnswer();
  // Its answer has been sent: the connection waits for the next request
  // (header_timeout from now), or is shut down (ClosesAfterAnswer).
  static void Answered();

 private:
  struct Connection {
    ConnectionGate* gate;
    int fd;
    // A duplicate of fd that the gate shuts the socket down with: httplib
    // closes fd itself, after which its number may name a new connection.
    int watch_fd = -1;
    std::string address;
    // absl::InfiniteFuture(): none.
    absl::Time deadline = absl::InfiniteFuture();
    bool waiting = true;       // in the lobby, not yet on a worker
    bool between_requests = true;
    bool trusted = false;      // the request being served
    bool holds_untrusted_slot = false;
  };
  using Deadlines = std::set<std::pair<absl::Time, Connection*>>;

  ConnectionGate(int listen_fd, ConnectionGateOptions options,
                 std::unique_ptr<httplib::TaskQueue> workers, Serve serve);
  // The gate's thread: accepts, watches the lobby, enforces deadlines.
  void Run();
  void AcceptAll();
  // A lobby connection got bytes: hand it over once its headers are in.
  void Examine(Connection* connection);
  // Takes a connection out of the lobby for a worker; false (and the
  // connection dropped) if it cannot be watched there.
  bool HandOver(Connection* connection) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues a handed-over connection for a worker. REQUIRES: mu_ not held.
  void Dispatch(Connection* connection);
  // Closes a lobby connection and forgets it.
  void Drop(Connection* connection) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker finished `connection` (httplib closed its fd).
  void Finished(Connection* connection);
  void Forget(Connection* connection) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetDeadline(Connection* connection, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseUntrustedSlot(Connection* connection)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Enforces the deadlines that passed; returns when the next one falls.
  absl::Time ExpireDeadlines() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Wake();

  // The connection this worker thread serves.
  static thread_local Connection* current_;

  const int listen_fd_;
  const ConnectionGateOptions options_;
  const std::unique_ptr<httplib::TaskQueue> workers_;
  const Serve serve_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  // The gate thread's own buffer for peeking at headers.
  std::vector<char> peek_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool drained_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<Connection*, std::unique_ptr<Connection>> connections_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> open_by_address_ ABSL_GUARDED_BY(mu_);
  Deadlines deadlines_ ABSL_GUARDED_BY(mu_);
  // When the gate thread wakes next unless woken: a deadline set earlier
  // must wake it.
  absl::Time next_wake_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // accept() ran out of descriptors: retry then.
  absl::Time accept_paused_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int untrusted_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_HTTP_CONNECTION_GATE_H_
