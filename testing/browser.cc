#include "testing/browser.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace hypertune::test {
namespace {

using Clock = std::chrono::steady_clock;

// How long one protocol call may take besides an evaluation's own timeout.
constexpr int kCallSlackMs = 30000;

}  // namespace

std::optional<std::string> FindChromium() {
  for (const char* candidate :
       {"/usr/bin/chromium", "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome"}) {
    if (access(candidate, X_OK) == 0) return std::string(candidate);
  }
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<Browser>> Browser::Start(
    const std::string& chromium, const std::string& profile_dir, int width,
    int height) {
  int commands[2];  // we write [1], the browser reads [0] as fd 3
  int answers[2];   // the browser writes [1] as fd 4, we read [0]
  if (pipe2(commands, O_CLOEXEC) != 0) {
    return absl::InternalError("browser: pipe failed");
  }
  if (pipe2(answers, O_CLOEXEC) != 0) {
    close(commands[0]);
    close(commands[1]);
    return absl::InternalError("browser: pipe failed");
  }
  std::vector<std::string> argv = {
      chromium,
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--disable-extensions",
      "--hide-scrollbars",
      "--remote-debugging-pipe",
      "--user-data-dir=" + profile_dir,
      absl::StrCat("--window-size=", width, ",", height),
      "about:blank"};
  const pid_t pid = fork();
  if (pid == 0) {
    // Above the fds the child keeps, then onto 3 and 4 (dup2 clears
    // close-on-exec on the copies).
    const int in = fcntl(commands[0], F_DUPFD, 10);
    const int out = fcntl(answers[1], F_DUPFD, 10);
    dup2(in, 3);
    dup2(out, 4);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
    }
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(commands[0]);
  close(answers[1]);
  if (pid < 0) {
    close(commands[1]);
    close(answers[0]);
    return absl::InternalError("browser: fork failed");
  }
  std::unique_ptr<Browser> browser(new Browser());
  browser->pid_ = pid;
  browser->to_browser_ = commands[1];
  browser->from_browser_ = answers[0];
  // The first call also tells whether the browser speaks at all.
  auto version = browser->Call("Browser.getVersion", nlohmann::json::object(),
                               /*browser_level=*/true);
  if (!version.ok()) return version.status();
  return browser;
}

Browser::~Browser() {
  if (pid_ > 0) {
    (void)Call("Browser.close", nlohmann::json::object(), true);
    if (to_browser_ >= 0) close(to_browser_);
    if (from_browser_ >= 0) close(from_browser_);
    // Chromium exits on Browser.close; a stuck one is killed.
    for (int i = 0; i < 200; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      usleep(25000);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

absl::StatusOr<nlohmann::json> Browser::Call(const std::string& method,
                                             nlohmann::json params,
                                             bool browser_level) {
  const int id = next_id_++;
  nlohmann::json message = {
      {"id", id}, {"method", method}, {"params", std::move(params)}};
  if (!browser_level && !session_id_.empty()) {
    message["sessionId"] = session_id_;
  }
  std::string text = message.dump();
  text.push_back('\0');
  for (size_t sent = 0; sent < text.size();) {
    const ssize_t n =
        write(to_browser_, text.data() + sent, text.size() - sent);
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat("browser: writing ", method, " failed (it exited?)"));
    }
    sent += static_cast<size_t>(n);
  }
  int timeout_ms = kCallSlackMs;
  if (message["params"].contains("timeout")) {
    timeout_ms += message["params"]["timeout"].get<int>();
  }
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    size_t end;
    while ((end = buffer_.find('\0')) != std::string::npos) {
      nlohmann::json answer =
          nlohmann::json::parse(buffer_.substr(0, end), nullptr, false);
      buffer_.erase(0, end + 1);
      if (answer.is_discarded() || !answer.contains("id") ||
          answer["id"] != id) {
        continue;  // an event, or an answer to a call given up on
      }
      if (answer.contains("error")) {
        return absl::InternalError(
            absl::StrCat("browser: ", method, ": ", answer["error"].dump()));
      }
      return answer["result"];
    }
    const int left =
        static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                             deadline - Clock::now())
                             .count());
    if (left <= 0) {
      return absl::DeadlineExceededError(absl::StrCat(
          "browser: no answer to ", method, " in ", timeout_ms, " ms"));
    }
    pollfd p = {from_browser_, POLLIN, 0};
    if (poll(&p, 1, left) <= 0) continue;
    char chunk[65536];
    const ssize_t n = read(from_browser_, chunk, sizeof(chunk));
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat("browser: it closed the pipe during ", method));
    }
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

