#include "service/http/http_server.h"

#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service/http/event_streams.h"
#include "service/http/log_tail.h"
#include "service/http/replies.h"

namespace hypertune::service {

using Clock = std::chrono::steady_clock;

// Request bodies larger than this are refused (413): the writes take a
// field or two.
constexpr size_t kMaxBodyBytes = 64 << 10;

// One request and its answer, from its headers to its completion
// (libmicrohttpd's request context).
struct HttpServer::Exchange {
  HttpRequest req;
  HttpResponse res;
  bool trusted = false;
  bool holds_untrusted_slot = false;
  bool body_too_large = false;
  bool queued = false;
};

// The open connections and their deadlines: a request's headers within
// header_timeout of the accept (or of the previous answer), its body within
// body_timeout of its headers. A thread of its own shuts down the sockets
// whose deadline passed (libmicrohttpd then closes them). libmicrohttpd
// splits the connection cap among its event-loop threads; past a thread's
// soft cap, the connection of that thread that has waited longest for its
// headers makes room, so that silent sockets cannot fill the server.
class ConnectionTable {
 public:
  ConnectionTable(int soft_cap_per_thread, absl::Duration header_timeout,
                  absl::Duration body_timeout)
      : soft_cap_(soft_cap_per_thread),
        header_timeout_(header_timeout),
        body_timeout_(body_timeout),
        thread_([this] { Run(); }) {}

  ~ConnectionTable() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }

  // A connection was accepted (on the event-loop thread that serves it):
  // its headers are due.
  void Opened(MHD_Connection* connection, int fd) {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    const std::thread::id worker = std::this_thread::get_id();
    entries_[connection] = Entry{fd, worker, now + header_timeout_, now, true};
    if (++open_by_worker_[worker] <= soft_cap_) return;
    Entry* oldest = nullptr;
    for (auto& [other, entry] : entries_) {
      if (other == connection || entry.worker != worker ||
          !entry.awaiting_headers || entry.cut) {
        continue;
      }
      if (oldest == nullptr || entry.since < oldest->since) oldest = &entry;
    }
    if (oldest != nullptr) Cut(*oldest);
  }

  // The request's headers are in: its body is due within body_timeout
  // (`has_body`), or nothing more is (`deadline_lifted`), or the deadline
  // it has stands.
  void HeadersIn(MHD_Connection* connection, bool deadline_lifted,
                 bool has_body) {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(connection);
    if (it == entries_.end()) return;
    it->second.awaiting_headers = false;
    if (!deadline_lifted) return;
    it->second.deadline =
        has_body ? absl::Now() + body_timeout_ : absl::InfiniteFuture();
  }

  // The body is in: the answer takes what it takes.
  void BodyIn(MHD_Connection* connection) {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(connection);
    if (it != entries_.end()) it->second.deadline = absl::InfiniteFuture();
  }

  // Answered: the next request's headers are due.
  void Answered(MHD_Connection* connection) {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(connection);
    if (it == entries_.end()) return;
    const absl::Time now = absl::Now();
    it->second.awaiting_headers = true;
    it->second.since = now;
    it->second.deadline = now + header_timeout_;
  }

  // Called before libmicrohttpd closes the socket.
  void Closed(MHD_Connection* connection) {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(connection);
    if (it == entries_.end()) return;
    --open_by_worker_[it->second.worker];
    entries_.erase(it);
  }

 private:
  struct Entry {
    int fd;
    std::thread::id worker;
    absl::Time deadline;
    absl::Time since;  // accepted, or last answered
    bool awaiting_headers;
    bool cut = false;
  };

  void Cut(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // The socket stays open until libmicrohttpd closes it (after Closed,
    // under mu_), so the descriptor names this connection still.
    ::shutdown(entry.fd, SHUT_RDWR);
    entry.cut = true;
    entry.deadline = absl::InfiniteFuture();
  }

