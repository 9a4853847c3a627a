// The study and trial commands as a user runs them: the built `hypertune`
// against a hypertuned process (loopback, temporary SQLite file). A config
// with several mistakes gets all of them in one answer, a key given twice is
// refused, and `study create|get|best` and `trials` print one format by
// default (a table), with JSON whose integers are numbers on request
// (issue 47 item 9).

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/test_server.h"

namespace hypertune {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

class CommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::ServerProcessOptions options;
    options.program = HYPERTUNED_PATH;
    options.db_path = dir_.File("studies.db");
    auto server = test::ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  // `hypertune --server ADDRESS ARGS...`: its exit status; its stdout and
  // stderr together in `out`.
  int Cli(const std::vector<std::string>& args, std::string* out) {
    std::string command =
        absl::StrCat(HYPERTUNE_CLI_PATH, " --server ", server_->address());
    for (const std::string& arg : args) {
      absl::StrAppend(&command, " ", test::ShellQuote(arg));
    }
    return test::RunShell(command, out);
  }

  // Writes `text` to a file of the test's directory; its path.
  std::string Config(const std::string& name, const std::string& text) {
    const std::string path = dir_.File(name);
    std::ofstream(path) << text;
    return path;
  }

  // `study list`'s text: the studies there are.
  std::string Studies() {
    std::string out;
    EXPECT_EQ(Cli({"study", "list"}, &out), 0) << out;
    return out;
  }

  test::TempDir dir_;
  std::unique_ptr<test::ServerProcess> server_;
};

TEST_F(CommandsTest, EveryMistakeOfAConfigInOneAnswer) {
  // The newcomer's three typos, which took three runs to find.
  const std::string path = Config("typos.json", R"({
  "nmae": "typos",
  "spec": {
    "parameters": [{"name": "lr", "double_spec": {"min": 1e-4, "max": 0.1}}],
    "metrics": [{"name": "loss", "goal": "MINIMISE"}],
    "max_trail": 10
  }
})");
  std::string out;
  EXPECT_EQ(Cli({"study", "create", "--config", path}, &out), 1) << out;
  EXPECT_THAT(out, StartsWith(absl::StrCat("error: INVALID_ARGUMENT: ", path,
                                           ": 4 problems:\n")));
  for (const char* problem :
       {"\n  nmae: unknown field \"nmae\" (did you mean \"name\"?)\n",
        "\n  spec.metrics[0] (\"loss\").goal: unknown Goal string "
        "\"MINIMISE\" (one of MAXIMIZE, MINIMIZE)\n",
        "\n  spec.max_trail: unknown field \"max_trail\" (did you mean "
        "\"max_trials\"?)\n",
        "\n  name: missing: the study's name\n"}) {
    EXPECT_THAT(out, HasSubstr(problem));
  }
  EXPECT_THAT(Studies(), Not(HasSubstr("typos")));
}

TEST_F(CommandsTest, AKeyGivenTwiceIsRefusedNamingBoth) {
  const std::string body = R"(
    "parameters": [{"name": "x", "double_spec": {"min": 0, "max": 1}}],
    "metrics": [{"name": "loss", "goal": "MINIMIZE"}]}})";
  std::string out;
  EXPECT_EQ(Cli({"study", "create", "--config",
                 Config("both.json", R"({"name": "both", "spec": {
                     "maxTrials": 10, "max_trials": 20,)" +
                                         body)},
                &out),
            1);
  EXPECT_THAT(out, HasSubstr(": spec: \"maxTrials\" and \"max_trials\" both "
                             "set max_trials; keep one\n"));
  EXPECT_EQ(Cli({"study", "create", "--config",
                 Config("twice.json", R"({"name": "twice", "spec": {
                     "max_trials": 10, "max_trials": 20,)" +
                                          body)},
                &out),
            1);
  EXPECT_THAT(out, HasSubstr(": spec: \"max_trials\" is given twice; keep "
                             "one\n"));
  EXPECT_THAT(Studies(), Not(HasSubstr("both")));
  EXPECT_THAT(Studies(), Not(HasSubstr("twice")));
}

TEST_F(CommandsTest, OneDefaultFormatAndJsonIntegersAsNumbers) {
  const std::string config = R"({"name": "NAME", "spec": {
      "parameters": [{"name": "x", "double_spec": {"min": 0, "max": 1}}],
      "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
      "algorithm": "RANDOM", "max_trials": 5}})";
  std::string out;
  ASSERT_EQ(
      Cli({"study", "create", "--config",
           Config("a.json", absl::StrReplaceAll(config, {{"NAME", "a"}}))},
          &out),
      0)
      << out;
  // A table for people, as `study get` prints it.
  EXPECT_THAT(out, StartsWith("name  "));
  EXPECT_THAT(out, HasSubstr("\nmax_trials  "));
  std::string get;
  ASSERT_EQ(Cli({"study", "get", "a"}, &get), 0) << get;
  EXPECT_EQ(get.substr(0, get.find("\ntrials")),
            out.substr(0, out.find("\ntrials")));

  // JSON on request: the protobuf mapping, int64 as numbers.
  ASSERT_EQ(
      Cli({"study", "create", "--format", "json", "--config",
           Config("b.json", absl::StrReplaceAll(config, {{"NAME", "b"}}))},
          &out),
      0)
      << out;
  EXPECT_THAT(out, StartsWith("{\n"));
  EXPECT_THAT(out, HasSubstr("\"max_trials\": 5"));
  EXPECT_THAT(out, testing::ContainsRegex("\"create_time_ms\": [0-9]+,?\n"));

  ASSERT_EQ(Cli({"suggest", "a", "--client-id", "me"}, &out), 0) << out;
  ASSERT_EQ(Cli({"complete", "a", "1", "loss=0.5"}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("\"id\": 1,"));

  // get, trials and best: a table by default, JSON with --format json.
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{
           {"study", "get", "a"}, {"trials", "a"}, {"study", "best", "a"}}) {
    const std::string name = absl::StrJoin(command, " ");
    ASSERT_EQ(Cli(command, &out), 0) << name << ": " << out;
    EXPECT_THAT(out, Not(StartsWith("{"))) << name;
    EXPECT_THAT(out, Not(HasSubstr("\""))) << name << ": " << out;
    std::vector<std::string> json = command;
    json.insert(json.end(), {"--format", "json"});
    ASSERT_EQ(Cli(json, &out), 0) << name << ": " << out;
    EXPECT_THAT(out, StartsWith("{")) << name;
    EXPECT_THAT(out, testing::ContainsRegex("\"(id|create_time_ms)\": [0-9]"))
        << name << ": " << out;
    EXPECT_THAT(out, Not(testing::ContainsRegex("\": \"[0-9]+\"")))
        << name << ": " << out;
  }
  ASSERT_EQ(Cli({"trials", "a"}, &out), 0);
  EXPECT_THAT(out, StartsWith("ID  STATE"));
  EXPECT_THAT(out, HasSubstr("\n1   COMPLETED  "));
}

}  // namespace
}  // namespace hypertune
