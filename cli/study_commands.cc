// `hypertune study create|list|get|best|update|history|delete|pause|resume|
// chown`.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/json_config.h"
#include "cli/wandb_sweep.h"
#include "common/trial_csv.h"

namespace hypertune::cli {

const char kStudyUsage[] =
    "usage: hypertune study create --config FILE [--format table|json]\n"
    "                              [--warm-start-from OTHER[,OTHER...]]\n"
    "                              [--transfer-from OTHER[,OTHER...]]\n"
    "       hypertune study create --from-wandb SWEEP.yaml [NAME] [...]\n"
    "       hypertune study list [--format table|json]\n"
    "       hypertune study get NAME [--format table|json]\n"
    "       hypertune study best NAME [--format table|json|csv]\n"
    "       hypertune study update NAME [--max-trials N] "
    "[--max-parallel-trials N]\n"
    "           [--max-device-hours H] [--price-per-device-hour P]\n"
    "           [--lease-seconds S] [--max-retries N] [--max-resource R]\n"
    "           [--min-trials N] [--grace-steps N]\n"
    "           [--promote-by-model true|false] [--config FILE]\n"
    "       hypertune study history NAME [--format table|json]\n"
    "       hypertune study delete NAME\n"
    "       hypertune study pause NAME\n"
    "       hypertune study resume NAME\n"
    "\n"
    "FILE is the study in protobuf's JSON mapping, e.g.\n"
    "  {\"name\": \"mnist\", \"spec\": {\"parameters\": [{\"name\": \"lr\",\n"
    "   \"double_spec\": {\"min\": 1e-4, \"max\": 0.1, \"scale\": \"LOG\"}}],\n"
    "   \"metrics\": [{\"name\": \"loss\", \"goal\": \"MINIMIZE\"}],\n"
    "   \"max_trials\": 50}}\n"
    "--from-wandb reads a W&B sweep configuration instead (its name, or\n"
    "NAME; docs/wandb-sweeps.md); `hypertune worker NAME --wandb` runs its\n"
    "program and command.\n"
    "Output is a table for people; --format json (the protobuf JSON mapping,\n"
    "integers as numbers) or csv is for programs.\n"
    "best lists the optimal trials: for one objective the best feasible one,\n"
    "for several the Pareto front of the feasible trials.\n"
    "update changes a study's budget, lease and early-stopping budget, turns\n"
    "the learning-curve model of ASHA or HYPERBAND on or off\n"
    "(--promote-by-model), and with --config FILE takes its parameters from\n"
    "FILE (ranges may widen and value lists grow; 0 means unlimited for the\n"
    "max_ flags). Raising the budget of a COMPLETED study makes it ACTIVE.\n"
    "history lists every update.\n"
    "--warm-start-from copies the COMPLETED trials of the OTHER studies whose\n"
    "parameters fit the new space (and that report its objective) into it as\n"
    "warm-start results: the optimizer learns from them, max_trials does not\n"
    "count them; tables show them as COMPLETED (warm start).\n"
    "--transfer-from adds the OTHER studies to spec.prior_studies: GP_BANDIT\n"
    "takes their COMPLETED trials as a prior, never as this study's results,\n"
    "weighted by how well they predict its own (same or overlapping\n"
    "parameters; objective k learns from their objective k).\n";

namespace {

absl::Status Print(const CommandContext& context,
                   const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = ToJson(message);
  if (!json.ok()) return json.status();
  context.out << *json;
  return absl::OkStatus();
}

// The study config in the JSON file at `path` (json_config.h's errors);
// `whole`: a new study's, checked for what a study needs (ParseStudyConfig).
absl::StatusOr<v1::Study> ReadStudyConfig(const std::string& path, bool whole) {
  std::ifstream file(path);
  std::stringstream text;
  if (!file || !(text << file.rdbuf())) {
    return absl::NotFoundError(
        absl::StrCat("cannot read study config \"", path, "\""));
  }
  v1::Study study;
  if (absl::Status s = whole ? ParseStudyConfig(text.str(), path, &study)
                             : ParseJsonConfig(text.str(), path, &study);
      !s.ok()) {
    return s;
  }
  return study;
}

// The study of the W&B sweep configuration at `path` (wandb_sweep.h), named
// `name` if not empty; its notes go to the user's stderr.
absl::StatusOr<v1::Study> ReadWandbSweep(const CommandContext& context,
                                         const std::string& path,
                                         const std::string& name) {
  std::ifstream file(path);
  std::stringstream text;
  if (!file || !(text << file.rdbuf())) {
    return absl::NotFoundError(
        absl::StrCat("cannot read sweep config \"", path, "\""));
  }
  absl::StatusOr<WandbSweep> sweep = ParseWandbSweep(text.str(), path, name);
  if (!sweep.ok()) return sweep.status();
  for (const std::string& note : sweep->notes) {
    context.err << "note: " << note << "\n";
  }
  return std::move(sweep->study);
}

// The single NAME argument of a subcommand.
absl::StatusOr<std::string> OneName(const ParsedArgs& parsed,
                                    const std::string& subcommand) {
  if (parsed.positional.size() != 1) {
    return UsageError(
        absl::StrCat("study ", subcommand, " takes one study NAME"));
  }
  return parsed.positional[0];
}

absl::Status Create(const CommandContext& context, const Args& args) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(args, {{"config"},
                       {"format"},
                       {"warm-start-from", true, true},
                       {"transfer-from", true, true},
                       {"from-wandb"}});
  if (!parsed.ok()) return parsed.status();
  std::optional<std::string> path = parsed->Get("config");
  std::optional<std::string> sweep = parsed->Get("from-wandb");
  if (path.has_value() == sweep.has_value()) {
    return UsageError(
        "study create needs --config FILE or --from-wandb SWEEP.yaml");
  }
  if (sweep.has_value() ? parsed->positional.size() > 1
                        : !parsed->positional.empty()) {
    return UsageError(sweep.has_value()
                          ? "study create --from-wandb takes one NAME"
                          : "study create takes the study from --config only");
  }
  absl::StatusOr<OutputFormat> format =
      ParseFormat(parsed->Get("format"), OutputFormat::kTable,
                  {OutputFormat::kTable, OutputFormat::kJson});
  if (!format.ok()) return format.status();