  void Run() {
    absl::MutexLock lock(&mu_);
    while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                                 absl::Milliseconds(50))) {
      const absl::Time now = absl::Now();
      for (auto& [connection, entry] : entries_) {
        if (!entry.cut && entry.deadline <= now) Cut(entry);
      }
    }
  }

  const int soft_cap_;
  const absl::Duration header_timeout_;
  const absl::Duration body_timeout_;
  absl::Mutex mu_;
  absl::flat_hash_map<MHD_Connection*, Entry> entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::thread::id, int> open_by_worker_
      ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

int HttpConnectionCap(int64_t file_limit) {
  const int64_t reserve = std::max<int64_t>(64, file_limit / 4);
  return static_cast<int>(
      std::clamp<int64_t>(file_limit - reserve, 1, 1'000'000));
}

struct MhdCallbacks {
  static MHD_Result Request(void* cls, MHD_Connection* connection,
                            const char* url, const char* method,
                            const char* /*version*/, const char* upload_data,
                            size_t* upload_data_size, void** context) {
    auto* server = static_cast<HttpServer*>(cls);
    auto* exchange = static_cast<HttpServer::Exchange*>(*context);
    if (exchange == nullptr) {
      exchange = new HttpServer::Exchange();
      *context = exchange;
      exchange->req.method = method;
      exchange->req.path = url;
      MHD_get_connection_values(connection, MHD_HEADER_KIND, &AddHeader,
                                &exchange->req.headers);
      MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &AddHeader,
                                &exchange->req.params);
      exchange->trusted = server->Authenticated(exchange->req);
      const bool has_body =
          exchange->req.has_header("Transfer-Encoding") ||
          (exchange->req.has_header("Content-Length") &&
           exchange->req.get_header_value("Content-Length") != "0");
      server->connections_->HeadersIn(connection, exchange->trusted, has_body);
      if (server->ClientCertificateRefused(connection)) {
        ReplyError(exchange->res,
                   absl::PermissionDeniedError(
                       "TLS: this server takes only client certificates "
                       "signed by its client CA"));
        return Queue(server, connection, *exchange);
      }
      if (server->RefuseEarly(*exchange)) {
        return Queue(server, connection, *exchange);
      }
      return MHD_YES;
    }
    if (exchange->queued) {
      *upload_data_size = 0;
      return MHD_YES;
    }
    if (*upload_data_size > 0) {
      if (exchange->req.body.size() + *upload_data_size > kMaxBodyBytes) {
        exchange->body_too_large = true;
      } else {
        exchange->req.body.append(upload_data, *upload_data_size);
      }
      *upload_data_size = 0;
      return MHD_YES;
    }
    server->connections_->BodyIn(connection);
    if (exchange->body_too_large) {
      ReplyError(exchange->res,
                 absl::InvalidArgumentError(
                     absl::StrCat("body: at most ", kMaxBodyBytes, " bytes")),
                 413);
    } else {
      server->Dispatch(*exchange);
      // The idle timeout counts from the last byte in or out: a handler
      // that took longer must not have its answer dropped unsent. Turning
      // the timeout off and on again restarts it.
      const unsigned int idle = static_cast<unsigned int>(
          std::max(1, server->options_.idle_timeout_s));
      MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
      MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT,
                                idle);
    }
    return Queue(server, connection, *exchange);
  }

  static MHD_Result AddHeader(void* cls, MHD_ValueKind, const char* key,
                              const char* value) {
    static_cast<std::vector<std::pair<std::string, std::string>>*>(cls)
        ->emplace_back(key, value == nullptr ? "" : value);
    return MHD_YES;
  }

  static MHD_Result Queue(HttpServer* server, MHD_Connection* connection,
                          HttpServer::Exchange& exchange) {
    exchange.queued = true;
    HttpResponse& res = exchange.res;
    MHD_Response* response = nullptr;
    if (res.events != nullptr) {
      EventStreams::Attach(*res.events, connection);
      response = MHD_create_response_from_callback(
          MHD_SIZE_UNKNOWN, 32 << 10, &ReadEvents,
          new std::shared_ptr<EventStream>(res.events), &FreeEvents);
    } else if (res.chunks) {
      response = MHD_create_response_from_callback(
          MHD_SIZE_UNKNOWN, 64 << 10, &ReadChunks,
          new ChunkState{std::move(res.chunks), {}, 0, false}, &FreeChunks);
    } else if (!res.static_body.empty()) {
      response = MHD_create_response_from_buffer(
          res.static_body.size(), const_cast<char*>(res.static_body.data()),
          MHD_RESPMEM_PERSISTENT);
    } else {
      response = MHD_create_response_from_buffer(
          res.body.size(), res.body.data(), MHD_RESPMEM_MUST_COPY);
    }
    if (response == nullptr) return MHD_NO;
    for (const auto& [name, value] : res.headers) {
      MHD_add_response_header(response, name.c_str(), value.c_str());
    }
    if (!res.content_type.empty()) {
      MHD_add_response_header(response, "Content-Type",
                              res.content_type.c_str());
    }
    // A caller without a valid token gets no keep-alive: it cannot hold a
    // connection open between requests.
    if (!exchange.trusted || server->stopping()) {
      MHD_add_response_header(response, "Connection", "close");
    }
    const MHD_Result queued = MHD_queue_response(
        connection, static_cast<unsigned int>(res.status), response);
    MHD_destroy_response(response);
    return queued;
  }

  static ssize_t ReadEvents(void* cls, uint64_t, char* buf, size_t max) {
    const ssize_t n =
        (*static_cast<std::shared_ptr<EventStream>*>(cls))->Read(buf, max);
    return n < 0 ? MHD_CONTENT_READER_END_OF_STREAM : n;
  }

  static void FreeEvents(void* cls) {
    auto* stream = static_cast<std::shared_ptr<EventStream>*>(cls);
    (*stream)->Closed();
    delete stream;
  }

  struct ChunkState {
    HttpResponse::Chunks next;
    std::string pending;
    size_t offset = 0;
    bool done = false;
  };

  static ssize_t ReadChunks(void* cls, uint64_t, char* buf, size_t max) {
    auto* state = static_cast<ChunkState*>(cls);
    while (state->offset == state->pending.size()) {
      if (state->done) return MHD_CONTENT_READER_END_OF_STREAM;
      state->pending.clear();
      state->offset = 0;
      if (!state->next(&state->pending)) {
        return MHD_CONTENT_READER_END_WITH_ERROR;
      }
      if (state->pending.empty()) state->done = true;
    }
    const size_t n = std::min(max, state->pending.size() - state->offset);
    std::memcpy(buf, state->pending.data() + state->offset, n);
    state->offset += n;
    return static_cast<ssize_t>(n);
  }

  static void FreeChunks(void* cls) { delete static_cast<ChunkState*>(cls); }

  static void Completed(void* cls, MHD_Connection* connection, void** context,
                        MHD_RequestTerminationCode) {
    auto* server = static_cast<HttpServer*>(cls);
    auto* exchange = static_cast<HttpServer::Exchange*>(*context);
    if (exchange == nullptr) return;
    if (exchange->holds_untrusted_slot) server->untrusted_.fetch_sub(1);
    delete exchange;
    *context = nullptr;
    server->connections_->Answered(connection);
  }

  static void Connection(void* cls, MHD_Connection* connection, void**,
                         MHD_ConnectionNotificationCode event) {
    auto* server = static_cast<HttpServer*>(cls);
    if (event == MHD_CONNECTION_NOTIFY_CLOSED) {
      server->connections_->Closed(connection);
      return;
    }
    const MHD_ConnectionInfo* info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info == nullptr) return;
    // Answers on a kept-alive connection go out at once, not after
    // Nagle's delay (~40 ms a request).
    int yes = 1;
    ::setsockopt(info->connect_fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    server->connections_->Opened(connection, info->connect_fd);
  }

  // libmicrohttpd's own messages are not the operator's concern: every
  // failure reaches the client or Start's status.
  static void Log(void*, const char*, va_list) {}
};

namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("http: cannot read the TLS ", what, " \"", path, "\""));
  }
  return text.str();
}

// A socket bound to `host`:`port` and listening; UNAVAILABLE if it cannot
// be bound.
absl::StatusOr<int> Listen(const std::string& host, int port, bool* ipv6) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = absl::StrCat(port);
  if (::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(),
                    &hints, &found) != 0 ||
      found == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("http: cannot resolve \"", host, "\""));
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                  a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR only reuses a port left in TIME_WAIT; SO_REUSEPORT
    // (never set) would let a second server take half the connections.
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::listen(fd, SOMAXCONN) == 0) {
      *ipv6 = a->ai_family == AF_INET6;
      break;
    }
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError("bind");
  return fd;
}

}  // namespace

HttpServer::HttpServer() = default;

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    StudyService* service, Authorizer authorizer, Metrics* metrics,
    HttpServerOptions options) {
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
  for (const auto& [field, value] :
       {std::pair<const char*, int>{"max_connections_per_address",
                                    options.max_connections_per_address},
        {"header_timeout_ms", options.header_timeout_ms},
        {"body_timeout_ms", options.body_timeout_ms},
        {"stream_behind_ms", options.stream_behind_ms}}) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("http: ", field, " must be at least 1, got ", value));
    }
  }
  if (options.max_connections < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "http: max_connections must be 0 (from the file limit) or more, got ",
        options.max_connections));
  }
  if (options.stream_buffer_bytes < 1 ||
      options.streams_buffer_bytes < options.stream_buffer_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "http: stream_buffer_bytes must be at least 1 and at most "
        "streams_buffer_bytes, got ",
        options.stream_buffer_bytes, " and ", options.streams_buffer_bytes));
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
  const HttpServerOptions& o = server->options_;
  server->streams_ = std::make_unique<StreamLimits>(
      o.max_streams, o.max_streams_per_owner, "event streams");
  server->log_root_ = std::move(log_root);
  server->write_policy_.auth = server->authorizer_.enabled();
  server->write_policy_.allow_without_auth = o.allow_writes;
  server->write_policy_.https = !o.tls_cert_file.empty();

  if (o.tls_cert_file.empty() && !o.tls_client_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "http: client certificates need TLS (a certificate and key)");
  }
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                       MHD_ALLOW_SUSPEND_RESUME;
  if (!o.tls_cert_file.empty()) {
    if (o.tls_key_file.empty()) {
      return absl::InvalidArgumentError(
          "http: TLS needs a key file (tls_key_file) with the certificate");
    }
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
      return absl::UnimplementedError(
          "http: this libmicrohttpd was built without TLS");
    }
    absl::StatusOr<std::string> cert = ReadPem(o.tls_cert_file, "certificate");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(o.tls_key_file, "key");
    if (!key.ok()) return key.status();
    server->tls_cert_ = *std::move(cert);
    server->tls_key_ = *std::move(key);
    if (!o.tls_client_ca_file.empty()) {
      absl::StatusOr<std::string> trust =
          ReadPem(o.tls_client_ca_file, "client CA bundle");
      if (!trust.ok()) return trust.status();
      server->tls_trust_ = *std::move(trust);
    }
    flags |= MHD_USE_TLS;
  }

  // The connections: a share of the file limit, so that the database, its
  // backups and gRPC always have descriptors left.
  rlimit files{};
  int64_t file_limit = 1024;
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 &&
      files.rlim_cur != RLIM_INFINITY) {
    file_limit = static_cast<int64_t>(files.rlim_cur);
  } else if (files.rlim_cur == RLIM_INFINITY) {
    file_limit = 1 << 20;
  }
  int cap = HttpConnectionCap(file_limit);
  if (o.max_connections > 0) cap = std::min(cap, o.max_connections);
  cap = std::max(cap, 2);
  server->connection_cap_ = cap;
  server->max_untrusted_ = std::max(1, cap / 2);
  // Event-loop threads: each gets an equal share of the cap (at least 64
  // where the cap allows).
  const unsigned int wanted_threads =
      o.threads > 0
          ? static_cast<unsigned int>(o.threads)
          : std::clamp(2 * std::thread::hardware_concurrency(), 4u, 16u);
  const unsigned int threads = std::max(
      1u, std::min(wanted_threads, static_cast<unsigned int>(cap / 64)));
  // Headroom below each thread's share, so that a new connection finds
  // room while an idle one is being closed for it.
  const int per_thread = cap / static_cast<int>(threads);
  const int soft_cap =
      std::max(1, per_thread - std::clamp(per_thread / 16, 1, 16));
  server->connections_ = std::make_unique<ConnectionTable>(
      soft_cap, absl::Milliseconds(o.header_timeout_ms),
      absl::Milliseconds(o.body_timeout_ms));

  EventStreamOptions stream_options;
  stream_options.stream_bytes = o.stream_buffer_bytes;
  stream_options.total_bytes = o.streams_buffer_bytes;
  stream_options.behind_after = absl::Milliseconds(o.stream_behind_ms);
  stream_options.keepalive = absl::Milliseconds(std::max(1, o.keepalive_ms));
  server->events_ = std::make_unique<EventStreams>(service, stream_options);

  server->Route();

  bool ipv6 = false;
  absl::StatusOr<int> listen_fd = Listen(bind_host, port, &ipv6);
  if (!listen_fd.ok()) {
    return absl::UnavailableError(
        absl::StrCat("http: cannot bind ", o.listen,
                     " (is another hypertuned or another program serving "
                     "that port?)"));
  }
  server->listen_fd_ = *listen_fd;
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  ::getsockname(server->listen_fd_, reinterpret_cast<sockaddr*>(&bound),
                &length);
  const int bound_port =
      ntohs(bound.ss_family == AF_INET6
                ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                : reinterpret_cast<sockaddr_in&>(bound).sin_port);
  server->address_ = absl::StrCat(host, ":", bound_port);
  if (ipv6) flags |= MHD_USE_IPv6;

  const unsigned int idle =
      static_cast<unsigned int>(std::max(1, o.idle_timeout_s));
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_LISTEN_SOCKET, server->listen_fd_, nullptr},
      {MHD_OPTION_THREAD_POOL_SIZE, threads, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, cap, nullptr},
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, o.max_connections_per_address,
       nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, idle, nullptr},
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT, 64 << 10, nullptr},
  };
  if (!server->tls_cert_.empty()) {
    items.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0,
                     const_cast<char*>(server->tls_cert_.c_str())});
    items.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0,
                     const_cast<char*>(server->tls_key_.c_str())});
    if (!server->tls_trust_.empty()) {
      items.push_back({MHD_OPTION_HTTPS_MEM_TRUST, 0,
                       const_cast<char*>(server->tls_trust_.c_str())});
    }
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  server->daemon_ = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &MhdCallbacks::Request, server.get(),
      MHD_OPTION_ARRAY, items.data(), MHD_OPTION_NOTIFY_COMPLETED,
      &MhdCallbacks::Completed, server.get(), MHD_OPTION_NOTIFY_CONNECTION,
      &MhdCallbacks::Connection, server.get(), MHD_OPTION_EXTERNAL_LOGGER,
      &MhdCallbacks::Log, nullptr, MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    ::close(server->listen_fd_);
    server->listen_fd_ = -1;
    if (!server->tls_cert_.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("http: TLS certificate \"", o.tls_cert_file,
                       "\" or key \"", o.tls_key_file, "\" was refused"));
    }
    return absl::UnavailableError(
        absl::StrCat("http: cannot serve ", o.listen));
  }
  return server;
}

