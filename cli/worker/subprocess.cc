#include "cli/worker/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hypertune::cli {
namespace {

using Clock = std::chrono::steady_clock;

// A line longer than this without a newline is passed on in pieces.
constexpr size_t kMaxLine = 1 << 20;
// After the program exits, how long descendants may keep its pipes open.
constexpr std::chrono::seconds kDrainAfterExit{2};

int MillisUntil(Clock::time_point when, Clock::time_point now) {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(when - now).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

absl::Status SpawnError(int error, const std::string& program) {
  std::string message =
      absl::StrCat("cannot run \"", program, "\": ", std::strerror(error));
  switch (error) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

// Where argv[0] may be, in the order execvp tries: itself when it holds a
// '/', else each folder of this process's PATH (as posix_spawnp did).
std::vector<std::string> ExecCandidates(const std::string& program) {
  if (program.find('/') != std::string::npos) return {program};
  const char* path = std::getenv("PATH");
  std::vector<std::string> candidates;
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/bin:/usr/bin", ':')) {
    candidates.push_back(absl::StrCat(dir.empty() ? "." : dir, "/", program));
  }
  return candidates;
}

// What the child of fork() needs, made ready by the parent.
struct ChildSetup {
  pid_t parent = 0;
  int out_fd = -1;
  int err_fd = -1;
  int report_fd = -1;  // Gets errno if no exec succeeds.
  char** argv = nullptr;
  char** envp = nullptr;
  const char* const* paths = nullptr;
  size_t path_count = 0;
};

// The child between fork() and exec: async-signal-safe calls only.
[[noreturn]] void RunChild(const ChildSetup& setup) {
  setpgid(0, 0);
  // Dies with the thread that forked it. Should that thread be gone
  // already, the parent is someone else now: stop at once.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != setup.parent) {
    _exit(127);
  }
  // Default dispositions whatever the worker uses (gRPC ignores SIGPIPE).
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) {
      sigaction(sig, &default_action, nullptr);
    }
  }
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0 && null_fd != STDIN_FILENO) {
    dup2(null_fd, STDIN_FILENO);
    close(null_fd);
  }
  dup2(setup.out_fd, STDOUT_FILENO);
  dup2(setup.err_fd, STDERR_FILENO);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  int error = ENOENT;
  bool denied = false;
  for (size_t i = 0; i < setup.path_count; ++i) {
    execve(setup.paths[i], setup.argv, setup.envp);
    error = errno;
    if (error == EACCES) {
      denied = true;
    } else if (error != ENOENT && error != ENOTDIR) {
      break;
    }
  }
  if (denied && (error == ENOENT || error == ENOTDIR)) error = EACCES;
  ssize_t ignored = write(setup.report_fd, &error, sizeof(error));
  (void)ignored;
  _exit(127);
}

// OrphanGuard's messages: 8 bytes, an op and a process group.
constexpr int32_t kGuardAdd = 1;
constexpr int32_t kGuardRemove = 2;
// More groups than a worker runs at once (--parallel is at most 1024).
constexpr int kMaxGuardedGroups = 4096;
pid_t g_guarded_groups[kMaxGuardedGroups];

