// The HTTP read API over a real in-process server: auth on every endpoint,
// errors that name the problem, keyset pagination under concurrent writes,
// the CSV's quoting, /metrics' text format, the change feed and the event
// stream's resumption.
#include <atomic>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/http_test_util.h"
// After Eigen (through the server's headers): httplib.h brings <resolv.h>,
// whose `_res` macro breaks Eigen's parameter names.
#include "httplib.h"

namespace hypertune::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

constexpr int kAliceTrials = 120;

class HttpApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteTokenFile(dir_.File("tokens")).ok());
    alice_study_ = MakeStudy("alice-study", "alice");
    alice_trials_ = MakeTrials(alice_study_, kAliceTrials, 3, 1);
    ASSERT_TRUE(WriteStudy(dir_.File("db"), alice_study_, alice_trials_).ok());
    ASSERT_TRUE(WriteStudy(dir_.File("db"), MakeStudy("bob-study", "bob"),
                           MakeTrials(MakeStudy("bob-study", "bob"), 10, 2, 2))
                    .ok());
    auto server = StartHttpServer(dir_.File("db"), dir_.File("tokens"));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    http_ = server_->http_address();
  }

  HttpReply Get(const std::string& path,
                const std::string& token = kAliceToken) {
    return HttpGet(http_, path, token);
  }

  // Every trial id of alice's study in the pages of `page_size`, in order.
  std::vector<int64_t> PageThrough(int page_size) {
    std::vector<int64_t> ids;
    std::string token;
    for (int pages = 0; pages < 10000; ++pages) {
      HttpReply reply = Get(
          absl::StrCat("/api/studies/alice-study/trials?page_size=", page_size,
                       "&page_token=", token));
      EXPECT_EQ(reply.status, 200) << reply.body;
      if (reply.status != 200) break;
      json page = json::parse(reply.body);
      for (const json& t : page.value("trials", json::array())) {
        ids.push_back(std::stoll(t["id"].get<std::string>()));
      }
      token = page.value("next_page_token", "");
      if (token.empty()) break;
    }
    return ids;
  }

  TempDir dir_;
  v1::Study alice_study_;
  std::vector<v1::Trial> alice_trials_;
  std::unique_ptr<service::Server> server_;
  std::string http_;
};

// RFC 4180: records of fields, quoted fields may hold commas, CRLF and
// doubled quotes.
std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      row.push_back(std::move(field));
      field.clear();
      rows.push_back(std::move(row));
      row.clear();
      ++i;
    } else {
      field += c;
    }
  }
  return rows;
}

TEST_F(HttpApiTest, EveryEndpointNeedsAKnownBearerToken) {
  const std::vector<std::string> paths = {
      "/api/studies",
      "/api/studies/alice-study",
      "/api/studies/alice-study/trials",
      "/api/studies/alice-study/trials.csv",
      "/api/studies/alice-study/best",
      "/api/studies/alice-study/changes",
      "/api/studies/alice-study/events",
      "/metrics",
  };
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    HttpReply none = Get(path, "");
    EXPECT_EQ(none.status, 401);
    EXPECT_EQ(none.Header("WWW-Authenticate"), "Bearer");
    json error = json::parse(none.body);
    EXPECT_EQ(error["error"]["status"], "UNAUTHENTICATED");
    EXPECT_EQ(Get(path, "not-a-token").status, 401);
    // The token never comes back in an answer.
    EXPECT_THAT(Get(path, "not-a-token").body, Not(HasSubstr("not-a-token")));
  }
  // Alice reads her study (the event stream is tested below, it never ends).
  for (size_t i = 0; i + 2 < paths.size(); ++i) {
    EXPECT_EQ(Get(paths[i]).status, 200) << paths[i];
  }
  EXPECT_EQ(Get("/metrics").status, 200);
  // Bob may not read it: 403 naming the study, on every study endpoint.
  for (const char* suffix :
       {"", "/trials", "/trials.csv", "/best", "/changes", "/events"}) {
    HttpReply reply =
        Get(absl::StrCat("/api/studies/alice-study", suffix), kBobToken);
    EXPECT_EQ(reply.status, 403) << suffix;
    EXPECT_THAT(reply.body, HasSubstr("alice-study"));
  }
  // The page itself holds no data and asks for the token.
  HttpReply page = Get("/", "");
  EXPECT_EQ(page.status, 200);
  EXPECT_THAT(page.Header("Content-Type"), HasSubstr("text/html"));
  EXPECT_EQ(Get("/assets/app.js", "").status, 200);
  // The charts, one module each, in their own folder.
  HttpReply chart = Get("/assets/charts/history.js", "");
  EXPECT_EQ(chart.status, 200);
  EXPECT_THAT(chart.Header("Content-Type"), HasSubstr("javascript"));
  EXPECT_EQ(Get("/assets/charts/../app.js", "").status, 404);
  EXPECT_EQ(Get("/assets/charts/nope.js", "").status, 404);
}

