// Helpers for tests (and the chaos harness) that run hypertuned as a separate
// process, so that it can be killed with SIGKILL and started again on the
// same database and address.
//
// ServerProcess forks and execs the hypertuned program and waits (with a
// deadline) for its "listening on HOST:PORT" line. Its stdout stays connected
// to a pipe that is never drained: hypertuned writes a handful of lines, far
// below a pipe's capacity. stderr is inherited. The server is SIGKILLed when
// the thread that started it ends (PR_SET_PDEATHSIG), so a crashed test
// leaves no server behind: start it from a thread that outlives it.
//
// Also: running a command line with its output, as the tests of the programs
// do.
//
// Thread safety: a ServerProcess is used by one thread at a time; TempDir,
// PickFreePort, RunShell and ShellQuote are safe anywhere.
#ifndef HYPERTUNE_TESTING_TEST_SERVER_H_
#define HYPERTUNE_TESTING_TEST_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hypertune::test {

// A fresh directory under the system temp dir, removed with its contents on
// destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // The path of `name` inside the directory.
  std::string File(const std::string& name) const;

 private:
  std::filesystem::path path_;
};

// Runs `command` with /bin/sh: its exit status (-1 if it did not exit), with
// its stdout, and its stderr too unless `stderr_too` is false, in `out`.
int RunShell(const std::string& command, std::string* out,
             bool stderr_too = true);

// `arg` as one word of a POSIX shell command.
std::string ShellQuote(const std::string& arg);

// A TCP port on 127.0.0.1 that was free a moment ago (bound, then released),
// for servers that must keep their address across restarts. UNAVAILABLE if
// no socket could be bound.
absl::StatusOr<int> PickFreePort();

struct ServerProcessOptions {
  // The hypertuned executable.
  std::string program;
  // --db.
  std::string db_path;
  // --listen; port 0 lets the server pick one (see ServerProcess::address).
  std::string listen = "127.0.0.1:0";
  // Appended to the command line.
  std::vector<std::string> extra_args;
  // How long to wait for the "listening on" line.
  std::chrono::milliseconds start_timeout{30000};
};

class ServerProcess {
 public:
  // Starts the server and returns once it listens. UNAVAILABLE if it exited
  // or said nothing before the deadline (the process is then killed and
  // reaped); INTERNAL if it could not be forked.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const ServerProcessOptions& options);

  // SIGKILLs the server if it still runs, and reaps it.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // The address the server reported, HOST:PORT.
  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  // Sends `signal`, waits for the process to end and returns its wait status
  // (see waitpid). REQUIRES: running().
  int Kill(int signal);

 private:
  ServerProcess(pid_t pid, int output_fd) : pid_(pid), output_fd_(output_fd) {}

  pid_t pid_;
  // The read end of the server's stdout.
  int output_fd_;
  std::string address_;
};

}  // namespace hypertune::test

#endif  // HYPERTUNE_TESTING_TEST_SERVER_H_
