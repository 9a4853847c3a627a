#include "cli/launch_commands.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli/args.h"
#include "cli/worker/subprocess.h"
#include "cli/worker/worker.h"
#include "cli/worker/worker_protocol.h"

extern char** environ;

namespace hypertune::cli {

const char kLaunchUsage[] =
    "usage: hypertune launch slurm NAME --workers N [--gpus-per-worker G]\n"
    "           [--time T] [--partition P] [--notice S] [--sbatch-arg ARG]...\n"
    "           [--script-dir DIR] [--dry-run] [--log-dir DIR] [--timeout S]\n"
    "           [--max-trials M] [--max-consecutive-failures K]\n"
    "           -- CMD [ARG...]\n"
    "\n"
    "Submits a Slurm job array of N tasks, each running\n"
    "  hypertune worker NAME --parallel 1 [worker flags] -- CMD [ARG...]\n"
    "(see `hypertune worker --help`: `{param}` placeholders, the trial's\n"
    "environment, the metrics lines). Prints the job id on stdout.\n"
    "\n"
    "The batch script goes to DIR/worker.sh (default ./hypertune-slurm/NAME),\n"
    "each task's output to DIR/worker-<job>_<task>.out, and the trials' logs\n"
    "to the worker's --log-dir (default ./hypertune-logs/NAME). The tasks\n"
    "start in the current folder (sbatch --chdir) and run this hypertune\n"
    "program by its absolute path: the folder and the program must be on a\n"
    "file system the compute nodes share. sbatch gets\n"
    "  --array=0-(N-1) --job-name=hypertune-NAME --signal=B:TERM@S --requeue\n"
    "  [--time=T] [--partition=P] [--gres=gpu:G]\n"
    "then each --sbatch-arg (one argument each, e.g. --sbatch-arg=--mem=8G),\n"
    "which may override them. T is Slurm's time format (M, M:S, H:M:S, D-H,\n"
    "D-H:M, D-H:M:S, UNLIMITED).\n"
    "\n"
    "Preemption: Slurm sends SIGTERM S seconds (--notice, default 120)\n"
    "before the time limit, and on preemption. The script execs the worker,\n"
    "so the worker gets it: it passes it on to CMD, gives the trial back\n"
    "with its checkpoint (\"worker preempted\") and exits; another task\n"
    "resumes the trial. --requeue lets Slurm requeue a preempted task.\n"
    "\n"
    "The workers reach the server at the address this command uses (--server,\n"
    "else $HYPERTUNE_SERVER, else 127.0.0.1:50051; a loopback address only\n"
    "serves workers on this machine). The token (--token or\n"
    "$HYPERTUNE_TOKEN) is never written in the script nor on a command line:\n"
    "it travels in the job's environment as HYPERTUNE_TOKEN (sbatch copies\n"
    "the submitting environment; with an --export of your own, include it).\n"
    "--dry-run prints the script and the sbatch command and submits nothing.\n";

namespace {

// A --signal time is at most this (sbatch's limit).
constexpr int kMaxNoticeSeconds = 65535;
// How long sbatch may take to answer.
constexpr std::chrono::seconds kSbatchTimeout{120};

// The worker's flags the launcher passes through, each with a value.
constexpr const char* kWorkerFlags[] = {"log-dir", "timeout", "max-trials",
                                        "max-consecutive-failures"};

// The script's comments hold user text; a line break there would end the
// comment.
std::string OneLine(absl::string_view text) {
  return absl::StrReplaceAll(text, {{"\n", " "}, {"\r", " "}});
}

// '%' starts a Slurm file name pattern; "%%" is a '%'.
std::string EscapeSlurmPattern(absl::string_view path) {
  return absl::StrReplaceAll(path, {{"%", "%%"}});
}

// This program's absolute path, for the tasks to run.
std::string SelfPath() {
  std::error_code error;
  std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string("hypertune") : self.string();
}

std::string Absolute(const std::string& path) {
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(path, error);
  return error ? path : absolute.lexically_normal().string();
}

}  // namespace

absl::StatusOr<int64_t> ParseSlurmTime(absl::string_view text) {
  const std::string upper = absl::AsciiStrToUpper(text);
  if (upper == "INFINITE" || upper == "UNLIMITED") return -1;
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "--time: \"", text,
        "\" is not a Slurm time (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S or "
        "UNLIMITED)"));
  };
  auto number = [](absl::string_view part, int64_t* value) {
    return !part.empty() && part.size() <= 9 &&
           std::all_of(part.begin(), part.end(), absl::ascii_isdigit) &&
           absl::SimpleAtoi(part, value);
  };
  int64_t days = 0;
  absl::string_view clock = text;
  const size_t dash = text.find('-');
  const bool has_days = dash != absl::string_view::npos;
  if (has_days) {
    if (!number(text.substr(0, dash), &days)) return bad();
    clock = text.substr(dash + 1);
  }
  std::vector<absl::string_view> parts = absl::StrSplit(clock, ':');
  if (parts.size() > 3) return bad();
  std::vector<int64_t> values;
  for (absl::string_view part : parts) {
    int64_t value = 0;
    if (!number(part, &value)) return bad();
    values.push_back(value);
  }
  int64_t seconds = 0;
  if (has_days) {
    // D-H, D-H:M, D-H:M:S.
    seconds = days * 86400 + values[0] * 3600;
    if (values.size() > 1) seconds += values[1] * 60;
    if (values.size() > 2) seconds += values[2];
  } else if (values.size() == 1) {
    seconds = values[0] * 60;
  } else if (values.size() == 2) {
    seconds = values[0] * 60 + values[1];
  } else {
    seconds = values[0] * 3600 + values[1] * 60 + values[2];
  }
  // As in Slurm, 0 asks for no limit.
  return seconds == 0 ? -1 : seconds;
}

