// LeaseSweeper: a background thread that expires run-out trial leases every
// `interval`, so a trial whose worker vanished goes back to REQUESTED (or
// FAILED) even when nobody asks for suggestions.
//
// Thread-safe; stops and joins on destruction.
#ifndef HYPERTUNE_SERVICE_SERVER_LEASE_SWEEPER_H_
#define HYPERTUNE_SERVICE_SERVER_LEASE_SWEEPER_H_

#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "service/rpc/study_service.h"

namespace hypertune::service {

class LeaseSweeper {
 public:
  // REQUIRES: `service` outlives *this.
  LeaseSweeper(StudyService* service, absl::Duration interval);
  ~LeaseSweeper();

  LeaseSweeper(const LeaseSweeper&) = delete;
  LeaseSweeper& operator=(const LeaseSweeper&) = delete;

 private:
  void Run();

  StudyService* const service_;
  const absl::Duration interval_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_SERVER_LEASE_SWEEPER_H_
