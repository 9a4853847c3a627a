// The one JSON printer says what protobuf's JSON mapping says, for every
// field of the API's messages (filled through reflection, so a field added
// to the proto is covered the day it is added), in both styles: the HTTP
// API's (one line, int64 quoted) and the CLI's (multiline, int64 numbers).
#include "common/proto_json.h"

#include <cmath>
#include <limits>
#include <memory>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "hypertune/v1/hypertune.pb.h"
#include "nlohmann/json.hpp"

namespace hypertune {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using json = nlohmann::json;

std::string ProtobufText(const Message& message, bool multiline) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.add_whitespace = multiline;
  std::string text;
  EXPECT_TRUE(
      google::protobuf::util::MessageToJsonString(message, &text, options)
          .ok());
  return text;
}

json Protobufs(const Message& message) {
  return json::parse(ProtobufText(message, false));
}

json Ours(const Message& message, const JsonStyle& style = {}) {
  return json::parse(ToJson(message, style));
}

// Whether `ours` (int64_as_numbers) holds the values of `theirs`
// (protobuf's, int64 quoted): equal, but where `theirs` has a quoted
// integer, `ours` has that integer as a number.
bool SameWithIntegersAsNumbers(const json& ours, const json& theirs) {
  if (theirs.is_string() && ours.is_number_integer()) {
    return ours.dump() == theirs.get<std::string>();
  }
  if (theirs.is_object() && ours.is_object()) {
    if (theirs.size() != ours.size()) return false;
    for (const auto& [key, value] : theirs.items()) {
      if (!ours.contains(key) ||
          !SameWithIntegersAsNumbers(ours.at(key), value)) {
        return false;
      }
    }
    return true;
  }
  if (theirs.is_array() && ours.is_array()) {
    if (theirs.size() != ours.size()) return false;
    for (size_t i = 0; i < theirs.size(); ++i) {
      if (!SameWithIntegersAsNumbers(ours[i], theirs[i])) return false;
    }
    return true;
  }
  return ours == theirs;
}

// Sets every field of `message` to a value other than its default (two
// elements for repeated fields and maps), `seed` varying them; messages
// nest up to `depth`. Of a oneof, the last field wins.
void FillEveryField(Message* message, int seed, int depth) {
  const auto* descriptor = message->GetDescriptor();
  const auto* reflection = message->GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    const int n = field->is_repeated() ? 2 : 1;
    for (int k = 0; k < n; ++k) {
      const int v = seed + 7 * i + k + 1;
      auto add = field->is_repeated();
      switch (field->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          add ? reflection->AddInt32(message, field, v)
              : reflection->SetInt32(message, field, v);
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          add ? reflection->AddUInt32(message, field, v)
              : reflection->SetUInt32(message, field, v);
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          add ? reflection->AddInt64(message, field, -v * 1000000007LL)
              : reflection->SetInt64(message, field, v * 1000000007LL);
          break;
        case FieldDescriptor::CPPTYPE_UINT64:
          add ? reflection->AddUInt64(message, field, v * 1000000007ULL)
              : reflection->SetUInt64(message, field, v * 1000000007ULL);
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          add ? reflection->AddDouble(message, field, v / 3.0)
              : reflection->SetDouble(message, field, v * 1e-7);
          break;
        case FieldDescriptor::CPPTYPE_FLOAT:
          add ? reflection->AddFloat(message, field, v / 3.0f)
              : reflection->SetFloat(message, field, v / 7.0f);
          break;
        case FieldDescriptor::CPPTYPE_BOOL:
          add ? reflection->AddBool(message, field, true)
              : reflection->SetBool(message, field, true);
          break;
        case FieldDescriptor::CPPTYPE_ENUM: {
          const auto* e = field->enum_type();
          const auto* value = e->value(
              e->value_count() > 1 ? 1 + v % (e->value_count() - 1) : 0);
          add ? reflection->AddEnum(message, field, value)
              : reflection->SetEnum(message, field, value);
          break;
        }
        case FieldDescriptor::CPPTYPE_STRING: {
          const std::string text =
              "v" + std::to_string(v) + " \"q\" \\ \n\t\x01 é,";
          add ? reflection->AddString(message, field, text)
              : reflection->SetString(message, field, text);
          break;
        }
        case FieldDescriptor::CPPTYPE_MESSAGE:
          if (depth > 0) {
            Message* sub = add ? reflection->AddMessage(message, field)
                               : reflection->MutableMessage(message, field);
            FillEveryField(sub, v, depth - 1);
          }
          break;
      }
    }
  }
}

