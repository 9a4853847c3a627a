#include "cli/worker/trial_outcome.h"

#include <cmath>
#include <csignal>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"

namespace hypertune::cli {
namespace {

TrialOutcome Infeasible(std::string reason) {
  TrialOutcome outcome;
  outcome.kind = TrialOutcome::Kind::kInfeasible;
  outcome.reason = std::move(reason);
  return outcome;
}

TrialOutcome Failed(std::string reason) {
  TrialOutcome outcome;
  outcome.kind = TrialOutcome::Kind::kFailed;
  outcome.reason = std::move(reason);
  return outcome;
}

TrialOutcome WorkerFailed(std::string reason) {
  TrialOutcome outcome;
  outcome.kind = TrialOutcome::Kind::kWorkerFailed;
  outcome.reason = std::move(reason);
  return outcome;
}

// The name of a signal a program raises on itself through a fault of its
// own, or nullptr for the others.
const char* FaultSignalName(int signal) {
  switch (signal) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGABRT:
      return "SIGABRT";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGSYS:
      return "SIGSYS";
    default:
      return nullptr;
  }
}

TrialOutcome Leave(std::string reason) {
  TrialOutcome outcome;
  outcome.kind = TrialOutcome::Kind::kLeave;
  outcome.reason = std::move(reason);
  return outcome;
}

// Completion with `metrics`, unless they cannot be the trial's result: a NaN
// or a missing `required` metric.
TrialOutcome Complete(const Metrics& metrics, int64_t step,
                      absl::Span<const std::string> required) {
  for (const auto& [name, value] : metrics) {
    if (std::isnan(value)) {
      return Infeasible(absl::StrCat("metric \"", name, "\" is NaN"));
    }
  }
  for (const std::string& name : required) {
    if (metrics.contains(name)) continue;
    return Infeasible(absl::StrCat(
        "the program did not report \"", name, "\" (it reported: ",
        absl::StrJoin(
            metrics, ", ",
            [](std::string* out, const auto& m) { out->append(m.first); }),
        ")"));
  }
  TrialOutcome outcome;
  outcome.kind = TrialOutcome::Kind::kComplete;
  outcome.metrics = metrics;
  outcome.step = step;
  return outcome;
}

}  // namespace

TrialOutcome DecideOutcome(const TrialRun& run,
                           const std::vector<std::string>& required) {
  // Stopped early, a trial is judged on the primary objective alone.
  const absl::Span<const std::string> primary =
      absl::MakeConstSpan(required).subspan(0, 1);
  const ProgramExit& exit = run.exit;
  bool clean_exit = !exit.signaled && exit.code == 0;
  if (exit.timed_out) return Infeasible("timeout");
  if (run.lease_lost) return Leave("the lease was lost to another worker");
  if (run.worker_signal != 0) {
    // A program that finished cleanly despite the interruption has a result;
    // any other goes back to the queue, to run again elsewhere.
    if (clean_exit && run.final_metrics.has_value()) {
      return Complete(*run.final_metrics, run.last_step, required);
    }
    // SIGTERM is what a spot machine's notice and a scheduler's preemption
    // send; SIGINT a Ctrl-C. Neither is the trial's doing: no retry spent.
    TrialOutcome outcome = WorkerFailed(
        run.worker_signal == SIGTERM
            ? std::string("worker preempted")
            : absl::StrCat("worker interrupted by signal ", run.worker_signal));
    outcome.preempted = true;
    return outcome;
  }
  if (run.infeasible_reason.has_value()) {
    return Infeasible(run.infeasible_reason->empty()
                          ? std::string("declared infeasible by the program")
                          : *run.infeasible_reason);
  }
  const std::optional<Metrics>& metrics =
      run.final_metrics.has_value() ? run.final_metrics : run.step_metrics;
  if (run.stop_requested) {
    // Stopped early on the server's word: what it reached is its result.
    if (metrics.has_value()) {
      return Complete(*metrics, run.last_step, primary);
    }
    return Leave("stopped early before reporting a metric");
  }
  if (exit.signaled) {
    if (const char* fault = FaultSignalName(exit.code)) {
      return Infeasible(
          absl::StrCat("crashed with signal ", exit.code, " (", fault, ")"));
    }
    return WorkerFailed(absl::StrCat("killed by signal ", exit.code));
  }
  if (exit.code != 0) {
    std::string reason = absl::StrCat("exit status ", exit.code);
    if (!run.last_line.empty()) absl::StrAppend(&reason, ": ", run.last_line);
    return Failed(std::move(reason));
  }
  if (!metrics.has_value()) {
    return Failed("program exited 0 without reporting a metric");
  }
  return Complete(*metrics, run.last_step, required);
}

}  // namespace hypertune::cli
