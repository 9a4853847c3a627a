#include "service/rpc/access.h"

#include "absl/strings/str_cat.h"

namespace hypertune::service {

absl::Status CheckAccess(const Principal& caller, const v1::Study& study,
                         Access access) {
  if (!caller.checked || caller.admin || study.owner() == caller.owner) {
    return absl::OkStatus();
  }
  if (study.owner().empty()) {
    if (access == Access::kRead) return absl::OkStatus();
    return absl::PermissionDeniedError(absl::StrCat(
        "study \"", study.name(),
        "\" has no owner (it was created while auth was off): everyone may "
        "read it, only an admin may change it; an admin gives it an owner "
        "with `hypertune study chown`"));
  }
  return absl::PermissionDeniedError(
      absl::StrCat("study \"", study.name(), "\" belongs to another owner"));
}

}  // namespace hypertune::service
