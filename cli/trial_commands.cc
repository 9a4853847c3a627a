// `hypertune trials|suggest|report|complete|heartbeat`.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/trial_file.h"
#include "cli/worker/worker_protocol.h"
#include "common/study_metrics.h"
#include "common/trial_csv.h"

namespace hypertune::cli {

const char kTrialsUsage[] =
    "usage: hypertune trials NAME [--state S]... [--format table|json|csv]\n"
    "\n"
    "Lists the trials of study NAME, all pages. --state keeps only trials in\n"
    "the given states (repeat it or give a comma-separated list): REQUESTED,\n"
    "ACTIVE, STOPPING, PAUSED, COMPLETED, STOPPED, INFEASIBLE, FAILED.\n"
    "CSV columns: id,state,<parameters>,<final metrics>,step,elapsed_seconds,\n"
    "client_id,infeasible_reason.\n"
    "\n"
    "usage: hypertune trials import NAME FILE\n"
    "Adds FILE's COMPLETED trials (in the CSV or JSON written here) to study\n"
    "NAME as warm-start results (`hypertune trials import --help`).\n";

const char kTrialUsage[] =
    "usage: hypertune trial enqueue NAME PARAM=VALUE... [--partial]\n"
    "\n"
    "Queues a trial of study NAME with these parameters: the next worker to\n"
    "ask gets it before any new suggestion. Every active parameter is given,\n"
    "unless --partial: then the study's algorithm suggests the others now,\n"
    "from the trials so far. Prints the queued trial as JSON.\n";

const char kSuggestUsage[] =
    "usage: hypertune suggest NAME [--count K] [--client-id ID]\n"
    "\n"
    "Asks for K (default 1) trials held by ID (default: this host and\n"
    "process) and prints the SuggestTrialsResponse as JSON. No trials with\n"
    "study_state COMPLETED: the budget is spent; with ACTIVE: the study is at\n"
    "its parallel limit, ask again later.\n";

const char kWatchUsage[] =
    "usage: hypertune watch NAME [--after SEQ] [--format table|json]\n"
    "\n"
    "Prints the trial changes of study NAME as they happen (created, "
    "measured,\n"
    "completed, stopped), each once, until interrupted. A trial that changed\n"
    "several times between two reads is printed as it is now. --after SEQ\n"
    "resumes after the sequence number SEQ (the first column; 0 = from the\n"
    "start). JSON: one TrialEvent per line.\n";

const char kStopUsage[] =
    "usage: hypertune stop NAME TRIAL_ID [--reason TEXT]\n"
    "\n"
    "Stops a trial early: an ACTIVE one becomes STOPPING (its worker finishes\n"
    "it, STOPPED), a REQUESTED or PAUSED one STOPPED at once.\n";

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

// JSON (the ListTrialsResponse mapping) or CSV (common/trial_csv.h, the
// HTTP API's schema), printed page by page as they arrive, so a study of any
// size streams in constant memory.
absl::Status StreamTrials(const CommandContext& context,
                          const std::string& name,
                          const std::vector<v1::Trial::State>& states,
                          OutputFormat format) {
  absl::StatusOr<v1::Study> study = context.client.GetStudy(name);
  if (!study.ok()) return study.status();
  v1::ListTrialsRequest request;
  request.set_study_name(name);
  request.set_page_size(1000);
  for (v1::Trial::State state : states) request.add_states(state);
  bool first = true;
  if (format == OutputFormat::kJson) context.out << "{\"trials\": [";
  do {
    absl::StatusOr<v1::ListTrialsResponse> page =
        context.client.ListTrials(request);
    if (!page.ok()) return page.status();
    std::vector<v1::Trial> trials(page->trials().begin(), page->trials().end());
    if (format == OutputFormat::kJson) {
      for (const v1::Trial& trial : trials) {
        absl::StatusOr<std::string> json = ToJson(trial);
        if (!json.ok()) return json.status();
        context.out << (first ? "\n" : ",\n")
                    << absl::StripTrailingAsciiWhitespace(*json);
        first = false;
      }
    } else {
      std::string csv;
      if (first) AppendCsvHeader(*study, &csv);
      for (const v1::Trial& trial : trials) {
        AppendCsvRow(*study, trial, &csv);
      }
      context.out << csv;
      first = false;
    }
    context.out.flush();
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  if (format == OutputFormat::kJson) context.out << "\n]}\n";
  return absl::OkStatus();
}

}  // namespace

absl::Status RunTrialsCommand(const CommandContext& context, const Args& args) {
  // `trials import NAME FILE`; `trials import` alone lists study "import".
  if (args.size() >= 3 && args[0] == "import") {
    return RunTrialsImport(context, Args(args.begin() + 1, args.end()));
  }
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

  if (*format == OutputFormat::kTable) {
    absl::StatusOr<std::vector<v1::Trial>> trials =
        context.client.ListAllTrials(name, *states);
    if (!trials.ok()) return trials.status();
    absl::StatusOr<v1::Study> study = context.client.GetStudy(name);
    if (!study.ok()) return study.status();
    if (trials->empty()) {
      context.out << "no trials\n";
    } else {
      context.out << FormatTable(TrialGrid(&*study, *trials));
    }
    return absl::OkStatus();
  }
  return StreamTrials(context, name, *states, *format);
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
  absl::StatusOr<v1::SuggestTrialsResponse> response =
      context.client.Suggest(parsed->positional[0], static_cast<int>(*count),
                             parsed->Get("client-id").value_or(""));
  if (!response.ok()) return response.status();
  return Print(context, *response);
}

namespace {

// PARAM=VALUE as the parameter value its spec in `spec` takes.
absl::StatusOr<v1::ParameterValue> ParseParameterAssignment(
    const v1::StudySpec& spec, const std::string& assignment) {
  const size_t equals = assignment.find('=');
  if (equals == std::string::npos || equals == 0) {
    return UsageError(absl::StrCat("\"", assignment, "\" is not PARAM=VALUE"));
  }
  const std::string name = assignment.substr(0, equals);
  const std::string text = assignment.substr(equals + 1);
  const auto it = std::find_if(
      spec.parameters().begin(), spec.parameters().end(),
      [&](const v1::ParameterSpec& p) { return p.name() == name; });
  if (it == spec.parameters().end()) {
    return UsageError(
        absl::StrCat("\"", name, "\" is not a parameter of the study"));
  }
  absl::StatusOr<v1::ParameterValue> value = ParseParameterValue(*it, text);
  if (!value.ok()) return UsageError(std::string(value.status().message()));
  if (value->has_double_value() && !std::isfinite(value->double_value())) {
    return UsageError(
        absl::StrCat(name, ": \"", text, "\" is not a finite number"));
  }
  return value;
}

}  // namespace

absl::Status RunTrialCommand(const CommandContext& context, const Args& args) {
  if (args.empty() || args[0] != "enqueue") {
    return UsageError("trial takes a subcommand: enqueue");
  }
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(Args(args.begin() + 1, args.end()), {{"partial", false}});
  if (!parsed.ok()) return parsed.status();
  if (parsed->positional.size() < 2) {
    return UsageError("trial enqueue needs NAME and at least one PARAM=VALUE");
  }
  const std::string& name = parsed->positional[0];
  absl::StatusOr<v1::Study> study = context.client.GetStudy(name);
  if (!study.ok()) return study.status();
  v1::Trial trial;
  for (size_t i = 1; i < parsed->positional.size(); ++i) {
    absl::StatusOr<v1::ParameterValue> value =
        ParseParameterAssignment(study->spec(), parsed->positional[i]);
    if (!value.ok()) return value.status();
    *trial.add_parameters() = *std::move(value);
  }
  absl::StatusOr<v1::Trial> queued =
      context.client.CreateTrial(name, trial, parsed->Has("partial"));
  if (!queued.ok()) return queued.status();
  return Print(context, *queued);
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
    absl::StatusOr<Metrics> parsed_metrics =
        ParseMetricAssignments(assignments);
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

absl::Status RunWatchCommand(const CommandContext& context, const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {{"after"}, {"format"}});
  if (!parsed.ok()) return parsed.status();
  if (parsed->positional.size() != 1) {
    return UsageError("watch takes one study NAME");
  }
  absl::StatusOr<int64_t> after = parsed->GetInt("after", 0, 0);
  if (!after.ok()) return after.status();
  absl::StatusOr<OutputFormat> format =
      ParseFormat(parsed->Get("format"), OutputFormat::kTable,
                  {OutputFormat::kTable, OutputFormat::kJson});
  if (!format.ok()) return format.status();
  const std::string& name = parsed->positional[0];
  absl::StatusOr<v1::Study> study = context.client.GetStudy(name);
  if (!study.ok()) return study.status();
  const StudyMetrics metrics(study->spec());
  const std::string objective =
      metrics.objectives().empty() ? "" : metrics.primary().name;

  absl::Status printed;
  absl::Status watched = context.client.WatchTrials(
      name, *after, [&](const v1::TrialEvent& event) {
        if (*format == OutputFormat::kJson) {
          absl::StatusOr<std::string> json = ToJsonLine(event);
          if (!json.ok()) {
            printed = json.status();
            return false;
          }
          context.out << *json << '\n';
        } else {
          context.out << TrialEventLine(event, objective) << '\n';
        }
        context.out.flush();
        return true;
      });
  if (!printed.ok()) return printed;
  return watched;
}

absl::Status RunStopCommand(const CommandContext& context, const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {{"reason"}});
  if (!parsed.ok()) return parsed.status();
  std::string study;
  int64_t trial_id = 0;
  if (absl::Status s = StudyAndTrial(*parsed, "stop", &study, &trial_id);
      !s.ok()) {
    return s;
  }
  if (parsed->positional.size() > 2) {
    return UsageError("stop takes only NAME and TRIAL_ID");
  }
  absl::StatusOr<v1::Trial> trial = context.client.StopTrial(
      study, trial_id, parsed->Get("reason").value_or(""));
  if (!trial.ok()) return trial.status();
  return Print(context, *trial);
}

}  // namespace hypertune::cli
