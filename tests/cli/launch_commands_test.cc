#include "cli/launch_commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/args.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hypertune::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ParseSlurmTime, AcceptsSlurmsFormats) {
  EXPECT_EQ(*ParseSlurmTime("30"), 30 * 60);
  EXPECT_EQ(*ParseSlurmTime("30:15"), 30 * 60 + 15);
  EXPECT_EQ(*ParseSlurmTime("2:00:05"), 2 * 3600 + 5);
  EXPECT_EQ(*ParseSlurmTime("1-12"), 36 * 3600);
  EXPECT_EQ(*ParseSlurmTime("1-0:30"), 86400 + 30 * 60);
  EXPECT_EQ(*ParseSlurmTime("1-0:0:9"), 86400 + 9);
  EXPECT_EQ(*ParseSlurmTime("UNLIMITED"), -1);
  EXPECT_EQ(*ParseSlurmTime("infinite"), -1);
  EXPECT_EQ(*ParseSlurmTime("0"), -1);
}

TEST(ParseSlurmTime, RefusesOtherText) {
  for (const char* bad : {"", "1h", "-5", "1-", "1:2:3:4", "1-2:3:4:5", "a:b",
                          "1.5", " 10", "1--2", "1-2-3"}) {
    absl::StatusOr<int64_t> seconds = ParseSlurmTime(bad);
    ASSERT_FALSE(seconds.ok()) << bad;
    EXPECT_THAT(seconds.status().message(), HasSubstr("--time"));
  }
}

TEST(ShellQuote, LeavesPlainWordsAndQuotesTheRest) {
  EXPECT_EQ(ShellQuote("build/bin/hypertune"), "build/bin/hypertune");
  EXPECT_EQ(ShellQuote("--array=0-3"), "--array=0-3");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("{lr}"), "'{lr}'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("$HOME"), "'$HOME'");
  EXPECT_EQ(ShellQuote("~"), "'~'");
  EXPECT_EQ(ShellJoin({"echo", "a b", "c"}), "echo 'a b' c");
}

TEST(IsLoopbackServer, KnowsLoopbackHosts) {
  EXPECT_TRUE(IsLoopbackServer("127.0.0.1:50051"));
  EXPECT_TRUE(IsLoopbackServer("localhost:1"));
  EXPECT_TRUE(IsLoopbackServer("[::1]:50051"));
  EXPECT_TRUE(IsLoopbackServer("localhost"));
  EXPECT_FALSE(IsLoopbackServer("login1:50051"));
  EXPECT_FALSE(IsLoopbackServer("10.0.0.5:50051"));
  EXPECT_FALSE(IsLoopbackServer("127.0.0.1:50051,db2:50051"));
}

absl::StatusOr<SlurmLaunchOptions> Parse(std::vector<std::string> args) {
  return ParseSlurmLaunchArgs(args);
}

