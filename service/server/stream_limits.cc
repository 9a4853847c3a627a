#include "service/server/stream_limits.h"

#include "absl/strings/str_cat.h"

namespace hypertune::service {

absl::Status StreamLimits::Acquire(const std::string& owner,
                                   const std::string& what) {
  absl::MutexLock lock(&mu_);
  if (open_ >= total_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": ", total_, " ", kind_,
        " are open, the most this server serves; try again later"));
  }
  int& mine = by_owner_[owner];
  if (mine >= per_owner_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": ", per_owner_, " ", kind_,
        " of this owner are open, the most one owner may hold; close one or "
        "try again later"));
  }
  ++mine;
  ++open_;
  return absl::OkStatus();
}

void StreamLimits::Release(const std::string& owner) {
  absl::MutexLock lock(&mu_);
  if (--by_owner_[owner] == 0) by_owner_.erase(owner);
  --open_;
}

}  // namespace hypertune::service