std::vector<std::unique_ptr<Message>> FilledApiMessages() {
  std::vector<std::unique_ptr<Message>> messages;
  for (const Message* prototype : std::initializer_list<const Message*>{
           &v1::Trial::default_instance(), &v1::Study::default_instance(),
           &v1::ListTrialsResponse::default_instance(),
           &v1::TrialEvent::default_instance(),
           &v1::ListStudiesResponse::default_instance()}) {
    for (int seed = 0; seed < 3; ++seed) {
      messages.emplace_back(prototype->New());
      FillEveryField(messages.back().get(), seed, 4);
    }
  }
  return messages;
}

TEST(ProtoJsonTest, EveryFieldOfTheApiMessagesAsProtobufPrintsIt) {
  for (const auto& message : FilledApiMessages()) {
    SCOPED_TRACE(message->ShortDebugString());
    EXPECT_EQ(Ours(*message), Protobufs(*message));
    EXPECT_EQ(Ours(*message, {.multiline = true}), Protobufs(*message));
  }
}

// The CLI's style: int64 and uint64 as numbers at any depth (a message in
// a list, a map's values), and protobuf's own reader reads it back exactly.
TEST(ProtoJsonTest, IntegersAsNumbersHoldTheSameValuesAndParseBack) {
  const JsonStyle cli{.int64_as_numbers = true, .multiline = true};
  for (const auto& message : FilledApiMessages()) {
    SCOPED_TRACE(message->ShortDebugString());
    const std::string text = ToJson(*message, cli);
    EXPECT_TRUE(
        SameWithIntegersAsNumbers(json::parse(text), Protobufs(*message)))
        << text;
    std::unique_ptr<Message> back(message->New());
    ASSERT_TRUE(
        google::protobuf::util::JsonStringToMessage(text, back.get()).ok());
    EXPECT_TRUE(
        google::protobuf::util::MessageDifferencer::Equals(*back, *message));
  }
  v1::Study study;
  study.mutable_spec()->set_seed(std::numeric_limits<uint64_t>::max());
  (*study.mutable_trial_counts())["COMPLETED"] = 3;
  study.set_create_time_ms(-1);
  EXPECT_EQ(ToJson(study, {.int64_as_numbers = true}),
            R"({"spec":{"seed":18446744073709551615},"create_time_ms":-1,)"
            R"("trial_counts":{"COMPLETED":3}})");
  EXPECT_EQ(ToJson(study),
            R"({"spec":{"seed":"18446744073709551615"},"create_time_ms":"-1",)"
            R"("trial_counts":{"COMPLETED":"3"}})");
}