absl::Status Browser::Open(const std::string& url) {
  if (!target_id_.empty()) {
    (void)Call("Target.closeTarget", {{"targetId", target_id_}}, true);
    target_id_.clear();
    session_id_.clear();
  }
  auto target = Call("Target.createTarget", {{"url", url}}, true);
  if (!target.ok()) return target.status();
  target_id_ = (*target)["targetId"];
  auto session = Call("Target.attachToTarget",
                      {{"targetId", target_id_}, {"flatten", true}}, true);
  if (!session.ok()) return session.status();
  session_id_ = (*session)["sessionId"];
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> Browser::Evaluate(const std::string& expression,
                                                 int timeout_ms) {
  auto result = Call("Runtime.evaluate", {{"expression", expression},
                                          {"awaitPromise", true},
                                          {"returnByValue", true},
                                          {"timeout", timeout_ms}});
  if (!result.ok()) return result.status();
  if (result->contains("exceptionDetails")) {
    const nlohmann::json& details = (*result)["exceptionDetails"];
    std::string text = details.value("text", "exception");
    if (details.contains("exception") &&
        details["exception"].contains("description")) {
      text = details["exception"]["description"];
    }
    return absl::InternalError(absl::StrCat("in the page: ", text));
  }
  const nlohmann::json& value = (*result)["result"];
  return value.contains("value") ? value["value"] : nlohmann::json();
}

absl::Status Browser::WaitFor(const std::string& condition, int timeout_ms) {
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const int left =
        static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                             deadline - Clock::now())
                             .count());
    absl::Status s = WaitOnce(condition, std::max(left, 0));
    // A navigation (the page's first load, a reload) destroys the context
    // the poll ran in: poll again in the new one.
    if (!s.ok() && left > 0 &&
        absl::StrContains(s.message(), "context was destroyed")) {
      continue;
    }
    return s;
  }
}

absl::Status Browser::WaitOnce(const std::string& condition, int timeout_ms) {
  auto done = Evaluate(
      absl::StrCat("new Promise((resolve) => {"
                   "  const end = performance.now() + ",
                   timeout_ms,
                   ";"
                   "  const poll = () => {"
                   "    let ok = false;"
                   "    try { ok = !!(",
                   condition,
                   "); } catch (e) {}"
                   "    if (ok || performance.now() > end) resolve(ok);"
                   "    else setTimeout(poll, 20);"
                   "  };"
                   "  poll();"
                   "})"),
      timeout_ms + 5000);
  if (!done.ok()) return done.status();
  if (!done->is_boolean() || !done->get<bool>()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "browser: `", condition, "` was not true within ", timeout_ms, " ms"));
  }
  return absl::OkStatus();
}

absl::Status Browser::Mouse(const std::string& type, double x, double y) {
  auto done = Call("Input.dispatchMouseEvent",
                   {{"type", type},
                    {"x", x},
                    {"y", y},
                    {"button", "left"},
                    {"buttons", type == "mouseReleased" ? 0 : 1},
                    {"clickCount", 1}});
  return done.ok() ? absl::OkStatus() : done.status();
}

absl::Status Browser::Screenshot(const std::string& path) {
  auto shot = Call("Page.captureScreenshot",
                   {{"format", "png"}, {"captureBeyondViewport", true}});
  if (!shot.ok()) return shot.status();
  std::string png;
  if (!absl::Base64Unescape((*shot)["data"].get<std::string>(), &png)) {
    return absl::InternalError("browser: the screenshot is not base64");
  }
  std::ofstream file(path, std::ios::binary);
  file.write(png.data(), static_cast<std::streamsize>(png.size()));
  if (!file) return absl::InternalError("browser: cannot write " + path);
  return absl::OkStatus();
}

}  // namespace hypertune::test
