// The chaos test: hypertuned as a process on a fixed port with a study of
// 1 s leases, 8 chaos_worker processes, the server SIGKILLed twice (down
// 0.3 s, then restarted on the same address and file) and a quarter of the
// workers SIGKILLed mid-study (and replaced).
// Every promise of testing/chaos.h must hold: no acknowledged completion
// lost or changed, no trial completed twice, no expired lease left ACTIVE,
// retries within max_retries, a sound database file.
//
// The failover test: the same on PostgreSQL with two servers, a leader and
// its standby; each kill SIGKILLs the leader, the standby takes over, the
// workers (given both addresses) follow it, and the killed server comes
// back as the new standby. Skipped, saying why, without PostgreSQL.
//
// The kills are tied to progress (fractions of the trials acknowledged), not
// to time, so that a slow machine sees the same chaos; the only waits are
// polls with deadlines and the leases running out.
#include <algorithm>
#include <iostream>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "testing/chaos.h"
#include "testing/postgres_server.h"
#include "testing/test_server.h"

namespace hypertune {
namespace {

// Both tests' study and workers: 8 workers through 120 RANDOM trials of 3
// reports each, 1 s leases, 2 retries; files in `dir`.
bench::ChaosOptions EightWorkers(const test::TempDir& dir) {
  bench::ChaosOptions options;
  options.hypertuned = HYPERTUNED_PATH;
  options.worker = CHAOS_WORKER_PATH;
  options.dir = dir.path().string();
  options.workers = 8;
  options.trials = 120;
  options.algorithm = "RANDOM";
  options.lease_seconds = 1;
  options.max_retries = 2;
  options.reports = 3;
  options.report_ms = 30;
  options.log = &std::cout;
  return options;
}

TEST(ChaosTest, KilledServerAndWorkersLoseNoAcknowledgedCompletion) {
  test::TempDir dir;
  bench::ChaosOptions options = EightWorkers(dir);
  options.server_kills_at = {0.3, 0.6};
  options.worker_kills_at = {0.15, 0.45};
  options.server_downtime = std::chrono::milliseconds(300);
  options.duration = std::chrono::seconds(75);
  options.seed = 7;

  absl::StatusOr<bench::ChaosResult> result = bench::RunChaos(options);
  ASSERT_TRUE(result.ok()) << result.status();
  std::cout << "chaos: " << result->trials << " trials, "
            << result->acknowledged << " acknowledged, " << result->completed
            << " completed, " << result->requeued << " requeued, "
            << result->failed << " failed; " << result->server_kills
            << " server kills, " << result->worker_kills << " worker kills; "
            << result->seconds << " s" << std::endl;

  EXPECT_TRUE(result->violations.empty())
      << absl::StrJoin(result->violations, "\n");
  EXPECT_TRUE(result->study_completed);
  EXPECT_EQ(result->trials, options.trials);
  EXPECT_GE(result->server_kills, 2);
  EXPECT_GE(result->worker_kills, 2);
  // Most of the study ran to acknowledged completions despite the chaos.
  EXPECT_GE(result->acknowledged, options.trials / 2);
  EXPECT_EQ(result->unexpected_errors, 0);
}

TEST(FailoverTest, KilledLeaderHandsOverToItsStandbyLosingNothing) {
  absl::StatusOr<std::unique_ptr<test::PostgresServer>> postgres =
      test::PostgresServer::Start();
  if (absl::IsNotFound(postgres.status())) {
    GTEST_SKIP() << "SKIPPED: " << postgres.status().message();
  }
  ASSERT_TRUE(postgres.ok()) << postgres.status();
  absl::StatusOr<std::string> url = (*postgres)->CreateDatabase("failover");
  ASSERT_TRUE(url.ok()) << url.status();

  test::TempDir dir;
  bench::ChaosOptions options = EightWorkers(dir);
  options.db_url = *url;
  options.server_kills_at = {0.2, 0.4, 0.6, 0.8};
  options.server_downtime = std::chrono::milliseconds(200);
  options.duration = std::chrono::seconds(90);
  options.seed = 11;

  absl::StatusOr<bench::ChaosResult> result = bench::RunChaos(options);
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<double> takeover = result->takeover_ms;
  std::sort(takeover.begin(), takeover.end());
  std::cout << "failover: " << result->trials << " trials, "
            << result->acknowledged << " acknowledged, " << result->completed
            << " completed, " << result->requeued << " requeued; "
            << result->server_kills
            << " leader kills, takeover ms: " << absl::StrJoin(takeover, ", ")
            << "; " << result->seconds << " s" << std::endl;

  EXPECT_TRUE(result->violations.empty())
      << absl::StrJoin(result->violations, "\n");
  EXPECT_TRUE(result->study_completed);
  EXPECT_EQ(result->trials, options.trials);
  EXPECT_GE(result->server_kills, 4);
  EXPECT_EQ(result->takeover_ms.size(),
            static_cast<size_t>(result->server_kills));
  EXPECT_EQ(result->unexpected_errors, 0);
}

}  // namespace
}  // namespace hypertune
