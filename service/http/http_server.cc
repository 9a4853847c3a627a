#include "service/http/http_server.h"

#include <sys/socket.h>
#include <sys/stat.h>

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
#include "service/http/assets.h"
#include "service/http/connection_pool.h"
#include "service/http/csv.h"
#include "service/http/json.h"

namespace hypertune::service {
namespace {

using Clock = std::chrono::steady_clock;

std::string JsonString(absl::string_view text) {
  std::string out;
  AppendJsonString(text, &out);
  return out;
}

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

std::string ErrorJson(const absl::Status& status) {
  return absl::StrCat(
      "{\"error\":{\"code\":", HttpStatusOf(status.code()),
      ",\"status\":", JsonString(absl::StatusCodeToString(status.code())),
      ",\"message\":", JsonString(status.message()), "}}");
}

void ReplyError(httplib::Response& res, const absl::Status& status) {
  res.status = HttpStatusOf(status.code());
  if (res.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(ErrorJson(status), "application/json");
}

void ReplyJson(httplib::Response& res, std::string body) {
  res.status = 200;
  res.set_header("Cache-Control", "no-store");
  res.set_content(std::move(body), "application/json");
}

// The value of query parameter `name` as an integer in [min, max], or
// `fallback` when absent; INVALID_ARGUMENT naming it otherwise.
absl::StatusOr<int64_t> IntParam(const httplib::Request& req, const char* name,
                                 int64_t min, int64_t max, int64_t fallback) {
  if (!req.has_param(name)) return fallback;
  const std::string text = req.get_param_value(name);
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": must be an integer from ", min, " to ", max,
                     ", got ", JsonString(text)));
  }
  return value;
}

// The trial states named by the `state` parameters (each a comma-separated
// list of names, any case); empty: all.
absl::StatusOr<std::vector<v1::Trial::State>> StateParams(
    const httplib::Request& req) {
  std::vector<v1::Trial::State> states;
  const size_t n = req.get_param_value_count("state");
  for (size_t i = 0; i < n; ++i) {
    for (absl::string_view part : absl::StrSplit(
             req.get_param_value("state", i), ',', absl::SkipWhitespace())) {
      std::string name =
          absl::AsciiStrToUpper(absl::StripAsciiWhitespace(part));
      v1::Trial::State state;
      if (!v1::Trial::State_Parse(name, &state) ||
          state == v1::Trial::STATE_UNSPECIFIED) {
        std::string known;
        for (int s = v1::Trial::REQUESTED; s <= v1::Trial::State_MAX; ++s) {
          if (!v1::Trial::State_IsValid(s)) continue;
          absl::StrAppend(&known, known.empty() ? "" : ", ",
                          v1::Trial::State_Name(s));
        }
        return absl::InvalidArgumentError(
            absl::StrCat("state: unknown trial state ", JsonString(part),
                         " (one of ", known, ")"));
      }
      states.push_back(state);
    }
  }
  return states;
}

// Appends one server-sent event: `id` is the sequence, the data the trial.
void AppendEvent(const v1::TrialEvent& event, std::string* out) {
  absl::StrAppend(out, "id: ", event.sequence(), "\nevent: trial\ndata: ");
  AppendJson(event.trial(), out);
  out->append("\n\n");
}

// The listening socket of an httplib server, which the library keeps to
// itself (a protected member, reached through a member pointer).
struct ListenSocket : httplib::Server {
  static int Of(httplib::Server& server) {
    return (server.*(&ListenSocket::svr_sock_)).load();
  }
};

int64_t FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_size);
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

  std::unique_ptr<HttpServer> server(new HttpServer());
  server->service_ = service;
  server->authorizer_ = std::move(authorizer);
  server->metrics_ = metrics;
  server->options_ = std::move(options);
  const HttpServerOptions& o = server->options_;
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
  const int max_connections = std::max(2, o.max_connections);
  server->http_->new_task_queue = [max_connections] {
    return new ConnectionPool(max_connections, absl::Seconds(30));
  };
  // Answers on a kept-alive connection go out at once, not after Nagle's
  // delay (~40 ms a request).
  server->http_->set_tcp_nodelay(true);
  // A silent connection is closed after idle_timeout_s, waiting or not for
  // its first request; a request must arrive within it too.
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
        absl::StrCat("http: cannot bind ", server->options_.listen));
  }
  // httplib listens with a backlog of 5: a burst of connections would be
  // refused while the acceptor is busy.
  if (::listen(ListenSocket::Of(*server->http_), SOMAXCONN) != 0) {
    return absl::UnavailableError(
        absl::StrCat("http: cannot listen on ", server->options_.listen));
  }
  server->address_ = absl::StrCat(host, ":", bound);
  httplib::Server* http = server->http_.get();
  auto listener_done = std::make_shared<std::atomic<bool>>(false);
  server->listener_ = std::thread([http, listener_done] {
    http->listen_after_bind();
    listener_done->store(true);
  });
  // httplib's stop() does nothing until the listener runs, and the listener
  // would then accept forever: return once it runs.
  while (!http->is_running() && !listener_done->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!http->is_running()) {
    return absl::UnavailableError(
        absl::StrCat("http: cannot listen on ", server->options_.listen));
  }
  return server;
}

