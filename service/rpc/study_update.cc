#include "service/rpc/study_update.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/limits.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/field_mask_util.h"
#include "google/protobuf/util/message_differencer.h"

namespace hypertune::service {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// The value at `path` in `spec`, in text format on one line.
std::string ValueText(const v1::StudySpec& spec, const std::string& path) {
  const Message* message = &spec;
  const FieldDescriptor* field = nullptr;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (field != nullptr) {
      message = &message->GetReflection()->GetMessage(*message, field);
    }
    field = message->GetDescriptor()->FindFieldByName(std::string(part));
    if (field == nullptr) return "";
  }
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  std::string text;
  if (!field->is_repeated()) {
    printer.PrintFieldValueToString(*message, field, -1, &text);
    return text;
  }
  const int n = message->GetReflection()->FieldSize(*message, field);
  std::vector<std::string> items;
  for (int i = 0; i < n; ++i) {
    std::string item;
    printer.PrintFieldValueToString(*message, field, i, &item);
    items.push_back(
        absl::StrCat("{", absl::StripTrailingAsciiWhitespace(item), "}"));
  }
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

// `p` without its domain (range or values): what may not change.
v1::ParameterSpec WithoutDomain(v1::ParameterSpec p) {
  switch (p.kind_case()) {
    case v1::ParameterSpec::kDoubleSpec:
      p.mutable_double_spec()->clear_min();
      p.mutable_double_spec()->clear_max();
      break;
    case v1::ParameterSpec::kIntegerSpec:
      p.mutable_integer_spec()->clear_min();
      p.mutable_integer_spec()->clear_max();
      break;
    case v1::ParameterSpec::kDiscreteSpec:
      p.mutable_discrete_spec()->clear_values();
      break;
    case v1::ParameterSpec::kCategoricalSpec:
      p.mutable_categorical_spec()->clear_values();
      break;
    case v1::ParameterSpec::KIND_NOT_SET:
      break;
  }
  return p;
}

template <typename T>
bool Contains(const google::protobuf::RepeatedField<T>& all, T v) {
  return std::find(all.begin(), all.end(), v) != all.end();
}
bool Contains(const google::protobuf::RepeatedPtrField<std::string>& all,
              const std::string& v) {
  return std::find(all.begin(), all.end(), v) != all.end();
}

// Whether `after` holds every value `before` does.
bool Grows(const v1::ParameterSpec& before, const v1::ParameterSpec& after) {
  switch (before.kind_case()) {
    case v1::ParameterSpec::kDoubleSpec:
      return after.double_spec().min() <= before.double_spec().min() &&
             after.double_spec().max() >= before.double_spec().max();
    case v1::ParameterSpec::kIntegerSpec:
      return after.integer_spec().min() <= before.integer_spec().min() &&
             after.integer_spec().max() >= before.integer_spec().max();
    case v1::ParameterSpec::kDiscreteSpec:
      for (double v : before.discrete_spec().values()) {
        if (!Contains(after.discrete_spec().values(), v)) return false;
      }
      return true;
    case v1::ParameterSpec::kCategoricalSpec:
      for (const std::string& v : before.categorical_spec().values()) {
        if (!Contains(after.categorical_spec().values(), v)) return false;
      }
      return true;
    case v1::ParameterSpec::KIND_NOT_SET:
      break;
  }
  return true;
}

// Whether `value` lies in `p`'s domain.
bool Holds(const v1::ParameterSpec& p, const v1::ParameterValue& value) {
  switch (p.kind_case()) {
    case v1::ParameterSpec::kDoubleSpec:
      return value.double_value() >= p.double_spec().min() &&
             value.double_value() <= p.double_spec().max();
    case v1::ParameterSpec::kIntegerSpec:
      return value.int_value() >= p.integer_spec().min() &&
             value.int_value() <= p.integer_spec().max();
    case v1::ParameterSpec::kDiscreteSpec:
      return Contains(p.discrete_spec().values(), value.double_value());
    case v1::ParameterSpec::kCategoricalSpec:
      return Contains(p.categorical_spec().values(), value.string_value());
    case v1::ParameterSpec::KIND_NOT_SET:
      break;
  }
  return true;
}

// "; trials outside it: 3, 7 (and 4 more)", or a note that none are.
std::string TrialsOutside(const v1::ParameterSpec& after,
                          const std::vector<v1::Trial>& trials) {
  constexpr size_t kNamed = 10;
  std::vector<int64_t> outside;
  for (const v1::Trial& t : trials) {
    for (const v1::ParameterValue& v : t.parameters()) {
      if (v.name() == after.name() && !Holds(after, v))
        outside.push_back(t.id());
    }
  }
  if (outside.empty()) {
    return "; no stored trial falls outside it, but a search space may only "
           "grow (create a new study, perhaps with --warm-start-from)";
  }
  std::string text = absl::StrCat(
      "; trials outside it: ",
      absl::StrJoin(outside.begin(),
                    outside.begin() + std::min(outside.size(), kNamed), ", "));
  if (outside.size() > kNamed) {
    absl::StrAppend(&text, " (and ", outside.size() - kNamed, " more)");
  }
  return text;
}

// "lr: [0.001, 0.1]" or "opt: 3 categories": a parameter's domain in a
// line whose size does not grow with its values.
std::string DomainText(const v1::ParameterSpec& p) {
  switch (p.kind_case()) {
    case v1::ParameterSpec::kDoubleSpec:
      return absl::StrCat(p.name(), ": [", p.double_spec().min(), ", ",
                          p.double_spec().max(), "]");
    case v1::ParameterSpec::kIntegerSpec:
      return absl::StrCat(p.name(), ": [", p.integer_spec().min(), ", ",
                          p.integer_spec().max(), "]");
    case v1::ParameterSpec::kDiscreteSpec:
      return absl::StrCat(p.name(), ": ", p.discrete_spec().values_size(),
                          " values");
    case v1::ParameterSpec::kCategoricalSpec:
      return absl::StrCat(p.name(), ": ", p.categorical_spec().values_size(),
                          " categories");
    case v1::ParameterSpec::KIND_NOT_SET:
      break;
  }
  return p.name();
}

// "; added \"a\", \"b\" (and 3 more)": the values `after` holds that `before`
// does not, listed up to kMaxChangeTextBytes.
std::string AddedValues(const v1::ParameterSpec& before,
                        const v1::ParameterSpec& after) {
  std::vector<std::string> added;
  if (after.has_categorical_spec()) {
    for (const std::string& v : after.categorical_spec().values()) {
      if (!Contains(before.categorical_spec().values(), v)) {
        added.push_back(absl::StrCat("\"", absl::CHexEscape(v), "\""));
      }
    }
  } else if (after.has_discrete_spec()) {
    for (double v : after.discrete_spec().values()) {
      if (!Contains(before.discrete_spec().values(), v)) {
        added.push_back(absl::StrCat(v));
      }
    }
  }
  if (added.empty()) return "";
  std::string text = "; added ";
  size_t listed = 0;
  for (; listed < added.size(); ++listed) {
    if (listed > 0 &&
        text.size() + added[listed].size() + 2 > kMaxChangeTextBytes) {
      break;
    }
    absl::StrAppend(&text, listed > 0 ? ", " : "", added[listed]);
  }
  if (listed < added.size()) {
    absl::StrAppend(&text, " (and ", added.size() - listed, " more)");
  }
  return text;
}

// Whether `path` applies to `rule`: the fields that rule reads.
bool EarlyStoppingFieldApplies(const std::string& path,
                               v1::EarlyStoppingSpec::Rule rule) {
  const bool median = rule == v1::EarlyStoppingSpec::MEDIAN ||
                      rule == v1::EarlyStoppingSpec::PERCENTILE;
  const bool asha = rule == v1::EarlyStoppingSpec::ASHA ||
                    rule == v1::EarlyStoppingSpec::HYPERBAND;
  if (path == "early_stopping.max_resource") return asha;
  if (path == "early_stopping.promote_by_model") {
    return rule == v1::EarlyStoppingSpec::ASHA;
  }
  return median;  // min_trials, grace_steps
}

}  // namespace

