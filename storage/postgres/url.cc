#include "storage/postgres/url.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace hypertune::storage::postgres {

namespace {

constexpr char kHidden[] = "****";

// Debian's Abseil has its own string_view, not std::string_view.
absl::string_view ToAbsl(std::string_view view) {
  return absl::string_view(view.data(), view.size());
}

// The [begin, end) ranges of `url` that hold a password: the user part's,
// then each password= query parameter's value.
std::vector<std::pair<size_t, size_t>> PasswordRanges(std::string_view url) {
  std::vector<std::pair<size_t, size_t>> ranges;
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return ranges;
  const size_t authority = scheme_end + 3;
  const size_t authority_end =
      std::min(url.find('/', authority), url.find('?', authority));
  const std::string_view authority_part =
      url.substr(authority, authority_end == std::string_view::npos
                                ? std::string_view::npos
                                : authority_end - authority);
  // user:password@host: the last '@' ends the user part, whose first ':'
  // starts the password.
  const size_t at = authority_part.rfind('@');
  if (at != std::string_view::npos) {
    const size_t colon = authority_part.substr(0, at).find(':');
    if (colon != std::string_view::npos) {
      ranges.emplace_back(authority + colon + 1, authority + at);
    }
  }
  const size_t query = url.find('?', authority);
  if (query == std::string_view::npos) return ranges;
  size_t begin = query + 1;
  while (begin <= url.size()) {
    size_t end = url.find('&', begin);
    if (end == std::string_view::npos) end = url.size();
    constexpr std::string_view kKey = "password=";
    if (url.substr(begin, end - begin).substr(0, kKey.size()) == kKey) {
      ranges.emplace_back(begin + kKey.size(), end);
    }
    begin = end + 1;
  }
  return ranges;
}

}  // namespace

bool IsPostgresUrl(std::string_view location) {
  return absl::StartsWithIgnoreCase(ToAbsl(location), "postgresql://") ||
         absl::StartsWithIgnoreCase(ToAbsl(location), "postgres://");
}

std::string LowerCaseScheme(std::string_view url) {
  std::string lowered(url);
  const size_t scheme_end = lowered.find("://");
  if (scheme_end == std::string::npos) return lowered;
  for (size_t i = 0; i < scheme_end; ++i) {
    lowered[i] = absl::ascii_tolower(static_cast<unsigned char>(lowered[i]));
  }
  return lowered;
}

std::string RedactUrl(std::string_view url) {
  std::string shown;
  size_t copied = 0;
  for (const auto& [begin, end] : PasswordRanges(url)) {
    absl::StrAppend(&shown, ToAbsl(url.substr(copied, begin - copied)),
                    kHidden);
    copied = end;
  }
  absl::StrAppend(&shown, ToAbsl(url.substr(copied)));
  return shown;
}

std::string HidePasswords(std::string_view message, std::string_view url) {
  std::string hidden(message);
  for (const auto& [begin, end] : PasswordRanges(url)) {
    if (end == begin) continue;
    hidden = absl::StrReplaceAll(
        hidden, {{ToAbsl(url.substr(begin, end - begin)), kHidden}});
  }
  return hidden;
}

}  // namespace hypertune::storage::postgres
