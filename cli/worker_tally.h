// The progress of one `hypertune worker` run: how its trials ended
// (completed, infeasible, failed, other), how many programs run now, the best
// value of the single objective so far, and whether the study said it is
// completed. The status line and the final summary are its text.
//
// Thread safety: thread-safe; the slots count into one tally.
#ifndef HYPERTUNE_CLI_WORKER_TALLY_H_
#define HYPERTUNE_CLI_WORKER_TALLY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/study_metrics.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::cli {

class WorkerTally {
 public:
  struct Counts {
    int running = 0;
    int completed = 0;
    int infeasible = 0;
    // FAILED: the program's fault, not the parameters'.
    int failed = 0;
    // Paused at an ASHA rung: ran well, to be resumed when promoted.
    int paused = 0;
    // Given back, left to their leases, or settled by someone else.
    int other = 0;
  };

  // `budget`: the trials the worker means to run, shown as "3/30 done"; 0
  // when unknown. `objective`: the study's single objective, whose best
  // value is kept; nullopt with several (no best).
  WorkerTally(std::string study, int64_t budget,
              std::optional<StudyMetrics::Objective> objective);

  // A program started (ended): counted as running meanwhile.
  void ProgramStarted() ABSL_LOCKS_EXCLUDED(mu_);
  void ProgramEnded() ABSL_LOCKS_EXCLUDED(mu_);

  // Counts `trial` by the state it was left in: COMPLETED or STOPPED (its
  // objective, if feasible, may be the new best), INFEASIBLE, FAILED, or
  // other.
  void CountSettled(const v1::Trial& trial) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts a trial that ended neither way: given back, left to its lease,
  // or settled by someone else.
  void CountOther() ABSL_LOCKS_EXCLUDED(mu_);

  // The server said the study is completed (its budget is spent).
  void SetStudyCompleted() ABSL_LOCKS_EXCLUDED(mu_);
  bool study_completed() const ABSL_LOCKS_EXCLUDED(mu_);

  Counts counts() const ABSL_LOCKS_EXCLUDED(mu_);

  // "<study>: 3/30 done (1 infeasible), 2 running, best loss=0.1 (trial 2)"
  std::string Progress() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string study_;
  const int64_t budget_;
  // "" without a single objective: no metric has that name.
  const std::string objective_;
  const bool maximize_;

  mutable absl::Mutex mu_;
  Counts counts_ ABSL_GUARDED_BY(mu_);
  std::optional<double> best_ ABSL_GUARDED_BY(mu_);
  int64_t best_trial_ ABSL_GUARDED_BY(mu_) = 0;
  bool study_completed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_WORKER_TALLY_H_
