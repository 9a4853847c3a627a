// The routes the dashboard added to the HTTP API, over a real in-process
// server: a trial by id, its log's tail (only from inside the log root),
// parameter importance (COMPLETED trials only), the compact change feed,
// what the server offers, and the writes (stop a trial, pause or resume a
// study, raise its budget) with their guards: the owner's token, the same
// origin, a JSON body, and without auth only on the loopback with
// --http-allow-writes.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/http_test_util.h"

namespace hypertune::test {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr int kTrials = 60;

HttpServerExtras WithLogRoot(const std::string& dir) {
  HttpServerExtras extras;
  extras.log_root = dir;
  return extras;
}

HttpServerExtras WithWritesWithoutAuth(
    const std::string& listen = "127.0.0.1:0") {
  HttpServerExtras extras;
  extras.allow_writes = true;
  extras.http_listen = listen;
  return extras;
}

// The server's view of one study of alice's and one of bob's, with auth.
class DashboardApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteTokenFile(dir_.File("tokens")).ok());
    study_ = MakeStudy("alice-study", "alice");
    study_.mutable_spec()->set_max_trials(100);
    trials_ = MakeTrials(study_, kTrials, 4, 1);
    ASSERT_TRUE(WriteStudy(dir_.File("db"), study_, trials_).ok());
    v1::Study bob = MakeStudy("bob-study", "bob");
    ASSERT_TRUE(
        WriteStudy(dir_.File("db"), bob, MakeTrials(bob, 5, 2, 2)).ok());
  }

  void Start(const HttpServerExtras& extras = {}) {
    auto server = StartHttpServer(dir_.File("db"), dir_.File("tokens"), extras);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    http_ = server_->http_address();
  }

  HttpReply Get(const std::string& path,
                const std::string& token = kAliceToken) {
    return HttpGet(http_, path, token);
  }

  // A write as the dashboard sends it: JSON, the token, same origin.
  HttpReply Post(const std::string& path, const std::string& body,
                 const std::string& token = kAliceToken,
                 std::multimap<std::string, std::string> headers = {}) {
    if (headers.find("Origin") == headers.end()) {
      headers.emplace("Origin", absl::StrCat("http://", http_));
    }
    if (headers.find("Sec-Fetch-Site") == headers.end()) {
      headers.emplace("Sec-Fetch-Site", "same-origin");
    }
    return HttpPost(http_, path, token, body, "application/json", headers);
  }

  json Study() { return json::parse(Get("/api/studies/alice-study").body); }

  TempDir dir_;
  v1::Study study_;
  std::vector<v1::Trial> trials_;
  std::unique_ptr<service::Server> server_;
  std::string http_;
};

std::string ErrorMessage(const HttpReply& reply) {
  json body = json::parse(reply.body, nullptr, false);
  if (body.is_discarded() || !body.contains("error")) return reply.body;
  return body["error"]["message"].get<std::string>();
}

TEST_F(DashboardApiTest, NewReadRoutesNeedTheTokenAndTheOwner) {
  Start();
  const std::vector<std::string> paths = {
      "/api/server",
      "/api/studies/alice-study/trials/3",
      "/api/studies/alice-study/trials/3/log",
      "/api/studies/alice-study/importance",
      "/api/studies/alice-study/changes?view=compact",
  };
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    EXPECT_EQ(Get(path, "").status, 401);
    EXPECT_EQ(Get(path, "not-a-token").status, 401);
    if (path != "/api/server") {
      HttpReply bob = Get(path, kBobToken);
      EXPECT_EQ(bob.status, 403);
      EXPECT_THAT(ErrorMessage(bob), HasSubstr("alice-study"));
    }
  }
  json info = json::parse(Get("/api/server").body);
  EXPECT_EQ(info["auth"], true);
  EXPECT_EQ(info["writes"], true);  // with auth, for the owner
  EXPECT_EQ(info["logs"], false);
}

