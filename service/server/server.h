// Server: a running hypertuned — the SQLite store, the study service, the
// gRPC server listening on one address, optionally behind bearer-token auth
// (auth.h) and TLS, and optionally the HTTP read API and dashboard
// (http/http_server.h) on another, behind the same tokens. RPC counts and
// latencies go to a Metrics registry that /metrics shows. Used by the
// hypertuned program and by tests that need a real server in-process.
//
// Thread-safe: Shutdown may be called from any thread, once.
#ifndef HYPERTUNE_SERVICE_SERVER_SERVER_H_
#define HYPERTUNE_SERVICE_SERVER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/limits.h"
#include "service/grpc/grpc_service.h"
#include "service/http/http_server.h"
#include "service/optuna/optuna_grpc_service.h"
#include "service/rpc/study_service.h"
#include "service/server/leadership.h"
#include "service/server/lease_sweeper.h"
#include "service/server/metrics.h"
#include "storage/study_store.h"

namespace hypertune::service {

struct ServerOptions {
  // The SQLite file (created if absent), or a PostgreSQL URL: then several
  // servers may share the database, one leading (leadership.h).
  std::string db_path;
  // HOST:PORT; port 0 picks a free one (see Server::address).
  std::string listen = "127.0.0.1:50051";
  // HOST:PORT that clients should dial to reach this server, which a
  // standby names when it sends them to the leader. Empty (default): the
  // listen address, with this machine's host name for a wildcard host.
  std::string advertise_address;
  // synchronous=FULL instead of NORMAL (NORMAL already survives kill -9).
  bool durable_full = false;
  ServiceOptions service;
  // How often run-out leases are expired.
  absl::Duration lease_sweep_interval = absl::Milliseconds(250);
  // How long an ImportStudy stream may pause between messages.
  absl::Duration import_idle_timeout = absl::Seconds(kImportIdleSeconds);
  // Lines `TOKEN OWNER` (auth.h); every call then needs `authorization:
  // Bearer TOKEN`. Empty (default): no auth, studies have no owner.
  std::string auth_token_file;
  // PEM files of the server's certificate (chain) and private key: TLS.
  // Both or neither; neither (default) serves plaintext.
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM file of the CAs whose client certificates are accepted: mutual TLS,
  // clients without such a certificate are refused. Requires the two above.
  std::string tls_client_ca_file;
  // HOST:PORT of the HTTP read API, /metrics and the dashboard (port 0
  // picks one, see Server::http_address). Empty (default): off. With TLS
  // on gRPC it serves HTTPS with the same certificate, key and client CA,
  // unless http_plaintext.
  std::string http_listen;
  // Plain HTTP even though gRPC runs TLS: the same tokens then cross the
  // network in the clear. Default false.
  bool http_plaintext = false;
  // Event streams the HTTP server holds open, in all and per owner
  // (HttpServerOptions).
  int http_max_streams = 256;
  int http_max_streams_per_owner = 16;
  // Slow-client limits of the HTTP server (HttpServerOptions): connections
  // per client address, and the total header and body deadlines.
  int http_max_connections_per_address = 64;
  int http_header_timeout_ms = 10'000;
  int http_body_timeout_ms = 10'000;
  // Serve the HTTP API's writes without auth (HttpServerOptions::
  // allow_writes; http_listen must be a loopback address). Default false.
  bool http_allow_writes = false;
  // The folder whose trial logs the HTTP API serves (log_tail.h); empty
  // (default): none.
  std::string log_root;
};

class Server {
 public:
  // Opens the database and starts serving. Errors: the database cannot be
  // opened (its message says why), a token, certificate or key file cannot be
  // read or is malformed (its message names the file, never a token), TLS
  // options that do not go together (INVALID_ARGUMENT), or the address
  // cannot be bound (UNAVAILABLE).
  static absl::StatusOr<std::unique_ptr<Server>> Start(ServerOptions options);

  ~Server();

  // The address actually bound, HOST:PORT.
  const std::string& address() const { return address_; }
  // The HTTP address actually bound, HOST:PORT; empty when HTTP is off.
  const std::string& http_address() const { return http_address_; }
  // What /metrics reports; lives as long as the server.
  Metrics* metrics() const { return metrics_.get(); }

  // Stops accepting calls, lets calls in flight finish (up to a few seconds)
  // and returns.
  void Shutdown();

  // Blocks until Shutdown has finished.
  void Wait();

  // Whether this server serves its database now (always, but for a
  // PostgreSQL standby: leadership.h).
  bool leading() const;
  // Why the server stopped on its own: it lost its database's lead (it then
  // shut itself down); OK otherwise.
  absl::Status lost_lead() const;

 private:
  Server() = default;

  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<storage::StudyStore> store_;
  std::unique_ptr<StudyService> service_;
  std::unique_ptr<GrpcService> grpc_service_;
  // Optuna's storage protocol, on the same port (optuna_grpc_service.h).
  std::unique_ptr<OptunaGrpcService> optuna_service_;
  // Set when the lead is won (Leadership's thread), reset in Wait after the
  // leadership has stopped.
  std::unique_ptr<LeaseSweeper> sweeper_;
  std::unique_ptr<Leadership> leadership_;
  mutable absl::Mutex lost_mu_;
  absl::Status lost_lead_ ABSL_GUARDED_BY(lost_mu_);
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::string address_;
  std::string http_address_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_SERVER_SERVER_H_
