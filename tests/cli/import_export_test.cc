// `hypertune export|import|trials import|import-optuna|trial enqueue` and
// `study create --warm-start-from`: the ways trials come into a study, the
// CLI run as a process against in-process servers; and `study update`'s
// switch of the learning-curve model.

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "service/server/server.h"
#include "testing/test_server.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune {
namespace {

using test::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

class ImportExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      service::ServerOptions options;
      options.db_path = dir_.File(absl::StrCat("server", i, ".db"));
      options.listen = "127.0.0.1:0";
      auto server = service::Server::Start(std::move(options));
      ASSERT_TRUE(server.ok()) << server.status();
      servers_[i] = *std::move(server);
    }
  }

  Client ClientOf(int server) const {
    ClientOptions options;
    options.server = servers_[server]->address();
    options.client_id = "test";
    options.heartbeats = false;
    return Client(options);
  }

  // The CLI against server `server` with `args` (each quoted).
  int Cli(int server, const std::vector<std::string>& args, std::string* out,
          const std::string& redirect = "") {
    std::string command = absl::StrCat(HYPERTUNE_CLI_PATH, " --server ",
                                       servers_[server]->address());
    for (const std::string& arg : args)
      absl::StrAppend(&command, " ", test::ShellQuote(arg));
    absl::StrAppend(&command, redirect);
    return test::RunShell(command, out, redirect.empty());
  }

  static v1::Study SmallStudy(const std::string& name, double x_min = -1) {
    v1::Study study;
    google::protobuf::TextFormat::ParseFromString(R"pb(
      spec {
        parameters { name: "x" double_spec { min: -1 max: 1 } }
        parameters { name: "n" integer_spec { min: 1 max: 64 scale: LOG } }
        parameters { name: "opt" categorical_spec { values: [ "adam", "sgd" ] } }
        metrics { name: "loss" goal: MINIMIZE }
        metrics { name: "acc" goal: MAXIMIZE }
        algorithm: RANDOM
        seed: 5
        price_per_device_hour: 2.5
      })pb",
                                                  &study);
    study.set_name(name);
    study.mutable_spec()->mutable_parameters(0)->mutable_double_spec()->set_min(
        x_min);
    return study;
  }

  // A study with trials in every final state, measurements, a queued
  // trial and costs.
  void MakeStudy(int server, const std::string& name) {
    Client client = ClientOf(server);
    ASSERT_TRUE(client.CreateStudy(SmallStudy(name)).ok());
    auto granted = client.Suggest(name, 5, "w1");
    ASSERT_TRUE(granted.ok()) << granted.status();
    ASSERT_EQ(granted->trials_size(), 5);
    for (int i = 0; i < 5; ++i) {
      const v1::Trial& t = granted->trials(i);
      for (int step = 1; step <= 2; ++step) {
        v1::AddMeasurementRequest report;
        report.set_study_name(name);
        report.set_trial_id(t.id());
        report.set_lease_epoch(t.lease_epoch());
        report.mutable_measurement()->set_step(step);
        report.mutable_measurement()->set_elapsed_seconds(step * 1.25);
        (*report.mutable_measurement()->mutable_metrics())["loss"] =
            1.0 / (i + step);
        (*report.mutable_measurement()->mutable_metrics())["acc"] = 0.1 * i;
        ASSERT_TRUE(client.AddMeasurement(report).ok());
      }
      v1::CompleteTrialRequest complete;
      complete.set_study_name(name);
      complete.set_trial_id(t.id());
      complete.set_lease_epoch(t.lease_epoch());
      complete.set_device_seconds(10.0 * (i + 1));
      if (i == 3) {
        complete.set_infeasible(true);
        complete.set_infeasible_reason("out of memory");
      } else if (i == 4) {
        complete.set_worker_failed(true);
        complete.set_failure_reason("preempted");
      }
      ASSERT_TRUE(client.CompleteTrial(complete).ok());
    }
    v1::Trial queued;
    v1::ParameterValue* p = queued.add_parameters();
    p->set_name("x");
    p->set_double_value(0.125);
    p = queued.add_parameters();
    p->set_name("n");
    p->set_int_value(8);
    p = queued.add_parameters();
    p->set_name("opt");
    p->set_string_value("sgd");
    ASSERT_TRUE(client.CreateTrial(name, queued).ok());
    ASSERT_TRUE(client.StopTrial(name, 6, "no longer needed").ok());
  }

  TempDir dir_;
  std::unique_ptr<service::Server> servers_[2];
};

