// W&B sweep configurations made studies (cli/wandb_sweep.h) and their
// commands expanded per trial (cli/worker/wandb_command.h), without a
// server: the sweeps of tests/cli/wandb/ are in the shapes W&B's
// documentation gives.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/wandb_sweep.h"
#include "cli/worker/wandb_command.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hypertune::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Fixture(const std::string& name) {
  std::ifstream file(std::string(HYPERTUNE_SOURCE_DIR) + "/tests/cli/wandb/" +
                     name);
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_FALSE(text.str().empty()) << name;
  return text.str();
}

WandbSweep Parse(const std::string& fixture, const std::string& name = "") {
  absl::StatusOr<WandbSweep> sweep =
      ParseWandbSweep(Fixture(fixture), fixture, name);
  EXPECT_TRUE(sweep.ok()) << sweep.status();
  return sweep.ok() ? *std::move(sweep) : WandbSweep();
}

const v1::ParameterSpec& Param(const v1::Study& study,
                               const std::string& name) {
  for (const v1::ParameterSpec& p : study.spec().parameters()) {
    if (p.name() == name) return p;
  }
  ADD_FAILURE() << "no parameter " << name;
  static const v1::ParameterSpec kNone;
  return kNone;
}

std::vector<double> Discrete(const v1::ParameterSpec& p) {
  EXPECT_TRUE(p.has_discrete_spec()) << p.name();
  return {p.discrete_spec().values().begin(), p.discrete_spec().values().end()};
}

std::vector<std::string> Categories(const v1::ParameterSpec& p) {
  EXPECT_TRUE(p.has_categorical_spec()) << p.name();
  return {p.categorical_spec().values().begin(),
          p.categorical_spec().values().end()};
}

std::string Attribute(const v1::Study& study, const std::string& key) {
  auto it = study.attributes().find(key);
  return it == study.attributes().end() ? "<none>" : it->second;
}