const std::vector<std::string>& UpdatableStudyPaths() {
  static const auto* paths =
      new std::vector<std::string>{"max_trials",
                                   "max_parallel_trials",
                                   "max_device_hours",
                                   "price_per_device_hour",
                                   "lease_seconds",
                                   "max_retries",
                                   "max_preemptions",
                                   "early_stopping.max_resource",
                                   "early_stopping.min_trials",
                                   "early_stopping.grace_steps",
                                   "early_stopping.promote_by_model",
                                   "parameters"};
  return *paths;
}

absl::StatusOr<v1::StudySpec> MergeStudyUpdate(
    const v1::StudySpec& spec, const v1::StudySpec& update,
    const google::protobuf::FieldMask& mask) {
  if (mask.paths().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("update_mask: empty; name the fields to change (",
                     absl::StrJoin(UpdatableStudyPaths(), ", "), ")"));
  }
  absl::flat_hash_set<std::string> seen;
  for (const std::string& path : mask.paths()) {
    const auto& allowed = UpdatableStudyPaths();
    if (std::find(allowed.begin(), allowed.end(), path) == allowed.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "update_mask: \"", absl::CHexEscape(path), "\" cannot be updated (",
          absl::StrJoin(allowed, ", "), " can)"));
    }
    if (!seen.insert(path).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("update_mask: \"", path, "\" is named twice"));
    }
    if (absl::StartsWith(path, "early_stopping.") &&
        !EarlyStoppingFieldApplies(path, spec.early_stopping().rule())) {
      const v1::EarlyStoppingSpec::Rule rule = spec.early_stopping().rule();
      return absl::InvalidArgumentError(absl::StrCat(
          "update_mask: \"", path, "\" does not apply to this study: ",
          rule == v1::EarlyStoppingSpec::RULE_UNSPECIFIED
              ? "it has no early-stopping rule"
              : absl::StrCat("its rule ",
                             v1::EarlyStoppingSpec::Rule_Name(rule),
                             " does not read it")));
    }
  }
  v1::StudySpec merged = spec;
  google::protobuf::util::FieldMaskUtil::MergeOptions options;
  options.set_replace_message_fields(false);
  options.set_replace_repeated_fields(true);
  google::protobuf::util::FieldMaskUtil::MergeMessageTo(update, mask, options,
                                                        &merged);
  // Optional scalars: a path named but unset clears it.
  if (seen.contains("max_retries") && !update.has_max_retries()) {
    merged.clear_max_retries();
  }
  if (seen.contains("max_preemptions") && !update.has_max_preemptions()) {
    merged.clear_max_preemptions();
  }
  return merged;
}

