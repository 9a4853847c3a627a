// W&B sweeps as a user runs them: `hypertune study create --from-wandb`
// then `hypertune worker NAME --wandb`, the built CLI against a hypertuned
// process (loopback, temporary SQLite file), running tests/cli/wandb/
// train.py through W&B's macros. Each trial must complete with the loss
// the program computes from the arguments it was given, so a parameter
// passed wrong (a float where W&B writes an integer, a boolean flag, the
// JSON file) fails the trial and the test.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/test_server.h"

namespace hypertune {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

class WandbEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::ServerProcessOptions options;
    options.program = HYPERTUNED_PATH;
    options.db_path = dir_.File("studies.db");
    auto server = test::ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    // The sweep's program, relative to the worker's working directory.
    std::filesystem::copy_file(
        std::string(HYPERTUNE_SOURCE_DIR) + "/tests/cli/wandb/train.py",
        dir_.File("train.py"));
  }

  // `cd DIR && ENV hypertune --server ADDRESS ARGS...`: its exit status;
  // its stdout and stderr together in `out`.
  int Cli(const std::vector<std::string>& args, std::string* out,
          const std::string& env = "") {
    std::string command =
        absl::StrCat("cd ", test::ShellQuote(dir_.path().string()), " && ", env,
                     " ", HYPERTUNE_CLI_PATH, " --server ", server_->address());
    for (const std::string& arg : args) {
      absl::StrAppend(&command, " ", test::ShellQuote(arg));
    }
    return test::RunShell(command, out);
  }

  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_.File(name)) << text;
    return name;
  }

  // The study's trials (`trials NAME --format json`).
  Json Trials(const std::string& study) {
    std::string out;
    EXPECT_EQ(Cli({"trials", study, "--format", "json"}, &out), 0) << out;
    Json json = Json::parse(out, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(json.contains("trials")) << out;
    return json.contains("trials") ? json["trials"] : Json::array();
  }

  // Every trial COMPLETED with the loss train.py computes from its
  // parameters; how many there were.
  size_t ExpectLossesFromParameters(const std::string& study) {
    const Json trials = Trials(study);
    for (const Json& trial : trials) {
      EXPECT_EQ(trial["state"], "COMPLETED") << trial.dump();
      double lr = 0, batch_size = 0, layers = 0;
      std::string optimizer, augment;
      for (const Json& p : trial["parameters"]) {
        const std::string name = p["name"];
        if (name == "lr") lr = p["double_value"];
        if (name == "batch_size") batch_size = p["double_value"];
        if (name == "model.layers") layers = p["int_value"].get<double>();
        if (name == "optimizer") optimizer = p["string_value"];
        if (name == "augment") augment = p["string_value"];
      }
      const double expected = lr + batch_size / 100 +
                              (optimizer == "sgd" ? 1 : 0) + layers * 10 +
                              (augment == "True" ? 1000 : 0);
      const double loss = trial["final_measurement"]["metrics"]["loss"];
      EXPECT_NEAR(loss, expected, 1e-9 * std::abs(expected)) << trial.dump();
    }
    return trials.size();
  }

  test::TempDir dir_;
  std::unique_ptr<test::ServerProcess> server_;
};