TEST_F(HttpApiTest, ApiAnswersAreNotCompressedThePageMayBe) {
  httplib::Client client(absl::StrCat("http://", http_));
  client.set_decompress(false);
  const httplib::Headers headers = {
      {"Authorization", absl::StrCat("Bearer ", kAliceToken)},
      {"Accept-Encoding", "gzip, deflate, br"}};
  httplib::Result page =
      client.Get("/api/studies/alice-study/trials?page_size=1000", headers);
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_FALSE(page->has_header("Content-Encoding"));
  EXPECT_TRUE(json::accept(page->body));
  httplib::Result script = client.Get("/assets/app.js", headers);
  ASSERT_TRUE(script);
  EXPECT_EQ(script->get_header_value("Content-Encoding"), "gzip");
}

TEST_F(HttpApiTest, StudyListShowsOnlyTheCallersStudies) {
  json alice = json::parse(Get("/api/studies").body);
  ASSERT_EQ(alice["studies"].size(), 1u);
  EXPECT_EQ(alice["studies"][0]["name"], "alice-study");
  json bob = json::parse(Get("/api/studies", kBobToken).body);
  ASSERT_EQ(bob["studies"].size(), 1u);
  EXPECT_EQ(bob["studies"][0]["name"], "bob-study");
}

TEST_F(HttpApiTest, JsonIsTheProtobufMappingWithProtoFieldNames) {
  HttpReply reply = Get("/api/studies/alice-study");
  ASSERT_EQ(reply.status, 200);
  EXPECT_THAT(reply.Header("Content-Type"), HasSubstr("application/json"));
  EXPECT_THAT(reply.body, HasSubstr("\"create_time_ms\""));
  EXPECT_THAT(reply.body, HasSubstr("\"trial_counts\""));
  v1::Study study;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(reply.body, &study).ok());
  EXPECT_EQ(study.name(), "alice-study");
  EXPECT_EQ(study.spec().parameters_size(), 4);
  int64_t total = 0;
  for (const auto& [state, n] : study.trial_counts()) total += n;
  EXPECT_EQ(total, kAliceTrials);

  v1::ListOptimalTrialsResponse best;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  Get("/api/studies/alice-study/best").body, &best)
                  .ok());
  ASSERT_GE(best.trials_size(), 1);
  // The best is the completed trial of least loss.
  double least = 1e300;
  for (const v1::Trial& t : alice_trials_) {
    if (t.state() == v1::Trial::COMPLETED) {
      least = std::min(least, t.final_measurement().metrics().at("loss"));
    }
  }
  EXPECT_DOUBLE_EQ(best.trials(0).final_measurement().metrics().at("loss"),
                   least);
}

