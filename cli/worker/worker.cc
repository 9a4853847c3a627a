#include "cli/worker/worker.h"

#include <signal.h>
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
#include "cli/worker/subprocess.h"
#include "cli/worker/trial_outcome.h"
#include "cli/worker/wandb_command.h"
#include "cli/worker/worker_console.h"
#include "cli/worker/worker_failures.h"
#include "cli/worker/worker_protocol.h"
#include "cli/worker/worker_signals.h"
#include "cli/worker/worker_tally.h"
#include "cli/worker/worker_text.h"
#include "common/study_metrics.h"

extern char** environ;

namespace hypertune::cli {

const char kWorkerUsage[] =
    "usage: hypertune worker NAME [--parallel N | --gpus LIST "
    "[--gpus-per-trial G]]\n"
    "                        [--max-trials M]\n"
    "                        [--timeout S] [--log-dir DIR]\n"
    "                        [--max-consecutive-failures N] "
    "[--early-failures N]\n"
    "                        -- CMD [ARG...] | --wandb\n"
    "\n"
    "Runs CMD once per trial of study NAME, N trials at a time (default 1),\n"
    "until the study's budget is spent or M trials have run. --gpus 0,1,2,3\n"
    "runs one trial per GPU at a time, each program seeing only its GPU\n"
    "(CUDA_VISIBLE_DEVICES); with --gpus-per-trial 2, one trial per pair\n"
    "(0,1 and 2,3), for programs that train on several (torchrun). A\n"
    "trial's device-seconds are its wall seconds times its GPUs (or 1).\n"
    "\n"
    "CMD gets the trial in its environment: HYPERTUNE_SERVER, "
    "HYPERTUNE_STUDY,\n"
    "HYPERTUNE_TRIAL_ID, HYPERTUNE_LEASE_EPOCH, HYPERTUNE_CLIENT_ID,\n"
    "HYPERTUNE_PARAMS (a JSON object {name: value}), HYPERTUNE_ATTEMPT (1,\n"
    "then one more each time the trial is handed over after a loss),\n"
    "HYPERTUNE_CHECKPOINT_URI and HYPERTUNE_CHECKPOINT_STEP (where to\n"
    "resume, and the step it holds; empty and 0 if none); `{name}` in ARGs\n"
    "is replaced by the parameter's value. PYTHONUNBUFFERED=1 is set too, so\n"
    "that a Python CMD's printed lines arrive as they are printed. CMD\n"
    "reports either through the SDK (Client::NextTrial attaches to the\n"
    "trial) or by printing lines\n"
    "  hypertune: loss=0.31 step=3     (an intermediate measurement)\n"
    "  hypertune: loss=0.27            (the final metrics)\n"
    "  hypertune: checkpoint=URI step=3  (resume from URI, holding step 3)\n"
    "  hypertune: infeasible=REASON    (the parameters are bad)\n"
    "When CMD exits 0 the trial completes with its final metrics (or its\n"
    "last step's). A trial CMD declared infeasible, a NaN metric or a crash\n"
    "(SIGSEGV, SIGABRT...) make it infeasible; a non-zero exit or no metric\n"
    "at all make it FAILED (the program's fault, not the parameters').\n"
    "CMD killed by another signal from outside gives the trial back to the\n"
    "queue (the worker failed, not the parameters). --timeout S ends CMD\n"
    "(and its children) after S seconds: infeasible, \"timeout\". Output\n"
    "goes to stdout prefixed with the trial id and to DIR/trial-<id>.log\n"
    "(default ./hypertune-logs/NAME), whose path is recorded on the trial.\n"
    "The worker renews each trial's lease while CMD runs, with its device-\n"
    "seconds; a trial paused at an ASHA rung counts them too. SIGTERM\n"
    "(e.g. a spot preemption notice) or Ctrl-C is passed on to the\n"
    "programs; the worker waits for them and gives their trials back as\n"
    "preempted unless they finished (\"worker preempted\").\n"
    "A second signal kills them. CMD runs in a process group of its own,\n"
    "which ends with it, and never outlives the worker: killed with the\n"
    "worker (kill -9 included), with its children.\n"
    "\n"
    "A `{name}` in ARGs that is no parameter of the study is refused before\n"
    "any trial is taken. After N trials in a row (--max-consecutive-failures,\n"
    "default 5; 0: never) whose program failed to run at all (it ended\n"
    "failed without reporting a metric: a typo, a missing module) the\n"
    "worker stops and prints the last trial's log tail. Sooner, when the\n"
    "first N trials it runs (--early-failures, default 3; 0: never) all\n"
    "fail alike within seconds (the same non-zero exit status or signal, no\n"
    "metric: a python3 without the program's modules, exit 127), it stops\n"
    "with that status and the last log's tail, and gives all of them back\n"
    "to the queue (held meanwhile, not settled): the study stays ACTIVE for\n"
    "a healthy worker. It exits non-zero whenever it ran trials and none\n"
    "completed.\n"
    "\n"
    "--wandb runs, instead of CMD, the command of the W&B sweep the study was\n"
    "created from (study create --from-wandb) with W&B's macros: ${env}\n"
    "${interpreter} ${program} ${args} by default (docs/wandb-sweeps.md).\n";

namespace {

using Clock = std::chrono::steady_clock;

// While the study is at its parallel limit or paused.
constexpr std::chrono::milliseconds kWaitInitial{200};
constexpr std::chrono::milliseconds kWaitMax{2000};
// How often a running program's slot looks at signals and heartbeats.
constexpr std::chrono::milliseconds kTick{200};
// The worker outlives short server restarts.
constexpr int kWorkerMaxAttempts = 20;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The study's single objective, whose best value the progress shows;
// nullopt with several.
std::optional<StudyMetrics::Objective> SingleObjective(
    const v1::StudySpec& spec) {
  const StudyMetrics metrics(spec);
  if (metrics.objectives().empty() || metrics.multi_objective()) {
    return std::nullopt;
  }
  return metrics.primary();
}

// One run of `hypertune worker`: options_.parallel slots, each taking a
// trial, running its program (RunTrial) and settling the trial (Settle),
// until the study or the worker is done. Its progress is a WorkerTally,
// its watches for a program that cannot run a FailureWatch.
class Worker {
 public:
  Worker(WorkerOptions options, Client client, v1::Study study,
         Console& console)
      : options_(std::move(options)),
        client_(std::move(client)),
        study_(std::move(study)),
        console_(console),
        required_metrics_(StudyMetrics(study_.spec()).RequiredNames()),
        tickets_(
            options_.max_trials.value_or(std::numeric_limits<int64_t>::max())),
        tally_(options_.study,
               options_.max_trials.value_or(study_.spec().max_trials()),
               SingleObjective(study_.spec())),
        failures_(options_.early_failures, options_.max_consecutive_failures) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      base_env_.emplace_back(*e);
    }
  }

