// The output of `hypertune worker`: lines from all slots, and on a terminal
// one status line (the progress) kept below them, redrawn after each line.
//
// Thread safety: thread-safe; the slots write through one Console, each
// line whole.
#ifndef HYPERTUNE_CLI_WORKER_WORKER_CONSOLE_H_
#define HYPERTUNE_CLI_WORKER_WORKER_CONSOLE_H_

#include <ostream>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace hypertune::cli {

class Console {
 public:
  // `status_line`: keep the status line (on a terminal); without it
  // Status() shows nothing. `out` and `err` must outlive the Console.
  Console(std::ostream& out, std::ostream& err, bool status_line)
      : out_(out), err_(err), status_line_(status_line) {}

  // Writes `line` to out (err), above the status line.
  void Out(const std::string& line) ABSL_LOCKS_EXCLUDED(mu_);
  void Err(const std::string& line) ABSL_LOCKS_EXCLUDED(mu_);
  // Replaces the status line, cut to the terminal's width.
  void Status(std::string status) ABSL_LOCKS_EXCLUDED(mu_);
  // Clears the status line for good; lines go on as plain output.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void ClearLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DrawLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::ostream& out_ ABSL_GUARDED_BY(mu_);
  std::ostream& err_ ABSL_GUARDED_BY(mu_);
  bool status_line_ ABSL_GUARDED_BY(mu_);
  bool drawn_ ABSL_GUARDED_BY(mu_) = false;
  std::string status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_WORKER_WORKER_CONSOLE_H_
