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
// Each flag is described in kUsage below, which --help prints; CLI11 parses
// them (ParseFlags), and a usage error prints the flag's fault and the usage
// and exits 2.
//
// Prints "hypertuned listening on HOST:PORT" once serving (and, with --http,
// "hypertuned: dashboard on http(s)://HOST:PORT/" before it); SIGTERM or
// SIGINT shut it down gracefully (calls in flight finish, the database is
// closed), and a shutdown that hangs is cut short after kShutdownLimit.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cassert>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "service/server/server.h"
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

// Reads the command line into `options`: nullopt to serve, else the exit
// status to return: 0 after --help, 2 after a usage error (printed with the
// usage).
std::optional<int> ParseFlags(int argc, char** argv,
                              hypertune::service::ServerOptions* options) {
  CLI::App app("the hypertune server", "hypertuned");
  // A flag given twice: the last one counts (a unit's extra flags override).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--db", options->db_path)
      ->required()
      ->check([](const std::string& path) -> std::string {
        return path.empty() ? "needs a path" : "";
      });
  app.add_option("--listen", options->listen);
  app.add_option("--advertise", options->advertise_address);
  std::string durability = "normal";
  app.add_option("--durability", durability)
      ->check(CLI::IsMember({"normal", "full"}));
  app.add_option("--auth-token-file", options->auth_token_file);
  CLI::Option* cert = app.add_option("--tls-cert", options->tls_cert_file);
  cert->needs(app.add_option("--tls-key", options->tls_key_file)->needs(cert));
  app.add_option("--tls-client-ca", options->tls_client_ca_file)->needs(cert);
  CLI::Option* http = app.add_option("--http", options->http_listen);
  app.add_flag("--http-plaintext", options->http_plaintext)
      ->disable_flag_override()
      ->needs(http);
  app.add_flag("--http-allow-writes", options->http_allow_writes)
      ->disable_flag_override()
      ->needs(http);
  for (auto [name, field] :
       {std::pair{"--http-max-connections-per-address",
                  &options->http_max_connections_per_address},
        std::pair{"--http-header-timeout-ms", &options->http_header_timeout_ms},
        std::pair{"--http-body-timeout-ms", &options->http_body_timeout_ms}}) {
    app.add_option(name, *field)
        ->check(CLI::Range(1, 100'000'000))
        ->needs(http);
  }
  // Logs are served over HTTP.
  app.add_option("--log-root", options->log_root)->needs(http);
  app.add_option("--fit-threads", options->service.fit_threads)
      ->check(CLI::Range(0, 64));
  app.add_option("--backup-dir", options->service.backup_dir);
  for (const CLI::Option* option : app.get_options()) {
    if (option == app.get_help_ptr()) continue;
    assert(std::string_view(kUsage).find(option->get_name()) !=
               std::string_view::npos &&
           "kUsage describes every flag");
  }
  auto usage_error = [](std::string_view message) {
    std::cerr << "hypertuned: " << message << "\n" << kUsage;
    return 2;
  };
  // CLI11 reads "--name=" as "--name" and takes the next token for its value.
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--") && arg.ends_with('=')) {
      return usage_error(std::string(arg) + " has no value after the \"=\"");
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << kUsage;
    return 0;
  } catch (const CLI::ParseError& e) {
    // CLI11 checks for missing flags before unknown ones, which are the
    // likelier mistake (a misspelt --db): those first.
    const std::vector<std::string> unknown = app.remaining();
    return usage_error(unknown.empty() ? e.what()
                                       : "unknown argument " + unknown.front());
  }
  options->durable_full = durability == "full";
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil checks every lock order at run time (a debug aid that
  // costs a graph update per Lock); the service's lock order is fixed by
  // design: the study's mutex, then the store's.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  hypertune::service::ServerOptions options;
  if (std::optional<int> exit_status = ParseFlags(argc, argv, &options)) {
    return *exit_status;
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
