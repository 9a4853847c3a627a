// Headless Chromium driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: commands on the child's fd 3, answers and
// events on its fd 4, each a JSON text ending in a NUL byte), for the
// dashboard's browser test and benchmark: open a page, evaluate
// JavaScript in it (awaiting promises), take a screenshot.
//
// Not thread-safe: one thread drives a Browser.
#ifndef HYPERTUNE_TESTING_BROWSER_H_
#define HYPERTUNE_TESTING_BROWSER_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace hypertune::test {

// The Chromium program: /usr/bin/chromium, chromium-browser or
// google-chrome, or nullopt when none is installed.
std::optional<std::string> FindChromium();

class Browser {
 public:
  // Starts `chromium` headless with its profile in `profile_dir` and a
  // window of `width` x `height` CSS pixels.
  static absl::StatusOr<std::unique_ptr<Browser>> Start(
      const std::string& chromium, const std::string& profile_dir,
      int width = 1280, int height = 1600);
  ~Browser();  // Closes the browser and waits for it.

  // Opens `url` in a new tab that later calls act on (the previous tab is
  // closed). Returns once the tab exists, not once the page has loaded:
  // wait for the page with Evaluate.
  absl::Status Open(const std::string& url);

  // Evaluates `expression` in the open tab; a promise is awaited (for at
  // most `timeout_ms`). Returns its value as JSON; an exception thrown is an
  // error holding its text.
  absl::StatusOr<nlohmann::json> Evaluate(const std::string& expression,
                                          int timeout_ms = 30000);

  // Waits until `condition` (a JavaScript expression) is true, polling
  // every 20 ms for at most `timeout_ms`; an error says it never was.
  absl::Status WaitFor(const std::string& condition, int timeout_ms = 30000);

  // A real mouse event at (x, y) in CSS pixels of the viewport: `type` is
  // "mousePressed", "mouseMoved" or "mouseReleased" (left button).
  absl::Status Mouse(const std::string& type, double x, double y);

  // Writes a PNG of the whole page to `path`.
  absl::Status Screenshot(const std::string& path);

 private:
  Browser() = default;
  // One poll of WaitFor in the page's current context.
  absl::Status WaitOnce(const std::string& condition, int timeout_ms);
  // Sends `method` with `params` (to the tab unless `browser_level`) and
  // returns its result, skipping events.
  absl::StatusOr<nlohmann::json> Call(const std::string& method,
                                      nlohmann::json params,
                                      bool browser_level = false);

  pid_t pid_ = -1;
  int to_browser_ = -1;
  int from_browser_ = -1;
  int next_id_ = 1;
  std::string buffer_;
  std::string target_id_;
  std::string session_id_;
};

}  // namespace hypertune::test

#endif  // HYPERTUNE_TESTING_BROWSER_H_
