#include "service/http/http_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "httplib.h"
#include "service/http/connection_gate.h"
#include "service/http/connection_pool.h"
#include "service/http/log_tail.h"
#include "service/http/replies.h"

namespace hypertune::service {
namespace {

using Clock = std::chrono::steady_clock;

// The listening socket of an httplib server, which the library keeps to
// itself (a protected member, reached through a member pointer).
struct ListenSocket : httplib::Server {
  static std::atomic<socket_t>& Of(httplib::Server& server) {
    return server.*(&ListenSocket::svr_sock_);
  }
};

// httplib's entry point for one accepted connection (keep-alive loop, TLS
// handshake for an SSLServer: it is virtual) is private; the gate accepts
// instead of httplib's own loop, so it calls it through a member pointer
// named in an explicit instantiation, where access is not checked
// ([temp.spec.general]/6).
using ProcessAndCloseFn = bool (httplib::Server::*)(socket_t);
ProcessAndCloseFn ProcessAndCloseSocket();
template <ProcessAndCloseFn kFn>
struct ExposeProcessAndClose {
  friend ProcessAndCloseFn ProcessAndCloseSocket() { return kFn; }
};
template struct ExposeProcessAndClose<
    &httplib::Server::process_and_close_socket>;

// Whether the request carries a body that httplib will read.
bool HasBody(const httplib::Request& req) {
  if (req.has_header("Transfer-Encoding")) return true;
  return req.has_header("Content-Length") &&
         req.get_header_value("Content-Length") != "0";
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    StudyService* service, Authorizer authorizer,
    Metrics* metrics, HttpServerOptions options) {
  const size_t colon = options.listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(options.listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "http: address must be HOST:PORT, got \"", options.listen, "\""));
  }
  std::string host = options.listen.substr(0, colon);
  // "[::1]" in an address is "::1" to bind.
  std::string bind_host = host;
  if (bind_host.size() >= 2 && bind_host.front() == '[' &&
      bind_host.back() == ']') {
    bind_host = bind_host.substr(1, bind_host.size() - 2);
  }

