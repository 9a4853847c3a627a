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
// study or route), 503 (too many event streams). Access follows the gRPC
// rule (access.h): every read goes through StudyService with the caller's
// principal. Reads never wait for writers.
//
// Connections: each is served by a thread of its own (ConnectionPool, up to
// `max_connections`), so silent or slow connections never hold up a ready
// request; a connection that sends nothing for `idle_timeout_s` is closed.
// Event streams are limited per owner and in all. With `tls_cert_file` the
// server speaks HTTPS only. TCP_NODELAY: keep-alive answers go out at once.
//
// Thread-safe: Shutdown may be called from any thread.
#ifndef HYPERTUNE_SERVICE_HTTP_HTTP_SERVER_H_
#define HYPERTUNE_SERVICE_HTTP_HTTP_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "service/auth.h"
#include "service/metrics.h"
#include "service/study_service.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace hypertune::service {

struct HttpServerOptions {
  // HOST:PORT; port 0 picks a free one (see HttpServer::address).
  std::string listen = "127.0.0.1:8080";
  // Connections served at once, each by its own thread (more wait for one
  // to end). Default 512.
  int max_connections = 512;
  // Event streams open at once: in all (default 256) and per owner
  // (default 16), so that one owner's dashboards cannot crowd out others.
  int max_streams = 256;
  int max_streams_per_owner = 16;
  // Seconds a connection may stay silent (before and between requests) and
  // a request may take to arrive. Default 5.
  int idle_timeout_s = 5;
  // PEM files of the certificate (chain) and key: serve HTTPS. Empty
  // (default): plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM CA bundle: require client certificates it signed (with TLS only).
  std::string tls_client_ca_file;
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
  // REQUIRES: `service` and `metrics` outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      StudyService* service, Authorizer authorizer,
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
  using Request = httplib::Request;
  using Response = httplib::Response;
  // A route's handler: one member function per endpoint (routes.cc).
  using Handler = void (HttpServer::*)(const Request&, Response&);
  // Who calls, and the study a route names, if they may read it.
  struct Admitted {
    Principal caller;
    v1::Study study;
  };

  HttpServer() = default;
  // Registers every route.
  void Route();
  // Registers `handler` for GET `pattern`, counted in /metrics as `name`.
  void Get(const std::string& pattern, std::string name, Handler handler);

  // The principal of the request's bearer token (AuthOff() with auth off);
  // UNAUTHENTICATED without a known token.
  absl::StatusOr<Principal> Caller(const Request& req) const;
  // The caller, and study `name` if the caller may read it.
  absl::StatusOr<Admitted> Admit(const Request& req, const std::string& name);
  // Every study `caller` may read, page by page.
  absl::StatusOr<v1::ListStudiesResponse> VisibleStudies(
      const Principal& caller);
  // Takes an event-stream slot for `owner`; UNAVAILABLE naming the limit
  // when none is free. ReleaseStream gives it back.
  absl::Status AcquireStream(const std::string& owner);
  void ReleaseStream(const std::string& owner);

  // The routes (routes.cc), in the order of the table above.
  void ListStudies(const Request& req, Response& res);
  void GetStudy(const Request& req, Response& res);
  void ListTrials(const Request& req, Response& res);
  void TrialsCsv(const Request& req, Response& res);
  void Best(const Request& req, Response& res);
  void Changes(const Request& req, Response& res);
  void Events(const Request& req, Response& res);
  void MetricsText(const Request& req, Response& res);
  void Page(const Request& req, Response& res);
  void AssetFile(const Request& req, Response& res);

  StudyService* service_ = nullptr;
  Authorizer authorizer_;
  Metrics* metrics_ = nullptr;
  HttpServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  std::atomic<bool> stopping_{false};
  // Event streams being served, by owner and in all.
  absl::Mutex streams_mu_;
  absl::flat_hash_map<std::string, int> streams_by_owner_
      ABSL_GUARDED_BY(streams_mu_);
  int open_streams_ ABSL_GUARDED_BY(streams_mu_) = 0;
  std::string address_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_HTTP_HTTP_SERVER_H_