TEST(ParseSlurmLaunchArgs, BuildsTheWorkersCommandLine) {
  absl::StatusOr<SlurmLaunchOptions> options =
      Parse({"slurm",
             "study1",
             "--workers",
             "4",
             "--gpus-per-worker",
             "2",
             "--time",
             "1:00:00",
             "--partition",
             "gpu",
             "--sbatch-arg",
             "--mem=8G",
             "--sbatch-arg=--account=ml",
             "--timeout",
             "600",
             "--log-dir",
             "logs",
             "--",
             "train.py",
             "--lr",
             "{lr}"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->study, "study1");
  EXPECT_EQ(options->workers, 4);
  EXPECT_EQ(options->gpus_per_worker, 2);
  EXPECT_EQ(options->time_seconds, 3600);
  EXPECT_EQ(options->notice_seconds, 120);
  EXPECT_THAT(options->sbatch_args, ElementsAre("--mem=8G", "--account=ml"));
  EXPECT_THAT(options->command, ElementsAre("train.py", "--lr", "{lr}"));
  // The worker flags keep their order of kWorkerFlags, not the user's.
  EXPECT_THAT(
      options->worker_args,
      ElementsAre("study1", "--parallel", "1", "--log-dir", "logs", "--timeout",
                  "600", "--", "train.py", "--lr", "{lr}"));
  EXPECT_FALSE(options->dry_run);
  EXPECT_EQ(options->script_dir, "hypertune-slurm/study1");
}

TEST(ParseSlurmLaunchArgs, NamesTheBadFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"slurm", "s", "--", "x"}, "--workers"},
      {{"slurm", "s", "--workers", "0", "--", "x"}, "--workers"},
      {{"slurm", "s", "--workers", "two", "--", "x"}, "--workers"},
      {{"slurm", "s", "--workers", "2", "--gpus-per-worker", "-1", "--", "x"},
       "--gpus-per-worker"},
      {{"slurm", "s", "--workers", "2", "--time", "1h", "--", "x"}, "--time"},
      {{"slurm", "s", "--workers", "2", "--time", "2", "--notice", "120", "--",
        "x"},
       "--notice"},
      {{"slurm", "s", "--workers", "2", "--notice", "70000", "--", "x"},
       "--notice"},
      {{"slurm", "s", "--workers", "2", "--timeout", "soon", "--", "x"},
       "--timeout"},
      {{"slurm", "s", "--workers", "2", "--max-trials", "0", "--", "x"},
       "--max-trials"},
      {{"slurm", "s", "--workers", "2", "--parallel", "4", "--", "x"},
       "--parallel"},
      {{"slurm", "s", "--workers", "2"}, "\"--\""},
      {{"slurm", "s", "--workers", "2", "--"}, "\"--\""},
      {{"slurm", "--workers", "2", "--", "x"}, "study NAME"},
      {{"kubernetes", "s", "--workers", "2", "--", "x"}, "unknown scheduler"},
      {{"slurm", "s", "--workers", "2", "--sbatch-arg=", "--", "x"},
       "--sbatch-arg"},
  };
  for (const auto& [args, flag] : cases) {
    absl::StatusOr<SlurmLaunchOptions> options = Parse(args);
    ASSERT_FALSE(options.ok()) << absl::StrJoin(args, " ");
    EXPECT_TRUE(IsUsageError(options.status())) << options.status();
    EXPECT_THAT(options.status().message(), HasSubstr(flag))
        << absl::StrJoin(args, " ");
  }
}

SlurmJobContext Context(std::string hypertune = "/opt/ht/bin/hypertune") {
  SlurmJobContext context;
  context.hypertune = std::move(hypertune);
  context.global_flags = {"--server", "login1:50051"};
  context.work_dir = "/home/me/project";
  context.script_dir = "/home/me/project/hypertune-slurm/s1";
  return context;
}