  absl::StatusOr<v1::Study> config =
      sweep.has_value()
          ? ReadWandbSweep(
                context, *sweep,
                parsed->positional.empty() ? "" : parsed->positional[0])
          : ReadStudyConfig(*path, /*whole=*/true);
  if (!config.ok()) return config.status();
  v1::Study& study = *config;
  for (const std::string& prior :
       SplitStudyList(parsed->GetAll("transfer-from"))) {
    study.mutable_spec()->add_prior_studies(prior);
  }
  const std::vector<std::string> sources =
      SplitStudyList(parsed->GetAll("warm-start-from"));
  for (const std::string& source : sources) {
    // Before creating anything: a typo must not leave a cold study behind.
    if (absl::Status s = context.client.GetStudy(source).status(); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<v1::Study> created = context.client.CreateStudy(study);
  if (!created.ok()) return created.status();
  if (!sources.empty()) {
    absl::StatusOr<v1::ImportTrialsResponse> warm =
        WarmStartFrom(context, created->name(), sources);
    if (!warm.ok()) {
      context.client.DeleteStudy(created->name()).IgnoreError();
      return warm.status();
    }
    context.err << "warm start: copied " << warm->imported()
                << " COMPLETED trials, skipped " << warm->skipped()
                << " that do not fit the new space\n";
    absl::StatusOr<v1::Study> counted =
        context.client.GetStudy(created->name());
    if (counted.ok()) created = std::move(counted);
  }
  if (*format == OutputFormat::kTable) {
    context.out << FormatTable(StudyDetailGrid(*created));
    return absl::OkStatus();
  }
  return Print(context, *created);
}

absl::Status List(const CommandContext& context, const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {{"format"}});
  if (!parsed.ok()) return parsed.status();
  if (!parsed->positional.empty())
    return UsageError("study list takes no NAME");
  absl::StatusOr<OutputFormat> format =
      ParseFormat(parsed->Get("format"), OutputFormat::kTable,
                  {OutputFormat::kTable, OutputFormat::kJson});
  if (!format.ok()) return format.status();
  absl::StatusOr<std::vector<v1::Study>> studies = context.client.ListStudies();
  if (!studies.ok()) return studies.status();
  if (*format == OutputFormat::kTable) {
    context.out << FormatTable(StudyListGrid(*studies));
    return absl::OkStatus();
  }
  v1::ListStudiesResponse response;
  for (v1::Study& study : *studies) *response.add_studies() = std::move(study);
  return Print(context, response);
}

absl::Status Get(const CommandContext& context, const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {{"format"}});
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<std::string> name = OneName(*parsed, "get");
  if (!name.ok()) return name.status();
  absl::StatusOr<OutputFormat> format =
      ParseFormat(parsed->Get("format"), OutputFormat::kTable,
                  {OutputFormat::kTable, OutputFormat::kJson});
  if (!format.ok()) return format.status();
  absl::StatusOr<v1::Study> study = context.client.GetStudy(*name);
  if (!study.ok()) return study.status();
  if (*format == OutputFormat::kTable) {
    context.out << FormatTable(StudyDetailGrid(*study));
    return absl::OkStatus();
  }
  return Print(context, *study);
}

absl::Status Best(const CommandContext& context, const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {{"format"}});
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<std::string> name = OneName(*parsed, "best");
  if (!name.ok()) return name.status();
  absl::StatusOr<OutputFormat> format = ParseFormat(
      parsed->Get("format"), OutputFormat::kTable,
      {OutputFormat::kTable, OutputFormat::kJson, OutputFormat::kCsv});
  if (!format.ok()) return format.status();
  absl::StatusOr<v1::ListOptimalTrialsResponse> best =
      context.client.ListOptimalTrials(*name);
  if (!best.ok()) return best.status();
  if (*format == OutputFormat::kJson) return Print(context, *best);
  absl::StatusOr<v1::Study> study = context.client.GetStudy(*name);
  if (!study.ok()) return study.status();
  std::vector<v1::Trial> trials(best->trials().begin(), best->trials().end());
  if (*format == OutputFormat::kCsv) {
    std::string csv;
    AppendCsvHeader(*study, &csv);
    for (const v1::Trial& trial : trials) AppendCsvRow(*study, trial, &csv);
    context.out << csv;
  } else if (trials.empty()) {
    context.out << "no completed trials yet in study \"" << *name << "\"\n";
  } else {
    context.out << FormatTable(TrialGrid(&*study, trials));
  }
  return absl::OkStatus();
}

