// hypertune-quickstart: tunes a toy training run with the hypertune SDK.
//
// The "training" has a known optimum: loss 0 at lr = 10^-2.5, 4 layers,
// batch size 64 and the adam optimizer. Each trial runs 5 "epochs", reports
// the loss after each, and completes with the last one.
//
//   hypertune study create --config examples/study.json
//   hypertune-quickstart --study quickstart            # runs trials until done
//   hypertune worker quickstart --parallel 4 -- hypertune-quickstart
//                                                      # one trial per process
//
// Under `hypertune worker` Client::NextTrial attaches to the worker's trial
// (it is found through the HYPERTUNE_* environment), so the same loop runs
// exactly one trial there.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>

#include "trainer_sdk/hypertune.h"

namespace {

constexpr int kEpochs = 5;

// The tuned objective: a sum of per-parameter bowls, 0 at the optimum.
double Objective(double lr, int64_t layers, int64_t batch_size,
                 const std::string& optimizer) {
  static const std::map<std::string, double> kOptimizerPenalty = {
      {"adam", 0.0}, {"rmsprop", 0.05}, {"sgd", 0.2}};
  double lr_term = std::log10(lr) + 2.5;
  double layers_term = static_cast<double>(layers - 4);
  double batch_term = std::log2(static_cast<double>(batch_size)) - 6.0;
  auto penalty = kOptimizerPenalty.find(optimizer);
  return lr_term * lr_term + 0.05 * layers_term * layers_term +
         0.1 * batch_term * batch_term +
         (penalty == kOptimizerPenalty.end() ? 1.0 : penalty->second);
}

// Runs one trial to completion. Returns its final loss.
absl::StatusOr<double> RunTrial(hypertune::Trial& trial) {
  absl::StatusOr<double> lr = trial.Double("lr");
  absl::StatusOr<int64_t> layers = trial.Int("layers");
  absl::StatusOr<int64_t> batch_size = trial.Int("batch_size");
  absl::StatusOr<std::string> optimizer = trial.String("optimizer");
  for (const absl::Status& s : {lr.status(), layers.status(),
                                batch_size.status(), optimizer.status()}) {
    if (!s.ok()) return s;
  }
  double target = Objective(*lr, *layers, *batch_size, *optimizer);
  double loss = 0.0;
  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    // The loss falls towards the objective as "training" goes on.
    loss = target + 0.1 * (kEpochs - epoch);
    if (absl::Status s = trial.Report(epoch, {{"loss", loss}}); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = trial.Complete({{"loss", loss}}); !s.ok()) return s;
  std::cout << "trial " << trial.id() << ": lr=" << *lr << " layers=" << *layers
            << " batch_size=" << *batch_size << " optimizer=" << *optimizer
            << " -> loss=" << loss << "\n";
  return loss;
}

int Usage() {
  std::cerr << "usage: hypertune-quickstart [--study NAME] [--trials N] "
               "[--server HOST:PORT]\n"
               "Runs trials of the study (default $HYPERTUNE_STUDY, else "
               "\"quickstart\") until its budget is spent or N trials ran.\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  hypertune::ClientOptions options;
  const char* env_study = std::getenv("HYPERTUNE_STUDY");
  std::string study = env_study != nullptr ? env_study : "quickstart";
  long max_trials = 0;  // 0: until the study is done.
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) return Usage();
    if (arg == "--study") {
      study = argv[++i];
    } else if (arg == "--trials") {
      char* end = nullptr;
      max_trials = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || max_trials < 1) return Usage();
    } else if (arg == "--server") {
      options.server = argv[++i];
    } else {
      return Usage();
    }
  }

  hypertune::Client client(options);
  long done = 0;
  double best = INFINITY;
  while (max_trials == 0 || done < max_trials) {
    absl::StatusOr<std::optional<hypertune::Trial>> trial =
        client.NextTrial(study);
    if (!trial.ok()) {
      std::cerr << "error: " << trial.status() << "\n";
      return 1;
    }
    if (!trial->has_value()) break;  // The study's budget is spent.
    absl::StatusOr<double> loss = RunTrial(**trial);
    if (!loss.ok()) {
      std::cerr << "error: trial " << (*trial)->id() << ": " << loss.status()
                << "\n";
      return 1;
    }
    best = std::min(best, *loss);
    ++done;
  }
  std::cout << "ran " << done << " trial(s) of study \"" << study << "\"";
  if (done > 0) std::cout << "; best loss here " << best;
  std::cout << "\n";
  return 0;
}