  absl::Status Run() {
    UpdateStatus();
    // Before the slots start: the guard is forked with no program's pipe
    // half-made.
    absl::StatusOr<std::unique_ptr<OrphanGuard>> guard = OrphanGuard::Start();
    if (guard.ok()) {
      guard_ = *std::move(guard);
    } else {
      console_.Err(absl::StrCat("warning: ", guard.status().message(),
                                "; a program's children may outlive a "
                                "killed worker"));
    }
    std::vector<std::thread> slots;
    for (int slot = 1; slot <= options_.parallel; ++slot) {
      slots.emplace_back([this, slot] { SlotLoop(slot); });
    }
    for (std::thread& t : slots) t.join();
    // Trials held by the early-failures watch, which never decided.
    if (StopSignals() > 0) {
      for (HeldTrial& held : TakeHeld()) {
        GiveBackHeld(held, absl::StrCat("worker interrupted by signal ",
                                        LastStopSignal()));
      }
    } else {
      SettleHeld();
    }

    absl::MutexLock lock(&mu_);
    std::string why = !fatal_.ok()               ? "stopped by an error"
                      : StopSignals() > 0        ? "interrupted"
                      : tally_.study_completed() ? "study budget spent"
                                                 : "--max-trials reached";
    std::string summary =
        absl::StrCat("worker done (", why, "): ", tally_.Progress());
    console_.Close();
    console_.Out(summary);
    if (!fatal_.ok()) return fatal_;
    if (StopSignals() > 0) {
      return absl::CancelledError(
          absl::StrCat("interrupted by signal ", LastStopSignal()));
    }
    const WorkerTally::Counts counts = tally_.counts();
    // Trials paused at a rung ran well: a worker that only paused some
    // (ASHA) has not failed.
    if (counts.completed + counts.paused == 0 &&
        counts.infeasible + counts.failed + counts.other > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no trial completed (", counts.infeasible, " infeasible, ",
          counts.failed, " failed, ", counts.other,
          " given back or left); see the trials' logs in ", options_.log_dir));
    }
    return absl::OkStatus();
  }

 private:
  bool Stopping() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return StopSignals() > 0 || !fatal_.ok();
  }

  void SetFatal(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_) {
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
    int holds = 0;
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
        // No trial to learn more from (the budget, or the parallel limit
        // that held trials may fill): the watch ends, its trials settle.
        if (HoldsTrials() && failures_.EndEarlyWatch()) SettleHeld();
        if (response->study_state() == v1::Study::COMPLETED) {
          tally_.SetStudyCompleted();
          break;
        }
        if (response->study_state() == v1::Study::PAUSED && !told_paused) {
          console_.Out(absl::StrCat("slot ", slot, ": study \"", options_.study,
                                    "\" is paused; waiting"));
          told_paused = true;
        }
        thread_local absl::BitGen bitgen;
        SleepUnlessStopping(BackoffDelay(++waits, kWaitInitial, kWaitMax,
                                         absl::Uniform(bitgen, 0.5, 1.0)));
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
      bool held = false;
      // PBT: an exploit restarts the program on the trial as it is then.
      // It goes on under the same lease, whose device clock runs on.
      std::optional<v1::Trial> restart;
      std::optional<Trial> kept_lease;
      absl::Status s =
          RunTrial(slot, client_id, trial, held, restart, kept_lease);
      while (s.ok() && restart.has_value()) {
        const v1::Trial exploited = *std::move(restart);
        restart.reset();
        s = RunTrial(slot, client_id, exploited, held, restart, kept_lease);
      }
      if (!s.ok()) {
        SetFatal(std::move(s));
        break;
      }
      if (held) {
        // The server answers a client id with the trial it holds: the next
        // one is asked for under another.
        client_id =
            absl::StrCat(client_.client_id(), "-", slot, "-held", ++holds);
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
    tally_.CountOther(trial.id());
    console_.Out(absl::StrCat(
        "trial ", trial.id(),
        done.ok() ? " given back: " : " left to its lease: ", reason,
        done.ok() ? "" : absl::StrCat(" (", done.status().message(), ")")));
  }

  // A trial whose program failed at once, held (its lease renewed) while
  // the early-failures watch decides between the environment and the
  // usual rule.
  struct HeldTrial {
    v1::Trial trial;
    Trial lease;
    TrialRun run;
    std::filesystem::path log_path;
    double elapsed = 0;
    double program_seconds = 0;
    int devices = 1;
  };

  bool HoldsTrials() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return !held_.empty();
  }

  std::vector<HeldTrial> TakeHeld() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    std::vector<HeldTrial> held = std::move(held_);
    held_.clear();
    return held;
  }

  // Settles every held trial by the usual rule (the watch ended otherwise).
  void SettleHeld() ABSL_LOCKS_EXCLUDED(mu_) {
    for (HeldTrial& held : TakeHeld()) {
      const std::optional<v1::Trial::State> settled =
          Settle(held.trial, held.run, held.elapsed, held.program_seconds,
                 held.devices, held.log_path);
      if (absl::Status s =
              failures_.CountFailureToRun(settled, held.run, held.log_path);
          !s.ok()) {
        SetFatal(std::move(s));
      }
    }
  }

  // Gives a held trial back to the queue, counting its device time.
  void GiveBackHeld(HeldTrial& held, const std::string& reason) {
    // Not the trial's doing, so it spends none of its retries: a worker
    // run again and again in a broken environment must not use them up.
    absl::Status status = held.lease.GiveBack(reason, /*preempted=*/true);
    std::ofstream log(held.log_path, std::ios::app);
    const std::string message = absl::StrCat(
        "trial ", held.trial.id(),
        status.ok() ? " given back: " : " left to its lease: ", reason,
        status.ok() ? "" : absl::StrCat(" (", status.message(), ")"));
    log << "[hypertune worker] " << message << std::endl;
    tally_.CountOther(held.trial.id());
    console_.Out(message);
    UpdateStatus();
  }

  // The GPUs of `slot`'s trials (--gpus, --gpus-per-trial); empty without
  // --gpus.
  std::vector<std::string> SlotGpus(int slot) const {
    if (options_.gpus.empty()) return {};
    const size_t per = static_cast<size_t>(options_.gpus_per_trial);
    const size_t first = static_cast<size_t>(slot - 1) * per;
    return std::vector<std::string>(options_.gpus.begin() + first,
                                    options_.gpus.begin() + first + per);
  }

  // Runs the trial's program and settles the trial, or holds it (`held`)
  // for the early-failures watch. Errors only for what stops the whole
  // worker (the program cannot be started). A PBT exploit (the trial took
  // another's checkpoint and new parameters) ends the program and sets
  // `restart` to the trial as it is now, to be run again, unsettled, under
  // `kept_lease` (which RunTrial uses, when set, instead of a new hold).
  absl::Status RunTrial(int slot, const std::string& client_id,
                        const v1::Trial& trial, bool& held,
                        std::optional<v1::Trial>& restart,
                        std::optional<Trial>& kept_lease) {
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
    // --wandb: holds the ${args_json_file} file until the trial ends.
    std::optional<WandbRun> wandb;
    if (options_.wandb) {
      absl::StatusOr<WandbRun> run =
          WandbRun::Prepare(options_.command, study_, trial.parameters(),
                            log_path.string() + ".args.json");
      if (!run.ok()) {
        GiveBack(trial, "the worker could not write ${args_json_file}");
        return run.status();
      }
      program.argv = wandb.emplace(*std::move(run)).argv();
    } else {
      for (const std::string& arg : options_.command) {
        program.argv.push_back(
            SubstituteParameters(arg, trial.parameters(), &study_.spec()));
      }
    }
    const std::vector<std::string> gpus = SlotGpus(slot);
    // What device-seconds count: the slot's GPUs, or one device.
    const int devices = gpus.empty() ? 1 : static_cast<int>(gpus.size());
    const ClientOptions& client_options = client_.options();
    std::vector<std::pair<std::string, std::string>> vars = {
        {"HYPERTUNE_SERVER", client_options.server},
        {"HYPERTUNE_STUDY", options_.study},
        {"HYPERTUNE_TRIAL_ID", absl::StrCat(id)},
        {"HYPERTUNE_LEASE_EPOCH", absl::StrCat(trial.lease_epoch())},
        {"HYPERTUNE_CLIENT_ID", client_id},
        {"HYPERTUNE_PARAMS", ParametersJson(trial.parameters())},
        // A trial handed over after a loss resumes from its checkpoint.
        {"HYPERTUNE_ATTEMPT", absl::StrCat(std::max(1, trial.attempt()))},
        {"HYPERTUNE_CHECKPOINT_URI", trial.checkpoint_uri()},
        {"HYPERTUNE_CHECKPOINT_STEP",
         absl::StrCat(
             trial.checkpoint_uri().empty() ? 0 : trial.checkpoint_step())},
        // Python buffers a piped stdout until exit: without this, a plain
        // print()'s intermediate metrics would reach the worker only at the
        // end, too late for early stopping and live curves.
        {"PYTHONUNBUFFERED", "1"}};
    if (!gpus.empty()) {
      vars.emplace_back("CUDA_VISIBLE_DEVICES", absl::StrJoin(gpus, ","));
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
    program.guard = guard_.get();
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
    tally_.ProgramStarted(id);
    UpdateStatus();

    Clock::time_point started = Clock::now();
    TrialRun run;
    int signals_passed_on = 0;
    // Renews the lease in the background while the program runs, carrying
    // its device-seconds.
    Trial lease = kept_lease.has_value() ? *std::move(kept_lease)
                                         : client_.Hold(trial, devices);
    kept_lease.reset();
    bool watch_checked = false;
    bool lease_checked = false;
    // Set when a report's answer stops (or pauses) the trial early.
    std::optional<std::string> stop_reason;
    // PBT: a report's answer (or a renewal) says the trial exploited since
    // this program started; set once the worker ends it to restart it.
    bool exploited = false;
    bool exploit_restart = false;

    // The last line that says what went wrong, for a failure's reason.
    auto note_line = [&](std::string_view line) {
      absl::string_view text = absl::StripAsciiWhitespace(
          absl::string_view(line.data(), line.size()));
      if (!text.empty()) run.last_line = std::string(text.substr(0, 200));
    };
    auto on_stdout = [&](std::string_view line) {
      log << line << '\n';
      console_.Out(
          absl::StrCat(prefix, absl::string_view(line.data(), line.size())));
      absl::StatusOr<std::optional<DirectiveLine>> directive =
          ParseDirectiveLine(line);
      if (!directive.ok()) {
        console_.Err(absl::StrCat(
            "warning: trial ", id,
            ": ignoring a malformed line: ", directive.status().message()));
        return;
      }
      if (directive->has_value()) {
        const DirectiveLine& d = **directive;
        if (d.kind == DirectiveLine::Kind::kInfeasible) {
          run.infeasible_reason = d.value;
        } else if (absl::Status s = lease.SetCheckpoint(d.value, d.step);
                   !s.ok()) {
          console_.Err(absl::StrCat("warning: trial ", id,
                                    ": cannot record checkpoint ", d.value,
                                    ": ", s.message()));
        }
        return;
      }
      absl::StatusOr<std::optional<MetricsLine>> parsed =
          ParseMetricsLine(line);
      if (!parsed.ok()) {
        console_.Err(absl::StrCat("warning: trial ", id,
                                  ": ignoring a malformed metrics line: ",
                                  parsed.status().message()));
        return;
      }
      if (!parsed->has_value()) {
        note_line(line);
        return;
      }
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
      if (updated.ok() && updated->exploits_size() > trial.exploits_size()) {
        exploited = true;
      }
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
      note_line(line);
      console_.Err(
          absl::StrCat(prefix, absl::string_view(line.data(), line.size())));
    };
    auto on_tick = [&] {
      if (!watch_checked &&
          Clock::now() - started >=
              std::chrono::duration<double>(kQuickFailureSeconds)) {
        // A program that runs this long can start: the early-failures
        // watch is over, and the trials it held settle as usual.
        watch_checked = true;
        if (failures_.EndEarlyWatch()) SettleHeld();
      }
      int signals = StopSignals();
      if (signals > signals_passed_on) {
        (*process)->Signal(signals >= 2 ? SIGKILL : LastStopSignal());
        signals_passed_on = signals;
        run.worker_signal = LastStopSignal();
      }
      if ((exploited || lease.latest_exploit() > trial.exploits_size()) &&
          !exploit_restart && !run.stop_requested) {
        exploit_restart = true;
        (*process)->Terminate();
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
    if (exploit_restart && run.worker_signal == 0 && !run.lease_lost) {
      absl::StatusOr<Trial> now = client_.GetTrial(options_.study, id);
      if (now.ok() && now->proto().state() == v1::Trial::ACTIVE &&
          now->proto().lease_epoch() == trial.lease_epoch() &&
          now->proto().exploits_size() > trial.exploits_size()) {
        const v1::Trial& t = now->proto();
        const v1::PbtExploit& e = t.exploits(t.exploits_size() - 1);
        const std::string message = absl::StrCat(
            "trial ", id, " exploited trial ", e.donor_trial_id(),
            "'s checkpoint (step ", e.checkpoint_step(), ") at step ", e.step(),
            ": restarting its program with ", ParametersText(t));
        log << "[hypertune worker] " << message << std::endl;
        console_.Out(message);
        tally_.ProgramEnded(id);
        kept_lease = lease;  // its device clock still running
        restart = t;
        return absl::OkStatus();
      }
    }
    // The devices are idle from here, whatever the trial's fate.
    lease.StopDeviceClock();
    tally_.ProgramEnded(id);
    const double program_seconds =
        std::chrono::duration<double>(Clock::now() - started).count();
    const double elapsed = ElapsedSeconds(trial, started);
    log.close();
    const EarlyVerdict verdict = failures_.JudgeEarly(run, program_seconds, id);
    if (verdict == EarlyVerdict::kHold) {
      const std::string message = absl::StrCat(
          "trial ", id, " failed at once (", ExitText(run.exit),
          "); held until the worker knows whether its first programs all "
          "fail alike (its environment) or not");
      std::ofstream(log_path, std::ios::app)
          << "[hypertune worker] " << message << std::endl;
      console_.Out(message);
      absl::MutexLock lock(&mu_);
      held_.push_back(HeldTrial{trial, std::move(lease), std::move(run),
                                log_path, elapsed, program_seconds, devices});
      held = true;
      return absl::OkStatus();
    }
    if (verdict == EarlyVerdict::kEnvironment) {
      const std::string reason =
          failures_.EarlyFailuresGiveBackReason(run.exit);
      std::vector<HeldTrial> all = TakeHeld();
      all.push_back(HeldTrial{trial, std::move(lease), run, log_path, elapsed,
                              program_seconds, devices});
      for (HeldTrial& held : all) GiveBackHeld(held, reason);
      SetFatal(failures_.EarlyFailuresError(run.exit, id, log_path));
      return absl::OkStatus();
    }
    const std::optional<v1::Trial::State> settled =
        Settle(trial, run, elapsed, program_seconds, devices, log_path);
    if (verdict == EarlyVerdict::kEnded) SettleHeld();
    if (absl::Status s = failures_.CountFailureToRun(settled, run, log_path);
        !s.ok()) {
      SetFatal(std::move(s));
    }
    return absl::OkStatus();
  }

  // Seconds since the trial started (server's start time when known).
  static double ElapsedSeconds(const v1::Trial& trial,
                               Clock::time_point program_start) {
    double program =
        std::chrono::duration<double>(Clock::now() - program_start).count();
    if (trial.start_time_ms() <= 0) return program;
    return std::max(program, (NowMs() - trial.start_time_ms()) / 1000.0);
  }

  // Completes, fails, marks infeasible, gives back or leaves the trial after
  // its program ended (DecideOutcome), appending what it did to the log at
  // `log_path`. `elapsed`: since the trial started; `program_seconds`:
  // this program's run, on `devices` devices. Returns the state the trial
  // was left in by this worker, or nullopt when someone else settled it or
  // it was left alone.
  std::optional<v1::Trial::State> Settle(
      const v1::Trial& trial, const TrialRun& run, double elapsed,
      double program_seconds, int devices,
      const std::filesystem::path& log_path) {
    std::ofstream log(log_path, std::ios::app);
    const int64_t id = trial.id();
    const double device_seconds = program_seconds * devices;
    std::string how = ExitText(run.exit);
    std::string took = absl::StrCat(FormatShort(elapsed), " s");

    // The program may have settled the trial itself through the SDK.
    absl::StatusOr<Trial> stored = client_.GetTrial(options_.study, id);
    if (stored.ok()) {
      const v1::Trial& now = stored->proto();
      if (now.state() == v1::Trial::PAUSED &&
          now.lease_epoch() == trial.lease_epoch()) {
        // Paused at a rung: the pause stands, and the time it ran counts.
        v1::CompleteTrialRequest count;
        count.set_study_name(options_.study);
        count.set_trial_id(id);
        count.set_lease_epoch(trial.lease_epoch());
        count.set_device_seconds(device_seconds);
        absl::StatusOr<v1::Trial> counted = client_.CompleteTrial(count);
        if (!counted.ok()) {
          console_.Err(absl::StrCat("warning: trial ", id,
                                    ": its device time is not recorded: ",
                                    counted.status().message()));
        }
        Record(counted.ok() ? *counted : now,
               absl::StrCat("trial ", id, " PAUSED at a rung: ",
                            now.stop_reason(), " (", how, ", ", took, ")"),
               log);
        return std::nullopt;
      }
      if (now.state() != v1::Trial::ACTIVE &&
          now.state() != v1::Trial::STOPPING) {
        // Settled by the program: the grant's time up to its end counts
        // (its heartbeats left up to an interval out).
        if (now.lease_epoch() == trial.lease_epoch()) {
          CountLateDeviceSeconds(trial, device_seconds);
        }
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

    const TrialOutcome outcome = DecideOutcome(run, required_metrics_);
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
    request.set_device_seconds(device_seconds);
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
    } else if (outcome.kind == TrialOutcome::Kind::kFailed) {
      request.set_failed(true);
      request.set_failure_reason(outcome.reason);
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
      tally_.CountOther(id);
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

  // Reports `device_seconds`, all its grant used, for `trial`, which its
  // program settled under that grant.
  void CountLateDeviceSeconds(const v1::Trial& trial, double device_seconds) {
    v1::HeartbeatRequest request;
    request.set_study_name(options_.study);
    request.set_trial_id(trial.id());
    request.set_lease_epoch(trial.lease_epoch());
    request.set_client_id(trial.client_id());
    request.set_device_seconds(device_seconds);
    absl::StatusOr<v1::HeartbeatResponse> counted = client_.Heartbeat(request);
    if (!counted.ok()) {
      console_.Err(absl::StrCat("warning: trial ", trial.id(),
                                ": the last of its device time is not "
                                "recorded: ",
                                counted.status().message()));
    }
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
    if (counted) {
      tally_.CountSettled(trial);
    } else {
      tally_.CountOther(trial.id());
    }
    console_.Out(message);
    UpdateStatus();
  }

  void UpdateStatus() { console_.Status(tally_.Progress()); }

  WorkerOptions options_;
  Client client_;
  v1::Study study_;
  Console& console_;
  // The metrics a result needs.
  const std::vector<std::string> required_metrics_;
  std::vector<std::string> base_env_;
  // Trials left to take under --max-trials.
  std::atomic<int64_t> tickets_;
  WorkerTally tally_;
  FailureWatch failures_;
  // Ends the programs' process groups should the worker die; null if it
  // could not be started.
  std::unique_ptr<OrphanGuard> guard_;

  absl::Mutex mu_;
  // The first error that stops the whole worker.
  absl::Status fatal_ ABSL_GUARDED_BY(mu_);
  // Trials the early-failures watch holds.
  std::vector<HeldTrial> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<WorkerOptions> ParseWorkerArgs(const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args,
                                                {{"parallel"},
                                                 {"gpus"},
                                                 {"gpus-per-trial"},
                                                 {"max-trials"},
                                                 {"timeout"},
                                                 {"log-dir"},
                                                 {"max-consecutive-failures"},
                                                 {"early-failures"},
                                                 {"wandb", false}},
                                                /*allow_separator=*/true);
  if (!parsed.ok()) return parsed.status();
  if (parsed->positional.size() != 1) {
    return UsageError(parsed->positional.empty()
                          ? "worker needs a study NAME"
                          : "worker takes one study NAME; put the command "
                            "after \"--\"");
  }
  WorkerOptions options;
  options.wandb = parsed->Has("wandb");
  if (options.wandb && parsed->has_separator) {
    return UsageError("--wandb runs the sweep's command: give no \"--\" CMD");
  }
  if (parsed->rest.empty() && !options.wandb) {
    return UsageError("worker needs a command after \"--\"");
  }
  options.study = parsed->positional[0];
  // The default log folder is named after the study: it must stay a folder
  // under hypertune-logs/ (the server refuses such names too).
  if (options.study.empty() || options.study == "." || options.study == ".." ||
      options.study.find('/') != std::string::npos) {
    return UsageError(
        absl::StrCat("worker: \"", options.study, "\" is not a study name"));
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
    absl::StatusOr<int64_t> per_trial = parsed->GetInt("gpus-per-trial", 1, 1);
    if (!per_trial.ok()) return per_trial.status();
    if (options.gpus.size() % static_cast<size_t>(*per_trial) != 0) {
      return UsageError(absl::StrCat(
          "--gpus-per-trial ", *per_trial, ": the ", options.gpus.size(),
          " GPUs of --gpus do not make groups of ", *per_trial));
    }
    options.gpus_per_trial = static_cast<int>(*per_trial);
    const int64_t groups =
        static_cast<int64_t>(options.gpus.size()) / *per_trial;
    if (parsed->Has("parallel") && *parallel != groups) {
      return UsageError(
          "--parallel: --gpus runs one trial per GPU (or per group of "
          "--gpus-per-trial); give one or the other");
    }
    options.parallel = static_cast<int>(groups);
  } else if (parsed->Has("gpus-per-trial")) {
    return UsageError("--gpus-per-trial: needs --gpus");
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
  if (!options->wandb) {
    if (absl::Status s = CheckProgram(options->command[0]); !s.ok()) return s;
  }
  ClientOptions client_options = context.options;
  client_options.max_attempts =
      std::max(client_options.max_attempts, kWorkerMaxAttempts);
  client_options.heartbeats = true;
  Client client(client_options);
  absl::StatusOr<v1::Study> study = client.GetStudy(options->study);
  if (!study.ok()) return study.status();
  if (options->wandb) {
    absl::StatusOr<std::vector<std::string>> command =
        WandbCommandTemplate(*study);
    if (!command.ok()) return command.status();
    options->command = *std::move(command);
    if (absl::Status s = CheckProgram(options->command[0]); !s.ok()) return s;
  } else if (absl::Status s =
                 CheckPlaceholders(options->command, study->spec());
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
  StopSignalScope signals;
  Worker worker(*std::move(options), std::move(client), *std::move(study),
                console);
  return worker.Run();
}

}  // namespace hypertune::cli