  if (options.allow_writes && !IsLoopbackHost(host)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "http: --http-allow-writes serves writes without auth, so only on a "
        "loopback address (127.0.0.1, [::1], localhost), not on \"",
        options.listen, "\"; with --auth-token-file writes need no flag"));
  }
  std::string log_root;
  if (!options.log_root.empty()) {
    absl::StatusOr<std::string> resolved = ResolveLogRoot(options.log_root);
    if (!resolved.ok()) return resolved.status();
    log_root = *std::move(resolved);
  }

  std::unique_ptr<HttpServer> server(new HttpServer());
  server->service_ = service;
  server->authorizer_ = std::move(authorizer);
  server->metrics_ = metrics;
  server->options_ = std::move(options);
  server->streams_ = std::make_unique<StreamLimits>(
      server->options_.max_streams, server->options_.max_streams_per_owner,
      "event streams");
  server->log_root_ = std::move(log_root);
  const HttpServerOptions& o = server->options_;
  server->write_policy_.auth = server->authorizer_.enabled();
  server->write_policy_.allow_without_auth = o.allow_writes;
  server->write_policy_.https = !o.tls_cert_file.empty();
  if (o.tls_cert_file.empty()) {
    if (!o.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "http: client certificates need TLS (a certificate and key)");
    }
    server->http_ = std::make_unique<httplib::Server>();
  } else {
    auto https = std::make_unique<httplib::SSLServer>(
        o.tls_cert_file.c_str(), o.tls_key_file.c_str(),
        o.tls_client_ca_file.empty() ? nullptr : o.tls_client_ca_file.c_str());
    if (!https->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "http: TLS certificate \"", o.tls_cert_file, "\" or key \"",
          o.tls_key_file, "\" was refused"));
    }
    server->http_ = std::move(https);
  }
  for (const auto& [field, value] :
       {std::pair<const char*, int>{"max_connections_per_address",
                                    o.max_connections_per_address},
        {"header_timeout_ms", o.header_timeout_ms},
        {"body_timeout_ms", o.body_timeout_ms}}) {
    if (value < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "http: ", field, " must be at least 1, got ", value));
    }
  }
  // httplib sets SO_REUSEPORT, which lets a second server bind this port
  // and take half its connections; SO_REUSEADDR alone only reuses a port
  // left in TIME_WAIT.
  server->http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // A kept-alive connection silent for idle_timeout_s is closed; the gate
  // bounds each request's total time.
  const int idle = std::max(1, o.idle_timeout_s);
  server->http_->set_keep_alive_timeout(idle);
  server->http_->set_read_timeout(idle, 0);
  server->http_->set_write_timeout(30, 0);
  server->http_->set_payload_max_length(64 << 10);
  server->Route();

  int bound = port == 0
                  ? server->http_->bind_to_any_port(bind_host)
                  : (server->http_->bind_to_port(bind_host, port) ? port : -1);
  if (bound <= 0) {
    return absl::UnavailableError(
        absl::StrCat("http: cannot bind ", server->options_.listen,
                     " (is another hypertuned or another program serving "
                     "that port?)"));
  }
  // httplib listens with a backlog of 5: a burst of connections would be
  // refused while the acceptor is busy.
  const int listen_fd = ListenSocket::Of(*server->http_).load();
  if (::listen(listen_fd, SOMAXCONN) != 0) {
    return absl::UnavailableError(
        absl::StrCat("http: cannot listen on ", server->options_.listen));
  }
  server->address_ = absl::StrCat(host, ":", bound);

  ConnectionGateOptions gate;
  gate.max_per_address = o.max_connections_per_address;
  gate.header_timeout = absl::Milliseconds(o.header_timeout_ms);
  gate.body_timeout = absl::Milliseconds(o.body_timeout_ms);
  const int max_connections = std::max(2, o.max_connections);
  gate.max_untrusted = max_connections / 2;
  // TLS bytes cannot be peeked at for the end of the headers.
  gate.wait_for_headers = o.tls_cert_file.empty();
  httplib::Server* http = server->http_.get();
  const timeval read_timeout{idle, 0};
  const timeval write_timeout{30, 0};
  absl::StatusOr<std::unique_ptr<ConnectionGate>> started =
      ConnectionGate::Start(
          listen_fd, gate,
          std::make_unique<ConnectionPool>(max_connections, absl::Seconds(30)),
          [http, read_timeout, write_timeout](int fd) {
            // As httplib's own accept loop sets them. TCP_NODELAY: answers
            // on a kept-alive connection go out at once, not after Nagle's
            // delay (~40 ms a request).
            ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &read_timeout,
                         sizeof(read_timeout));
            ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &write_timeout,
                         sizeof(write_timeout));
            int yes = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
            (http->*ProcessAndCloseSocket())(fd);
          });
  if (!started.ok()) return started.status();
  server->gate_ = *std::move(started);
  return server;
}

HttpServer::~HttpServer() { Shutdown(); }

void HttpServer::Shutdown() {
  stopping_.store(true);
  if (gate_ == nullptr) return;
  gate_->Stop();
  // httplib's keep-alive loops and streamed answers end once its listening
  // socket is gone.
  if (const int listen_fd = ListenSocket::Of(*http_).exchange(INVALID_SOCKET);
      listen_fd != INVALID_SOCKET) {
    ::close(listen_fd);
  }
  gate_->Drain();
}

