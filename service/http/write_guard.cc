#include "service/http/write_guard.h"

#include <arpa/inet.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "service/http/http_message.h"

namespace hypertune::service {

bool IsLoopbackHost(absl::string_view host) {
  std::string name = absl::AsciiStrToLower(host);
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  if (name == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, name.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, name.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6);
  }
  return false;
}

std::string HostOfHostHeader(absl::string_view value) {
  value = absl::StripAsciiWhitespace(value);
  if (absl::StartsWith(value, "[")) {
    const size_t close = value.find(']');
    return std::string(
        close == absl::string_view::npos ? value : value.substr(0, close + 1));
  }
  const size_t colon = value.rfind(':');
  return std::string(colon == absl::string_view::npos ? value
                                                      : value.substr(0, colon));
}

absl::Status CheckWriteOrigin(const HttpRequest& req,
                              const WritePolicy& policy) {
  if (!policy.writes_enabled()) {
    return absl::PermissionDeniedError(
        "writes are off: hypertuned serves the HTTP API read-only unless it "
        "runs with --auth-token-file (writes then need the study owner's "
        "token) or with --http-allow-writes on a loopback address");
  }
  const std::string host = req.get_header_value("Host");
  if (req.has_header("Sec-Fetch-Site")) {
    const std::string site =
        absl::AsciiStrToLower(req.get_header_value("Sec-Fetch-Site"));
    if (site != "same-origin" && site != "none") {
      return absl::PermissionDeniedError(absl::StrCat(
          "cross-site request refused (Sec-Fetch-Site: ", site,
          "): writes come from this server's own page or from tools"));
    }
  }
  if (req.has_header("Origin")) {
    const std::string origin = req.get_header_value("Origin");
    const std::string expected =
        absl::StrCat(policy.https ? "https://" : "http://", host);
    if (host.empty() || !absl::EqualsIgnoreCase(origin, expected)) {
      return absl::PermissionDeniedError(
          absl::StrCat("cross-origin request refused: Origin \"", origin,
                       "\" is not this server (", expected, ")"));
    }
  }
  if (!policy.auth && !IsLoopbackHost(HostOfHostHeader(host))) {
    return absl::PermissionDeniedError(absl::StrCat(
        "writes without auth (--http-allow-writes) are served to loopback "
        "names only; Host was \"",
        host, "\""));
  }
  return absl::OkStatus();
}

bool HasJsonContentType(const HttpRequest& req) {
  std::string type = req.get_header_value("Content-Type");
  type = type.substr(0, type.find(';'));
  return absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(type),
                                "application/json");
}

absl::StatusOr<nlohmann::json> JsonObjectBody(
    const HttpRequest& req, const std::vector<std::string>& known) {
  // No body reads as {}: nothing to say but the action.
  if (absl::StripAsciiWhitespace(req.body).empty()) {
    return nlohmann::json::object();
  }
  nlohmann::json body = nlohmann::json::parse(req.body, nullptr,
                                              /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    return absl::InvalidArgumentError("body: not valid JSON");
  }
  if (!body.is_object()) {
    return absl::InvalidArgumentError("body: must be a JSON object");
  }
  for (const auto& [key, value] : body.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "body: unknown field \"", key, "\" (known: ",
          known.empty() ? "none" : absl::StrJoin(known, ", "), ")"));
    }
  }
  return body;
}

}  // namespace hypertune::service
