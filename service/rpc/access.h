// Who may read and change which study. A Principal is the caller as the
// service sees it, made by the Authorizer (auth.h) from the call's token;
// CheckAccess is the one rule every RPC and HTTP route applies, always to
// the study row it read inside the same lock as the work it then does, so
// that no study can change hands between the check and the call.
//
// The rule, with auth on (a token table):
//   - a study belongs to the owner of the token that created it: that
//     owner reads and writes it, other owners get PERMISSION_DENIED;
//   - a study without owner (created while auth was off) may be read by
//     everyone and changed only by an admin, who gives it an owner with
//     `hypertune study chown`;
//   - an admin (the third field `admin` of a token line) may read and change
//     every study.
// With auth off every caller may do everything.
//
// Thread-safe: plain values and a pure function.
#ifndef HYPERTUNE_SERVICE_RPC_ACCESS_H_
#define HYPERTUNE_SERVICE_RPC_ACCESS_H_

#include <string>

#include "absl/status/status.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::service {

struct Principal {
  // The owner the caller acts as; "" with auth off.
  std::string owner;
  // Whether ownership is enforced (auth on).
  bool checked = false;
  // An admin may act on every study.
  bool admin = false;

  // The caller of a server without auth: may do everything, owns nothing.
  static Principal AuthOff() { return Principal(); }
};

enum class Access { kRead, kWrite };

// OK if `caller` may `access` `study`; PERMISSION_DENIED naming the study
// otherwise.
absl::Status CheckAccess(const Principal& caller, const v1::Study& study,
                         Access access);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_ACCESS_H_