TEST(SbatchCommand, MapsFlagsToSbatchArguments) {
  absl::StatusOr<SlurmLaunchOptions> options =
      Parse({"slurm", "s1", "--workers", "4", "--gpus-per-worker", "1",
             "--time", "30", "--notice", "300", "--partition", "spot",
             "--sbatch-arg", "--mem=4G", "--", "x"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_THAT(
      SbatchCommand(*options, Context()),
      ElementsAre("sbatch", "--parsable", "--job-name=hypertune-s1",
                  "--array=0-3", "--signal=B:TERM@300", "--requeue",
                  "--chdir=/home/me/project",
                  "--output=/home/me/project/hypertune-slurm/s1/"
                  "worker-%A_%a.out",
                  "--time=30", "--partition=spot", "--gres=gpu:1", "--mem=4G",
                  "/home/me/project/hypertune-slurm/s1/worker.sh"));

  options = Parse({"slurm", "s1", "--workers", "1", "--", "x"});
  ASSERT_TRUE(options.ok()) << options.status();
  SlurmJobContext context = Context();
  context.script_dir = "/data/100%";
  std::vector<std::string> argv = SbatchCommand(*options, context);
  EXPECT_THAT(argv,
              ElementsAre("sbatch", "--parsable", "--job-name=hypertune-s1",
                          "--array=0-0", "--signal=B:TERM@120", "--requeue",
                          "--chdir=/home/me/project",
                          "--output=/data/100%%/worker-%A_%a.out",
                          "/data/100%/worker.sh"));
}

TEST(SlurmBatchScript, ExecsTheWorkerWithoutAToken) {
  absl::StatusOr<SlurmLaunchOptions> options =
      Parse({"slurm", "s1", "--workers", "2", "--", "train", "{lr}"});
  ASSERT_TRUE(options.ok()) << options.status();
  const std::string script = SlurmBatchScript(*options, Context());
  EXPECT_THAT(script, HasSubstr("#!/bin/bash\n"));
  EXPECT_THAT(script,
              HasSubstr("\nexec /opt/ht/bin/hypertune --server login1:50051 "
                        "worker s1 --parallel 1 -- train '{lr}'\n"));
  EXPECT_THAT(script, HasSubstr("unset HYPERTUNE_TRIAL_ID"));
  EXPECT_THAT(script, Not(HasSubstr("--token")));
}

// Runs `script` with bash; returns what it printed.
std::string RunBash(const std::string& script_path) {
  std::string command =
      absl::StrCat("env -u SLURM_ARRAY_JOB_ID bash ", ShellQuote(script_path));
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out.append(buffer, n);
  pclose(pipe);
  return out;
}

// The script, run by bash, gives the worker exactly the arguments given:
// the quoting survives spaces, quotes, $, backslashes, globs, line breaks.
TEST(SlurmBatchScript, QuotingSurvivesBash) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      absl::StrCat("launch_test_", getpid(), " dir's $x");
  std::filesystem::create_directories(dir);
  // A stand-in for hypertune that prints its arguments, NUL-terminated.
  const std::filesystem::path fake = dir / "fake hypertune";
  {
    std::ofstream file(fake);
    file << "#!/bin/bash\nprintf '%s\\0' \"$@\"\n";
  }
  chmod(fake.c_str(), 0755);
  const std::vector<std::string> awkward = {
      "prog",        "two words", "it's",        "say \"hi\"", "$HOME",
      "$(touch x)",  "`id`",      "back\\slash", "*",          "",
      "line\nbreak", "{lr}",      "--x={lr}",    "~",          "a;b|c&d",
      "'",           "!event",    "tab\there"};
  std::vector<std::string> args = {"slurm",     "s1",        "--workers", "1",
                                   "--log-dir", "logs $dir", "--"};
  args.insert(args.end(), awkward.begin(), awkward.end());
  absl::StatusOr<SlurmLaunchOptions> options = Parse(args);
  ASSERT_TRUE(options.ok()) << options.status();
  SlurmJobContext context = Context(fake.string());
  context.global_flags = {"--server", "host:1", "--tls-ca", "/certs/a b.pem"};
  const std::filesystem::path script = dir / "worker.sh";
  {
    std::ofstream file(script);
    file << SlurmBatchScript(*options, context);
  }
  const std::string out = RunBash(script.string());
  const size_t banner_end = out.find('\n');
  ASSERT_NE(banner_end, std::string::npos) << out;
  EXPECT_THAT(out.substr(0, banner_end), HasSubstr("[hypertune launch] task"));
  std::vector<std::string> got =
      absl::StrSplit(out.substr(banner_end + 1), '\0');
  ASSERT_FALSE(got.empty());
  got.pop_back();  // After the last NUL.
  std::vector<std::string> expected = {
      "--server",   "host:1", "--tls-ca",  "/certs/a b.pem", "worker", "s1",
      "--parallel", "1",      "--log-dir", "logs $dir",      "--"};
  expected.insert(expected.end(), awkward.begin(), awkward.end());
  EXPECT_EQ(got, expected);
  EXPECT_FALSE(std::filesystem::exists(dir / "x"));
  std::filesystem::remove_all(dir);
}

// A line break in user text cannot end the script's comment and run.
TEST(SlurmBatchScript, CommentsStayComments) {
  absl::StatusOr<SlurmLaunchOptions> options =
      Parse({"slurm", "s1", "--workers", "1", "--sbatch-arg",
             "--comment=a\ntouch /tmp/pwned", "--", "x"});
  ASSERT_TRUE(options.ok()) << options.status();
  const std::string script = SlurmBatchScript(*options, Context());
  for (absl::string_view line : absl::StrSplit(script, '\n')) {
    EXPECT_FALSE(absl::StartsWith(line, "touch")) << script;
  }
}

}  // namespace
}  // namespace hypertune::cli