// The helper process of OrphanGuard: async-signal-safe calls only (it is
// forked from a multithreaded process and never execs).
[[noreturn]] void RunGuard(int fd) {
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) {
    sigaction(sig, &ignore, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Holds nothing of the worker's: no pipe of a program (whose reader would
  // wait for our copy to close), no socket, no terminal.
  if ((fd > 0 && close_range(0, fd - 1, 0) != 0) ||
      close_range(fd + 1, ~0U, 0) != 0) {
    for (int other = 0; other < 65536; ++other) {
      if (other != fd) close(other);
    }
  }
  int count = 0;
  char buffer[1024];
  size_t have = 0;
  while (true) {
    const ssize_t got = recv(fd, buffer + have, sizeof(buffer) - have, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // The worker is gone.
    have += static_cast<size_t>(got);
    size_t used = 0;
    for (; have - used >= 8; used += 8) {
      int32_t op;
      int32_t group;
      memcpy(&op, buffer + used, 4);
      memcpy(&group, buffer + used + 4, 4);
      if (op == kGuardAdd && count < kMaxGuardedGroups) {
        g_guarded_groups[count++] = group;
      } else if (op == kGuardRemove) {
        for (int i = 0; i < count; ++i) {
          if (g_guarded_groups[i] == group) {
            g_guarded_groups[i] = g_guarded_groups[--count];
            break;
          }
        }
      }
    }
    memmove(buffer, buffer + used, have - used);
    have -= used;
  }
  for (int i = 0; i < count; ++i) kill(-g_guarded_groups[i], SIGKILL);
  _exit(0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(
    const SubprocessOptions& options) {
  // Everything the child needs is made before fork(): the child of a
  // multithreaded process may make async-signal-safe calls only.
  const std::vector<std::string> paths = ExecCandidates(options.argv[0]);
  std::vector<char*> argv;
  for (const std::string& a : options.argv) {
    argv.push_back(const_cast<char*>(a.c_str()));
  }
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : options.env) {
    envp.push_back(const_cast<char*>(e.c_str()));
  }
  envp.push_back(nullptr);
  std::vector<const char*> path_ptrs;
  for (const std::string& p : paths) path_ptrs.push_back(p.c_str());

  // out, err, and the exec report (closed by a successful exec).
  int pipes[3][2];
  for (int i = 0; i < 3; ++i) {
    if (pipe2(pipes[i], O_CLOEXEC) != 0) {
      const int e = errno;
      for (int j = 0; j < i; ++j) {
        close(pipes[j][0]);
        close(pipes[j][1]);
      }
      return SpawnError(e, options.argv[0]);
    }
  }

  ChildSetup setup;
  setup.parent = getpid();
  setup.out_fd = pipes[0][1];
  setup.err_fd = pipes[1][1];
  setup.report_fd = pipes[2][1];
  setup.argv = argv.data();
  setup.envp = envp.data();
  setup.paths = path_ptrs.data();
  setup.path_count = path_ptrs.size();

  // No handler of the worker's may run in the child before it resets them.
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = fork();
  if (pid == 0) RunChild(setup);
  const int fork_error = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  for (int i = 0; i < 3; ++i) close(pipes[i][1]);
  if (pid < 0) {
    for (int i = 0; i < 3; ++i) close(pipes[i][0]);
    return SpawnError(fork_error, options.argv[0]);
  }
  // Also here, so that the group exists whichever of the two runs first.
  setpgid(pid, pid);

  int child_error = 0;
  ssize_t got;
  do {
    got = read(pipes[2][0], &child_error, sizeof(child_error));
  } while (got < 0 && errno == EINTR);
  close(pipes[2][0]);
  if (got == static_cast<ssize_t>(sizeof(child_error))) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    close(pipes[0][0]);
    close(pipes[1][0]);
    return SpawnError(child_error, options.argv[0]);
  }
  if (options.guard != nullptr) options.guard->Add(pid);
  return std::unique_ptr<Subprocess>(
      new Subprocess(pid, pipes[0][0], pipes[1][0], options));
}

Subprocess::Subprocess(pid_t pid, int out_fd, int err_fd,
                       SubprocessOptions options)
    : pid_(pid),
      fds_{out_fd, err_fd},
      options_(std::move(options)),
      started_(Clock::now()) {}

Subprocess::~Subprocess() {
  if (!reaped_) {
    kill(-pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (options_.guard != nullptr) options_.guard->Remove(pid_);
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

void Subprocess::Signal(int signal) {
  if (!reaped_) kill(-pid_, signal);
}

void Subprocess::Terminate() {
  Signal(SIGTERM);
  if (!kill_at_.has_value()) {
    kill_at_ = Clock::now() +
               std::chrono::duration_cast<Clock::duration>(options_.kill_grace);
  }
}

ProgramExit Subprocess::Wait(const LineCallback& on_stdout,
                             const LineCallback& on_stderr,
                             const std::function<void()>& on_tick,
                             std::chrono::milliseconds tick) {
  const LineCallback* sinks[2] = {&on_stdout, &on_stderr};
  std::string pending[2];
  ProgramExit exit;
  Clock::time_point exited_at;

  auto emit_lines = [&](int i) {
    size_t start = 0;
    for (size_t nl; (nl = pending[i].find('\n', start)) != std::string::npos;
         start = nl + 1) {
      (*sinks[i])(std::string_view(pending[i]).substr(start, nl - start));
    }
    pending[i].erase(0, start);
    if (pending[i].size() >= kMaxLine) {
      (*sinks[i])(pending[i]);
      pending[i].clear();
    }
  };
  auto close_fd = [&](int i) {
    if (!pending[i].empty()) (*sinks[i])(pending[i]);
    pending[i].clear();
    close(fds_[i]);
    fds_[i] = -1;
  };

  while (true) {
    Clock::time_point now = Clock::now();
    if (!reaped_ && options_.timeout.has_value() && !timed_out_ &&
        now - started_ >= *options_.timeout) {
      timed_out_ = true;
      Terminate();
    }
    if (!reaped_ && kill_at_.has_value() && now >= *kill_at_) {
      Signal(SIGKILL);
      kill_at_.reset();
    }
    if (!reaped_) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        exited_at = now;
        exit.signaled = WIFSIGNALED(status);
        exit.code = exit.signaled ? WTERMSIG(status) : WEXITSTATUS(status);
        exit.timed_out = timed_out_;
      }
    }
    bool open = fds_[0] >= 0 || fds_[1] >= 0;
    if (reaped_ && !open) break;
    if (reaped_ && now - exited_at >= kDrainAfterExit) {
      // Leftover descendants hold the pipes: they end with the program.
      for (int i = 0; i < 2; ++i) {
        if (fds_[i] >= 0) close_fd(i);
      }
      break;
    }
    on_tick();

    Clock::time_point wake = now + tick;
    if (!reaped_ && options_.timeout.has_value() && !timed_out_) {
      wake =
          std::min(wake, started_ + std::chrono::duration_cast<Clock::duration>(
                                        *options_.timeout));
    }
    if (!reaped_ && kill_at_.has_value()) wake = std::min(wake, *kill_at_);
    if (reaped_) wake = std::min(wake, exited_at + kDrainAfterExit);
    // With the pipes closed, only waitpid tells of the exit: look often.
    if (!open) wake = std::min(wake, now + std::chrono::milliseconds(20));

    pollfd pfds[2];
    int n = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (fds_[i] < 0) continue;
      pfds[n] = {fds_[i], POLLIN, 0};
      which[n++] = i;
    }
    int ready = poll(pfds, n, MillisUntil(wake, Clock::now()));
    if (ready <= 0) continue;  // Timeout or EINTR: re-check the clock.
    for (int k = 0; k < n; ++k) {
      if ((pfds[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      int i = which[k];
      char buffer[65536];
      ssize_t got = read(fds_[i], buffer, sizeof(buffer));
      if (got > 0) {
        pending[i].append(buffer, static_cast<size_t>(got));
        emit_lines(i);
      } else if (got == 0 || errno != EINTR) {
        close_fd(i);
      }
    }
  }
  // Whatever the program left running in its group ends with it.
  kill(-pid_, SIGKILL);
  return exit;
}

absl::StatusOr<std::unique_ptr<OrphanGuard>> OrphanGuard::Start() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::InternalError(absl::StrCat(
        "cannot start the orphan guard: socketpair: ", std::strerror(errno)));
  }
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = fork();
  if (pid == 0) RunGuard(fds[1]);
  const int fork_error = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return absl::InternalError(absl::StrCat(
        "cannot start the orphan guard: fork: ", std::strerror(fork_error)));
  }
  return std::unique_ptr<OrphanGuard>(new OrphanGuard(pid, fds[0]));
}

OrphanGuard::~OrphanGuard() {
  close(fd_);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

void OrphanGuard::Add(pid_t group) { Send(kGuardAdd, group); }

void OrphanGuard::Remove(pid_t group) { Send(kGuardRemove, group); }

void OrphanGuard::Send(int32_t op, pid_t group) {
  char message[8];
  const int32_t g = group;
  memcpy(message, &op, 4);
  memcpy(message + 4, &g, 4);
  // One write of 8 bytes: whole, whichever slot sends it. A guard that is
  // gone (MSG_NOSIGNAL: no SIGPIPE) costs the guarantee, not the worker.
  ssize_t sent;
  do {
    sent = send(fd_, message, sizeof(message), MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
}

}  // namespace hypertune::cli
