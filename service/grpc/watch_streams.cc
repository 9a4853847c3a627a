#include "service/grpc/watch_streams.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "service/grpc/grpc_service.h"

namespace hypertune::service {
namespace {

// The pause after a batch that did not fill (busy studies change
// constantly: batch them rather than read the store after every write);
// how often an idle stream is read with no write seen (a deletion or an
// import ends or feeds it); and how often the pump looks for due streams.
constexpr absl::Duration kWatchPause = absl::Milliseconds(200);
constexpr absl::Duration kWatchRefresh = absl::Seconds(1);
constexpr absl::Duration kPumpTick = absl::Milliseconds(20);

class Refusal final : public grpc::ServerWriteReactor<v1::TrialEvent> {
 public:
  explicit Refusal(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

class WatchStreams::Stream final
    : public grpc::ServerWriteReactor<v1::TrialEvent> {
 public:
  Stream(WatchStreams* owner, StudyService::Watch watch, Principal caller,
         std::unique_ptr<StreamLimits::Hold> hold)
      : owner_(owner),
        caller_(std::move(caller)),
        hold_(std::move(hold)),
        watch_(std::move(watch)) {}

  // On the pump's thread: reads the changes after the last one written and
  // starts writing them. True while they are being written.
  bool Poll(StudyService& service) ABSL_LOCKS_EXCLUDED(mu_) {
    StudyService::Watch watch;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return false;
      watch = watch_;
    }
    absl::StatusOr<StudyService::WatchBatch> batch =
        service.ReadWatch(watch, caller_);
    absl::MutexLock lock(&mu_);
    if (finished_) return false;
    if (!batch.ok()) {
      FinishOnce(ToGrpcStatus(batch.status()));
      return false;
    }
    if (batch->changes.empty()) return false;
    batch_full_ = batch->full;
    batch_ = std::move(batch->changes);
    next_ = 0;
    WriteNext();
    return true;
  }

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::Duration pause;
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {  // the watcher is gone
        FinishOnce(grpc::Status::OK);
        return;
      }
      watch_.after = event_.sequence();
      if (next_ < batch_.size()) {
        WriteNext();
        return;
      }
      // Freed, not kept for the next batch: an idle stream holds nothing.
      std::vector<storage::TrialChange>().swap(batch_);
      event_.Clear();
      pause = batch_full_ ? absl::ZeroDuration() : kWatchPause;
    }
    // OnDone, which deletes *this, waits for this reaction to return.
    owner_->Rearm(this, pause);
  }

  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    FinishOnce(grpc::Status::OK);
  }

  void OnDone() override {
    owner_->Forget(this);
    delete this;
  }

 private:
  void WriteNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    storage::TrialChange& change = batch_[next_++];
    event_.set_sequence(change.sequence);
    *event_.mutable_trial() = std::move(change.trial);
    StartWrite(&event_);
  }
  void FinishOnce(const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  WatchStreams* const owner_;
  const Principal caller_;
  const std::unique_ptr<StreamLimits::Hold> hold_;
  absl::Mutex mu_;
  StudyService::Watch watch_ ABSL_GUARDED_BY(mu_);  // after: the last written
  std::vector<storage::TrialChange> batch_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  bool batch_full_ ABSL_GUARDED_BY(mu_) = false;
  v1::TrialEvent event_ ABSL_GUARDED_BY(mu_);  // the write in flight
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

WatchStreams::WatchStreams(StudyService* service)
    : service_(service), pump_([this] { Pump(); }) {}

WatchStreams::~WatchStreams() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  pump_.join();
}

grpc::ServerWriteReactor<v1::TrialEvent>* WatchStreams::Open(
    const v1::WatchTrialsRequest& request, const Principal& caller,
    std::unique_ptr<StreamLimits::Hold> hold) {
  absl::StatusOr<StudyService::Watch> watch =
      service_->OpenWatch(request, caller);
  if (!watch.ok()) return Refuse(watch.status());
  Schedule schedule;
  schedule.owner = hold->owner();
  auto* stream = new Stream(this, *std::move(watch), caller, std::move(hold));
  absl::MutexLock lock(&mu_);
  streams_.emplace(stream, std::move(schedule));
  return stream;
}

grpc::ServerWriteReactor<v1::TrialEvent>* WatchStreams::Refuse(
    const absl::Status& status) {
  return new Refusal(status);
}

bool WatchStreams::Reserve(const std::string& owner) {
  size_t& mine = reserved_by_owner_[owner];
  if (reserved_ + kBatchBytes > kBytes || mine + kBatchBytes > kBytesPerOwner) {
    if (mine == 0) reserved_by_owner_.erase(owner);
    return false;
  }
  mine += kBatchBytes;
  reserved_ += kBatchBytes;
  return true;
}

void WatchStreams::Unreserve(const std::string& owner) {
  auto it = reserved_by_owner_.find(owner);
  if (it == reserved_by_owner_.end()) return;
  it->second -= kBatchBytes;
  if (it->second == 0) reserved_by_owner_.erase(it);
  reserved_ -= kBatchBytes;
}

void WatchStreams::Rearm(Stream* stream, absl::Duration pause) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(stream);
  if (it == streams_.end() || !it->second.writing) return;
  it->second.writing = false;
  Unreserve(it->second.owner);
  it->second.not_before = absl::Now() + pause;
}

void WatchStreams::Forget(Stream* stream) {
  absl::MutexLock lock(&mu_);
  auto idle = [this, stream]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = streams_.find(stream);
    return it == streams_.end() || !it->second.polling;
  };
  mu_.Await(absl::Condition(&idle));
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  if (it->second.writing) Unreserve(it->second.owner);
  streams_.erase(it);
}

void WatchStreams::Pump() {
  ChangeNotifier& changes = service_->changes();
  while (true) {
    // Read the generation before the store, so a write in between is seen
    // at the next round.
    const uint64_t generation = changes.generation();
    std::vector<Stream*> due;
    absl::Time wake = absl::Now() + kWatchRefresh;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      const absl::Time now = absl::Now();
      for (auto& [stream, schedule] : streams_) {
        if (schedule.writing) continue;
        const absl::Time next =
            schedule.read_generation != generation
                ? schedule.not_before
                : std::max(schedule.not_before,
                           schedule.last_read + kWatchRefresh);
        if (next <= now) {
          // Over its owner's (or the server's) bound: its turn comes when
          // a batch of the same owner is done (Rearm).
          if (!Reserve(schedule.owner)) continue;
          // Writing from here on: a batch Poll starts may be done (and
          // Rearm called) before Poll returns.
          schedule.polling = schedule.writing = true;
          due.push_back(stream);
        } else {
          wake = std::min(wake, next);
        }
      }
    }
    for (Stream* stream : due) {
      const bool writing = stream->Poll(*service_);
      absl::MutexLock lock(&mu_);
      Schedule& schedule = streams_.at(stream);  // Forget waits for polling
      schedule.polling = false;
      if (!writing && schedule.writing) {
        schedule.writing = false;
        Unreserve(schedule.owner);
      }
      schedule.read_generation = generation;
      schedule.last_read = absl::Now();
    }
    changes.WaitForChange(
        generation,
        std::clamp(wake - absl::Now(), absl::ZeroDuration(), kPumpTick));
  }
}

}  // namespace hypertune::service
