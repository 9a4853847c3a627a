// Parameter and metric names are identifiers, because they appear in
// `{name}` substitutions, `name=value` metric lines and JSON keys: a letter
// or '_' first, then letters, digits and "._-", at most kMaxNameBytes bytes.
// The one statement of that rule: the server checks names by it
// (service/rpc/validation.cc), importers make names by it (ToIdentifier),
// and GetServerInfo publishes it as a pattern for other clients.
//
// Thread safety: pure functions.
#ifndef HYPERTUNE_COMMON_IDENTIFIER_H_
#define HYPERTUNE_COMMON_IDENTIFIER_H_

#include <string>
#include <string_view>

#include "common/limits.h"

namespace hypertune {

// The rule as a pattern that ECMAScript and Python both read (published by
// GetServerInfo; tests hold it to the functions below).
inline constexpr char kIdentifierPattern[] = "^[A-Za-z_][A-Za-z0-9._-]{0,127}$";

// ASCII only: a name is the same bytes in every client's language.
inline bool IsIdentifierStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

inline bool IsIdentifierChar(char c) {
  return IsIdentifierStart(c) || (c >= '0' && c <= '9') || c == '.' || c == '-';
}

// `text` made an identifier: every other character becomes '_', a '_' goes
// first where a letter or '_' does not, and the result is cut to
// kMaxNameBytes.
inline std::string ToIdentifier(std::string_view text) {
  std::string name;
  for (char c : text) name += IsIdentifierChar(c) ? c : '_';
  if (name.empty() || !IsIdentifierStart(name.front())) {
    name.insert(name.begin(), '_');
  }
  return name.substr(0, kMaxNameBytes);
}

}  // namespace hypertune

#endif  // HYPERTUNE_COMMON_IDENTIFIER_H_
