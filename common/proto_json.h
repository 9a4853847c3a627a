// The one printer of API messages as JSON, for the HTTP API (the
// dashboard) and the CLI: protobuf's JSON mapping with the proto's own
// field names (JsonPrintOptions{preserve_proto_field_names}), written by
// walking the message through reflection.
//
// Why not protobuf's own printer (util::MessageToJsonString): it converts
// through the binary form and a type resolver, and is about three times
// slower on the dashboard's hot path, a page of 1,000 trials of 10
// measurements (1.5 MB of JSON; GCC 12 -O2, one core, min of 21 runs):
//   protobuf's printer, one line          28.3 ms
//   protobuf's printer, add_whitespace    31.6 ms
//   this printer, one line                 8.7 ms
//   this printer, multiline, int64 bare    9.5 ms
// (benchmarks/http_bench.cc prints the first and third). The CLI needs what
// protobuf's cannot do, int64 as JSON numbers, which it used to get by
// re-scanning protobuf's text. (A hand-written printer of Trial, 3.6 ms,
// copied every field of the proto and had fallen out of use when the proto
// grew; one reflective walk cannot miss a field.)
//
// Same values and presence rules as protobuf's mapping: a scalar is left
// out at its default, a message or oneof member printed when set, a
// repeated field or map when not empty. Spellings may differ where the
// values do not: doubles are the shortest round-trip text
// (common/double_text.h), a negative zero is written -0.0 (JSON readers
// take "-0" for the integer 0, losing the sign), map entries come in the
// map's order unless JsonStyle::sorted_map_keys. Well-known types
// (google.protobuf.*, none in the API today) are left to protobuf's printer,
// which knows their special mappings.
//
// Thread safety: pure functions; safe for messages no one mutates meanwhile.
#ifndef HYPERTUNE_COMMON_PROTO_JSON_H_
#define HYPERTUNE_COMMON_PROTO_JSON_H_

#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace hypertune {

struct JsonStyle {
  // int64 and uint64 values as JSON numbers ("id": 7), for readers whose
  // numbers are exact integers (Python, protobuf's own reader); default
  // false: quoted ("id": "7") as the mapping says, for JavaScript, whose
  // numbers are doubles.
  bool int64_as_numbers = false;
  // One member or element per line, indented by one space per level with
  // "key": value (the layout of protobuf's add_whitespace); default false:
  // one line without blanks.
  bool multiline = false;
  // Map entries by key (as printed), so that equal messages print the same
  // text (exported files); default false: in the map's order.
  bool sorted_map_keys = false;
};

// Appends `message` as a JSON object.
void AppendJson(const google::protobuf::Message& message, std::string* out,
                const JsonStyle& style = {});

// AppendJson into a new string.
std::string ToJson(const google::protobuf::Message& message,
                   const JsonStyle& style = {});

// Appends `value` as the mapping spells a double: the shortest round-trip
// decimal (-0.0 for a negative zero), or "NaN", "Infinity", "-Infinity"
// (quoted) for the non-finite.
void AppendJsonNumber(double value, std::string* out);

// Appends `text` as a JSON string literal (quoted, escaped).
void AppendJsonString(absl::string_view text, std::string* out);

}  // namespace hypertune

#endif  // HYPERTUNE_COMMON_PROTO_JSON_H_
