// `hypertune export|import`, `hypertune trials import` and the warm start of
// `hypertune study create --warm-start-from`.
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/trial_file.h"

namespace hypertune::cli {

const char kExportUsage[] =
    "usage: hypertune export NAME\n"
    "\n"
    "Writes study NAME and all its trials to stdout as JSON lines: the study\n"
    "first, then one trial per line in id order, each the protobuf JSON\n"
    "mapping of the message (measurements, states, reasons, costs, times,\n"
    "lease and retry fields included). `hypertune import` reads it back.\n";

const char kImportUsage[] =
    "usage: hypertune import FILE [--name NEW]\n"
    "\n"
    "Recreates the study that `hypertune export` wrote to FILE (\"-\": "
    "stdin),\n"
    "under its own name or NEW, with every trial as exported: ids, states,\n"
    "measurements, reasons, costs and times. No worker of this server holds\n"
    "an exported trial, so ACTIVE trials are queued again (REQUESTED, no\n"
    "lease) and STOPPING ones are STOPPED. Fails (ALREADY_EXISTS) if the name\n"
    "is taken; all or nothing.\n";

const char kTrialsImportUsage[] =
    "usage: hypertune trials import NAME FILE\n"
    "\n"
    "Adds the COMPLETED trials of FILE to study NAME as warm-start results\n"
    "(the optimizer learns from them; max_trials does not count them).\n"
    "FILE is what `hypertune trials --format csv|json` writes (or JSON lines\n"
    "of trials); rows in other states are skipped. CSV columns that name a\n"
    "parameter of the study (or \"param:NAME\") are parameters, known trial\n"
    "columns (id, state, step, elapsed_seconds, ...) are read or ignored, any\n"
    "other column is a metric (or \"metric:NAME\").\n";

namespace {

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  std::stringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream file(path, std::ios::binary);
  if (!file || !(text << file.rdbuf())) {
    return absl::NotFoundError(absl::StrCat("cannot read \"", path, "\""));
  }
  return text.str();
}

// "3, 5, 7" or "3, 5, ... (12 lines)".
std::string LineList(const std::vector<int>& lines) {
  constexpr size_t kShown = 10;
  std::vector<int> shown(lines.begin(),
                         lines.begin() + std::min(lines.size(), kShown));
  std::string text = absl::StrJoin(shown, ", ");
  if (lines.size() > kShown) {
    absl::StrAppend(&text, ", ... (", lines.size(), " lines)");
  }
  return text;
}

}  // namespace

absl::Status RunExportCommand(const CommandContext& context, const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {});
  if (!parsed.ok()) return parsed.status();
  if (parsed->positional.size() != 1) {
    return UsageError("export takes one study NAME");
  }
  const std::string& name = parsed->positional[0];
  absl::StatusOr<v1::Study> study = context.client.GetStudy(name);
  if (!study.ok()) return study.status();
  study->clear_trial_counts();  // derived from the trials
  absl::StatusOr<std::string> line = ExportLine(*study);
  if (!line.ok()) return line.status();
  context.out << *line << '\n';
  v1::ListTrialsRequest request;
  request.set_study_name(name);
  request.set_page_size(1000);
  do {
    absl::StatusOr<v1::ListTrialsResponse> page =
        context.client.ListTrials(request);
    if (!page.ok()) return page.status();
    for (const v1::Trial& trial : page->trials()) {
      absl::StatusOr<std::string> trial_line = ExportLine(trial);
      if (!trial_line.ok()) return trial_line.status();
      context.out << *trial_line << '\n';
    }
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  context.out.flush();
  if (!context.out) {
    return absl::UnavailableError("export: cannot write to stdout");
  }
  return absl::OkStatus();
}

namespace {

// An export's trials, read from its file as they are sent (a retried
// stream reads the file again from the start; standard input cannot be).
class ExportTrials final : public Client::TrialSource {
 public:
  explicit ExportTrials(std::string path) : path_(std::move(path)) {}

  // Opens the export and reads its study's line.
  absl::StatusOr<v1::Study> Open() {
    if (path_ == "-") {
      reader_.emplace(std::cin, path_);
    } else {
      file_.open(path_, std::ios::binary);
      if (!file_) {
        return absl::NotFoundError(absl::StrCat("cannot read \"", path_, "\""));
      }
      reader_.emplace(file_, path_);
    }
    return reader_->ReadStudy();
  }
  absl::Status Start() override {
    if (!started_) {
      started_ = true;
      return absl::OkStatus();
    }
    if (path_ == "-") {
      return absl::UnavailableError(
          "import: the server was unreachable and standard input cannot be "
          "sent again; import from a file to have it retried");
    }
    file_.clear();
    file_.seekg(0);
    reader_.emplace(file_, path_);
    return reader_->ReadStudy().status();
  }
  absl::StatusOr<bool> Next(v1::Trial& trial) override {
    return reader_->NextTrial(trial);
  }
  const std::vector<int>& trial_lines() const { return reader_->trial_lines(); }