TEST_F(HttpApiTest, ErrorsNameTheParameterOrTheStudy) {
  struct Case {
    std::string path;
    int status;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {"/api/studies/no-such-study", 404, "no-such-study"},
      {"/api/studies/no-such-study/trials", 404, "no-such-study"},
      {"/api/studies/alice-study/trials?page_size=abc", 400, "page_size"},
      {"/api/studies/alice-study/trials?page_size=0", 400, "page_size"},
      {"/api/studies/alice-study/trials?page_size=1001", 400, "page_size"},
      {"/api/studies/alice-study/trials?state=RUNNING", 400, "state"},
      {"/api/studies/alice-study/trials?page_token=xyz", 400, "page_token"},
      {"/api/studies/alice-study/changes?after=-1", 400, "after"},
      {"/api/studies/alice-study/changes?limit=5000", 400, "limit"},
      {"/api/studies/alice-study/events?after=x", 400, "after"},
      {"/api/nothing-here", 404, "/api/nothing-here"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    HttpReply reply = Get(c.path);
    EXPECT_EQ(reply.status, c.status) << reply.body;
    ASSERT_NO_THROW({
      json error = json::parse(reply.body);
      EXPECT_EQ(error["error"]["code"], c.status);
      EXPECT_THAT(error["error"]["message"].get<std::string>(),
                  HasSubstr(c.mentions));
    });
  }
}

TEST_F(HttpApiTest, TrialsPageInIdOrderAndFilterByState) {
  std::vector<int64_t> ids = PageThrough(17);
  ASSERT_EQ(ids.size(), static_cast<size_t>(kAliceTrials));
  for (int i = 0; i < kAliceTrials; ++i) EXPECT_EQ(ids[i], i + 1);

  HttpReply reply = Get(
      "/api/studies/alice-study/trials?page_size=1000&state=stopped,FAILED");
  ASSERT_EQ(reply.status, 200);
  v1::ListTrialsResponse page;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(reply.body, &page).ok());
  int expected = 0;
  for (const v1::Trial& t : alice_trials_) {
    expected +=
        t.state() == v1::Trial::STOPPED || t.state() == v1::Trial::FAILED;
  }
  EXPECT_EQ(page.trials_size(), expected);
  for (const v1::Trial& t : page.trials()) {
    EXPECT_TRUE(t.state() == v1::Trial::STOPPED ||
                t.state() == v1::Trial::FAILED);
  }
}

TEST_F(HttpApiTest, PaginationNeitherRepeatsNorMissesUnderConcurrentWrites) {
  std::atomic<bool> reading_done{false};
  std::atomic<int> writes{0};
  absl::Mutex mu;
  std::thread writer([&] {
    auto stub = MakeStub(server_->address());
    // New trials (higher ids) and state changes of old ones, until the
    // reader is done.
    for (int i = 0; !reading_done.load() || i < 20; ++i) {
      grpc::ClientContext context;
      Authorize(&context, kAliceToken);
      if (i % 2 == 0) {
        v1::CreateTrialRequest request;
        request.set_study_name("alice-study");
        *request.mutable_trial()->mutable_parameters() =
            alice_trials_[0].parameters();
        v1::Trial created;
        ASSERT_TRUE(stub->CreateTrial(&context, request, &created).ok());
      } else {
        v1::SuggestTrialsRequest request;
        request.set_study_name("alice-study");
        request.set_count(1);
        request.set_client_id(absl::StrCat("writer-", i));
        v1::SuggestTrialsResponse response;
        ASSERT_TRUE(stub->SuggestTrials(&context, request, &response).ok());
      }
      absl::MutexLock lock(&mu);
      writes.fetch_add(1);
    }
  });
  // Start reading once writes are under way.
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](std::atomic<int>* w) { return w->load() >= 4; }, &writes));
  }
  std::vector<int64_t> ids = PageThrough(7);
  reading_done.store(true);
  writer.join();

  std::set<int64_t> seen;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_TRUE(seen.insert(ids[i]).second) << "trial " << ids[i] << " twice";
    if (i > 0) {
      EXPECT_LT(ids[i - 1], ids[i]);
    }
  }
  for (int id = 1; id <= kAliceTrials; ++id) {
    EXPECT_TRUE(seen.count(id)) << "trial " << id << " missed";
  }
  EXPECT_GT(writes.load(), 4);
}