HttpServer::~HttpServer() { Shutdown(); }

void HttpServer::Shutdown() {
  absl::MutexLock lock(&shutdown_mu_);
  stopping_.store(true);
  // Event streams end first, so that no connection stays suspended.
  if (events_ != nullptr) events_->Stop();
  if (daemon_ != nullptr) {
    const MHD_socket listen_fd = MHD_quiesce_daemon(daemon_);
    MHD_stop_daemon(daemon_);
    daemon_ = nullptr;
    if (listen_fd != MHD_INVALID_SOCKET) ::close(listen_fd);
    listen_fd_ = -1;
  }
}

size_t HttpServer::event_stream_bytes() const {
  return events_ == nullptr ? 0 : events_->held_bytes();
}

bool HttpServer::ClientCertificateRefused(MHD_Connection* connection) const {
  if (tls_trust_.empty()) return false;
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (info == nullptr || info->tls_session == nullptr) return true;
  auto session = static_cast<gnutls_session_t>(info->tls_session);
  unsigned int status = 0;
  if (gnutls_certificate_type_get(session) != GNUTLS_CRT_X509) return true;
  unsigned int count = 0;
  if (gnutls_certificate_get_peers(session, &count) == nullptr || count == 0) {
    return true;
  }
  return gnutls_certificate_verify_peers2(session, &status) != 0 || status != 0;
}

