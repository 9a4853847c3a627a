// The dashboard in headless Chromium against a real server holding a
// generated study: the charts hold one point per finished trial, the table
// pages, and a screenshot is saved (dashboard_screenshot.png in the test's
// working directory). Skipped, saying why, without chromium or without the
// chart assets that npm builds.
//
// The token reaches the page in the URL's fragment, which browsers never
// send to the server (so it is in no server log); the page moves it into
// sessionStorage. `live=0` keeps the page from opening the event stream,
// which would hold Chromium's virtual clock (tests/service/http/http_api_test.cc
// covers the stream).
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "testing/http_test_util.h"

namespace hypertune::test {
namespace {

constexpr int kTrials = 205;
constexpr int kPageSize = 50;  // The page's PAGE_SIZE.

std::optional<std::string> FindChromium() {
  for (const char* candidate :
       {"/usr/bin/chromium", "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome"}) {
    if (access(candidate, X_OK) == 0) return std::string(candidate);
  }
  return std::nullopt;
}

// Starts `argv` with its stdout on a pipe whose read end goes to *out (stderr
// is dropped: Chromium is chatty). Returns the child's pid, or -1.
pid_t Spawn(const std::vector<std::string>& argv, int* out) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    FILE* null = std::fopen("/dev/null", "w");
    if (null != nullptr) dup2(fileno(null), 2);
    close(fds[0]);
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  *out = fds[0];
  return pid;
}

// Everything readable from `fd` until end of file; closes it.
std::string ReadAll(int fd) {
  std::string text;
  char buffer[65536];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) text.append(buffer, n);
  close(fd);
  return text;
}

// Runs `argv`, returning its stdout.
std::string RunProgram(const std::vector<std::string>& argv) {
  int out = -1;
  pid_t pid = Spawn(argv, &out);
  if (pid < 0) return "";
  std::string text = ReadAll(out);
  int status = 0;
  waitpid(pid, &status, 0);
  return text;
}

// The value of attribute `attribute` on the element with id `id` in `dom`.
std::string Attribute(const std::string& dom, const std::string& id,
                      const std::string& attribute) {
  std::smatch tag;
  if (!std::regex_search(dom, tag,
                         std::regex("<[a-z]+ [^>]*id=\"" + id + "\"[^>]*>"))) {
    return "<no element #" + id + ">";
  }
  std::smatch value;
  const std::string text = tag.str();
  if (!std::regex_search(text, value,
                         std::regex(" " + attribute + "=\"([^\"]*)\""))) {
    return "<no " + attribute + " on #" + id + ">";
  }
  return value[1];
}

class DashboardBrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = FindChromium();
    if (!chromium_) {
      GTEST_SKIP() << "SKIPPED: chromium not found (apt-get install chromium); "
                      "the dashboard was not tested in a browser";
    }
    ASSERT_TRUE(WriteTokenFile(dir_.File("tokens")).ok());
    study_ = MakeStudy("browser-study", "alice");
    trials_ = MakeTrials(study_, kTrials, 6, 7);
    ASSERT_TRUE(WriteStudy(dir_.File("db"), study_, trials_).ok());
    auto server = StartHttpServer(dir_.File("db"), dir_.File("tokens"));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    if (HttpGet(server_->http_address(), "/assets/uPlot.iife.min.js", "")
            .status != 200) {
      GTEST_SKIP() << "SKIPPED: hypertuned was built without npm, so it "
                      "serves the plain page without charts; the browser "
                      "test needs the charts";
    }
  }

  std::vector<std::string> BaseArgs(const std::string& profile) {
    return {*chromium_,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--user-data-dir=" + dir_.File(profile),
            "--window-size=1280,2600",
            "--virtual-time-budget=15000"};
  }

  std::string Url(const std::string& extra) {
    return absl::StrCat("http://", server_->http_address(),
                        "/#study=browser-study&live=0", extra,
                        "&token=", kAliceToken);
  }

  std::optional<std::string> chromium_;
  TempDir dir_;
  v1::Study study_;
  std::vector<v1::Trial> trials_;
  std::unique_ptr<service::Server> server_;
};

