// hypertune-fault-trainer: a C++ training program written against the SDK as
// a user writes one, for the user-level fault benchmark
// (benchmarks/user_faults.py). It trains the C++ twin of
// benchmarks/user_faults/model.py (logistic regression, mini-batch SGD with
// momentum, deterministic), saves a checkpoint file after every epoch,
// records it on the trial, and resumes from the trial's checkpoint_uri.
//
//   hypertune-fault-trainer --study S --ckpt-dir D --events F --errors F
//       --epochs 6 --epoch-ms 300           # runs trials until the study ends
//   hypertune worker S -- hypertune-fault-trainer ...   # one trial a process
//   hypertune-fault-trainer --reference --lr 0.1 --batch-size 16
//       --momentum 0.5 --epochs 6           # the uninterrupted run's metrics
//       [--resume-at 3 --ckpt-dir D]        # through a checkpoint: the same
//
// SIGTERM or SIGINT during a trial: run by hand, it gives the trial back
// (preempted) as a careful user's program does; under `hypertune worker` it
// leaves that to the worker. Either way it then dies of the signal, so that
// whoever waits for it sees how it ended. Any error from the SDK ends it
// with status 1 after appending the error to --errors (one JSON line), which
// the benchmark counts as an error that reached the user's code.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "trainer_sdk/hypertune.h"