TEST_F(DashboardApiTest, TrialByIdIsTheFullMessage) {
  Start();
  HttpReply reply = Get("/api/studies/alice-study/trials/7");
  ASSERT_EQ(reply.status, 200) << reply.body;
  v1::Trial trial;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(reply.body, &trial).ok());
  EXPECT_EQ(trial.id(), 7);
  EXPECT_EQ(trial.state(), trials_[6].state());
  EXPECT_EQ(trial.measurements_size(), trials_[6].measurements_size());
  EXPECT_EQ(trial.stop_reason(), trials_[6].stop_reason());

  struct Case {
    std::string path;
    int status;
    std::string mentions;
  };
  for (const Case& c : std::vector<Case>{
           {"/api/studies/alice-study/trials/abc", 400, "trial id"},
           {"/api/studies/alice-study/trials/0", 400, "trial id"},
           {"/api/studies/alice-study/trials/999", 404, "999"},
           {"/api/studies/nope/trials/1", 404, "nope"},
           {"/api/studies/alice-study/trials/1/log?bytes=0", 400, "bytes"},
           {"/api/studies/alice-study/trials/1/log?bytes=70000", 400, "bytes"},
           {"/api/studies/alice-study/changes?view=tiny", 400, "view"},
           // The compact view takes pages of up to 10,000; the full one 1,000.
           {"/api/studies/alice-study/changes?view=compact&limit=10001", 400,
            "limit"},
       }) {
    SCOPED_TRACE(c.path);
    HttpReply r = Get(c.path);
    EXPECT_EQ(r.status, c.status) << r.body;
    EXPECT_THAT(ErrorMessage(r), HasSubstr(c.mentions));
  }
}

// The compact feed holds what the full one does, in the documented shape.
TEST_F(DashboardApiTest, CompactChangesAgreeWithTheFullFeed) {
  Start();
  json full = json::parse(Get("/api/studies/alice-study/changes").body);
  json compact =
      json::parse(Get("/api/studies/alice-study/changes?view=compact").body);
  ASSERT_EQ(compact["events"].size(), static_cast<size_t>(kTrials));
  EXPECT_EQ(
      Get("/api/studies/alice-study/changes?view=compact&limit=10000").status,
      200);
  EXPECT_EQ(compact["last_sequence"], full["last_sequence"]);
  EXPECT_EQ(compact["more"], false);
  for (size_t i = 0; i < compact["events"].size(); ++i) {
    SCOPED_TRACE(i);
    const json& c = compact["events"][i]["trial"];
    v1::Trial t;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                    full["events"][i]["trial"].dump(), &t)
                    .ok());
    EXPECT_EQ(c["id"], t.id());
    EXPECT_EQ(c["state"], v1::Trial::State_Name(t.state()));
    ASSERT_EQ(c["params"].size(), 4u);
    EXPECT_DOUBLE_EQ(c["params"][0].get<double>(),
                     t.parameters(0).double_value());
    EXPECT_EQ(c["params"][2].get<int64_t>(), t.parameters(2).int_value());
    EXPECT_EQ(c["params"][3], t.parameters(3).string_value());
    ASSERT_EQ(c["metrics"].size(), 2u);
    const bool finished =
        t.state() == v1::Trial::COMPLETED || t.state() == v1::Trial::STOPPED;
    if (finished && t.has_final_measurement()) {
      EXPECT_DOUBLE_EQ(c["metrics"][0].get<double>(),
                       t.final_measurement().metrics().at("loss"));
      EXPECT_DOUBLE_EQ(c["metrics"][1].get<double>(),
                       t.final_measurement().metrics().at("acc"));
    } else {
      EXPECT_TRUE(c["metrics"][0].is_null());
    }
    ASSERT_EQ(c["curve"].size(), static_cast<size_t>(t.measurements_size()));
    for (int m = 0; m < t.measurements_size(); ++m) {
      EXPECT_EQ(c["curve"][m][0], t.measurements(m).step());
      EXPECT_DOUBLE_EQ(c["curve"][m][1].get<double>(),
                       t.measurements(m).metrics().at("loss"));
    }
    EXPECT_EQ(c["measurements"], t.measurements_size());
    EXPECT_EQ(c["create_time_ms"], t.create_time_ms());
    EXPECT_EQ(c["end_time_ms"], t.end_time_ms());
    if (t.state() == v1::Trial::FAILED) {
      EXPECT_EQ(c["reason"], t.failure_reason());
    }
  }
}