void HttpServer::Route() {
  // Answers from the API are not compressed: on the loopback and LAN links
  // dashboards use, compressing a megabyte page costs more than sending it
  // (brotli, which browsers ask for first, takes seconds per megabyte at the
  // library's setting). The page's own files may still be.
  http_->set_pre_routing_handler([this](const Request& req, Response& res) {
    // The request is ours to edit: httplib hands handlers a const view
    // of its own mutable object.
    auto& headers = const_cast<Request&>(req).headers;
    const bool gzip =
        absl::StrContains(req.get_header_value("Accept-Encoding"), "gzip");
    headers.erase("Accept-Encoding");
    if (gzip && (req.path == "/" || absl::StartsWith(req.path, "/assets/"))) {
      headers.emplace("Accept-Encoding", "gzip");
    }
    // Its headers are in (connection_gate.h): only a caller with a valid
    // token (anyone with auth off) is trusted with more time.
    const bool trusted = Authenticated(req);
    ConnectionGate::HeadersIn(trusted, HasBody(req));
    if (!trusted && !ConnectionGate::TakeUntrustedSlot()) {
      ReplyError(res,
                 absl::UnavailableError(absl::StrCat(
                     "http: ", std::max(2, options_.max_connections) / 2,
                     " requests without a valid token are being served, the "
                     "most this server serves at once; try again later")),
                 503);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // A connection the gate closes after this answer says so.
  http_->set_post_routing_handler([](const Request&, Response& res) {
    if (ConnectionGate::ClosesAfterAnswer()) {
      res.headers.erase("Keep-Alive");
      res.set_header("Connection", "close");
    }
  });
  // Called once the answer is written.
  http_->set_logger(
      [](const Request&, const Response&) { ConnectionGate::Answered(); });

  Get("/api/server", "/api/server", &HttpServer::ServerInfo);
  Get("/api/studies", "/api/studies", &HttpServer::ListStudies);
  Get(R"(/api/studies/([^/]+))", "/api/studies/{name}", &HttpServer::GetStudy);
  Get(R"(/api/studies/([^/]+)/trials)", "/api/studies/{name}/trials",
      &HttpServer::ListTrials);
  Get(R"(/api/studies/([^/]+)/trials\.csv)", "/api/studies/{name}/trials.csv",
      &HttpServer::TrialsCsv);
  Get(R"(/api/studies/([^/]+)/trials/([^/]+))",
      "/api/studies/{name}/trials/{id}", &HttpServer::GetTrial);
  Get(R"(/api/studies/([^/]+)/trials/([^/]+)/log)",
      "/api/studies/{name}/trials/{id}/log", &HttpServer::TrialLog);
  Get(R"(/api/studies/([^/]+)/best)", "/api/studies/{name}/best",
      &HttpServer::Best);
  Get(R"(/api/studies/([^/]+)/importance)", "/api/studies/{name}/importance",
      &HttpServer::Importance);
  Get(R"(/api/studies/([^/]+)/changes)", "/api/studies/{name}/changes",
      &HttpServer::Changes);
  Get(R"(/api/studies/([^/]+)/events)", "/api/studies/{name}/events",
      &HttpServer::Events);
  Post(R"(/api/studies/([^/]+)/trials/([^/]+)/stop)",
       "/api/studies/{name}/trials/{id}/stop", &HttpServer::StopTrial);
  Post(R"(/api/studies/([^/]+)/state)", "/api/studies/{name}/state",
       &HttpServer::SetStudyState);
  Post(R"(/api/studies/([^/]+)/max_trials)", "/api/studies/{name}/max_trials",
       &HttpServer::SetMaxTrials);
  Get("/metrics", "/metrics", &HttpServer::MetricsText);
  Get("/", "/", &HttpServer::Page);
  // A file of the page, or of one of its folders (/assets/charts/NAME.js).
  Get(R"(/assets/(?:[A-Za-z0-9_-]+/)?[A-Za-z0-9._-]+)", "/assets",
      &HttpServer::AssetFile);

  // Anything else: a JSON 405 for a known path asked with another method,
  // a 404 naming the path otherwise.
  http_->set_error_handler([this](const Request& req, Response& res) {
    if (res.status != 404 || !res.body.empty()) return;
    for (const auto& [pattern, post] : routes_) {
      if (std::regex_match(req.path, pattern)) {
        res.set_header("Allow", post ? "POST" : "GET, HEAD");
        ReplyError(res,
                   absl::InvalidArgumentError(absl::StrCat(
                       req.method, " ", req.path, ": this endpoint takes ",
                       post ? "POST with a JSON body" : "GET")),
                   405);
        return;
      }
    }
    ReplyError(res, absl::NotFoundError(absl::StrCat(
                        "no such endpoint: ", req.method, " ", req.path)));
  });
}

void HttpServer::Get(const std::string& pattern, std::string name,
                     Handler handler) {
  Handle(false, pattern, std::move(name), handler);
}

void HttpServer::Post(const std::string& pattern, std::string name,
                      Handler handler) {
  Handle(true, pattern, std::move(name), handler);
}

void HttpServer::Handle(bool post, const std::string& pattern,
                        std::string name, Handler handler) {
  routes_.emplace_back(std::regex(pattern), post);
  auto serve = [this, name = std::move(name), handler](const Request& req,
                                                       Response& res) {
    ConnectionGate::BodyIn();
    const Clock::time_point start = Clock::now();
    (this->*handler)(req, res);
    if (metrics_ != nullptr) {
      metrics_->ObserveHttp(
          name, res.status,
          std::chrono::duration<double>(Clock::now() - start).count());
    }
  };
  if (post) {
    http_->Post(pattern, std::move(serve));
  } else {
    http_->Get(pattern, std::move(serve));
  }
}

bool HttpServer::Authenticated(const Request& req) const {
  if (!req.has_header("Authorization")) {
    return authorizer_.Authenticate(std::nullopt).ok();
  }
  return authorizer_.Authenticate(req.get_header_value("Authorization")).ok();
}

absl::StatusOr<Principal> HttpServer::Caller(const Request& req) const {
  if (options_.serving) {
    if (absl::Status serving = options_.serving(); !serving.ok()) {
      return serving;
    }
  }
  if (!req.has_header("Authorization")) {
    return authorizer_.Authenticate(std::nullopt);
  }
  const std::string value = req.get_header_value("Authorization");
  return authorizer_.Authenticate(value);
}

absl::StatusOr<HttpServer::Admitted> HttpServer::Admit(
    const Request& req, const std::string& name) {
  absl::StatusOr<Principal> who = Caller(req);
  if (!who.ok()) return who.status();
  v1::GetStudyRequest request;
  request.set_name(name);
  absl::StatusOr<v1::Study> study = service_->GetStudy(request, *who);
  if (!study.ok()) return study.status();
  return Admitted{*std::move(who), *std::move(study)};
}

std::variant<HttpServer::AdmittedWrite, HttpServer::Refusal>
HttpServer::AdmitWrite(const Request& req, const std::string& name,
                       const std::vector<std::string>& known) {
  auto refuse = [](const absl::Status& status) {
    return Refusal{HttpStatusOf(status.code()), status};
  };
  if (absl::Status origin = CheckWriteOrigin(req, write_policy_);
      !origin.ok()) {
    return refuse(origin);
  }
  absl::StatusOr<Principal> who = Caller(req);
  if (!who.ok()) return refuse(who.status());
  if (!HasJsonContentType(req)) {
    return Refusal{415,
                   absl::InvalidArgumentError(absl::StrCat(
                       "Content-Type: writes take application/json, got \"",
                       req.get_header_value("Content-Type"), "\""))};
  }
  absl::StatusOr<nlohmann::json> body = JsonObjectBody(req, known);
  if (!body.ok()) return refuse(body.status());
  v1::GetStudyRequest request;
  request.set_name(name);
  absl::StatusOr<v1::Study> study = service_->GetStudy(request, *who);
  if (!study.ok()) return refuse(study.status());
  return AdmittedWrite{*std::move(who), *std::move(study), *std::move(body)};
}

absl::StatusOr<v1::ListStudiesResponse> HttpServer::VisibleStudies(
    const Principal& caller) {
  v1::ListStudiesResponse all;
  v1::ListStudiesRequest request;
  do {
    absl::StatusOr<v1::ListStudiesResponse> page =
        service_->ListStudies(request, caller);
    if (!page.ok()) return page.status();
    for (v1::Study& study : *page->mutable_studies()) {
      *all.add_studies() = std::move(study);
    }
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  return all;
}

}  // namespace hypertune::service