// The error text of `yaml`, read as the file "s.yaml".
std::string Refusal(const std::string& yaml) {
  absl::StatusOr<WandbSweep> sweep = ParseWandbSweep(yaml, "s.yaml");
  EXPECT_FALSE(sweep.ok()) << yaml;
  if (sweep.ok()) return "";
  EXPECT_EQ(sweep.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(sweep.status().message());
}

// A sweep whose head is complete, with `rest` (parameters and more) after.
std::string Sweep(const std::string& rest,
                  const std::string& method = "random") {
  return absl::StrCat("name: s\nmethod: ", method, "\nmetric:\n  name: loss\n",
                      rest);
}

TEST(WandbSweepTest, TheDocumentedBasicStructure) {
  const v1::Study study = Parse("basic.yaml").study;
  EXPECT_EQ(study.name(), "sweepdemo");
  EXPECT_EQ(study.spec().algorithm(), v1::GP_BANDIT);
  ASSERT_EQ(study.spec().metrics_size(), 1);
  EXPECT_EQ(study.spec().metrics(0).name(), "validation_loss");
  EXPECT_EQ(study.spec().metrics(0).goal(), v1::MetricSpec::MINIMIZE);
  EXPECT_EQ(study.spec().max_trials(), 0);
  EXPECT_FALSE(study.spec().has_early_stopping());
  ASSERT_EQ(study.spec().parameters_size(), 4);
  // Floats without a distribution: uniform.
  const v1::ParameterSpec& lr = Param(study, "learning_rate");
  ASSERT_TRUE(lr.has_double_spec());
  EXPECT_EQ(lr.double_spec().min(), 0.0001);
  EXPECT_EQ(lr.double_spec().max(), 0.1);
  EXPECT_NE(lr.double_spec().scale(), v1::LOG);
  EXPECT_THAT(Discrete(Param(study, "batch_size")), ElementsAre(16, 32, 64));
  EXPECT_THAT(Discrete(Param(study, "epochs")), ElementsAre(5, 10, 15));
  EXPECT_THAT(Categories(Param(study, "optimizer")),
              ElementsAre("adam", "sgd"));
  EXPECT_EQ(Attribute(study, kWandbProgram), "train.py");
  EXPECT_EQ(Attribute(study, kWandbCommand), "<none>");
  EXPECT_EQ(Attribute(study, "wandb.name"), "sweepdemo");
}

TEST(WandbSweepTest, NestedParametersAreDottedNames) {
  const WandbSweep sweep = Parse("nested.yaml", "other-name");
  const v1::Study& study = sweep.study;
  EXPECT_EQ(study.name(), "other-name");
  EXPECT_EQ(study.spec().algorithm(), v1::RANDOM);
  EXPECT_EQ(study.spec().max_trials(), 20);
  // Integers without a distribution: int_uniform.
  const v1::ParameterSpec& top = Param(study, "top_level_param");
  ASSERT_TRUE(top.has_integer_spec());
  EXPECT_EQ(top.integer_spec().min(), 0);
  EXPECT_EQ(top.integer_spec().max(), 5);
  EXPECT_THAT(Discrete(Param(study, "nested_param.learning_rate")),
              ElementsAre(0.001, 0.01));
  EXPECT_THAT(Discrete(Param(study, "nested_param.double_nested_param.x")),
              ElementsAre(0.9));
  EXPECT_THAT(Discrete(Param(study, "nested_param.double_nested_param.y")),
              ElementsAre(0.8));
  EXPECT_EQ(Attribute(study, "wandb.project"), "demo-project");
  EXPECT_EQ(Attribute(study, "wandb.entity"), "demo-team");
  EXPECT_EQ(Attribute(study, "wandb.description"),
            "two levels of nested parameters");
  EXPECT_EQ(Attribute(study, "wandb.name"), "nested-demo");
  ASSERT_EQ(sweep.notes.size(), 2u);
  EXPECT_THAT(sweep.notes[0], HasSubstr("project: kept as the study's "
                                        "attribute wandb.project"));
}

TEST(WandbSweepTest, EveryMappedDistribution) {
  const v1::Study study = Parse("distributions.yaml", "d").study;
  EXPECT_EQ(study.spec().metrics(0).goal(), v1::MetricSpec::MAXIMIZE);
  EXPECT_EQ(study.spec().max_trials(), 50);
  EXPECT_THAT(Discrete(Param(study, "constant_p")), ElementsAre(2.71828));
  // A value given twice is kept once.
  EXPECT_THAT(Categories(Param(study, "activation")),
              ElementsAre("elu", "relu", "gelu"));
  const v1::ParameterSpec& layers = Param(study, "layers");
  ASSERT_TRUE(layers.has_integer_spec());
  EXPECT_EQ(layers.integer_spec().min(), 1);
  EXPECT_EQ(layers.integer_spec().max(), 8);
  const v1::ParameterSpec& dropout = Param(study, "dropout");
  ASSERT_TRUE(dropout.has_double_spec());
  EXPECT_EQ(dropout.double_spec().max(), 0.5);
  // q_uniform with q 1 over whole bounds: the integers.
  const v1::ParameterSpec& units = Param(study, "units");
  ASSERT_TRUE(units.has_integer_spec());
  EXPECT_EQ(units.integer_spec().max(), 256);
  // Otherwise the multiples of q, as round(X / q) * q computes them.
  std::vector<double> momentum;
  for (int k = 5; k <= 9; ++k) momentum.push_back(k * 0.1);
  EXPECT_EQ(Discrete(Param(study, "momentum")), momentum);
  auto expect_log = [&](const std::string& name, double min, double max) {
    const v1::ParameterSpec& p = Param(study, name);
    ASSERT_TRUE(p.has_double_spec()) << name;
    EXPECT_DOUBLE_EQ(p.double_spec().min(), min) << name;
    EXPECT_DOUBLE_EQ(p.double_spec().max(), max) << name;
    EXPECT_EQ(p.double_spec().scale(), v1::LOG) << name;
  };
  expect_log("lr", 1e-5, 0.1);
  expect_log("lr_exp", std::exp(-4.0), 1.0);
  expect_log("wd", 1e-4, 1e-2);
  expect_log("wd_exp", std::exp(-3.0), std::exp(-1.0));
  const v1::ParameterSpec& width = Param(study, "width");
  ASSERT_TRUE(width.has_integer_spec());
  EXPECT_EQ(width.integer_spec().min(), 8);
  EXPECT_EQ(width.integer_spec().max(), 512);
  EXPECT_EQ(width.integer_spec().scale(), v1::LOG);
  // Booleans as Python writes them, remembered for the worker.
  EXPECT_THAT(Categories(Param(study, "augment")),
              ElementsAre("True", "False"));
  EXPECT_EQ(Attribute(study, kWandbBooleans), R"(["augment"])");
  // min_iter 3: W&B's bands 3, 9, 27... without end are ASHA's rungs.
  const v1::EarlyStoppingSpec& es = study.spec().early_stopping();
  EXPECT_EQ(es.rule(), v1::EarlyStoppingSpec::ASHA);
  EXPECT_EQ(es.min_resource(), 3);
  EXPECT_EQ(es.max_resource(), int64_t{1} << 53);
  EXPECT_EQ(es.reduction_factor(), 3);
  EXPECT_FALSE(es.pause_at_rungs());
}

TEST(WandbSweepTest, GridAndHyperbandByMaxIter) {
  const v1::Study grid = Parse("grid.yaml").study;
  EXPECT_EQ(grid.spec().algorithm(), v1::GRID);
  // W&B's default goal.
  EXPECT_EQ(grid.spec().metrics(0).goal(), v1::MetricSpec::MINIMIZE);
  EXPECT_TRUE(Param(grid, "seed").has_integer_spec());
  EXPECT_THAT(Discrete(Param(grid, "lr")), ElementsAre(0.01, 0.1));

  const v1::Study hb = Parse("hyperband_max_iter.yaml").study;
  const v1::EarlyStoppingSpec& es = hb.spec().early_stopping();
  EXPECT_EQ(es.rule(), v1::EarlyStoppingSpec::ASHA);
  // Bands 27/3 and 27/9: rungs 3 and 9 of a 27-step trial.
  EXPECT_EQ(es.min_resource(), 3);
  EXPECT_EQ(es.max_resource(), 27);
}

TEST(WandbSweepTest, SeveralMetricsAreObjectives) {
  absl::StatusOr<WandbSweep> sweep = ParseWandbSweep(
      "name: moo\nmethod: bayes\nmetrics:\n  - name: loss\n"
      "  - name: acc\n    goal: maximize\nparameters:\n  x:\n"
      "    min: 0.0\n    max: 1.0\n",
      "s.yaml");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  const auto& metrics = sweep->study.spec().metrics();
  ASSERT_EQ(metrics.size(), 2);
  EXPECT_EQ(metrics[0].name(), "loss");
  EXPECT_EQ(metrics[0].goal(), v1::MetricSpec::MINIMIZE);
  EXPECT_EQ(metrics[1].goal(), v1::MetricSpec::MAXIMIZE);
  EXPECT_EQ(metrics[0].role(), v1::MetricSpec::OBJECTIVE);
  EXPECT_EQ(metrics[1].role(), v1::MetricSpec::OBJECTIVE);
}

TEST(WandbSweepTest, ScalarsAreTypedAsYamlTypesThem) {
  absl::StatusOr<WandbSweep> sweep = ParseWandbSweep(
      Sweep("parameters:\n  a:\n    values: ['16', '32']\n"
            "  b:\n    values: [1e-4, 1.0e-3]\n  c:\n    values: [yes, no]\n"
            "  d:\n    values: [1, two]\n"),
      "s.yaml");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  const v1::Study& study = sweep->study;
  // Quoted: strings.
  EXPECT_THAT(Categories(Param(study, "a")), ElementsAre("16", "32"));
  EXPECT_THAT(Discrete(Param(study, "b")), ElementsAre(1e-4, 1e-3));
  EXPECT_THAT(Categories(Param(study, "c")), ElementsAre("True", "False"));
  // A list mixing numbers and strings: categories as written.
  EXPECT_THAT(Categories(Param(study, "d")), ElementsAre("1", "two"));
}

TEST(WandbSweepTest, TheRefusedFileListsEveryProblemWithItsLine) {
  absl::StatusOr<WandbSweep> sweep =
      ParseWandbSweep(Fixture("refused.yaml"), "refused.yaml");
  ASSERT_FALSE(sweep.ok());
  const std::string message(sweep.status().message());
  EXPECT_THAT(message, HasSubstr("refused.yaml: 5 problems:\n"));
  for (const char* problem :
       {"\n  refused.yaml:7: metric.target: not supported",
        "\n  refused.yaml:10: parameters.lr.distribution: normal is not "
        "supported",
        "\n  refused.yaml:15: parameters.batch.probabilities: not supported",
        "\n  refused.yaml:19: parameters.layers.step: unknown key",
        "\n  refused.yaml:20: schedular: unknown key"}) {
    EXPECT_THAT(message, HasSubstr(problem));
  }
}

TEST(WandbSweepTest, EachRefusalNamesTheKeyAndTheLine) {
  struct Case {
    std::string yaml;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"name: s\nmetric:\n  name: loss\nparameters:\n  x:\n    value: 1\n",
       "s.yaml:1: method: missing"},
      {Sweep(""), "s.yaml:1: parameters: missing"},
      {"name: s\nmethod: random\nparameters:\n  x:\n    value: 1\n",
       "s.yaml:1: metric: missing"},
      {Sweep("parameters:\n  x:\n    value: 1\n", "custom"),
       "s.yaml:2: method: \"custom\" is not supported"},
      {Sweep("parameters:\n  lr:\n    min: 0.0\n    max: 1.0\n", "grid"),
       "s.yaml:6: parameters.lr: grid needs values"},
      {Sweep("parameters:\n  lr:\n    distribution: beta\n"),
       "s.yaml:7: parameters.lr.distribution: beta is not supported"},
      {Sweep("parameters:\n  lr:\n    distribution: lognormal\n"),
       "s.yaml:7: parameters.lr.distribution: unknown distribution"},
      {Sweep("parameters:\n  w:\n    distribution: q_log_uniform_values\n"
             "    min: 8\n    max: 64\n    q: 8\n"),
       "s.yaml:10: parameters.w.q: not supported with q_log_uniform_values"},
      {Sweep("parameters:\n  lr:\n    distribution: log_uniform_values\n"
             "    min: 0\n    max: 1\n"),
       "s.yaml:8: parameters.lr.min: log_uniform_values needs min > 0"},
      {Sweep("parameters:\n  lr:\n    min: 2.0\n    max: 1.0\n"),
       "s.yaml:7: parameters.lr.min: is above max"},
      {Sweep("parameters:\n  lr:\n    distribution: uniform\n    min: 0.0\n"),
       "s.yaml:7: parameters.lr.max: missing"},
      {Sweep("parameters:\n  lr:\n    distribution: uniform\n    min: 0.0\n"
             "    max: 1.0\n    q: 2\n"),
       "s.yaml:10: parameters.lr.q: is not a key of distribution uniform"},
      {Sweep("parameters:\n  a.b:\n    value: 1\n"),
       "s.yaml:6: parameters.a.b: a parameter's name"},
      {Sweep("parameters:\n  x:\n    value: 1\n  x:\n    value: 2\n"),
       "s.yaml:8: parameters.x: is given twice"},
      {Sweep("parameters:\n  x:\n    values: [1, [2]]\n"),
       "s.yaml:7: parameters.x.values: each value must be"},
      {Sweep("parameters:\n  x:\n    value: 1\n    parameters:\n      y:\n"
             "        value: 2\n"),
       "s.yaml:6: parameters.x: a parameter with nested `parameters`"},
      {Sweep("parameters:\n  x:\n    value: 1\nearly_terminate:\n"
             "  type: hyperband\n  max_iter: 5\n  eta: 2\n  s: 2\n"),
       "s.yaml:8: early_terminate: W&B's bands [1, 2] are not ASHA's rungs "
       "[1, 2, 4]"},
      {Sweep("parameters:\n  x:\n    value: 1\nearly_terminate:\n"
             "  type: hyperband\n  min_iter: 3\n  strict: true\n"),
       "s.yaml:11: early_terminate.strict: only false is supported"},
      {Sweep("parameters:\n  x:\n    value: 1\nearly_terminate:\n"
             "  type: hyperband\n  min_iter: 3\n  eta: 1.5\n"),
       "s.yaml:11: early_terminate.eta: must be from 2"},
      {Sweep("parameters:\n  x:\n    value: 1\nearly_terminate:\n"
             "  type: envelope\n  min_iter: 3\n"),
       "s.yaml:9: early_terminate.type: \"envelope\" is not supported"},
      {Sweep("parameters:\n  x:\n    value: 1\nearly_terminate:\n"
             "  type: hyperband\n  max_iter: 27\n"),
       "s.yaml:10: early_terminate.s: missing"},
      {Sweep("parameters:\n  x:\n    value: 1\ncommand:\n  - ${env}\n"
             "  - ${python}\n"),
       "s.yaml:10: command: unknown macro ${python}"},
      {Sweep("parameters:\n  x:\n    value: 1\nrun_cap: 0\n"),
       "s.yaml:8: run_cap: must be an integer >= 1"},
      {Sweep("parameters:\n  x:\n    value: 1\nscheduler:\n  engine: optuna\n"),
       "s.yaml:8: scheduler: not supported"},
      {Sweep("parameters:\n  x:\n    value: 1\nmetrics:\n  - name: a\n"),
       "s.yaml:3: metric: give metric or metrics, not both"},
      {Sweep("  impute: worst\nparameters:\n  x:\n    value: 1\n"),
       "s.yaml:5: metric.impute: not supported"},
      {Sweep("  goal: minimise\nparameters:\n  x:\n    value: 1\n"),
       "s.yaml:5: metric.goal: \"minimise\" is not minimize or maximize"},
      {"name: s\nmethod: [random\n", "s.yaml:3: not YAML"},
      {"name: My Sweep\nmethod: random\nmetric:\n  name: loss\n"
       "parameters:\n  x:\n    value: 1\n",
       "s.yaml:1: name: \"My Sweep\" is no study name"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(Refusal(c.yaml), HasSubstr(c.expected)) << c.yaml;
  }
}

// --- The worker's side: the command of a study made from a sweep. ---

v1::Study CommandStudy() {
  absl::StatusOr<WandbSweep> sweep =
      ParseWandbSweep(Fixture("command.yaml"), "command.yaml");
  EXPECT_TRUE(sweep.ok()) << sweep.status();
  return sweep.ok() ? sweep->study : v1::Study();
}

ParameterValues Values(const std::string& augment) {
  ParameterValues values;
  auto add = [&](const std::string& name) {
    v1::ParameterValue* v = values.Add();
    v->set_name(name);
    return v;
  };
  add("lr")->set_double_value(0.0125);
  add("batch_size")->set_double_value(32);
  add("optimizer")->set_string_value("adam");
  add("augment")->set_string_value(augment);
  add("model.layers")->set_int_value(3);
  return values;
}

// A temporary directory, removed at the end of the test, that the worker's
// programs would run in.
class WandbCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat(
               "wandb_command_test-", getpid(), "-",
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(WandbCommandTest, DefaultCommandIsWandbs) {
  v1::Study study;
  study.set_name("s");
  const std::string program = (dir_ / "train.py").string();
  std::ofstream(program) << "print('hypertune: loss=1')\n";
  (*study.mutable_attributes())[kWandbProgram] = program;
  absl::StatusOr<std::vector<std::string>> command =
      WandbCommandTemplate(study);
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_THAT(*command,
              ElementsAre("/usr/bin/env", "python3", program, "${args}"));
}

TEST_F(WandbCommandTest, TheTemplateRefusesWhatCannotRun) {
  v1::Study study;
  study.set_name("plain");
  EXPECT_EQ(WandbCommandTemplate(study).status().code(),
            absl::StatusCode::kFailedPrecondition);
  (*study.mutable_attributes())[kWandbProgram] = (dir_ / "missing.py").string();
  absl::Status missing = WandbCommandTemplate(study).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("missing.py"));
  // ${envvar:NAME} reads the worker's environment, and must be set.
  v1::Study with_env = CommandStudy();
  (*with_env.mutable_attributes())[kWandbProgram] = "/bin/sh";
  auto no_env = [](const char*) -> const char* { return nullptr; };
  absl::Status unset = WandbCommandTemplate(with_env, no_env).status();
  EXPECT_EQ(unset.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unset.message(), HasSubstr("$WANDB_TEST_TAG is not set"));
  auto env = [](const char* name) -> const char* {
    return std::string(name) == "WANDB_TEST_TAG" ? "blue" : nullptr;
  };
  absl::StatusOr<std::vector<std::string>> command =
      WandbCommandTemplate(with_env, env);
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_THAT(*command,
              ElementsAre("/usr/bin/env", "python3", "/bin/sh", "--tag", "blue",
                          "--json_file", "${args_json_file}", "--json",
                          "${args_json}", "${args_no_boolean_flags}"));
}

TEST_F(WandbCommandTest, ArgsMacrosAsWandbWritesThem) {
  const v1::Study study = CommandStudy();
  const std::vector<std::string> words = {"p", "${args}", "${args_no_hyphens}",
                                          "${args_no_boolean_flags}"};
  EXPECT_THAT(
      ExpandWandbCommand(words, study, Values("True"), ""),
      ElementsAre("p", "--lr=0.0125", "--batch_size=32", "--optimizer=adam",
                  "--augment=True", "--model.layers=3", "lr=0.0125",
                  "batch_size=32", "optimizer=adam", "augment=True",
                  "model.layers=3", "--lr=0.0125", "--batch_size=32",
                  "--optimizer=adam", "--augment", "--model.layers=3"));
  // A False boolean flag is left out.
  EXPECT_THAT(ExpandWandbCommand({"${args_no_boolean_flags}"}, study,
                                 Values("False"), ""),
              ElementsAre("--lr=0.0125", "--batch_size=32", "--optimizer=adam",
                          "--model.layers=3"));
  EXPECT_EQ(WandbArgsJson(study, Values("False")),
            R"({"lr":0.0125,"batch_size":32,"optimizer":"adam",)"
            R"("augment":false,"model":{"layers":3}})");
}

TEST_F(WandbCommandTest, TheJsonFileLivesAsLongAsTheRun) {
  const v1::Study study = CommandStudy();
  const std::string path = (dir_ / "trial-1.log.args.json").string();
  {
    absl::StatusOr<WandbRun> run = WandbRun::Prepare(
        {"p", "--json_file", "${args_json_file}"}, study, Values("True"), path);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_THAT(run->argv(), ElementsAre("p", "--json_file", path));
    std::ifstream file(path);
    std::string text;
    std::getline(file, text);
    EXPECT_EQ(text, WandbArgsJson(study, Values("True")));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  // Without the macro nothing is written.
  absl::StatusOr<WandbRun> run =
      WandbRun::Prepare({"p", "${args}"}, study, Values("True"), path);
  ASSERT_TRUE(run.ok());
  EXPECT_FALSE(std::filesystem::exists(path));
  // A file that cannot be written is an error, not a missing argument.
  absl::StatusOr<WandbRun> unwritable =
      WandbRun::Prepare({"p", "${args_json_file}"}, study, Values("True"),
                        (dir_ / "no-such-dir" / "a.json").string());
  EXPECT_EQ(unwritable.status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace hypertune::cli
