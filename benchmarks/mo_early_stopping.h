// hypertune-bench mo-early-stopping: early stopping on two objectives over
// the Fashion-MNIST learning-curve table (benchmarks/README.md, "Early
// stopping with several objectives").
#ifndef HYPERTUNE_BENCHMARKS_MO_EARLY_STOPPING_H_
#define HYPERTUNE_BENCHMARKS_MO_EARLY_STOPPING_H_

#include <string>
#include <vector>

namespace hypertune::bench {

// Runs the benchmark with the command's arguments (after its name); returns
// the process's exit status.
int MoEarlyStopping(const std::vector<std::string>& args);

}  // namespace hypertune::bench

#endif  // HYPERTUNE_BENCHMARKS_MO_EARLY_STOPPING_H_