HttpServer::~HttpServer() { Shutdown(); }

absl::Status HttpServer::AcquireStream(const std::string& owner) {
  absl::MutexLock lock(&streams_mu_);
  int& mine = streams_by_owner_[owner];
  if (open_streams_ >= options_.max_streams ||
      mine >= options_.max_streams_per_owner) {
    const bool all = open_streams_ >= options_.max_streams;
    if (mine == 0) streams_by_owner_.erase(owner);
    return absl::UnavailableError(absl::StrCat(
        "events: ",
        all ? absl::StrCat(options_.max_streams,
                           " event streams are open, the most this server "
                           "serves")
            : absl::StrCat(options_.max_streams_per_owner,
                           " event streams of this owner are open, the most "
                           "one owner may hold"),
        "; try again later"));
  }
  ++mine;
  ++open_streams_;
  return absl::OkStatus();
}

void HttpServer::ReleaseStream(const std::string& owner) {
  absl::MutexLock lock(&streams_mu_);
  if (--streams_by_owner_[owner] == 0) streams_by_owner_.erase(owner);
  --open_streams_;
}

void HttpServer::Shutdown() {
  stopping_.store(true);
  if (http_ != nullptr) http_->stop();
  if (listener_.joinable()) listener_.join();
}

void HttpServer::Route() {
  using Handler =
      std::function<void(const httplib::Request&, httplib::Response&)>;
  // Answers from the API are not compressed: on the loopback and LAN links
  // dashboards use, compressing a megabyte page costs more than sending it
  // (brotli, which browsers ask for first, takes seconds per megabyte at the
  // library's setting). The page's own files may still be.
  http_->set_pre_routing_handler([](const httplib::Request& req,
                                    httplib::Response&) {
    // The request is ours to edit: httplib hands handlers a const view
    // of its own mutable object.
    auto& headers = const_cast<httplib::Request&>(req).headers;
    const bool gzip =
        absl::StrContains(req.get_header_value("Accept-Encoding"), "gzip");
    headers.erase("Accept-Encoding");
    if (gzip && (req.path == "/" || absl::StartsWith(req.path, "/assets/"))) {
      headers.emplace("Accept-Encoding", "gzip");
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  // Registers `handler` for GET `pattern`, counted in /metrics as `route`.
  auto get = [this](const std::string& pattern, std::string route,
                    Handler handler) {
    http_->Get(
        pattern, [this, route = std::move(route), handler = std::move(handler)](
                     const httplib::Request& req, httplib::Response& res) {
          const Clock::time_point start = Clock::now();
          handler(req, res);
          if (metrics_ != nullptr) {
            metrics_->ObserveHttp(
                route, res.status,
                std::chrono::duration<double>(Clock::now() - start).count());
          }
        });
  };

  // Who calls: AuthOff() with auth off; UNAUTHENTICATED without a known
  // token.
  auto caller =
      [this](const httplib::Request& req) -> absl::StatusOr<Principal> {
    if (!req.has_header("Authorization")) {
      return authorizer_.Authenticate(std::nullopt);
    }
    const std::string value = req.get_header_value("Authorization");
    return authorizer_.Authenticate(value);
  };
  // Who calls, and the study `name` if they may read it.
  struct Admitted {
    Principal caller;
    v1::Study study;
  };
  auto admit = [this, caller](
                   const httplib::Request& req,
                   const std::string& name) -> absl::StatusOr<Admitted> {
    absl::StatusOr<Principal> who = caller(req);
    if (!who.ok()) return who.status();
    v1::GetStudyRequest request;
    request.set_name(name);
    absl::StatusOr<v1::Study> study = service_->GetStudy(request, *who);
    if (!study.ok()) return study.status();
    return Admitted{*std::move(who), *std::move(study)};
  };
  // Every study the caller may read, page by page.
  auto visible_studies = [this](const Principal& who)
      -> absl::StatusOr<v1::ListStudiesResponse> {
    v1::ListStudiesResponse all;
    v1::ListStudiesRequest request;
    do {
      absl::StatusOr<v1::ListStudiesResponse> page =
          service_->ListStudies(request, who);
      if (!page.ok()) return page.status();
      for (v1::Study& study : *page->mutable_studies()) {
        *all.add_studies() = std::move(study);
      }
      request.set_page_token(page->next_page_token());
    } while (!request.page_token().empty());
    return all;
  };

  get("/api/studies", "/api/studies",
      [caller, visible_studies](const httplib::Request& req,
                                httplib::Response& res) {
        absl::StatusOr<Principal> who = caller(req);
        if (!who.ok()) return ReplyError(res, who.status());
        absl::StatusOr<v1::ListStudiesResponse> visible =
            visible_studies(*who);
        if (!visible.ok()) return ReplyError(res, visible.status());
        ReplyJson(res, ToJson(*visible));
      });

  get(R"(/api/studies/([^/]+))", "/api/studies/{name}",
      [admit](const httplib::Request& req, httplib::Response& res) {
        absl::StatusOr<Admitted> admitted = admit(req, req.matches[1]);
        if (!admitted.ok()) return ReplyError(res, admitted.status());
        ReplyJson(res, ToJson(admitted->study));
      });

  get(R"(/api/studies/([^/]+)/trials)", "/api/studies/{name}/trials",
      [this, admit](const httplib::Request& req, httplib::Response& res) {
        absl::StatusOr<Admitted> admitted = admit(req, req.matches[1]);
        if (!admitted.ok()) return ReplyError(res, admitted.status());
        absl::StatusOr<int64_t> page_size =
            IntParam(req, "page_size", 1, kMaxPageSize, 100);
        if (!page_size.ok()) return ReplyError(res, page_size.status());
        absl::StatusOr<std::vector<v1::Trial::State>> states = StateParams(req);
        if (!states.ok()) return ReplyError(res, states.status());
        v1::ListTrialsRequest request;
        request.set_study_name(admitted->study.name());
        request.set_page_size(static_cast<int>(*page_size));
        request.set_page_token(req.get_param_value("page_token"));
        for (v1::Trial::State s : *states) request.add_states(s);
        absl::StatusOr<v1::ListTrialsResponse> page =
            service_->ListTrials(request, admitted->caller);
        if (!page.ok()) return ReplyError(res, page.status());
        ReplyJson(res, ToJson(*page));
      });

  get(R"(/api/studies/([^/]+)/trials\.csv)", "/api/studies/{name}/trials.csv",
      [this, admit](const httplib::Request& req, httplib::Response& res) {
        absl::StatusOr<Admitted> admitted = admit(req, req.matches[1]);
        if (!admitted.ok()) return ReplyError(res, admitted.status());
        res.set_header("Content-Disposition",
                       absl::StrCat("attachment; filename=\"",
                                    admitted->study.name(), ".csv\""));
        res.set_header("Cache-Control", "no-store");
        // Page by page: the header with the first, then a page per call.
        auto token = std::make_shared<std::optional<std::string>>();
        res.set_chunked_content_provider(
            "text/csv; charset=utf-8",
            [this, study = admitted->study, who = admitted->caller, token](
                size_t, httplib::DataSink& sink) {
              std::string chunk;
              if (!token->has_value()) AppendCsvHeader(study, &chunk);
              v1::ListTrialsRequest request;
              request.set_study_name(study.name());
              request.set_page_size(kMaxPageSize);
              request.set_page_token(token->value_or(""));
              absl::StatusOr<v1::ListTrialsResponse> page =
                  service_->ListTrials(request, who);
              // Mid-stream there is no status to send: end the connection
              // so that the client sees a truncated, not a complete, file.
              if (!page.ok()) return false;
              for (const v1::Trial& trial : page->trials()) {
                AppendCsvRow(study, trial, &chunk);
              }
              // Shutting down: cut the connection rather than end a file
              // that would look complete.
              if (stopping()) return false;
              if (!sink.write(chunk.data(), chunk.size())) return false;
              if (page->next_page_token().empty()) {
                sink.done();
              } else {
                *token = page->next_page_token();
              }
              return true;
            });
      });

  get(R"(/api/studies/([^/]+)/best)", "/api/studies/{name}/best",
      [this, admit](const httplib::Request& req, httplib::Response& res) {
        absl::StatusOr<Admitted> admitted = admit(req, req.matches[1]);
        if (!admitted.ok()) return ReplyError(res, admitted.status());
        v1::ListOptimalTrialsRequest request;
        request.set_study_name(admitted->study.name());
        absl::StatusOr<v1::ListOptimalTrialsResponse> best =
            service_->ListOptimalTrials(request, admitted->caller);
        if (!best.ok()) return ReplyError(res, best.status());
        ReplyJson(res, ToJson(*best));
      });

  get(R"(/api/studies/([^/]+)/changes)", "/api/studies/{name}/changes",
      [this, admit](const httplib::Request& req, httplib::Response& res) {
        absl::StatusOr<Admitted> admitted = admit(req, req.matches[1]);
        if (!admitted.ok()) return ReplyError(res, admitted.status());
        absl::StatusOr<int64_t> after = IntParam(req, "after", 0, INT64_MAX, 0);
        if (!after.ok()) return ReplyError(res, after.status());
        absl::StatusOr<int64_t> limit =
            IntParam(req, "limit", 1, kMaxPageSize, kMaxPageSize);
        if (!limit.ok()) return ReplyError(res, limit.status());
        absl::StatusOr<std::vector<storage::TrialChange>> changes =
            service_->ListTrialChanges(admitted->study.name(), *after,
                                       static_cast<int>(*limit),
                                       admitted->caller);
        if (!changes.ok()) return ReplyError(res, changes.status());
        int64_t last = *after;
        std::string body = "{\"events\":[";
        for (size_t i = 0; i < changes->size(); ++i) {
          const storage::TrialChange& change = (*changes)[i];
          absl::StrAppend(&body, i == 0 ? "" : ",", "{\"sequence\":\"",
                          change.sequence,
                          "\",\"trial\":", ToJson(change.trial), "}");
          last = change.sequence;
        }
        // More may follow while a page comes back full.
        absl::StrAppend(
            &body, "],\"last_sequence\":\"", last, "\",\"more\":",
            static_cast<int64_t>(changes->size()) == *limit ? "true" : "false",
            "}");
        ReplyJson(res, std::move(body));
      });

  get(R"(/api/studies/([^/]+)/events)", "/api/studies/{name}/events",
      [this, admit](const httplib::Request& req, httplib::Response& res) {
        absl::StatusOr<Admitted> admitted = admit(req, req.matches[1]);
        if (!admitted.ok()) return ReplyError(res, admitted.status());
        absl::StatusOr<int64_t> after = IntParam(req, "after", 0, INT64_MAX, 0);
        if (!after.ok()) return ReplyError(res, after.status());
        // A reconnecting EventSource says where it was in Last-Event-ID.
        if (req.has_header("Last-Event-ID")) {
          int64_t last = 0;
          const std::string text = req.get_header_value("Last-Event-ID");
          if (!absl::SimpleAtoi(text, &last) || last < 0) {
            return ReplyError(
                res, absl::InvalidArgumentError(absl::StrCat(
                         "Last-Event-ID: must be a sequence number, got ",
                         JsonString(text))));
          }
          *after = last;
        }
        const std::string owner = admitted->caller.owner;
        if (absl::Status s = AcquireStream(owner); !s.ok()) {
          return ReplyError(res, s);
        }
        res.set_header("Cache-Control", "no-store");
        res.set_header("X-Accel-Buffering", "no");
        res.set_chunked_content_provider(
            "text/event-stream",
            [this, name = admitted->study.name(), who = admitted->caller,
             after = *after](size_t, httplib::DataSink& sink) {
              Clock::time_point last_write = Clock::now();
              bool broken = false;
              // Events wait here until WatchTrials has emitted its batch (it
              // asks `cancelled` after each): one write per batch, not per
              // event.
              std::string pending;
              auto flush = [&] {
                if (!broken && !pending.empty() &&
                    !sink.write(pending.data(), pending.size())) {
                  broken = true;
                }
                if (!pending.empty()) last_write = Clock::now();
                pending.clear();
                return !broken;
              };
              pending = "retry: 2000\n\n";
              flush();
              v1::WatchTrialsRequest request;
              request.set_study_name(name);
              request.set_after_sequence(after);
              const auto keepalive =
                  std::chrono::milliseconds(options_.keepalive_ms);
              constexpr size_t kFlushBytes = 256 << 10;
              absl::Status status = service_->WatchTrials(
                  request,
                  [&](const v1::TrialEvent& event) {
                    AppendEvent(event, &pending);
                    return pending.size() < kFlushBytes || flush();
                  },
                  [&] {
                    if (!flush() || stopping()) return true;
                    if (Clock::now() - last_write >= keepalive) {
                      pending = ": keep-alive\n\n";
                      return !flush();
                    }
                    return false;
                  },
                  who);
              flush();
              if (!status.ok()) {
                pending = absl::StrCat(
                    "event: error\ndata: ", ErrorJson(status), "\n\n");
                flush();
              }
              if (broken) return false;
              sink.done();
              return true;
            },
            // The stream's slot is freed however the answer ends (httplib
            // calls this when the response goes, even unsent).
            [this, owner](bool) { ReleaseStream(owner); });
      });

  get("/metrics", "/metrics",
      [this, caller, visible_studies](const httplib::Request& req,
                                      httplib::Response& res) {
        absl::StatusOr<Principal> who = caller(req);
        if (!who.ok()) return ReplyError(res, who.status());
        absl::StatusOr<v1::ListStudiesResponse> visible =
            visible_studies(*who);
        if (!visible.ok()) return ReplyError(res, visible.status());
        std::vector<std::pair<std::vector<std::string>, double>> trials;
        std::vector<std::pair<std::vector<std::string>, double>> studies;
        absl::flat_hash_set<std::string> names;
        for (const v1::Study& study : visible->studies()) {
          names.insert(study.name());
          studies.push_back(
              {{study.name(), v1::Study::State_Name(study.state())}, 1.0});
          // Every state, zeros included, so that series do not vanish.
          for (int s = v1::Trial::REQUESTED; s <= v1::Trial::State_MAX; ++s) {
            if (!v1::Trial::State_IsValid(s)) continue;
            const std::string state = v1::Trial::State_Name(s);
            auto it = study.trial_counts().find(state);
            trials.push_back({{study.name(), state},
                              it == study.trial_counts().end()
                                  ? 0.0
                                  : static_cast<double>(it->second)});
          }
        }
        std::string body;
        AppendGauge("hypertune_trials", "Trials by study and state.",
                    {"study", "state"}, trials, &body);
        AppendGauge("hypertune_study_info", "Studies, by state (always 1).",
                    {"study", "state"}, studies, &body);
        if (!options_.db_path.empty()) {
          AppendGauge(
              "hypertune_database_size_bytes",
              "Size of the SQLite database file and its write-ahead log.",
              {"file"},
              {{{"db"}, static_cast<double>(FileSize(options_.db_path))},
               {{"wal"},
                static_cast<double>(FileSize(options_.db_path + "-wal"))}},
              &body);
        }
        // Every per-study series, only for the caller's studies.
        if (metrics_ != nullptr) {
          metrics_->Render(&body, [&](const std::string& study) {
            return names.contains(study);
          });
        }
        res.status = 200;
        res.set_content(std::move(body), "text/plain; version=0.0.4");
      });

  // The dashboard: public files that hold no data (the page asks for the
  // token and sends it with every API call).
  auto serve_asset = [](std::string_view path, httplib::Response& res) {
    const Asset* asset = FindAsset(path);
    if (asset == nullptr) {
      return ReplyError(res, absl::NotFoundError(absl::StrCat(
                                 "no such file: ", std::string(path))));
    }
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_content(asset->data.data(), asset->data.size(),
                    std::string(asset->content_type));
  };
  get("/", "/", [serve_asset](const httplib::Request&, httplib::Response& res) {
    serve_asset("/index.html", res);
  });
  get(R"(/assets/[A-Za-z0-9._-]+)", "/assets",
      [serve_asset](const httplib::Request& req, httplib::Response& res) {
        serve_asset(req.path, res);
      });

  // Anything else: a JSON 404 naming the path.
  http_->set_error_handler([](const httplib::Request& req,
                              httplib::Response& res) {
    if (res.status == 404 && res.body.empty()) {
      ReplyError(res, absl::NotFoundError(absl::StrCat(
                          "no such endpoint: ", req.method, " ", req.path)));
    }
  });
}

}  // namespace hypertune::service
