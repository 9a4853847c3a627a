// LeaderElection: which of several hypertuned processes sharing one
// PostgreSQL database serves it. The leader holds a session-level advisory
// lock on a connection of its own (the server releases it when that session
// ends: the process died or lost the network) and records the address its
// clients should use; the others wait as standbys, read that address to
// send their clients on, and try for the lock again.
//
// A SQLite file has one server by construction (its exclusive lock), so
// only server databases have an election: see ForLocation.
//
// Thread safety: one thread at a time (the service's leadership loop).
#ifndef HYPERTUNE_STORAGE_LEADER_ELECTION_H_
#define HYPERTUNE_STORAGE_LEADER_ELECTION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hypertune::storage {

namespace postgres {
class Connection;
}  // namespace postgres

class LeaderElection {
 public:
  // The election of the database at `location` (a --db value): null for a
  // SQLite file or an in-memory store (the only server always leads);
  // UNAVAILABLE if a PostgreSQL server cannot be reached.
  static absl::StatusOr<std::unique_ptr<LeaderElection>> ForLocation(
      const std::string& location);

  ~LeaderElection();
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  // Tries once to take the lead. True: this process leads from now on, and
  // `address` is recorded as the leader's. False: another process leads.
  // A lost connection is reopened on the next call.
  absl::StatusOr<bool> TryLead(const std::string& address);

  // The address the current leader recorded ("" if none ever did).
  absl::StatusOr<std::string> LeaderAddress();

  // OK while this process still holds the lead (its session answers);
  // UNAVAILABLE once it may have lost it. REQUIRES: TryLead returned true.
  absl::Status CheckHeld();

 private:
  LeaderElection(std::string url, std::string shown_url);
  // The election's own connection, opened if need be.
  absl::StatusOr<postgres::Connection*> Connect();

  const std::string url_;
  const std::string shown_url_;
  std::unique_ptr<postgres::Connection> connection_;
};

}  // namespace hypertune::storage

#endif  // HYPERTUNE_STORAGE_LEADER_ELECTION_H_
