// The fast JSON printer says what protobuf's JSON mapping says, for every
// field of the API's messages (filled through reflection, so a field added
// to the proto is covered the day it is added).
#include "service/http/json.h"

#include <limits>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "hypertune/v1/hypertune.pb.h"
#include "nlohmann/json.hpp"
#include "testing/http_test_util.h"

namespace hypertune::service {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using json = nlohmann::json;

json Protobufs(const Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string text;
  EXPECT_TRUE(
      google::protobuf::util::MessageToJsonString(message, &text, options)
          .ok());
  return json::parse(text);
}

json Ours(const Message& message) { return json::parse(ToJson(message)); }

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

TEST(JsonTest, EveryFieldOfTheApiMessagesAsProtobufPrintsIt) {
  for (const Message* prototype : std::initializer_list<const Message*>{
           &v1::Trial::default_instance(), &v1::Study::default_instance(),
           &v1::ListTrialsResponse::default_instance(),
           &v1::TrialEvent::default_instance(),
           &v1::ListStudiesResponse::default_instance()}) {
    for (int seed = 0; seed < 3; ++seed) {
      std::unique_ptr<Message> message(prototype->New());
      FillEveryField(message.get(), seed, 4);
      SCOPED_TRACE(message->ShortDebugString());
      EXPECT_EQ(Ours(*message), Protobufs(*message));
    }
  }
}

TEST(JsonTest, DefaultsAreLeftOutAndOneofsPrintedEvenWhenZero) {
  v1::Trial trial;
  trial.add_parameters()->set_double_value(0);
  trial.mutable_final_measurement();
  EXPECT_EQ(ToJson(trial),
            R"({"parameters":[{"double_value":0}],"final_measurement":{}})");
  EXPECT_EQ(Ours(trial), Protobufs(trial));
  EXPECT_EQ(ToJson(v1::Trial()), "{}");
}

TEST(JsonTest, NonFiniteNumbersAreStrings) {
  v1::Measurement m;
  (*m.mutable_metrics())["up"] = std::numeric_limits<double>::infinity();
  (*m.mutable_metrics())["down"] = -std::numeric_limits<double>::infinity();
  EXPECT_EQ(Ours(m), Protobufs(m));
  EXPECT_EQ(Ours(m)["metrics"]["up"], "Infinity");
}

TEST(JsonTest, GeneratedTrialsMatch) {
  v1::Study study = test::MakeStudy("s", "o");
  for (const v1::Trial& trial : test::MakeTrials(study, 60, 4, 9)) {
    EXPECT_EQ(Ours(trial), Protobufs(trial)) << trial.ShortDebugString();
  }
}

}  // namespace
}  // namespace hypertune::service