// Importance over COMPLETED trials only: the objective of the completed
// trials depends on lr alone, stopped trials' partial values on x alone.
TEST_F(DashboardApiTest, ImportanceUsesCompletedTrialsOnly) {
  v1::Study study = MakeStudy("importance", "alice");
  std::vector<v1::Trial> trials = MakeTrials(study, 400, 2, 3);
  int completed = 0;
  for (v1::Trial& t : trials) {
    const double x = t.parameters(0).double_value();
    const double lr = t.parameters(1).double_value();
    auto& final = *t.mutable_final_measurement()->mutable_metrics();
    if (t.state() == v1::Trial::COMPLETED) {
      final["loss"] = std::log10(lr);
      ++completed;
    } else if (t.state() == v1::Trial::STOPPED) {
      final["loss"] = 1000 * x;
    }
  }
  // One infinite objective counts as the worst, and is no reason to fail.
  (*trials[0].mutable_final_measurement()->mutable_metrics())["loss"] =
      INFINITY;
  ASSERT_EQ(trials[0].state(), v1::Trial::COMPLETED);
  ASSERT_TRUE(WriteStudy(dir_.File("db"), study, trials).ok());
  Start();
  HttpReply reply = Get("/api/studies/importance/importance");
  ASSERT_EQ(reply.status, 200) << reply.body;
  json answer = json::parse(reply.body);
  EXPECT_EQ(answer["method"], "fanova");
  EXPECT_EQ(answer["objective"], "loss");
  EXPECT_EQ(answer["trials"], completed);
  ASSERT_EQ(answer["parameters"].size(), 4u);
  std::map<std::string, double> share;
  for (const json& p : answer["parameters"]) {
    share[p["name"]] = p["importance"].get<double>();
  }
  EXPECT_GT(share["lr"], 0.8) << reply.body;
  EXPECT_LT(share["x"], 0.05) << reply.body;
  EXPECT_LT(share["depth"], 0.05) << reply.body;
  EXPECT_LT(share["act"], 0.05) << reply.body;
}

// Trials of `study` where depth, present only where act is relu, is the
// objective among the trials that hold it: importance answers for every
// parameter, each over the trials where it is active, never filled in.
void ExpectDepthDecidesUnderRelu(
    const v1::Study& study, const std::function<void()>& start,
    const std::function<HttpReply(const std::string&)>& get,
    const std::string& db) {
  std::vector<v1::Trial> trials = MakeTrials(study, 300, 0, 5);
  int completed = 0;
  int with_depth = 0;
  for (v1::Trial& t : trials) {
    ASSERT_EQ(t.parameters(2).name(), "depth");
    ASSERT_EQ(t.parameters(3).name(), "act");
    const bool relu = t.parameters(3).string_value() == "relu";
    auto& final = *t.mutable_final_measurement()->mutable_metrics();
    final["loss"] = relu ? static_cast<double>(t.parameters(2).int_value())
                         : 100.0 + 1e-3 * t.parameters(0).double_value();
    if (!relu) t.mutable_parameters()->DeleteSubrange(2, 1);
    if (t.state() == v1::Trial::COMPLETED) {
      ++completed;
      with_depth += relu;
    }
  }
  ASSERT_GT(with_depth, 20);
  ASSERT_LT(with_depth, completed);
  ASSERT_TRUE(WriteStudy(db, study, trials).ok());
  start();
  HttpReply reply =
      get(absl::StrCat("/api/studies/", study.name(), "/importance"));
  ASSERT_EQ(reply.status, 200) << reply.body;
  json answer = json::parse(reply.body);
  EXPECT_EQ(answer["trials"], completed) << reply.body;
  EXPECT_EQ(answer["conditional"], true);
  std::map<std::string, json> by_name;
  for (const json& p : answer["parameters"]) by_name[p["name"]] = p;
  ASSERT_EQ(by_name.size(), 4u) << reply.body;
  EXPECT_EQ(by_name["depth"]["trials"], with_depth);
  EXPECT_EQ(by_name["x"]["trials"], completed);
  EXPECT_EQ(by_name["act"]["trials"], completed);
  // Among the trials that have it, depth is the objective.
  EXPECT_GT(by_name["depth"]["importance"].get<double>(), 0.8) << reply.body;
  // Over every trial, act (relu or not) decides most of the objective.
  EXPECT_GT(by_name["act"]["importance"].get<double>(), 0.5) << reply.body;
  EXPECT_LT(by_name["x"]["importance"].get<double>(), 0.1) << reply.body;
}

