// How the messages of `hypertune worker` describe a trial and its program:
// the parameters, the metrics, the way the program ended, and its log's
// last lines.
//
// Thread safety: pure functions (LogTail reads a file).
#ifndef HYPERTUNE_CLI_WORKER_WORKER_TEXT_H_
#define HYPERTUNE_CLI_WORKER_WORKER_TEXT_H_

#include <filesystem>
#include <string>

#include "cli/worker/subprocess.h"
#include "hypertune/v1/hypertune.pb.h"
#include "trainer_sdk/hypertune.h"

namespace hypertune::cli {

// "loss=0.31 acc=0.9" (FormatShort values).
std::string MetricsText(const Metrics& metrics);

// "lr=0.01 layers=3", in the trial's parameter order.
std::string ParametersText(const v1::Trial& trial);

// "exit status 3" or "killed by signal 9".
std::string ExitText(const ProgramExit& exit);

// The last `lines` lines of file `path` (at most 8 KiB of it), each
// indented by two spaces and ending in a newline; "" if it cannot be read.
std::string LogTail(const std::filesystem::path& path, int lines);

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_WORKER_WORKER_TEXT_H_