namespace {

constexpr int kSamples = 96;
constexpr int kFeatures = 5;

std::atomic<int> g_signal{0};
std::atomic<bool> g_in_trial{false};

void OnSignal(int signal) {
  if (!g_in_trial.load()) {
    // Nothing held: die of it now, as a program without a handler would.
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  g_signal.store(signal);
}

// Dies of the signal that was caught (the default action).
[[noreturn]] void DieOfSignal(int signal) {
  std::signal(signal, SIG_DFL);
  std::raise(signal);
  std::_Exit(128 + signal);
}

// Numerical Recipes' 32-bit LCG, as model.py's Lcg.
struct Lcg {
  uint32_t state;
  uint32_t Next() { return state = 1664525u * state + 1013904223u; }
  double Uniform() { return Next() / 2147483648.0 - 1.0; }
};

struct Data {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
};

Data MakeData() {
  Lcg rng{12345};
  std::vector<double> truth(kFeatures);
  for (double& w : truth) w = rng.Uniform() * 2.0;
  Data data;
  for (int i = 0; i < kSamples; ++i) {
    std::vector<double> x(kFeatures);
    for (double& v : x) v = rng.Uniform();
    double margin =
        std::inner_product(truth.begin(), truth.end(), x.begin(), 0.0);
    margin += 0.3 * rng.Uniform();
    data.x.push_back(std::move(x));
    data.y.push_back(margin > 0.0 ? 1.0 : 0.0);
  }
  return data;
}

const Data& TheData() {
  static const Data* data = new Data(MakeData());
  return *data;
}

double Sigmoid(double z) {
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  double e = std::exp(z);
  return e / (1.0 + e);
}

struct State {
  int epoch = 0;
  std::vector<double> weights = std::vector<double>(kFeatures, 0.0);
  double bias = 0.0;
  std::vector<double> velocity = std::vector<double>(kFeatures + 1, 0.0);
  // How long that epoch took: a recorded metric, the wall clock's.
  double epoch_seconds = 0.0;
};

struct Params {
  double lr = 0.1;
  int64_t batch_size = 16;
  double momentum = 0.0;
};

double Score(const State& state, const std::vector<double>& x) {
  double z = state.bias;
  for (int f = 0; f < kFeatures; ++f) z += state.weights[f] * x[f];
  return z;
}

hypertune::Metrics Evaluate(const State& state) {
  const Data& data = TheData();
  double loss = 0.0;
  int correct = 0;
  for (int i = 0; i < kSamples; ++i) {
    double p = std::min(std::max(Sigmoid(Score(state, data.x[i])), 1e-12),
                        1.0 - 1e-12);
    loss -= data.y[i] * std::log(p) + (1.0 - data.y[i]) * std::log(1.0 - p);
    correct += (p >= 0.5) == (data.y[i] == 1.0);
  }
  return {{"loss", loss / kSamples},
          {"accuracy", static_cast<double>(correct) / kSamples}};
}

hypertune::Metrics TrainEpoch(State& state, const Params& params) {
  const Data& data = TheData();
  std::vector<int> order(kSamples);
  std::iota(order.begin(), order.end(), 0);
  Lcg rng{static_cast<uint32_t>(1000 + state.epoch)};
  for (int i = kSamples - 1; i > 0; --i) {
    std::swap(order[i], order[rng.Next() % (i + 1)]);
  }
  for (int start = 0; start < kSamples; start += params.batch_size) {
    int end = std::min<int>(kSamples, start + params.batch_size);
    std::vector<double> grad(kFeatures + 1, 0.0);
    for (int b = start; b < end; ++b) {
      int k = order[b];
      double error = Sigmoid(Score(state, data.x[k])) - data.y[k];
      for (int f = 0; f < kFeatures; ++f) grad[f] += error * data.x[k][f];
      grad[kFeatures] += error;
    }
    for (int f = 0; f <= kFeatures; ++f) {
      state.velocity[f] = params.momentum * state.velocity[f] -
                          params.lr * grad[f] / (end - start);
    }
    for (int f = 0; f < kFeatures; ++f) state.weights[f] += state.velocity[f];
    state.bias += state.velocity[kFeatures];
  }
  ++state.epoch;
  return Evaluate(state);
}

// Hex floats: the checkpoint holds the state exactly.
std::string Hex(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%a", value);
  return text;
}

// Writes `state` to `path` atomically (a temporary file renamed over it).
bool SaveCheckpoint(const std::string& path, const State& state) {
  std::string temporary = path + "." + std::to_string(getpid()) + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << state.epoch << "\n";
    for (double w : state.weights) out << Hex(w) << " ";
    out << "\n" << Hex(state.bias) << "\n";
    for (double v : state.velocity) out << Hex(v) << " ";
    out << "\n" << Hex(state.epoch_seconds) << "\n";
    if (!out.good()) return false;
  }
  return std::rename(temporary.c_str(), path.c_str()) == 0;
}

bool LoadCheckpoint(const std::string& path, State& state) {
  std::ifstream in(path);
  if (!in) return false;
  std::string token;
  State loaded;
  if (!(in >> loaded.epoch)) return false;
  for (double& w : loaded.weights) {
    if (!(in >> token)) return false;
    w = std::strtod(token.c_str(), nullptr);
  }
  if (!(in >> token)) return false;
  loaded.bias = std::strtod(token.c_str(), nullptr);
  for (double& v : loaded.velocity) {
    if (!(in >> token)) return false;
    v = std::strtod(token.c_str(), nullptr);
  }
  if (in >> token) loaded.epoch_seconds = std::strtod(token.c_str(), nullptr);
  state = loaded;
  return true;
}

struct Options {
  std::string study;
  std::string server;
  std::string ckpt_dir = ".";
  std::string events;
  std::string errors;
  int epochs = 6;
  int epoch_ms = 300;
  bool reference = false;
  int resume_at = 0;
  Params params;
};

bool UnderWorker() { return std::getenv("HYPERTUNE_TRIAL_ID") != nullptr; }

const char* Kind() { return UnderWorker() ? "cc-worker" : "cc-sdk"; }

double WallNow() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Appends one JSON line to `path` in a single write.
void AppendLine(const std::string& path, const std::string& fields) {
  if (path.empty()) return;
  char head[160];
  std::snprintf(head, sizeof(head),
                "{\"pid\": %d, \"kind\": \"%s\", \"t\": %.6f, ",
                static_cast<int>(getpid()), Kind(), WallNow());
  std::string line = std::string(head) + fields + "}\n";
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) return;
  ssize_t written = write(fd, line.data(), line.size());
  (void)written;
  close(fd);
}

Options g_options;

void Event(const std::string& what, const std::string& more = "") {
  AppendLine(g_options.events,
             "\"ev\": " + Quoted(what) + (more.empty() ? "" : ", " + more));
}