bool HttpServer::RefuseEarly(Exchange& exchange) {
  if (exchange.trusted) return false;
  // Callers without a valid token take at most half of the connections'
  // answers at once, so that they can never crowd out token holders.
  if (untrusted_.fetch_add(1) >= max_untrusted_) {
    untrusted_.fetch_sub(1);
    ReplyError(exchange.res,
               absl::UnavailableError(absl::StrCat(
                   "http: ", max_untrusted_,
                   " requests without a valid token are being served, the "
                   "most this server serves at once; try again later")),
               503);
    return true;
  }
  exchange.holds_untrusted_slot = true;
  return false;
}

void HttpServer::Dispatch(Exchange& exchange) {
  HttpRequest& req = exchange.req;
  HttpResponse& res = exchange.res;
  const bool post = req.method == "POST";
  const bool get = req.method == "GET" || req.method == "HEAD";
  const Route_* known = nullptr;
  std::smatch match;
  for (const Route_& route : routes_) {
    if (!std::regex_match(req.path, match, route.pattern)) continue;
    if (route.post ? !post : !get) {
      if (known == nullptr) known = &route;
      continue;
    }
    req.matches.assign(match.begin(), match.end());
    const Clock::time_point start = Clock::now();
    (this->*route.handler)(req, res);
    if (metrics_ != nullptr) {
      metrics_->ObserveHttp(
          route.name, res.status,
          std::chrono::duration<double>(Clock::now() - start).count());
    }
    return;
  }
  // A known path asked with another method: a JSON 405; else a 404 naming
  // the path.
  if (known != nullptr) {
    res.set_header("Allow", known->post ? "POST" : "GET, HEAD");
    ReplyError(res,
               absl::InvalidArgumentError(absl::StrCat(
                   req.method, " ", req.path, ": this endpoint takes ",
                   known->post ? "POST with a JSON body" : "GET")),
               405);
    return;
  }
  ReplyError(res, absl::NotFoundError(absl::StrCat(
                      "no such endpoint: ", req.method, " ", req.path)));
}

void HttpServer::Route() {
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
}

void HttpServer::Get(const std::string& pattern, std::string name,
                     Handler handler) {
  routes_.push_back({std::regex(pattern), false, std::move(name), handler});
}

void HttpServer::Post(const std::string& pattern, std::string name,
                      Handler handler) {
  routes_.push_back({std::regex(pattern), true, std::move(name), handler});
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
