#include "cli/worker/worker_console.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <utility>

namespace hypertune::cli {
namespace {

int TerminalWidth() {
  winsize size = {};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  return 80;
}

}  // namespace

void Console::Out(const std::string& line) {
  absl::MutexLock lock(&mu_);
  ClearLocked();
  out_ << line << '\n';
  DrawLocked();
}

void Console::Err(const std::string& line) {
  absl::MutexLock lock(&mu_);
  ClearLocked();
  out_.flush();
  err_ << line << '\n';
  err_.flush();
  DrawLocked();
}

void Console::Status(std::string status) {
  absl::MutexLock lock(&mu_);
  if (!status_line_) return;
  status_ = std::move(status);
  ClearLocked();
  DrawLocked();
}

void Console::Close() {
  absl::MutexLock lock(&mu_);
  ClearLocked();
  status_line_ = false;
  out_.flush();
}

void Console::ClearLocked() {
  if (drawn_) out_ << "\r\033[K";
  drawn_ = false;
}

void Console::DrawLocked() {
  if (status_line_ && !status_.empty()) {
    size_t width = static_cast<size_t>(TerminalWidth() - 1);
    out_ << (status_.size() > width ? status_.substr(0, width) : status_);
    drawn_ = true;
  }
  out_.flush();
}

}  // namespace hypertune::cli
