#include "common/proto_json.h"

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/double_text.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"

namespace hypertune {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// The mapping's spelling of a double or float, a negative zero as -0.0.
template <std::floating_point T>
void AppendFloating(T value, std::string* out) {
  if (value == 0 && std::signbit(value)) {
    out->append("-0.0");
  } else {
    AppendDoubleText(value, out, kJsonNonFinite);
  }
}

class Printer {
 public:
  Printer(const JsonStyle& style, std::string* out)
      : style_(style), out_(*out) {}

  void Object(const Message& message) {
    const Descriptor& descriptor = *message.GetDescriptor();
    // Well-known types have mappings of their own.
    if (descriptor.file()->package() == "google.protobuf") {
      return WellKnown(message);
    }
    const Reflection& reflection = *message.GetReflection();
    Open('{');
    bool first = true;
    for (int i = 0; i < descriptor.field_count(); ++i) {
      const FieldDescriptor& field = *descriptor.field(i);
      // Proto3 presence: scalars when not the default, messages and oneof
      // members when set, repeated fields when not empty.
      if (field.is_repeated() ? reflection.FieldSize(message, &field) == 0
                              : !reflection.HasField(message, &field)) {
        continue;
      }
      Next(&first);
      AppendJsonString(field.name(), &out_);
      Colon();
      const int n =
          field.is_repeated() ? reflection.FieldSize(message, &field) : 0;
      if (field.is_map()) {
        const FieldDescriptor& key = *field.message_type()->map_key();
        const FieldDescriptor& value = *field.message_type()->map_value();
        // Each entry's key as JSON, with its index, in the order printed.
        std::vector<std::pair<std::string, int>> entries(n);
        for (int j = 0; j < n; ++j) {
          const Message& entry =
              reflection.GetRepeatedMessage(message, &field, j);
          entries[j].second = j;
          MapKey(entry, *entry.GetReflection(), key, &entries[j].first);
        }
        if (style_.sorted_map_keys) std::sort(entries.begin(), entries.end());
        Open('{');
        bool first_entry = true;
        for (const auto& [key_json, j] : entries) {
          const Message& entry =
              reflection.GetRepeatedMessage(message, &field, j);
          Next(&first_entry);
          out_.append(key_json);
          Colon();
          Value(entry, *entry.GetReflection(), value, -1);
        }
        Close('}', first_entry);
      } else if (field.is_repeated()) {
        Open('[');
        bool first_element = true;
        for (int j = 0; j < n; ++j) {
          Next(&first_element);
          Value(message, reflection, field, j);
        }
        Close(']', first_element);
      } else {
        Value(message, reflection, field, -1);
      }
    }
    Close('}', first);
  }

 private:
  void Open(char bracket) {
    out_.push_back(bracket);
    ++depth_;
  }

  // Before a member or element: the comma after the one before it, and its
  // line.
  void Next(bool* first) {
    if (!*first) out_.push_back(',');
    *first = false;
    NewLine(depth_);
  }

  void Colon() {
    out_.push_back(':');
    if (style_.multiline) out_.push_back(' ');
  }

  // `empty`: nothing was written since Open.
  void Close(char bracket, bool empty) {
    --depth_;
    if (!empty) NewLine(depth_);
    out_.push_back(bracket);
  }

  void NewLine(int depth) {
    if (!style_.multiline) return;
    out_.push_back('\n');
    out_.append(depth, ' ');
  }

  void Integer(auto value) {
    if (style_.int64_as_numbers) {
      absl::StrAppend(&out_, value);
    } else {
      absl::StrAppend(&out_, "\"", value, "\"");
    }
  }

  // One value of `field` (element `index` when repeated, -1 when singular).
  void Value(const Message& message, const Reflection& reflection,
             const FieldDescriptor& field, int index) {
    const bool repeated = index >= 0;
    switch (field.cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        absl::StrAppend(&out_, repeated ? reflection.GetRepeatedInt32(
                                              message, &field, index)
                                        : reflection.GetInt32(message, &field));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        absl::StrAppend(
            &out_, repeated
                       ? reflection.GetRepeatedUInt32(message, &field, index)
                       : reflection.GetUInt32(message, &field));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        Integer(repeated ? reflection.GetRepeatedInt64(message, &field, index)
                         : reflection.GetInt64(message, &field));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        Integer(repeated ? reflection.GetRepeatedUInt64(message, &field, index)
                         : reflection.GetUInt64(message, &field));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        AppendFloating(
            repeated ? reflection.GetRepeatedDouble(message, &field, index)
                     : reflection.GetDouble(message, &field),
            &out_);
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        // A float's own shortest text: 0.1f is "0.1", not 0.100000001.
        AppendFloating(repeated
                           ? reflection.GetRepeatedFloat(message, &field, index)
                           : reflection.GetFloat(message, &field),
                       &out_);
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        out_.append((repeated
                         ? reflection.GetRepeatedBool(message, &field, index)
                         : reflection.GetBool(message, &field))
                        ? "true"
                        : "false");
        break;
      case FieldDescriptor::CPPTYPE_ENUM: {
        const int number =
            repeated ? reflection.GetRepeatedEnumValue(message, &field, index)
                     : reflection.GetEnumValue(message, &field);
        const auto* value = field.enum_type()->FindValueByNumber(number);
        if (value != nullptr) {
          AppendJsonString(value->name(), &out_);
        } else {
          absl::StrAppend(&out_, number);
        }
        break;
      }
      case FieldDescriptor::CPPTYPE_STRING: {
        std::string scratch;
        const std::string& text =
            repeated ? reflection.GetRepeatedStringReference(message, &field,
                                                             index, &scratch)
                     : reflection.GetStringReference(message, &field, &scratch);
        if (field.type() == FieldDescriptor::TYPE_BYTES) {
          absl::StrAppend(&out_, "\"", absl::Base64Escape(text), "\"");
        } else {
          AppendJsonString(text, &out_);
        }
        break;
      }
      case FieldDescriptor::CPPTYPE_MESSAGE:
        Object(repeated ? reflection.GetRepeatedMessage(message, &field, index)
                        : reflection.GetMessage(message, &field));
        break;
    }
  }

  // Appends a map key as a JSON object key: always a string.
  static void MapKey(const Message& entry, const Reflection& reflection,
                     const FieldDescriptor& key, std::string* out) {
    if (key.cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      std::string scratch;
      AppendJsonString(reflection.GetStringReference(entry, &key, &scratch),
                       out);
      return;
    }
    std::string text;
    Printer(JsonStyle{.int64_as_numbers = true}, &text)
        .Value(entry, reflection, key, -1);
    absl::StrAppend(out, "\"", text, "\"");
  }

  void WellKnown(const Message& message) {
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    std::string text;
    (void)google::protobuf::util::MessageToJsonString(message, &text, options);
    out_.append(text);
  }

  const JsonStyle style_;
  std::string& out_;
  int depth_ = 0;
};

}  // namespace

void AppendJsonNumber(double value, std::string* out) {
  AppendFloating(value, out);
}

void AppendJsonString(absl::string_view text, std::string* out) {
  out->push_back('"');
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
          out->append(buffer);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

void AppendJson(const Message& message, std::string* out,
                const JsonStyle& style) {
  Printer(style, out).Object(message);
}

std::string ToJson(const Message& message, const JsonStyle& style) {
  std::string out;
  AppendJson(message, &out, style);
  return out;
}

}  // namespace hypertune