TEST_F(HttpApiTest, CsvQuotesOddNamesAndStreamsEveryTrial) {
  const std::vector<std::string> odd = {"a,b", "say \"hi\"", "two\nlines",
                                        "plain"};
  v1::Study study = MakeStudy("odd", "alice", odd, "loss, \"top-1\"");
  std::vector<v1::Trial> trials = MakeTrials(study, 2500, 2, 3);
  server_.reset();
  ASSERT_TRUE(WriteStudy(dir_.File("db"), study, trials).ok());
  auto server = StartHttpServer(dir_.File("db"), dir_.File("tokens"));
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);

  HttpReply reply = HttpGet(server_->http_address(),
                            "/api/studies/odd/trials.csv", kAliceToken);
  ASSERT_EQ(reply.status, 200);
  EXPECT_THAT(reply.Header("Content-Type"), HasSubstr("text/csv"));
  EXPECT_EQ(reply.Header("Transfer-Encoding"), "chunked");
  std::vector<std::vector<std::string>> rows = ParseCsv(reply.body);
  ASSERT_EQ(rows.size(), trials.size() + 1);
  const std::vector<std::string>& header = rows[0];
  EXPECT_EQ(header[0], "id");
  EXPECT_THAT(header, ::testing::Contains("param:act"));
  EXPECT_THAT(header, ::testing::Contains("metric:loss, \"top-1\""));
  EXPECT_THAT(reply.body, HasSubstr("\"metric:loss, \"\"top-1\"\"\""));
  const size_t act =
      std::find(header.begin(), header.end(), "param:act") - header.begin();
  const size_t loss =
      std::find(header.begin(), header.end(), "metric:loss, \"top-1\"") -
      header.begin();
  std::set<std::string> categories_seen;
  for (size_t i = 1; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), header.size()) << "row " << i;
    const v1::Trial& t = trials[i - 1];
    EXPECT_EQ(rows[i][0], absl::StrCat(i));
    EXPECT_EQ(rows[i][act], t.parameters(3).string_value());
    categories_seen.insert(rows[i][act]);
    if (t.state() == v1::Trial::COMPLETED) {
      double value = 0;
      ASSERT_TRUE(absl::SimpleAtod(rows[i][loss], &value)) << rows[i][loss];
      EXPECT_DOUBLE_EQ(value,
                       t.final_measurement().metrics().at("loss, \"top-1\""));
    }
  }
  EXPECT_EQ(categories_seen.size(), odd.size());
}

