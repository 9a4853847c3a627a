// hypertuned: the hypertune server.
//
//   hypertuned --db PATH [--listen HOST:PORT] [--advertise HOST:PORT]
//              [--durability normal|full]
//              [--auth-token-file F] [--tls-cert F --tls-key F
//              [--tls-client-ca F]] [--http HOST:PORT [--http-plaintext]
//              [--http-allow-writes] [--log-root DIR]
//              [--http-max-connections-per-address N]
//              [--http-header-timeout-ms MS] [--http-body-timeout-ms MS]]
//              [--fit-threads N] [--backup-dir DIR]
//
// Prints "hypertuned listening on HOST:PORT" once serving (and, with --http,
// "hypertuned: dashboard on http(s)://HOST:PORT/" before it); SIGTERM or
// SIGINT shut it down gracefully (calls in flight finish, the database is
// closed), and a shutdown that hangs is cut short after kShutdownLimit.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "service/server.h"
#include "storage/open_store.h"

namespace {

// How long a graceful shutdown may take: calls get 5 s to finish.
constexpr std::chrono::seconds kShutdownLimit{30};

constexpr char kUsage[] =
    "usage: hypertuned --db PATH [--listen HOST:PORT] [--advertise HOST:PORT]\n"
    "                  [--durability "
    "normal|full]\n"
    "                  [--auth-token-file F] [--tls-cert F --tls-key F "
    "[--tls-client-ca F]]\n"
    "                  [--http HOST:PORT [--http-plaintext] "
    "[--http-allow-writes]\n"
    "                   [--log-root DIR] [--http-max-connections-per-address "
    "N]\n"
    "                   [--http-header-timeout-ms MS] [--http-body-timeout-ms "
    "MS]]\n"
    "                  [--fit-threads N] [--backup-dir DIR]\n"
    "  --db PATH            SQLite database file (created if absent), or a "
    "PostgreSQL URL\n"
    "                       postgresql://USER[:PASSWORD]@HOST[:PORT]/DB (the "
    "database must\n"
    "                       exist; the schema is created and migrated)\n"
    "  --listen HOST:PORT   gRPC address (default 127.0.0.1:50051; port 0 "
    "picks one)\n"
    "  --advertise HOST:PORT\n"
    "                       the address clients dial to reach this server, "
    "which standbys\n"
    "                       name when they send clients to the leader "
    "(PostgreSQL only;\n"
    "                       default: the listen address, this machine's "
    "name for 0.0.0.0)\n"
    "  --durability MODE    normal (default; survives kill -9) or full "
    "(also survives power loss)\n"
    "  --auth-token-file F  lines \"TOKEN OWNER\" (# comments); every call "
    "then needs\n"
    "                       \"authorization: Bearer TOKEN\" and sees only its "
    "owner's studies\n"
    "  --tls-cert F         PEM certificate (chain) of the server: serve TLS\n"
    "  --tls-key F          PEM private key of that certificate\n"
    "  --tls-client-ca F    PEM CA bundle: require client certificates it "
    "signed (mutual TLS)\n"
    "  --http HOST:PORT     also serve the HTTP read API, /metrics and the "
    "dashboard\n"
    "                       (same tokens; HTTPS with the TLS certificate when "
    "there is one;\n"
    "                       default off; port 0 picks one)\n"
    "  --http-plaintext     serve --http as plain HTTP even with TLS (tokens "
    "then cross\n"
    "                       the network in the clear; prints a warning)\n"
    "  --http-allow-writes  let the dashboard stop trials, pause, resume "
    "and raise budgets\n"
    "                       without auth (loopback --http only; with "
    "--auth-token-file the\n"
    "                       study owner's token allows them anyway)\n"
    "  --http-max-connections-per-address N\n"
    "                       HTTP connections one client address may have "
    "open (default 64;\n"
    "                       more are closed at once)\n"
    "  --http-header-timeout-ms MS\n"
    "                       total time a request's headers may take, from "
    "the connection's\n"
    "                       accept or the previous answer (default 10000)\n"
    "  --http-body-timeout-ms MS\n"
    "                       total time a request's body (at most 64 KiB) may "
    "take after its\n"
    "                       headers (default 10000)\n"
    "  --log-root DIR       serve the end of trial logs found under DIR "
    "(where workers\n"
    "                       write them); default: no log serving\n"
    "  --fit-threads N      threads for GP_BANDIT's large model fits, off "
    "the request path\n"
    "                       (default 1); 0 fits on the request path: a "
    "seed and a history\n"
    "                       then always give the same suggestion\n"
    "  --backup-dir DIR     the only folder `hypertune admin backup` writes "
    "in (default:\n"
    "                       the SQLite database's folder)\n";

int UsageError(const std::string& message) {
  std::cerr << "hypertuned: " << message << "\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil checks every lock order at run time (a debug aid that
  // costs a graph update per Lock); the service's lock order is fixed by
  // design: the study's mutex, then the store's.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  hypertune::service::ServerOptions options;
  // The last HTTP limit flag given, which needs --http.
  std::string http_limit_flag;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string durability;
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--backup-dir") {
      if (!value(&options.service.backup_dir)) {
        return UsageError("--backup-dir needs a folder");
      }
    } else if (arg == "--db") {
      if (!value(&options.db_path)) return UsageError("--db needs a path");
    } else if (arg == "--listen") {
      if (!value(&options.listen))
        return UsageError("--listen needs HOST:PORT");
    } else if (arg == "--advertise") {
      if (!value(&options.advertise_address)) {
        return UsageError("--advertise needs HOST:PORT");
      }
    } else if (arg == "--durability") {
      if (!value(&durability)) return UsageError("--durability needs a mode");
      if (durability != "normal" && durability != "full") {
        return UsageError("--durability must be normal or full, got " +
                          durability);
      }
      options.durable_full = durability == "full";
    } else if (arg == "--auth-token-file") {
      if (!value(&options.auth_token_file)) {
        return UsageError("--auth-token-file needs a file");
      }
    } else if (arg == "--tls-cert") {
      if (!value(&options.tls_cert_file)) {
        return UsageError("--tls-cert needs a file");
      }
    } else if (arg == "--tls-key") {
      if (!value(&options.tls_key_file)) {
        return UsageError("--tls-key needs a file");
      }
    } else if (arg == "--tls-client-ca") {
      if (!value(&options.tls_client_ca_file)) {
        return UsageError("--tls-client-ca needs a file");
      }
    } else if (arg == "--http") {
      if (!value(&options.http_listen)) {
        return UsageError("--http needs HOST:PORT");
      }
    } else if (arg == "--http-plaintext") {
      options.http_plaintext = true;
    } else if (arg == "--http-allow-writes") {
      options.http_allow_writes = true;
    } else if (arg == "--fit-threads") {
      std::string threads;
      if (!value(&threads) ||
          !absl::SimpleAtoi(threads, &options.service.fit_threads) ||
          options.service.fit_threads < 0 || options.service.fit_threads > 64) {
        return UsageError("--fit-threads needs a number from 0 to 64, got '" +
                          threads + "'");
      }
    } else if (arg == "--http-max-connections-per-address" ||
               arg == "--http-header-timeout-ms" ||
               arg == "--http-body-timeout-ms") {
      int* field = arg == "--http-max-connections-per-address"
                       ? &options.http_max_connections_per_address
                   : arg == "--http-header-timeout-ms"
                       ? &options.http_header_timeout_ms
                       : &options.http_body_timeout_ms;
      http_limit_flag = std::string(arg);
      std::string number;
      if (!value(&number) || !absl::SimpleAtoi(number, field) || *field < 1 ||
          *field > 100'000'000) {
        return UsageError(std::string(arg) +
                          " needs a number from 1 to 100000000, got '" +
                          number + "'");
      }
    } else if (arg == "--log-root") {
      if (!value(&options.log_root)) {
        return UsageError("--log-root needs a folder");
      }
    } else {
      return UsageError("unknown argument " + std::string(arg));
    }
  }
  if (options.db_path.empty()) return UsageError("--db is required");
  if (options.http_plaintext && options.http_listen.empty()) {
    return UsageError("--http-plaintext needs --http");
  }
  if (options.http_allow_writes && options.http_listen.empty()) {
    return UsageError("--http-allow-writes needs --http");
  }
  if (!http_limit_flag.empty() && options.http_listen.empty()) {
    return UsageError(http_limit_flag + " needs --http");
  }
  if (!options.log_root.empty() && options.http_listen.empty()) {
    return UsageError("--log-root needs --http (logs are served over HTTP)");
  }

  // Signals are taken synchronously by one thread, so shutdown runs outside
  // any signal handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = hypertune::service::Server::Start(options);
  if (!server.ok()) {
    std::cerr << "hypertuned: " << server.status().message() << "\n";
    return 1;
  }
  // Before the "listening on" line, which tests and scripts wait for.
  if (!(*server)->http_address().empty()) {
    const bool tls = !options.tls_cert_file.empty();
    if (tls && options.http_plaintext) {
      std::cerr << "hypertuned: WARNING: --http-plaintext: the HTTP API on "
                << (*server)->http_address()
                << " is plain HTTP while gRPC runs TLS; bearer tokens sent "
                   "to it cross the network in the clear\n";
    }
    std::cout << "hypertuned: dashboard on "
              << (tls && !options.http_plaintext ? "https://" : "http://")
              << (*server)->http_address() << "/" << std::endl;
  }
  std::cout << "hypertuned listening on " << (*server)->address()
            << " (database "
            << hypertune::storage::DisplayLocation(options.db_path)
            << (options.auth_token_file.empty() ? "" : ", token auth")
            << (options.tls_cert_file.empty()        ? ", plaintext"
                : options.tls_client_ca_file.empty() ? ", TLS"
                                                     : ", mutual TLS")
            << ")" << std::endl;
  if (!(*server)->leading()) {
    std::cout << "hypertuned: a standby on this database (another "
                 "hypertuned leads it); calls are refused until it takes "
                 "over"
              << std::endl;
  }

  std::thread signal_waiter([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    std::cout << "hypertuned: " << strsignal(signal) << ", shutting down"
              << std::endl;
    // Everything acknowledged is in the database already: a shutdown stuck
    // on a call that will not end must not keep the process (and its port
    // and database) alive.
    std::thread([] {
      std::this_thread::sleep_for(kShutdownLimit);
      std::cerr << "hypertuned: shutdown did not finish within "
                << kShutdownLimit.count() << " s; exiting" << std::endl;
      std::_Exit(1);
    }).detach();
    (*server)->Shutdown();
  });
  (*server)->Wait();
  const absl::Status lost = (*server)->lost_lead();
  // Stopped on its own: wake the signal waiter.
  if (!lost.ok()) kill(getpid(), SIGTERM);
  signal_waiter.join();
  server->reset();
  if (!lost.ok()) {
    std::cerr << "hypertuned: stopped: lost the database's lead ("
              << lost.message() << "); start it again to serve as a standby"
              << std::endl;
    return 3;
  }
  std::cout << "hypertuned: stopped" << std::endl;
  return 0;
}