std::string ShellQuote(absl::string_view arg) {
  const bool plain =
      !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
        return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
               std::strchr("@%+=:,./_-", c) != nullptr;
      });
  if (plain) return std::string(arg);
  return absl::StrCat("'", absl::StrReplaceAll(arg, {{"'", "'\\''"}}), "'");
}

std::string ShellJoin(const std::vector<std::string>& words) {
  return absl::StrJoin(words, " ", [](std::string* out, const std::string& w) {
    out->append(ShellQuote(w));
  });
}

bool IsLoopbackServer(absl::string_view server) {
  for (absl::string_view address : absl::StrSplit(server, ',')) {
    address = absl::StripAsciiWhitespace(address);
    absl::string_view host = address;
    if (absl::StartsWith(host, "[")) {
      host = host.substr(1, host.find(']') - 1);
    } else if (std::count(host.begin(), host.end(), ':') == 1) {
      host = host.substr(0, host.find(':'));
    }
    const bool loopback =
        host == "localhost" || absl::StartsWith(host, "127.") || host == "::1";
    if (!loopback) return false;
  }
  return true;
}

absl::StatusOr<SlurmLaunchOptions> ParseSlurmLaunchArgs(const Args& args) {
  std::vector<FlagSpec> flags = {{"workers"},    {"gpus-per-worker"},
                                 {"time"},       {"partition"},
                                 {"notice"},     {"sbatch-arg", true, true},
                                 {"script-dir"}, {"dry-run", false}};
  for (const char* flag : kWorkerFlags) flags.push_back({flag});
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(args, flags, /*allow_separator=*/true);
  if (!parsed.ok()) return parsed.status();
  if (parsed->positional.empty() || parsed->positional[0] != "slurm") {
    return UsageError(parsed->positional.empty()
                          ? "launch needs a scheduler: slurm"
                          : absl::StrCat("launch: unknown scheduler \"",
                                         parsed->positional[0],
                                         "\" (slurm is the one)"));
  }
  if (parsed->positional.size() != 2) {
    return UsageError(parsed->positional.size() == 1
                          ? "launch slurm needs a study NAME"
                          : "launch slurm takes one study NAME; put the "
                            "command after \"--\"");
  }
  SlurmLaunchOptions options;
  options.study = parsed->positional[1];
  if (!parsed->has_separator || parsed->rest.empty()) {
    return UsageError(
        "launch slurm needs the worker's command after \"--\" (-- CMD ARGS)");
  }
  options.command = parsed->rest;
  if (!parsed->Has("workers")) {
    return UsageError("launch slurm needs --workers N (the array's tasks)");
  }
  absl::StatusOr<int64_t> workers = parsed->GetInt("workers", 0, 1);
  if (!workers.ok()) return workers.status();
  if (*workers > 1'000'000) return UsageError("--workers: at most 1000000");
  options.workers = static_cast<int>(*workers);
  absl::StatusOr<int64_t> gpus = parsed->GetInt("gpus-per-worker", 0, 0);
  if (!gpus.ok()) return gpus.status();
  if (*gpus > 1024) return UsageError("--gpus-per-worker: at most 1024");
  options.gpus_per_worker = static_cast<int>(*gpus);
  absl::StatusOr<int64_t> notice = parsed->GetInt("notice", 120, 1);
  if (!notice.ok()) return notice.status();
  if (*notice > kMaxNoticeSeconds) {
    return UsageError(
        absl::StrCat("--notice: at most ", kMaxNoticeSeconds, " seconds"));
  }
  options.notice_seconds = static_cast<int>(*notice);
  if (std::optional<std::string> time = parsed->Get("time")) {
    absl::StatusOr<int64_t> seconds = ParseSlurmTime(*time);
    if (!seconds.ok()) {
      return UsageError(std::string(seconds.status().message()));
    }
    options.time = *time;
    options.time_seconds = *seconds;
    if (*seconds > 0 && options.notice_seconds >= *seconds) {
      return UsageError(absl::StrCat(
          "--notice: ", options.notice_seconds,
          " s is not shorter than --time ", *time, " (", *seconds,
          " s); the worker would be told to stop before it starts"));
    }
  }
  options.partition = parsed->Get("partition").value_or("");
  if (parsed->Has("partition") && options.partition.empty()) {
    return UsageError("--partition: empty");
  }
  options.sbatch_args = parsed->GetAll("sbatch-arg");
  for (const std::string& arg : options.sbatch_args) {
    if (arg.empty()) return UsageError("--sbatch-arg: empty");
  }
  options.dry_run = parsed->Has("dry-run");
  options.script_dir =
      parsed->Get("script-dir")
          .value_or((std::filesystem::path("hypertune-slurm") / options.study)
                        .string());
  if (options.script_dir.empty()) return UsageError("--script-dir: empty");

  // The worker's command line, checked as the worker will check it.
  options.worker_args = {options.study, "--parallel", "1"};
  for (const char* flag : kWorkerFlags) {
    if (std::optional<std::string> value = parsed->Get(flag)) {
      options.worker_args.push_back(absl::StrCat("--", flag));
      options.worker_args.push_back(*value);
    }
  }
  options.worker_args.push_back("--");
  options.worker_args.insert(options.worker_args.end(), options.command.begin(),
                             options.command.end());
  absl::StatusOr<WorkerOptions> worker = ParseWorkerArgs(options.worker_args);
  if (!worker.ok()) return worker.status();
  return options;
}

