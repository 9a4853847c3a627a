#include "service/server/leadership.h"

#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace hypertune::service {

Leadership::Leadership(std::unique_ptr<storage::LeaderElection> election,
                       Hooks hooks, std::chrono::milliseconds poll)
    : election_(std::move(election)), hooks_(std::move(hooks)), poll_(poll) {}

Leadership::~Leadership() {
  stop_.Notify();
  if (loop_.joinable()) loop_.join();
}

absl::Status Leadership::Start(const std::string& address) {
  address_ = address;
  if (election_ == nullptr) {
    if (hooks_.on_lead) {
      if (absl::Status s = hooks_.on_lead(); !s.ok()) return s;
    }
    leading_.store(true);
    if (hooks_.on_change) hooks_.on_change(true);
    return absl::OkStatus();
  }
  Step();
  if (lost_) {
    return absl::UnavailableError(
        "won the lead of the database but could not take over");
  }
  if (!leading_.load() && hooks_.on_change) hooks_.on_change(false);
  loop_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

absl::Status Leadership::Check() const {
  if (leading_.load()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return absl::UnavailableError(
      leader_address_.empty()
          ? std::string("starting, or standby with no leader yet; try "
                        "again shortly")
          : absl::StrCat("standby: the leader is at ", leader_address_));
}

void Leadership::Step() {
  if (lost_) return;
  if (leading_.load()) {
    absl::Status held = election_->CheckHeld();
    if (held.ok()) return;
    leading_.store(false);
    lost_ = true;
    if (hooks_.on_change) hooks_.on_change(false);
    if (hooks_.on_lost) hooks_.on_lost(held);
    return;
  }
  absl::StatusOr<bool> won = election_->TryLead(address_);
  if (won.ok() && *won) {
    {
      absl::MutexLock lock(&mu_);
      leader_address_ = address_;
    }
    absl::Status taken = hooks_.on_lead ? hooks_.on_lead() : absl::OkStatus();
    if (!taken.ok()) {
      lost_ = true;
      if (hooks_.on_lost) hooks_.on_lost(taken);
      return;
    }
    leading_.store(true);
    if (hooks_.on_change) hooks_.on_change(true);
    return;
  }
  if (!won.ok()) {
    std::cerr << "hypertuned: standby: " << won.status().message() << "\n";
  }
  absl::StatusOr<std::string> leader = election_->LeaderAddress();
  if (leader.ok()) {
    absl::MutexLock lock(&mu_);
    leader_address_ = *leader;
  }
}

void Leadership::Loop() {
  while (!stop_.WaitForNotificationWithTimeout(absl::FromChrono(poll_))) {
    Step();
    if (lost_) return;
  }
}

}  // namespace hypertune::service
