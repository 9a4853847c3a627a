#include "cli/worker_tally.h"

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

void WorkerTally::ProgramStarted() {
  absl::MutexLock lock(&mu_);
  ++counts_.running;
}

void WorkerTally::ProgramEnded() {
  absl::MutexLock lock(&mu_);
  --counts_.running;
}

void WorkerTally::CountSettled(const v1::Trial& trial) {
  absl::MutexLock lock(&mu_);
  if (trial.state() == v1::Trial::INFEASIBLE) {
    ++counts_.infeasible;
  } else if (trial.state() == v1::Trial::FAILED) {
    ++counts_.failed;
  } else if (trial.state() == v1::Trial::COMPLETED ||
             trial.state() == v1::Trial::STOPPED) {
    ++counts_.completed;
    const auto& metrics = trial.final_measurement().metrics();
    auto it = metrics.find(objective_);
    const bool feasible = !trial.has_feasible() || trial.feasible();
    if (feasible && it != metrics.end() &&
        (!best_.has_value() ||
         (maximize_ ? it->second > *best_ : it->second < *best_))) {
      best_ = it->second;
      best_trial_ = trial.id();
    }
  } else if (trial.state() == v1::Trial::PAUSED) {
    ++counts_.paused;
  } else {
    ++counts_.other;
  }
}

void WorkerTally::CountOther() {
  absl::MutexLock lock(&mu_);
  ++counts_.other;
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
  return counts_;
}

std::string WorkerTally::Progress() const {
  absl::MutexLock lock(&mu_);
  std::string text = absl::StrCat(
      study_, ": ",
      counts_.completed + counts_.infeasible + counts_.failed +
          counts_.paused + counts_.other);
  if (budget_ > 0) absl::StrAppend(&text, "/", budget_);
  absl::StrAppend(&text, " done");
  std::vector<std::string> notes;
  if (counts_.infeasible > 0) {
    notes.push_back(absl::StrCat(counts_.infeasible, " infeasible"));
  }
  if (counts_.failed > 0) {
    notes.push_back(absl::StrCat(counts_.failed, " failed"));
  }
  if (counts_.paused > 0) {
    notes.push_back(absl::StrCat(counts_.paused, " paused at a rung"));
  }
  if (counts_.other > 0) {
    notes.push_back(absl::StrCat(counts_.other, " given back or left"));
  }
  if (!notes.empty()) {
    absl::StrAppend(&text, " (", absl::StrJoin(notes, ", "), ")");
  }
  absl::StrAppend(&text, ", ", counts_.running, " running");
  if (best_.has_value()) {
    absl::StrAppend(&text, ", best ", objective_, "=", FormatShort(*best_),
                    " (trial ", best_trial_, ")");
  }
  return text;
}

}  // namespace hypertune::cli