// Export, import on another server under a new name, export again: the
// same bytes but for the name.
TEST_F(ImportExportTest, RoundTripIsExact) {
  MakeStudy(0, "round-trip-orig");
  std::string out;
  const std::string first = dir_.File("first.jsonl");
  const std::string second = dir_.File("second.jsonl");
  ASSERT_EQ(Cli(0, {"export", "round-trip-orig"}, &out, " > " + first), 0);
  const std::string exported = ReadFile(first);
  EXPECT_EQ(std::count(exported.begin(), exported.end(), '\n'), 7);
  EXPECT_THAT(exported, HasSubstr("\"infeasible_reason\":\"out of memory\""));
  EXPECT_THAT(exported, HasSubstr("\"stop_reason\":\"no longer needed\""));
  EXPECT_THAT(exported, HasSubstr("\"measurements\":[{\"step\":\"1\""));
  ASSERT_EQ(Cli(1, {"import", first, "--name", "round-trip-copy"}, &out), 0)
      << out;
  EXPECT_THAT(out, HasSubstr("imported study \"round-trip-copy\""));
  ASSERT_EQ(Cli(1, {"export", "round-trip-copy"}, &out, " > " + second), 0);
  EXPECT_EQ(absl::StrReplaceAll(ReadFile(second), {{"\"round-trip-copy\"",
                                                    "\"round-trip-orig\""}}),
            exported);

  // Onto a name that exists: ALREADY_EXISTS, nothing changed.
  EXPECT_EQ(Cli(1, {"import", first, "--name", "round-trip-copy"}, &out), 1);
  EXPECT_THAT(out, HasSubstr("ALREADY_EXISTS"));
  EXPECT_EQ(Cli(0, {"import", first}, &out), 1);
  EXPECT_THAT(out, HasSubstr("ALREADY_EXISTS"));
}