TEST_F(WandbEndToEndTest, DefaultCommandPassesArgsAsWandbDoes) {
  const std::string sweep = Write("sweep.yaml", R"(program: train.py
name: e2e-default
method: bayes
run_cap: 5
metric:
  name: loss
  goal: minimize
project: demo
parameters:
  lr:
    distribution: log_uniform_values
    min: 0.001
    max: 0.1
  batch_size:
    values: [16, 32, 64]
  optimizer:
    values: [adam, sgd]
  model:
    parameters:
      layers:
        min: 1
        max: 4
)");
  std::string out;
  ASSERT_EQ(Cli({"study", "create", "--from-wandb", sweep}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("note: project: kept as the study's attribute "
                             "wandb.project"));
  EXPECT_THAT(out, HasSubstr("model.layers: integer [1, 4]"));
  ASSERT_EQ(Cli({"worker", "e2e-default", "--wandb", "--parallel", "2"}, &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("5/5 trials: 5 completed"));
  EXPECT_EQ(ExpectLossesFromParameters("e2e-default"), 5u);
  // The log shows the command W&B would have run.
  std::ifstream log(dir_.File("hypertune-logs/e2e-default/trial-1.log"));
  std::string first;
  std::getline(log, first);
  EXPECT_THAT(first, HasSubstr(": /usr/bin/env python3 train.py --lr="));
  EXPECT_THAT(first, HasSubstr(" --model.layers="));
}

TEST_F(WandbEndToEndTest, EveryMacroOfACustomCommand) {
  std::filesystem::copy_file(
      std::string(HYPERTUNE_SOURCE_DIR) + "/tests/cli/wandb/command.yaml",
      dir_.File("command.yaml"));
  std::string out;
  ASSERT_EQ(
      Cli({"study", "create", "--from-wandb", "command.yaml", "macros"}, &out),
      0)
      << out;
  // ${envvar:WANDB_TEST_TAG} unset: refused before any trial is taken.
  EXPECT_EQ(Cli({"worker", "macros", "--wandb"}, &out, "unset WANDB_TEST_TAG;"),
            1);
  EXPECT_THAT(out, HasSubstr("$WANDB_TEST_TAG is not set"));
  EXPECT_TRUE(Trials("macros").empty());
  ASSERT_EQ(Cli({"worker", "macros", "--wandb"}, &out, "WANDB_TEST_TAG=blue"),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("4/4 trials: 4 completed"));
  EXPECT_EQ(ExpectLossesFromParameters("macros"), 4u);
  // The program read each ${args_json_file}; none is left behind.
  EXPECT_THAT(out, HasSubstr("json_file=hypertune-logs/macros/trial-1.log."
                             "args.json"));
  for (const auto& entry : std::filesystem::directory_iterator(
           dir_.File("hypertune-logs/macros"))) {
    EXPECT_EQ(entry.path().extension(), ".log") << entry.path();
  }
}

// Each fixture is a study a real hypertuned takes, holding the numbers,
// strings and booleans PyYAML (which `wandb sweep` uses) reads from the
// file (tests/cli/wandb/crosscheck.py; skipped without python3-yaml).
TEST_F(WandbEndToEndTest, EveryFixtureIsAStudyReadAsPyYamlReadsIt) {
  for (const char* fixture : {"basic", "nested", "distributions", "grid",
                              "hyperband_max_iter", "command"}) {
    const std::string yaml = absl::StrCat(
        HYPERTUNE_SOURCE_DIR, "/tests/cli/wandb/", fixture, ".yaml");
    std::string out;
    EXPECT_EQ(Cli({"study", "create", "--from-wandb", yaml, fixture}, &out), 0)
        << fixture << ": " << out;
    ASSERT_EQ(Cli({"study", "get", fixture, "--format", "json"}, &out), 0);
    const std::string json = Write(absl::StrCat(fixture, ".json"), out);
    const std::string command = absl::StrCat(
        HYPERTUNE_PYTHON, " ", HYPERTUNE_SOURCE_DIR,
        "/tests/cli/wandb/crosscheck.py ", yaml, " ", dir_.File(json));
    std::string report;
    const int status = test::RunShell(command, &report);
    if (status == 77) GTEST_SKIP() << report;
    EXPECT_EQ(status, 0) << fixture << ":\n" << report;
  }
}

// early_terminate: hyperband with min_iter 1 is ASHA with rungs 1, 3, 9...:
// a trial worse than the only other one at step 1 is stopped there.
TEST_F(WandbEndToEndTest, HyperbandStopsTheWorseTrial) {
  Write("hb.py",
        "import sys\n"
        "x = float([a[4:] for a in sys.argv if a.startswith('--x=')][0])\n"
        "for step in range(1, 10):\n"
        "    print('hypertune: loss=%r step=%d' % (x + 1 / step, step))\n");
  const std::string sweep = Write("hb.yaml", R"(program: hb.py
name: hb
method: random
run_cap: 2
metric:
  name: loss
early_terminate:
  type: hyperband
  min_iter: 1
parameters:
  x:
    values: [1, 5, 9]
)");
  std::string out;
  ASSERT_EQ(Cli({"study", "create", "--from-wandb", sweep}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("ASHA"));
  // The order the trials run in: the better one first.
  ASSERT_EQ(Cli({"trial", "enqueue", "hb", "x=1"}, &out), 0) << out;
  ASSERT_EQ(Cli({"trial", "enqueue", "hb", "x=5"}, &out), 0) << out;
  ASSERT_EQ(Cli({"worker", "hb", "--wandb"}, &out), 0) << out;
  const Json trials = Trials("hb");
  ASSERT_EQ(trials.size(), 2u) << out;
  EXPECT_EQ(trials[0]["state"], "COMPLETED") << trials.dump();
  EXPECT_EQ(trials[1]["state"], "STOPPED") << trials.dump();
  EXPECT_EQ(trials[1]["parameters"][0]["double_value"], 5) << trials.dump();
}

TEST_F(WandbEndToEndTest, RefusalsReachTheUser) {
  std::filesystem::copy_file(
      std::string(HYPERTUNE_SOURCE_DIR) + "/tests/cli/wandb/refused.yaml",
      dir_.File("refused.yaml"));
  std::string out;
  EXPECT_EQ(Cli({"study", "create", "--from-wandb", "refused.yaml"}, &out), 1);
  EXPECT_THAT(out, HasSubstr("error: INVALID_ARGUMENT: refused.yaml: 5 "
                             "problems:\n"));
  EXPECT_THAT(out, HasSubstr("\n  refused.yaml:10: parameters.lr.distribution: "
                             "normal is not supported"));
  EXPECT_EQ(Cli({"study", "list"}, &out), 0);
  EXPECT_THAT(out, ::testing::Not(HasSubstr("refused")));
  // A study not made from a sweep has no command to run.
  ASSERT_EQ(Cli({"study", "create", "--from-wandb",
                 Write("plain.yaml",
                       "name: plain\nmethod: random\nmetric:\n  name: loss\n"
                       "parameters:\n  x:\n    values: [1, 2]\n")},
                &out),
            0)
      << out;
  EXPECT_EQ(Cli({"worker", "plain", "--wandb"}, &out), 1);
  EXPECT_THAT(out, HasSubstr("has no W&B program or command"));
  // --wandb takes no CMD.
  EXPECT_EQ(Cli({"worker", "plain", "--wandb", "--", "true"}, &out), 2);
  EXPECT_THAT(out, HasSubstr("--wandb runs the sweep's command"));
}

}  // namespace
}  // namespace hypertune
