#include "service/http/json.h"

#include <cmath>
#include <concepts>
#include <cstdio>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/double_text.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::service {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// The mapping spells the non-finite as strings.
template <std::floating_point T>
void AppendFloating(T value, std::string* out) {
  AppendDoubleText(value, out, kJsonNonFinite);
}

// One value of `field` (element `index` when repeated, -1 when singular).
void AppendValue(const Message& message, const Reflection& reflection,
                 const FieldDescriptor& field, int index, std::string* out) {
  const bool repeated = index >= 0;
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      absl::StrAppend(
          out, repeated ? reflection.GetRepeatedInt32(message, &field, index)
                        : reflection.GetInt32(message, &field));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      absl::StrAppend(
          out, repeated ? reflection.GetRepeatedUInt32(message, &field, index)
                        : reflection.GetUInt32(message, &field));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      absl::StrAppend(out, "\"",
                      repeated
                          ? reflection.GetRepeatedInt64(message, &field, index)
                          : reflection.GetInt64(message, &field),
                      "\"");
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      absl::StrAppend(out, "\"",
                      repeated
                          ? reflection.GetRepeatedUInt64(message, &field, index)
                          : reflection.GetUInt64(message, &field),
                      "\"");
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      AppendFloating(repeated
                         ? reflection.GetRepeatedDouble(message, &field, index)
                         : reflection.GetDouble(message, &field),
                     out);
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      AppendFloating(repeated
                         ? reflection.GetRepeatedFloat(message, &field, index)
                         : reflection.GetFloat(message, &field),
                     out);
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      out->append((repeated ? reflection.GetRepeatedBool(message, &field, index)
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
        AppendJsonString(value->name(), out);
      } else {
        absl::StrAppend(out, number);
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
        absl::StrAppend(out, "\"", absl::Base64Escape(text), "\"");
      } else {
        AppendJsonString(text, out);
      }
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      const Message& sub =
          repeated ? reflection.GetRepeatedMessage(message, &field, index)
                   : reflection.GetMessage(message, &field);
      AppendJson(sub, out);
      break;
    }
  }
}

// A map key as a JSON object key: always a string.
void AppendMapKey(const Message& entry, std::string* out) {
  const Reflection& reflection = *entry.GetReflection();
  const FieldDescriptor& key = *entry.GetDescriptor()->map_key();
  if (key.cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    std::string scratch;
    AppendJsonString(reflection.GetStringReference(entry, &key, &scratch), out);
    return;
  }
  std::string text;
  AppendValue(entry, reflection, key, -1, &text);
  if (text.front() != '"') text = absl::StrCat("\"", text, "\"");
  out->append(text);
}

// Hand-written printers of the messages a page of trials consists of,
// about three times faster than the reflective walk. They know the fields
// of the proto they were written against; a message with more fields (a
// newer proto) goes the reflective way, so nothing is ever left out.
bool FastPathsMatchTheProto() {
  return v1::Trial::descriptor()->field_count() == 20 &&
         v1::Measurement::descriptor()->field_count() == 3 &&
         v1::ParameterValue::descriptor()->field_count() == 4;
}

// Appends `,"name":` (without the comma for the object's first field).
void Key(const char* name, bool* first, std::string* out) {
  if (!*first) out->push_back(',');
  *first = false;
  out->push_back('"');
  out->append(name);
  out->append("\":");
}

void String(const char* name, const std::string& value, bool* first,
            std::string* out) {
  if (value.empty()) return;
  Key(name, first, out);
  AppendJsonString(value, out);
}

void Int64(const char* name, int64_t value, bool* first, std::string* out) {
  if (value == 0) return;
  Key(name, first, out);
  absl::StrAppend(out, "\"", value, "\"");
}

void Int32(const char* name, int32_t value, bool* first, std::string* out) {
  if (value == 0) return;
  Key(name, first, out);
  absl::StrAppend(out, value);
}

// Repeated message field `name` as a JSON array (left out when empty), each
// element written by `append_item`.
template <typename Item, typename AppendItem>
void Repeated(const char* name,
              const google::protobuf::RepeatedPtrField<Item>& items,
              AppendItem append_item, bool* first, std::string* out) {
  if (items.empty()) return;
  Key(name, first, out);
  out->push_back('[');
  for (int i = 0; i < items.size(); ++i) {
    if (i > 0) out->push_back(',');
    append_item(items[i], out);
  }
  out->push_back(']');
}

void Double(const char* name, double value, bool* first, std::string* out) {
  // Proto3 leaves out 0 (and -0, whose bits differ but which is "default").
  if (value == 0 && !std::signbit(value)) return;
  Key(name, first, out);
  AppendFloating(value, out);
}

// Map field `name` as a JSON object (left out when empty), each value
// written by `append_value`.
template <typename Map, typename AppendValue>
void MapField(const char* name, const Map& map, AppendValue append_value,
              bool* first, std::string* out) {
  if (map.empty()) return;
  Key(name, first, out);
  out->push_back('{');
  bool first_entry = true;
  for (const auto& [key, value] : map) {
    if (!first_entry) out->push_back(',');
    first_entry = false;
    AppendJsonString(key, out);
    out->push_back(':');
    append_value(value, out);
  }
  out->push_back('}');
}

void AppendMeasurement(const v1::Measurement& m, std::string* out) {
  out->push_back('{');
  bool first = true;
  Int64("step", m.step(), &first, out);
  Double("elapsed_seconds", m.elapsed_seconds(), &first, out);
  MapField("metrics", m.metrics(), AppendFloating<double>, &first, out);
  out->push_back('}');
}