TEST_F(ImportExportTest, MalformedLinesAreRefusedNamingTheLine) {
  MakeStudy(0, "orig");
  std::string out;
  const std::string path = dir_.File("study.jsonl");
  ASSERT_EQ(Cli(0, {"export", "orig"}, &out, " > " + path), 0);
  std::string text = ReadFile(path);
  // Line 3 (the second trial) broken.
  size_t second = text.find('\n', text.find('\n') + 1);
  text.insert(second + 1, "{oops");
  WriteFile(path, text);
  EXPECT_EQ(Cli(1, {"import", path}, &out), 1);
  EXPECT_THAT(out, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(out, HasSubstr(path + ":3:"));

  // A line the server refuses (a trial id out of order), told by its line.
  ASSERT_EQ(Cli(0, {"export", "orig"}, &out, " > " + path), 0);
  text = ReadFile(path);
  const size_t id = text.find("\"id\":\"4\"");
  ASSERT_NE(id, std::string::npos);
  text.replace(id, 8, "\"id\":\"9\"");
  WriteFile(path, text);
  EXPECT_EQ(Cli(1, {"import", path}, &out), 1);
  EXPECT_THAT(out, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(out, HasSubstr(path + ":5: id: must be 4"));
  EXPECT_FALSE(ClientOf(1).GetStudy("orig").ok());
}

// The import is read as it is sent (several 1 MiB messages here): a line
// broken far into the file cancels the stream already under way, so the
// server stores nothing, and the error names that line.
TEST_F(ImportExportTest, ALargeImportIsStreamedAndAllOrNothing) {
  MakeStudy(0, "big");
  std::string out;
  const std::string path = dir_.File("big.jsonl");
  ASSERT_EQ(Cli(0, {"export", "big"}, &out, " > " + path), 0);
  const std::vector<std::string> lines =
      absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 2u);
  const std::string& first_trial = lines[1];  // id 1, COMPLETED
  ASSERT_THAT(first_trial, HasSubstr("\"id\":\"1\""));
  constexpr int kTrials = 12000;  // about 3 MiB of trials
  std::string text = lines[0] + "\n";
  for (int id = 1; id <= kTrials; ++id) {
    absl::StrAppend(&text,
                    absl::StrReplaceAll(
                        first_trial, {{"\"id\":\"1\"",
                                       absl::StrCat("\"id\":\"", id, "\"")}}),
                    "\n");
  }
  const std::string good = dir_.File("good.jsonl");
  WriteFile(good, text);
  ASSERT_EQ(Cli(1, {"import", good}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr(absl::StrCat("with ", kTrials, " trials")));
  absl::StatusOr<v1::Study> stored = ClientOf(1).GetStudy("big");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->trial_counts().at("COMPLETED"), kTrials);

  // Broken at trial 11,000 (line 11,001), after about 2.5 MiB were sent.
  const size_t at = text.find(absl::StrCat("\"id\":\"", 11000, "\""));
  ASSERT_NE(at, std::string::npos);
  text.insert(text.rfind('\n', at) + 1, "{oops");
  const std::string bad = dir_.File("bad.jsonl");
  WriteFile(bad, text);
  EXPECT_EQ(Cli(1, {"import", bad, "--name", "big-copy"}, &out), 1);
  EXPECT_THAT(out, HasSubstr(bad + ":11001:"));
  EXPECT_TRUE(absl::IsNotFound(ClientOf(1).GetStudy("big-copy").status()))
      << "a half-sent import was stored";
}

// `hypertune trial enqueue`: a whole configuration queued as given, a
// partial one completed by the study's algorithm; both handed out first.
TEST_F(ImportExportTest, TrialEnqueueQueuesWholeAndPartialConfigurations) {
  ASSERT_TRUE(ClientOf(0).CreateStudy(SmallStudy("queue")).ok());
  std::string out;
  ASSERT_EQ(
      Cli(0, {"trial", "enqueue", "queue", "x=0.25", "n=8", "opt=sgd"}, &out),
      0)
      << out;
  EXPECT_THAT(out, HasSubstr("REQUESTED"));
  ASSERT_EQ(
      Cli(0, {"trial", "enqueue", "queue", "opt=adam", "--partial"}, &out), 0)
      << out;
  auto granted = ClientOf(0).Suggest("queue", 2, "w1");
  ASSERT_TRUE(granted.ok()) << granted.status();
  ASSERT_EQ(granted->trials_size(), 2);
  const v1::Trial& whole = granted->trials(0);
  EXPECT_EQ(whole.id(), 1);
  ASSERT_EQ(whole.parameters_size(), 3);
  EXPECT_EQ(whole.parameters(0).double_value(), 0.25);
  EXPECT_EQ(whole.parameters(1).int_value(), 8);
  EXPECT_EQ(whole.parameters(2).string_value(), "sgd");
  const v1::Trial& partial = granted->trials(1);
  EXPECT_EQ(partial.id(), 2);
  ASSERT_EQ(partial.parameters_size(), 3);
  EXPECT_GE(partial.parameters(0).double_value(), -1);
  EXPECT_LE(partial.parameters(0).double_value(), 1);
  EXPECT_GE(partial.parameters(1).int_value(), 1);
  EXPECT_LE(partial.parameters(1).int_value(), 64);
  EXPECT_EQ(partial.parameters(2).string_value(), "adam");

  // A whole configuration names every parameter; values are typed by the
  // study's spec; the server names what is out of range.
  EXPECT_EQ(Cli(0, {"trial", "enqueue", "queue", "x=0.25"}, &out), 1);
  EXPECT_THAT(out, HasSubstr("parameter \"n\" is missing"));
  EXPECT_EQ(Cli(0, {"trial", "enqueue", "queue", "n=eight", "--partial"}, &out),
            2);
  EXPECT_THAT(out, HasSubstr("n: \"eight\" is not an integer"));
  EXPECT_EQ(Cli(0, {"trial", "enqueue", "queue", "lr=1", "--partial"}, &out),
            2);
  EXPECT_THAT(out, HasSubstr("\"lr\" is not a parameter of the study"));
  EXPECT_EQ(Cli(0, {"trial", "enqueue", "queue", "x=5", "--partial"}, &out), 1);
  EXPECT_THAT(out, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(out, HasSubstr("outside [-1, 1]"));
}

// A file of 100,000 nested '[' once crashed `hypertune import` (SIGSEGV:
// the JSON library's dump() recursed once per level to show what the line
// held): now an error naming the file's line and the limit, exit status 1.
TEST_F(ImportExportTest, DeeplyNestedJsonIsRefusedNotACrash) {
  std::string out;
  const std::string path = dir_.File("deep.jsonl");
  for (const std::string& text :
       {std::string(100000, '[') + std::string(100000, ']'),
        std::string(100000, '[')}) {
    WriteFile(path, text);
    EXPECT_EQ(Cli(0, {"import", path}, &out), 1) << out;
    EXPECT_THAT(out, HasSubstr("INVALID_ARGUMENT"));
    EXPECT_THAT(out, HasSubstr(path + ":1: JSON nested deeper than 100 levels "
                                      "(line 1, column 101)"));
  }
  // The same as a trial line of an export, and as a trials file.
  MakeStudy(0, "deep");
  ASSERT_EQ(Cli(0, {"export", "deep"}, &out, " > " + path), 0);
  WriteFile(path, ReadFile(path) + std::string(100000, '[') + "\n");
  EXPECT_EQ(Cli(1, {"import", path}, &out), 1) << out;
  EXPECT_THAT(out, HasSubstr(path + ":8: JSON nested deeper than 100 levels"));
  WriteFile(path, std::string(100000, '{') + std::string(100000, '}'));
  EXPECT_EQ(Cli(0, {"trials", "import", "deep", path}, &out), 1) << out;
  EXPECT_THAT(out, HasSubstr(path + ":1: JSON nested deeper than 100 levels"));
}

TEST_F(ImportExportTest, TrialsImportReadsWhatTrialsWrites) {
  MakeStudy(0, "source");
  Client client = ClientOf(0);
  std::string out;
  for (const char* format : {"csv", "json"}) {
    const std::string path = dir_.File(absl::StrCat("trials.", format));
    ASSERT_EQ(
        Cli(0, {"trials", "source", "--format", format}, &out, " > " + path),
        0);
    const std::string target = absl::StrCat("target-", format);
    ASSERT_TRUE(client.CreateStudy(SmallStudy(target)).ok());
    ASSERT_EQ(Cli(0, {"trials", "import", target, path}, &out), 0) << out;
    EXPECT_THAT(out, HasSubstr("imported 3 trials into study"));
    EXPECT_THAT(out, HasSubstr("skipped 3 trials that are not COMPLETED"));
    auto source = client.ListAllTrials("source", {v1::Trial::COMPLETED});
    auto imported = client.ListAllTrials(target);
    ASSERT_TRUE(source.ok() && imported.ok());
    ASSERT_EQ(imported->size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      const v1::Trial& a = (*source)[i];
      const v1::Trial& b = (*imported)[i];
      EXPECT_TRUE(b.warm_start());
      EXPECT_EQ(b.state(), v1::Trial::COMPLETED);
      ASSERT_EQ(b.parameters_size(), 3);
      EXPECT_EQ(b.parameters(0).double_value(), a.parameters(0).double_value());
      EXPECT_EQ(b.parameters(1).int_value(), a.parameters(1).int_value());
      EXPECT_EQ(b.parameters(2).string_value(), a.parameters(2).string_value());
      EXPECT_EQ(b.final_measurement().metrics().at("loss"),
                a.final_measurement().metrics().at("loss"));
    }
    ASSERT_EQ(Cli(0, {"trials", target}, &out), 0);
    EXPECT_THAT(out, HasSubstr("COMPLETED (warm start)"));
  }
  // A row the study cannot take: the error names its line.
  const std::string bad = dir_.File("bad.csv");
  WriteFile(bad, "x,n,opt,loss\n0.5,4,adam,1\n0.5,4,lamb,2\n");
  EXPECT_EQ(Cli(0, {"trials", "import", "target-csv", bad}, &out), 1);
  EXPECT_THAT(out, HasSubstr(bad + ":3: parameters"));
  WriteFile(bad, "x,n,opt,loss\n0.5,four,adam,1\n");
  EXPECT_EQ(Cli(0, {"trials", "import", "target-csv", bad}, &out), 1);
  EXPECT_THAT(out, HasSubstr(bad + ":2: n: \"four\" is not an integer"));
}

TEST_F(ImportExportTest, StudyCreateWarmStartsFromOtherStudies) {
  MakeStudy(0, "earlier");
  std::string out;
  const std::string config = dir_.File("study.json");
  WriteFile(config, R"({"name": "later", "spec": {
      "parameters": [
        {"name": "x", "double_spec": {"min": -1, "max": 1}},
        {"name": "n", "integer_spec": {"min": 1, "max": 64, "scale": "LOG"}},
        {"name": "opt", "categorical_spec": {"values": ["adam", "sgd"]}}],
      "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
      "algorithm": "RANDOM", "max_trials": 2}})");
  EXPECT_EQ(Cli(0,
                {"study", "create", "--config", config, "--warm-start-from",
                 "earlier,missing"},
                &out),
            1);
  EXPECT_THAT(out, HasSubstr("NOT_FOUND"));
  EXPECT_FALSE(ClientOf(0).GetStudy("later").ok());
  ASSERT_EQ(Cli(0,
                {"study", "create", "--config", config, "--warm-start-from",
                 "earlier"},
                &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("warm start: copied 3 COMPLETED trials"));
  Client client = ClientOf(0);
  auto trials = client.ListAllTrials("later");
  ASSERT_TRUE(trials.ok());
  ASSERT_EQ(trials->size(), 3u);
  for (const v1::Trial& t : *trials) EXPECT_TRUE(t.warm_start());
  // max_trials 2 counts new trials only.
  auto fresh = client.Suggest("later", 5, "w");
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->trials_size(), 2);
}

