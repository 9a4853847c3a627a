// PostgreSQL URLs as hypertuned takes them (--db postgresql://...): telling
// one from a SQLite path, and a form of one that is safe to show.
//
// A URL may carry a password (postgresql://user:PASSWORD@host/db or
// ?password=...); messages and logs show RedactUrl's form only.
// Thread-safe: pure functions.
#ifndef HYPERTUNE_STORAGE_POSTGRES_URL_H_
#define HYPERTUNE_STORAGE_POSTGRES_URL_H_

#include <string>
#include <string_view>

namespace hypertune::storage::postgres {

// Whether `location` starts with postgresql:// or postgres:// (in any case,
// as URL schemes are compared).
bool IsPostgresUrl(std::string_view location);

// Returns `url` with its scheme in lower case, as libpq requires.
std::string LowerCaseScheme(std::string_view url);

// Returns `url` with the password of its user part and the value of any
// password= query parameter replaced by "****"; the rest is unchanged.
std::string RedactUrl(std::string_view url);

// Returns `message` (one of libpq's, about `url`) with every occurrence of
// a password that `url` carries replaced by "****".
std::string HidePasswords(std::string_view message, std::string_view url);

}  // namespace hypertune::storage::postgres

#endif  // HYPERTUNE_STORAGE_POSTGRES_URL_H_
