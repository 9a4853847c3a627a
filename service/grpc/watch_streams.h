// WatchStreams: the gRPC WatchTrials streams, served without a thread each.
// Each stream is a reactor (gRPC's callback API) that writes the changes it
// is handed; one pump thread reads the store for every idle stream, at once
// after a trial write (ChangeNotifier) and every second otherwise (a
// deletion, an import). So an idle watcher costs memory, not a thread, and
// a slow reader holds only its own unsent batch (StudyService::WatchBatch:
// at most about 1 MiB plus one trial), and resumes from its cursor when it
// reads again, never buffered for.
//
// The batches held unsent are bounded per owner and in all (kBytesPerOwner,
// kBytes): a stream whose batch would pass either waits for its turn, so
// one owner's slow readers delay only that owner's streams (until the
// server-wide bound, which takes kBytes / kBytesPerOwner such owners).
//
// Thread-safe.
#ifndef HYPERTUNE_SERVICE_GRPC_WATCH_STREAMS_H_
#define HYPERTUNE_SERVICE_GRPC_WATCH_STREAMS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/limits.h"
#include "grpcpp/support/server_callback.h"
#include "hypertune/v1/hypertune.pb.h"
#include "service/rpc/access.h"
#include "service/rpc/study_service.h"
#include "service/server/stream_limits.h"

namespace hypertune::service {

class WatchStreams {
 public:
  // What one batch may hold, reserved while it is written.
  static constexpr size_t kBatchBytes =
      StudyService::kWatchBatchBytes + kMaxTrialBytes;
  static constexpr size_t kBytesPerOwner = 32 * kBatchBytes;
  static constexpr size_t kBytes = 256 * kBatchBytes;

  // REQUIRES: `service` outlives *this.
  explicit WatchStreams(StudyService* service);
  // REQUIRES: every stream done (the gRPC server has shut down).
  ~WatchStreams();
  WatchStreams(const WatchStreams&) = delete;
  WatchStreams& operator=(const WatchStreams&) = delete;

  // The reactor of one WatchTrials call on `caller`'s behalf; `hold` keeps
  // it counted in the stream limits while it lives.
  grpc::ServerWriteReactor<v1::TrialEvent>* Open(
      const v1::WatchTrialsRequest& request, const Principal& caller,
      std::unique_ptr<StreamLimits::Hold> hold);
  // A reactor that only answers `status` (REQUIRES: not OK).
  static grpc::ServerWriteReactor<v1::TrialEvent>* Refuse(
      const absl::Status& status);

 private:
  class Stream;
  // When the pump reads a stream next (a new one: at once). Guarded by mu_.
  struct Schedule {
    std::string owner;     // whose budget its batches take
    bool polling = false;  // the pump is reading it now
    bool writing = false;  // it has changes in flight: not read meanwhile
    absl::Time not_before = absl::InfinitePast();  // the pause after a batch
    absl::Time last_read = absl::InfinitePast();
    // The writes it has seen; at first a generation no write has.
    uint64_t read_generation = ~uint64_t{0};
  };

  void Pump();
  // From the stream's threads: its writes are done; read it again (after
  // `pause`), or forget it (it is done and about to be deleted).
  void Rearm(Stream* stream, absl::Duration pause) ABSL_LOCKS_EXCLUDED(mu_);
  void Forget(Stream* stream) ABSL_LOCKS_EXCLUDED(mu_);

  // Reserves a batch's bytes for `owner`, or false if either bound would
  // be passed; Unreserve gives them back.
  bool Reserve(const std::string& owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Unreserve(const std::string& owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  StudyService* const service_;
  absl::Mutex mu_;
  absl::flat_hash_map<Stream*, Schedule> streams_ ABSL_GUARDED_BY(mu_);
  size_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, size_t> reserved_by_owner_
      ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread pump_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_GRPC_WATCH_STREAMS_H_
