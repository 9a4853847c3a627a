// The HTTP routes of http_server.h, one member function per endpoint.
#include "service/http/http_server.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service/http/assets.h"
#include "service/trial_csv.h"
#include "service/http/json.h"
#include "service/http/replies.h"
#include "service/limits.h"
// After Eigen (through the service's headers): httplib.h brings
// <resolv.h>, whose `_res` macro breaks Eigen's parameter names.
#include "httplib.h"

namespace hypertune::service {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

void HttpServer::ListStudies(const Request& req, Response& res) {
  absl::StatusOr<Principal> who = Caller(req);
  if (!who.ok()) return ReplyError(res, who.status());
  absl::StatusOr<v1::ListStudiesResponse> visible = VisibleStudies(*who);
  if (!visible.ok()) return ReplyError(res, visible.status());
  ReplyJson(res, ToJson(*visible));
}

void HttpServer::GetStudy(const Request& req, Response& res) {
  absl::StatusOr<Admitted> admitted = Admit(req, req.matches[1]);
  if (!admitted.ok()) return ReplyError(res, admitted.status());
  ReplyJson(res, ToJson(admitted->study));
}

void HttpServer::ListTrials(const Request& req, Response& res) {
  absl::StatusOr<Admitted> admitted = Admit(req, req.matches[1]);
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
}

void HttpServer::TrialsCsv(const Request& req, Response& res) {
  absl::StatusOr<Admitted> admitted = Admit(req, req.matches[1]);
  if (!admitted.ok()) return ReplyError(res, admitted.status());
  res.set_header("Content-Disposition",
                 absl::StrCat("attachment; filename=\"", admitted->study.name(),
                              ".csv\""));
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
        // Mid-stream there is no status to send: end the connection so that
        // the client sees a truncated, not a complete, file.
        if (!page.ok()) return false;
        for (const v1::Trial& trial : page->trials()) {
          AppendCsvRow(study, trial, &chunk);
        }
        // Shutting down: cut the connection rather than end a file that
        // would look complete.
        if (stopping()) return false;
        if (!sink.write(chunk.data(), chunk.size())) return false;
        if (page->next_page_token().empty()) {
          sink.done();
        } else {
          *token = page->next_page_token();
        }
        return true;
      });
}

void HttpServer::Best(const Request& req, Response& res) {
  absl::StatusOr<Admitted> admitted = Admit(req, req.matches[1]);
  if (!admitted.ok()) return ReplyError(res, admitted.status());
  v1::ListOptimalTrialsRequest request;
  request.set_study_name(admitted->study.name());
  absl::StatusOr<v1::ListOptimalTrialsResponse> best =
      service_->ListOptimalTrials(request, admitted->caller);
  if (!best.ok()) return ReplyError(res, best.status());
  ReplyJson(res, ToJson(*best));
}

void HttpServer::Changes(const Request& req, Response& res) {
  absl::StatusOr<Admitted> admitted = Admit(req, req.matches[1]);
  if (!admitted.ok()) return ReplyError(res, admitted.status());
  absl::StatusOr<int64_t> after = IntParam(req, "after", 0, INT64_MAX, 0);
  if (!after.ok()) return ReplyError(res, after.status());
  absl::StatusOr<int64_t> limit =
      IntParam(req, "limit", 1, kMaxPageSize, kMaxPageSize);
  if (!limit.ok()) return ReplyError(res, limit.status());
  absl::StatusOr<std::vector<storage::TrialChange>> changes =
      service_->ListTrialChanges(admitted->study.name(), *after,
                                 static_cast<int>(*limit), admitted->caller);
  if (!changes.ok()) return ReplyError(res, changes.status());
  // More may follow while a page comes back full.
  ReplyJson(res, ChangesPageJson(
                     *changes, *after,
                     static_cast<int64_t>(changes->size()) == *limit));
}

void HttpServer::Events(const Request& req, Response& res) {
  absl::StatusOr<Admitted> admitted = Admit(req, req.matches[1]);
  if (!admitted.ok()) return ReplyError(res, admitted.status());
  absl::StatusOr<int64_t> after = IntParam(req, "after", 0, INT64_MAX, 0);
  if (!after.ok()) return ReplyError(res, after.status());
  // A reconnecting EventSource says where it was in Last-Event-ID.
  if (req.has_header("Last-Event-ID")) {
    int64_t last = 0;
    const std::string text = req.get_header_value("Last-Event-ID");
    if (!absl::SimpleAtoi(text, &last) || last < 0) {
      std::string quoted;
      AppendJsonString(text, &quoted);
      return ReplyError(res, absl::InvalidArgumentError(absl::StrCat(
                                 "Last-Event-ID: must be a sequence number, "
                                 "got ",
                                 quoted)));
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
        // Events wait here until WatchTrials has emitted its batch (it asks
        // `cancelled` after each): one write per batch, not per event.
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
        const auto keepalive = std::chrono::milliseconds(options_.keepalive_ms);
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
          pending =
              absl::StrCat("event: error\ndata: ", ErrorJson(status), "\n\n");
          flush();
        }
        if (broken) return false;
        sink.done();
        return true;
      },
      // The stream's slot is freed however the answer ends (httplib calls
      // this when the response goes, even unsent).
      [this, owner](bool) { ReleaseStream(owner); });
}

void HttpServer::MetricsText(const Request& req, Response& res) {
  absl::StatusOr<Principal> who = Caller(req);
  if (!who.ok()) return ReplyError(res, who.status());
  absl::StatusOr<v1::ListStudiesResponse> visible = VisibleStudies(*who);
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
    AppendGauge("hypertune_database_size_bytes",
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
}

// The dashboard: public files that hold no data (the page asks for the
// token and sends it with every API call).
void HttpServer::Page(const Request&, Response& res) {
  Request index;
  index.path = "/index.html";
  AssetFile(index, res);
}

void HttpServer::AssetFile(const Request& req, Response& res) {
  const Asset* asset = FindAsset(req.path);
  if (asset == nullptr) {
    return ReplyError(res, absl::NotFoundError(
                               absl::StrCat("no such file: ", req.path)));
  }
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_content(asset->data.data(), asset->data.size(),
                  std::string(asset->content_type));
}

}  // namespace hypertune::service
