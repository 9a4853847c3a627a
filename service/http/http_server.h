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
//   GET /api/studies/{name}/trials.csv        every trial, streamed
//   (trial_csv.h) GET /api/studies/{name}/trials/{id}       GetTrial GET
//   /api/studies/{name}/trials/{id}/log   the end of the trial's log
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
// (a route asked with the wrong method), 413 (a body over 64 KiB), 415 (a
// write without a JSON body), 503 (too many event streams, or too many
// requests without a valid token). Access follows the gRPC rule
// (access.h): every call goes through StudyService with the caller's
// principal. Reads never wait for writers.
//
// Writes (POST) are served only with auth or with `allow_writes` on a
// loopback address, and only to same-origin requests with a JSON body
// (write_guard.h).
//
// Connections are served by libmicrohttpd on a few event-loop threads
// (epoll): an open connection costs a descriptor and a little memory, never
// a thread. At most `max_connections` are open (by default a share of the
// process's file limit, leaving the rest to the database, backups and gRPC)
// and at most `max_connections_per_address` from one address; past the
// total, the oldest connection still owing its request's headers is closed
// to make room, so that idle sockets cannot lock out callers who send a
// request. A request's headers must be in within `header_timeout_ms` of the
// connection's accept (or of the previous answer) and its body within
// `body_timeout_ms` of its headers, in total, however slowly the bytes
// trickle. Requests without a valid token (with auth on) get no keep-alive,
// must be answered within header_timeout_ms of their start, and at most half
// of max_connections are served at once. A kept-alive connection that sends
// nothing for `idle_timeout_s` is closed. Event streams (event_streams.h)
// are limited per owner and in all, wait for changes without a thread, and
// hold a bounded number of unsent bytes each and in all: a reader that falls
// behind is told where to resume and closed. With `tls_cert_file` the server
// speaks HTTPS only. TCP_NODELAY: keep-alive answers go out at once.
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
#include "service/http/http_message.h"
#include "service/http/write_guard.h"
#include "service/rpc/study_service.h"
#include "service/server/auth.h"
#include "service/server/metrics.h"
#include "service/server/stream_limits.h"

struct MHD_Connection;
struct MHD_Daemon;

namespace hypertune::service {

class ConnectionTable;
class EventStreams;

struct HttpServerOptions {
  // HOST:PORT; port 0 picks a free one (see HttpServer::address).
  std::string listen = "127.0.0.1:8080";
  // Connections open at once; past it the oldest connection still owing
  // its headers is closed. 0 (default): the file limit
  // (RLIMIT_NOFILE) less a reserve for the database, backups and gRPC
  // (HttpConnectionCap); a larger value is lowered to that.
  int max_connections = 0;
  // Event streams open at once: in all (default 256) and per owner
  // (default 16), so that one owner's dashboards cannot crowd out others.
  int max_streams = 256;
  int max_streams_per_owner = 16;
  // Seconds a connection may stay silent (sending and taking no bytes)
  // between requests or while its answer is sent. Default 5.
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
  // Unsent bytes an event stream may hold (default 1 MiB; one event is
  // always let through whole), and all of them together (default 32 MiB).
  size_t stream_buffer_bytes = 1 << 20;
  size_t streams_buffer_bytes = 32 << 20;
  // An event stream that has not taken what it holds within this long has
  // fallen behind: it is told where to resume and closed. Default 10 s.
  int stream_behind_ms = 10'000;
  // Event-loop threads; 0 (default): twice the cores, 4 to 16.
  int threads = 0;
};

// The connections an HTTP server may hold under a file limit of
// `file_limit` descriptors: what is left after a reserve of a quarter of
// them (at least 64) for the database, its backups, gRPC and logs.
int HttpConnectionCap(int64_t file_limit);

class HttpServer {
 public:
  // Binds and starts serving on a thread of its own. UNAVAILABLE if the
  // address cannot be bound, INVALID_ARGUMENT if it is not HOST:PORT.
  // REQUIRES: `service` and `metrics` outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      StudyService* service, Authorizer authorizer, Metrics* metrics,
      HttpServerOptions options);

  // Shutdown().
  ~HttpServer();

  // The address actually bound, HOST:PORT.
  const std::string& address() const { return address_; }

  // Stops accepting connections, ends event streams and returns once every
  // handler has returned. Idempotent.
  void Shutdown();

  // Whether Shutdown has begun; event streams poll it.
  bool stopping() const { return stopping_.load(); }

  // The most connections this server holds open (max_connections, lowered
  // to the file limit's share).
  int connection_cap() const { return connection_cap_; }

  // Bytes the event streams hold unsent now (event_streams.h).
  size_t event_stream_bytes() const;

 private:
  using Request = HttpRequest;
  using Response = HttpResponse;
  struct Exchange;
  // A route's handler: one member function per endpoint (routes.cc).
  using Handler = void (HttpServer::*)(const Request&, Response&);
  // Who calls, and the study a route names, if they may read it.
  struct Admitted {
    Principal caller;
    v1::Study study;
  };

  HttpServer();
  // Registers every route.
  void Route();
  // Registers `handler` for GET (or POST) `pattern`, counted in /metrics
  // as `name`. A path registered for one method answers the other 405.
  void Get(const std::string& pattern, std::string name, Handler handler);
  void Post(const std::string& pattern, std::string name, Handler handler);

  // libmicrohttpd's callbacks (http_server.cc).
  friend struct MhdCallbacks;
  // The request's headers are in: whether to refuse it at once.
  bool RefuseEarly(Exchange& exchange);
  // Routes a request whose body is in and fills its answer.
  void Dispatch(Exchange& exchange);
  // Whether client certificates are asked for and this one's was refused.
  bool ClientCertificateRefused(MHD_Connection* connection) const;

  // Whether the request carries a known bearer token (always, with auth
  // off): the callers trusted with more time and keep-alive.
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
  // The routes in order: pattern, POST or GET, /metrics name, handler.
  struct Route_ {
    std::regex pattern;
    bool post;
    std::string name;
    Handler handler;
  };
  std::vector<Route_> routes_;
  int connection_cap_ = 0;
  // Requests without a valid token being served now, and the most at once.
  std::atomic<int> untrusted_{0};
  int max_untrusted_ = 0;
  std::atomic<bool> stopping_{false};
  // Event streams being served, by owner and in all.
  std::unique_ptr<StreamLimits> streams_;
  // What they hold, and the thread that feeds them.
  std::unique_ptr<EventStreams> events_;
  // Open connections and their deadlines.
  std::unique_ptr<ConnectionTable> connections_;
  std::string tls_cert_, tls_key_, tls_trust_;
  int listen_fd_ = -1;
  MHD_Daemon* daemon_ = nullptr;
  absl::Mutex shutdown_mu_;
  std::string address_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_HTTP_HTTP_SERVER_H_