// Trials that leave depth out where act is not relu, in a spec that does
// not declare it conditional.
TEST_F(DashboardApiTest, ImportanceOfAConditionalParameterUsesItsTrials) {
  ExpectDepthDecidesUnderRelu(
      MakeStudy("conditional", "alice"), [this] { Start(); },
      [this](const std::string& path) { return Get(path); }, dir_.File("db"));
}

// A study whose spec declares a conditional parameter (depth only under
// act = relu), as a user makes one (issue 31 item 13: it answered 400, the
// single-parameter and sub-spaces keeping parent indices into the full
// space).
TEST_F(DashboardApiTest, ImportanceOfADeclaredConditionalSpace) {
  v1::Study study = MakeStudy("declared", "alice");
  v1::ParameterSpec& depth = *study.mutable_spec()->mutable_parameters(2);
  ASSERT_EQ(depth.name(), "depth");
  depth.set_parent("act");
  depth.add_parent_categories("relu");
  ExpectDepthDecidesUnderRelu(
      study, [this] { Start(); },
      [this](const std::string& path) { return Get(path); }, dir_.File("db"));
}

// ?metric= picks the metric whose importances are computed: with two
// objectives, loss depends on lr alone and acc on x alone.
TEST_F(DashboardApiTest, ImportanceOfTheMetricAsked) {
  v1::Study study = MakeStudy("two-objectives", "alice");
  for (v1::MetricSpec& m : *study.mutable_spec()->mutable_metrics()) {
    m.set_role(v1::MetricSpec::OBJECTIVE);
  }
  std::vector<v1::Trial> trials = MakeTrials(study, 200, 0, 4);
  for (v1::Trial& t : trials) {
    auto& final = *t.mutable_final_measurement()->mutable_metrics();
    final["loss"] = std::log10(t.parameters(1).double_value());
    final["acc"] = t.parameters(0).double_value();
  }
  ASSERT_TRUE(WriteStudy(dir_.File("db"), study, trials).ok());
  Start();
  auto shares = [&](const std::string& query, const std::string& metric) {
    HttpReply reply = Get("/api/studies/two-objectives/importance" + query);
    EXPECT_EQ(reply.status, 200) << reply.body;
    json answer = json::parse(reply.body);
    EXPECT_EQ(answer["objective"], metric) << reply.body;
    std::map<std::string, double> share;
    for (const json& p : answer["parameters"]) {
      share[p["name"]] = p["importance"].get<double>();
    }
    return share;
  };
  // Without ?metric=, the first objective.
  std::map<std::string, double> loss = shares("", "loss");
  EXPECT_GT(loss["lr"], 0.8);
  EXPECT_LT(loss["x"], 0.05);
  std::map<std::string, double> acc = shares("?metric=acc", "acc");
  EXPECT_GT(acc["x"], 0.8);
  EXPECT_LT(acc["lr"], 0.05);

  HttpReply unknown = Get("/api/studies/two-objectives/importance?metric=nope");
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  EXPECT_THAT(ErrorMessage(unknown), HasSubstr("metric"));
  EXPECT_THAT(ErrorMessage(unknown), HasSubstr("nope"));
}

