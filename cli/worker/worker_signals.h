// The SIGINT/SIGTERM handling of `hypertune worker`: while a StopSignalScope
// lives, the handlers count the stop signals and keep the last one, and the
// slots read them to stop taking trials and to pass the signal on to their
// programs (a second one kills them).
//
// Thread safety: StopSignals() and LastStopSignal() are safe from any thread
// (atomics, set by the handler). One StopSignalScope at a time: the handlers
// are the process's.
#ifndef HYPERTUNE_CLI_WORKER_WORKER_SIGNALS_H_
#define HYPERTUNE_CLI_WORKER_WORKER_SIGNALS_H_

#include <signal.h>

namespace hypertune::cli {

// SIGINT/SIGTERM handlers for the worker's run; the previous ones after.
// Starts the count at 0.
class StopSignalScope {
 public:
  StopSignalScope();
  ~StopSignalScope();
  StopSignalScope(const StopSignalScope&) = delete;
  StopSignalScope& operator=(const StopSignalScope&) = delete;

 private:
  struct sigaction old_int_ = {};
  struct sigaction old_term_ = {};
};

// The stop signals received since the StopSignalScope began.
int StopSignals();

// The last stop signal received (SIGINT or SIGTERM); 0 if none yet.
int LastStopSignal();

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_WORKER_WORKER_SIGNALS_H_
