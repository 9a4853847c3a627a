// The HTTP routes of http_server.h, one member function per endpoint.
#include "service/http/http_server.h"

#include <zlib.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/limits.h"
#include "common/proto_json.h"
#include "common/trial_csv.h"
#include "service/http/assets.h"
#include "service/http/dashboard_view.h"
#include "service/http/event_streams.h"
#include "service/http/log_tail.h"
#include "service/http/replies.h"
#include "storage/open_store.h"

namespace hypertune::service {
namespace {

// A trial id from the path: a positive integer.
absl::StatusOr<int64_t> TrialIdOf(const std::string& text) {
  int64_t id = 0;
  if (!absl::SimpleAtoi(text, &id) || id < 1) {
    std::string quoted;
    AppendJsonString(text, &quoted);
    return absl::InvalidArgumentError(
        absl::StrCat("trial id: must be a positive integer, got ", quoted));
  }
  return id;
}

// Whether an asset of `content_type` is worth compressing (text, not
// images).
bool Compressible(std::string_view type) {
  const absl::string_view content_type(type.data(), type.size());
  return absl::StartsWith(content_type, "text/") ||
         absl::StrContains(content_type, "javascript") ||
         absl::StrContains(content_type, "json") ||
         absl::StrContains(content_type, "svg");
}

// The gzip form of `asset`, made once and kept (the assets are fixed).
std::string_view Gzipped(const Asset& asset) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* made = new absl::flat_hash_map<const Asset*, std::string>();
  absl::MutexLock lock(&mu);
  auto [it, added] = made->try_emplace(&asset);
  if (!added) return it->second;
  z_stream z{};
  // 15 + 16: a gzip header and trailer around the deflate stream.
  if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return it->second;  // empty: served uncompressed
  }
  std::string& out = it->second;
  out.resize(deflateBound(&z, asset.data.size()));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(asset.data.data()));
  z.avail_in = static_cast<uInt>(asset.data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const bool done = deflate(&z, Z_FINISH) == Z_STREAM_END;
  out.resize(done ? z.total_out : 0);
  deflateEnd(&z);
  return out;
}

}  // namespace

void HttpServer::ServerInfo(const Request& req, Response& res) {
  absl::StatusOr<Principal> who = Caller(req);
  if (!who.ok()) return ReplyError(res, who.status());
  ReplyJson(
      res,
      absl::StrCat(
          "{\"auth\":", write_policy_.auth ? "true" : "false",
          ",\"writes\":", write_policy_.writes_enabled() ? "true" : "false",
          ",\"logs\":", log_root_.empty() ? "false" : "true",
          ",\"charts\":", DashboardHasCharts() ? "true" : "false", "}"));
}

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
  auto finished = std::make_shared<bool>(false);
  res.status = 200;
  res.content_type = "text/csv; charset=utf-8";
  res.chunks = [this, study = admitted->study, who = admitted->caller, token,
                finished](std::string* chunk) {
    if (*finished) return true;  // an empty chunk: the end
    if (!token->has_value()) AppendCsvHeader(study, chunk);
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
      AppendCsvRow(study, trial, chunk);
    }
    // Shutting down: cut the connection rather than end a file that would
    // look complete.
    if (stopping()) return false;
    if (page->next_page_token().empty()) {
      *finished = true;
    } else {
      *token = page->next_page_token();
    }
    return true;
  };
}

void HttpServer::GetTrial(const Request& req, Response& res) {
  absl::StatusOr<int64_t> id = TrialIdOf(req.matches[2]);
  if (!id.ok()) return ReplyError(res, id.status());
  absl::StatusOr<Admitted> admitted = Admit(req, req.matches[1]);
  if (!admitted.ok()) return ReplyError(res, admitted.status());
  v1::GetTrialRequest request;
  request.set_study_name(admitted->study.name());
  request.set_trial_id(*id);
  absl::StatusOr<v1::Trial> trial =
      service_->GetTrial(request, admitted->caller);
  if (!trial.ok()) return ReplyError(res, trial.status());
  ReplyJson(res, ToJson(*trial));
}

