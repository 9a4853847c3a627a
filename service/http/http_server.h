// HttpServer: hypertuned's HTTP side (`--http HOST:PORT`): the JSON API for
// dashboards and scripts, the trial table as CSV, a server-sent events
// stream of trial changes, Prometheus /metrics and the dashboard's page and
// assets.
//
//   GET /api/server                           what this server offers the
//       page: {"auth", "writes", "logs", "charts"}
//   GET /api/studies                          ListStudies (the caller's)
//   GET /api/studies/{name}                   GetStudy
//   GET /api/studies/{name}/trials            ListTrials: page_size (1-1000,
//       default 100), page_token, state (names, comma-separated or repeated)
//   GET /api/studies/{name}/trials.csv        every trial, streamed (trial_csv.h)
//   GET /api/studies/{name}/trials/{id}       GetTrial
//   GET /api/studies/{name}/trials/{id}/log   the end of the trial's log
//       file (log_tail.h), bytes (1-65536, default 65536); only with
//       --log-root, only from inside it
//   GET /api/studies/{name}/best              ListOptimalTrials
//   GET /api/studies/{name}/importance        fANOVA parameter importances
//       over the COMPLETED trials (dashboard_view.h)
//   GET /api/studies/{name}/changes           the change feed, one page:
//       after (sequence, default 0), limit (1-1000, default 1000; up to
//       10,000 with view=compact),
//       view (full, default, or compact: dashboard_view.h)
//   GET /api/studies/{name}/events            text/event-stream of WatchTrials
//       from `after` or the Last-Event-ID header; `id:` is the sequence
//   POST /api/studies/{name}/trials/{id}/stop {"reason"?}: StopTrial
//   POST /api/studies/{name}/state            {"state"}: SetStudyState
//   POST /api/studies/{name}/max_trials       {"max_trials"}: SetMaxTrials
//   GET /metrics                              Prometheus text format
//   GET /, /assets/...                        the dashboard (no data, no auth)
//
// JSON is the protobuf JSON mapping with the proto's field names, as the CLI
// prints it. Errors are {"error": {"code", "status", "message"}} with 400
// (a bad query parameter or body field, named), 401 (no or unknown bearer
// token when the server has a token table), 403 (another owner's study, a
// write refused: write_guard.h), 404 (no such study, trial or route), 405
// (a route asked with the wrong method), 415 (a write without a JSON body),
// 503 (too many event streams). Access follows the gRPC rule (access.h):
// every call goes through StudyService with the caller's principal. Reads
// never wait for writers.
//
// Writes (POST) are served only with auth or with `allow_writes` on a
// loopback address, and only to same-origin requests with a JSON body
// (write_guard.h).
//
// Connections (connection_gate.h): at most `max_connections_per_address`
// from one address. A request's headers must be in within
// `header_timeout_ms` of the connection's accept (or of the previous answer)
// and its body within `body_timeout_ms` of its headers, in total, however
// slowly the bytes trickle; on plain HTTP a connection gets a thread only
// once its headers have arrived. Requests without a valid token (with auth
// on) get no keep-alive, must be answered within header_timeout_ms of their
// start, and hold at most half of the `max_connections` threads, so that
// they can never crowd out authenticated ones. Each connection on a thread
// has a thread of its own (ConnectionPool); a kept-alive connection that
// sends nothing for `idle_timeout_s` is closed. Event streams are limited
// per owner and in all. With `tls_cert_file` the server speaks HTTPS only.
// TCP_NODELAY: keep-alive answers go out at once.
//
// Thread-safe: Shutdown may be called from any thread.
#ifndef HYPERTUNE_SERVICE_HTTP_HTTP_SERVER_H_
#define HYPERTUNE_SERVICE_HTTP_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "service/auth.h"
#include "service/http/write_guard.h"
#include "service/metrics.h"
#include "service/stream_limits.h"
#include "service/study_service.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace hypertune::service {