// `--flag` as a number >= 0, into `set`; nothing when absent.
absl::Status NonNegativeFlag(const ParsedArgs& parsed, const char* flag,
                             const std::function<void(double)>& set) {
  std::optional<std::string> text = parsed.Get(flag);
  if (!text.has_value()) return absl::OkStatus();
  double value = 0;
  if (!absl::SimpleAtod(*text, &value) || !std::isfinite(value) || value < 0) {
    return UsageError(absl::StrCat(
        "--", flag, ": expected a number >= 0, got \"", *text, "\""));
  }
  set(value);
  return absl::OkStatus();
}

// Saturated: the server names the limit of a value too large.
int32_t Int32(double v) {
  return static_cast<int32_t>(std::min(v, 2147483647.0));
}

absl::Status Update(const CommandContext& context, const Args& args) {
  // Flag -> the spec path it sets, and how.
  struct Field {
    const char* flag;
    const char* path;
    std::function<void(v1::StudySpec&, double)> set;
    bool integral;
  };
  const std::vector<Field> fields = {
      {"max-trials", "max_trials",
       [](v1::StudySpec& s, double v) { s.set_max_trials(Int32(v)); }, true},
      {"max-parallel-trials", "max_parallel_trials",
       [](v1::StudySpec& s, double v) { s.set_max_parallel_trials(Int32(v)); },
       true},
      {"max-device-hours", "max_device_hours",
       [](v1::StudySpec& s, double v) { s.set_max_device_hours(v); }, false},
      {"price-per-device-hour", "price_per_device_hour",
       [](v1::StudySpec& s, double v) { s.set_price_per_device_hour(v); },
       false},
      {"lease-seconds", "lease_seconds",
       [](v1::StudySpec& s, double v) { s.set_lease_seconds(Int32(v)); }, true},
      {"max-retries", "max_retries",
       [](v1::StudySpec& s, double v) { s.set_max_retries(Int32(v)); }, true},
      {"max-resource", "early_stopping.max_resource",
       [](v1::StudySpec& s, double v) {
         s.mutable_early_stopping()->set_max_resource(static_cast<int64_t>(v));
       },
       true},
      {"min-trials", "early_stopping.min_trials",
       [](v1::StudySpec& s, double v) {
         s.mutable_early_stopping()->set_min_trials(Int32(v));
       },
       true},
      {"grace-steps", "early_stopping.grace_steps",
       [](v1::StudySpec& s, double v) {
         s.mutable_early_stopping()->set_grace_steps(static_cast<int64_t>(v));
       },
       true},
  };
  std::vector<FlagSpec> specs = {{"config"}, {"promote-by-model"}};
  for (const Field& f : fields) specs.push_back({f.flag});
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, specs);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<std::string> name = OneName(*parsed, "update");
  if (!name.ok()) return name.status();

  v1::UpdateStudyRequest request;
  request.set_name(*name);
  for (const Field& f : fields) {
    bool out_of_range = false;
    absl::Status s = NonNegativeFlag(*parsed, f.flag, [&](double v) {
      out_of_range = f.integral && (std::floor(v) != v || v > 9.0e15);
      f.set(*request.mutable_spec(), v);
      request.mutable_update_mask()->add_paths(f.path);
    });
    if (!s.ok()) return s;
    if (out_of_range) {
      return UsageError(
          absl::StrCat("--", f.flag, ": expected a whole number"));
    }
  }
  if (std::optional<std::string> on = parsed->Get("promote-by-model")) {
    if (*on != "true" && *on != "false") {
      return UsageError(absl::StrCat(
          "--promote-by-model: expected true or false, got \"", *on, "\""));
    }
    request.mutable_spec()->mutable_early_stopping()->set_promote_by_model(
        *on == "true");
    request.mutable_update_mask()->add_paths("early_stopping.promote_by_model");
  }
  if (std::optional<std::string> path = parsed->Get("config")) {
    absl::StatusOr<v1::Study> config = ReadStudyConfig(*path, /*whole=*/false);
    if (!config.ok()) return config.status();
    *request.mutable_spec()->mutable_parameters() = config->spec().parameters();
    request.mutable_update_mask()->add_paths("parameters");
  }
  if (request.update_mask().paths().empty()) {
    return UsageError("study update needs a field to change (see --help)");
  }
  absl::StatusOr<v1::Study> before = context.client.GetStudy(*name);
  if (!before.ok()) return before.status();
  absl::StatusOr<v1::Study> after = context.client.UpdateStudy(request);
  if (!after.ok()) return after.status();
  if (after->changes_size() == before->changes_size()) {
    context.out << "study \"" << *name << "\" already had those values\n";
    return absl::OkStatus();
  }
  for (const v1::StudyChange::Field& f :
       after->changes(after->changes_size() - 1).fields()) {
    context.out << f.path() << ": " << f.before() << " -> " << f.after()
                << "\n";
  }
  context.out << "study \"" << *name << "\" is "
              << v1::Study::State_Name(after->state()) << "\n";
  return absl::OkStatus();
}