TEST_F(DashboardApiTest, ImportanceNeedsTwoCompletedTrials) {
  v1::Study study = MakeStudy("young", "alice");
  std::vector<v1::Trial> trials = MakeTrials(study, 1, 2, 3);
  ASSERT_TRUE(WriteStudy(dir_.File("db"), study, trials).ok());
  Start();
  json answer = json::parse(Get("/api/studies/young/importance").body);
  EXPECT_EQ(answer["parameters"].size(), 0u);
  EXPECT_THAT(answer["message"].get<std::string>(), HasSubstr("at least 2"));
}

// ----- Logs -----

class DashboardLogTest : public DashboardApiTest {
 protected:
  // Trial i's log path is paths[i - 1]; the root holds trial.log.
  void WriteLogStudy(const std::vector<std::string>& paths) {
    v1::Study study = MakeStudy("logs", "alice");
    std::vector<v1::Trial> trials =
        MakeTrials(study, static_cast<int>(paths.size()), 1, 4);
    for (size_t i = 0; i < paths.size(); ++i) {
      trials[i].set_log_path(paths[i]);
    }
    ASSERT_TRUE(WriteStudy(dir_.File("db"), study, trials).ok());
  }

  std::string root() { return dir_.File("logs"); }
  std::string outside() { return dir_.File("elsewhere"); }

  void MakeFiles() {
    std::filesystem::create_directories(root() + "/sub");
    std::filesystem::create_directories(outside());
    std::ofstream(root() + "/trial.log") << "epoch 1\nepoch 2\ndone\n";
    std::ofstream(outside() + "/secret.txt") << "the secret\n";
    std::filesystem::create_symlink(outside() + "/secret.txt",
                                    root() + "/link-out.log");
    std::filesystem::create_directory_symlink(outside(), root() + "/dir-out");
    std::filesystem::create_symlink(root() + "/trial.log",
                                    root() + "/sub/link-in.log");
    // A root "logs2" beside "logs": a prefix of the path is not inside.
    std::filesystem::create_directories(dir_.File("logs2"));
    std::ofstream(dir_.File("logs2") + "/x.log") << "not in the root\n";
    mkfifo((root() + "/fifo.log").c_str(), 0600);
    std::string big(100 * 1024, 'a');
    for (size_t i = 0; i < big.size(); i += 100) big[i] = '\n';
    big += "THE END\n";
    std::ofstream(root() + "/big.log") << big;
  }
};

TEST_F(DashboardLogTest, ServesOnlyFilesInsideTheLogRoot) {
  MakeFiles();
  WriteLogStudy({
      root() + "/trial.log",                // 1: served
      root() + "/../elsewhere/secret.txt",  // 2: .. out of the root
      root() + "/link-out.log",             // 3: a symlink pointing out
      outside() + "/secret.txt",            // 4: an absolute path elsewhere
      root() + "/dir-out/secret.txt",       // 5: through a symlinked folder
      root() + "/sub/link-in.log",          // 6: a symlink that stays in
      dir_.File("logs2") + "/x.log",        // 7: a sibling sharing a prefix
      "trial.log",                          // 8: relative
      root() + "/missing.log",              // 9: no such file
      root() + "/sub",                      // 10: a folder
      root() + "/fifo.log",                 // 11: not a regular file
      "",                                   // 12: no log at all
      root() + "/big.log",                  // 13: bigger than the cap
      "/etc/passwd",                        // 14: elsewhere entirely
  });
  Start(WithLogRoot(root()));
  auto log = [&](int id, const std::string& query = "") {
    return Get(absl::StrCat("/api/studies/logs/trials/", id, "/log", query));
  };
  HttpReply served = log(1);
  ASSERT_EQ(served.status, 200) << served.body;
  json tail = json::parse(served.body);
  EXPECT_EQ(tail["text"], "epoch 1\nepoch 2\ndone\n");
  EXPECT_EQ(tail["offset"], 0);
  EXPECT_EQ(tail["size"], 21);
  for (int id : {2, 3, 4, 5, 7, 14}) {
    SCOPED_TRACE(id);
    HttpReply refused = log(id);
    EXPECT_EQ(refused.status, 403) << refused.body;
    EXPECT_THAT(ErrorMessage(refused), HasSubstr("outside"));
    // The path is the trial's own; the content never comes back.
    EXPECT_THAT(refused.body, ::testing::Not(HasSubstr("the secret")));
  }
  HttpReply inside_link = log(6);
  EXPECT_EQ(inside_link.status, 200) << inside_link.body;
  EXPECT_EQ(json::parse(inside_link.body)["text"], "epoch 1\nepoch 2\ndone\n");
  EXPECT_EQ(log(8).status, 400);
  EXPECT_EQ(log(9).status, 404);
  EXPECT_EQ(log(10).status, 403);
  HttpReply fifo = log(11);  // answered at once, not blocked on the FIFO
  EXPECT_EQ(fifo.status, 403);
  EXPECT_THAT(ErrorMessage(fifo), HasSubstr("regular file"));
  HttpReply none = log(12);
  EXPECT_EQ(none.status, 404);
  EXPECT_THAT(ErrorMessage(none), HasSubstr("no log path"));

  HttpReply big = log(13);
  ASSERT_EQ(big.status, 200);
  json big_tail = json::parse(big.body);
  EXPECT_EQ(big_tail["text"].get<std::string>().size(), 64u * 1024);
  EXPECT_THAT(big_tail["text"].get<std::string>(),
              ::testing::EndsWith("THE END\n"));
  EXPECT_EQ(big_tail["offset"].get<int64_t>() + 64 * 1024,
            big_tail["size"].get<int64_t>());
  json small = json::parse(log(13, "?bytes=8").body);
  EXPECT_EQ(small["text"], "THE END\n");
  // Alice's log is not Bob's to read.
  EXPECT_EQ(Get("/api/studies/logs/trials/1/log", kBobToken).status, 403);
}