class ConnectionGate;

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
  // Seconds a kept-alive connection may stay silent between requests, and
  // a read may wait for bytes. Default 5.
  int idle_timeout_s = 5;
  // Connections one client address may have open; more are closed at once.
  // Default 64.
  int max_connections_per_address = 64;
  // Total time a request's headers may take to arrive, counted from the
  // connection's accept or the previous answer. Default 10 s.
  int header_timeout_ms = 10'000;
  // Total time a request's body (at most 64 KiB, the server's limit) may
  // take after its headers: 10 s (the default) asks for 6.4 KiB/s.
  int body_timeout_ms = 10'000;
  // PEM files of the certificate (chain) and key: serve HTTPS. Empty
  // (default): plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM CA bundle: require client certificates it signed (with TLS only).
  std::string tls_client_ca_file;
  // The SQLite file whose size /metrics reports; empty: not reported.
  std::string db_path;
  // OK while this server serves its database; else the error every API
  // call answers (a standby's UNAVAILABLE naming the leader: leadership.h).
  // Default: always serving.
  std::function<absl::Status()> serving;
  // How often an idle event stream sends a comment line, which is how a
  // closed connection is noticed. Default 15 s.
  int keepalive_ms = 15'000;
  // Serve writes (stop a trial, pause or resume a study, raise its budget)
  // without auth. Refused unless `listen` is a loopback address. With auth
  // writes are served anyway, to the study's owner. Default false.
  bool allow_writes = false;
  // The folder trial logs are served from (log_tail.h); empty (default):
  // no log serving.
  std::string log_root;
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
  // Registers `handler` for GET (or POST) `pattern`, counted in /metrics
  // as `name`. A path registered for one method answers the other 405.
  void Get(const std::string& pattern, std::string name, Handler handler);
  void Post(const std::string& pattern, std::string name, Handler handler);
  void Handle(bool post, const std::string& pattern, std::string name,
              Handler handler);

  // Whether the request carries a known bearer token (always, with auth
  // off): what the connection gate trusts.
  bool Authenticated(const Request& req) const;
  // The principal of the request's bearer token (AuthOff() with auth off);
  // UNAUTHENTICATED without a known token.
  absl::StatusOr<Principal> Caller(const Request& req) const;
  // The caller, and study `name` if the caller may read it.
  absl::StatusOr<Admitted> Admit(const Request& req, const std::string& name);
  // For a write: the caller and study `name` once the request passed
  // write_guard.h's checks (403, 401, 415), the study exists and the caller
  // may read it (the service call checks write access under the study's
  // lock), with the request's JSON body, whose keys must be among `known`.
  struct AdmittedWrite {
    Principal caller;
    v1::Study study;
    nlohmann::json body;
  };
  // A failed admission: the HTTP status to answer with and why.
  struct Refusal {
    int http_status;
    absl::Status status;
  };
  std::variant<AdmittedWrite, Refusal> AdmitWrite(
      const Request& req, const std::string& name,
      const std::vector<std::string>& known);
  // Every study `caller` may read, page by page.
  absl::StatusOr<v1::ListStudiesResponse> VisibleStudies(
      const Principal& caller);
  // The routes (routes.cc), in the order of the table above.
  void ServerInfo(const Request& req, Response& res);
  void ListStudies(const Request& req, Response& res);
  void GetStudy(const Request& req, Response& res);
  void ListTrials(const Request& req, Response& res);
  void TrialsCsv(const Request& req, Response& res);
  void GetTrial(const Request& req, Response& res);
  void TrialLog(const Request& req, Response& res);
  void Best(const Request& req, Response& res);
  void Importance(const Request& req, Response& res);
  void Changes(const Request& req, Response& res);
  void Events(const Request& req, Response& res);
  void StopTrial(const Request& req, Response& res);
  void SetStudyState(const Request& req, Response& res);
  void SetMaxTrials(const Request& req, Response& res);
  void MetricsText(const Request& req, Response& res);
  void Page(const Request& req, Response& res);
  void AssetFile(const Request& req, Response& res);

  StudyService* service_ = nullptr;
  Authorizer authorizer_;
  Metrics* metrics_ = nullptr;
  HttpServerOptions options_;
  WritePolicy write_policy_;
  // options_.log_root with symlinks resolved; empty: no log serving.
  std::string log_root_;
  // Each registered path pattern and whether it is a POST route, so that
  // the other method gets 405 instead of 404.
  std::vector<std::pair<std::regex, bool>> routes_;
  std::unique_ptr<httplib::Server> http_;
  // Accepts and hands connections to http_; declared after it, so that it
  // ends (and its workers with it) first.
  std::unique_ptr<ConnectionGate> gate_;
  std::atomic<bool> stopping_{false};
  // Event streams being served, by owner and in all.
  std::unique_ptr<StreamLimits> streams_;
  std::string address_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_HTTP_HTTP_SERVER_H_