TEST_F(HttpApiTest, MetricsAreInThePrometheusTextFormat) {
  auto stub = MakeStub(server_->address());
  {
    grpc::ClientContext context;
    Authorize(&context, kAliceToken);
    v1::GetStudyRequest request;
    request.set_name("alice-study");
    v1::Study study;
    ASSERT_TRUE(stub->GetStudy(&context, request, &study).ok());
  }
  {
    grpc::ClientContext context;
    Authorize(&context, kAliceToken);
    v1::GetStudyRequest request;
    request.set_name("absent");
    v1::Study study;
    ASSERT_EQ(stub->GetStudy(&context, request, &study).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  HttpReply reply = Get("/metrics");
  ASSERT_EQ(reply.status, 200);
  EXPECT_THAT(reply.Header("Content-Type"), HasSubstr("text/plain"));
  const std::regex sample(
      R"re([a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (-?[0-9.e+-]+|\+Inf|-Inf|NaN))re");
  const std::regex comment(R"re(# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*)re");
  std::map<std::string, std::string> samples;
  for (absl::string_view line : absl::StrSplit(reply.body, '\n')) {
    if (line.empty()) continue;
    std::string text(line);
    if (text[0] == '#') {
      EXPECT_TRUE(std::regex_match(text, comment)) << text;
    } else {
      EXPECT_TRUE(std::regex_match(text, sample)) << text;
      samples[text.substr(0, text.rfind(' '))] =
          text.substr(text.rfind(' ') + 1);
    }
  }
  int completed = 0;
  for (const v1::Trial& t : alice_trials_) {
    completed += t.state() == v1::Trial::COMPLETED;
  }
  EXPECT_EQ(
      samples["hypertune_trials{study=\"alice-study\",state=\"COMPLETED\"}"],
      absl::StrCat(completed));
  EXPECT_EQ(samples["hypertune_trials{study=\"alice-study\",state=\"PAUSED\"}"],
            "0");
  // Bob's study is not Alice's business.
  EXPECT_THAT(reply.body, Not(HasSubstr("bob-study")));
  EXPECT_EQ(
      samples["hypertune_rpc_requests_total{method=\"GetStudy\",code=\"OK\"}"],
      "1");
  EXPECT_EQ(samples["hypertune_rpc_requests_total{method=\"GetStudy\",code="
                    "\"NOT_FOUND\"}"],
            "1");
  EXPECT_EQ(samples["hypertune_rpc_duration_seconds_bucket{method=\"GetStudy\","
                    "le=\"+Inf\"}"],
            "2");
  EXPECT_EQ(
      samples["hypertune_rpc_duration_seconds_count{method=\"GetStudy\"}"],
      "2");
  EXPECT_THAT(reply.body,
              HasSubstr("# TYPE hypertune_suggest_duration_seconds histogram"));
  EXPECT_THAT(reply.body,
              HasSubstr("# TYPE hypertune_lease_expiries_total counter"));
  int64_t db_bytes = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      samples["hypertune_database_size_bytes{file=\"db\"}"], &db_bytes));
  EXPECT_GT(db_bytes, 0);
}

TEST_F(HttpApiTest, ChangeFeedHoldsEveryTrialOnce) {
  std::set<int64_t> ids;
  std::string after = "0";
  int pages = 0;
  for (;; ++pages) {
    HttpReply reply =
        Get("/api/studies/alice-study/changes?limit=50&after=" + after);
    ASSERT_EQ(reply.status, 200) << reply.body;
    json page = json::parse(reply.body);
    for (const json& event : page["events"]) {
      EXPECT_TRUE(
          ids.insert(std::stoll(event["trial"]["id"].get<std::string>()))
              .second);
      EXPECT_GT(std::stoll(event["sequence"].get<std::string>()),
                std::stoll(after));
    }
    after = page["last_sequence"].get<std::string>();
    if (!page["more"].get<bool>()) break;
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kAliceTrials));
  EXPECT_EQ(pages + 1, (kAliceTrials + 49) / 50);
  // A page that ends with the last trial says no more follow, even when it
  // is full: a reader asks no second time for nothing.
  auto more = [&](int limit) {
    return json::parse(Get(absl::StrCat("/api/studies/alice-study/changes?"
                                        "limit=",
                                        limit))
                           .body)["more"]
        .get<bool>();
  };
  EXPECT_FALSE(more(kAliceTrials));
  EXPECT_TRUE(more(kAliceTrials - 1));
}

