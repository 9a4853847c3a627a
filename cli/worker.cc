#include "cli/worker.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <thread>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "cli/args.h"
#include "cli/format.h"
#include "cli/subprocess.h"
#include "cli/trial_outcome.h"
#include "cli/worker_protocol.h"
#include "common/study_metrics.h"

extern char** environ;

namespace hypertune::cli {

const char kWorkerUsage[] =
    "usage: hypertune worker NAME [--parallel N | --gpus LIST] "
    "[--max-trials M]\n"
    "                        [--timeout S] [--log-dir DIR]\n"
    "                        [--max-consecutive-failures N] "
    "[--early-failures N]\n"
    "                        -- CMD [ARG...]\n"
    "\n"
    "Runs CMD once per trial of study NAME, N trials at a time (default 1),\n"
    "until the study's budget is spent or M trials have run. --gpus 0,1,2,3\n"
    "runs one trial per GPU at a time, each program seeing only its GPU\n"
    "(CUDA_VISIBLE_DEVICES).\n"
    "\n"
    "CMD gets the trial in its environment: HYPERTUNE_SERVER, "
    "HYPERTUNE_STUDY,\n"
    "HYPERTUNE_TRIAL_ID, HYPERTUNE_LEASE_EPOCH, HYPERTUNE_CLIENT_ID and\n"
    "HYPERTUNE_PARAMS (a JSON object {name: value}); `{name}` in ARGs is\n"
    "replaced by the parameter's value. PYTHONUNBUFFERED=1 is set too, so\n"
    "that a Python CMD's printed lines arrive as they are printed. CMD\n"
    "reports either through the SDK (Client::NextTrial attaches to the\n"
    "trial) or by printing lines\n"
    "  hypertune: loss=0.31 step=3     (an intermediate measurement)\n"
    "  hypertune: loss=0.27            (the final metrics)\n"
    "When CMD exits 0 the trial completes with its final metrics (or its\n"
    "last step's); a non-zero exit, a crash (SIGSEGV, SIGABRT...), or no\n"
    "metric at all make the trial infeasible. CMD killed by another signal\n"
    "from outside gives the trial back to the queue (the worker failed, not\n"
    "the parameters). --timeout S ends CMD (and its children) after S\n"
    "seconds: infeasible, \"timeout\". Output goes to stdout prefixed with\n"
    "the trial id and to DIR/trial-<id>.log (default ./hypertune-logs/NAME),\n"
    "whose path is recorded on the trial. The worker renews each trial's\n"
    "lease while CMD runs. SIGTERM (e.g. a spot preemption notice) or Ctrl-C\n"
    "is passed on to the programs; the worker waits for them and gives their\n"
    "trials back unless they finished (\"worker preempted\"). A second\n"
    "signal kills them.\n"
    "\n"
    "A `{name}` in ARGs that is no parameter of the study is refused before\n"
    "any trial is taken. After N trials in a row (--max-consecutive-failures,\n"
    "default 5; 0: never) whose program failed to run at all (it ended\n"
    "infeasible without reporting a metric: a typo, a missing module) the\n"
    "worker stops and prints the last trial's log tail. Sooner, when the\n"
    "first N trials it runs (--early-failures, default 3; 0: never) all\n"
    "fail alike within seconds (the same non-zero exit status or signal, no\n"
    "metric: a python3 without the program's modules), it stops with that\n"
    "status and the last log's tail, and gives the last of them back to the\n"
    "queue: the study stays ACTIVE for the fixed program. It exits non-zero\n"
    "whenever it ran trials and none completed.\n";

namespace {

using Clock = std::chrono::steady_clock;

// While the study is at its parallel limit or paused.
constexpr std::chrono::milliseconds kWaitInitial{200};
constexpr std::chrono::milliseconds kWaitMax{2000};
// How often a running program's slot looks at signals and heartbeats.
constexpr std::chrono::milliseconds kTick{200};
// The worker outlives short server restarts.
constexpr int kWorkerMaxAttempts = 20;
// A program that fails sooner than this, as the worker's first ones all
// did, fails whatever its parameters (--early-failures).
constexpr double kQuickFailureSeconds = 10;

std::atomic<int> g_stop_signals{0};
std::atomic<int> g_last_signal{0};

void OnStopSignal(int signal) {
  g_last_signal.store(signal);
  g_stop_signals.fetch_add(1);
}

// SIGINT/SIGTERM handlers for the worker's run; the previous ones after.
class SignalScope {
 public:
  SignalScope() {
    g_stop_signals = 0;
    struct sigaction action = {};
    action.sa_handler = OnStopSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~SignalScope() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ = {};
  struct sigaction old_term_ = {};
};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int TerminalWidth() {
  winsize size = {};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  return 80;
}

// Lines from all slots, and on a terminal one status line kept below them.
class Console {
 public:
  Console(std::ostream& out, std::ostream& err, bool status_line)
      : out_(out), err_(err), status_line_(status_line) {}

