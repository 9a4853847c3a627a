// Prior studies (StudySpec.prior_studies): whose results a study may learn
// from. Access is checked once, by the caller that creates or imports the
// study, and the answer is bound to the priors' identity (create time) and
// owner; a prior is read only while it is still the study that was checked.
// So no later event (the prior deleted and another owner's study created
// under its name, the prior given to another owner) lets a study read
// results its creator could not.
//
// Thread-safe: pure functions over the store's rows.
#ifndef HYPERTUNE_SERVICE_RPC_PRIORS_H_
#define HYPERTUNE_SERVICE_RPC_PRIORS_H_

#include "absl/status/status.h"
#include "hypertune/v1/hypertune.pb.h"
#include "service/rpc/access.h"
#include "service/rpc/study_context.h"

namespace hypertune::service {

// Sets `study`'s prior_bindings to its spec.prior_studies as they are now,
// each of which `caller` must be allowed to read (PERMISSION_DENIED or
// NOT_FOUND naming study.spec.prior_studies[i] otherwise). Bindings the
// study came with (an import's) are replaced.
absl::Status BindPriors(StudyContext& context, const Principal& caller,
                        v1::Study& study);

// Whether `prior`, read now under the name of `study`'s spec.prior_studies
// [index], is the study bound then. A study stored before bindings existed
// reads a prior of its own owner's, or one without owner.
bool IsBoundPrior(const v1::Study& study, int index, const v1::Study& prior);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_PRIORS_H_
