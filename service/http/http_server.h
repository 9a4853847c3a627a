// HttpServer: hypertuned's HTTP side (`--http HOST:PORT`): the read-only JSON
// API for dashboards and scripts, the trial table as CSV, a server-sent
// events stream of trial changes, Prometheus /metrics and the dashboard's
// page and assets.
//
//   GET /api/studies                          ListStudies (the caller's)
//   GET /api/studies/{name}                   GetStudy
//   GET /api/studies/{name}/trials            ListTrials: page_size (1-1000,
//       default 100), page_token, state (names, comma-separated or repeated)
//   GET /api/studies/{name}/trials.csv        every trial, streamed (csv.h)
//   GET /api/studies/{name}/best              ListOptimalTrials
//   GET /api/studies/{name}/changes           the change feed, one page:
//       after (sequence, default 0), limit (1-1000, default 1000)
//   GET /api/studies/{name}/events            text/event-stream of WatchTrials
//       from `after` or the Last-Event-ID header; `id:` is the sequence
//   GET /metrics                              Prometheus text format
//   GET /, /assets/...                        the dashboard (no data, no auth)
//
// JSON is the protobuf JSON mapping with the proto's field names, as the CLI
// prints it. Errors are {"error": {"code", "status", "message"}} with 400
// (a bad query parameter, named), 401 (no or unknown bearer token when the
// server has a token table), 403 (another owner's study), 404 (no such
// study or route). Ownership follows the gRPC rule (Authorizer::CheckOwner).
// Every read goes through the store's read connections: reads never wait for
// writers.
//
// Thread-safe: Shutdown may be called from any thread; handlers run on a
// pool of `threads` threads, a watching dashboard holding one.
#ifndef HYPERTUNE_SERVICE_HTTP_HTTP_SERVER_H_
#define HYPERTUNE_SERVICE_HTTP_HTTP_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "service/auth.h"
#include "service/metrics.h"
#include "service/study_service.h"
#include "storage/study_store.h"

namespace httplib {
class Server;
}

namespace hypertune::service {

struct HttpServerOptions {
  // HOST:PORT; port 0 picks a free one (see HttpServer::address).
  std::string listen = "127.0.0.1:8080";
  // Handler threads; each open event stream holds one. Default 32.
  int threads = 32;
  // The SQLite file whose size /metrics reports; empty: not reported.
  std::string db_path;
  // How often an idle event stream sends a comment line, which is how a
  // closed connection is noticed. Default 15 s.
  int keepalive_ms = 15'000;
};

class HttpServer {
 public:
  // Binds and starts serving on a thread of its own. UNAVAILABLE if the
  // address cannot be bound, INVALID_ARGUMENT if it is not HOST:PORT.
  // REQUIRES: `service`, `store` and `metrics` outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      StudyService* service, storage::StudyStore* store, Authorizer authorizer,
      Metrics* metrics, HttpServerOptions options);

  // Shutdown().
  ~HttpServer();

  // The address actually bound, HOST:PORT.
  const std::string& address() const { return address_; }

  // Stops accepting connections, ends event streams and returns once every
  // handler has returned. Idempotent.
  void Shutdown();

  // Whether Shutdown has begun; event streams poll it.
  bool stopping() const { return stopping_.load(); }

 private:
  HttpServer() = default;
  void Route();

  StudyService* service_ = nullptr;
  storage::StudyStore* store_ = nullptr;
  Authorizer authorizer_;
  Metrics* metrics_ = nullptr;
  HttpServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  std::atomic<bool> stopping_{false};
  // Event streams being served (each holds a handler thread).
  std::atomic<int> open_streams_{0};
  std::string address_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_HTTP_HTTP_SERVER_H_
