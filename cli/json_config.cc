#include "cli/json_config.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/format.h"
#include "common/trial_csv.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::cli {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
// Ordered: problems are listed in the order of the text.
using Json = nlohmann::ordered_json;

// Every "path: problem" found in a text, so that one answer lists them all.
using Problems = std::vector<std::string>;

// The value as it was written, cut short.
std::string Brief(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return absl::StrCat(value.type_name(), " ", text);
}

std::string EnumNames(const EnumDescriptor& type) {
  std::vector<std::string> names;
  for (int i = 0; i < type.value_count(); ++i) {
    if (type.value(i)->number() != 0) names.push_back(type.value(i)->name());
  }
  return absl::StrJoin(names, ", ");
}

// The field `key` names: its proto name or its lowerCamel JSON name.
const FieldDescriptor* FindField(const Descriptor& type,
                                 const std::string& key) {
  if (const FieldDescriptor* f = type.FindFieldByName(key)) return f;
  for (int i = 0; i < type.field_count(); ++i) {
    if (type.field(i)->json_name() == key) return type.field(i);
  }
  return nullptr;
}

std::string UnknownField(const Descriptor& type, const std::string& key) {
  std::string nearest;
  int best = std::max<int>(2, static_cast<int>(key.size()) / 3) + 1;
  std::vector<std::string> known;
  for (int i = 0; i < type.field_count(); ++i) {
    const std::string& name = type.field(i)->name();
    known.push_back(name);
    if (int d = EditDistance(key, name); d < best) {
      best = d;
      nearest = name;
    }
  }
  return nearest.empty()
             ? absl::StrCat("unknown field \"", key,
                            "\" (known: ", absl::StrJoin(known, ", "), ")")
             : absl::StrCat("unknown field \"", key, "\" (did you mean \"",
                            nearest, "\"?)");
}

std::string At(const std::string& path, const std::string& problem) {
  return path.empty() ? problem : absl::StrCat(path, ": ", problem);
}

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : absl::StrCat(path, ".", key);
}

void CheckMessage(const Json& value, const Descriptor& type,
                  const std::string& path, Problems& problems);

// One value (not a list) of `field`.
void CheckValue(const Json& value, const FieldDescriptor& field,
                const std::string& path, Problems& problems) {
  if (value.is_null()) return;
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_MESSAGE:
      // Well-known types have their own JSON forms; protobuf checks those.
      if (field.message_type()->file()->package() == "google.protobuf") {
        return;
      }
      if (!value.is_object()) {
        problems.push_back(
            At(path, absl::StrCat("expected an object, got ", Brief(value))));
        return;
      }
      CheckMessage(value, *field.message_type(), path, problems);
      return;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const EnumDescriptor& type = *field.enum_type();
      const bool known =
          (value.is_string() &&
           type.FindValueByName(value.get<std::string>()) != nullptr) ||
          (value.is_number_integer() &&
           type.FindValueByNumber(value.get<int>()) != nullptr);
      if (known) return;
      problems.push_back(
          At(path, absl::StrCat("unknown ", type.name(), " ", Brief(value),
                                " (one of ", EnumNames(type), ")")));
      return;
    }
    case FieldDescriptor::CPPTYPE_STRING:
      if (value.is_string()) return;
      problems.push_back(
          At(path, absl::StrCat("expected a string, got ", Brief(value))));
      return;
    case FieldDescriptor::CPPTYPE_BOOL:
      if (value.is_boolean()) return;
      problems.push_back(
          At(path, absl::StrCat("expected true or false, got ", Brief(value))));
      return;
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64: {
      int64_t parsed = 0;
      const bool integral =
          value.is_number_integer() ||
          (value.is_number_float() &&
           std::floor(value.get<double>()) == value.get<double>()) ||
          (value.is_string() &&
           absl::SimpleAtoi(value.get<std::string>(), &parsed));
      if (integral) return;
      problems.push_back(
          At(path, absl::StrCat("expected an integer, got ", Brief(value))));
      return;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
      double parsed = 0;
      if (value.is_number()) return;
      if (value.is_string()) {
        const std::string& text = value.get<std::string>();
        if (text == "Infinity" || text == "-Infinity" || text == "NaN" ||
            absl::SimpleAtod(text, &parsed)) {
          return;
        }
      }
      problems.push_back(
          At(path, absl::StrCat("expected a number, got ", Brief(value))));
      return;
    }
  }
}

