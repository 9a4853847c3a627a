#include "cli/worker/worker_failures.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/format.h"
#include "cli/worker/worker_text.h"

namespace hypertune::cli {

EarlyVerdict FailureWatch::JudgeEarly(const TrialRun& run,
                                      double program_seconds, int64_t id) {
  if (early_failures_ <= 0) return EarlyVerdict::kNone;
  const bool quick_failure =
      (run.exit.signaled || run.exit.code != 0) &&
      !run.final_metrics.has_value() && !run.step_metrics.has_value() &&
      !run.infeasible_reason.has_value() && !run.exit.timed_out &&
      run.worker_signal == 0 && !run.stop_requested && !run.lease_lost &&
      program_seconds < kQuickFailureSeconds;
  absl::MutexLock lock(&mu_);
  if (early_watch_over_) return EarlyVerdict::kNone;
  const bool alike =
      early_trials_.empty() || (run.exit.signaled == early_exit_.signaled &&
                                run.exit.code == early_exit_.code);
  if (!quick_failure || !alike) {
    early_watch_over_ = true;
    return early_reached_ ? EarlyVerdict::kNone : EarlyVerdict::kEnded;
  }
  if (early_trials_.empty()) early_exit_ = run.exit;
  early_trials_.push_back(id);
  // With parallel slots, programs already running when the count is
  // reached end alike too: they are given back as well.
  if (early_trials_.size() >= static_cast<size_t>(early_failures_)) {
    early_reached_ = true;
  }
  return early_reached_ ? EarlyVerdict::kEnvironment : EarlyVerdict::kHold;
}

bool FailureWatch::EndEarlyWatch() {
  absl::MutexLock lock(&mu_);
  if (early_failures_ <= 0 || early_watch_over_ || early_reached_) {
    early_watch_over_ = true;
    return false;
  }
  early_watch_over_ = true;
  return true;
}

std::string FailureWatch::EarlyFailuresGiveBackReason(
    const ProgramExit& exit) const {
  return absl::StrCat(
      "the worker's environment: its first ", early_failures_,
      " programs failed alike within seconds (", ExitText(exit),
      ") whatever the parameters; given back for a healthy worker");
}

absl::Status FailureWatch::EarlyFailuresError(
    const ProgramExit& exit, int64_t id,
    const std::filesystem::path& log_path) const {
  std::vector<int64_t> ids;
  {
    absl::MutexLock lock(&mu_);
    ids = early_trials_;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "the first ", ids.size(), " trials this worker ran (",
      absl::StrJoin(ids, ", "), ") all failed alike within ",
      FormatShort(kQuickFailureSeconds), " s: ", ExitText(exit),
      ", no metric reported. That is the program or its environment (a "
      "missing module or command, a wrong interpreter), not the "
      "parameters: the worker stops before the study's budget is spent on "
      "it, and gives those trials back to the queue for a healthy worker. "
      "The last program's log (trial ",
      id, ", ", log_path.string(), ") ends with:\n", LogTail(log_path, 20),
      "Fix the program and run the worker again (--early-failures 0 never "
      "stops for this)"));
}

absl::Status FailureWatch::CountFailureToRun(
    std::optional<v1::Trial::State> settled, const TrialRun& run,
    const std::filesystem::path& log_path) {
  const bool failed_to_run =
      (settled == v1::Trial::INFEASIBLE || settled == v1::Trial::FAILED) &&
      !run.final_metrics.has_value() && !run.infeasible_reason.has_value() &&
      !run.step_metrics.has_value() && !run.exit.timed_out &&
      run.worker_signal == 0 && !run.stop_requested && !run.lease_lost;
  int in_a_row = 0;
  {
    absl::MutexLock lock(&mu_);
    if (settled == v1::Trial::COMPLETED || settled == v1::Trial::STOPPED ||
        ((settled == v1::Trial::INFEASIBLE || settled == v1::Trial::FAILED) &&
         !failed_to_run)) {
      failures_in_a_row_ = 0;
    } else if (failed_to_run) {
      in_a_row = ++failures_in_a_row_;
    }
  }
  if (max_consecutive_failures_ <= 0 || in_a_row < max_consecutive_failures_) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      in_a_row,
      " trials in a row failed to run (failed or infeasible "
      "without reporting a metric); stopping before the study's budget is "
      "spent on them. The last one's log (",
      log_path.string(), ") ends with:\n", LogTail(log_path, 20),
      "Fix the program and run the worker again (--max-consecutive-failures "
      "0 never stops)"));
}

}  // namespace hypertune::cli
