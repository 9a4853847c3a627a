// A double as text, written one way for every format hypertune writes
// (CSV, JSON, Prometheus, program arguments): the shortest text that reads
// back as the same value (std::to_chars), so 0.1 prints as "0.1" and no
// digits are lost. Formats differ only in how they spell the non-finite
// values, which each names with a NonFiniteSpelling.
#ifndef HYPERTUNE_COMMON_DOUBLE_TEXT_H_
#define HYPERTUNE_COMMON_DOUBLE_TEXT_H_

#include <charconv>
#include <cmath>
#include <concepts>
#include <string>

namespace hypertune {

struct NonFiniteSpelling {
  const char* nan;
  const char* positive_infinity;
  const char* negative_infinity;
};
// CSV and program arguments: what strtod and Python's float() read back.
inline constexpr NonFiniteSpelling kPlainNonFinite{"nan", "inf", "-inf"};
// JSON has no non-finite numbers: protobuf's JSON mapping spells them as
// strings.
inline constexpr NonFiniteSpelling kJsonNonFinite{"\"NaN\"", "\"Infinity\"",
                                                  "\"-Infinity\""};
// The Prometheus text exposition format.
inline constexpr NonFiniteSpelling kPrometheusNonFinite{"NaN", "+Inf", "-Inf"};

// Appends `value` (a double or a float) to `out`.
template <std::floating_point T>
void AppendDoubleText(T value, std::string* out,
                      const NonFiniteSpelling& spelling = kPlainNonFinite) {
  if (std::isnan(value)) {
    out->append(spelling.nan);
  } else if (std::isinf(value)) {
    out->append(value > 0 ? spelling.positive_infinity
                          : spelling.negative_infinity);
  } else {
    char buffer[32];
    const std::to_chars_result result =
        std::to_chars(buffer, buffer + sizeof(buffer), value);
    out->append(buffer, result.ptr);
  }
}

template <std::floating_point T>
std::string DoubleText(T value,
                       const NonFiniteSpelling& spelling = kPlainNonFinite) {
  std::string out;
  AppendDoubleText(value, &out, spelling);
  return out;
}

}  // namespace hypertune

#endif  // HYPERTUNE_COMMON_DOUBLE_TEXT_H_