TEST_F(DashboardBrowserTest, ChartsHoldEveryTrialAndTheTablePages) {
  int finished = 0;
  int with_measurements = 0;
  int stopped = 0;
  for (const v1::Trial& t : trials_) {
    finished +=
        t.state() == v1::Trial::COMPLETED || t.state() == v1::Trial::STOPPED;
    with_measurements += t.measurements_size() > 0;
    stopped += t.state() == v1::Trial::STOPPED;
  }
  std::vector<std::string> args = BaseArgs("profile1");
  args.push_back("--dump-dom");
  args.push_back(Url(""));
  const std::string dom = RunProgram(args);
  ASSERT_NE(dom.find("id=\"summary\""), std::string::npos)
      << "the study did not render; the page was:\n"
      << dom.substr(0, 4000);
  // The token left the address and never reached the DOM.
  EXPECT_EQ(dom.find(kAliceToken), std::string::npos);
  EXPECT_EQ(Attribute(dom, "summary", "data-trials"), absl::StrCat(kTrials));
  EXPECT_EQ(Attribute(dom, "history", "data-points"), absl::StrCat(finished));
  EXPECT_EQ(Attribute(dom, "parallel", "data-lines"), absl::StrCat(finished));
  EXPECT_EQ(Attribute(dom, "parallel", "data-axes"), "5");
  EXPECT_EQ(Attribute(dom, "importance", "data-params"), "4");
  EXPECT_EQ(Attribute(dom, "curves", "data-curves"),
            absl::StrCat(with_measurements));
  EXPECT_EQ(Attribute(dom, "curves", "data-stopped"), absl::StrCat(stopped));
  const int pages = (kTrials + kPageSize - 1) / kPageSize;
  EXPECT_EQ(Attribute(dom, "trials", "data-page"), "1");
  EXPECT_EQ(Attribute(dom, "trials", "data-pages"), absl::StrCat(pages));
  EXPECT_EQ(Attribute(dom, "trials", "data-rows"), absl::StrCat(kPageSize));
  // uPlot drew the history into its canvas.
  EXPECT_NE(dom.find("class=\"uplot"), std::string::npos);

  // The last page holds the rest, sorted by id.
  args = BaseArgs("profile2");
  args.push_back("--dump-dom");
  args.push_back(Url(absl::StrCat("&page=", pages)));
  const std::string last = RunProgram(args);
  EXPECT_EQ(Attribute(last, "trials", "data-page"), absl::StrCat(pages));
  EXPECT_EQ(Attribute(last, "trials", "data-rows"),
            absl::StrCat(kTrials - (pages - 1) * kPageSize));
  EXPECT_NE(last.find(absl::StrCat("data-id=\"", kTrials, "\"")),
            std::string::npos);
  EXPECT_EQ(last.find("data-id=\"1\""), std::string::npos);

  // A screenshot, for people.
  const std::string png =
      (std::filesystem::current_path() / "dashboard_screenshot.png").string();
  std::filesystem::remove(png);
  args = BaseArgs("profile3");
  args.push_back("--screenshot=" + png);
  args.push_back(Url(""));
  RunProgram(args);
  std::ifstream file(png, std::ios::binary);
  char magic[8] = {};
  file.read(magic, sizeof(magic));
  ASSERT_TRUE(file) << "no screenshot at " << png;
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  std::printf("dashboard screenshot: %s\n", png.c_str());
}

// With the live stream on, trials created while the page is open show up
// in it. Chromium's virtual clock stands still while a fetch is open, so the
// page is given real time instead; the writer goes on until Chromium exits.
TEST_F(DashboardBrowserTest, LiveUpdatesArriveOverTheEventStream) {
  std::vector<std::string> args = BaseArgs("profile5");
  args.back() = "--virtual-time-budget=3000";
  args.push_back("--dump-dom");
  args.push_back(absl::StrCat("http://", server_->http_address(),
                              "/#study=browser-study&token=", kAliceToken));
  int out = -1;
  pid_t pid = Spawn(args, &out);
  ASSERT_GT(pid, 0);
  auto stub = MakeStub(server_->address());
  int created = 0;
  std::thread writer([&] {
    for (; created < 10000; ++created) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) != 0) return;
      grpc::ClientContext context;
      Authorize(&context, kAliceToken);
      v1::CreateTrialRequest request;
      request.set_study_name("browser-study");
      *request.mutable_trial()->mutable_parameters() = trials_[0].parameters();
      v1::Trial trial;
      ASSERT_TRUE(stub->CreateTrial(&context, request, &trial).ok());
    }
    kill(pid, SIGKILL);
  });
  const std::string dom = ReadAll(out);
  writer.join();
  waitpid(pid, nullptr, 0);
  std::printf("created %d trials while the page was open\n", created);
  std::smatch match;
  ASSERT_TRUE(
      std::regex_search(dom, match, std::regex("data-trials=\"([0-9]+)\"")))
      << dom.substr(0, 3000);
  EXPECT_GT(std::stoi(match[1]), kTrials);
  // The stream was open when the page was dumped.
  EXPECT_NE(dom.find("\xe2\x97\x8f live"), std::string::npos);
}

TEST_F(DashboardBrowserTest, StudyListLinksToTheCallersStudies) {
  std::vector<std::string> args = BaseArgs("profile6");
  args.push_back("--dump-dom");
  args.push_back(absl::StrCat("http://", server_->http_address(),
                              "/#token=", kAliceToken));
  const std::string dom = RunProgram(args);
  EXPECT_EQ(Attribute(dom, "studies", "data-rows"), "1") << dom.substr(0, 3000);
  EXPECT_NE(dom.find("href=\"#study=browser-study\""), std::string::npos);
}

TEST_F(DashboardBrowserTest, AskForTheTokenWithoutOne) {
  std::vector<std::string> args = BaseArgs("profile4");
  args.push_back("--dump-dom");
  args.push_back(absl::StrCat("http://", server_->http_address(), "/"));
  const std::string dom = RunProgram(args);
  EXPECT_NE(dom.find("id=\"token-form\""), std::string::npos)
      << dom.substr(0, 4000);
}

}  // namespace
}  // namespace hypertune::test
