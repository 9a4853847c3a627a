// Helpers for the HTTP tests: an in-process hypertuned with --http and two
// token owners, a study written straight into its database (fast, and with
// any trial states and measurements), and a small HTTP client.
//
// Thread safety: a fixture is used by one test; Get may be called from any
// thread.
#ifndef HYPERTUNE_TESTING_HTTP_TEST_UTIL_H_
#define HYPERTUNE_TESTING_HTTP_TEST_UTIL_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.grpc.pb.h"
#include "service/server/server.h"
#include "testing/test_server.h"

namespace hypertune::test {

inline constexpr char kAliceToken[] = "alice-secret-token";
inline constexpr char kBobToken[] = "bob-secret-token";

struct HttpReply {
  int status = 0;  // 0: no answer (connection failed).
  std::string body;
  std::multimap<std::string, std::string> headers;
  std::string Header(const std::string& name) const;
};

// GET http://`address``path` with `Authorization: Bearer token` unless
// `token` is empty.
HttpReply HttpGet(const std::string& address, const std::string& path,
                  const std::string& token);

// POST http://`address``path` with `body` as `content_type` (no header
// when empty), `Authorization: Bearer token` unless `token` is empty, and
// `headers` besides (Origin, Host, Sec-Fetch-Site...).
HttpReply HttpPost(const std::string& address, const std::string& path,
                   const std::string& token, const std::string& body,
                   const std::string& content_type = "application/json",
                   const std::multimap<std::string, std::string>& headers = {});

// A study "NAME" owned by `owner`: parameters x (double), lr (log double),
// depth (integer), act (categorical: `categories`); metrics `objective`
// (minimized) and "acc". Quasi-random.
v1::Study MakeStudy(const std::string& name, const std::string& owner,
                    const std::vector<std::string>& categories = {"relu",
                                                                  "tanh"},
                    const std::string& objective = "loss");

// `count` trials of `study`, deterministic from `seed`: most COMPLETED with
// `measurements` intermediate reports each, every seventh STOPPED early,
// every eleventh ACTIVE, every thirteenth FAILED.
std::vector<v1::Trial> MakeTrials(const v1::Study& study, int count,
                                  int measurements, uint64_t seed);

// The studies the dashboard's browser test and benchmark show, written
// into `db_path` for `owner`:
//   `name`: MakeStudy with ASHA (rungs at steps 1, 3, 9 of 27), `trials`
//     MakeTrials with `measurements` each, and besides every 17th trial
//     INFEASIBLE ("out of memory"), trial 5's objective +infinity and
//     trial 6's NaN (where those trials are COMPLETED);
//   `name`-b: 60 trials of the same kind, to compare with;
//   "all-infeasible": 12 trials, every one INFEASIBLE.
// Returns the trials of `name` as written.
absl::StatusOr<std::vector<v1::Trial>> WriteDashboardStudies(
    const std::string& db_path, const std::string& name,
    const std::string& owner, int trials, int measurements);

// Writes `study` and `trials` into the SQLite file `db_path` (before a
// server opens it).
absl::Status WriteStudy(const std::string& db_path, const v1::Study& study,
                        const std::vector<v1::Trial>& trials);

// What an HTTP test may set beyond the database and tokens.
struct HttpServerExtras {
  // ServerOptions::http_allow_writes and log_root.
  bool allow_writes = false;
  std::string log_root;
  // The HTTP address; a free loopback port by default.
  std::string http_listen = "127.0.0.1:0";
};

// Starts a server on `db_path` with HTTP on a free port and the token table
// {alice, bob} (empty `token_file`: auth off).
absl::StatusOr<std::unique_ptr<service::Server>> StartHttpServer(
    const std::string& db_path, const std::string& token_file,
    const HttpServerExtras& extras = {});

// Writes the token table of alice and bob to `path`.
absl::Status WriteTokenFile(const std::string& path);

// A gRPC stub on `address`, and a context carrying `token`.
std::unique_ptr<v1::HyperTune::Stub> MakeStub(const std::string& address);
void Authorize(grpc::ClientContext* context, const std::string& token);

}  // namespace hypertune::test

#endif  // HYPERTUNE_TESTING_HTTP_TEST_UTIL_H_
