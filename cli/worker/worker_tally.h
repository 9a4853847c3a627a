// The progress of one `hypertune worker` run: where each trial it took
// stands (running, completed, infeasible, failed, paused, given back...),
// the best value of the single objective so far, and whether the study said
// it is completed. The status line and the final summary are its text.
//
// Each trial is counted once, in the bucket of its latest outcome: a trial
// given back and run again, or paused at a rung and promoted, moves between
// buckets instead of being counted twice, so that the buckets always add up
// to the trials shown.
//
// Thread safety: thread-safe; the slots count into one tally.
#ifndef HYPERTUNE_CLI_WORKER_WORKER_TALLY_H_
#define HYPERTUNE_CLI_WORKER_WORKER_TALLY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/study_metrics.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::cli {

class WorkerTally {
 public:
  // Trials by where they stand; total() is their sum.
  struct Counts {
    int running = 0;
    // Its program ended; held while the early-failures watch decides.
    int held = 0;
    // COMPLETED or STOPPED.
    int completed = 0;
    int infeasible = 0;
    // FAILED: the program's fault, not the parameters'.
    int failed = 0;
    // Paused at an ASHA rung: ran well, to be resumed when promoted.
    int paused = 0;
    // Given back, left to their leases, or settled by someone else.
    int other = 0;

    int total() const {
      return running + held + completed + infeasible + failed + paused + other;
    }
  };

  // `budget`: the trials the worker means to run, shown as "3/30 trials";
  // 0 when unknown. `objective`: the study's single objective, whose best
  // value is kept; nullopt with several (no best).
  WorkerTally(std::string study, int64_t budget,
              std::optional<StudyMetrics::Objective> objective);

  // Trial `id`'s program started (ended, its trial not settled yet).
  void ProgramStarted(int64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  void ProgramEnded(int64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  // Counts `trial` by the state it was left in: COMPLETED or STOPPED (its
  // objective, if feasible, may be the new best), INFEASIBLE, FAILED,
  // PAUSED, or other (given back to the queue).
  void CountSettled(const v1::Trial& trial) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts trial `id`, which ended neither way: given back, left to its
  // lease, or settled by someone else.
  void CountOther(int64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  // The server said the study is completed (its budget is spent).
  void SetStudyCompleted() ABSL_LOCKS_EXCLUDED(mu_);
  bool study_completed() const ABSL_LOCKS_EXCLUDED(mu_);

  Counts counts() const ABSL_LOCKS_EXCLUDED(mu_);

  // "<study>: 5/30 trials: 3 completed, 1 infeasible, 1 running, best
  // loss=0.1 (trial 2)"; the buckets shown add up to the first number.
  std::string Progress() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class Bucket {
    kRunning,
    kHeld,
    kCompleted,
    kInfeasible,
    kFailed,
    kPaused,
    kOther
  };

  void Put(int64_t id, Bucket bucket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string study_;
  const int64_t budget_;
  // "" without a single objective: no metric has that name.
  const std::string objective_;
  const bool maximize_;

  mutable absl::Mutex mu_;
  // Each trial this worker took, in the bucket of its latest outcome.
  absl::flat_hash_map<int64_t, Bucket> trials_ ABSL_GUARDED_BY(mu_);
  std::optional<double> best_ ABSL_GUARDED_BY(mu_);
  int64_t best_trial_ ABSL_GUARDED_BY(mu_) = 0;
  bool study_completed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_WORKER_WORKER_TALLY_H_
