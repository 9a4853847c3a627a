#include "service/rpc/priors.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace hypertune::service {

absl::Status BindPriors(StudyContext& context, const Principal& caller,
                        v1::Study& study) {
  study.clear_prior_bindings();
  for (int i = 0; i < study.spec().prior_studies_size(); ++i) {
    const std::string& name = study.spec().prior_studies(i);
    absl::StatusOr<v1::Study> prior =
        context.LoadStudyFor(caller, name, Access::kRead);
    if (!prior.ok()) {
      return absl::Status(prior.status().code(),
                          absl::StrCat("study.spec.prior_studies[", i,
                                       "]: ", prior.status().message()));
    }
    v1::PriorStudyBinding& binding = *study.add_prior_bindings();
    binding.set_name(name);
    binding.set_create_time_ms(prior->create_time_ms());
    binding.set_owner(prior->owner());
  }
  return absl::OkStatus();
}

bool IsBoundPrior(const v1::Study& study, int index, const v1::Study& prior) {
  if (study.prior_bindings_size() == 0) {
    return prior.owner().empty() || prior.owner() == study.owner();
  }
  if (index >= study.prior_bindings_size()) return false;
  const v1::PriorStudyBinding& bound = study.prior_bindings(index);
  return bound.name() == prior.name() &&
         bound.create_time_ms() == prior.create_time_ms() &&
         bound.owner() == prior.owner();
}

}  // namespace hypertune::service
