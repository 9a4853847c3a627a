// Bearer-token authentication for hypertuned: a TokenTable maps secret
// tokens to owners (loaded from `--auth-token-file`), and an Authorizer
// turns a call's `authorization` header into the owner it acts as.
//
// Tokens never appear in error messages or logs. Lookup compares the
// presented token with every stored one, each over the same fixed-size
// buffer, so its time depends on neither where nor whether a token matches.
//
// Thread safety: both are immutable after construction; share freely.
#ifndef HYPERTUNE_SERVICE_AUTH_H_
#define HYPERTUNE_SERVICE_AUTH_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hypertune::service {

class TokenTable {
 public:
  // Longer tokens are refused when loading and never match.
  static constexpr size_t kMaxTokenBytes = 512;

  // Parses lines `TOKEN OWNER` (separated by spaces or tabs); blank lines and
  // lines starting with `#` are skipped. INVALID_ARGUMENT naming `source` and
  // the line number for a malformed line, a token over kMaxTokenBytes, a
  // token given twice, or a table without any token.
  static absl::StatusOr<TokenTable> Parse(absl::string_view text,
                                          absl::string_view source);
  // Parse() of the file at `path`; NOT_FOUND / PERMISSION_DENIED if it cannot
  // be read.
  static absl::StatusOr<TokenTable> Load(const std::string& path);

  // The owner of `token`, or nullopt if it is not in the table.
  std::optional<std::string> OwnerOf(absl::string_view token) const;

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    // The token, zero-padded; `length` bytes of it are the token.
    std::array<unsigned char, kMaxTokenBytes> padded;
    size_t length;
    std::string owner;
  };
  TokenTable() = default;

  std::vector<Entry> entries_;
};

// Who may call: with a token table every call needs a known bearer token;
// without one (auth off) every call is admitted as the empty owner.
class Authorizer {
 public:
  // Auth off.
  Authorizer() = default;
  explicit Authorizer(TokenTable tokens) : tokens_(std::move(tokens)) {}

  bool enabled() const { return tokens_.has_value(); }

  // The owner the caller acts as, given the value of its `authorization`
  // header (nullopt if it sent none): "" when auth is off; UNAUTHENTICATED
  // unless it is `Bearer TOKEN` with a known TOKEN.
  absl::StatusOr<std::string> Authenticate(
      std::optional<absl::string_view> authorization) const;

  // OK if `caller` may touch a study owned by `owner`: auth off, the same
  // owner, or a study without owner (created while auth was off, so open to
  // every authenticated caller). PERMISSION_DENIED naming `study` otherwise.
  absl::Status CheckOwner(const std::string& caller, const std::string& owner,
                          const std::string& study) const;

 private:
  std::optional<TokenTable> tokens_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_AUTH_H_