// The multiline layout is protobuf's add_whitespace, byte for byte (where
// the numbers are spelled alike), without its trailing newline.
TEST(ProtoJsonTest, MultilineIsProtobufsLayout) {
  v1::Trial trial;
  trial.set_study_name("s");
  trial.set_id(3);
  trial.set_state(v1::Trial::ACTIVE);
  trial.add_parameters()->set_name("x");
  trial.mutable_parameters(0)->set_double_value(0.5);
  trial.add_parameters()->set_name("c");
  trial.mutable_parameters(1)->set_string_value("a\"b");
  v1::Measurement& m = *trial.add_measurements();
  m.set_step(2);
  (*m.mutable_metrics())["loss"] = 0.25;
  trial.mutable_final_measurement();
  trial.set_warm_start(true);
  (*trial.mutable_attributes())["k"] = "v";
  EXPECT_EQ(ToJson(trial, {.multiline = true}) + "\n",
            ProtobufText(trial, true));
  EXPECT_EQ(ToJson(trial, {.int64_as_numbers = true, .multiline = true}),
            R"({
 "study_name": "s",
 "id": 3,
 "state": "ACTIVE",
 "parameters": [
  {
   "name": "x",
   "double_value": 0.5
  },
  {
   "name": "c",
   "string_value": "a\"b"
  }
 ],
 "measurements": [
  {
   "step": 2,
   "metrics": {
    "loss": 0.25
   }
  }
 ],
 "final_measurement": {},
 "warm_start": true,
 "attributes": {
  "k": "v"
 }
})");
  EXPECT_EQ(ToJson(v1::Trial(), {.multiline = true}), "{}");
}

TEST(ProtoJsonTest, DefaultsAreLeftOutAndOneofsPrintedEvenWhenZero) {
  v1::Trial trial;
  trial.add_parameters()->set_double_value(0);
  trial.mutable_final_measurement();
  EXPECT_EQ(ToJson(trial),
            R"({"parameters":[{"double_value":0}],"final_measurement":{}})");
  EXPECT_EQ(Ours(trial), Protobufs(trial));
  EXPECT_EQ(ToJson(v1::Trial()), "{}");
}

TEST(ProtoJsonTest, NonFiniteNumbersAreStrings) {
  v1::Measurement m;
  (*m.mutable_metrics())["up"] = std::numeric_limits<double>::infinity();
  (*m.mutable_metrics())["down"] = -std::numeric_limits<double>::infinity();
  (*m.mutable_metrics())["nan"] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(Ours(m), Protobufs(m));
  EXPECT_EQ(Ours(m)["metrics"]["up"], "Infinity");
  EXPECT_EQ(Ours(m)["metrics"]["nan"], "NaN");
}

// JSON readers (protobuf's, Python's, nlohmann's) take "-0" for the integer
// 0: a negative zero is written -0.0 and keeps its sign.
TEST(ProtoJsonTest, NegativeZeroKeepsItsSign) {
  std::string text;
  AppendJsonNumber(-0.0, &text);
  EXPECT_EQ(text, "-0.0");
  v1::Trial trial;
  trial.add_parameters()->set_double_value(-0.0);
  text = ToJson(trial);
  EXPECT_EQ(text, R"({"parameters":[{"double_value":-0.0}]})");
  v1::Trial back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(text, &back).ok());
  EXPECT_TRUE(std::signbit(back.parameters(0).double_value()));
  EXPECT_TRUE(std::signbit(
      json::parse(text)["parameters"][0]["double_value"].get<double>()));
}

TEST(ProtoJsonTest, SortedMapKeysPrintEqualMessagesAlike) {
  // The same attributes inserted in two orders: a map's own order may
  // differ, the sorted text may not.
  v1::Trial one, two;
  for (const char* key : {"zeta", "alpha", "mid"}) {
    (*one.mutable_attributes())[key] = key;
  }
  for (const char* key : {"mid", "zeta", "alpha"}) {
    (*two.mutable_attributes())[key] = key;
  }
  const JsonStyle sorted{.sorted_map_keys = true};
  EXPECT_EQ(ToJson(one, sorted), ToJson(two, sorted));
  EXPECT_EQ(ToJson(one, sorted),
            R"({"attributes":{"alpha":"alpha","mid":"mid","zeta":"zeta"}})");
}

TEST(ProtoJsonTest, StringsAreEscaped) {
  std::string text;
  AppendJsonString("a\"b\\c\nd\te\x01 é", &text);
  EXPECT_EQ(text, R"("a\"b\\c\nd\te\u0001 é")");
  EXPECT_EQ(json::parse(text), "a\"b\\c\nd\te\x01 é");
}

}  // namespace
}  // namespace hypertune