void AppendAttempt(const v1::Attempt& a, std::string* out) {
  out->push_back('{');
  bool first = true;
  Int32("number", a.number(), &first, out);
  String("client_id", a.client_id(), &first, out);
  Repeated("measurements", a.measurements(), AppendMeasurement, &first, out);
  String("end_reason", a.end_reason(), &first, out);
  Int64("end_time_ms", a.end_time_ms(), &first, out);
  Double("device_seconds", a.device_seconds(), &first, out);
  out->push_back('}');
}

void AppendParameter(const v1::ParameterValue& p, std::string* out) {
  out->push_back('{');
  bool first = true;
  String("name", p.name(), &first, out);
  switch (p.value_case()) {
    case v1::ParameterValue::kDoubleValue:
      Key("double_value", &first, out);
      AppendFloating(p.double_value(), out);
      break;
    case v1::ParameterValue::kIntValue:
      Key("int_value", &first, out);
      absl::StrAppend(out, "\"", p.int_value(), "\"");
      break;
    case v1::ParameterValue::kStringValue:
      Key("string_value", &first, out);
      AppendJsonString(p.string_value(), out);
      break;
    case v1::ParameterValue::VALUE_NOT_SET:
      break;
  }
  out->push_back('}');
}

void AppendTrial(const v1::Trial& t, std::string* out) {
  out->push_back('{');
  bool first = true;
  String("study_name", t.study_name(), &first, out);
  Int64("id", t.id(), &first, out);
  if (t.state() != 0) {
    Key("state", &first, out);
    AppendJsonString(v1::Trial::State_Name(t.state()), out);
  }
  Repeated("parameters", t.parameters(), AppendParameter, &first, out);
  String("client_id", t.client_id(), &first, out);
  Repeated("measurements", t.measurements(), AppendMeasurement, &first, out);
  if (t.has_final_measurement()) {
    Key("final_measurement", &first, out);
    AppendMeasurement(t.final_measurement(), out);
  }
  String("infeasible_reason", t.infeasible_reason(), &first, out);
  String("checkpoint_uri", t.checkpoint_uri(), &first, out);
  Int64("create_time_ms", t.create_time_ms(), &first, out);
  Int64("start_time_ms", t.start_time_ms(), &first, out);
  Int64("end_time_ms", t.end_time_ms(), &first, out);
  Int64("lease_expire_time_ms", t.lease_expire_time_ms(), &first, out);
  Int64("lease_epoch", t.lease_epoch(), &first, out);
  Int32("retry_count", t.retry_count(), &first, out);
  Int32("preemption_count", t.preemption_count(), &first, out);
  Double("device_seconds", t.device_seconds(), &first, out);
  Double("cost", t.cost(), &first, out);
  String("log_path", t.log_path(), &first, out);
  String("failure_reason", t.failure_reason(), &first, out);
  String("stop_reason", t.stop_reason(), &first, out);
  if (t.warm_start()) {
    Key("warm_start", &first, out);
    out->append("true");
  }
  if (t.has_feasible()) {
    Key("feasible", &first, out);
    out->append(t.feasible() ? "true" : "false");
  }
  MapField(
      "attributes", t.attributes(),
      [](const std::string& value, std::string* o) {
        AppendJsonString(value, o);
      },
      &first, out);
  Int32("attempt", t.attempt(), &first, out);
  Repeated("earlier_attempts", t.earlier_attempts(), AppendAttempt, &first,
           out);
  Int64("checkpoint_step", t.checkpoint_step(), &first, out);
  Double("lease_device_seconds", t.lease_device_seconds(), &first, out);
  out->push_back('}');
}

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

void AppendJson(const Message& message, std::string* out) {
  const google::protobuf::Descriptor& descriptor = *message.GetDescriptor();
  // Well-known types have mappings of their own: protobuf's printer knows
  // them (our API has none today).
  if (descriptor.file()->package() == "google.protobuf") {
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    std::string text;
    (void)google::protobuf::util::MessageToJsonString(message, &text, options);
    out->append(text);
    return;
  }
  static const bool fast = FastPathsMatchTheProto();
  if (fast) {
    if (const auto* trial = dynamic_cast<const v1::Trial*>(&message)) {
      return AppendTrial(*trial, out);
    }
    if (const auto* m = dynamic_cast<const v1::Measurement*>(&message)) {
      return AppendMeasurement(*m, out);
    }
  }
  const Reflection& reflection = *message.GetReflection();
  out->push_back('{');
  bool first = true;
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor& field = *descriptor.field(i);
    // Proto3 presence: scalars when not the default, messages and oneof
    // members when set, repeated fields when not empty.
    if (field.is_repeated() ? reflection.FieldSize(message, &field) == 0
                            : !reflection.HasField(message, &field)) {
      continue;
    }
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(field.name(), out);
    out->push_back(':');
    if (field.is_map()) {
      out->push_back('{');
      const FieldDescriptor& value = *field.message_type()->map_value();
      const int n = reflection.FieldSize(message, &field);
      for (int j = 0; j < n; ++j) {
        const Message& entry =
            reflection.GetRepeatedMessage(message, &field, j);
        if (j > 0) out->push_back(',');
        AppendMapKey(entry, out);
        out->push_back(':');
        AppendValue(entry, *entry.GetReflection(), value, -1, out);
      }
      out->push_back('}');
    } else if (field.is_repeated()) {
      out->push_back('[');
      const int n = reflection.FieldSize(message, &field);
      for (int j = 0; j < n; ++j) {
        if (j > 0) out->push_back(',');
        AppendValue(message, reflection, field, j, out);
      }
      out->push_back(']');
    } else {
      AppendValue(message, reflection, field, -1, out);
    }
  }
  out->push_back('}');
}

std::string ToJson(const Message& message) {
  std::string out;
  AppendJson(message, &out);
  return out;
}

}  // namespace hypertune::service