absl::Status History(const CommandContext& context, const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {{"format"}});
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<std::string> name = OneName(*parsed, "history");
  if (!name.ok()) return name.status();
  absl::StatusOr<OutputFormat> format =
      ParseFormat(parsed->Get("format"), OutputFormat::kTable,
                  {OutputFormat::kTable, OutputFormat::kJson});
  if (!format.ok()) return format.status();
  absl::StatusOr<v1::Study> study = context.client.GetStudy(*name);
  if (!study.ok()) return study.status();
  if (*format == OutputFormat::kJson) {
    for (const v1::StudyChange& change : study->changes()) {
      absl::StatusOr<std::string> line = ToJsonLine(change);
      if (!line.ok()) return line.status();
      context.out << *line << "\n";
    }
    return absl::OkStatus();
  }
  if (study->changes().empty()) {
    context.out << "study \"" << *name << "\" has not been updated\n";
    return absl::OkStatus();
  }
  Grid grid = {{"TIME", "WHO", "FIELD", "BEFORE", "AFTER"}};
  for (const v1::StudyChange& change : study->changes()) {
    for (const v1::StudyChange::Field& f : change.fields()) {
      grid.push_back({FormatTimeMs(change.time_ms()), change.who(), f.path(),
                      f.before(), f.after()});
    }
  }
  context.out << FormatTable(grid);
  return absl::OkStatus();
}