std::string SlurmScriptPath(const SlurmJobContext& context) {
  return (std::filesystem::path(context.script_dir) / "worker.sh").string();
}

std::string SlurmOutputPattern(const SlurmJobContext& context) {
  return absl::StrCat(EscapeSlurmPattern(context.script_dir),
                      "/worker-%A_%a.out");
}

std::vector<std::string> SbatchCommand(const SlurmLaunchOptions& options,
                                       const SlurmJobContext& context) {
  std::vector<std::string> argv = {
      "sbatch",
      "--parsable",
      absl::StrCat("--job-name=hypertune-", options.study),
      absl::StrCat("--array=0-", options.workers - 1),
      absl::StrCat("--signal=B:TERM@", options.notice_seconds),
      "--requeue",
      absl::StrCat("--chdir=", context.work_dir),
      absl::StrCat("--output=", SlurmOutputPattern(context))};
  if (!options.time.empty()) {
    argv.push_back(absl::StrCat("--time=", options.time));
  }
  if (!options.partition.empty()) {
    argv.push_back(absl::StrCat("--partition=", options.partition));
  }
  if (options.gpus_per_worker > 0) {
    argv.push_back(absl::StrCat("--gres=gpu:", options.gpus_per_worker));
  }
  argv.insert(argv.end(), options.sbatch_args.begin(),
              options.sbatch_args.end());
  argv.push_back(SlurmScriptPath(context));
  return argv;
}

