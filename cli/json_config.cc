#include "cli/json_config.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/format.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"

namespace hypertune::cli {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using Json = nlohmann::json;

// "path: problem", or nullopt when the value fits.
using Problem = std::optional<std::string>;

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
const FieldDescriptor* FindField(const Descriptor& type, const std::string& key) {
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
             ? absl::StrCat("unknown field \"", key, "\" (known: ",
                            absl::StrJoin(known, ", "), ")")
             : absl::StrCat("unknown field \"", key, "\" (did you mean \"",
                            nearest, "\"?)");
}

Problem CheckMessage(const Json& value, const Descriptor& type,
                     const std::string& path);

Problem At(const std::string& path, std::string problem) {
  return absl::StrCat(path, ": ", problem);
}

// One value (not a list) of `field`.
Problem CheckValue(const Json& value, const FieldDescriptor& field,
                   const std::string& path) {
  if (value.is_null()) return std::nullopt;
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_MESSAGE:
      // Well-known types have their own JSON forms; protobuf checks those.
      if (field.message_type()->file()->package() == "google.protobuf") {
        return std::nullopt;
      }
      if (!value.is_object()) {
        return At(path, absl::StrCat("expected an object, got ", Brief(value)));
      }
      return CheckMessage(value, *field.message_type(), path);
    case FieldDescriptor::CPPTYPE_ENUM: {
      const EnumDescriptor& type = *field.enum_type();
      const bool known =
          (value.is_string() &&
           type.FindValueByName(value.get<std::string>()) != nullptr) ||
          (value.is_number_integer() &&
           type.FindValueByNumber(value.get<int>()) != nullptr);
      if (known) return std::nullopt;
      return At(path, absl::StrCat("unknown ", type.name(), " ", Brief(value),
                                   " (one of ", EnumNames(type), ")"));
    }
    case FieldDescriptor::CPPTYPE_STRING:
      if (value.is_string()) return std::nullopt;
      return At(path, absl::StrCat("expected a string, got ", Brief(value)));
    case FieldDescriptor::CPPTYPE_BOOL:
      if (value.is_boolean()) return std::nullopt;
      return At(path, absl::StrCat("expected true or false, got ", Brief(value)));
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
      if (integral) return std::nullopt;
      return At(path, absl::StrCat("expected an integer, got ", Brief(value)));
    }
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
      double parsed = 0;
      if (value.is_number()) return std::nullopt;
      if (value.is_string()) {
        const std::string& text = value.get<std::string>();
        if (text == "Infinity" || text == "-Infinity" || text == "NaN" ||
            absl::SimpleAtod(text, &parsed)) {
          return std::nullopt;
        }
      }
      return At(path, absl::StrCat("expected a number, got ", Brief(value)));
    }
  }
  return std::nullopt;
}

// `path[i]`, with the element's name where it has one: 'metrics[0] ("loss")'.
std::string ElementPath(const std::string& path, size_t i, const Json& element) {
  std::string out = absl::StrCat(path, "[", i, "]");
  if (element.is_object()) {
    auto name = element.find("name");
    if (name != element.end() && name->is_string()) {
      absl::StrAppend(&out, " (\"", name->get<std::string>(), "\")");
    }
  }
  return out;
}

Problem CheckMessage(const Json& value, const Descriptor& type,
                     const std::string& path) {
  for (const auto& [key, item] : value.items()) {
    const std::string item_path = path.empty() ? key : absl::StrCat(path, ".", key);
    const FieldDescriptor* field = FindField(type, key);
    if (field == nullptr) return At(item_path, UnknownField(type, key));
    if (item.is_null()) continue;
    if (field->is_map()) {
      if (!item.is_object()) {
        return At(item_path, absl::StrCat("expected an object, got ", Brief(item)));
      }
      const FieldDescriptor& entry = *field->message_type()->map_value();
      for (const auto& [k, v] : item.items()) {
        if (Problem p = CheckValue(v, entry, absl::StrCat(item_path, "[\"", k, "\"]"))) {
          return p;
        }
      }
    } else if (field->is_repeated()) {
      if (!item.is_array()) {
        return At(item_path, absl::StrCat("expected a list, got ", Brief(item)));
      }
      for (size_t i = 0; i < item.size(); ++i) {
        if (Problem p = CheckValue(item[i], *field, ElementPath(item_path, i, item[i]))) {
          return p;
        }
      }
    } else if (Problem p = CheckValue(item, *field, item_path)) {
      return p;
    }
  }
  return std::nullopt;
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
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1,
                             previous[j - 1] + cost});
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
  // Before any parser sees it: they, and the checks below, recurse per level.
  if (std::optional<size_t> at = JsonTooDeepAt(json, kMaxJsonDepth)) {
    const auto [line, column] = LineAndColumn(json, *at);
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(source), ": JSON nested deeper than ", kMaxJsonDepth,
        " levels (line ", line, ", column ", column,
        "); no hypertune message nests that deep"));
  }
  Json parsed;
  try {
    parsed = Json::parse(json.begin(), json.end());
  } catch (const Json::parse_error& e) {
    // e.byte is the 1-based offset of the character that broke the syntax.
    const auto [line, column] =
        LineAndColumn(json, e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    if (size_t at = what.find("syntax error"); at != std::string::npos) {
      what = what.substr(at);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(source), ": not valid JSON (line ", line, ", column ",
        column, "): ",
        what));
  }
  if (!parsed.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(source), ": expected a JSON object, got ", Brief(parsed)));
  }
  if (Problem p = CheckMessage(parsed, *message->GetDescriptor(), "")) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ": ", *p));
  }
  // Whatever the walk above does not judge (two members of one oneof, an
  // int64 out of range), protobuf's parser does.
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  // "-0" would be read as the integer 0 (a double's sign lost).
  const std::string text = KeepNegativeZero(json);
  auto status = google::protobuf::util::JsonStringToMessage(text, message,
                                                            options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ": not a valid ",
                     message->GetTypeName(), ": ",
                     std::string(status.message())));
  }
  return absl::OkStatus();
}

}  // namespace hypertune::cli
