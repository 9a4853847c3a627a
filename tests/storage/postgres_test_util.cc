#include "tests/storage/postgres_test_util.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace hypertune::storage {

absl::StatusOr<test::PostgresServer*> SharedPostgresServer() {
  // Destroyed at exit, which stops the server and removes its directory.
  static absl::StatusOr<std::unique_ptr<test::PostgresServer>> server =
      test::PostgresServer::Start();
  if (!server.ok()) return server.status();
  return server->get();
}

absl::StatusOr<std::string> FreshPostgresDatabase() {
  absl::StatusOr<test::PostgresServer*> server = SharedPostgresServer();
  if (!server.ok()) return server.status();
  static int databases = 0;
  return (*server)->CreateDatabase(absl::StrCat("test_", ++databases));
}

void SkipOrFail(const absl::Status& status) {
  if (status.code() == absl::StatusCode::kNotFound) {
    // GTEST_SKIP returns from the function it is in: this lambda.
    [&] { GTEST_SKIP() << "SKIPPED: " << status.message(); }();
    return;
  }
  ADD_FAILURE() << status;
}

}  // namespace hypertune::storage