std::string SlurmBatchScript(const SlurmLaunchOptions& options,
                             const SlurmJobContext& context) {
  std::vector<std::string> exec = {context.hypertune};
  exec.insert(exec.end(), context.global_flags.begin(),
              context.global_flags.end());
  exec.push_back("worker");
  exec.insert(exec.end(), options.worker_args.begin(),
              options.worker_args.end());
  const std::string notice = absl::StrCat(options.notice_seconds);
  return absl::StrCat(
      "#!/bin/bash\n"
      "# Written by `hypertune launch slurm` for study ",
      OneLine(options.study),
      ": one `hypertune worker`\n"
      "# per task of a Slurm job array, submitted with\n"
      "#   ",
      OneLine(ShellJoin(SbatchCommand(options, context))),
      "\n"
      "#\n"
      "# Slurm sends SIGTERM to this batch shell (--signal=B:TERM@",
      notice, ") ", notice,
      " s before\n"
      "# the time limit, and to every process of the job on preemption. exec\n"
      "# makes the worker this shell's process, so the worker gets it: it "
      "passes\n"
      "# it on to the trial's program, gives the trial back with its "
      "checkpoint\n"
      "# (\"worker preempted\") and exits; another task resumes the trial.\n"
      "# No token is written here: the worker reads HYPERTUNE_TOKEN from the\n"
      "# job's environment, which sbatch copies from the submitting one.\n"
      "\n"
      "# A launch from inside a trial must not hand its trial to the "
      "workers.\n"
      "unset HYPERTUNE_TRIAL_ID HYPERTUNE_LEASE_EPOCH HYPERTUNE_STUDY "
      "HYPERTUNE_PARAMS\n"
      "# Trials show which task holds them (the worker appends its slot).\n"
      "export HYPERTUNE_CLIENT_ID=\"slurm-${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:"
      "-0}}_${SLURM_ARRAY_TASK_ID:-0}-$(hostname -s 2>/dev/null)-$$\"\n"
      "echo \"[hypertune launch] task ${SLURM_ARRAY_JOB_ID:-?}_"
      "${SLURM_ARRAY_TASK_ID:-?} (job ${SLURM_JOB_ID:-?}, restart "
      "${SLURM_RESTART_COUNT:-0}) on $(hostname), worker pid $$\"\n"
      "exec ",
      ShellJoin(exec), "\n");
}

