#include "cli/worker/wandb_command.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/wandb_sweep.h"
#include "nlohmann/json.hpp"

namespace hypertune::cli {
namespace {

using Json = nlohmann::ordered_json;

// The parameters whose values are booleans (the sweep's YAML true/false).
std::set<std::string> Booleans(const v1::Study& study) {
  std::set<std::string> names;
  auto it = study.attributes().find(kWandbBooleans);
  if (it == study.attributes().end()) return names;
  Json list = Json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array()) return names;
  for (const Json& name : list) {
    if (name.is_string()) names.insert(name.get<std::string>());
  }
  return names;
}

// The study's parameter named `name`, or nullptr.
const v1::ParameterSpec* SpecOf(const v1::Study& study,
                                const std::string& name) {
  for (const v1::ParameterSpec& p : study.spec().parameters()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

bool IsBool(const std::set<std::string>& booleans,
            const v1::ParameterValue& value) {
  return booleans.count(value.name()) &&
         value.value_case() == v1::ParameterValue::kStringValue &&
         (value.string_value() == "True" || value.string_value() == "False");
}

}  // namespace

absl::StatusOr<std::vector<std::string>> WandbCommandTemplate(
    const v1::Study& study,
    const std::function<const char*(const char*)>& getenv) {
  const auto& attributes = study.attributes();
  const bool from_wandb =
      attributes.contains(kWandbProgram) || attributes.contains(kWandbCommand);
  if (!from_wandb) {
    return absl::FailedPreconditionError(absl::StrCat(
        "study \"", study.name(),
        "\" has no W&B program or command (create it with `hypertune study "
        "create --from-wandb sweep.yaml`, or run the worker with -- CMD)"));
  }
  std::vector<std::string> words = {"${env}", "${interpreter}", "${program}",
                                    "${args}"};
  if (auto it = attributes.find(kWandbCommand); it != attributes.end()) {
    Json list = Json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (!list.is_array() || list.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("study \"", study.name(), "\": attribute ",
                       kWandbCommand, " is not a JSON list of words"));
    }
    words.clear();
    for (const Json& word : list) {
      if (!word.is_string()) {
        return absl::FailedPreconditionError(
            absl::StrCat("study \"", study.name(), "\": attribute ",
                         kWandbCommand, " is not a JSON list of words"));
      }
      words.push_back(word.get<std::string>());
    }
  }
  std::vector<std::string> command;
  for (const std::string& word : words) {
    if (word == "${env}") {
      command.push_back("/usr/bin/env");
    } else if (word == "${interpreter}") {
      // Debian's Python is python3; W&B's `python` is often absent.
      command.push_back("python3");
    } else if (word == "${program}") {
      auto it = attributes.find(kWandbProgram);
      if (it == attributes.end() || it->second.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("study \"", study.name(),
                         "\": the W&B command uses ${program} and the sweep "
                         "has no program"));
      }
      std::error_code error;
      if (!std::filesystem::is_regular_file(it->second, error)) {
        return absl::NotFoundError(absl::StrCat(
            "the sweep's program \"", it->second,
            "\" is not a file here (the worker runs it from its working "
            "directory, ",
            std::filesystem::current_path(error).string(), ")"));
      }
      command.push_back(it->second);
    } else if (word.starts_with("${envvar:") && word.ends_with("}")) {
      const std::string name = word.substr(9, word.size() - 10);
      const char* value = getenv(name.c_str());
      if (value == nullptr) {
        return absl::NotFoundError(absl::StrCat("the W&B command's ", word,
                                                ": $", name, " is not set"));
      }
      command.push_back(value);
    } else {
      command.push_back(word);
    }
  }
  if (command.empty() || command[0].starts_with("${args")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "study \"", study.name(), "\": the W&B command has no program to run"));
  }
  return command;
}

std::string WandbArgsJson(const v1::Study& study,
                          const ParameterValues& parameters) {
  const std::set<std::string> booleans = Booleans(study);
  Json object = Json::object();
  for (const v1::ParameterValue& value : parameters) {
    // "optimizer.lr" is lr inside optimizer.
    std::vector<std::string> path = absl::StrSplit(value.name(), '.');
    Json* at = &object;
    for (size_t i = 0; i + 1 < path.size(); ++i) {
      Json& inner = (*at)[path[i]];
      if (!inner.is_object()) inner = Json::object();
      at = &inner;
    }
    Json& leaf = (*at)[path.back()];
    const v1::ParameterSpec* spec = SpecOf(study, value.name());
    switch (value.value_case()) {
      case v1::ParameterValue::kDoubleValue: {
        const double d = value.double_value();
        // A list of values written as integers reads back as integers.
        if (spec != nullptr && spec->has_discrete_spec() &&
            std::floor(d) == d && std::abs(d) < 9e15) {
          leaf = static_cast<int64_t>(d);
        } else {
          leaf = d;
        }
        break;
      }
      case v1::ParameterValue::kIntValue:
        leaf = value.int_value();
        break;
      case v1::ParameterValue::kStringValue:
        if (IsBool(booleans, value)) {
          leaf = value.string_value() == "True";
        } else {
          leaf = value.string_value();
        }
        break;
      case v1::ParameterValue::VALUE_NOT_SET:
        leaf = nullptr;
        break;
    }
  }
  return object.dump();
}

std::vector<std::string> ExpandWandbCommand(
    const std::vector<std::string>& command, const v1::Study& study,
    const ParameterValues& parameters, const std::string& json_file) {
  const std::set<std::string> booleans = Booleans(study);
  std::vector<std::string> argv;
  for (const std::string& word : command) {
    if (word == "${args}" || word == "${args_no_hyphens}" ||
        word == "${args_no_boolean_flags}") {
      for (const v1::ParameterValue& value : parameters) {
        const std::string text = FormatParameterValue(value);
        if (word == "${args_no_hyphens}") {
          argv.push_back(absl::StrCat(value.name(), "=", text));
        } else if (word == "${args_no_boolean_flags}" &&
                   IsBool(booleans, value)) {
          if (text == "True") argv.push_back(absl::StrCat("--", value.name()));
        } else {
          argv.push_back(absl::StrCat("--", value.name(), "=", text));
        }
      }
    } else if (word == "${args_json}") {
      argv.push_back(WandbArgsJson(study, parameters));
    } else if (word == "${args_json_file}") {
      argv.push_back(json_file);
    } else {
      argv.push_back(word);
    }
  }
  return argv;
}

absl::StatusOr<WandbRun> WandbRun::Prepare(
    const std::vector<std::string>& command, const v1::Study& study,
    const ParameterValues& parameters, const std::string& json_file) {
  WandbRun run;
  run.argv_ = ExpandWandbCommand(command, study, parameters, json_file);
  if (std::find(command.begin(), command.end(), "${args_json_file}") !=
      command.end()) {
    std::ofstream file(json_file, std::ios::trunc);
    file << WandbArgsJson(study, parameters) << '\n';
    file.close();
    if (!file) {
      std::error_code ignored;
      std::filesystem::remove(json_file, ignored);
      return absl::InternalError(
          absl::StrCat("cannot write ${args_json_file} \"", json_file, "\""));
    }
    run.written_ = json_file;
  }
  return run;
}

WandbRun::WandbRun(WandbRun&& other) noexcept
    : argv_(std::move(other.argv_)), written_(std::move(other.written_)) {
  other.written_.clear();
}

WandbRun::~WandbRun() {
  if (written_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove(written_, ignored);
}

}  // namespace hypertune::cli
