// `hypertune study create|list|get|best|delete|pause|resume`.
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/format.h"

namespace hypertune::cli {

const char kStudyUsage[] =
    "usage: hypertune study create --config FILE [--format json|table]\n"
    "                              [--warm-start-from OTHER[,OTHER...]]\n"
    "       hypertune study list [--format table|json]\n"
    "       hypertune study get NAME [--format json|table]\n"
    "       hypertune study best NAME [--format table|json|csv]\n"
    "       hypertune study delete NAME\n"
    "       hypertune study pause NAME\n"
    "       hypertune study resume NAME\n"
    "\n"
    "FILE is the study in protobuf's JSON mapping, e.g.\n"
    "  {\"name\": \"mnist\", \"spec\": {\"parameters\": [{\"name\": \"lr\",\n"
    "   \"double_spec\": {\"min\": 1e-4, \"max\": 0.1, \"scale\": \"LOG\"}}],\n"
    "   \"metrics\": [{\"name\": \"loss\", \"goal\": \"MINIMIZE\"}],\n"
    "   \"max_trials\": 50}}\n"
    "best lists the optimal trials (for one objective: the best one).\n"
    "--warm-start-from copies the COMPLETED trials of the OTHER studies whose\n"
    "parameters fit the new space (and that report its objective) into it as\n"
    "warm-start results: the optimizer learns from them, max_trials does not\n"
    "count them; tables show them as COMPLETED (warm start).\n";

namespace {

absl::Status Print(const CommandContext& context,
                   const google::protobuf::Message& message) {
  absl::StatusOr<std::string> json = ToJson(message);
  if (!json.ok()) return json.status();
  context.out << *json;
  return absl::OkStatus();
}

// The single NAME argument of a subcommand.
absl::StatusOr<std::string> OneName(const ParsedArgs& parsed,
                                     const std::string& subcommand) {
  if (parsed.positional.size() != 1) {
    return UsageError(absl::StrCat("study ", subcommand,
                                   " takes one study NAME"));
  }
  return parsed.positional[0];
}

absl::Status Create(const CommandContext& context, const Args& args) {
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(args, {{"config"}, {"format"}, {"warm-start-from", true, true}});
  if (!parsed.ok()) return parsed.status();
  std::optional<std::string> path = parsed->Get("config");
  if (!path.has_value()) return UsageError("study create needs --config FILE");
  if (!parsed->positional.empty()) {
    return UsageError("study create takes the study from --config only");
  }
  absl::StatusOr<OutputFormat> format = ParseFormat(
      parsed->Get("format"), OutputFormat::kJson,
      {OutputFormat::kJson, OutputFormat::kTable});
  if (!format.ok()) return format.status();

  std::ifstream file(*path);
  std::stringstream text;
  if (!file || !(text << file.rdbuf())) {
    return absl::NotFoundError(
        absl::StrCat("cannot read study config \"", *path, "\""));
  }
  v1::Study study;
  if (absl::Status s = FromJson(text.str(), *path, &study); !s.ok()) return s;
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
    absl::StatusOr<v1::Study> counted = context.client.GetStudy(created->name());
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
  if (!parsed->positional.empty()) return UsageError("study list takes no NAME");
  absl::StatusOr<OutputFormat> format = ParseFormat(
      parsed->Get("format"), OutputFormat::kTable,
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
  absl::StatusOr<OutputFormat> format = ParseFormat(
      parsed->Get("format"), OutputFormat::kJson,
      {OutputFormat::kJson, OutputFormat::kTable});
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
    context.out << FormatCsv(TrialGrid(&*study, trials, GridStyle::kCsv));
  } else if (trials.empty()) {
    context.out << "no completed trials yet in study \"" << *name << "\"\n";
  } else {
    context.out << FormatTable(TrialGrid(&*study, trials, GridStyle::kTable));
  }
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
  if (sub == "delete") return Delete(context, rest);
  if (sub == "pause") return SetState(context, rest, sub, v1::Study::PAUSED);
  if (sub == "resume") return SetState(context, rest, sub, v1::Study::ACTIVE);
  if (sub == "chown") return Chown(context, rest);
  return UsageError(absl::StrCat("unknown study subcommand \"", sub, "\""));
}

}  // namespace hypertune::cli