absl::Status RunLaunchCommand(const CommandContext& context, const Args& args) {
  absl::StatusOr<SlurmLaunchOptions> options = ParseSlurmLaunchArgs(args);
  if (!options.ok()) return options.status();

  // The study must exist and know every placeholder before N workers start.
  absl::StatusOr<v1::Study> study = context.client.GetStudy(options->study);
  if (!study.ok()) return study.status();
  if (absl::Status s = CheckPlaceholders(options->command, study->spec());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckProgram(options->command[0]); !s.ok()) {
    context.err << "warning: " << s.message()
                << " here; the workers fail unless the compute nodes have "
                   "it\n";
  }

  const ClientOptions& resolved = context.client.options();
  SlurmJobContext job;
  job.hypertune = SelfPath();
  job.global_flags = {"--server", resolved.server};
  for (const auto& [flag, value] :
       {std::pair{"--tls-ca", &resolved.tls_ca},
        std::pair{"--tls-cert", &resolved.tls_cert},
        std::pair{"--tls-key", &resolved.tls_key}}) {
    if (!value->empty()) {
      job.global_flags.push_back(flag);
      job.global_flags.push_back(Absolute(*value));
    }
  }
  std::error_code error;
  job.work_dir = std::filesystem::current_path(error).string();
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read the current folder: ", error.message()));
  }
  job.script_dir = Absolute(options->script_dir);
  if (IsLoopbackServer(resolved.server)) {
    context.err << "warning: the server address " << resolved.server
                << " is a loopback address: only workers on this machine "
                   "reach it (give --server HOST:PORT that the compute nodes "
                   "reach)\n";
  }
  const std::string script = SlurmBatchScript(*options, job);
  const std::vector<std::string> sbatch = SbatchCommand(*options, job);
  if (options->dry_run) {
    context.out << "# " << SlurmScriptPath(job) << "\n"
                << script << "\n# submitted with:\n"
                << ShellJoin(sbatch) << "\n";
    return absl::OkStatus();
  }

  if (!CheckProgram("sbatch").ok()) {
    return absl::FailedPreconditionError(
        "sbatch is not on PATH: install Slurm's programs (Debian: apt-get "
        "install slurm-wlm) or run this on the cluster's login node");
  }
  std::filesystem::create_directories(job.script_dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("--script-dir: cannot create \"", job.script_dir,
                     "\": ", error.message()));
  }
  const std::string script_path = SlurmScriptPath(job);
  {
    std::ofstream file(script_path, std::ios::trunc);
    file << script;
    file.close();
    if (!file) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot write the batch script ", script_path));
    }
  }
  chmod(script_path.c_str(), 0755);

  SubprocessOptions run;
  run.argv = sbatch;
  std::vector<std::string> base;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    base.emplace_back(*e);
  }
  // The token reaches the tasks through the job's environment only.
  std::vector<std::pair<std::string, std::string>> vars;
  if (!resolved.token.empty())
    vars.emplace_back("HYPERTUNE_TOKEN", resolved.token);
  run.env = ProgramEnvironment(base, vars);
  run.timeout = kSbatchTimeout;
  absl::StatusOr<std::unique_ptr<Subprocess>> process = Subprocess::Start(run);
  if (!process.ok()) return process.status();
  std::vector<std::string> out_lines;
  std::vector<std::string> err_lines;
  ProgramExit exit = (*process)->Wait(
      [&](std::string_view line) { out_lines.emplace_back(line); },
      [&](std::string_view line) { err_lines.emplace_back(line); }, [] {},
      std::chrono::milliseconds(200));
  if (exit.signaled || exit.code != 0 || out_lines.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "sbatch ",
        exit.timed_out  ? "did not answer in time"
        : exit.signaled ? absl::StrCat("was killed by signal ", exit.code)
                        : absl::StrCat("failed (exit status ", exit.code, ")"),
        err_lines.empty() ? "" : ": ", absl::StrJoin(err_lines, "\n"),
        "; the command was: ", ShellJoin(sbatch)));
  }
  // --parsable prints "JOBID" or "JOBID;CLUSTER".
  std::string job_id(
      absl::StripAsciiWhitespace(absl::string_view(out_lines.back())
                                     .substr(0, out_lines.back().find(';'))));
  for (const std::string& line : err_lines) context.err << line << "\n";
  context.out << job_id << "\n";
  context.out.flush();
  context.err << "submitted Slurm job array " << job_id << ": "
              << options->workers << " worker"
              << (options->workers == 1 ? "" : "s") << " for study "
              << options->study << "\n  script: " << script_path
              << "\n  output: " << job.script_dir << "/worker-" << job_id
              << "_<task>.out\n  watch: squeue -j " << job_id
              << "; cancel: scancel " << job_id << "\n";
  return absl::OkStatus();
}

}  // namespace hypertune::cli
