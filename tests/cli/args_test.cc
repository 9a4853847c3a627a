#include "cli/args.h"

#include "cli/worker/worker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hypertune::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<FlagSpec> kFlags = {
    {"count"}, {"state", true, true}, {"verbose", false}};

TEST(ParseArgs, FlagsAndPositionals) {
  auto parsed = ParseArgs({"study", "--count", "3", "--state=ACTIVE", "x=1",
                           "--state", "FAILED", "--verbose", "-5"},
                          kFlags);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->positional, ElementsAre("study", "x=1", "-5"));
  EXPECT_EQ(parsed->Get("count"), "3");
  EXPECT_THAT(parsed->GetAll("state"), ElementsAre("ACTIVE", "FAILED"));
  EXPECT_TRUE(parsed->Has("verbose"));
  EXPECT_FALSE(parsed->Has("nothing"));
  EXPECT_EQ(parsed->Get("nothing"), std::nullopt);
  EXPECT_FALSE(parsed->has_separator);
}

TEST(ParseArgs, SeparatorKeepsTheRestVerbatim) {
  auto parsed =
      ParseArgs({"s", "--count=2", "--", "train", "--count", "--", "{lr}"},
                kFlags, /*allow_separator=*/true);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->positional, ElementsAre("s"));
  EXPECT_THAT(parsed->rest, ElementsAre("train", "--count", "--", "{lr}"));
  EXPECT_TRUE(parsed->has_separator);
}

TEST(ParseArgs, ValuesAndNumbers) {
  // A value is the next token whatever it looks like; "=" splits at the
  // first "="; every number is a positional, "-.5" and "-inf" too.
  auto parsed = ParseArgs({"--count", "--verbose", "--state=a=b", "--state",
                           "-x", "-.5", "-inf", "-", "--", "--count"},
                          kFlags, /*allow_separator=*/true);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Get("count"), "--verbose");
  EXPECT_FALSE(parsed->Has("verbose"));
  EXPECT_THAT(parsed->GetAll("state"), ElementsAre("a=b", "-x"));
  EXPECT_THAT(parsed->positional, ElementsAre("-.5", "-inf", "-"));
  EXPECT_THAT(parsed->rest, ElementsAre("--count"));
  // "--count=" is the empty value (CLI11 alone would take the next token).
  auto empty = ParseArgs({"--count=", "--", "--count=", "--state="}, kFlags,
                         /*allow_separator=*/true);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->Get("count"), "");
  EXPECT_FALSE(empty->Has("state"));
  EXPECT_THAT(empty->rest, ElementsAre("--count=", "--state="));
  auto flag = ParseArgs({"--verbose", "s"}, kFlags);
  ASSERT_TRUE(flag.ok()) << flag.status();
  EXPECT_THAT(flag->GetAll("verbose"), ElementsAre(""));
  EXPECT_THAT(flag->positional, ElementsAre("s"));
}

TEST(ParseArgs, UsageErrors) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  for (const Case& c : {
           Case{{"--bogus"}, "unknown flag --bogus"},
           Case{{"s", "--bogus=1"}, "unknown flag --bogus"},
           Case{{"-x"}, "unknown flag -x"},
           Case{{"--count"}, "--count needs a value"},
           Case{{"--verbose=1"}, "--verbose takes no value"},
           Case{{"--verbose="}, "--verbose takes no value"},
           Case{{"--bogus="}, "unknown flag --bogus"},
           Case{{"--count", "1", "--count", "2"}, "--count is given twice"},
           Case{{"--verbose", "--verbose"}, "--verbose is given twice"},
           Case{{"--state", "a", "--count"}, "--count needs a value"},
           Case{{"--"}, "unexpected \"--\""},
       }) {
    auto parsed = ParseArgs(c.args, kFlags);
    ASSERT_FALSE(parsed.ok()) << c.message;
    EXPECT_TRUE(IsUsageError(parsed.status()));
    EXPECT_EQ(parsed.status().message(), c.message);
  }
}

TEST(ParseArgs, TypedGetters) {
  auto parsed = ParseArgs({"--count", "12"}, kFlags);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed->GetInt("count", 1, 1), 12);
  EXPECT_EQ(*parsed->GetInt("absent", 7, 1), 7);
  auto low = parsed->GetInt("count", 1, 100);
  ASSERT_FALSE(low.ok());
  EXPECT_TRUE(IsUsageError(low.status()));
  EXPECT_THAT(std::string(low.status().message()),
              HasSubstr("--count: \"12\" is not an integer >= 100"));

  auto bad = ParseArgs({"--count", "ten"}, kFlags);
  EXPECT_FALSE(bad->GetInt("count", 1, 1).ok());
  auto seconds = ParseArgs({"--count", "2.5"}, kFlags);
  EXPECT_EQ(**seconds->GetPositiveDouble("count"), 2.5);
  auto zero = ParseArgs({"--count", "0"}, kFlags);
  EXPECT_FALSE(zero->GetPositiveDouble("count").ok());
}

