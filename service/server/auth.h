// Bearer-token authentication for hypertuned: a TokenTable maps secret
// tokens to owners (loaded from `--auth-token-file`), and an Authorizer
// turns a call's `authorization` header into the Principal it acts as
// (access.h says what a Principal may do).
//
// Tokens never appear in error messages or logs. Lookup compares the
// presented token with every stored one, each over the same fixed-size
// buffer, so its time depends on neither where nor whether a token matches.
//
// Thread safety: both are immutable after construction; share freely.
#ifndef HYPERTUNE_SERVICE_SERVER_AUTH_H_
#define HYPERTUNE_SERVICE_SERVER_AUTH_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/rpc/access.h"

namespace hypertune::service {

class TokenTable {
 public:
  // Longer tokens are refused when loading and never match.
  static constexpr size_t kMaxTokenBytes = 512;

  // Parses lines `TOKEN OWNER [admin]` (separated by spaces or tabs); the
  // third field makes OWNER an admin (access.h). Blank lines and lines
  // starting with `#` are skipped. INVALID_ARGUMENT naming `source` and the
  // line number for a malformed line, a token over kMaxTokenBytes, a token
  // given twice, or a table without any token.
  static absl::StatusOr<TokenTable> Parse(absl::string_view text,
                                          absl::string_view source);
  // Parse() of the file at `path`; NOT_FOUND / PERMISSION_DENIED if it cannot
  // be read.
  static absl::StatusOr<TokenTable> Load(const std::string& path);

  // Who holds `token` (checked, with its owner and admin flag), or nullopt
  // if it is not in the table.
  std::optional<Principal> HolderOf(absl::string_view token) const;

  // Whether some token of the table belongs to `owner`.
  bool HasOwner(absl::string_view owner) const;

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    // The token, zero-padded; `length` bytes of it are the token.
    std::array<unsigned char, kMaxTokenBytes> padded;
    size_t length;
    std::string owner;
    bool admin;
  };
  TokenTable() = default;

  std::vector<Entry> entries_;
};

// Who may call: with a token table every call needs a known bearer token;
// without one (auth off) every call is admitted as Principal::AuthOff().
class Authorizer {
 public:
  // Auth off.
  Authorizer() = default;
  explicit Authorizer(TokenTable tokens) : tokens_(std::move(tokens)) {}

  bool enabled() const { return tokens_.has_value(); }

  // The principal the caller acts as, given the value of its
  // `authorization` header (nullopt if it sent none): AuthOff() when auth is
  // off; UNAUTHENTICATED unless it is `Bearer TOKEN` with a known TOKEN.
  absl::StatusOr<Principal> Authenticate(
      std::optional<absl::string_view> authorization) const;

  // Whether `owner` may own studies: with auth on, some token belongs to it;
  // with auth off, any name.
  bool IsKnownOwner(absl::string_view owner) const;

 private:
  std::optional<TokenTable> tokens_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_SERVER_AUTH_H_
