#include "service/server/auth.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hypertune::service {
namespace {

constexpr absl::string_view kBearer = "bearer ";

}  // namespace

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text,
                                             absl::string_view source) {
  TokenTable table;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    // Messages name the line, never its text: it holds a secret.
    std::string where = absl::StrCat(source, " line ", line_number);
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 2 && fields.size() != 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected \"TOKEN OWNER [admin]\", found ",
                       fields.size(), " fields"));
    }
    if (fields.size() == 3 && fields[2] != "admin") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the third field may only be \"admin\""));
    }
    absl::string_view token = fields[0];
    if (token.size() > kMaxTokenBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the token is longer than ", kMaxTokenBytes, " bytes"));
    }
    if (std::optional<Principal> holder = table.HolderOf(token)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": this token is already given (to owner \"",
                       holder->owner, "\")"));
    }
    Entry entry;
    entry.padded.fill(0);
    std::memcpy(entry.padded.data(), token.data(), token.size());
    entry.length = token.size();
    entry.owner = std::string(fields[1]);
    entry.admin = fields.size() == 3;
    table.entries_.push_back(std::move(entry));
  }
  if (table.entries_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": no tokens (expected lines \"TOKEN OWNER [admin]\")"));
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    int error = errno;
    std::string message =
        absl::StrCat("auth token file \"", path, "\": ", std::strerror(error));
    return error == EACCES ? absl::PermissionDeniedError(message)
                           : absl::NotFoundError(message);
  }
  std::stringstream text;
  text << file.rdbuf();
  return Parse(text.str(), absl::StrCat("auth token file \"", path, "\""));
}

std::optional<Principal> TokenTable::HolderOf(absl::string_view token) const {
  // The presented token's length is the caller's own knowledge, not a secret.
  if (token.size() > kMaxTokenBytes) return std::nullopt;
  std::array<unsigned char, kMaxTokenBytes> presented;
  presented.fill(0);
  std::memcpy(presented.data(), token.data(), token.size());
  const Entry* match = nullptr;
  // Every entry, every byte: no exit on the first difference or match.
  for (const Entry& entry : entries_) {
    unsigned char differ = entry.length == token.size() ? 0 : 1;
    for (size_t i = 0; i < kMaxTokenBytes; ++i) {
      differ |= static_cast<unsigned char>(entry.padded[i] ^ presented[i]);
    }
    if (differ == 0) match = &entry;
  }
  if (match == nullptr) return std::nullopt;
  Principal holder;
  holder.owner = match->owner;
  holder.checked = true;
  holder.admin = match->admin;
  return holder;
}

bool TokenTable::HasOwner(absl::string_view owner) const {
  for (const Entry& entry : entries_) {
    if (entry.owner == owner) return true;
  }
  return false;
}

absl::StatusOr<Principal> Authorizer::Authenticate(
    std::optional<absl::string_view> authorization) const {
  if (!tokens_.has_value()) return Principal::AuthOff();
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError(
        "authorization: missing; this server needs \"authorization: Bearer "
        "TOKEN\" metadata (hypertune --token, or $HYPERTUNE_TOKEN)");
  }
  absl::string_view value(authorization->data(), authorization->size());
  if (!absl::StartsWithIgnoreCase(value, kBearer)) {
    return absl::UnauthenticatedError(
        "authorization: expected \"Bearer TOKEN\"");
  }
  value.remove_prefix(kBearer.size());
  std::optional<Principal> holder =
      tokens_->HolderOf(absl::StripAsciiWhitespace(value));
  if (!holder.has_value()) {
    return absl::UnauthenticatedError("authorization: unknown token");
  }
  return *std::move(holder);
}

bool Authorizer::IsKnownOwner(absl::string_view owner) const {
  return !tokens_.has_value() || tokens_->HasOwner(owner);
}

}  // namespace hypertune::service