// `path[i]`, with the element's name where it has one: 'metrics[0] ("loss")'.
std::string ElementPath(const std::string& path, size_t i,
                        const Json& element) {
  std::string out = absl::StrCat(path, "[", i, "]");
  if (element.is_object()) {
    auto name = element.find("name");
    if (name != element.end() && name->is_string()) {
      absl::StrAppend(&out, " (\"", name->get<std::string>(), "\")");
    }
  }
  return out;
}

void CheckMessage(const Json& value, const Descriptor& type,
                  const std::string& path, Problems& problems) {
  // The key that set each field (or member of a oneof) so far: two keys for
  // one field ("maxTrials" and "max_trials") would leave only one standing.
  std::vector<std::pair<const void*, std::string>> set_by;
  auto first_setter = [&](const void* what) -> const std::string* {
    for (const auto& [set, key] : set_by) {
      if (set == what) return &key;
    }
    return nullptr;
  };
  for (const auto& [key, item] : value.items()) {
    const std::string item_path = Join(path, key);
    const FieldDescriptor* field = FindField(type, key);
    if (field == nullptr) {
      problems.push_back(At(item_path, UnknownField(type, key)));
      continue;
    }
    if (const std::string* other = first_setter(field)) {
      problems.push_back(
          At(path, absl::StrCat("\"", *other, "\" and \"", key, "\" both set ",
                                field->name(), "; keep one")));
      continue;
    }
    set_by.emplace_back(field, key);
    if (item.is_null()) continue;
    if (const auto* oneof = field->real_containing_oneof()) {
      if (const std::string* other = first_setter(oneof)) {
        problems.push_back(
            At(path, absl::StrCat("\"", *other, "\" and \"", key,
                                  "\" are both set, but only one of ",
                                  oneof->name(), " may be")));
      } else {
        set_by.emplace_back(oneof, key);
      }
    }
    if (field->is_map()) {
      if (!item.is_object()) {
        problems.push_back(At(
            item_path, absl::StrCat("expected an object, got ", Brief(item))));
        continue;
      }
      const FieldDescriptor& entry = *field->message_type()->map_value();
      for (const auto& [k, v] : item.items()) {
        CheckValue(v, entry, absl::StrCat(item_path, "[\"", k, "\"]"),
                   problems);
      }
    } else if (field->is_repeated()) {
      if (!item.is_array()) {
        problems.push_back(
            At(item_path, absl::StrCat("expected a list, got ", Brief(item))));
        continue;
      }
      for (size_t i = 0; i < item.size(); ++i) {
        CheckValue(item[i], *field, ElementPath(item_path, i, item[i]),
                   problems);
      }
    } else {
      CheckValue(item, *field, item_path, problems);
    }
  }
}

// Follows the parser through the text and notes each key that an object
// holds twice: JSON parsers keep one of them (nlohmann the last) silently.
class RepeatedKeys {
 public:
  bool operator()(int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start: {
        Level level;
        level.object = event == Json::parse_event_t::object_start;
        level.path = ChildPath();
        levels_.push_back(std::move(level));
        break;
      }
      case Json::parse_event_t::key: {
        Level& level = levels_.back();
        level.key = parsed.get<std::string>();
        if (!level.keys.insert(level.key).second) {
          found_.push_back(At(level.path, absl::StrCat("\"", level.key,
                                                       "\" is given twice; "
                                                       "keep one")));
        }
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        levels_.pop_back();
        Advance();
        break;
      case Json::parse_event_t::value:
        Advance();
        break;
    }
    return true;
  }

  const Problems& found() const { return found_; }

 private:
  struct Level {
    bool object = false;
    std::string path;
    std::set<std::string> keys;  // Objects: the keys so far.
    std::string key;             // Objects: the latest key.
    size_t index = 0;            // Arrays: the element being read.
  };

  // The path of the value that begins now.
  std::string ChildPath() const {
    if (levels_.empty()) return "";
    const Level& parent = levels_.back();
    return parent.object ? Join(parent.path, parent.key)
                         : absl::StrCat(parent.path, "[", parent.index, "]");
  }

  // A value ended: an array's next one begins.
  void Advance() {
    if (!levels_.empty() && !levels_.back().object) ++levels_.back().index;
  }

  std::vector<Level> levels_;
  Problems found_;
};

// The member of `object` that sets `field` of `type` (by either name);
// null when none does.
const Json* Member(const Json& object, const Descriptor& type,
                   const std::string& field) {
  if (!object.is_object()) return nullptr;
  for (const auto& [key, item] : object.items()) {
    const FieldDescriptor* f = FindField(type, key);
    if (f != nullptr && f->name() == field && !item.is_null()) return &item;
  }
  return nullptr;
}