 private:
  const std::string path_;
  std::ifstream file_;
  std::optional<ExportReader> reader_;
  bool started_ = false;
};

}  // namespace

absl::Status RunImportCommand(const CommandContext& context, const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {{"name"}});
  if (!parsed.ok()) return parsed.status();
  if (parsed->positional.size() != 1) {
    return UsageError("import takes one FILE (from `hypertune export`)");
  }
  const std::string& path = parsed->positional[0];
  // Read as it is sent: a large export is never held whole.
  ExportTrials trials(path);
  absl::StatusOr<v1::Study> exported = trials.Open();
  if (!exported.ok()) return exported.status();
  if (std::optional<std::string> name = parsed->Get("name")) {
    exported->set_name(*name);
  }
  absl::StatusOr<v1::Study> study =
      context.client.ImportStudy(*exported, trials);
  if (!study.ok()) {
    const std::vector<int>& lines = trials.trial_lines();
    return AtFileLine(study.status(), path, [&lines](int i) {
      return i >= 0 && static_cast<size_t>(i) < lines.size() ? lines[i] : 0;
    });
  }
  std::map<std::string, int64_t> counts(study->trial_counts().begin(),
                                        study->trial_counts().end());
  std::vector<std::string> parts;
  for (const auto& [state, n] : counts)
    parts.push_back(absl::StrCat(state, "=", n));
  context.out << "imported study \"" << study->name() << "\" ("
              << v1::Study::State_Name(study->state()) << ") with "
              << trials.trial_lines().size() << " trials"
              << (parts.empty() ? "" : ": ") << absl::StrJoin(parts, " ")
              << "\n";
  return absl::OkStatus();
}

absl::Status RunTrialsImport(const CommandContext& context, const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {});
  if (!parsed.ok()) return parsed.status();
  if (parsed->positional.size() != 2) {
    return UsageError("trials import takes a study NAME and a FILE");
  }
  const std::string& name = parsed->positional[0];
  const std::string& path = parsed->positional[1];
  absl::StatusOr<std::string> text = ReadAll(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<v1::Study> study = context.client.GetStudy(name);
  if (!study.ok()) return study.status();
  absl::StatusOr<TrialFile> file = ParseTrialFile(*text, path, *study);
  if (!file.ok()) return file.status();

  // In requests well under the 4 MiB a server reads; each is all or nothing.
  constexpr size_t kRequestBytes = 2 << 20;
  int64_t imported = 0;
  int64_t first_id = 0;
  size_t next = 0;
  while (next < file->trials.size()) {
    v1::ImportTrialsRequest request;
    request.set_study_name(name);
    const size_t begin = next;
    size_t bytes = 0;
    while (next < file->trials.size() &&
           (bytes == 0 ||
            bytes + file->trials[next].ByteSizeLong() < kRequestBytes)) {
      bytes += file->trials[next].ByteSizeLong();
      *request.add_trials() = file->trials[next++];
    }
    absl::StatusOr<v1::ImportTrialsResponse> response =
        context.client.ImportTrials(request);
    if (!response.ok()) {
      const std::vector<int>& lines = file->lines;
      absl::Status status = AtFileLine(response.status(), path, [&](int i) {
        const size_t k = begin + static_cast<size_t>(i);
        return k < lines.size() ? lines[k] : 0;
      });
      if (imported > 0) {
        status = absl::Status(
            status.code(),
            absl::StrCat(status.message(), " (", imported,
                         " trials before that line were imported)"));
      }
      return status;
    }
    if (imported == 0) first_id = response->first_trial_id();
    imported += response->imported();
  }
  context.out << "imported " << imported << " trials into study \"" << name
              << "\" as warm-start results";
  if (imported > 0) {
    context.out << " (ids " << first_id << "-" << first_id + imported - 1
                << ")";
  }
  context.out << "\n";
  if (!file->skipped_lines.empty()) {
    context.out << "skipped " << file->skipped_lines.size()
                << " trials that are not COMPLETED (lines "
                << LineList(file->skipped_lines) << ")\n";
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::ImportTrialsResponse> WarmStartFrom(
    const CommandContext& context, const std::string& name,
    const std::vector<std::string>& sources) {
  v1::ImportTrialsRequest request;
  request.set_study_name(name);
  for (const std::string& source : sources) request.add_from_studies(source);
  return context.client.ImportTrials(request);
}

std::vector<std::string> SplitStudyList(
    const std::vector<std::string>& values) {
  std::vector<std::string> names;
  for (const std::string& value : values) {
    for (absl::string_view piece :
         absl::StrSplit(value, ',', absl::SkipEmpty())) {
      names.emplace_back(absl::StripAsciiWhitespace(piece));
    }
  }
  return names;
}

}  // namespace hypertune::cli
