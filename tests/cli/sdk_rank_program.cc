// A training program for cli_worker_test: one rank of a trial run by
// several processes (torchrun-style, $RANK), reporting through the SDK
// until the trial is stopped. Each rank reports its own values, so that a
// report from any rank but 0 would show. Prints "rank R stopped at step S
// (reports: 0|1)" and exits 0 when it learns of the stop.
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "trainer_sdk/hypertune.h"

int main() {
  const char* study = std::getenv("HYPERTUNE_STUDY");
  const char* rank_env = std::getenv("RANK");
  const int rank = rank_env != nullptr ? std::atoi(rank_env) : 0;
  if (study == nullptr) return 2;
  hypertune::Client client;
  auto next = client.NextTrial(study);
  if (!next.ok() || !next->has_value()) return 3;
  hypertune::Trial& trial = **next;
  for (int step = 1; step <= 1000; ++step) {
    const double loss = (rank + 1.0) / step;
    if (absl::Status s = trial.Report(step, {{"loss", loss}}); !s.ok()) {
      std::fprintf(stderr, "rank %d step %d: %s\n", rank, step,
                   std::string(s.message()).c_str());
      return 4;
    }
    if (trial.should_stop()) {
      std::printf("rank %d stopped at step %d (reports: %d)\n", rank, step,
                  trial.reports() ? 1 : 0);
      std::fflush(stdout);
      return trial.Complete({{"loss", loss}}).ok() ? 0 : 5;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 6;
}
