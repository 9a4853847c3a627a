// Reading a message from a JSON file a person wrote (a study config), with
// errors that say where and what: the line and column of a syntax error,
// the path of a bad field ('spec.metrics[0] ("loss").goal'), the valid names
// of an enum, the nearest known name of an unknown field, both keys that set
// one field. Past the syntax, every problem of the text is listed in one
// answer, so that a file with three typos takes one run to fix, not three.
//
// Pure functions; thread-safe.
#ifndef HYPERTUNE_CLI_JSON_CONFIG_H_
#define HYPERTUNE_CLI_JSON_CONFIG_H_

#include <cstddef>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::cli {

// The deepest nesting of arrays and objects a JSON text may have. Our
// messages nest a few levels; protobuf's own JSON parser stops at 100, and
// the JSON library's printer and our checks recurse once per level, so a
// deeper text (a file of 100,000 '[') must be refused before it is parsed.
inline constexpr int kMaxJsonDepth = 100;

// Follows a JSON text one character at a time and says which characters
// belong to strings (their quotes included, escapes respected), so that a
// scan for brackets or numbers can skip them.
class JsonStrings {
 public:
  // Whether `c`, the text's next character, is part of a string.
  bool Inside(char c) {
    if (!in_string_) return in_string_ = c == '"';
    if (escaped_) {
      escaped_ = false;
    } else if (c == '\\') {
      escaped_ = true;
    } else if (c == '"') {
      in_string_ = false;
    }
    return true;
  }

 private:
  bool in_string_ = false;
  bool escaped_ = false;
};

// The byte offset of the first '[' or '{' of `json` (outside strings) that
// opens a level deeper than `max_depth`; nullopt when none does.
std::optional<size_t> JsonTooDeepAt(std::string_view json, int max_depth);

// Parses `json` (protobuf's JSON mapping, snake_case or lowerCamel names)
// into `message`. INVALID_ARGUMENT naming `source` and the problem (a text
// nested deeper than kMaxJsonDepth included, with its line and column); with
// several problems (unknown fields, wrong types or enum names, a key given
// twice or one field set under both its names, two members of a oneof), all
// of them, one per line: "SOURCE: N problems:\n  PATH: PROBLEM\n  ...".
absl::Status ParseJsonConfig(std::string_view json, std::string_view source,
                             google::protobuf::Message* message);

// ParseJsonConfig for a new study's config, listing with the rest what the
// study lacks or has the wrong way round: its name, spec, parameters (each
// with a name, a kind, both bounds of a range, min <= max, min > 0 on a log
// scale), metrics (each with a name; an objective with a goal). The server
// checks the rest when the study is created.
absl::Status ParseStudyConfig(std::string_view json, std::string_view source,
                              v1::Study* study);

// The edit distance between `a` and `b` (insertions, deletions,
// substitutions and adjacent transpositions count 1).
int EditDistance(std::string_view a, std::string_view b);

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_JSON_CONFIG_H_