  void Out(const std::string& line) {
    absl::MutexLock lock(&mu_);
    ClearLocked();
    out_ << line << '\n';
    DrawLocked();
  }
  void Err(const std::string& line) {
    absl::MutexLock lock(&mu_);
    ClearLocked();
    out_.flush();
    err_ << line << '\n';
    err_.flush();
    DrawLocked();
  }
  void Status(std::string status) {
    absl::MutexLock lock(&mu_);
    if (!status_line_) return;
    status_ = std::move(status);
    ClearLocked();
    DrawLocked();
  }
  void Close() {
    absl::MutexLock lock(&mu_);
    ClearLocked();
    status_line_ = false;
    out_.flush();
  }

 private:
  void ClearLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (drawn_) out_ << "\r\033[K";
    drawn_ = false;
  }
  void DrawLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (status_line_ && !status_.empty()) {
      size_t width = static_cast<size_t>(TerminalWidth() - 1);
      out_ << (status_.size() > width ? status_.substr(0, width) : status_);
      drawn_ = true;
    }
    out_.flush();
  }

  absl::Mutex mu_;
  std::ostream& out_ ABSL_GUARDED_BY(mu_);
  std::ostream& err_ ABSL_GUARDED_BY(mu_);
  bool status_line_ ABSL_GUARDED_BY(mu_);
  bool drawn_ ABSL_GUARDED_BY(mu_) = false;
  std::string status_ ABSL_GUARDED_BY(mu_);
};

std::string MetricsText(const Metrics& metrics) {
  return absl::StrJoin(metrics, " ", [](std::string* out, const auto& m) {
    absl::StrAppend(out, m.first, "=", FormatShort(m.second));
  });
}

std::string ParametersText(const v1::Trial& trial) {
  return absl::StrJoin(trial.parameters(), " ",
                       [](std::string* out, const v1::ParameterValue& p) {
                         absl::StrAppend(out, p.name(), "=",
                                         FormatParameterValue(p));
                       });
}

// The last `lines` lines of file `path` (at most 8 KiB of it), each ending
// in a newline; "" if it cannot be read.
std::string LogTail(const std::filesystem::path& path, int lines) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return "";
  file.seekg(0, std::ios::end);
  const std::streamoff size = file.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - 8192);
  file.seekg(start);
  std::string text((std::istreambuf_iterator<char>(file)), {});
  std::vector<absl::string_view> all = absl::StrSplit(text, '\n');
  if (!all.empty() && all.back().empty()) all.pop_back();
  const size_t first = all.size() > static_cast<size_t>(lines)
                           ? all.size() - static_cast<size_t>(lines)
                           : 0;
  std::string tail;
  for (size_t i = first; i < all.size(); ++i) {
    absl::StrAppend(&tail, "  ", all[i], "\n");
  }
  return tail;
}

