#include "testing/postgres_server.h"

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hypertune::test {

namespace fs = std::filesystem;

namespace {

constexpr auto kStartTimeout = std::chrono::seconds(30);
// How often Launch asks a starting server whether it is ready.
constexpr auto kPingInterval = std::chrono::milliseconds(10);
constexpr size_t kLogTailBytes = 2000;

bool IsExecutable(const fs::path& path) {
  return access(path.c_str(), X_OK) == 0;
}

bool HasServerPrograms(const fs::path& bin_dir) {
  return IsExecutable(bin_dir / "initdb") && IsExecutable(bin_dir / "postgres");
}

// The directory that holds initdb and postgres: the one of the initdb on
// the PATH (links followed), else Debian's newest
// /usr/lib/postgresql/VERSION/bin; empty if none does.
fs::path FindBinDir() {
  std::error_code error;
  if (const char* path = getenv("PATH"); path != nullptr) {
    for (absl::string_view dir : absl::StrSplit(path, ':')) {
      const fs::path initdb = fs::path(std::string(dir)) / "initdb";
      if (!IsExecutable(initdb)) continue;
      const fs::path bin_dir = fs::canonical(initdb, error).parent_path();
      if (!error && HasServerPrograms(bin_dir)) return bin_dir;
    }
  }
  std::vector<std::pair<int, fs::path>> versions;
  for (const fs::directory_entry& entry :
       fs::directory_iterator("/usr/lib/postgresql", error)) {
    int version = 0;
    if (absl::SimpleAtoi(entry.path().filename().string(), &version)) {
      versions.emplace_back(version, entry.path() / "bin");
    }
  }
  std::sort(versions.rbegin(), versions.rend());
  for (const auto& [version, bin_dir] : versions) {
    if (HasServerPrograms(bin_dir)) return bin_dir;
  }
  return {};
}

// The last few lines of the log at `path`, for error messages.
std::string LogTail(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream content;
  content << file.rdbuf();
  const std::string text = content.str();
  return text.size() <= kLogTailBytes
             ? text
             : "..." + text.substr(text.size() - kLogTailBytes);
}

// Forks and execs `program` with `args`, in `dir`, as `uid`/`gid` (when this
// process is root), with its output appended to `log`. With
// `die_with_parent` the child gets SIGKILL when this thread ends.
absl::StatusOr<pid_t> Spawn(const fs::path& program,
                            const std::vector<std::string>& args,
                            const fs::path& dir, const fs::path& log, uid_t uid,
                            gid_t gid, bool die_with_parent) {
  std::vector<std::string> strings = {program.string()};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const int log_fd =
      open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) {
    return absl::InternalError(
        absl::StrCat("opening ", log.string(), ": ", strerror(errno)));
  }
  const bool root = getuid() == 0;
  if (root && fchown(log_fd, uid, gid) != 0) {
    close(log_fd);
    return absl::InternalError(
        absl::StrCat("chown ", log.string(), ": ", strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    if (dup2(log_fd, STDOUT_FILENO) < 0 || dup2(log_fd, STDERR_FILENO) < 0 ||
        chdir(dir.c_str()) != 0) {
      _exit(126);
    }
    if (root &&
        (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0)) {
      _exit(126);
    }
    // Set after setuid, which clears it.
    if (die_with_parent &&
        (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)) {
      _exit(126);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(log_fd);
  return pid;
}

}  // namespace

PostgresServer::PostgresServer(fs::path bin_dir, fs::path dir, uid_t uid,
                               gid_t gid)
    : bin_dir_(std::move(bin_dir)),
      dir_(std::move(dir)),
      uid_(uid),
      gid_(gid) {}

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start() {
  fs::path bin_dir = FindBinDir();
  if (bin_dir.empty()) return absl::NotFoundError(kNotFound);
  uid_t uid = getuid();
  gid_t gid = getgid();
  if (uid == 0) {
    const passwd* nobody = getpwnam("nobody");
    if (nobody == nullptr) {
      return absl::FailedPreconditionError(
          "PostgreSQL refuses to run as root, and there is no user "
          "\"nobody\" to run it as");
    }
    uid = nobody->pw_uid;
    gid = nobody->pw_gid;
  }
  std::string pattern =
      (fs::temp_directory_path() / "hypertune-pg-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("mkdtemp ", pattern, ": ", strerror(errno)));
  }
  // Removes the directory on every failure below.
  std::unique_ptr<PostgresServer> server(
      new PostgresServer(std::move(bin_dir), pattern, uid, gid));
  if (getuid() == 0 && chown(pattern.c_str(), uid, gid) != 0) {
    return absl::InternalError(
        absl::StrCat("chown ", pattern, ": ", strerror(errno)));
  }
  const fs::path log = server->dir_ / "initdb.log";
  absl::StatusOr<pid_t> initdb =
      Spawn(server->bin_dir_ / "initdb",
            {"-D", (server->dir_ / "data").string(), "--username=postgres",
             "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"},
            server->dir_, log, uid, gid, /*die_with_parent=*/false);
  if (!initdb.ok()) return initdb.status();
  int status = 0;
  if (waitpid(*initdb, &status, 0) != *initdb || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("initdb failed (wait status ",
                                            status, "): ", LogTail(log)));
  }
  if (absl::Status s = server->Launch(); !s.ok()) return s;
  return server;
}

PostgresServer::~PostgresServer() {
  if (running()) Stop().IgnoreError();
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

std::string PostgresServer::Url(const std::string& database) const {
  return absl::StrCat("postgresql:///", database, "?host=", dir_.string(),
                      "&user=postgres");
}

absl::Status PostgresServer::Launch() {
  const fs::path log = dir_ / "postgres.log";
  absl::StatusOr<pid_t> pid =
      Spawn(bin_dir_ / "postgres",
            {"-D", (dir_ / "data").string(), "-k", dir_.string(), "-c",
             "listen_addresses=", "-c", "fsync=off", "-c",
             "synchronous_commit=off", "-c", "full_page_writes=off"},
            dir_, log, uid_, gid_, /*die_with_parent=*/true);
  if (!pid.ok()) return pid.status();
  pid_ = *pid;
  const std::string url = Url();
  const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  // The server says it is ready only by answering.
  while (PQping(url.c_str()) != PQPING_OK) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      return absl::InternalError(absl::StrCat("postgres exited (wait status ",
                                              status, "): ", LogTail(log)));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::UnavailableError(
          absl::StrCat("postgres did not accept connections within ",
                       kStartTimeout.count(), " s: ", LogTail(log)));
    }
    std::this_thread::sleep_for(kPingInterval);
  }
  return absl::OkStatus();
}

absl::Status PostgresServer::Stop() {
  if (!running()) return absl::FailedPreconditionError("not running");
  const pid_t pid = pid_;
  pid_ = 0;
  // SIGINT: a fast shutdown.
  if (kill(pid, SIGINT) != 0) {
    return absl::InternalError(absl::StrCat("kill: ", strerror(errno)));
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) {
    return absl::InternalError(absl::StrCat("waitpid: ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status PostgresServer::Restart() {
  if (running()) return absl::FailedPreconditionError("already running");
  return Launch();
}

absl::StatusOr<std::string> PostgresServer::CreateDatabase(
    const std::string& name) {
  const bool plain =
      !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
      });
  if (!plain) {
    return absl::InvalidArgumentError(absl::StrCat(
        "database name '", name, "': only lower-case letters, digits and '_'"));
  }
  std::unique_ptr<PGconn, decltype(&PQfinish)> connection(
      PQconnectdb(Url().c_str()), &PQfinish);
  if (PQstatus(connection.get()) != CONNECTION_OK) {
    return absl::UnavailableError(absl::StrCat(
        "connecting to ", Url(), ": ", PQerrorMessage(connection.get())));
  }
  std::unique_ptr<PGresult, decltype(&PQclear)> result(
      PQexec(connection.get(), ("CREATE DATABASE " + name).c_str()), &PQclear);
  if (PQresultStatus(result.get()) != PGRES_COMMAND_OK) {
    return absl::InternalError(absl::StrCat("CREATE DATABASE ", name, ": ",
                                            PQerrorMessage(connection.get())));
  }
  return Url(name);
}

}  // namespace hypertune::test
