// Subprocess: one program run by `hypertune worker`, in a process group of
// its own, with stdin from /dev/null and stdout/stderr read line by line.
//
// Thread safety: one Subprocess is driven by one thread; Signal() and
// Terminate() are meant for the on_tick callback of Wait() on that thread.
#ifndef HYPERTUNE_CLI_SUBPROCESS_H_
#define HYPERTUNE_CLI_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace hypertune::cli {

// How a program ended.
struct ProgramExit {
  // True: ended by signal `code`; false: exited with status `code`.
  bool signaled = false;
  int code = 0;
  // Ended (by us) because it ran past its timeout.
  bool timed_out = false;
};

struct SubprocessOptions {
  // argv[0] is looked up in PATH. REQUIRES: not empty.
  std::vector<std::string> argv;
  // The program's whole environment, "NAME=value" each.
  std::vector<std::string> env;
  // Ended after this long (SIGTERM, then SIGKILL after kill_grace); none =
  // no limit.
  std::optional<std::chrono::duration<double>> timeout;
  // Between SIGTERM and SIGKILL when the program is ended by us.
  std::chrono::duration<double> kill_grace{10.0};
};

class Subprocess {
 public:
  using LineCallback = std::function<void(std::string_view line)>;

  // Starts the program. INVALID_ARGUMENT / NOT_FOUND / PERMISSION_DENIED
  // (by errno) when it cannot be started, naming argv[0].
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(
      const SubprocessOptions& options);

  // Kills the process group and reaps the program if Wait() was not run.
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }

  // Sends `signal` to the program's process group.
  void Signal(int signal);
  // SIGTERM now, SIGKILL after kill_grace if it is still running.
  void Terminate();

  // Pumps the program's output until it has exited and its pipes are closed,
  // calling on_stdout / on_stderr for each line (without the newline; a last
  // unterminated line too) and on_tick at least every `tick`. Enforces the
  // timeout. Returns how the program ended. Call once.
  ProgramExit Wait(const LineCallback& on_stdout, const LineCallback& on_stderr,
                   const std::function<void()>& on_tick,
                   std::chrono::milliseconds tick);

 private:
  Subprocess(pid_t pid, int out_fd, int err_fd, SubprocessOptions options);

  pid_t pid_;
  int fds_[2];  // stdout, stderr; -1 once closed.
  SubprocessOptions options_;
  std::chrono::steady_clock::time_point started_;
  std::optional<std::chrono::steady_clock::time_point> kill_at_;
  bool timed_out_ = false;
  bool reaped_ = false;
};

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_SUBPROCESS_H_