// Reads server-sent events from `path` until `stop` says so; returns the
// (sequence, trial id) of each.
std::vector<std::pair<int64_t, int64_t>> ReadEvents(
    const std::string& address, const std::string& path,
    const httplib::Headers& extra, const std::function<bool(size_t)>& stop) {
  std::vector<std::pair<int64_t, int64_t>> events;
  httplib::Client client(absl::StrCat("http://", address));
  client.set_read_timeout(30, 0);
  httplib::Headers headers = extra;
  headers.emplace("Authorization", absl::StrCat("Bearer ", kAliceToken));
  std::string buffer;
  client.Get(path, headers, [&](const char* data, size_t size) {
    buffer.append(data, size);
    size_t end;
    while ((end = buffer.find("\n\n")) != std::string::npos) {
      std::string block = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      int64_t id = -1;
      std::string data_line;
      for (absl::string_view line : absl::StrSplit(block, '\n')) {
        if (absl::ConsumePrefix(&line, "id: ")) {
          EXPECT_TRUE(absl::SimpleAtoi(line, &id));
        } else if (absl::ConsumePrefix(&line, "data: ")) {
          data_line = std::string(line);
        }
      }
      if (id < 0) continue;
      json trial = json::parse(data_line);
      events.push_back({id, std::stoll(trial["id"].get<std::string>())});
      if (stop(events.size())) return false;
    }
    return true;
  });
  return events;
}

TEST_F(HttpApiTest, EventStreamResumesWithoutMissingOrRepeating) {
  // The first half of the study, then the connection is dropped.
  auto first = ReadEvents(http_, "/api/studies/alice-study/events?after=0", {},
                          [](size_t n) { return n == kAliceTrials / 2; });
  ASSERT_EQ(first.size(), static_cast<size_t>(kAliceTrials / 2));
  // A trial is created meanwhile.
  auto stub = MakeStub(server_->address());
  grpc::ClientContext context;
  Authorize(&context, kAliceToken);
  v1::CreateTrialRequest request;
  request.set_study_name("alice-study");
  *request.mutable_trial()->mutable_parameters() =
      alice_trials_[0].parameters();
  v1::Trial created;
  ASSERT_TRUE(stub->CreateTrial(&context, request, &created).ok());
  // Resumed from the last event seen, as an EventSource would.
  auto rest = ReadEvents(http_, "/api/studies/alice-study/events?after=0",
                         {{"Last-Event-ID", absl::StrCat(first.back().first)}},
                         [](size_t n) { return n == kAliceTrials / 2 + 1; });
  std::set<int64_t> ids;
  int64_t last_sequence = 0;
  for (const auto& [sequence, id] : first) {
    EXPECT_GT(sequence, last_sequence);
    last_sequence = sequence;
    EXPECT_TRUE(ids.insert(id).second);
  }
  for (const auto& [sequence, id] : rest) {
    EXPECT_GT(sequence, last_sequence);
    last_sequence = sequence;
    EXPECT_TRUE(ids.insert(id).second) << "trial " << id << " repeated";
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kAliceTrials + 1));
  EXPECT_TRUE(ids.count(created.id()));
}

TEST(HttpStreamLimitTest, StreamsBeyondTheLimitAreTurnedAway) {
  TempDir dir;
  ASSERT_TRUE(WriteStudy(dir.File("db"), MakeStudy("s", ""),
                         MakeTrials(MakeStudy("s", ""), 3, 1, 5))
                  .ok());
  service::ServerOptions options;
  options.db_path = dir.File("db");
  options.listen = "127.0.0.1:0";
  options.http_listen = "127.0.0.1:0";
  options.http_max_streams = 2;
  auto server = service::Server::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string http = (*server)->http_address();
  absl::Mutex mu;
  int open = 0;
  std::vector<std::thread> streams;
  for (int i = 0; i < 2; ++i) {
    streams.emplace_back([&] {
      httplib::Client client(absl::StrCat("http://", http));
      bool counted = false;
      client.Get("/api/studies/s/events", [&](const char*, size_t) {
        if (!counted) {
          absl::MutexLock lock(&mu);
          ++open;
          counted = true;
        }
        return true;
      });
    });
  }
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* n) { return *n == 2; }, &open));
  }
  HttpReply third = HttpGet(http, "/api/studies/s/events", "");
  EXPECT_EQ(third.status, 503);
  EXPECT_THAT(third.body, HasSubstr("event streams"));
  // Everything else is still served.
  EXPECT_EQ(HttpGet(http, "/api/studies/s", "").status, 200);
  // Shutting down ends the open streams.
  server->reset();
  for (std::thread& t : streams) t.join();
}

