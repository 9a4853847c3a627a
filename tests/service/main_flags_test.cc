// hypertuned's command line (service/server/main.cc), run as a process: a usage
// error exits 2 with a message naming the flag and the usage, starting
// nothing; --help prints the usage; every flag the usage lists starts a
// server when given well.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/test_server.h"

namespace hypertune {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Every flag of hypertuned, as its usage names it.
const char* const kFlags[] = {"--db",
                              "--listen",
                              "--advertise",
                              "--durability",
                              "--auth-token-file",
                              "--tls-cert",
                              "--tls-key",
                              "--tls-client-ca",
                              "--http",
                              "--http-plaintext",
                              "--http-allow-writes",
                              "--http-max-connections-per-address",
                              "--http-header-timeout-ms",
                              "--http-body-timeout-ms",
                              "--log-root",
                              "--fit-threads",
                              "--backup-dir"};

const char* const kHttpLimits[] = {"--http-max-connections-per-address",
                                   "--http-header-timeout-ms",
                                   "--http-body-timeout-ms"};

struct Outcome {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `hypertuned ARGS...` to its end (none of these serve).
Outcome Hypertuned(const std::vector<std::string>& args,
                   const test::TempDir& dir) {
  const std::string err_file = dir.File("stderr.txt");
  std::string command = HYPERTUNED_PATH;
  for (const std::string& arg : args)
    absl::StrAppend(&command, " ", test::ShellQuote(arg));
  absl::StrAppend(&command, " 2>", test::ShellQuote(err_file));
  Outcome run;
  run.exit_code = test::RunShell(command, &run.out, /*stderr_too=*/false);
  std::ifstream err(err_file);
  std::stringstream text;
  text << err.rdbuf();
  run.err = text.str();
  return run;
}

TEST(HypertunedFlags, UsageErrorsNameTheFlagAndExitTwo) {
  test::TempDir dir;
  const std::string db = dir.File("never.db");
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{}, "--db is required"},
      {{"--listen", "127.0.0.1:0"}, "--db is required"},
      {{"--db"}, "--db"},
      {{"--db", ""}, "--db"},
      {{"--db", db, "--bogus"}, "unknown argument --bogus"},
      {{"--dbb", db}, "unknown argument --dbb"},
      {{"--db", db, "stray"}, "unknown argument stray"},
      {{"--db", db, "--listen"}, "--listen"},
      {{"--db=", db}, "--db= has no value"},
      {{"--db", db, "--log-root=", "--http", "127.0.0.1:0"},
       "--log-root= has no value"},
      {{"--db", db, "--durability", "fast"}, "--durability"},
      {{"--db", db, "--durability", "FULL"}, "--durability"},
      {{"--db", db, "--fit-threads", "65"}, "--fit-threads"},
      {{"--db", db, "--fit-threads", "-1"}, "--fit-threads"},
      {{"--db", db, "--fit-threads", "two"}, "--fit-threads"},
      {{"--db", db, "--http-plaintext"}, "--http-plaintext requires --http"},
      {{"--db", db, "--http-allow-writes"},
       "--http-allow-writes requires --http"},
      {{"--db", db, "--http-plaintext=0", "--http", "127.0.0.1:0"},
       "http-plaintext"},
      {{"--db", db, "--log-root", dir.path().string()},
       "--log-root requires --http"},
      {{"--db", db, "--tls-key", "k.pem"}, "--tls-key requires --tls-cert"},
      {{"--db", db, "--tls-cert", "c.pem"}, "--tls-cert requires --tls-key"},
      {{"--db", db, "--tls-client-ca", "ca.pem"},
       "--tls-client-ca requires --tls-cert"},
  };
  for (const char* limit : kHttpLimits) {
    cases.push_back(
        {{"--db", db, limit, "5"}, absl::StrCat(limit, " requires --http")});
    for (const char* bad : {"0", "100000001", "ten"}) {
      cases.push_back(
          {{"--db", db, "--http", "127.0.0.1:0", limit, bad}, limit});
    }
  }
  for (const Case& c : cases) {
    const Outcome run = Hypertuned(c.args, dir);
    SCOPED_TRACE(c.message);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_THAT(run.err, StartsWith("hypertuned: "));
    const std::string first_line = run.err.substr(0, run.err.find('\n'));
    EXPECT_THAT(first_line, HasSubstr(c.message));
    EXPECT_THAT(run.err, HasSubstr("\nusage: hypertuned --db PATH"));
    EXPECT_EQ(run.out, "");
    EXPECT_FALSE(std::filesystem::exists(db)) << "a usage error served";
  }
}

TEST(HypertunedFlags, HelpPrintsTheUsageOfEveryFlag) {
  test::TempDir dir;
  for (const char* help : {"--help", "-h"}) {
    const Outcome run = Hypertuned({help}, dir);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.err, "");
    EXPECT_THAT(run.out, StartsWith("usage: hypertuned --db PATH"));
    for (const char* flag : kFlags) {
      // Each in the synopsis and again with its description.
      const size_t first = run.out.find(flag);
      EXPECT_NE(first, std::string::npos) << flag;
      EXPECT_NE(run.out.find(absl::StrCat("\n  ", flag, " "), first),
                std::string::npos)
          << flag << " has no description";
    }
  }
}

TEST(HypertunedFlags, EveryFlagGivenWellServes) {
  test::TempDir dir;
  const std::string tokens = dir.File("tokens.txt");
  std::ofstream(tokens) << "secret-token alice\n";
  std::filesystem::create_directory(dir.File("logs"));
  test::ServerProcessOptions options;
  options.program = HYPERTUNED_PATH;
  options.db_path = dir.File("studies.db");
  // Not an address: the --listen given last counts.
  options.listen = "not-an-address";
  options.extra_args = {"--listen",
                        "127.0.0.1:0",
                        "--advertise=127.0.0.1:50051",
                        "--durability",
                        "full",
                        "--auth-token-file",
                        tokens,
                        "--http",
                        "127.0.0.1:0",
                        "--http-plaintext",
                        "--http-allow-writes",
                        "--http-max-connections-per-address",
                        "8",
                        "--http-header-timeout-ms=5000",
                        "--http-body-timeout-ms",
                        "100000000",
                        "--log-root",
                        dir.File("logs"),
                        "--fit-threads",
                        "0",
                        "--backup-dir",
                        dir.path().string()};
  auto server = test::ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->address(), StartsWith("127.0.0.1:"));
  EXPECT_TRUE(std::filesystem::exists(options.db_path));
}

}  // namespace
}  // namespace hypertune