TEST_F(DashboardLogTest, WithoutALogRootNothingIsServed) {
  MakeFiles();
  WriteLogStudy({root() + "/trial.log"});
  Start();
  HttpReply reply = Get("/api/studies/logs/trials/1/log");
  EXPECT_EQ(reply.status, 404);
  EXPECT_THAT(ErrorMessage(reply), HasSubstr("--log-root"));
}

TEST_F(DashboardLogTest, LogRootMustBeAFolder) {
  auto server = StartHttpServer(dir_.File("db"), dir_.File("tokens"),
                                WithLogRoot(dir_.File("no-such-folder")));
  EXPECT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("--log-root"));
}

// ----- Writes -----

TEST_F(DashboardApiTest, WritesNeedTheOwnersTokenAndTheSameOrigin) {
  Start();
  const std::string pause = R"({"state": "PAUSED"})";
  const std::string path = "/api/studies/alice-study/state";
  // No token, an unknown one, another owner's.
  EXPECT_EQ(Post(path, pause, "").status, 401);
  EXPECT_EQ(Post(path, pause, "not-a-token").status, 401);
  HttpReply bob = Post(path, pause, kBobToken);
  EXPECT_EQ(bob.status, 403);
  EXPECT_THAT(ErrorMessage(bob), HasSubstr("alice-study"));
  // From another origin, or another site, even with the right token.
  HttpReply origin =
      Post(path, pause, kAliceToken, {{"Origin", "http://evil.example"}});
  EXPECT_EQ(origin.status, 403);
  EXPECT_THAT(ErrorMessage(origin), HasSubstr("cross-origin"));
  EXPECT_EQ(Post(path, pause, kAliceToken, {{"Origin", "null"}}).status, 403);
  HttpReply site =
      Post(path, pause, kAliceToken, {{"Sec-Fetch-Site", "cross-site"}});
  EXPECT_EQ(site.status, 403);
  EXPECT_THAT(ErrorMessage(site), HasSubstr("cross-site"));
  EXPECT_EQ(
      Post(path, pause, kAliceToken, {{"Sec-Fetch-Site", "same-site"}}).status,
      403);
  // What an HTML form of another site could send: no JSON.
  for (const char* type :
       {"application/x-www-form-urlencoded", "text/plain", ""}) {
    HttpReply form = HttpPost(http_, path, kAliceToken, pause, type);
    EXPECT_EQ(form.status, 415) << type;
    EXPECT_THAT(ErrorMessage(form), HasSubstr("application/json"));
  }
  EXPECT_EQ(Study()["state"], "ACTIVE");  // none of it went through
  // The owner, same origin, JSON: paused, then resumed.
  HttpReply paused = Post(path, pause);
  ASSERT_EQ(paused.status, 200) << paused.body;
  EXPECT_EQ(json::parse(paused.body)["state"], "PAUSED");
  EXPECT_EQ(Study()["state"], "PAUSED");
  // A tool (curl) sends neither Origin nor Sec-Fetch-Site.
  HttpReply resumed =
      HttpPost(http_, path, kAliceToken, R"({"state":"ACTIVE"})");
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  EXPECT_EQ(Study()["state"], "ACTIVE");
}

