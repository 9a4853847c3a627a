#include "cli/worker/worker_tally.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/format.h"

namespace hypertune::cli {

WorkerTally::WorkerTally(std::string study, int64_t budget,
                         std::optional<StudyMetrics::Objective> objective)
    : study_(std::move(study)),
      budget_(budget),
      objective_(objective.has_value() ? std::move(objective->name) : ""),
      maximize_(objective.has_value() && objective->maximize) {}

void WorkerTally::Put(int64_t id, Bucket bucket) { trials_[id] = bucket; }

void WorkerTally::ProgramStarted(int64_t id) {
  absl::MutexLock lock(&mu_);
  Put(id, Bucket::kRunning);
}

void WorkerTally::ProgramEnded(int64_t id) {
  absl::MutexLock lock(&mu_);
  Put(id, Bucket::kHeld);
}

void WorkerTally::CountSettled(const v1::Trial& trial) {
  absl::MutexLock lock(&mu_);
  switch (trial.state()) {
    case v1::Trial::INFEASIBLE:
      return Put(trial.id(), Bucket::kInfeasible);
    case v1::Trial::FAILED:
      return Put(trial.id(), Bucket::kFailed);
    case v1::Trial::PAUSED:
      return Put(trial.id(), Bucket::kPaused);
    case v1::Trial::COMPLETED:
    case v1::Trial::STOPPED:
      break;
    default:
      return Put(trial.id(), Bucket::kOther);
  }
  Put(trial.id(), Bucket::kCompleted);
  const auto& metrics = trial.final_measurement().metrics();
  auto it = metrics.find(objective_);
  const bool feasible = !trial.has_feasible() || trial.feasible();
  if (feasible && it != metrics.end() &&
      (!best_.has_value() ||
       (maximize_ ? it->second > *best_ : it->second < *best_))) {
    best_ = it->second;
    best_trial_ = trial.id();
  }
}

void WorkerTally::CountOther(int64_t id) {
  absl::MutexLock lock(&mu_);
  Put(id, Bucket::kOther);
}

void WorkerTally::SetStudyCompleted() {
  absl::MutexLock lock(&mu_);
  study_completed_ = true;
}

bool WorkerTally::study_completed() const {
  absl::MutexLock lock(&mu_);
  return study_completed_;
}

WorkerTally::Counts WorkerTally::counts() const {
  absl::MutexLock lock(&mu_);
  Counts counts;
  for (const auto& [id, bucket] : trials_) {
    switch (bucket) {
      case Bucket::kRunning:
        ++counts.running;
        break;
      case Bucket::kHeld:
        ++counts.held;
        break;
      case Bucket::kCompleted:
        ++counts.completed;
        break;
      case Bucket::kInfeasible:
        ++counts.infeasible;
        break;
      case Bucket::kFailed:
        ++counts.failed;
        break;
      case Bucket::kPaused:
        ++counts.paused;
        break;
      case Bucket::kOther:
        ++counts.other;
        break;
    }
  }
  return counts;
}

std::string WorkerTally::Progress() const {
  const Counts counts = this->counts();
  absl::MutexLock lock(&mu_);
  std::string text = absl::StrCat(study_, ": ", counts.total());
  if (budget_ > 0) absl::StrAppend(&text, "/", budget_);
  absl::StrAppend(&text,
                  counts.total() == 1 && budget_ <= 0 ? " trial" : " trials");
  std::vector<std::string> buckets;
  for (const auto& [count, what] :
       {std::pair{counts.completed, "completed"},
        std::pair{counts.infeasible, "infeasible"},
        std::pair{counts.failed, "failed"},
        std::pair{counts.paused, "paused at a rung"},
        std::pair{counts.other, "given back or left"},
        std::pair{counts.held, "held"}, std::pair{counts.running, "running"}}) {
    if (count > 0) buckets.push_back(absl::StrCat(count, " ", what));
  }
  if (!buckets.empty()) {
    absl::StrAppend(&text, ": ", absl::StrJoin(buckets, ", "));
  }
  if (best_.has_value()) {
    absl::StrAppend(&text, "; best ", objective_, "=", FormatShort(*best_),
                    " (trial ", best_trial_, ")");
  }
  return text;
}

}  // namespace hypertune::cli
