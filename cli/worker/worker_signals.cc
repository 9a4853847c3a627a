#include "cli/worker/worker_signals.h"

#include <atomic>

namespace hypertune::cli {
namespace {

std::atomic<int> g_stop_signals{0};
std::atomic<int> g_last_signal{0};

void OnStopSignal(int signal) {
  g_last_signal.store(signal);
  g_stop_signals.fetch_add(1);
}

}  // namespace

StopSignalScope::StopSignalScope() {
  g_stop_signals = 0;
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int_);
  sigaction(SIGTERM, &action, &old_term_);
}

StopSignalScope::~StopSignalScope() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

int StopSignals() { return g_stop_signals.load(); }

int LastStopSignal() { return g_last_signal.load(); }

}  // namespace hypertune::cli
