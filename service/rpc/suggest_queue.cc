#include "service/rpc/suggest_queue.h"

#include <utility>

namespace hypertune::service {

absl::StatusOr<v1::SuggestTrialsResponse> SuggestQueue::Submit(
    const v1::SuggestTrialsRequest& request, const Principal& caller,
    ServeFn serve) {
  Ticket ticket;
  ticket.request = &request;
  ticket.caller = &caller;
  return Run(ticket, serve);
}

absl::StatusOr<v1::SuggestTrialsResponse> SuggestQueue::SubmitPartial(
    const v1::Trial& given, const Principal& caller, ServeFn serve) {
  Ticket ticket;
  ticket.partial = &given;
  ticket.caller = &caller;
  return Run(ticket, serve);
}

void SuggestQueue::DiscardModel() {
  absl::MutexLock lock(&mu_);
  discard_model_ = true;
  if (model_stop_ != nullptr) *model_stop_ = true;
}

absl::StatusOr<v1::SuggestTrialsResponse> SuggestQueue::Run(Ticket& ticket,
                                                            ServeFn serve) {
  absl::MutexLock lock(&mu_);
  queued_.push_back(&ticket);
  while (!ticket.done) {
    if (serving_) {
      served_.Wait(&mu_);
      continue;
    }
    // Lead: serve everything queued so far (this ticket included, unless a
    // previous leader already did).
    serving_ = true;
    std::vector<Ticket*> batch;
    batch.swap(queued_);
    if (std::exchange(discard_model_, false)) {
      *model_.stop = true;
      model_ = StudyModel();
    }
    mu_.Unlock();
    serve(batch, model_);
    mu_.Lock();
    // The leader may have made a new model (and stop flag).
    model_stop_ = model_.stop;
    if (discard_model_) *model_stop_ = true;
    for (Ticket* t : batch) t->done = true;
    serving_ = false;
    served_.SignalAll();
  }
  return std::move(ticket.result);
}

}  // namespace hypertune::service
