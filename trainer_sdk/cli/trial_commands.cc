// `hypertune trials|suggest|report|complete|heartbeat`.
#include <algorithm>
#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "trainer_sdk/cli/args.h"
#include "trainer_sdk/cli/commands.h"
#include "trainer_sdk/cli/format.h"
#include "trainer_sdk/cli/worker_protocol.h"

namespace hypertune::cli {

const char kTrialsUsage[] =
    "usage: hypertune trials NAME [--state S]... [--format table|json|csv]\n"
    "\n"
    "Lists the trials of study NAME, all pages. --state keeps only trials in\n"
    "the given states (repeat it or give a comma-separated list): REQUESTED,\n"
    "ACTIVE, STOPPING, PAUSED, COMPLETED, STOPPED, INFEASIBLE, FAILED.\n"
    "CSV columns: id,state,<parameters>,<final metrics>,step,elapsed_seconds,\n"
    "client_id,infeasible_reason.\n";

const char kSuggestUsage[] =
    "usage: hypertune suggest NAME [--count K] [--client-id ID]\n"
    "\n"
    "Asks for K (default 1) trials held by ID (default: this host and\n"
    "process) and prints the SuggestTrialsResponse as JSON. No trials with\n"
    "study_state COMPLETED: the budget is spent; with ACTIVE: the study is at\n"
    "its parallel limit, ask again later.\n";

const char kReportUsage[] =
    "usage: hypertune report NAME TRIAL_ID --step N [--epoch E] "
    "METRIC=VALUE...\n"
    "\n"
    "Records an intermediate measurement of a trial. --epoch is the lease\n"
    "epoch to act under (default: the trial's current one).\n";

const char kCompleteUsage[] =
    "usage: hypertune complete NAME TRIAL_ID [--step N] [--epoch E] "
    "METRIC=VALUE...\n"
    "       hypertune complete NAME TRIAL_ID [--epoch E] --infeasible REASON\n"
    "       hypertune complete NAME TRIAL_ID [--epoch E] --worker-failed "
    "REASON\n"
    "\n"
    "Completes a trial with its final metrics (at step N, default the latest\n"
    "reported), or marks it infeasible (its parameters are bad), or gives it\n"
    "back because its worker failed (the trial is queued again, keeping its\n"
    "measurements and checkpoint, while it has retries left; else FAILED).\n"
    "--epoch is the lease epoch to act under (default: the trial's current\n"
    "one).\n";

const char kHeartbeatUsage[] =
    "usage: hypertune heartbeat NAME TRIAL_ID [--epoch E] [--checkpoint URI]\n"
    "\n"
    "Renews the lease of a running trial, optionally recording the URI of a\n"
    "checkpoint to resume it from, and prints the HeartbeatResponse as JSON\n"
    "(should_stop: the server asks it to stop early). --epoch is the lease\n"
    "epoch to act under (default: the trial's current one).\n";

namespace {

absl::Status Print(const CommandContext& context,
                   const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = ToJson(message);
  if (!json.ok()) return json.status();
  context.out << *json;
  return absl::OkStatus();
}

// NAME TRIAL_ID at the head of the positional arguments.
absl::Status StudyAndTrial(const ParsedArgs& parsed, const char* command,
                           std::string* study, int64_t* trial_id) {
  if (parsed.positional.size() < 2) {
    return UsageError(absl::StrCat(command, " needs NAME and TRIAL_ID"));
  }
  *study = parsed.positional[0];
  if (!absl::SimpleAtoi(parsed.positional[1], trial_id) || *trial_id < 1) {
    return UsageError(absl::StrCat("TRIAL_ID: \"", parsed.positional[1],
                                   "\" is not a trial id (an integer >= 1)"));
  }
  return absl::OkStatus();
}

// The seconds since `trial` started by the local clock, 0 if it has not.
double SecondsSinceStart(const v1::Trial& trial) {
  if (trial.start_time_ms() <= 0) return 0.0;
  int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  return std::max<int64_t>(0, now_ms - trial.start_time_ms()) / 1000.0;
}

int64_t LatestStep(const v1::Trial& trial) {
  int64_t step = 0;
  for (const v1::Measurement& m : trial.measurements()) {
    step = std::max(step, m.step());
  }
  return step;
}

}  // namespace

absl::Status RunTrialsCommand(const CommandContext& context, const Args& args) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(args, {{"state", true, true}, {"format"}});
  if (!parsed.ok()) return parsed.status();
  if (parsed->positional.size() != 1) {
    return UsageError("trials takes one study NAME");
  }
  const std::string& name = parsed->positional[0];
  absl::StatusOr<std::vector<v1::Trial::State>> states =
      ParseTrialStates(parsed->GetAll("state"));
  if (!states.ok()) return states.status();
  absl::StatusOr<OutputFormat> format = ParseFormat(
      parsed->Get("format"), OutputFormat::kTable,
      {OutputFormat::kTable, OutputFormat::kJson, OutputFormat::kCsv});
  if (!format.ok()) return format.status();