// A number written as JSON or as protobuf's quoted form; nullopt otherwise.
std::optional<double> NumberOf(const Json* value) {
  if (value == nullptr) return std::nullopt;
  if (value->is_number()) return value->get<double>();
  double parsed = 0;
  if (value->is_string() &&
      absl::SimpleAtod(value->get<std::string>(), &parsed)) {
    return parsed;
  }
  return std::nullopt;
}

bool IsLog(const Json* scale) {
  return scale != nullptr &&
         ((scale->is_string() && scale->get<std::string>() == "LOG") ||
          (scale->is_number_integer() && scale->get<int>() == v1::LOG));
}

// A range spec (double_spec, integer_spec) at `path`: both bounds given,
// min <= max, min > 0 on a log scale.
void CheckRange(const Json& spec, const Descriptor& type,
                const std::string& path, Problems& problems) {
  const Json* min = Member(spec, type, "min");
  const Json* max = Member(spec, type, "max");
  if (min == nullptr) problems.push_back(At(path + ".min", "missing"));
  if (max == nullptr) problems.push_back(At(path + ".max", "missing"));
  const std::optional<double> low = NumberOf(min);
  const std::optional<double> high = NumberOf(max);
  if (low.has_value() && high.has_value() && *low > *high) {
    problems.push_back(
        At(path, absl::StrCat("min ", DoubleText(*low), " exceeds max ",
                              DoubleText(*high))));
  }
  if (low.has_value() && *low <= 0 && IsLog(Member(spec, type, "scale"))) {
    problems.push_back(At(path, absl::StrCat("a LOG scale needs min > 0, got ",
                                             DoubleText(*low))));
  }
}

// A list field of `object` that must hold at least one element: its elements,
// or null after noting the problem (a wrong type was noted by the walk).
const Json* NonEmptyList(const Json& object, const Descriptor& type,
                         const std::string& field, const std::string& path,
                         const std::string& what, Problems& problems) {
  const Json* list = Member(object, type, field);
  if (list == nullptr || (list->is_array() && list->empty())) {
    problems.push_back(At(Join(path, field), absl::StrCat("missing: ", what)));
    return nullptr;
  }
  return list->is_array() ? list : nullptr;
}

// What a study needs beyond its schema before the server will take it: a
// name, parameters (each named, of one kind, a range the right way round),
// metrics (each named; the objectives with a goal). The server's validation
// (service/rpc/validation.h) stays the judge; these are the mistakes a person
// makes most, found all at once.
void CheckStudy(const Json& study, Problems& problems) {
  const Descriptor& study_type = *v1::Study::descriptor();
  const Descriptor& spec_type = *v1::StudySpec::descriptor();
  const Descriptor& parameter_type = *v1::ParameterSpec::descriptor();
  const Descriptor& metric_type = *v1::MetricSpec::descriptor();
  const Json* name = Member(study, study_type, "name");
  if (name == nullptr ||
      (name->is_string() && name->get<std::string>().empty())) {
    problems.push_back(At("name", "missing: the study's name"));
  }
  const Json* spec = Member(study, study_type, "spec");
  if (spec == nullptr) {
    problems.push_back(
        At("spec", "missing: the parameters, metrics and budget"));
    return;
  }
  if (!spec->is_object()) return;
  if (const Json* parameters =
          NonEmptyList(*spec, spec_type, "parameters", "spec",
                       "at least one parameter", problems)) {
    for (size_t i = 0; i < parameters->size(); ++i) {
      const Json& p = (*parameters)[i];
      if (!p.is_object()) continue;
      const std::string path = ElementPath("spec.parameters", i, p);
      if (Member(p, parameter_type, "name") == nullptr) {
        problems.push_back(At(path + ".name", "missing"));
      }
      bool has_kind = false;
      for (const char* kind : {"double_spec", "integer_spec"}) {
        if (const Json* range = Member(p, parameter_type, kind)) {
          has_kind = true;
          if (range->is_object()) {
            CheckRange(*range,
                       *parameter_type.FindFieldByName(kind)->message_type(),
                       absl::StrCat(path, ".", kind), problems);
          }
        }
      }
      for (const char* kind : {"discrete_spec", "categorical_spec"}) {
        has_kind = has_kind || Member(p, parameter_type, kind) != nullptr;
      }
      if (!has_kind) {
        problems.push_back(At(path,
                              "missing: one of double_spec, "
                              "integer_spec, discrete_spec or "
                              "categorical_spec"));
      }
    }
  }
  if (const Json* metrics = NonEmptyList(
          *spec, spec_type, "metrics", "spec",
          "at least one metric (the first is the objective)", problems)) {
    // Without roles the first metric is the objective; with roles, those
    // that say OBJECTIVE.
    bool roles = false;
    for (const Json& m : *metrics) {
      roles = roles || Member(m, metric_type, "role") != nullptr;
    }
    for (size_t i = 0; i < metrics->size(); ++i) {
      const Json& m = (*metrics)[i];
      if (!m.is_object()) continue;
      const std::string path = ElementPath("spec.metrics", i, m);
      if (Member(m, metric_type, "name") == nullptr) {
        problems.push_back(At(path + ".name", "missing"));
      }
      const Json* role = Member(m, metric_type, "role");
      const bool objective =
          roles ? role != nullptr &&
                      ((role->is_string() &&
                        role->get<std::string>() == "OBJECTIVE") ||
                       (role->is_number_integer() &&
                        role->get<int>() == v1::MetricSpec::OBJECTIVE))
                : i == 0;
      if (objective && Member(m, metric_type, "goal") == nullptr) {
        problems.push_back(
            At(path + ".goal", "missing: MINIMIZE or MAXIMIZE (an objective)"));
      }
    }
  }
}

