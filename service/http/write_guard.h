// What stands between a web page and the HTTP API's writes (POST: stop a
// trial, pause or resume a study, raise its budget).
//
// Writes are served only when the server runs with auth (the owner's token,
// checked as gRPC checks it) or with --http-allow-writes on a loopback
// address. A write must be a POST with a JSON body
// (`Content-Type: application/json`) and, with auth, `Authorization:
// Bearer TOKEN`; cookies are never read. A browser adds neither a JSON
// content type nor an Authorization header to a cross-origin request
// without a CORS preflight, which this server never grants; on top of that,
// a request whose `Origin` is not this server or whose `Sec-Fetch-Site`
// says it came from another site is refused. Without auth, the Host header
// must name the loopback too, so that a page whose domain was rebound to
// 127.0.0.1 (DNS rebinding) gets nowhere.
//
// Pure functions of their arguments; thread-safe.
#ifndef HYPERTUNE_SERVICE_HTTP_WRITE_GUARD_H_
#define HYPERTUNE_SERVICE_HTTP_WRITE_GUARD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "service/http/http_message.h"

namespace hypertune::service {

struct WritePolicy {
  // The server has a token table: writes need the owner's token.
  bool auth = false;
  // --http-allow-writes (on a loopback address): writes without auth.
  bool allow_without_auth = false;
  // The page is served over HTTPS (for the Origin to compare with).
  bool https = false;

  bool writes_enabled() const { return auth || allow_without_auth; }
};

// Whether `host` (a HOST of HOST:PORT, an IPv6 address bracketed or not)
// names the loopback: localhost, 127.0.0.0/8 or ::1.
bool IsLoopbackHost(absl::string_view host);

// The host of a Host header value ("[::1]:8080" -> "[::1]",
// "localhost:80" -> "localhost").
std::string HostOfHostHeader(absl::string_view value);

// OK if `req` may ask for a write under `policy`, before its token and body
// are looked at: PERMISSION_DENIED saying why when writes are off, the
// Origin is another one, Sec-Fetch-Site is neither same-origin nor none, or
// (writes without auth) the Host is not the loopback.
absl::Status CheckWriteOrigin(const HttpRequest& req,
                              const WritePolicy& policy);

// Whether the request's Content-Type is application/json (parameters such
// as charset allowed).
bool HasJsonContentType(const HttpRequest& req);

// The request's body as a JSON object with no keys but `known` (an empty
// body is {});
// INVALID_ARGUMENT naming what is wrong otherwise (not JSON, not an object,
// an unknown key).
absl::StatusOr<nlohmann::json> JsonObjectBody(
    const HttpRequest& req, const std::vector<std::string>& known);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_HTTP_WRITE_GUARD_H_