  absl::StatusOr<std::vector<v1::Trial>> trials =
      context.client.ListAllTrials(name, *states);
  if (!trials.ok()) return trials.status();
  if (*format == OutputFormat::kJson) {
    v1::ListTrialsResponse all;
    for (v1::Trial& trial : *trials) *all.add_trials() = std::move(trial);
    return Print(context, all);
  }
  // The study gives the column order of parameters and metrics.
  absl::StatusOr<v1::Study> study = context.client.GetStudy(name);
  if (!study.ok()) return study.status();
  if (*format == OutputFormat::kCsv) {
    context.out << FormatCsv(TrialGrid(&*study, *trials, GridStyle::kCsv));
  } else if (trials->empty()) {
    context.out << "no trials\n";
  } else {
    context.out << FormatTable(TrialGrid(&*study, *trials, GridStyle::kTable));
  }
  return absl::OkStatus();
}

absl::Status RunSuggestCommand(const CommandContext& context,
                               const Args& args) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(args, {{"count"}, {"client-id"}});
  if (!parsed.ok()) return parsed.status();
  if (parsed->positional.size() != 1) {
    return UsageError("suggest takes one study NAME");
  }
  absl::StatusOr<int64_t> count = parsed->GetInt("count", 1, 1);
  if (!count.ok()) return count.status();
  if (*count > 1000) return UsageError("--count: at most 1000");
  absl::StatusOr<v1::SuggestTrialsResponse> response = context.client.Suggest(
      parsed->positional[0], static_cast<int>(*count),
      parsed->Get("client-id").value_or(""));
  if (!response.ok()) return response.status();
  return Print(context, *response);
}

absl::Status RunReportCommand(const CommandContext& context, const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {{"step"}, {"epoch"}});
  if (!parsed.ok()) return parsed.status();
  std::string study;
  int64_t trial_id = 0;
  if (absl::Status s = StudyAndTrial(*parsed, "report", &study, &trial_id);
      !s.ok()) {
    return s;
  }
  if (!parsed->Has("step")) return UsageError("report needs --step N");
  absl::StatusOr<int64_t> step = parsed->GetInt("step", 0, 0);
  if (!step.ok()) return step.status();
  absl::StatusOr<int64_t> epoch = parsed->GetInt("epoch", 0, 0);
  if (!epoch.ok()) return epoch.status();
  absl::StatusOr<Metrics> metrics = ParseMetricAssignments(
      Args(parsed->positional.begin() + 2, parsed->positional.end()));
  if (!metrics.ok()) return AsUsageError(metrics.status());

  absl::StatusOr<Trial> trial = context.client.GetTrial(study, trial_id);
  if (!trial.ok()) return trial.status();
  v1::AddMeasurementRequest request;
  request.set_study_name(study);
  request.set_trial_id(trial_id);
  request.set_lease_epoch(parsed->Has("epoch") ? *epoch
                                               : trial->proto().lease_epoch());
  v1::Measurement* m = request.mutable_measurement();
  m->set_step(*step);
  m->set_elapsed_seconds(SecondsSinceStart(trial->proto()));
  m->mutable_metrics()->insert(metrics->begin(), metrics->end());
  absl::StatusOr<v1::Trial> updated = context.client.AddMeasurement(request);
  if (!updated.ok()) return updated.status();
  return Print(context, *updated);
}