absl::Status CheckParametersGrow(const v1::StudySpec& before,
                                 const v1::StudySpec& after,
                                 const std::vector<v1::Trial>& trials) {
  for (int i = 0;
       i < std::max(before.parameters_size(), after.parameters_size()); ++i) {
    const std::string field = absl::StrCat("spec.parameters[", i, "]");
    if (i >= after.parameters_size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          field, ": removing parameter \"", before.parameters(i).name(),
          "\" would leave every trial with a value for a parameter the "
          "study no longer has"));
    }
    if (i >= before.parameters_size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          field, ": adding parameter \"", after.parameters(i).name(),
          "\" would leave every stored trial without a value for it"));
    }
    const v1::ParameterSpec& b = before.parameters(i);
    const v1::ParameterSpec& a = after.parameters(i);
    if (a.name() != b.name()) {
      return absl::FailedPreconditionError(
          absl::StrCat(field, ": \"", b.name(), "\" cannot become \"", a.name(),
                       "\" (parameters keep their names and order)"));
    }
    if (!google::protobuf::util::MessageDifferencer::Equals(WithoutDomain(b),
                                                            WithoutDomain(a))) {
      return absl::FailedPreconditionError(absl::StrCat(
          field, " (\"", b.name(),
          "\"): only its range may widen or its values grow; its kind, "
          "scale and conditions stay"));
    }
    if (!Grows(b, a)) {
      return absl::FailedPreconditionError(
          absl::StrCat(field, " (\"", b.name(),
                       "\"): the new domain drops "
                       "values of the old one",
                       TrialsOutside(a, trials)));
    }
  }
  return absl::OkStatus();
}

std::vector<v1::StudyChange::Field> RecordChanges(
    const v1::StudySpec& before, const v1::StudySpec& after,
    const google::protobuf::FieldMask& mask) {
  std::vector<v1::StudyChange::Field> fields;
  auto add = [&](const std::string& path, std::string was, std::string is) {
    v1::StudyChange::Field& field = fields.emplace_back();
    field.set_path(path);
    field.set_before(std::move(was));
    field.set_after(std::move(is));
  };
  for (const std::string& path : mask.paths()) {
    if (path != "parameters") {
      std::string was = ValueText(before, path);
      std::string is = ValueText(after, path);
      if (was != is) add(path, std::move(was), std::move(is));
      continue;
    }
    // Per parameter and only its domain: the whole list, twice per change,
    // would soon outgrow the study (CheckParametersGrow keeps the rest).
    const int n = std::min(before.parameters_size(), after.parameters_size());
    for (int i = 0; i < n; ++i) {
      const v1::ParameterSpec& b = before.parameters(i);
      const v1::ParameterSpec& a = after.parameters(i);
      if (google::protobuf::util::MessageDifferencer::Equals(a, b)) continue;
      add(path, DomainText(b), absl::StrCat(DomainText(a), AddedValues(b, a)));
    }
  }
  return fields;
}

bool RaisesBudget(const v1::StudySpec& before, const v1::StudySpec& after) {
  auto more = [](double b, double a) {
    // 0 is unlimited.
    return (b > 0 && a == 0) || (b > 0 && a > b);
  };
  return more(before.max_trials(), after.max_trials()) ||
         more(before.max_device_hours(), after.max_device_hours());
}

}  // namespace hypertune::service
