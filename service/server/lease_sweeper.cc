#include "service/server/lease_sweeper.h"

#include <iostream>

namespace hypertune::service {

LeaseSweeper::LeaseSweeper(StudyService* service, absl::Duration interval)
    : service_(service), interval_(interval), thread_([this] { Run(); }) {}

LeaseSweeper::~LeaseSweeper() {
  stop_.Notify();
  thread_.join();
}

void LeaseSweeper::Run() {
  while (!stop_.WaitForNotificationWithTimeout(interval_)) {
    // A failed sweep (e.g. the disk is full) is retried at the next tick.
    if (absl::Status s = service_->ExpireLeases(); !s.ok()) {
      std::cerr << "hypertuned: lease sweep failed: " << s << std::endl;
    }
  }
}

}  // namespace hypertune::service
