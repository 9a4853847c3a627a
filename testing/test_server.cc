#include "testing/test_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace hypertune::test {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string pattern =
      (fs::temp_directory_path() / "hypertune-XXXXXX").string();
  if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  if (!path_.empty()) fs::remove_all(path_, ignored);
}

std::string TempDir::File(const std::string& name) const {
  return (path_ / name).string();
}

int RunShell(const std::string& command, std::string* out, bool stderr_too) {
  out->clear();
  FILE* pipe = popen((command + (stderr_too ? " 2>&1" : "")).c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) {
    out->append(buffer, n);
  }
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ShellQuote(const std::string& arg) {
  return absl::StrCat("'", absl::StrReplaceAll(arg, {{"'", "'\\''"}}), "'");
}

absl::StatusOr<int> PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("socket: ", std::strerror(errno)));
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  const int saved_errno = errno;
  close(fd);
  if (port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("binding 127.0.0.1:0: ", std::strerror(saved_errno)));
  }
  return port;
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const ServerProcessOptions& options) {
  std::vector<std::string> args = {options.program, "--db", options.db_path,
                                   "--listen", options.listen};
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // Only async-signal-safe calls until exec. The server dies with the
    // thread that started it, so a crashed test leaves no server behind.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    dup2(out[1], STDOUT_FILENO);  // dup2 clears close-on-exec on stdout.
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  std::unique_ptr<ServerProcess> server(new ServerProcess(pid, out[0]));

  // Read until the "listening on HOST:PORT" line, the end of the output or
  // the deadline.
  const auto deadline =
      std::chrono::steady_clock::now() + options.start_timeout;
  const std::string marker = "listening on ";
  std::string text;
  while (true) {
    size_t at = text.find(marker);
    if (at != std::string::npos) {
      size_t end = text.find_first_of(" \n", at + marker.size());
      if (end != std::string::npos) {
        server->address_ =
            text.substr(at + marker.size(), end - (at + marker.size()));
        return server;
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{server->output_fd_, POLLIN, 0};
    int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    char buffer[512];
    ssize_t n = read(server->output_fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // The server exited.
    text.append(buffer, static_cast<size_t>(n));
  }
  const int status = server->Kill(SIGKILL);
  return absl::UnavailableError(absl::StrCat(
      absl::StrJoin(args, " "), " did not report its address",
      WIFEXITED(status)
          ? absl::StrCat(" (exited with status ", WEXITSTATUS(status), ")")
          : "",
      text.empty() ? "" : absl::StrCat("; it said: ", text)));
}

ServerProcess::~ServerProcess() {
  if (running()) Kill(SIGKILL);
  if (output_fd_ >= 0) close(output_fd_);
}

int ServerProcess::Kill(int signal) {
  kill(pid_, signal);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return status;
}

}  // namespace hypertune::test
