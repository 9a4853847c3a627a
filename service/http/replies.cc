#include "service/http/replies.h"

#include <sys/stat.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/proto_json.h"
#include "service/http/http_message.h"

namespace hypertune::service {
namespace {

std::string JsonString(absl::string_view text) {
  std::string out;
  AppendJsonString(text, &out);
  return out;
}

}  // namespace

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
  return ErrorJson(status, HttpStatusOf(status.code()));
}

std::string ErrorJson(const absl::Status& status, int http_status) {
  return absl::StrCat("{\"error\":{\"code\":", http_status, ",\"status\":",
                      JsonString(absl::StatusCodeToString(status.code())),
                      ",\"message\":", JsonString(status.message()), "}}");
}

std::string ChangesPageJson(const std::vector<storage::TrialChange>& changes,
                            int64_t after, bool more) {
  std::string body = "{\"events\":[";
  int64_t last = after;
  v1::TrialEvent event;
  for (size_t i = 0; i < changes.size(); ++i) {
    if (i > 0) body.push_back(',');
    event.set_sequence(changes[i].sequence);
    *event.mutable_trial() = changes[i].trial;
    AppendJson(event, &body);
    last = changes[i].sequence;
  }
  absl::StrAppend(&body, "],\"last_sequence\":");
  AppendJsonString(absl::StrCat(last), &body);
  absl::StrAppend(&body, ",\"more\":", more ? "true" : "false", "}");
  return body;
}

void ReplyError(HttpResponse& res, const absl::Status& status) {
  ReplyError(res, status, HttpStatusOf(status.code()));
}

void ReplyError(HttpResponse& res, const absl::Status& status,
                int http_status) {
  res.status = http_status;
  if (res.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(ErrorJson(status, http_status), "application/json");
}

void ReplyJson(HttpResponse& res, std::string body) {
  res.status = 200;
  res.set_header("Cache-Control", "no-store");
  res.set_content(std::move(body), "application/json");
}

absl::StatusOr<int64_t> IntParam(const HttpRequest& req, const char* name,
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

absl::StatusOr<std::vector<v1::Trial::State>> StateParams(
    const HttpRequest& req) {
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

void AppendEvent(const v1::TrialEvent& event, std::string* out) {
  absl::StrAppend(out, "id: ", event.sequence(), "\nevent: trial\ndata: ");
  AppendJson(event.trial(), out);
  out->append("\n\n");
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_size);
}

}  // namespace hypertune::service
