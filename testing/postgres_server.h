// PostgresServer: a throwaway PostgreSQL server for tests, in a temporary
// directory of its own.
//
// Start runs initdb and then the postgres server from Debian's
// postgresql package (/usr/lib/postgresql/VERSION/bin, or initdb on the
// PATH). The server listens only on a Unix socket in that directory (no TCP
// port, so servers of concurrent tests never collide), trusts local
// connections as user "postgres", and skips fsync: its data need not
// survive a crash of the machine. PostgreSQL refuses to run as root; as
// root, initdb and the server run as user "nobody", which owns the
// directory. Destroying the PostgresServer stops the server and removes the
// directory.
//
// The server is a child process that gets SIGKILL when the thread that
// started it ends (PR_SET_PDEATHSIG), so a crashed test leaves no server
// behind: start it from a thread that outlives it (the main thread, for a
// server shared by a test binary).
//
// Thread safety: Url may be called from any thread; the other methods from
// one thread at a time.
#ifndef HYPERTUNE_TESTING_POSTGRES_SERVER_H_
#define HYPERTUNE_TESTING_POSTGRES_SERVER_H_

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hypertune::test {

class PostgresServer {
 public:
  // What tests print when they skip for want of a server.
  static constexpr char kNotFound[] =
      "PostgreSQL not found (apt-get install postgresql)";

  // Initializes a database cluster in a new temporary directory and starts
  // a server on it; returns once it accepts connections. NOT_FOUND (saying
  // kNotFound) if the PostgreSQL programs are not installed; other failures
  // quote the log of the program that failed.
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Start();

  // Stops the server if it runs and removes the directory.
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // The URL of `database` on this server, for libpq and PostgresStore:
  // postgresql:///DATABASE?host=SOCKET_DIR&user=postgres.
  std::string Url(const std::string& database = "postgres") const;

  // Creates database `name` (letters, digits and '_') and returns its URL.
  absl::StatusOr<std::string> CreateDatabase(const std::string& name);

  // Stops the server (a fast shutdown: open connections are cut), keeping
  // its data: connections fail until Restart.
  absl::Status Stop();
  // Starts the server again on the same data and socket.
  absl::Status Restart();
  bool running() const { return pid_ > 0; }

 private:
  PostgresServer(std::filesystem::path bin_dir, std::filesystem::path dir,
                 uid_t uid, gid_t gid);

  // Runs the postgres server and waits until it accepts connections.
  absl::Status Launch();

  const std::filesystem::path bin_dir_;
  // The temporary directory: data/ and the socket.
  const std::filesystem::path dir_;
  // Who the programs run as: "nobody" when this process is root, else
  // this process's own user.
  const uid_t uid_;
  const gid_t gid_;
  // The server's process id; 0 while it is stopped.
  pid_t pid_ = 0;
};

}  // namespace hypertune::test

#endif  // HYPERTUNE_TESTING_POSTGRES_SERVER_H_
