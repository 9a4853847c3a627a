// SuggestQueue: coalesces concurrent SuggestTrials calls on one study, and
// the partial trials (CreateTrialRequest.partial) whose other parameters the
// study's algorithm chooses. The first caller to find no batch in progress
// becomes the leader and serves everything queued in one go (one model fit
// for the whole batch); the others wait for their own result. The queue owns
// the study's model and hands it to the leader's `serve` alone, so a study
// fits one model at a time however many callers ask, and only the code
// given the StudyModel& can touch it.
//
// Thread-safe.
#ifndef HYPERTUNE_SERVICE_RPC_SUGGEST_QUEUE_H_
#define HYPERTUNE_SERVICE_RPC_SUGGEST_QUEUE_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "hypertune/v1/hypertune.pb.h"
#include "service/rpc/access.h"
#include "service/rpc/study_model.h"

namespace hypertune::service {

class SuggestQueue {
 public:
  struct Ticket {
    // A SuggestTrials call, or null for a partial trial to complete.
    const v1::SuggestTrialsRequest* request = nullptr;
    // The partial trial to queue (request null): its given parameters and
    // attributes.
    const v1::Trial* partial = nullptr;
    const Principal* caller = nullptr;
    // A partial trial's: the trial as stored, holding every parameter.
    absl::StatusOr<v1::SuggestTrialsResponse> result =
        absl::UnknownError("not served");
    bool done = false;  // Guarded by the queue's mutex.
  };
  using ServeFn = absl::FunctionRef<void(const std::vector<Ticket*>& batch,
                                         StudyModel& model)>;

  // Queues `request` of `caller` and returns its result once a leader
  // (perhaps this caller) has served it. `serve` must set every ticket's
  // result.
  absl::StatusOr<v1::SuggestTrialsResponse> Submit(
      const v1::SuggestTrialsRequest& request, const Principal& caller,
      ServeFn serve);
  // Queues partial trial `given` of `caller` in the same way.
  absl::StatusOr<v1::SuggestTrialsResponse> SubmitPartial(
      const v1::Trial& given, const Principal& caller, ServeFn serve);
  // The study was deleted or its search space changed: the current model's
  // background fits stop, and the next leader starts from an empty model.
  void DiscardModel();

 private:
  absl::StatusOr<v1::SuggestTrialsResponse> Run(Ticket& ticket, ServeFn serve);

  absl::Mutex mu_;
  absl::CondVar served_;
  std::vector<Ticket*> queued_ ABSL_GUARDED_BY(mu_);
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  // Touched by the leader alone (while serving_), and by Run between two
  // leaders.
  StudyModel model_;
  bool discard_model_ ABSL_GUARDED_BY(mu_) = false;
  // model_.stop as of the last serve, for DiscardModel to raise.
  StopFlag model_stop_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_SUGGEST_QUEUE_H_
