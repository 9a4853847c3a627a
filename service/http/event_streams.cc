#include "service/http/event_streams.h"

#include <microhttpd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/proto_json.h"
#include "service/http/replies.h"

namespace hypertune::service {
namespace {

// How often the pump looks at the streams, and reads an idle stream's
// study with no write seen (a deletion or an import ends or feeds it).
constexpr absl::Duration kPumpTick = absl::Milliseconds(20);
constexpr absl::Duration kRefresh = absl::Seconds(1);
// The most changes read per store query.
constexpr int kMaxReadLimit = 500;

}  // namespace

ssize_t EventStream::Read(char* out, size_t max) {
  bool drained = false;
  size_t n = 0;
  {
    absl::MutexLock lock(&mu_);
    if (unsent() == 0) {
      if (ending_ || closed_) return -1;
      // Nothing to send: wait, without a thread, until Wake.
      suspended_ = true;
      MHD_suspend_connection(connection_);
      return 0;
    }
    n = std::min(max, unsent());
    std::memcpy(out, buffer_.data() + sent_, n);
    sent_ += n;
    last_write_ = absl::Now();
    while (!ends_.empty() && ends_.front().first <= sent_) {
      if (ends_.front().second > 0) delivered_ = ends_.front().second;
      delivered_end_ = ends_.front().first;
      ends_.pop_front();
    }
    if (sent_ == buffer_.size()) {
      buffer_.clear();
      sent_ = 0;
      delivered_end_ = 0;
      holding_since_ = absl::InfiniteFuture();
      drained = !ending_;
    }
    owner_->Release(n);
  }
  if (drained) {
    absl::MutexLock lock(&owner_->mu_);
    owner_->drained_ = true;
  }
  return static_cast<ssize_t>(n);
}

void EventStream::Closed() {
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    connection_ = nullptr;
    owner_->Release(unsent());
    buffer_.clear();
    ends_.clear();
    sent_ = 0;
  }
  owner_->Forget(this);
}

void EventStream::Append(const std::string& text, int64_t sequence) {
  if (buffer_.empty()) holding_since_ = absl::Now();
  buffer_.append(text);
  ends_.emplace_back(buffer_.size(), sequence);
  Wake();
}

void EventStream::Wake() {
  if (suspended_ && connection_ != nullptr) {
    suspended_ = false;
    MHD_resume_connection(connection_);
  }
}

size_t EventStream::FallBehind(absl::string_view why) {
  // Keep the event being sent, if one is half out, so that the stream
  // stays well formed; drop the rest.
  size_t keep = sent_;
  int64_t cursor = delivered_;
  if (sent_ > delivered_end_ && !ends_.empty()) {
    keep = ends_.front().first;
    if (ends_.front().second > 0) cursor = ends_.front().second;
    ends_.resize(1);
  } else {
    ends_.clear();
  }
  const size_t freed = buffer_.size() - keep;
  buffer_.resize(keep);
  std::string data = "{\"after\":";
  AppendJsonString(absl::StrCat(cursor), &data);
  data.append(",\"message\":");
  AppendJsonString(absl::StrCat("this reader fell behind (", why,
                                "); reconnect with Last-Event-ID or ?after=",
                                cursor, " to resume"),
                   &data);
  data.push_back('}');
  End(absl::StrCat("event: behind\nid: ", cursor, "\ndata: ", data, "\n\n"));
  return freed;
}

void EventStream::End(const std::string& last) {
  if (ending_) return;
  if (!last.empty()) {
    owner_->Hold(last.size());
    Append(last, 0);
  }
  ending_ = true;
  Wake();
}

EventStreams::EventStreams(StudyService* service, EventStreamOptions options)
    : service_(service), options_(options) {
  pump_ = std::thread([this] { Pump(); });
}

EventStreams::~EventStreams() { Stop(); }

std::shared_ptr<EventStream> EventStreams::Open(
    StudyService::Watch watch, Principal caller,
    std::unique_ptr<StreamLimits::Hold> hold) {
  const int64_t after = watch.after;
  std::shared_ptr<EventStream> stream(new EventStream(
      this, std::move(watch), std::move(caller), std::move(hold)));
  absl::MutexLock lock(&mu_);
  {
    absl::MutexLock stream_lock(&stream->mu_);
    stream->delivered_ = after;
    const std::string retry = "retry: 2000\n\n";
    Hold(retry.size());
    stream->Append(retry, 0);
    // Too late to be fed: it ends after its first line.
    if (stopping_) stream->End("");
  }
  streams_.push_back(stream);
  return stream;
}

void EventStreams::Attach(EventStream& stream, MHD_Connection* connection) {
  absl::MutexLock lock(&stream.mu_);
  stream.connection_ = connection;
}

void EventStreams::Stop() {
  std::vector<std::shared_ptr<EventStream>> streams;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    streams = streams_;
  }
  // Each stream sends what it holds and ends, so that no connection stays
  // suspended.
  for (const std::shared_ptr<EventStream>& stream : streams) {
    absl::MutexLock lock(&stream->mu_);
    stream->End("");
  }
  if (pump_.joinable()) pump_.join();
}

size_t EventStreams::held_bytes() {
  absl::MutexLock lock(&budget_mu_);
  return held_;
}

void EventStreams::Hold(size_t bytes) {
  absl::MutexLock lock(&budget_mu_);
  held_ += bytes;
}

void EventStreams::Release(size_t bytes) {
  absl::MutexLock lock(&budget_mu_);
  held_ -= std::min(held_, bytes);
}

