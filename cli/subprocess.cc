#include "cli/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

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

}  // namespace

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(
    const SubprocessOptions& options) {
  int out[2];
  int err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return SpawnError(errno, options.argv[0]);
  if (pipe2(err, O_CLOEXEC) != 0) {
    int e = errno;
    close(out[0]);
    close(out[1]);
    return SpawnError(e, options.argv[0]);
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);

  // Its own process group, so that a timeout ends the program's children too;
  // default signal dispositions and an empty mask whatever the worker uses.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
                                      POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t all;
  sigset_t none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);

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

  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(),
                        envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    close(out[0]);
    close(err[0]);
    return SpawnError(rc, options.argv[0]);
  }
  return std::unique_ptr<Subprocess>(
      new Subprocess(pid, out[0], err[0], options));
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
      // Leftover descendants hold the pipes: end them with the program.
      kill(-pid_, SIGKILL);
      for (int i = 0; i < 2; ++i) {
        if (fds_[i] >= 0) close_fd(i);
      }
      break;
    }
    on_tick();

    Clock::time_point wake = now + tick;
    if (!reaped_ && options_.timeout.has_value() && !timed_out_) {
      wake = std::min(wake, started_ + std::chrono::duration_cast<
                                           Clock::duration>(*options_.timeout));
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
  return exit;
}

}  // namespace hypertune::cli