int Fail(const std::string& where, const absl::Status& status) {
  std::cerr << "error: " << where << ": " << status << "\n";
  AppendLine(g_options.errors,
             "\"what\": \"exception\", \"type\": " +
                 Quoted(absl::StatusCodeToString(status.code())) +
                 ", \"message\": " +
                 Quoted(where + ": " + std::string(status.message())));
  return 1;
}

std::string PathOfUri(const std::string& uri) {
  const std::string scheme = "file://";
  return uri.rfind(scheme, 0) == 0 ? uri.substr(scheme.size()) : "";
}

// Records the checkpoint as holding `epoch`: saved before the epoch's report
// (which may pause the trial), it is one step ahead of the latest report.
// SDKs before issue 46 take no step.
absl::Status SetCheckpoint(hypertune::Trial& trial, const std::string& uri,
                           int64_t epoch) {
  auto set = [&](auto& t) {
    if constexpr (requires { t.SetCheckpoint(uri, epoch); }) {
      return t.SetCheckpoint(uri, epoch);
    } else {
      return t.SetCheckpoint(uri);
    }
  };
  return set(trial);
}

// Sleeps until `until`, waking early for a caught signal.
void PaceUntil(std::chrono::steady_clock::time_point until) {
  while (g_signal.load() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Gives the trial back after a caught signal (run by hand only) and dies of
// the signal.
[[noreturn]] void Interrupted(hypertune::Trial& trial) {
  int signal = g_signal.load();
  if (!UnderWorker()) {
    absl::Status s = trial.GiveBack(
        signal == SIGTERM ? "preempted (SIGTERM)" : "interrupted (SIGINT)",
        /*preempted=*/true);
    if (!s.ok()) Fail("give back", s);
    Event("settled", "\"trial\": " + std::to_string(trial.id()) +
                         ", \"how\": \"given back\"");
  }
  DieOfSignal(signal);
}

// Runs the epochs left of `trial`; completes it. Returns 0, or 1 after an
// error (recorded by Fail).
int RunTrial(hypertune::Trial& trial) {
  Params params;
  absl::StatusOr<double> lr = trial.Double("lr");
  absl::StatusOr<int64_t> batch = trial.Int("batch_size");
  absl::StatusOr<double> momentum = trial.Double("momentum");
  for (const absl::Status& s :
       {lr.status(), batch.status(), momentum.status()}) {
    if (!s.ok()) return Fail("parameters", s);
  }
  params = {*lr, *batch, *momentum};
  State state;
  std::string resume = PathOfUri(trial.checkpoint_uri());
  if (!resume.empty() && !LoadCheckpoint(resume, state)) state = State();
  Event("trial", "\"study\": " + Quoted(trial.study()) +
                     ", \"trial\": " + std::to_string(trial.id()) +
                     ", \"resumed_at\": " + std::to_string(state.epoch));
  const std::string path = g_options.ckpt_dir + "/" + trial.study() +
                           "-trial-" + std::to_string(trial.id()) + ".ckpt";
  hypertune::Metrics metrics = Evaluate(state);
  metrics["epoch_seconds"] = state.epoch_seconds;
  if (state.epoch > 0) {
    // The last worker was lost after saving this checkpoint but before
    // recording it, or before reporting its epoch: both now, from the file.
    if (state.epoch > trial.proto().checkpoint_step()) {
      if (absl::Status s =
              SetCheckpoint(trial, trial.checkpoint_uri(), state.epoch);
          !s.ok()) {
        return Fail("set checkpoint", s);
      }
    }
    bool measured = false;
    for (const auto& m : trial.proto().measurements()) {
      measured = measured || m.step() == state.epoch;
    }
    if (!measured) {
      if (absl::Status s = trial.Report(state.epoch, metrics); !s.ok()) {
        return Fail("report", s);
      }
    }
  }
  while (state.epoch < g_options.epochs && !trial.should_stop()) {
    auto began = std::chrono::steady_clock::now();
    metrics = TrainEpoch(state, params);
    // The rest of the epoch is the accelerator's time.
    PaceUntil(began + std::chrono::milliseconds(g_options.epoch_ms));
    if (g_signal.load() != 0) Interrupted(trial);
    state.epoch_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
            .count();
    metrics["epoch_seconds"] = state.epoch_seconds;
    if (!SaveCheckpoint(path, state)) {
      return Fail("checkpoint", absl::InternalError("cannot write " + path));
    }
    // Before the report that may pause the trial at a rung.
    if (absl::Status s = SetCheckpoint(trial, "file://" + path, state.epoch);
        !s.ok()) {
      return Fail("set checkpoint", s);
    }
    if (absl::Status s = trial.Report(state.epoch, metrics); !s.ok()) {
      return Fail("report", s);
    }
    if (trial.should_stop()) break;
  }
  if (absl::Status s = trial.Complete(metrics); !s.ok()) {
    return Fail("complete", s);
  }
  Event("settled", "\"trial\": " + std::to_string(trial.id()));
  return 0;
}

// The uninterrupted run's metrics, one JSON line an epoch; with
// --resume-at K, through a checkpoint saved after epoch K and loaded into a
// fresh state (what a resumed trial does), which must not change them.
int Reference(const Options& options) {
  State state;
  for (int epoch = 1; epoch <= options.epochs; ++epoch) {
    if (epoch == options.resume_at + 1 && options.resume_at > 0) {
      const std::string path = options.ckpt_dir + "/reference.ckpt";
      State loaded;
      if (!SaveCheckpoint(path, state) || !LoadCheckpoint(path, loaded)) {
        std::cerr << "error: cannot save and load " << path << "\n";
        return 1;
      }
      state = loaded;
    }
    hypertune::Metrics m = TrainEpoch(state, options.params);
    std::printf("{\"step\": %d, \"loss\": %.17g, \"accuracy\": %.17g}\n", epoch,
                m["loss"], m["accuracy"]);
  }
  return 0;
}

int Usage() {
  std::cerr << "usage: hypertune-fault-trainer [--study S] [--server H:P] "
               "--ckpt-dir D --events F --errors F --epochs N --epoch-ms M\n"
               "       hypertune-fault-trainer --reference --lr X "
               "--batch-size B --momentum M --epochs N [--resume-at K "
               "--ckpt-dir D]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options& options = g_options;
  if (const char* study = std::getenv("HYPERTUNE_STUDY")) options.study = study;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--reference") {
      options.reference = true;
      continue;
    }
    if (i + 1 >= argc) return Usage();
    std::string value = argv[++i];
    if (arg == "--study") {
      options.study = value;
    } else if (arg == "--server") {
      options.server = value;
    } else if (arg == "--ckpt-dir") {
      options.ckpt_dir = value;
    } else if (arg == "--events") {
      options.events = value;
    } else if (arg == "--errors") {
      options.errors = value;
    } else if (arg == "--epochs") {
      options.epochs = std::atoi(value.c_str());
    } else if (arg == "--epoch-ms") {
      options.epoch_ms = std::atoi(value.c_str());
    } else if (arg == "--lr") {
      options.params.lr = std::strtod(value.c_str(), nullptr);
    } else if (arg == "--batch-size") {
      options.params.batch_size = std::atoll(value.c_str());
    } else if (arg == "--resume-at") {
      options.resume_at = std::atoi(value.c_str());
    } else if (arg == "--momentum") {
      options.params.momentum = std::strtod(value.c_str(), nullptr);
    } else {
      return Usage();
    }
  }
  if (options.epochs < 1 || options.params.batch_size < 1) return Usage();
  if (options.reference) return Reference(options);
  if (options.study.empty()) return Usage();

  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  Event("start");
  hypertune::ClientOptions client_options;
  client_options.server = options.server;
  hypertune::Client client(client_options);
  while (true) {
    absl::StatusOr<std::optional<hypertune::Trial>> next =
        client.NextTrial(options.study);
    if (!next.ok()) return Fail("next trial", next.status());
    if (!next->has_value()) break;  // The study is done.
    g_in_trial.store(true);
    if (g_signal.load() != 0) Interrupted(**next);
    if (int code = RunTrial(**next); code != 0) return code;
    g_in_trial.store(false);
    // Caught after the trial was settled: nothing to give back.
    if (int signal = g_signal.load(); signal != 0) DieOfSignal(signal);
  }
  Event("exit");
  return 0;
}