void HttpServer::TrialLog(const Request& req, Response& res) {
  absl::StatusOr<int64_t> id = TrialIdOf(req.matches[2]);
  if (!id.ok()) return ReplyError(res, id.status());
  absl::StatusOr<int64_t> bytes =
      IntParam(req, "bytes", 1, kMaxLogTailBytes, kMaxLogTailBytes);
  if (!bytes.ok()) return ReplyError(res, bytes.status());
  absl::StatusOr<Admitted> admitted = Admit(req, req.matches[1]);
  if (!admitted.ok()) return ReplyError(res, admitted.status());
  v1::GetTrialRequest request;
  request.set_study_name(admitted->study.name());
  request.set_trial_id(*id);
  absl::StatusOr<v1::Trial> trial =
      service_->GetTrial(request, admitted->caller);
  if (!trial.ok()) return ReplyError(res, trial.status());
  if (trial->log_path().empty()) {
    return ReplyError(res, absl::NotFoundError(absl::StrCat(
                               "trial ", *id,
                               " has no log path (trials run "
                               "by `hypertune worker` have one)")));
  }
  absl::StatusOr<LogTail> tail =
      ReadLogTail(log_root_, trial->log_path(), *bytes);
  if (!tail.ok()) return ReplyError(res, tail.status());
  std::string body = "{\"path\":";
  AppendJsonString(tail->path, &body);
  absl::StrAppend(&body, ",\"size\":", tail->size, ",\"offset\":", tail->offset,
                  ",\"text\":");
  AppendJsonString(tail->text, &body);
  body.push_back('}');
  ReplyJson(res, std::move(body));
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

void HttpServer::Importance(const Request& req, Response& res) {
  absl::StatusOr<Admitted> admitted = Admit(req, req.matches[1]);
  if (!admitted.ok()) return ReplyError(res, admitted.status());
  std::vector<v1::Trial> completed;
  v1::ListTrialsRequest request;
  request.set_study_name(admitted->study.name());
  request.set_page_size(kMaxPageSize);
  request.add_states(v1::Trial::COMPLETED);
  do {
    absl::StatusOr<v1::ListTrialsResponse> page =
        service_->ListTrials(request, admitted->caller);
    if (!page.ok()) return ReplyError(res, page.status());
    for (v1::Trial& trial : *page->mutable_trials()) {
      completed.push_back(std::move(trial));
    }
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  absl::StatusOr<std::string> body =
      ImportanceJson(admitted->study, completed, req.get_param_value("metric"));
  if (!body.ok()) return ReplyError(res, body.status());
  ReplyJson(res, *std::move(body));
}

void HttpServer::Changes(const Request& req, Response& res) {
  absl::StatusOr<Admitted> admitted = Admit(req, req.matches[1]);
  if (!admitted.ok()) return ReplyError(res, admitted.status());
  absl::StatusOr<int64_t> after = IntParam(req, "after", 0, INT64_MAX, 0);
  if (!after.ok()) return ReplyError(res, after.status());
  const std::string view = req.get_param_value("view");
  if (view != "" && view != "full" && view != "compact") {
    std::string quoted;
    AppendJsonString(view, &quoted);
    return ReplyError(res, absl::InvalidArgumentError(absl::StrCat(
                               "view: must be full or compact, got ", quoted)));
  }
  const int64_t max_limit =
      view == "compact" ? kMaxCompactPageSize : kMaxPageSize;
  absl::StatusOr<int64_t> limit =
      IntParam(req, "limit", 1, max_limit, kMaxPageSize);
  if (!limit.ok()) return ReplyError(res, limit.status());
  // One change past the page says whether more follow, so that a reader
  // that got everything asks no second time.
  absl::StatusOr<std::vector<storage::TrialChange>> changes =
      service_->ListTrialChanges(admitted->study.name(), *after,
                                 static_cast<int>(*limit) + 1,
                                 admitted->caller);
  if (!changes.ok()) return ReplyError(res, changes.status());
  const bool more = static_cast<int64_t>(changes->size()) > *limit;
  if (more) changes->pop_back();
  ReplyJson(
      res, view == "compact"
               ? CompactChangesPageJson(admitted->study, *changes, *after, more)
               : ChangesPageJson(*changes, *after, more));
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
  v1::WatchTrialsRequest request;
  request.set_study_name(admitted->study.name());
  request.set_after_sequence(*after);
  absl::StatusOr<StudyService::Watch> watch =
      service_->OpenWatch(request, admitted->caller);
  if (!watch.ok()) return ReplyError(res, watch.status());
  auto hold = std::make_unique<StreamLimits::Hold>(
      *streams_, admitted->caller.owner, "events");
  if (!hold->status().ok()) {
    // 503 with a retry, as for a server too busy to serve it now.
    return ReplyError(res, absl::UnavailableError(hold->status().message()));
  }
  res.status = 200;
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Accel-Buffering", "no");
  res.content_type = "text/event-stream";
  // Fed by events_ (event_streams.h) while the connection waits.
  res.events =
      events_->Open(*std::move(watch), admitted->caller, std::move(hold));
}

void HttpServer::StopTrial(const Request& req, Response& res) {
  absl::StatusOr<int64_t> id = TrialIdOf(req.matches[2]);
  if (!id.ok()) return ReplyError(res, id.status());
  auto admitted = AdmitWrite(req, req.matches[1], {"reason"});
  if (auto* refusal = std::get_if<Refusal>(&admitted)) {
    return ReplyError(res, refusal->status, refusal->http_status);
  }
  AdmittedWrite& write = std::get<AdmittedWrite>(admitted);
  v1::StopTrialRequest request;
  request.set_study_name(write.study.name());
  request.set_trial_id(*id);
  if (write.body.contains("reason")) {
    if (!write.body["reason"].is_string()) {
      return ReplyError(res,
                        absl::InvalidArgumentError("reason: must be a string"));
    }
    request.set_reason(write.body["reason"].get<std::string>());
  }
  absl::StatusOr<v1::Trial> trial = service_->StopTrial(request, write.caller);
  if (!trial.ok()) return ReplyError(res, trial.status());
  ReplyJson(res, ToJson(*trial));
}

void HttpServer::SetStudyState(const Request& req, Response& res) {
  auto admitted = AdmitWrite(req, req.matches[1], {"state"});
  if (auto* refusal = std::get_if<Refusal>(&admitted)) {
    return ReplyError(res, refusal->status, refusal->http_status);
  }
  AdmittedWrite& write = std::get<AdmittedWrite>(admitted);
  v1::Study::State state = v1::Study::STATE_UNSPECIFIED;
  if (!write.body.contains("state") || !write.body["state"].is_string() ||
      !v1::Study::State_Parse(write.body["state"].get<std::string>(), &state) ||
      state == v1::Study::STATE_UNSPECIFIED) {
    return ReplyError(res, absl::InvalidArgumentError(
                               "state: required, one of \"ACTIVE\" (resume), "
                               "\"PAUSED\" or \"COMPLETED\""));
  }
  v1::SetStudyStateRequest request;
  request.set_name(write.study.name());
  request.set_state(state);
  absl::StatusOr<v1::Study> study =
      service_->SetStudyState(request, write.caller);
  if (!study.ok()) return ReplyError(res, study.status());
  ReplyJson(res, ToJson(*study));
}

void HttpServer::SetMaxTrials(const Request& req, Response& res) {
  auto admitted = AdmitWrite(req, req.matches[1], {"max_trials"});
  if (auto* refusal = std::get_if<Refusal>(&admitted)) {
    return ReplyError(res, refusal->status, refusal->http_status);
  }
  AdmittedWrite& write = std::get<AdmittedWrite>(admitted);
  // A JSON integer, or a string of one (the mapping's spelling of int64).
  const nlohmann::json& field = write.body.contains("max_trials")
                                    ? write.body["max_trials"]
                                    : nlohmann::json();
  int64_t max_trials = -1;
  bool valid = false;
  if (field.is_number_unsigned() &&
      field.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    valid = false;
  } else if (field.is_number_integer()) {
    max_trials = field.get<int64_t>();
    valid = true;
  } else if (field.is_string()) {
    valid = absl::SimpleAtoi(field.get<std::string>(), &max_trials);
  }
  if (!valid) {
    return ReplyError(res, absl::InvalidArgumentError(
                               "max_trials: required, an integer (0 = "
                               "unlimited, else above the trials created)"));
  }
  absl::StatusOr<v1::Study> study =
      service_->SetMaxTrials(write.study.name(), max_trials, write.caller);
  if (!study.ok()) return ReplyError(res, study.status());
  ReplyJson(res, ToJson(*study));
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
  if (!options_.db_path.empty() &&
      !storage::IsServerLocation(options_.db_path)) {
    AppendGauge(
        "hypertune_database_size_bytes",
        "Size of the SQLite database file and its write-ahead log.", {"file"},
        {{{"db"}, static_cast<double>(FileSize(options_.db_path))},
         {{"wal"}, static_cast<double>(FileSize(options_.db_path + "-wal"))}},
        &body);
  }
  // Every per-study series, only for the caller's studies.
  if (metrics_ != nullptr) {
    metrics_->Render(
        &body, [&](const std::string& study) { return names.contains(study); });
  }
  res.status = 200;
  res.set_content(std::move(body), "text/plain; version=0.0.4");
}

// The dashboard: public files that hold no data (the page asks for the
// token and sends it with every API call).
void HttpServer::Page(const Request& req, Response& res) {
  Request index;
  index.path = "/index.html";
  index.headers = req.headers;
  AssetFile(index, res);
}

void HttpServer::AssetFile(const Request& req, Response& res) {
  const Asset* asset = FindAsset(req.path);
  if (asset == nullptr) {
    return ReplyError(
        res, absl::NotFoundError(absl::StrCat("no such file: ", req.path)));
  }
  // Revalidated on every load (no-cache), answered 304 while unchanged.
  res.set_header("Cache-Control", "no-cache");
  res.set_header("ETag", std::string(asset->etag));
  if (req.get_header_value("If-None-Match") == asset->etag) {
    res.status = 304;
    return;
  }
  res.status = 200;
  res.content_type = std::string(asset->content_type);
  res.static_body = asset->data;
  // The page's files may be compressed (the API's answers never are: on
  // the links dashboards use, compressing costs more than it saves).
  if (Compressible(asset->content_type)) {
    res.set_header("Vary", "Accept-Encoding");
    if (absl::StrContains(req.get_header_value("Accept-Encoding"), "gzip")) {
      std::string_view gzipped = Gzipped(*asset);
      if (!gzipped.empty()) {
        res.static_body = gzipped;
        res.set_header("Content-Encoding", "gzip");
      }
    }
  }
}

}  // namespace hypertune::service