class Worker {
 public:
  Worker(WorkerOptions options, Client client, v1::Study study,
         Console& console)
      : options_(std::move(options)),
        client_(std::move(client)),
        study_(std::move(study)),
        console_(console),
        tickets_(
            options_.max_trials.value_or(std::numeric_limits<int64_t>::max())) {
    const StudyMetrics metrics(study_.spec());
    required_metrics_ = metrics.RequiredNames();
    if (!metrics.objectives().empty() && !metrics.multi_objective()) {
      objective_ = metrics.primary().name;
      maximize_ = metrics.primary().maximize;
    }
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      base_env_.emplace_back(*e);
    }
    budget_ = options_.max_trials.value_or(study_.spec().max_trials());
  }

  absl::Status Run() {
    UpdateStatus();
    std::vector<std::thread> slots;
    for (int slot = 1; slot <= options_.parallel; ++slot) {
      slots.emplace_back([this, slot] { SlotLoop(slot); });
    }
    for (std::thread& t : slots) t.join();

    absl::MutexLock lock(&mu_);
    std::string why = !fatal_.ok()                ? "stopped by an error"
                      : g_stop_signals.load() > 0 ? "interrupted"
                      : study_completed_          ? "study budget spent"
                                                  : "--max-trials reached";
    std::string summary =
        absl::StrCat("worker done (", why, "): ", ProgressLocked());
    console_.Close();
    console_.Out(summary);
    if (!fatal_.ok()) return fatal_;
    if (g_stop_signals.load() > 0) {
      return absl::CancelledError(
          absl::StrCat("interrupted by signal ", g_last_signal.load()));
    }
    if (completed_ == 0 && infeasible_ + other_ > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no trial completed (", infeasible_, " infeasible, ", other_,
          " given back or left); see the trials' logs in ", options_.log_dir));
    }
    return absl::OkStatus();
  }

 private:
  bool Stopping() {
    absl::MutexLock lock(&mu_);
    return g_stop_signals.load() > 0 || !fatal_.ok();
  }

  void SetFatal(absl::Status status) {
    absl::MutexLock lock(&mu_);
    if (fatal_.ok()) fatal_ = std::move(status);
  }

  bool TakeTicket() {
    if (tickets_.fetch_sub(1) > 0) return true;
    tickets_.fetch_add(1);
    return false;
  }
  void ReturnTicket() { tickets_.fetch_add(1); }

  // Sleeps `duration`, or less if the worker is told to stop.
  void SleepUnlessStopping(std::chrono::milliseconds duration) {
    Clock::time_point end = Clock::now() + duration;
    while (Clock::now() < end && !Stopping()) {
      std::this_thread::sleep_for(std::min<Clock::duration>(
          std::chrono::milliseconds(50), end - Clock::now()));
    }
  }

  void SlotLoop(int slot) {
    std::string client_id = absl::StrCat(client_.client_id(), "-", slot);
    int waits = 0;
    bool told_paused = false;
    while (!Stopping()) {
      if (!TakeTicket()) break;
      absl::StatusOr<v1::SuggestTrialsResponse> response =
          client_.Suggest(options_.study, 1, client_id);
      if (!response.ok()) {
        ReturnTicket();
        SetFatal(response.status());
        break;
      }
      if (response->trials_size() == 0) {
        ReturnTicket();
        if (response->study_state() == v1::Study::COMPLETED) {
          absl::MutexLock lock(&mu_);
          study_completed_ = true;
          break;
        }
        if (response->study_state() == v1::Study::PAUSED && !told_paused) {
          console_.Out(absl::StrCat("slot ", slot, ": study \"", options_.study,
                                    "\" is paused; waiting"));
          told_paused = true;
        }
        thread_local absl::BitGen bitgen;
        SleepUnlessStopping(BackoffDelay(
            ++waits, kWaitInitial, kWaitMax, absl::Uniform(bitgen, 0.5, 1.0)));
        continue;
      }
      waits = 0;
      told_paused = false;
      const v1::Trial& trial = response->trials(0);
      if (Stopping()) {
        GiveBack(trial, "the worker stopped before running it",
                 /*preempted=*/true);
        break;
      }
      if (absl::Status s = RunTrial(slot, client_id, trial); !s.ok()) {
        SetFatal(std::move(s));
        break;
      }
    }
  }

  // Returns `trial`, which this worker will not run, to the queue;
  // `preempted`: not the trial's doing, so it spends no retry.
  void GiveBack(const v1::Trial& trial, const std::string& reason,
                bool preempted = false) {
    v1::CompleteTrialRequest request;
    request.set_study_name(options_.study);
    request.set_trial_id(trial.id());
    request.set_lease_epoch(trial.lease_epoch());
    request.set_worker_failed(true);
    request.set_failure_reason(reason);
    request.set_preempted(preempted);
    absl::StatusOr<v1::Trial> done = client_.CompleteTrial(request);
    console_.Out(absl::StrCat(
        "trial ", trial.id(),
        done.ok() ? " given back: " : " left to its lease: ", reason,
        done.ok() ? "" : absl::StrCat(" (", done.status().message(), ")")));
  }

  // Runs the trial's program and settles the trial. Errors only for what
  // stops the whole worker (the program cannot be started).
  absl::Status RunTrial(int slot, const std::string& client_id,
                        const v1::Trial& trial) {
    const int64_t id = trial.id();
    const std::string prefix = absl::StrCat("[trial ", id, "] ");
    std::filesystem::path log_path = std::filesystem::path(options_.log_dir) /
                                     absl::StrCat("trial-", id, ".log");
    std::ofstream log(log_path, std::ios::app);
    if (!log) {
      console_.Err(absl::StrCat("warning: trial ", id, ": cannot write ",
                                log_path.string(), "; output not kept"));
    } else {
      RecordLogPath(trial, log_path);
    }

    SubprocessOptions program;
    for (const std::string& arg : options_.command) {
      program.argv.push_back(SubstituteParameters(arg, trial.parameters(), &study_.spec()));
    }
    const ClientOptions& client_options = client_.options();
    std::vector<std::pair<std::string, std::string>> vars = {
        {"HYPERTUNE_SERVER", client_options.server},
        {"HYPERTUNE_STUDY", options_.study},
        {"HYPERTUNE_TRIAL_ID", absl::StrCat(id)},
        {"HYPERTUNE_LEASE_EPOCH", absl::StrCat(trial.lease_epoch())},
        {"HYPERTUNE_CLIENT_ID", client_id},
        {"HYPERTUNE_PARAMS", ParametersJson(trial.parameters())},
        // Python buffers a piped stdout until exit: without this, a plain
        // print()'s intermediate metrics would reach the worker only at the
        // end, too late for early stopping and live curves.
        {"PYTHONUNBUFFERED", "1"}};
    if (!options_.gpus.empty()) {
      vars.emplace_back("CUDA_VISIBLE_DEVICES", options_.gpus[slot - 1]);
    }
    // The SDK in the program reaches the server as the worker does.
    for (const auto& [name, value] :
         {std::pair{"HYPERTUNE_TOKEN", &client_options.token},
          std::pair{"HYPERTUNE_TLS_CA", &client_options.tls_ca},
          std::pair{"HYPERTUNE_TLS_CERT", &client_options.tls_cert},
          std::pair{"HYPERTUNE_TLS_KEY", &client_options.tls_key}}) {
      if (!value->empty()) vars.emplace_back(name, *value);
    }
    program.env = ProgramEnvironment(base_env_, vars);
    if (options_.timeout_seconds.has_value()) {
      program.timeout =
          std::chrono::duration<double>(*options_.timeout_seconds);
    }
    log << "[hypertune worker] trial " << id << " of study " << options_.study
        << ", epoch " << trial.lease_epoch() << ", client " << client_id << ": "
        << absl::StrJoin(program.argv, " ") << std::endl;

    absl::StatusOr<std::unique_ptr<Subprocess>> process =
        Subprocess::Start(program);
    if (!process.ok()) {
      log << "[hypertune worker] " << process.status().message() << std::endl;
      GiveBack(trial, "the worker could not start the program");
      return process.status();
    }
    console_.Out(absl::StrCat("trial ", id, " started (slot ", slot,
                              "): ", ParametersText(trial), "; log ",
                              log_path.string()));
    {
      absl::MutexLock lock(&mu_);
      ++running_;
    }
    UpdateStatus();

    Clock::time_point started = Clock::now();
    TrialRun run;
    int signals_passed_on = 0;
    // Renews the lease in the background while the program runs.
    Trial lease = client_.Hold(trial);
    bool lease_checked = false;
    // Set when a report's answer stops (or pauses) the trial early.
    std::optional<std::string> stop_reason;

    auto on_stdout = [&](std::string_view line) {
      log << line << '\n';
      console_.Out(
          absl::StrCat(prefix, absl::string_view(line.data(), line.size())));
      absl::StatusOr<std::optional<MetricsLine>> parsed =
          ParseMetricsLine(line);
      if (!parsed.ok()) {
        console_.Err(absl::StrCat("warning: trial ", id,
                                  ": ignoring a malformed metrics line: ",
                                  parsed.status().message()));
        return;
      }
      if (!parsed->has_value()) return;
      MetricsLine& metrics = **parsed;
      if (!metrics.step.has_value()) {
        run.final_metrics = std::move(metrics.metrics);
        return;
      }
      run.step_metrics = metrics.metrics;
      run.last_step = *metrics.step;
      // NaN cannot be stored; the trial's end decides what NaN means.
      Metrics storable;
      for (const auto& [name, value] : metrics.metrics) {
        if (!std::isnan(value)) storable.emplace(name, value);
      }
      if (storable.empty()) return;
      v1::AddMeasurementRequest request;
      request.set_study_name(options_.study);
      request.set_trial_id(id);
      request.set_lease_epoch(trial.lease_epoch());
      v1::Measurement* m = request.mutable_measurement();
      m->set_step(*metrics.step);
      m->set_elapsed_seconds(ElapsedSeconds(trial, started));
      m->mutable_metrics()->insert(storable.begin(), storable.end());
      absl::StatusOr<v1::Trial> updated = client_.AddMeasurement(request);
      if (updated.ok() && (updated->state() == v1::Trial::STOPPING ||
                           updated->state() == v1::Trial::PAUSED)) {
        // The rule judged this report: no need to wait for a heartbeat.
        stop_reason = updated->stop_reason();
      }
      if (!updated.ok()) {
        console_.Err(
            absl::StrCat("warning: trial ", id, " step ", *metrics.step, ": ",
                         absl::StatusCodeToString(updated.status().code()),
                         ": ", updated.status().message()));
      }
    };
    auto on_stderr = [&](std::string_view line) {
      log << line << '\n';
      console_.Err(
          absl::StrCat(prefix, absl::string_view(line.data(), line.size())));
    };
    auto on_tick = [&] {
      int signals = g_stop_signals.load();
      if (signals > signals_passed_on) {
        (*process)->Signal(signals >= 2 ? SIGKILL : g_last_signal.load());
        signals_passed_on = signals;
        run.worker_signal = g_last_signal.load();
      }
      if ((lease.should_stop() || stop_reason.has_value()) &&
          !run.stop_requested) {
        console_.Out(
            absl::StrCat("trial ", id, ": the server stops it early",
                         stop_reason.has_value() && !stop_reason->empty()
                             ? absl::StrCat(" (", *stop_reason, ")")
                             : ""));
        run.stop_requested = true;
        (*process)->Terminate();
      }
      if (!lease_checked && !lease.lease_status().ok()) {
        lease_checked = true;
        if (TakenOver(trial)) {
          console_.Err(absl::StrCat("trial ", id, ": the lease is lost (",
                                    lease.lease_status().message(),
                                    "); ending its program"));
          run.lease_lost = true;
          (*process)->Terminate();
        }
      }
    };
    run.exit = (*process)->Wait(on_stdout, on_stderr, on_tick, kTick);
    process->reset();
    {
      absl::MutexLock lock(&mu_);
      --running_;
    }
    const double program_seconds =
        std::chrono::duration<double>(Clock::now() - started).count();
    const bool early_failures = EndsEarlyFailures(run, program_seconds, id);
    std::optional<std::string> give_back;
    if (early_failures) {
      give_back = absl::StrCat(
          "the worker's first ", options_.early_failures,
          " programs failed alike within seconds (", ExitText(run.exit),
          "): the program, not the parameters; given back for a fixed one");
    }
    const std::optional<v1::Trial::State> settled =
        Settle(trial, run, ElapsedSeconds(trial, started), program_seconds,
               log, give_back);
    log.close();
    if (early_failures) {
      SetFatal(EarlyFailuresError(run, id, log_path));
    } else {
      CountFailureToRun(settled, run, log_path);
    }
    return absl::OkStatus();
  }

  static std::string ExitText(const ProgramExit& exit) {
    return exit.signaled ? absl::StrCat("killed by signal ", exit.code)
                         : absl::StrCat("exit status ", exit.code);
  }

  // Whether `run`, one of this worker's first programs, makes
  // options_.early_failures of them that failed alike: each ended on its
  // own within kQuickFailureSeconds with the same non-zero exit status (or
  // signal) and no metric. Any other end among the first ones (a metric, a
  // success, a longer run, another status) ends the watch for good.
  bool EndsEarlyFailures(const TrialRun& run, double program_seconds,
                         int64_t id) {
    if (options_.early_failures <= 0) return false;
    const bool quick_failure =
        (run.exit.signaled || run.exit.code != 0) &&
        !run.final_metrics.has_value() && !run.step_metrics.has_value() &&
        !run.exit.timed_out && run.worker_signal == 0 && !run.stop_requested &&
        !run.lease_lost && program_seconds < kQuickFailureSeconds;
    absl::MutexLock lock(&mu_);
    if (early_watch_over_) return false;
    const bool alike =
        early_trials_.empty() || (run.exit.signaled == early_exit_.signaled &&
                                  run.exit.code == early_exit_.code);
    if (!quick_failure || !alike) {
      early_watch_over_ = true;
      return false;
    }
    if (early_trials_.empty()) early_exit_ = run.exit;
    early_trials_.push_back(id);
    // With parallel slots, programs already running when the count is
    // reached end alike too: they are given back as well.
    return early_trials_.size() >= static_cast<size_t>(options_.early_failures);
  }

  absl::Status EarlyFailuresError(const TrialRun& run, int64_t id,
                                  const std::filesystem::path& log_path) {
    std::vector<int64_t> ids;
    {
      absl::MutexLock lock(&mu_);
      ids = early_trials_;
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "the first ", ids.size(), " trials this worker ran (",
        absl::StrJoin(ids, ", "), ") all failed alike within ",
        FormatShort(kQuickFailureSeconds), " s: ", ExitText(run.exit),
        ", no metric reported. That is the program or its environment (a "
        "missing module, a wrong interpreter), not the parameters: the "
        "worker stops before the study's budget is spent on it, and trial ",
        id, " is given back to the queue. The last program's log (",
        log_path.string(), ") ends with:\n", LogTail(log_path, 20),
        "Fix the program and run the worker again (--early-failures 0 never "
        "stops for this)"));
  }

  // A program that ended infeasible without reporting a single metric, on
  // its own (not stopped, timed out, preempted or taken over), failed to
  // run at all: a typo, a missing module. After max_consecutive_failures of
  // them in a row the worker stops (FAILED_PRECONDITION, with the last
  // log's tail), rather than spend the study's budget on them.
  void CountFailureToRun(std::optional<v1::Trial::State> settled,
                         const TrialRun& run,
                         const std::filesystem::path& log_path) {
    const bool failed_to_run =
        settled == v1::Trial::INFEASIBLE && !run.final_metrics.has_value() &&
        !run.step_metrics.has_value() && !run.exit.timed_out &&
        run.worker_signal == 0 && !run.stop_requested && !run.lease_lost;
    int in_a_row = 0;
    {
      absl::MutexLock lock(&mu_);
      if (settled == v1::Trial::COMPLETED || settled == v1::Trial::STOPPED ||
          (settled == v1::Trial::INFEASIBLE && !failed_to_run)) {
        failures_in_a_row_ = 0;
      } else if (failed_to_run) {
        in_a_row = ++failures_in_a_row_;
      }
    }
    if (options_.max_consecutive_failures <= 0 ||
        in_a_row < options_.max_consecutive_failures) {
      return;
    }
    SetFatal(absl::FailedPreconditionError(absl::StrCat(
        in_a_row, " trials in a row failed to run (infeasible without "
                  "reporting a metric); stopping before the study's budget is "
                  "spent on them. The last one's log (",
        log_path.string(), ") ends with:\n", LogTail(log_path, 20),
        "Fix the program and run the worker again (--max-consecutive-failures "
        "0 never stops)")));
  }

  // Seconds since the trial started (server's start time when known).
  static double ElapsedSeconds(const v1::Trial& trial,
                               Clock::time_point program_start) {
    double program =
        std::chrono::duration<double>(Clock::now() - program_start).count();
    if (trial.start_time_ms() <= 0) return program;
    return std::max(program, (NowMs() - trial.start_time_ms()) / 1000.0);
  }

  // Completes, marks infeasible or leaves the trial after its program ended.
  // `elapsed`: since the trial started; `program_seconds`: this program's
  // run, its device time. Returns the state the trial was left in by this
  // worker, or nullopt when someone else settled it or it was left alone.
  // `give_back`: the reason to give the trial back to the queue instead of
  // making it infeasible.
  std::optional<v1::Trial::State> Settle(
      const v1::Trial& trial, const TrialRun& run, double elapsed,
      double program_seconds, std::ofstream& log,
      const std::optional<std::string>& give_back) {
    const int64_t id = trial.id();
    std::string how = ExitText(run.exit);
    std::string took = absl::StrCat(FormatShort(elapsed), " s");

    // The program may have settled the trial itself through the SDK.
    absl::StatusOr<Trial> stored = client_.GetTrial(options_.study, id);
    if (stored.ok()) {
      const v1::Trial& now = stored->proto();
      if (now.state() != v1::Trial::ACTIVE &&
          now.state() != v1::Trial::STOPPING) {
        Record(
            now,
            absl::StrCat("trial ", id, " ", v1::Trial::State_Name(now.state()),
                         " by the program: ", Describe(now), " (", how, ", ",
                         took, ")"),
            log);
        return std::nullopt;
      }
      if (now.lease_epoch() != trial.lease_epoch()) {
        Record(now,
               absl::StrCat("trial ", id, " now belongs to lease epoch ",
                            now.lease_epoch(), "; leaving it (", how, ")"),
               log, /*counted=*/false);
        return std::nullopt;
      }
    } else {
      console_.Err(
          absl::StrCat("warning: trial ", id, ": ", stored.status().message()));
    }

    TrialOutcome outcome = DecideOutcome(run, required_metrics_);
    if (give_back.has_value() &&
        outcome.kind == TrialOutcome::Kind::kInfeasible) {
      outcome.kind = TrialOutcome::Kind::kWorkerFailed;
      outcome.reason = *give_back;
    }
    if (outcome.kind == TrialOutcome::Kind::kLeave) {
      Record(trial,
             absl::StrCat("trial ", id, " left to its lease: ", outcome.reason,
                          " (", how, ")"),
             log, /*counted=*/false);
      return std::nullopt;
    }
    v1::CompleteTrialRequest request;
    request.set_study_name(options_.study);
    request.set_trial_id(id);
    request.set_lease_epoch(trial.lease_epoch());
    // One device per slot (its GPU under --gpus).
    request.set_device_seconds(program_seconds);
    if (outcome.kind == TrialOutcome::Kind::kComplete) {
      v1::Measurement* m = request.mutable_final_measurement();
      m->set_step(outcome.step);
      m->set_elapsed_seconds(elapsed);
      m->mutable_metrics()->insert(outcome.metrics.begin(),
                                   outcome.metrics.end());
    } else if (outcome.kind == TrialOutcome::Kind::kWorkerFailed) {
      request.set_worker_failed(true);
      request.set_failure_reason(outcome.reason);
      request.set_preempted(outcome.preempted);
    } else {
      request.set_infeasible(true);
      request.set_infeasible_reason(outcome.reason);
    }
    absl::StatusOr<v1::Trial> done = client_.CompleteTrial(request);
    if (!done.ok() && outcome.kind == TrialOutcome::Kind::kComplete &&
        done.status().code() == absl::StatusCode::kInvalidArgument) {
      // Metrics the server refuses are the program's fault, not a reason to
      // leave the trial hanging until its lease runs out.
      request.clear_final_measurement();
      request.set_infeasible(true);
      request.set_infeasible_reason(absl::StrCat(
          "the server refused the final metrics: ", done.status().message()));
      done = client_.CompleteTrial(request);
    }
    if (!done.ok()) {
      std::string message =
          absl::StrCat("trial ", id, " could not be settled: ",
                       absl::StatusCodeToString(done.status().code()), ": ",
                       done.status().message());
      console_.Err(message);
      log << "[hypertune worker] " << message << std::endl;
      absl::MutexLock lock(&mu_);
      ++other_;
      return std::nullopt;
    }
    std::string what = Describe(*done);
    std::string state = done->state() == v1::Trial::REQUESTED
                            ? "given back to the queue"
                            : v1::Trial::State_Name(done->state());
    Record(*done,
           absl::StrCat("trial ", id, " ", state, ": ", what, " (",
                        what == how ? "" : how + ", ", took, ")"),
           log);
    return done->state();
  }

  // Whether `trial`, whose lease renewal was refused, went to another worker
  // or away (rather than being finished by its own program).
  bool TakenOver(const v1::Trial& trial) {
    absl::StatusOr<Trial> stored = client_.GetTrial(options_.study, trial.id());
    if (!stored.ok()) return absl::IsNotFound(stored.status());
    const v1::Trial& now = stored->proto();
    return now.lease_epoch() != trial.lease_epoch() ||
           now.state() == v1::Trial::REQUESTED ||
           now.state() == v1::Trial::FAILED;
  }

  // Records the trial's log file on it, for whoever reads the trial later.
  void RecordLogPath(const v1::Trial& trial,
                     const std::filesystem::path& log_path) {
    std::error_code error;
    std::filesystem::path absolute = std::filesystem::absolute(log_path, error);
    v1::HeartbeatRequest request;
    request.set_study_name(options_.study);
    request.set_trial_id(trial.id());
    request.set_lease_epoch(trial.lease_epoch());
    request.set_client_id(trial.client_id());
    request.set_log_path(error ? log_path.string() : absolute.string());
    absl::StatusOr<v1::HeartbeatResponse> noted = client_.Heartbeat(request);
    if (!noted.ok() &&
        noted.status().code() != absl::StatusCode::kUnimplemented) {
      console_.Err(absl::StrCat(
          "warning: trial ", trial.id(),
          ": cannot record its log path: ", noted.status().message()));
    }
  }

  std::string Describe(const v1::Trial& trial) {
    if (trial.state() == v1::Trial::INFEASIBLE)
      return trial.infeasible_reason();
    if (trial.state() == v1::Trial::REQUESTED ||
        trial.state() == v1::Trial::FAILED) {
      return trial.failure_reason();
    }
    Metrics metrics(trial.final_measurement().metrics().begin(),
                    trial.final_measurement().metrics().end());
    return metrics.empty() ? "no final metrics" : MetricsText(metrics);
  }

  void Record(const v1::Trial& trial, const std::string& message,
              std::ofstream& log, bool counted = true) {
    log << "[hypertune worker] " << message << std::endl;
    {
      absl::MutexLock lock(&mu_);
      if (!counted) {
        ++other_;
      } else if (trial.state() == v1::Trial::INFEASIBLE) {
        ++infeasible_;
      } else if (trial.state() == v1::Trial::COMPLETED ||
                 trial.state() == v1::Trial::STOPPED) {
        ++completed_;
        const auto& metrics = trial.final_measurement().metrics();
        auto it = metrics.find(objective_);
        const bool feasible = !trial.has_feasible() || trial.feasible();
        if (feasible && it != metrics.end() &&
            (!best_.has_value() ||
             (maximize_ ? it->second > *best_ : it->second < *best_))) {
          best_ = it->second;
          best_trial_ = trial.id();
        }
      } else {
        ++other_;
      }
    }
    console_.Out(message);
    UpdateStatus();
  }

  // "<study>: 3/30 done (1 infeasible), 2 running, best loss=0.1 (trial 2)"
  std::string ProgressLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::string text =
        absl::StrCat(options_.study, ": ", completed_ + infeasible_ + other_);
    if (budget_ > 0) absl::StrAppend(&text, "/", budget_);
    absl::StrAppend(&text, " done");
    std::vector<std::string> notes;
    if (infeasible_ > 0)
      notes.push_back(absl::StrCat(infeasible_, " infeasible"));
    if (other_ > 0) {
      notes.push_back(absl::StrCat(other_, " given back or left"));
    }
    if (!notes.empty())
      absl::StrAppend(&text, " (", absl::StrJoin(notes, ", "), ")");
    absl::StrAppend(&text, ", ", running_, " running");
    if (best_.has_value()) {
      absl::StrAppend(&text, ", best ", objective_, "=", FormatShort(*best_),
                      " (trial ", best_trial_, ")");
    }
    return text;
  }

  void UpdateStatus() {
    std::string text;
    {
      absl::MutexLock lock(&mu_);
      text = ProgressLocked();
    }
    console_.Status(std::move(text));
  }

  WorkerOptions options_;
  Client client_;
  v1::Study study_;
  Console& console_;
  // The metrics a result needs; the single objective, "" with several.
  std::vector<std::string> required_metrics_;
  std::string objective_;
  bool maximize_ = false;
  int64_t budget_ = 0;
  std::vector<std::string> base_env_;
  std::atomic<int64_t> tickets_;

  absl::Mutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int completed_ ABSL_GUARDED_BY(mu_) = 0;
  int infeasible_ ABSL_GUARDED_BY(mu_) = 0;
  // Given back, left to their leases, or settled by someone else.
  int other_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<double> best_ ABSL_GUARDED_BY(mu_);
  int64_t best_trial_ ABSL_GUARDED_BY(mu_) = 0;
  bool study_completed_ ABSL_GUARDED_BY(mu_) = false;
  // Trials in a row whose program failed to run (CountFailureToRun).
  int failures_in_a_row_ ABSL_GUARDED_BY(mu_) = 0;
  // The worker's first trials whose programs failed alike, and how the
  // first of them ended (EndsEarlyFailures); over once one ends otherwise.
  std::vector<int64_t> early_trials_ ABSL_GUARDED_BY(mu_);
  ProgramExit early_exit_ ABSL_GUARDED_BY(mu_);
  bool early_watch_over_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status fatal_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<WorkerOptions> ParseWorkerArgs(const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(
      args,
      {{"parallel"},
       {"gpus"},
       {"max-trials"},
       {"timeout"},
       {"log-dir"},
       {"max-consecutive-failures"},
       {"early-failures"}},
      /*allow_separator=*/true);
  if (!parsed.ok()) return parsed.status();
  if (parsed->positional.size() != 1) {
    return UsageError(parsed->positional.empty()
                          ? "worker needs a study NAME"
                          : "worker takes one study NAME; put the command "
                            "after \"--\"");
  }
  if (parsed->rest.empty()) {
    return UsageError("worker needs a command after \"--\"");
  }
  WorkerOptions options;
  options.study = parsed->positional[0];
  // The default log folder is named after the study: it must stay a folder
  // under hypertune-logs/ (the server refuses such names too).
  if (options.study.empty() || options.study == "." || options.study == ".." ||
      options.study.find('/') != std::string::npos) {
    return UsageError(absl::StrCat("worker: \"", options.study,
                                   "\" is not a study name"));
  }
  options.command = parsed->rest;
  absl::StatusOr<int64_t> parallel = parsed->GetInt("parallel", 1, 1);
  if (!parallel.ok()) return parallel.status();
  if (*parallel > 1024) return UsageError("--parallel: at most 1024");
  options.parallel = static_cast<int>(*parallel);
  if (std::optional<std::string> gpus = parsed->Get("gpus"); gpus.has_value()) {
    for (absl::string_view gpu : absl::StrSplit(*gpus, ',')) {
      // An ordinal, or a UUID such as GPU-8f1e...: letters, digits, '-'.
      if (gpu.empty() || !std::all_of(gpu.begin(), gpu.end(), [](char c) {
            return absl::ascii_isalnum(c) || c == '-';
          })) {
        return UsageError(absl::StrCat(
            "--gpus: expected a comma-separated list of GPU ordinals or "
            "UUIDs, got \"",
            *gpus, "\""));
      }
      options.gpus.emplace_back(gpu);
    }
    if (parsed->Has("parallel") &&
        *parallel != static_cast<int64_t>(options.gpus.size())) {
      return UsageError(
          "--parallel: --gpus runs one trial per GPU; give one or the other");
    }
    options.parallel = static_cast<int>(options.gpus.size());
  }
  if (parsed->Has("max-trials")) {
    absl::StatusOr<int64_t> max_trials = parsed->GetInt("max-trials", 0, 1);
    if (!max_trials.ok()) return max_trials.status();
    options.max_trials = *max_trials;
  }
  absl::StatusOr<std::optional<double>> timeout =
      parsed->GetPositiveDouble("timeout");
  if (!timeout.ok()) return timeout.status();
  options.timeout_seconds = *timeout;
  if (parsed->Has("max-consecutive-failures")) {
    absl::StatusOr<int64_t> failures =
        parsed->GetInt("max-consecutive-failures", 0, 0);
    if (!failures.ok()) return failures.status();
    options.max_consecutive_failures =
        static_cast<int>(std::min<int64_t>(*failures, 1'000'000));
  }
  if (parsed->Has("early-failures")) {
    absl::StatusOr<int64_t> early = parsed->GetInt("early-failures", 0, 0);
    if (!early.ok()) return early.status();
    options.early_failures =
        static_cast<int>(std::min<int64_t>(*early, 1'000'000));
  }
  options.log_dir = parsed->Get("log-dir").value_or(
      (std::filesystem::path("hypertune-logs") / options.study).string());
  if (options.log_dir.empty()) return UsageError("--log-dir: empty");
  return options;
}