void EventStreams::Forget(EventStream* stream) {
  absl::MutexLock lock(&mu_);
  streams_.erase(
      std::remove_if(streams_.begin(), streams_.end(),
                     [stream](const auto& s) { return s.get() == stream; }),
      streams_.end());
}

bool EventStreams::Reserve(size_t bytes, EventStream* taker) {
  while (true) {
    {
      absl::MutexLock lock(&budget_mu_);
      if (held_ + bytes <= options_.total_bytes) {
        held_ += bytes;
        return true;
      }
    }
    // Make room: the stream that has held unsent bytes longest fell
    // behind, unless that is the taker itself.
    std::vector<std::shared_ptr<EventStream>> streams;
    {
      absl::MutexLock lock(&mu_);
      streams = streams_;
    }
    EventStream* oldest = nullptr;
    absl::Time since = absl::InfiniteFuture();
    for (const std::shared_ptr<EventStream>& stream : streams) {
      if (stream.get() == taker) continue;
      absl::MutexLock lock(&stream->mu_);
      if (stream->ending_ || stream->closed_) continue;
      if (stream->unsent() > 0 && stream->holding_since_ < since) {
        since = stream->holding_since_;
        oldest = stream.get();
      }
    }
    if (oldest == nullptr) return false;
    absl::MutexLock lock(&oldest->mu_);
    Release(
        oldest->FallBehind("the server's event streams hold all the "
                           "bytes they may"));
  }
}

bool EventStreams::Feed(EventStream& stream) {
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&stream.mu_);
    if (stream.ending_ || stream.closed_ || stream.connection_ == nullptr) {
      return false;
    }
    if (stream.unsent() > 0) {
      if (now - stream.holding_since_ > options_.behind_after) {
        Release(stream.FallBehind(absl::StrCat(
            "it took longer than ", absl::FormatDuration(options_.behind_after),
            " to take what the server held for it")));
      }
      return false;
    }
    if (now - stream.last_write_ >= options_.keepalive) {
      const std::string comment = ": keep-alive\n\n";
      Hold(comment.size());
      stream.Append(comment, 0);
      return false;
    }
  }
  const uint64_t seen = service_->changes().generation();
  if (seen == stream.read_generation_ && now - stream.last_read_ < kRefresh) {
    return false;
  }
  // A few changes at a time (as many as fit the stream's bytes, going by
  // the last ones), not a whole batch of trials of any size.
  absl::StatusOr<std::vector<storage::TrialChange>> changes =
      service_->ListTrialChanges(stream.watch_.study_name, stream.watch_.after,
                                 stream.read_limit_, stream.caller_);
  // The study watched, not one of the same name made since: checked after
  // the read, so changes read before a re-creation are never sent.
  absl::Status status = changes.status();
  if (status.ok()) {
    v1::GetStudyRequest request;
    request.set_name(stream.watch_.study_name);
    absl::StatusOr<v1::Study> study =
        service_->GetStudy(request, stream.caller_);
    if (!study.ok()) {
      status = study.status();
    } else if (study->create_time_ms() != stream.watch_.incarnation) {
      status = absl::NotFoundError(
          absl::StrCat("study \"", stream.watch_.study_name, "\" was deleted"));
    }
  }
  stream.last_read_ = now;
  if (!status.ok()) {
    absl::MutexLock lock(&stream.mu_);
    stream.End(absl::StrCat("event: error\ndata: ", ErrorJson(status), "\n\n"));
    return false;
  }
  const bool full = changes->size() >= static_cast<size_t>(stream.read_limit_);
  std::string text;
  std::vector<std::pair<size_t, int64_t>> ends;
  v1::TrialEvent event;
  for (storage::TrialChange& change : *changes) {
    event.set_sequence(change.sequence);
    *event.mutable_trial() = std::move(change.trial);
    AppendEvent(event, &text);
    ends.emplace_back(text.size(), change.sequence);
    if (text.size() >= options_.stream_bytes) break;
  }
  if (!ends.empty()) {
    const size_t average = std::max<size_t>(1, text.size() / ends.size());
    stream.read_limit_ = static_cast<int>(
        std::clamp<size_t>(options_.stream_bytes / average, 1, kMaxReadLimit));
  }
  // Read again at once while more may be waiting.
  stream.read_generation_ =
      full || ends.size() < changes->size() ? ~uint64_t{0} : seen;
  if (text.empty()) return false;
  if (!Reserve(text.size(), &stream)) {
    stream.read_generation_ = ~uint64_t{0};
    return false;
  }
  absl::MutexLock lock(&stream.mu_);
  if (stream.ending_ || stream.closed_) {
    Release(text.size());
    return false;
  }
  if (stream.buffer_.empty()) stream.holding_since_ = now;
  const size_t base = stream.buffer_.size();
  stream.buffer_.append(text);
  for (const auto& [end, sequence] : ends) {
    stream.ends_.emplace_back(base + end, sequence);
  }
  stream.watch_.after = ends.back().second;
  stream.Wake();
  return true;
}

void EventStreams::Pump() {
  while (true) {
    std::vector<std::shared_ptr<EventStream>> streams;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      streams = streams_;
    }
    for (const std::shared_ptr<EventStream>& stream : streams) Feed(*stream);
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](EventStreams* self) {
                               self->mu_.AssertReaderHeld();
                               return self->stopping_ || self->drained_;
                             },
                             this),
                         kPumpTick);
    drained_ = false;
  }
}

}  // namespace hypertune::service