// An Optuna file written by Optuna itself (Debian's python3-optuna): every
// trial imported, with its state, parameters, values and intermediate
// values.
TEST_F(ImportExportTest, ImportOptunaKeepsEveryTrial) {
  const std::string db = dir_.File("optuna.db");
  const std::string expected_path = dir_.File("expected.json");
  std::string out;
  const int rc = test::RunShell(
      absl::StrCat(HYPERTUNE_PYTHON, " ", HYPERTUNE_SOURCE_DIR,
                   "/tests/cli/make_optuna_study.py ", db, " ", expected_path),
      &out);
  if (rc == 77) {
    GTEST_SKIP() << "optuna is not importable by " << HYPERTUNE_PYTHON
                 << " (apt-get install python3-optuna)";
  }
  ASSERT_EQ(rc, 0) << out;
  ASSERT_EQ(Cli(0, {"import-optuna", db}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("imported Optuna study \"optuna-demo\" as "
                             "\"optuna-demo\": 11 trials"));
  // Every attribute fits: none is listed as left behind.
  EXPECT_THAT(out, Not(HasSubstr("not kept")));
  const nlohmann::json expected =
      nlohmann::json::parse(ReadFile(expected_path));

  Client client = ClientOf(0);
  auto demo = client.GetStudy("optuna-demo");
  ASSERT_TRUE(demo.ok()) << demo.status();
  EXPECT_EQ(demo->attributes().at("team"), "vision");
  const v1::StudySpec& spec = demo->spec();
  ASSERT_EQ(spec.metrics_size(), 1);
  EXPECT_EQ(spec.metrics(0).name(), "value");
  EXPECT_EQ(spec.metrics(0).goal(), v1::MetricSpec::MINIMIZE);
  std::map<std::string, v1::ParameterSpec> params;
  for (const v1::ParameterSpec& p : spec.parameters()) params[p.name()] = p;
  ASSERT_EQ(params.size(), 6u);
  EXPECT_EQ(params["lr"].double_spec().scale(), v1::LOG);
  EXPECT_EQ(params["lr"].double_spec().min(), 1e-4);
  EXPECT_EQ(params["dropout"].discrete_spec().values_size(), 6);
  EXPECT_EQ(params["units"].integer_spec().scale(), v1::LOG);
  EXPECT_EQ(params["units"].integer_spec().max(), 256);
  EXPECT_THAT(params["layers"].discrete_spec().values(),
              ::testing::ElementsAre(1, 3, 5, 7));
  EXPECT_THAT(params["optimizer"].categorical_spec().values(),
              ::testing::ElementsAre("adam", "sgd", "rmsprop"));
  EXPECT_THAT(params["batch"].discrete_spec().values(),
              ::testing::ElementsAre(32, 64, 128));

  for (const std::string name : {"optuna-demo", "optuna-mo"}) {
    auto trials = client.ListAllTrials(name);
    ASSERT_TRUE(trials.ok());
    const nlohmann::json& want = expected.at(name);
    ASSERT_EQ(trials->size(), want.size()) << name;
    for (size_t i = 0; i < want.size(); ++i) {
      const nlohmann::json& w = want[i];
      const v1::Trial& t = (*trials)[i];
      SCOPED_TRACE(absl::StrCat(name, " trial ", w["number"].get<int>()));
      EXPECT_EQ(t.id(), w["number"].get<int64_t>() + 1);
      const std::string state = w["state"];
      const v1::Trial::State mapped = state == "COMPLETE" ? v1::Trial::COMPLETED
                                      : state == "PRUNED" ? v1::Trial::STOPPED
                                      : state == "FAIL"   ? v1::Trial::FAILED
                                                        : v1::Trial::REQUESTED;
      EXPECT_EQ(t.state(), mapped);
      if (state != "WAITING") {
        ASSERT_EQ(static_cast<size_t>(t.parameters_size()), w["params"].size());
      }
      for (const v1::ParameterValue& p : t.parameters()) {
        if (!w["params"].contains(p.name())) continue;  // WAITING: fixed ones
        const nlohmann::json& v = w["params"][p.name()];
        switch (p.value_case()) {
          case v1::ParameterValue::kStringValue:
            EXPECT_EQ(p.string_value(), v.get<std::string>()) << p.name();
            break;
          case v1::ParameterValue::kIntValue:
            EXPECT_EQ(p.int_value(), v.get<int64_t>()) << p.name();
            break;
          default:
            EXPECT_DOUBLE_EQ(p.double_value(), v.get<double>()) << p.name();
        }
      }
      const auto& metrics = t.final_measurement().metrics();
      if (!w["values"].is_null()) {
        const nlohmann::json& values = w["values"];
        if (values.size() == 1) {
          EXPECT_EQ(metrics.at("value"), values[0].get<double>());
        } else {
          for (size_t k = 0; k < values.size(); ++k) {
            EXPECT_EQ(metrics.at(absl::StrCat("values_", k)),
                      values[k].get<double>());
          }
        }
      }
      EXPECT_EQ(static_cast<size_t>(t.measurements_size()),
                w["intermediate"].size());
      for (const v1::Measurement& m : t.measurements()) {
        EXPECT_EQ(m.metrics().at("value"),
                  w["intermediate"][absl::StrCat(m.step())].get<double>());
      }
      // Every user attribute as an attribute (text as is, the rest as
      // JSON); numbers and booleans also as metrics.
      EXPECT_EQ(static_cast<size_t>(t.attributes_size()),
                w["user_attrs"].size());
      for (const auto& [key, value] : w["user_attrs"].items()) {
        ASSERT_TRUE(t.attributes().contains(key)) << key;
        EXPECT_EQ(t.attributes().at(key),
                  value.is_string() ? value.get<std::string>() : value.dump());
      }
      if (w["user_attrs"].contains("epochs_run")) {
        EXPECT_EQ(t.attributes().at("comment"), "text is kept as text");
        EXPECT_EQ(t.attributes().at("layers_used"), "[1,2]");
        EXPECT_EQ(metrics.at("user_attr.epochs_run"), 3);
        EXPECT_EQ(metrics.at("user_attr.converged"), 1);
      }
      if (state == "FAIL") {
        // Optuna 3.1 keeps no fail_reason: ours says where it failed.
        EXPECT_THAT(t.failure_reason(), HasSubstr("failed"));
      }
    }
  }
  auto mo = client.GetStudy("optuna-mo");
  ASSERT_TRUE(mo.ok());
  ASSERT_EQ(mo->spec().metrics_size(), 2);
  EXPECT_EQ(mo->spec().metrics(1).name(), "values_1");
  EXPECT_EQ(mo->spec().metrics(1).goal(), v1::MetricSpec::MAXIMIZE);
  EXPECT_EQ(mo->spec().metrics(0).role(), v1::MetricSpec::OBJECTIVE);
  EXPECT_EQ(mo->spec().metrics(1).role(), v1::MetricSpec::OBJECTIVE);
  // Both objectives make the answer a Pareto front of the imported trials.
  auto front = client.ListOptimalTrials("optuna-mo");
  ASSERT_TRUE(front.ok()) << front.status();
  EXPECT_GE(front->trials_size(), 1);

  // The WAITING (enqueued) trial runs under hypertune with its parameters.
  auto queued = client.Suggest("optuna-demo", 1, "w");
  ASSERT_TRUE(queued.ok());
  ASSERT_EQ(queued->trials_size(), 1);
  EXPECT_EQ(queued->trials(0).id(), 11);
  EXPECT_EQ(queued->trials(0).parameters_size(), 6);

  // Importing again: the names are taken.
  EXPECT_EQ(Cli(0, {"import-optuna", db, "--study", "optuna-mo"}, &out), 1);
  EXPECT_THAT(out, HasSubstr("ALREADY_EXISTS"));
  ASSERT_EQ(
      Cli(0,
          {"import-optuna", db, "--study", "optuna-mo", "--name", "mo-again"},
          &out),
      0)
      << out;
  EXPECT_EQ(Cli(0, {"import-optuna", db, "--study", "nope"}, &out), 1);
  EXPECT_THAT(out, HasSubstr("NOT_FOUND"));
}

// make_optuna_study.py in `mode` (see its docstring): its exit status, 77
// when optuna is not importable.
int MakeOptunaFile(const std::string& db, const std::string& expected,
                   const std::string& mode, std::string* out) {
  return test::RunShell(
      absl::StrCat(HYPERTUNE_PYTHON, " ", HYPERTUNE_SOURCE_DIR,
                   "/tests/cli/make_optuna_study.py ", db, " ", expected, " ",
                   mode),
      out);
}

// Values Optuna's file holds but hypertune cannot read are refused, naming
// the trial and field, never read as something else (a text value as 0, a
// NULL choice index as the first choice, state ZOMBIE as REQUESTED,
// direction SIDEWAYS as MINIMIZE); a step is kept, or the report says it
// was dropped.
TEST_F(ImportExportTest, ImportOptunaRefusesValuesItCannotRead) {
  const std::string db = dir_.File("odd.db");
  const std::string expected_path = dir_.File("odd.json");
  std::string out;
  const int rc = MakeOptunaFile(db, expected_path, "odd", &out);
  if (rc == 77) {
    GTEST_SKIP() << "optuna is not importable by " << HYPERTUNE_PYTHON
                 << " (apt-get install python3-optuna)";
  }
  ASSERT_EQ(rc, 0) << out;

  EXPECT_EQ(Cli(1, {"import-optuna", db + ".state"}, &out), 1) << out;
  EXPECT_THAT(out, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(out, HasSubstr("Optuna study \"optuna-odd\": trial 4: state "
                             "\"ZOMBIE\" is not an Optuna trial state"));
  EXPECT_EQ(Cli(1, {"import-optuna", db + ".direction"}, &out), 1) << out;
  EXPECT_THAT(out, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(out, HasSubstr("objective 0 has direction \"SIDEWAYS\""));
  EXPECT_FALSE(ClientOf(1).GetStudy("optuna-odd").ok());

  ASSERT_EQ(Cli(0, {"import-optuna", db}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("4 trials (COMPLETED=4), 4 parameters, 2 trials "
                             "left out"));
  EXPECT_THAT(out, HasSubstr("Optuna trial 1 (COMPLETE) left out: parameter "
                             "\"x\": the stored value \"abc\" is not a "
                             "number"));
  EXPECT_THAT(out, HasSubstr("Optuna trial 2 (COMPLETE) left out: parameter "
                             "\"act\": the stored value is NULL"));
  EXPECT_THAT(out, HasSubstr("parameter \"wide\": Optuna's step (5) over "
                             "[0, 100000] gives more than 1000 values"));
  Client client = ClientOf(0);
  auto study = client.GetStudy("optuna-odd");
  ASSERT_TRUE(study.ok()) << study.status();
  std::map<std::string, v1::ParameterSpec> params;
  for (const v1::ParameterSpec& p : study->spec().parameters()) {
    params[p.name()] = p;
  }
  // Steps 2 and 3 over [1, 13]: the union of their values.
  EXPECT_THAT(params["layers"].discrete_spec().values(),
              ::testing::ElementsAre(1, 3, 4, 5, 7, 9, 10, 11, 13));
  EXPECT_EQ(params["wide"].integer_spec().min(), 0);
  EXPECT_EQ(params["wide"].integer_spec().max(), 100000);
  const nlohmann::json expected =
      nlohmann::json::parse(ReadFile(expected_path)).at("optuna-odd");
  auto trials = client.ListAllTrials("optuna-odd");
  ASSERT_TRUE(trials.ok());
  ASSERT_EQ(trials->size(), 4u);
  const std::vector<int> numbers = {0, 3, 4, 5};
  for (size_t i = 0; i < numbers.size(); ++i) {
    const v1::Trial& t = (*trials)[i];
    const nlohmann::json& w = expected[numbers[i]]["params"];
    EXPECT_EQ(t.client_id(), absl::StrCat("optuna trial ", numbers[i]));
    for (const v1::ParameterValue& p : t.parameters()) {
      if (p.name() == "act") {
        EXPECT_EQ(p.string_value(), w["act"].get<std::string>());
      } else if (p.name() == "wide") {
        EXPECT_EQ(p.int_value(), w["wide"].get<int64_t>());
      } else {
        EXPECT_DOUBLE_EQ(p.double_value(), w[p.name()].get<double>())
            << p.name();
      }
    }
  }
}

// A define-by-run space (Optuna's conditional parameters): each parameter
// some trials lack gets the parent whose values tell when it is present;
// every trial is kept with exactly its parameters.
TEST_F(ImportExportTest, ImportOptunaKeepsAConditionalSpace) {
  const std::string db = dir_.File("conditional.db");
  const std::string expected_path = dir_.File("conditional.json");
  std::string out;
  const int rc = MakeOptunaFile(db, expected_path, "conditional", &out);
  if (rc == 77) {
    GTEST_SKIP() << "optuna is not importable by " << HYPERTUNE_PYTHON
                 << " (apt-get install python3-optuna)";
  }
  ASSERT_EQ(rc, 0) << out;
  ASSERT_EQ(Cli(0, {"import-optuna", db}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("parameter \"momentum\" is conditional: active "
                             "when \"optimizer\" is sgd"));
  EXPECT_THAT(out, HasSubstr("parameter \"units_1\" is conditional: active "
                             "when \"layers\" is 2 or 3"));
  EXPECT_THAT(out, HasSubstr("parameter \"units_2\" is conditional: active "
                             "when \"layers\" is 3"));
  // Every third trial chose "warmup": no parameter's values say when (the
  // parameter of many values that would name those trials is not taken). It
  // is left out, the fewer values to lose than the trials without it.
  EXPECT_THAT(out, HasSubstr("parameter \"warmup\" is in 8 of 23 trials, and "
                             "no CATEGORICAL, DISCRETE or INTEGER parameter's "
                             "values tell when: left out of the space (the 8 "
                             "trials with it are kept without it)"));
  EXPECT_THAT(out,
              HasSubstr("24 trials (COMPLETED=23 FAILED=1), 7 parameters"));
  EXPECT_THAT(out, Not(HasSubstr("left out:")));
  EXPECT_THAT(out,
              Not(HasSubstr("conditional search spaces are not imported")));

  Client client = ClientOf(0);
  auto study = client.GetStudy("optuna-conditional");
  ASSERT_TRUE(study.ok()) << study.status();
  std::map<std::string, v1::ParameterSpec> params;
  for (const v1::ParameterSpec& p : study->spec().parameters()) {
    params[p.name()] = p;
  }
  EXPECT_EQ(params["optimizer"].parent(), "");
  EXPECT_EQ(params["layers"].parent(), "");
  EXPECT_EQ(params["momentum"].parent(), "optimizer");
  EXPECT_THAT(params["momentum"].parent_categories(),
              ::testing::ElementsAre("sgd"));
  EXPECT_EQ(params["units_1"].parent(), "layers");
  EXPECT_THAT(params["units_1"].parent_values(), ::testing::ElementsAre(2, 3));
  EXPECT_EQ(params["units_2"].parent(), "layers");
  EXPECT_THAT(params["units_2"].parent_values(), ::testing::ElementsAre(3));

  // The imported trials hold exactly the parameters Optuna's did.
  const nlohmann::json expected =
      nlohmann::json::parse(ReadFile(expected_path)).at("optuna-conditional");
  auto trials = client.ListAllTrials("optuna-conditional");
  ASSERT_TRUE(trials.ok());
  size_t kept_sgd = 0;
  for (const v1::Trial& t : *trials) {
    const int number = std::stoi(t.client_id().substr(strlen("optuna trial ")));
    const nlohmann::json& w = expected.at(number)["params"];
    SCOPED_TRACE(t.client_id());
    EXPECT_EQ(static_cast<size_t>(t.parameters_size()),
              w.size() - (w.contains("warmup") ? 1 : 0));
    for (const v1::ParameterValue& p : t.parameters()) {
      ASSERT_TRUE(w.contains(p.name())) << p.name();
      if (p.name() == "optimizer") {
        EXPECT_EQ(p.string_value(), w["optimizer"].get<std::string>());
        if (p.string_value() == "sgd") ++kept_sgd;
      } else if (p.value_case() == v1::ParameterValue::kIntValue) {
        EXPECT_EQ(p.int_value(), w[p.name()].get<int64_t>());
      } else {
        EXPECT_DOUBLE_EQ(p.double_value(), w[p.name()].get<double>());
      }
    }
  }
  EXPECT_GT(kept_sgd, 0u);
  // Trial 5 failed before choosing its layers: FAILED, with what it chose.
  auto failed = std::find_if(
      trials->begin(), trials->end(),
      [](const v1::Trial& t) { return t.client_id() == "optuna trial 5"; });
  ASSERT_NE(failed, trials->end());
  EXPECT_EQ(failed->state(), v1::Trial::FAILED);

  // hypertune continues the study in the same conditional space.
  auto next = client.Suggest("optuna-conditional", 4, "w");
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(next->trials_size(), 4);
  for (const v1::Trial& t : next->trials()) {
    bool sgd = false, momentum = false;
    for (const v1::ParameterValue& p : t.parameters()) {
      if (p.name() == "optimizer") sgd = p.string_value() == "sgd";
      if (p.name() == "momentum") momentum = true;
    }
    EXPECT_EQ(sgd, momentum) << t.ShortDebugString();
  }
}

// `study update --promote-by-model`: the learning-curve model turned on and
// off for an ASHA study that pauses at rungs; refused, naming the field,
// where it cannot apply.
TEST_F(ImportExportTest, StudyUpdateTurnsTheLearningCurveModelOnAndOff) {
  v1::Study asha = SmallStudy("curves");
  v1::EarlyStoppingSpec* rule = asha.mutable_spec()->mutable_early_stopping();
  rule->set_rule(v1::EarlyStoppingSpec::ASHA);
  rule->set_max_resource(27);
  rule->set_pause_at_rungs(true);
  ASSERT_TRUE(ClientOf(0).CreateStudy(asha).ok());
  std::string out;
  ASSERT_EQ(
      Cli(0, {"study", "update", "curves", "--promote-by-model", "true"}, &out),
      0)
      << out;
  EXPECT_THAT(out, HasSubstr("early_stopping.promote_by_model: false -> true"));
  EXPECT_TRUE(ClientOf(0)
                  .GetStudy("curves")
                  ->spec()
                  .early_stopping()
                  .promote_by_model());
  ASSERT_EQ(Cli(0, {"study", "update", "curves", "--promote-by-model", "false"},
                &out),
            0)
      << out;
  EXPECT_FALSE(ClientOf(0)
                   .GetStudy("curves")
                   ->spec()
                   .early_stopping()
                   .promote_by_model());
  EXPECT_EQ(
      Cli(0, {"study", "update", "curves", "--promote-by-model", "yes"}, &out),
      2);
  EXPECT_THAT(out, HasSubstr("--promote-by-model: expected true or false"));
  // A study without ASHA: the server names the field.
  ASSERT_TRUE(ClientOf(0).CreateStudy(SmallStudy("plain")).ok());
  EXPECT_EQ(
      Cli(0, {"study", "update", "plain", "--promote-by-model", "true"}, &out),
      1);
  EXPECT_THAT(out, HasSubstr("early_stopping.promote_by_model"));
}

}  // namespace
}  // namespace hypertune