TEST_F(DashboardApiTest, StopTrialGoesThroughTheService) {
  Start();
  // Trial 11 is ACTIVE, trial 1 COMPLETED (MakeTrials).
  ASSERT_EQ(trials_[10].state(), v1::Trial::ACTIVE);
  const std::string stop = "/api/studies/alice-study/trials/11/stop";
  EXPECT_EQ(Post(stop, "{}", "").status, 401);
  EXPECT_EQ(Post(stop, "{}", kBobToken).status, 403);
  EXPECT_EQ(
      Post(stop, "{}", kAliceToken, {{"Origin", "http://evil.example"}}).status,
      403);
  HttpReply stopped = Post(stop, R"({"reason": "looks hopeless"})");
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  json trial = json::parse(stopped.body);
  EXPECT_EQ(trial["state"], "STOPPING");  // its worker finishes it
  EXPECT_EQ(trial["stop_reason"], "looks hopeless");
  EXPECT_EQ(
      json::parse(Get("/api/studies/alice-study/trials/11").body)["state"],
      "STOPPING");
  // A finished trial cannot be stopped; a bad id or body is named.
  HttpReply done = Post("/api/studies/alice-study/trials/1/stop", "{}");
  EXPECT_EQ(done.status, 400);
  EXPECT_THAT(ErrorMessage(done), HasSubstr("COMPLETED"));
  EXPECT_EQ(Post("/api/studies/alice-study/trials/x/stop", "{}").status, 400);
  EXPECT_EQ(Post("/api/studies/alice-study/trials/999/stop", "{}").status, 404);
  HttpReply reason = Post(stop, R"({"reason": 5})");
  EXPECT_EQ(reason.status, 400);
  EXPECT_THAT(ErrorMessage(reason), HasSubstr("reason"));
}

TEST_F(DashboardApiTest, RaisingTheBudgetReopensACompletedStudy) {
  Start();
  const std::string path = "/api/studies/alice-study/max_trials";
  EXPECT_EQ(Post(path, R"({"max_trials": 200})", "").status, 401);
  EXPECT_EQ(Post(path, R"({"max_trials": 200})", kBobToken).status, 403);
  HttpReply closed =
      Post("/api/studies/alice-study/state", R"({"state": "COMPLETED"})");
  ASSERT_EQ(closed.status, 200) << closed.body;
  // At or below the trials created: refused, naming the field.
  HttpReply low = Post(path, absl::StrCat(R"({"max_trials": )", kTrials, "}"));
  EXPECT_EQ(low.status, 400);
  EXPECT_THAT(ErrorMessage(low), HasSubstr("max_trials"));
  HttpReply raised = Post(path, R"({"max_trials": "150"})");
  ASSERT_EQ(raised.status, 200) << raised.body;
  json study = json::parse(raised.body);
  EXPECT_EQ(study["spec"]["max_trials"], 150);
  EXPECT_EQ(study["state"], "ACTIVE");
  EXPECT_EQ(Study()["spec"]["max_trials"], 150);
}

