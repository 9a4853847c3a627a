#include "storage/leader_election.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "storage/postgres/connection.h"
#include "storage/postgres/url.h"

namespace hypertune::storage {
namespace {

// The advisory lock's key: "hyprtune" in ASCII, so that other users of the
// database's advisory locks are unlikely to collide with it.
constexpr int64_t kLockKey = 0x6879707274756e65;
constexpr int kConnectTimeoutSeconds = 5;

constexpr char kCreateTable[] =
    "CREATE TABLE IF NOT EXISTS hypertune_leader("
    "id INT PRIMARY KEY, address BYTEA NOT NULL, since_ms INT8 NOT NULL)";
constexpr char kTryLock[] =
    "SELECT CASE WHEN pg_try_advisory_lock($1) THEN 1 ELSE 0 END::INT8";
constexpr char kRecord[] =
    "INSERT INTO hypertune_leader(id, address, since_ms) VALUES (1, $1, $2) "
    "ON CONFLICT (id) DO UPDATE SET address = EXCLUDED.address, "
    "since_ms = EXCLUDED.since_ms";
constexpr char kRead[] = "SELECT address FROM hypertune_leader WHERE id = 1";
constexpr char kPing[] = "SELECT 1::INT8";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LeaderElection>> LeaderElection::ForLocation(
    const std::string& location) {
  if (!postgres::IsPostgresUrl(location)) return nullptr;
  std::unique_ptr<LeaderElection> election(new LeaderElection(
      postgres::LowerCaseScheme(location), postgres::RedactUrl(location)));
  absl::StatusOr<postgres::Connection*> connection = election->Connect();
  if (!connection.ok()) return connection.status();
  return election;
}

LeaderElection::LeaderElection(std::string url, std::string shown_url)
    : url_(std::move(url)), shown_url_(std::move(shown_url)) {}

LeaderElection::~LeaderElection() = default;

absl::StatusOr<postgres::Connection*> LeaderElection::Connect() {
  if (connection_ != nullptr && connection_->Reusable()) {
    return connection_.get();
  }
  // A broken session has lost its lock with it.
  connection_.reset();
  absl::StatusOr<std::unique_ptr<postgres::Connection>> opened =
      postgres::Connection::Open(url_, shown_url_, kConnectTimeoutSeconds);
  if (!opened.ok()) return opened.status();
  absl::StatusOr<std::string> created =
      (*opened)->Execute(kCreateTable, "creating the leader table");
  if (!created.ok()) return created.status();
  connection_ = *std::move(opened);
  return connection_.get();
}

absl::StatusOr<bool> LeaderElection::TryLead(const std::string& address) {
  absl::StatusOr<postgres::Connection*> connection = Connect();
  if (!connection.ok()) return connection.status();
  absl::StatusOr<postgres::Result> locked =
      (*connection)
          ->Run(kTryLock, postgres::Params().Int(kLockKey),
                "trying for the leader's lock");
  if (!locked.ok()) return locked.status();
  if (locked->Int(0, 0) != 1) return false;
  absl::StatusOr<postgres::Result> recorded =
      (*connection)
          ->Run(kRecord, postgres::Params().Bytes(address).Int(NowMs()),
                "recording the leader's address");
  if (!recorded.ok()) {
    // Leading without saying where would strand the standbys' clients.
    connection_.reset();
    return recorded.status();
  }
  return true;
}

absl::StatusOr<std::string> LeaderElection::LeaderAddress() {
  absl::StatusOr<postgres::Connection*> connection = Connect();
  if (!connection.ok()) return connection.status();
  absl::StatusOr<postgres::Result> row =
      (*connection)->Run(kRead, postgres::Params(), "reading the leader");
  if (!row.ok()) return row.status();
  if (row->rows() == 0) return std::string();
  return std::string(row->Bytes(0, 0));
}

absl::Status LeaderElection::CheckHeld() {
  if (connection_ == nullptr || !connection_->Reusable()) {
    return absl::UnavailableError(absl::StrCat(
        "lost the connection that holds the lead of ", shown_url_));
  }
  absl::StatusOr<postgres::Result> ping =
      connection_->Run(kPing, postgres::Params(), "checking the lead");
  if (!ping.ok()) {
    connection_.reset();
    return absl::UnavailableError(absl::StrCat("may have lost the lead of ",
                                               shown_url_, ": ",
                                               ping.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace hypertune::storage