TEST(HttpApiNoAuthTest, WithoutATokenTableEveryoneReads) {
  TempDir dir;
  ASSERT_TRUE(WriteStudy(dir.File("db"), MakeStudy("open", ""),
                         MakeTrials(MakeStudy("open", ""), 5, 1, 4))
                  .ok());
  auto server = StartHttpServer(dir.File("db"), "");
  ASSERT_TRUE(server.ok()) << server.status();
  HttpReply reply =
      HttpGet((*server)->http_address(), "/api/studies/open/trials", "");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(json::parse(reply.body)["trials"].size(), 5u);
}

// What the service reports through Metrics: suggestion latency and lease
// expiries, on a clock the test moves.
TEST(HttpMetricsTest, SuggestionsAndLeaseExpiriesAreCounted) {
  TempDir dir;
  auto now = std::make_shared<std::atomic<int64_t>>(1'700'000'000'000);
  service::ServerOptions options;
  options.db_path = dir.File("db");
  options.listen = "127.0.0.1:0";
  options.http_listen = "127.0.0.1:0";
  options.service.now_ms = [now] { return now->load(); };
  // The test's SuggestTrials expires the lease, not the sweeper.
  options.lease_sweep_interval = absl::Hours(1);
  auto server = service::Server::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = MakeStub((*server)->address());
  v1::Study study = MakeStudy("leases", "");
  study.mutable_spec()->set_lease_seconds(1);
  {
    grpc::ClientContext context;
    v1::CreateStudyRequest request;
    *request.mutable_study() = study;
    v1::Study created;
    ASSERT_TRUE(stub->CreateStudy(&context, request, &created).ok());
  }
  auto suggest = [&](const std::string& client) {
    grpc::ClientContext context;
    v1::SuggestTrialsRequest request;
    request.set_study_name("leases");
    request.set_count(1);
    request.set_client_id(client);
    v1::SuggestTrialsResponse response;
    EXPECT_TRUE(stub->SuggestTrials(&context, request, &response).ok());
  };
  suggest("a");
  now->fetch_add(10'000);  // a's lease ran out.
  suggest("b");
  HttpReply reply = HttpGet((*server)->http_address(), "/metrics", "");
  EXPECT_THAT(
      reply.body,
      HasSubstr("hypertune_lease_expiries_total{study=\"leases\"} 1\n"));
  EXPECT_THAT(reply.body,
              HasSubstr("hypertune_suggest_duration_seconds_count 2\n"));
  EXPECT_THAT(reply.body,
              HasSubstr("hypertune_rpc_requests_total{method=\"SuggestTrials\","
                        "code=\"OK\"} 2\n"));
}

TEST(HypertunedHttpTest, TheProgramServesHttpWithTheFlag) {
  TempDir dir;
  absl::StatusOr<int> port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  ServerProcessOptions options;
  options.program = HYPERTUNED_PATH;
  options.db_path = dir.File("db");
  const std::string http = absl::StrCat("127.0.0.1:", *port);
  options.extra_args = {"--http", http};
  auto server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  HttpReply studies = HttpGet(http, "/api/studies", "");
  EXPECT_EQ(studies.status, 200);
  EXPECT_EQ(studies.body, "{}");
  HttpReply metrics = HttpGet(http, "/metrics", "");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_THAT(metrics.body,
              HasSubstr("hypertune_database_size_bytes{file=\"db\"}"));
}

TEST(HttpServerStartTest, ABadAddressIsRefused) {
  TempDir dir;
  service::ServerOptions options;
  options.db_path = dir.File("db");
  options.listen = "127.0.0.1:0";
  options.http_listen = "no-port-here";
  auto server = service::Server::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("HOST:PORT"));
}

}  // namespace
}  // namespace hypertune::test
