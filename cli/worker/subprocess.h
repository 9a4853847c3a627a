// Subprocess: one program run by `hypertune worker`, in a process group of
// its own, with stdin from /dev/null and stdout/stderr read line by line.
//
// A program never outlives the process that started it:
// - the program gets PR_SET_PDEATHSIG SIGKILL (see Start), so it dies with
//   the thread that started it, however that went (kill -9 included);
// - an OrphanGuard, when given, SIGKILLs the program's whole process group
//   (its children too) when the starting process is gone;
// - each end (Wait's, the destructor's) SIGKILLs what is left of the group.
// A descendant that leaves the program's process group (setsid, a daemon)
// escapes all three: a cgroup (Slurm, Kubernetes) is the tool for those.
//
// Thread safety: one Subprocess is driven by one thread; Signal() and
// Terminate() are meant for the on_tick callback of Wait() on that thread.
// OrphanGuard is thread-safe.
#ifndef HYPERTUNE_CLI_WORKER_SUBPROCESS_H_
#define HYPERTUNE_CLI_WORKER_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
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

class OrphanGuard;

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
  // Told of the program's process group while it runs; none = no guard.
  // Not owned; outlives the Subprocess.
  OrphanGuard* guard = nullptr;
};

class Subprocess {
 public:
  using LineCallback = std::function<void(std::string_view line)>;

  // Starts the program. INVALID_ARGUMENT / NOT_FOUND / PERMISSION_DENIED
  // (by errno) when it cannot be started, naming argv[0].
  //
  // The program gets PR_SET_PDEATHSIG SIGKILL, which the kernel sends when
  // the *thread* that called Start exits: REQUIRES that thread to live until
  // the program is reaped (by Wait or the destructor, which the worker's
  // slot threads call themselves). SIGKILL rather than SIGTERM: with its
  // worker gone, nothing reads the program's output (a print would meet a
  // broken pipe), renews its lease or settles its trial, and nothing would
  // be left to escalate should a SIGTERM be caught; the trial is resumed
  // elsewhere from the checkpoint already recorded.
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
  // timeout. Returns how the program ended, after killing whatever is left
  // of its process group. Call once.
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

// A helper process that ends the programs' process groups once the process
// that started them (the worker) is gone, however it went: kill -9 and
// crashes included, which no handler of the worker's sees. The worker tells
// it each program's group as it starts and as it ends, over a socket; when
// the socket closes (the kernel closes the worker's end as it dies, or
// the guard is destroyed), the helper SIGKILLs every group still registered
// and exits. It ignores SIGINT, SIGTERM, SIGHUP and SIGQUIT: a terminal's or
// a scheduler's signal to the worker's process group is the worker's to
// handle, and the helper must outlive it.
class OrphanGuard {
 public:
  // Forks the helper. INTERNAL if it cannot be.
  static absl::StatusOr<std::unique_ptr<OrphanGuard>> Start();
  // Ends the helper (killing any group still registered) and reaps it.
  ~OrphanGuard();
  OrphanGuard(const OrphanGuard&) = delete;
  OrphanGuard& operator=(const OrphanGuard&) = delete;

  pid_t pid() const { return pid_; }
  // Registers (forgets) the process group `group`.
  void Add(pid_t group);
  void Remove(pid_t group);

 private:
  OrphanGuard(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  void Send(int32_t op, pid_t group);

  pid_t pid_;
  int fd_;  // The worker's end of the socket.
};

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_WORKER_SUBPROCESS_H_