TEST_F(DashboardApiTest, BadWritesAreNamed) {
  Start();
  struct Case {
    std::string path;
    std::string body;
    int status;
    std::string mentions;
  };
  for (const Case& c : std::vector<Case>{
           {"/api/studies/alice-study/state", "not json", 400, "JSON"},
           {"/api/studies/alice-study/state", "[1]", 400, "object"},
           {"/api/studies/alice-study/state", R"({"state": "SLEEPING"})", 400,
            "state"},
           {"/api/studies/alice-study/state", R"({"stat": "PAUSED"})", 400,
            "stat"},
           {"/api/studies/alice-study/state", "{}", 400, "state"},
           {"/api/studies/alice-study/max_trials", R"({"max_trials": 1.5})",
            400, "max_trials"},
           {"/api/studies/alice-study/max_trials", R"({"max_trials": -1})", 400,
            "max_trials"},
           {"/api/studies/alice-study/max_trials", R"({})", 400, "max_trials"},
           {"/api/studies/nope/state", R"({"state": "PAUSED"})", 404, "nope"},
       }) {
    SCOPED_TRACE(c.path + " " + c.body);
    HttpReply reply = Post(c.path, c.body);
    EXPECT_EQ(reply.status, c.status) << reply.body;
    EXPECT_THAT(ErrorMessage(reply), HasSubstr(c.mentions));
  }
  // The wrong method: 405 with Allow.
  HttpReply get = Get("/api/studies/alice-study/state");
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.Header("Allow"), "POST");
  HttpReply post = Post("/api/studies/alice-study", "{}");
  EXPECT_EQ(post.status, 405);
  EXPECT_THAT(post.Header("Allow"), HasSubstr("GET"));
  EXPECT_EQ(Get("/api/studies/alice-study/trials/3/stop").status, 405);
}

// ----- Writes without auth -----

class NoAuthWritesTest : public DashboardApiTest {
 protected:
  void StartWithoutAuth(const HttpServerExtras& extras) {
    auto server = StartHttpServer(dir_.File("db"), "", extras);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    http_ = server_->http_address();
  }
};

TEST_F(NoAuthWritesTest, WritesAreOffWithoutAuthByDefault) {
  StartWithoutAuth({});
  EXPECT_EQ(json::parse(Get("/api/server", "").body)["writes"], false);
  HttpReply reply =
      Post("/api/studies/alice-study/state", R"({"state": "PAUSED"})", "");
  EXPECT_EQ(reply.status, 403);
  EXPECT_THAT(ErrorMessage(reply), HasSubstr("--http-allow-writes"));
  EXPECT_EQ(Study()["state"], "ACTIVE");
}

TEST_F(NoAuthWritesTest, AllowWritesOnLoopbackStillChecksTheOrigin) {
  StartWithoutAuth(WithWritesWithoutAuth());
  EXPECT_EQ(json::parse(Get("/api/server", "").body)["writes"], true);
  const std::string path = "/api/studies/alice-study/state";
  const std::string pause = R"({"state": "PAUSED"})";
  EXPECT_EQ(Post(path, pause, "", {{"Origin", "http://evil.example"}}).status,
            403);
  EXPECT_EQ(Post(path, pause, "", {{"Sec-Fetch-Site", "cross-site"}}).status,
            403);
  EXPECT_EQ(HttpPost(http_, path, "", pause, "text/plain").status, 415);
  // DNS rebinding: a page of evil.example whose name now points here sends
  // its own name as Host and Origin, consistently.
  HttpReply rebound =
      Post(path, pause, "",
           {{"Host", "evil.example:80"}, {"Origin", "http://evil.example:80"}});
  EXPECT_EQ(rebound.status, 403);
  EXPECT_THAT(ErrorMessage(rebound), HasSubstr("loopback"));
  EXPECT_EQ(Study()["state"], "ACTIVE");
  HttpReply paused = Post(path, pause, "");
  ASSERT_EQ(paused.status, 200) << paused.body;
  EXPECT_EQ(Study()["state"], "PAUSED");
}

TEST_F(NoAuthWritesTest, AllowWritesIsRefusedOffTheLoopback) {
  auto server =
      StartHttpServer(dir_.File("db"), "", WithWritesWithoutAuth("0.0.0.0:0"));
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("loopback"));
}

}  // namespace
}  // namespace hypertune::test
