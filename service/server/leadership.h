// Leadership: whether this hypertuned serves its database now. With SQLite
// (or in memory) it always does. On PostgreSQL several hypertuned may share
// the database and exactly one leads (storage::LeaderElection); the others
// are standbys: every call gets UNAVAILABLE with the message
//   "standby: the leader is at HOST:PORT"
// (clients given several servers follow it; trainer_sdk), and their health
// service says NOT_SERVING. A background loop tries for the lead every
// poll interval; on winning it runs `on_lead` (extend the leases, as after a
// restart, and start the lease sweeper) before serving. A leader that can
// no longer show it holds the lead stops serving at once and calls
// `on_lost` (hypertuned then exits: a fresh process comes back as a
// standby, with no state cached from before).
//
// Thread safety: Check and leading may be called from any thread.
#ifndef HYPERTUNE_SERVICE_SERVER_LEADERSHIP_H_
#define HYPERTUNE_SERVICE_SERVER_LEADERSHIP_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "storage/leader_election.h"

namespace hypertune::service {

class Leadership {
 public:
  struct Hooks {
    // Runs once this process wins the lead, before it serves; an error
    // gives the lead up (on_lost follows).
    std::function<absl::Status()> on_lead;
    // Serving status changed (true: leading), for the health service.
    std::function<void(bool)> on_change;
    // The lead was lost after it was held.
    std::function<void(const absl::Status&)> on_lost;
  };

  // `election` null: always leads (on_lead runs in Start). Until Start,
  // Check says the server is starting.
  Leadership(std::unique_ptr<storage::LeaderElection> election, Hooks hooks,
             std::chrono::milliseconds poll = std::chrono::milliseconds(250));
  // Stops the loop (the lead, if held, goes with the election's session).
  ~Leadership();

  // Tries for the lead once (so that a lone server leads before it says it
  // is listening), then keeps trying, or checking that it still leads, in
  // the background. `address`: what clients dial to reach this process.
  // Returns on_lead's error if the first try won and on_lead failed.
  absl::Status Start(const std::string& address);

  // OK while leading; else UNAVAILABLE naming the leader.
  absl::Status Check() const;
  bool leading() const { return leading_.load(); }

 private:
  // One round: try for the lead, or check that it is still held.
  void Step();
  void Loop();

  std::unique_ptr<storage::LeaderElection> election_;
  std::string address_;  // Set by Start.
  const Hooks hooks_;
  const std::chrono::milliseconds poll_;
  std::atomic<bool> leading_{false};
  // Once lost, never regained by this process (see the header comment).
  bool lost_ = false;
  mutable absl::Mutex mu_;
  std::string leader_address_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread loop_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_SERVER_LEADERSHIP_H_