TEST(UsageError, IsMarkedAndKeepsItsMessage) {
  absl::Status usage = UsageError("bad flag");
  EXPECT_TRUE(IsUsageError(usage));
  EXPECT_EQ(usage.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(usage.message(), "bad flag");
  EXPECT_FALSE(IsUsageError(absl::InvalidArgumentError("from the server")));
  EXPECT_TRUE(IsUsageError(AsUsageError(absl::InvalidArgumentError("x"))));
  EXPECT_FALSE(IsUsageError(AsUsageError(absl::NotFoundError("x"))));
}

TEST(ParseWorkerArgs, FullCommandLine) {
  auto options = ParseWorkerArgs(
      {"mnist", "--parallel", "4", "--max-trials", "10", "--timeout", "1.5",
       "--log-dir", "/tmp/l", "--", "python", "train.py", "--lr", "{lr}"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->study, "mnist");
  EXPECT_EQ(options->parallel, 4);
  EXPECT_EQ(options->max_trials, 10);
  EXPECT_EQ(options->timeout_seconds, 1.5);
  EXPECT_EQ(options->log_dir, "/tmp/l");
  EXPECT_THAT(options->command,
              ElementsAre("python", "train.py", "--lr", "{lr}"));
}

TEST(ParseWorkerArgs, OneSlotPerGpu) {
  auto options =
      ParseWorkerArgs({"mnist", "--gpus", "0,1,GPU-8f1e-22", "--", "./train"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->parallel, 3);
  EXPECT_THAT(options->gpus, ElementsAre("0", "1", "GPU-8f1e-22"));
  options = ParseWorkerArgs(
      {"mnist", "--gpus", "2", "--parallel", "1", "--", "./train"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_THAT(options->gpus, ElementsAre("2"));
}

TEST(ParseWorkerArgs, Defaults) {
  auto options = ParseWorkerArgs({"mnist", "--", "./train"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->parallel, 1);
  EXPECT_EQ(options->max_trials, std::nullopt);
  EXPECT_EQ(options->timeout_seconds, std::nullopt);
  EXPECT_EQ(options->log_dir, "hypertune-logs/mnist");
}

TEST(ParseWorkerArgs, MaxConsecutiveFailures) {
  EXPECT_EQ(ParseWorkerArgs({"s", "--", "x"})->max_consecutive_failures, 5);
  auto options =
      ParseWorkerArgs({"s", "--max-consecutive-failures", "0", "--", "x"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->max_consecutive_failures, 0);
  EXPECT_FALSE(
      ParseWorkerArgs({"s", "--max-consecutive-failures", "-2", "--", "x"})
          .ok());
}

TEST(ParseWorkerArgs, EarlyFailures) {
  EXPECT_EQ(ParseWorkerArgs({"s", "--", "x"})->early_failures, 3);
  auto options = ParseWorkerArgs({"s", "--early-failures", "0", "--", "x"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->early_failures, 0);
  options = ParseWorkerArgs({"s", "--early-failures", "7", "--", "x"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->early_failures, 7);
  EXPECT_FALSE(
      ParseWorkerArgs({"s", "--early-failures", "-1", "--", "x"}).ok());
}

TEST(ParseWorkerArgs, UsageErrors) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  for (const Case& c : {
           Case{{"--", "x"}, "worker needs a study NAME"},
           Case{{"s"}, "worker needs a command after \"--\""},
           // The review's `hypertune worker ..`: its log would have left
           // hypertune-logs/.
           Case{{"..", "--", "x"}, "is not a study name"},
           Case{{".", "--", "x"}, "is not a study name"},
           Case{{"a/../../etc", "--", "x"}, "is not a study name"},
           Case{{"s", "--"}, "worker needs a command after \"--\""},
           Case{{"s", "train.py", "--", "x"}, "put the command after \"--\""},
           Case{{"s", "--parallel", "0", "--", "x"}, "--parallel"},
           Case{{"s", "--max-trials", "-1", "--", "x"}, "--max-trials"},
           Case{{"s", "--timeout", "soon", "--", "x"}, "--timeout"},
           Case{{"s", "--gpus", "0,,1", "--", "x"}, "--gpus"},
           Case{{"s", "--gpus", "0;rm", "--", "x"}, "--gpus"},
           Case{{"s", "--gpus", "0,1", "--parallel", "3", "--", "x"},
                "--parallel"},
       }) {
    auto options = ParseWorkerArgs(c.args);
    ASSERT_FALSE(options.ok());
    EXPECT_TRUE(IsUsageError(options.status())) << options.status();
    EXPECT_THAT(std::string(options.status().message()), HasSubstr(c.message));
  }
}

TEST(ProgramEnvironment, SetsAndReplaces) {
  std::vector<std::string> env = ProgramEnvironment(
      {"PATH=/bin", "HYPERTUNE_TRIAL_ID=99", "HYPERTUNE_TRIAL_ID_X=keep",
       "HOME=/root"},
      {{"HYPERTUNE_TRIAL_ID", "3"}, {"HYPERTUNE_PARAMS", "{\"a\":1}"}});
  EXPECT_THAT(
      env, ElementsAre("PATH=/bin", "HYPERTUNE_TRIAL_ID_X=keep", "HOME=/root",
                       "HYPERTUNE_TRIAL_ID=3", "HYPERTUNE_PARAMS={\"a\":1}"));
}

}  // namespace
}  // namespace hypertune::cli

namespace hypertune::cli {
namespace {

TEST(CheckProgram, FindsExecutablesDirectlyOrInPath) {
  EXPECT_TRUE(CheckProgram("/bin/sh").ok());
  EXPECT_TRUE(CheckProgram("sh").ok());
  EXPECT_TRUE(CheckProgram("{program}").ok());
  absl::Status missing = CheckProgram("./surely-not-here");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()),
              HasSubstr("cannot run \"./surely-not-here\""));
  EXPECT_EQ(CheckProgram("surely-not-in-path-either").code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(CheckProgram("/").code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace hypertune::cli
