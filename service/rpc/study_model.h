// StudyModel: a study's algorithm as hypertuned keeps it between
// suggestions: the suggester (and the model it fitted), the prior studies'
// trials it transfers from, and the stop flag of its background fits.
//
// Not thread-safe, on purpose: a study's SuggestQueue owns its model and
// hands it only to the leader's serve callback, one leader at a time, so
// that whoever holds a StudyModel& may touch it (suggest_queue.h).
#ifndef HYPERTUNE_SERVICE_RPC_STUDY_MODEL_H_
#define HYPERTUNE_SERVICE_RPC_STUDY_MODEL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "optimizer/suggester.h"
#include "service/server/background_pool.h"

namespace hypertune::service {

struct StudyModel {
  // Null until the first suggestion needs it.
  std::unique_ptr<optimizer::Suggester> suggester;
  // The study incarnation the suggester was made for (a study deleted and
  // created again under the same name gets a new one).
  int64_t study_created_ms = 0;
  // The completed trials of the study's prior_studies (transfer), as read
  // when the suggester was made; studies deleted since then are kept.
  std::vector<optimizer::PriorStudy> priors;
  // Raised when the model is discarded: its background fits stop
  // (background_pool.h).
  StopFlag stop = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_STUDY_MODEL_H_