// 1-based line and column of byte `offset` of `text`.
std::pair<int, int> LineAndColumn(std::string_view text, size_t offset) {
  int line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// ParseJsonConfig, with `more` adding the problems of a particular message.
absl::Status Parse(std::string_view json, std::string_view source,
                   google::protobuf::Message* message,
                   const std::function<void(const Json&, Problems&)>& more) {
  // Before any parser sees it: they, and the checks below, recurse per level.
  if (std::optional<size_t> at = JsonTooDeepAt(json, kMaxJsonDepth)) {
    const auto [line, column] = LineAndColumn(json, *at);
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ": JSON nested deeper than ",
                     kMaxJsonDepth, " levels (line ", line, ", column ", column,
                     "); no hypertune message nests that deep"));
  }
  Json parsed;
  RepeatedKeys repeated;
  try {
    parsed = Json::parse(
        json.begin(), json.end(),
        [&repeated](int depth, Json::parse_event_t event, Json& value) {
          return repeated(depth, event, value);
        });
  } catch (const Json::parse_error& e) {
    // e.byte is the 1-based offset of the character that broke the syntax.
    const auto [line, column] =
        LineAndColumn(json, e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    if (size_t at = what.find("syntax error"); at != std::string::npos) {
      what = what.substr(at);
    }
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ": not valid JSON (line ", line,
                     ", column ", column, "): ", what));
  }
  if (!parsed.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(source), ": expected a JSON object, got ", Brief(parsed)));
  }
  Problems problems = repeated.found();
  CheckMessage(parsed, *message->GetDescriptor(), "", problems);
  if (more) more(parsed, problems);
  if (problems.size() == 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ": ", problems[0]));
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ": ", problems.size(),
                     " problems:\n  ", absl::StrJoin(problems, "\n  ")));
  }
  // Whatever the walk above does not judge (an int64 out of range),
  // protobuf's parser does.
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  // "-0" would be read as the integer 0 (a double's sign lost).
  const std::string text = KeepNegativeZero(json);
  auto status =
      google::protobuf::util::JsonStringToMessage(text, message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(source), ": not a valid ", message->GetTypeName(), ": ",
        std::string(status.message())));
  }
  return absl::OkStatus();
}

}  // namespace

int EditDistance(std::string_view a, std::string_view b) {
  // Optimal string alignment over three rows.
  std::vector<int> before(b.size() + 1), previous(b.size() + 1),
      current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min(
          {previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    before.swap(previous);
    previous.swap(current);
  }
  return previous[b.size()];
}

std::optional<size_t> JsonTooDeepAt(std::string_view json, int max_depth) {
  int depth = 0;
  JsonStrings strings;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (strings.Inside(c)) continue;
    if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

absl::Status ParseJsonConfig(std::string_view json, std::string_view source,
                             google::protobuf::Message* message) {
  return Parse(json, source, message, nullptr);
}

absl::Status ParseStudyConfig(std::string_view json, std::string_view source,
                              v1::Study* study) {
  return Parse(json, source, study, CheckStudy);
}

}  // namespace hypertune::cli