absl::Status Delete(const CommandContext& context, const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {});
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<std::string> name = OneName(*parsed, "delete");
  if (!name.ok()) return name.status();
  if (absl::Status s = context.client.DeleteStudy(*name); !s.ok()) return s;
  context.out << "deleted study \"" << *name << "\"\n";
  return absl::OkStatus();
}

absl::Status SetState(const CommandContext& context, const Args& args,
                      const std::string& subcommand, v1::Study::State state) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {});
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<std::string> name = OneName(*parsed, subcommand);
  if (!name.ok()) return name.status();
  absl::StatusOr<v1::Study> study = context.client.SetStudyState(*name, state);
  if (!study.ok()) return study.status();
  context.out << "study \"" << *name << "\" is "
              << v1::Study::State_Name(study->state()) << "\n";
  return absl::OkStatus();
}

absl::Status Chown(const CommandContext& context, const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {});
  if (!parsed.ok()) return parsed.status();
  if (parsed->positional.size() != 2) {
    return UsageError("study chown takes a study NAME and an OWNER");
  }
  const std::string& name = parsed->positional[0];
  absl::StatusOr<v1::Study> study =
      context.client.SetStudyOwner(name, parsed->positional[1]);
  if (!study.ok()) return study.status();
  context.out << "study \"" << name << "\" belongs to \"" << study->owner()
              << "\"\n";
  return absl::OkStatus();
}

}  // namespace

absl::Status RunStudyCommand(const CommandContext& context, const Args& args) {
  if (args.empty()) return UsageError("study needs a subcommand");
  const std::string& sub = args[0];
  Args rest(args.begin() + 1, args.end());
  if (sub == "create") return Create(context, rest);
  if (sub == "list") return List(context, rest);
  if (sub == "get") return Get(context, rest);
  if (sub == "best") return Best(context, rest);
  if (sub == "update") return Update(context, rest);
  if (sub == "history") return History(context, rest);
  if (sub == "delete") return Delete(context, rest);
  if (sub == "pause") return SetState(context, rest, sub, v1::Study::PAUSED);
  if (sub == "resume") return SetState(context, rest, sub, v1::Study::ACTIVE);
  if (sub == "chown") return Chown(context, rest);
  return UsageError(absl::StrCat("unknown study subcommand \"", sub, "\""));
}

}  // namespace hypertune::cli