absl::Status RunCompleteCommand(const CommandContext& context,
                                const Args& args) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(args, {{"step"}, {"epoch"}, {"infeasible"}, {"worker-failed"}});
  if (!parsed.ok()) return parsed.status();
  std::string study;
  int64_t trial_id = 0;
  if (absl::Status s = StudyAndTrial(*parsed, "complete", &study, &trial_id);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<int64_t> epoch = parsed->GetInt("epoch", 0, 0);
  if (!epoch.ok()) return epoch.status();
  absl::StatusOr<int64_t> step = parsed->GetInt("step", 0, 0);
  if (!step.ok()) return step.status();
  Args assignments(parsed->positional.begin() + 2, parsed->positional.end());
  std::optional<std::string> infeasible = parsed->Get("infeasible");
  std::optional<std::string> worker_failed = parsed->Get("worker-failed");
  Metrics metrics;
  if (infeasible.has_value() && worker_failed.has_value()) {
    return UsageError(
        "--infeasible (the parameters) and --worker-failed (the worker) "
        "exclude each other");
  }
  if (infeasible.has_value() || worker_failed.has_value()) {
    const char* flag =
        infeasible.has_value() ? "--infeasible" : "--worker-failed";
    if (!assignments.empty() || parsed->Has("step")) {
      return UsageError(
          absl::StrCat(flag, " takes no METRIC=VALUE and no --step"));
    }
    if ((infeasible.has_value() ? *infeasible : *worker_failed).empty()) {
      return UsageError(absl::StrCat(flag, " needs a REASON"));
    }
  } else {
    absl::StatusOr<Metrics> parsed_metrics = ParseMetricAssignments(assignments);
    if (!parsed_metrics.ok()) return AsUsageError(parsed_metrics.status());
    metrics = std::move(*parsed_metrics);
  }

  absl::StatusOr<Trial> trial = context.client.GetTrial(study, trial_id);
  if (!trial.ok()) return trial.status();
  v1::CompleteTrialRequest request;
  request.set_study_name(study);
  request.set_trial_id(trial_id);
  request.set_lease_epoch(parsed->Has("epoch") ? *epoch
                                               : trial->proto().lease_epoch());
  if (infeasible.has_value()) {
    request.set_infeasible(true);
    request.set_infeasible_reason(*infeasible);
  } else if (worker_failed.has_value()) {
    request.set_worker_failed(true);
    request.set_failure_reason(*worker_failed);
  } else {
    v1::Measurement* m = request.mutable_final_measurement();
    m->set_step(parsed->Has("step") ? *step : LatestStep(trial->proto()));
    m->set_elapsed_seconds(SecondsSinceStart(trial->proto()));
    m->mutable_metrics()->insert(metrics.begin(), metrics.end());
  }
  absl::StatusOr<v1::Trial> updated = context.client.CompleteTrial(request);
  if (!updated.ok()) return updated.status();
  return Print(context, *updated);
}

absl::Status RunHeartbeatCommand(const CommandContext& context,
                                 const Args& args) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(args, {{"epoch"}, {"checkpoint"}});
  if (!parsed.ok()) return parsed.status();
  std::string study;
  int64_t trial_id = 0;
  if (absl::Status s = StudyAndTrial(*parsed, "heartbeat", &study, &trial_id);
      !s.ok()) {
    return s;
  }
  if (parsed->positional.size() > 2) {
    return UsageError("heartbeat takes only NAME and TRIAL_ID");
  }
  absl::StatusOr<int64_t> epoch = parsed->GetInt("epoch", 0, 1);
  if (!epoch.ok()) return epoch.status();
  std::optional<std::string> checkpoint = parsed->Get("checkpoint");
  if (checkpoint.has_value() && checkpoint->empty()) {
    return UsageError("--checkpoint needs a URI");
  }

  absl::StatusOr<Trial> trial = context.client.GetTrial(study, trial_id);
  if (!trial.ok()) return trial.status();
  v1::HeartbeatRequest request;
  request.set_study_name(study);
  request.set_trial_id(trial_id);
  request.set_lease_epoch(parsed->Has("epoch") ? *epoch
                                               : trial->proto().lease_epoch());
  request.set_client_id(trial->proto().client_id());
  request.set_checkpoint_uri(checkpoint.value_or(""));
  absl::StatusOr<v1::HeartbeatResponse> response =
      context.client.Heartbeat(request);
  if (!response.ok()) return response.status();
  return Print(context, *response);
}

}  // namespace hypertune::cli
