// EventStreams: the HTTP event streams (GET /api/studies/{name}/events,
// text/event-stream), served without a thread each. A stream's connection
// is suspended while it has nothing to send; one pump thread reads the
// change feed for the streams that have sent what they held, at once after
// a trial write (ChangeNotifier) and every second otherwise, and resumes
// their connections.
//
// Memory is bounded, not buffered for a slow reader: a stream is refilled
// only once it has sent what it held, with at most `stream_bytes` of events
// (one event always goes whole), and all streams together hold at most
// `total_bytes`. The change feed stays in the store, so a reader that takes
// its events slowly simply lags; one that holds unsent bytes for longer
// than `behind_after`, or holds them longest when another stream needs the
// room, has fallen behind: what it had not begun to send is dropped, and it
// gets one `event: behind` with the `id:` of the last event it got (an
// EventSource resumes from there) and is closed. A slow reader is never
// read for, so other owners' streams never wait on it.
//
// Thread-safe.
#ifndef HYPERTUNE_SERVICE_HTTP_EVENT_STREAMS_H_
#define HYPERTUNE_SERVICE_HTTP_EVENT_STREAMS_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "service/rpc/access.h"
#include "service/rpc/study_service.h"
#include "service/server/stream_limits.h"

struct MHD_Connection;

namespace hypertune::service {

struct EventStreamOptions {
  size_t stream_bytes = 1 << 20;
  size_t total_bytes = 32 << 20;
  absl::Duration behind_after = absl::Seconds(10);
  // A stream with nothing to send sends a comment line this often, which
  // is how a closed connection is noticed.
  absl::Duration keepalive = absl::Seconds(15);
};

class EventStreams;

class EventStream {
 public:
  // On the connection's thread (its answer's content reader): copies up to
  // `max` bytes into `out`. 0 when it has none now: the connection is then
  // suspended until it has. -1 at its end.
  ssize_t Read(char* out, size_t max);
  // The connection is done with the stream (its answer was freed).
  void Closed();

 private:
  friend class EventStreams;
  EventStream(EventStreams* owner, StudyService::Watch watch, Principal caller,
              std::unique_ptr<StreamLimits::Hold> hold)
      : owner_(owner),
        watch_(std::move(watch)),
        caller_(std::move(caller)),
        hold_(std::move(hold)) {}

  // Appends `text` (one event, or a comment when `sequence` is 0) and
  // wakes the connection. REQUIRES: mu_ held.
  void Append(const std::string& text, int64_t sequence)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops what has not begun to be sent, says where to resume, and ends.
  // Returns the bytes freed. REQUIRES: mu_ held.
  size_t FallBehind(absl::string_view why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the stream after what it holds (with `last` appended first).
  void End(const std::string& last) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t unsent() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return buffer_.size() - sent_;
  }
  void Wake() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  EventStreams* const owner_;
  // Read only by the pump.
  StudyService::Watch watch_;
  const Principal caller_;
  const std::unique_ptr<StreamLimits::Hold> hold_;
  // Changes read per store query: fewer once events turn out large.
  int read_limit_ = 64;
  uint64_t read_generation_ = ~uint64_t{0};
  absl::Time last_read_ = absl::InfinitePast();

  absl::Mutex mu_;
  MHD_Connection* connection_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Events not yet handed to the connection, from sent_ on; ends_, the end
  // of each event in buffer_ with its sequence.
  std::string buffer_ ABSL_GUARDED_BY(mu_);
  size_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::pair<size_t, int64_t>> ends_ ABSL_GUARDED_BY(mu_);
  // The last event handed to the connection whole, and where it ends in
  // buffer_.
  int64_t delivered_ ABSL_GUARDED_BY(mu_) = 0;
  size_t delivered_end_ ABSL_GUARDED_BY(mu_) = 0;
  // When buffer_ last went from empty to holding bytes, and when bytes
  // last went out.
  absl::Time holding_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Time last_write_ ABSL_GUARDED_BY(mu_) = absl::Now();
  bool suspended_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;  // ends once buffer_ is sent
  bool closed_ ABSL_GUARDED_BY(mu_) = false;  // the connection let go
};

class EventStreams {
 public:
  // REQUIRES: `service` outlives *this.
  EventStreams(StudyService* service, EventStreamOptions options);
  // Stop().
  ~EventStreams();

  // A stream of `watch` for `caller`, counted in the limits by `hold`,
  // starting with a `retry:` line. REQUIRES: Attach before it is read.
  std::shared_ptr<EventStream> Open(StudyService::Watch watch, Principal caller,
                                    std::unique_ptr<StreamLimits::Hold> hold);
  // The connection `stream` is the answer of.
  static void Attach(EventStream& stream, MHD_Connection* connection);
  // Ends every stream (after what each holds) and the pump. Idempotent.
  void Stop();

  // Bytes held unsent by all streams now.
  size_t held_bytes();

 private:
  friend class EventStream;
  void Pump();
  // Reads `stream`'s next changes into it if it has room. True if it did.
  bool Feed(EventStream& stream);
  // Takes `bytes` of the shared budget for `taker`, making others that
  // hold bytes fall behind if it must. False if there is no room even so.
  bool Reserve(size_t bytes, EventStream* taker);
  void Release(size_t bytes);
  // Counts `bytes` (a control line) whatever the budget.
  void Hold(size_t bytes);
  void Forget(EventStream* stream);

  StudyService* const service_;
  const EventStreamOptions options_;

  absl::Mutex mu_;
  std::vector<std::shared_ptr<EventStream>> streams_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // A stream sent all it held: the pump looks again at once.
  bool drained_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex budget_mu_ ABSL_ACQUIRED_AFTER(mu_);
  size_t held_ ABSL_GUARDED_BY(budget_mu_) = 0;
  std::thread pump_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_HTTP_EVENT_STREAMS_H_