std::vector<std::string> ProgramEnvironment(
    const std::vector<std::string>& base,
    const std::vector<std::pair<std::string, std::string>>& vars) {
  std::vector<std::string> env;
  for (const std::string& entry : base) {
    bool replaced = std::any_of(vars.begin(), vars.end(), [&](const auto& v) {
      return entry.size() > v.first.size() && entry[v.first.size()] == '=' &&
             absl::StartsWith(entry, v.first);
    });
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [name, value] : vars)
    env.push_back(absl::StrCat(name, "=", value));
  return env;
}

absl::Status CheckProgram(const std::string& program) {
  // A placeholder in the program itself is resolved per trial.
  if (program.find('{') != std::string::npos) return absl::OkStatus();
  std::vector<std::string> candidates;
  if (program.find('/') != std::string::npos) {
    candidates.push_back(program);
  } else {
    const char* path = std::getenv("PATH");
    for (absl::string_view dir :
         absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
      candidates.push_back(absl::StrCat(dir.empty() ? "." : dir, "/", program));
    }
  }
  for (const std::string& candidate : candidates) {
    if (access(candidate.c_str(), X_OK) == 0 &&
        !std::filesystem::is_directory(candidate)) {
      return absl::OkStatus();
    }
  }
  return absl::NotFoundError(
      absl::StrCat("cannot run \"", program, "\": ",
                   program.find('/') != std::string::npos
                       ? "no executable file there"
                       : "no executable of that name in PATH"));
}

absl::Status RunWorkerCommand(const CommandContext& context, const Args& args) {
  absl::StatusOr<WorkerOptions> options = ParseWorkerArgs(args);
  if (!options.ok()) return options.status();
  // Before taking any trial: a typo must not hold one until its lease ends.
  if (absl::Status s = CheckProgram(options->command[0]); !s.ok()) return s;
  ClientOptions client_options = context.options;
  client_options.max_attempts =
      std::max(client_options.max_attempts, kWorkerMaxAttempts);
  client_options.heartbeats = true;
  Client client(client_options);
  absl::StatusOr<v1::Study> study = client.GetStudy(options->study);
  if (!study.ok()) return study.status();
  if (absl::Status s = CheckPlaceholders(options->command, study->spec());
      !s.ok()) {
    return s;
  }
  std::error_code error;
  std::filesystem::create_directories(options->log_dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("--log-dir: cannot create \"", options->log_dir,
                     "\": ", error.message()));
  }
  Console console(context.out, context.err, context.interactive);
  SignalScope signals;
  Worker worker(*std::move(options), std::move(client), *std::move(study),
                console);
  return worker.Run();
}

}  // namespace hypertune::cli
