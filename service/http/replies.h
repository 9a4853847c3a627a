// What the HTTP routes share (http_server.h): reading query parameters,
// answering JSON and errors, and the text format of server-sent events.
//
// Thread-safe: pure functions of their arguments.
#ifndef HYPERTUNE_SERVICE_HTTP_REPLIES_H_
#define HYPERTUNE_SERVICE_HTTP_REPLIES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"
#include "service/http/http_message.h"
#include "storage/study_store.h"

namespace hypertune::service {

// The HTTP status for a canonical code: 400, 401, 403, 404, 409, 429, 503,
// 504, or 500 for the rest.
int HttpStatusOf(absl::StatusCode code);

// {"error": {"code": HTTP status, "status": "NOT_FOUND", "message": ...}}
std::string ErrorJson(const absl::Status& status);
std::string ErrorJson(const absl::Status& status, int http_status);

// Answers `status` as ErrorJson (with WWW-Authenticate on 401).
void ReplyError(HttpResponse& res, const absl::Status& status);
// The same with HTTP status `http_status` (405, 415: no canonical code maps
// to them) in the answer and its "code".
void ReplyError(HttpResponse& res, const absl::Status& status, int http_status);

// Answers 200 with the JSON `body`, not to be cached.
void ReplyJson(HttpResponse& res, std::string body);

// The value of query parameter `name` as an integer in [min, max], or
// `fallback` when absent; INVALID_ARGUMENT naming it otherwise.
absl::StatusOr<int64_t> IntParam(const HttpRequest& req, const char* name,
                                 int64_t min, int64_t max, int64_t fallback);

// The trial states named by the `state` parameters (each a comma-separated
// list of names, any case); empty: all. INVALID_ARGUMENT listing the known
// states for an unknown one.
absl::StatusOr<std::vector<v1::Trial::State>> StateParams(
    const HttpRequest& req);

// One page of a study's change feed: {"events": [{"sequence", "trial"}...],
// "last_sequence": the last one's (or `after` without events), "more":
// whether the page came back full, so more may follow}.
std::string ChangesPageJson(const std::vector<storage::TrialChange>& changes,
                            int64_t after, bool more);

// Appends one server-sent event: `id` is the sequence, the data the trial.
void AppendEvent(const v1::TrialEvent& event, std::string* out);

// The size of file `path` in bytes, 0 if it cannot be read.
int64_t FileSize(const std::string& path);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_HTTP_REPLIES_H_
