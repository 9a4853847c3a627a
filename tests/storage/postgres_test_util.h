// What the storage tests share for PostgreSQL: one server per test binary,
// a fresh database per test, and a skip (never a pass) where PostgreSQL is
// not installed.
//
// Thread safety: call from the main thread (the server dies with the thread
// that started it; testing/postgres_server.h).
#ifndef HYPERTUNE_TESTS_STORAGE_POSTGRES_TEST_UTIL_H_
#define HYPERTUNE_TESTS_STORAGE_POSTGRES_TEST_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testing/postgres_server.h"

namespace hypertune::storage {

// The server of this test binary, started on first use and stopped at exit;
// NOT_FOUND when PostgreSQL is not installed.
absl::StatusOr<test::PostgresServer*> SharedPostgresServer();

// The URL of a new, empty database on SharedPostgresServer().
absl::StatusOr<std::string> FreshPostgresDatabase();

// Marks the current test skipped ("SKIPPED: PostgreSQL not found ...") if
// `status` says PostgreSQL is not installed, failed otherwise.
void SkipOrFail(const absl::Status& status);

}  // namespace hypertune::storage

#endif  // HYPERTUNE_TESTS_STORAGE_POSTGRES_TEST_UTIL_H_
