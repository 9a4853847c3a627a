#include "service/server/server.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "service/grpc/parse_error_interceptor.h"
#include "service/grpc/rpc_metrics_interceptor.h"
#include "storage/leader_election.h"
#include "storage/open_store.h"

namespace hypertune::service {
namespace {

// Idle gRPC worker threads kept waiting for calls (see Start).
constexpr int kMaxIdlePollers = 64;

// The text of PEM file `path`; `what` names it in errors.
absl::StatusOr<std::string> ReadPem(const char* what, const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(
        absl::StrCat(what, " \"", path, "\": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << file.rdbuf();
  if (!absl::StrContains(text.str(), "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", path, "\": not a PEM file"));
  }
  return text.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(
    const ServerOptions& options) {
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS: the certificate and its private key go together (--tls-cert "
        "and --tls-key)");
  }
  if (options.tls_cert_file.empty()) {
    if (!options.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "TLS: verifying client certificates (--tls-client-ca) needs the "
          "server's own certificate and key (--tls-cert, --tls-key)");
    }
    return grpc::InsecureServerCredentials();
  }
  absl::StatusOr<std::string> cert =
      ReadPem("TLS certificate", options.tls_cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem("TLS key", options.tls_key_file);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*std::move(key), *std::move(cert)});
  if (!options.tls_client_ca_file.empty()) {
    absl::StatusOr<std::string> ca =
        ReadPem("TLS client CA", options.tls_client_ca_file);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
    ssl.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

// What clients dial to reach this server: `advertised` if given, else the
// listen address, with this machine's name for a wildcard host.
std::string AdvertisedAddress(const std::string& advertised,
                              const std::string& host, int port) {
  if (!advertised.empty()) return advertised;
  if (host == "0.0.0.0" || host == "[::]" || host == "::" || host.empty()) {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0') {
      return absl::StrCat(name, ":", port);
    }
  }
  return absl::StrCat(host, ":", port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  // Configuration errors first: nothing is opened for a typo.
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      Credentials(options);
  if (!credentials.ok()) return credentials.status();
  Authorizer authorizer;
  if (!options.auth_token_file.empty()) {
    absl::StatusOr<TokenTable> tokens =
        TokenTable::Load(options.auth_token_file);
    if (!tokens.ok()) return tokens.status();
    authorizer = Authorizer(*std::move(tokens));
  }

  std::unique_ptr<Server> server(new Server());
  server->metrics_ = std::make_unique<Metrics>();
  options.service.metrics = server->metrics_.get();

  storage::StoreOptions db_options;
  db_options.path = options.db_path;
  db_options.sqlite.durable_full = options.durable_full;
  auto store = storage::OpenStore(db_options);
  if (!store.ok()) return store.status();

  server->store_ = *std::move(store);
  if (options.service.backup_dir.empty() &&
      !storage::IsServerLocation(options.db_path) &&
      options.db_path != ":memory:") {
    // The operator's own folder, never wherever a caller points.
    options.service.backup_dir =
        std::filesystem::absolute(options.db_path).parent_path().string();
  }
  server->service_ =
      std::make_unique<StudyService>(server->store_.get(), options.service);
  absl::StatusOr<std::unique_ptr<storage::LeaderElection>> election =
      storage::LeaderElection::ForLocation(options.db_path);
  if (!election.ok()) return election.status();
  Server* raw = server.get();
  Leadership::Hooks hooks;
  // Taking over: imports cut short are removed, the leases of trials in
  // flight are extended as after a restart (their workers reconnect), then
  // expired ones are swept.
  hooks.on_lead = [raw, sweep = options.lease_sweep_interval]() {
    if (absl::Status s = raw->service_->RecoverOnStart(); !s.ok()) {
      return s;
    }
    raw->sweeper_ = std::make_unique<LeaseSweeper>(raw->service_.get(), sweep);
    return absl::OkStatus();
  };
  hooks.on_change = [raw](bool leading) {
    if (raw->server_ == nullptr) return;
    if (grpc::HealthCheckServiceInterface* health =
            raw->server_->GetHealthCheckService()) {
      health->SetServingStatus(leading);
    }
  };
  hooks.on_lost = [raw](const absl::Status& why) {
    std::cerr << "hypertuned: stopping: " << why.message() << std::endl;
    {
      absl::MutexLock lock(&raw->lost_mu_);
      raw->lost_lead_ = why;
    }
    raw->Shutdown();
  };
  server->leadership_ =
      std::make_unique<Leadership>(*std::move(election), std::move(hooks));
  auto serving = [raw] { return raw->leadership_->Check(); };
  // The HTTP side and Optuna's storage protocol check the same tokens.
  Authorizer http_authorizer = authorizer;
  server->optuna_service_ = std::make_unique<OptunaGrpcService>(
      server->store_.get(), authorizer, serving);
  server->grpc_service_ = std::make_unique<GrpcService>(
      server->service_.get(), std::move(authorizer), serving,
      options.import_idle_timeout);

  // The standard health service (grpc.health.v1: SERVING while it serves,
  // NOT_SERVING once shutting down; for Kubernetes probes and load
  // balancers) and server reflection (grpcurl and other generic clients).
  // Neither needs a token; reflection shows only the public API.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *credentials, &port);
  // gRPC allows SO_REUSEPORT by default: a second hypertuned on this port
  // would start, and the kernel would spread connections over both.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(server->grpc_service_.get());
  builder.RegisterService(server->optuna_service_.get());
  // limits.h: requests up to 4 MiB; answers are built to fit 4 MiB, gRPC's
  // default receive limit, so that no client misses the answer to a write
  // that committed.
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  // Optuna's protocol has no pages: its answers may be larger
  // (kOptunaMaxReplyBytes; its client receives any size).
  builder.SetMaxSendMessageSize(
      static_cast<int>(std::max(kMaxResponseBytes, kOptunaMaxReplyBytes)));
  // gRPC's default keeps at most 2 idle polling threads, so under load a
  // thread is created for nearly every call and exits after it; keep the
  // pool instead (threads grow to the number of calls in flight).
  builder.SetSyncServerOption(
      grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 2);
  builder.SetSyncServerOption(
      grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, kMaxIdlePollers);
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors = ParseErrorInterceptors();
  interceptors.push_back(RpcMetricsInterceptorFactory(server->metrics_.get()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("listen: cannot bind ", options.listen,
                     " (is another hypertuned or another program serving "
                     "that port?",
                     options.tls_cert_file.empty()
                         ? ")"
                         : " or were the TLS certificate and key refused?)"));
  }
  std::string host = options.listen.substr(0, options.listen.rfind(':'));
  server->address_ = absl::StrCat(host, ":", port);
  if (absl::Status s = server->leadership_->Start(
          AdvertisedAddress(options.advertise_address, host, port));
      !s.ok()) {
    return s;
  }

  if (!options.http_listen.empty()) {
    HttpServerOptions http_options;
    http_options.listen = options.http_listen;
    http_options.max_streams = options.http_max_streams;
    http_options.max_streams_per_owner = options.http_max_streams_per_owner;
    http_options.max_connections_per_address =
        options.http_max_connections_per_address;
    http_options.header_timeout_ms = options.http_header_timeout_ms;
    http_options.body_timeout_ms = options.http_body_timeout_ms;
    http_options.db_path = options.db_path;
    http_options.allow_writes = options.http_allow_writes;
    http_options.log_root = options.log_root;
    http_options.serving = serving;
    if (!options.http_plaintext) {
      http_options.tls_cert_file = options.tls_cert_file;
      http_options.tls_key_file = options.tls_key_file;
      http_options.tls_client_ca_file = options.tls_client_ca_file;
    }
    absl::StatusOr<std::unique_ptr<HttpServer>> http =
        HttpServer::Start(server->service_.get(), std::move(http_authorizer),
                          server->metrics_.get(), std::move(http_options));
    if (!http.ok()) return http.status();
    server->http_ = *std::move(http);
    server->http_address_ = server->http_->address();
  }
  return server;
}

Server::~Server() {
  Shutdown();
  Wait();
}

void Server::Shutdown() {
  // Event streams end first: they would hold the service past the gRPC
  // server's deadline otherwise.
  if (http_ != nullptr) http_->Shutdown();
  if (server_ != nullptr) {
    if (grpc::HealthCheckServiceInterface* health =
            server_->GetHealthCheckService()) {
      health->SetServingStatus(false);
    }
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(5));
  }
}

void Server::Wait() {
  if (server_ != nullptr) server_->Wait();
  if (http_ != nullptr) http_->Shutdown();
  http_.reset();
  // The leadership's thread may be the one that created the sweeper.
  leadership_.reset();
  sweeper_.reset();
}

bool Server::leading() const {
  return leadership_ != nullptr && leadership_->leading();
}

absl::Status Server::lost_lead() const {
  absl::MutexLock lock(&lost_mu_);
  return lost_lead_;
}

}  // namespace hypertune::service
