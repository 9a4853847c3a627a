// Fast printing of API messages as JSON: the protobuf JSON mapping with the
// proto's own field names (what JsonPrintOptions{preserve_proto_field_names}
// gives, and what the CLI prints), written by walking the message through
// reflection instead of protobuf's printer, which converts through the
// binary form and is about ten times slower: a page of 1,000 trials is the
// hot path of the dashboard. Same values, same presence rules; number
// spellings may differ (shortest round-trip), key order of maps may differ.
//
// Pure functions; thread-safe for messages no one mutates meanwhile.
#ifndef HYPERTUNE_SERVICE_HTTP_JSON_H_
#define HYPERTUNE_SERVICE_HTTP_JSON_H_

#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace hypertune::service {

// Appends `message` as a JSON object.
void AppendJson(const google::protobuf::Message& message, std::string* out);

// AppendJson into a new string.
std::string ToJson(const google::protobuf::Message& message);

// Appends `value` as the mapping spells a double: the shortest round-trip
// decimal, or "NaN", "Infinity", "-Infinity" (quoted) for the non-finite.
void AppendJsonNumber(double value, std::string* out);

// Appends `text` as a JSON string literal (quoted, escaped).
void AppendJsonString(absl::string_view text, std::string* out);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_HTTP_JSON_H_
