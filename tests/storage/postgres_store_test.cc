// PostgresStore's own tests (the shared typed suite runs on it too, in
// study_store_test.cc): URLs and what errors show of them, the schema's
// version, several stores on one database, conditional writes racing across
// stores, a server that goes away and comes back, damaged rows.
#include "storage/postgres_store.h"

#include <libpq-fe.h>

#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/postgres/url.h"
#include "testing/postgres_server.h"
#include "tests/storage/postgres_test_util.h"

namespace hypertune::storage {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// ----- URLs (no server needed) -----

TEST(PostgresUrlTest, RecognizesBothSchemesInAnyCase) {
  EXPECT_TRUE(postgres::IsPostgresUrl("postgresql://host/db"));
  EXPECT_TRUE(postgres::IsPostgresUrl("postgres://host/db"));
  EXPECT_TRUE(postgres::IsPostgresUrl("PostgreSQL://host/db"));
  EXPECT_FALSE(postgres::IsPostgresUrl("studies.db"));
  EXPECT_FALSE(postgres::IsPostgresUrl("./postgresql://x"));
  EXPECT_FALSE(postgres::IsPostgresUrl(":memory:"));
}

TEST(PostgresUrlTest, LowersTheSchemeOnly) {
  EXPECT_EQ(postgres::LowerCaseScheme("PostgreSQL://Alice@DB/Ht"),
            "postgresql://Alice@DB/Ht");
  EXPECT_EQ(postgres::LowerCaseScheme("not a url"), "not a url");
}

TEST(PostgresUrlTest, RedactsPasswordsOnly) {
  EXPECT_EQ(postgres::RedactUrl("postgresql://alice:s3cret@db:5432/ht"),
            "postgresql://alice:****@db:5432/ht");
  EXPECT_EQ(postgres::RedactUrl("postgresql://alice:p@ss@db/ht?x=1"),
            "postgresql://alice:****@db/ht?x=1");
  EXPECT_EQ(postgres::RedactUrl(
                "postgres://db/ht?sslmode=require&password=s3cret&user=a"),
            "postgres://db/ht?sslmode=require&password=****&user=a");
  EXPECT_EQ(postgres::RedactUrl("postgresql://alice@db/ht"),
            "postgresql://alice@db/ht");
  EXPECT_EQ(postgres::RedactUrl("postgresql:///ht?host=/tmp/a:b@c"),
            "postgresql:///ht?host=/tmp/a:b@c");
  EXPECT_EQ(postgres::HidePasswords("bad token \"s3cret%\"",
                                    "postgresql://a:s3cret%@db/ht"),
            "bad token \"****\"");
}

// ----- Against a server -----

v1::Study MakeStudy(const std::string& name) {
  v1::Study study;
  study.set_name(name);
  study.set_state(v1::Study::ACTIVE);
  study.mutable_spec()->add_metrics()->set_name("accuracy");
  return study;
}

// The first column of the first row of `sql`, run through libpq on `url`,
// as text; "" for a statement without rows.
absl::StatusOr<std::string> RawQuery(const std::string& url,
                                     const std::string& sql) {
  std::unique_ptr<PGconn, decltype(&PQfinish)> connection(
      PQconnectdb(url.c_str()), &PQfinish);
  if (PQstatus(connection.get()) != CONNECTION_OK) {
    return absl::UnavailableError(PQerrorMessage(connection.get()));
  }
  std::unique_ptr<PGresult, decltype(&PQclear)> result(
      PQexec(connection.get(), sql.c_str()), &PQclear);
  const ExecStatusType status = PQresultStatus(result.get());
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    return absl::InternalError(PQerrorMessage(connection.get()));
  }
  if (PQntuples(result.get()) == 0) return std::string();
  return std::string(PQgetvalue(result.get(), 0, 0));
}

class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> url = FreshPostgresDatabase();
    if (!url.ok()) return SkipOrFail(url.status());
    url_ = *url;
  }

  std::unique_ptr<PostgresStore> Open(const PostgresOptions& options = {}) {
    absl::StatusOr<std::unique_ptr<PostgresStore>> store =
        PostgresStore::Open(url_, options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  std::string Query(const std::string& sql) {
    absl::StatusOr<std::string> value = RawQuery(url_, sql);
    EXPECT_TRUE(value.ok()) << sql << ": " << value.status();
    return value.value_or("");
  }

  std::string url_;
};

TEST_F(PostgresStoreTest, RecordsTheSchemaVersion) {
  ASSERT_NE(Open(), nullptr);
  EXPECT_EQ(Query("SELECT MAX(version) FROM schema_version"),
            std::to_string(PostgresStore::kSchemaVersion));
  // Opening again migrates nothing.
  ASSERT_NE(Open(), nullptr);
  EXPECT_EQ(Query("SELECT COUNT(*) FROM schema_version"),
            std::to_string(PostgresStore::kSchemaVersion));
}

TEST_F(PostgresStoreTest, RefusesANewerSchema) {
  ASSERT_NE(Open(), nullptr);
  Query("INSERT INTO schema_version(version) VALUES (" +
        std::to_string(PostgresStore::kSchemaVersion + 1) + ")");
  absl::StatusOr<std::unique_ptr<PostgresStore>> store =
      PostgresStore::Open(url_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("newer"));
}

TEST_F(PostgresStoreTest, ConcurrentOpensMigrateOnce) {
  constexpr int kStores = 4;
  std::vector<absl::Status> statuses(kStores);
  std::latch start(kStores);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStores; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      statuses[i] = PostgresStore::Open(url_).status();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& status : statuses)
    EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(Query("SELECT COUNT(*) FROM schema_version"),
            std::to_string(PostgresStore::kSchemaVersion));
}

TEST_F(PostgresStoreTest, DataSurvivesReopenAndIsSharedByStores) {
  {
    std::unique_ptr<PostgresStore> store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
    ASSERT_TRUE(store->CreateTrials("mnist", std::vector<v1::Trial>(3)).ok());
  }
  std::unique_ptr<PostgresStore> first = Open();
  std::unique_ptr<PostgresStore> second = Open();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(first->ListTrials("mnist", {})->size(), 3u);
  // Two servers on one database: each sees the other's writes at once, and
  // trial ids stay dense across them.
  ASSERT_TRUE(second->CreateTrials("mnist", std::vector<v1::Trial>(1)).ok());
  absl::StatusOr<std::vector<v1::Trial>> next =
      first->CreateTrials("mnist", std::vector<v1::Trial>(1));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ((*next)[0].id(), 5);
  EXPECT_EQ(second->GetTrial("mnist", 5)->id(), 5);
  // Each store's guess of the last id (which lets it insert in one
  // statement) is now stale: each still takes the next ids.
  for (int round = 0; round < 2; ++round) {
    for (PostgresStore* store : {second.get(), first.get()}) {
      absl::StatusOr<std::vector<v1::Trial>> more =
          store->CreateTrials("mnist", std::vector<v1::Trial>(2));
      ASSERT_TRUE(more.ok()) << more.status();
      EXPECT_EQ((*more)[0].id(),
                static_cast<int64_t>(store->ListTrials("mnist", {})->size()) - 1);
    }
  }
  EXPECT_EQ(first->ListTrials("mnist", {})->size(), 13u);
  // A study deleted by one store and made again by the other starts at 1.
  ASSERT_TRUE(second->DeleteStudy("mnist").ok());
  ASSERT_EQ(first->GetStudy("mnist").status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(second->CreateStudy(MakeStudy("mnist")).ok());
  next = first->CreateTrials("mnist", std::vector<v1::Trial>(1));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ((*next)[0].id(), 1);
  EXPECT_TRUE(second->CheckIntegrity().ok());
}

// Several servers granting the same expired trials from the same read, each
// a store of its own: the database lets exactly one of them have each.
TEST_F(PostgresStoreTest, StoresRacingOnALeaseEpochHaveOneWinner) {
  constexpr int kStores = 3;
  constexpr int kTrials = 20;
  std::vector<std::unique_ptr<PostgresStore>> stores;
  for (int i = 0; i < kStores; ++i) {
    stores.push_back(Open());
    ASSERT_NE(stores.back(), nullptr);
  }
  ASSERT_TRUE(stores[0]->CreateStudy(MakeStudy("mnist")).ok());
  v1::Trial expired;
  expired.set_state(v1::Trial::ACTIVE);
  expired.set_client_id("lost-worker");
  expired.set_lease_epoch(1);
  absl::StatusOr<std::vector<v1::Trial>> read = stores[0]->CreateTrials(
      "mnist", std::vector<v1::Trial>(kTrials, expired));
  ASSERT_TRUE(read.ok()) << read.status();

  std::vector<std::vector<absl::Status>> statuses(
      kStores, std::vector<absl::Status>(kTrials));
  std::latch start(kStores);
  std::vector<std::thread> servers;
  for (int s = 0; s < kStores; ++s) {
    servers.emplace_back([&, s] {
      start.arrive_and_wait();
      for (int i = 0; i < kTrials; ++i) {
        v1::Trial granted = (*read)[i];
        granted.set_client_id("server-" + std::to_string(s));
        granted.set_lease_epoch(2);
        statuses[s][i] =
            stores[s]->UpdateTrialIf(granted, TrialVersion::Of((*read)[i]));
      }
    });
  }
  for (std::thread& server : servers) server.join();

  for (int i = 0; i < kTrials; ++i) {
    SCOPED_TRACE(i + 1);
    int winner = -1;
    for (int s = 0; s < kStores; ++s) {
      if (statuses[s][i].ok()) {
        EXPECT_EQ(winner, -1) << "two winners";
        winner = s;
      } else {
        EXPECT_EQ(statuses[s][i].code(), absl::StatusCode::kAborted)
            << statuses[s][i];
        EXPECT_THAT(statuses[s][i].message(),
                    HasSubstr("ACTIVE under lease epoch 2 now"));
      }
    }
    ASSERT_NE(winner, -1);
    absl::StatusOr<v1::Trial> stored = stores[1]->GetTrial("mnist", i + 1);
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_EQ(stored->client_id(), "server-" + std::to_string(winner));
    EXPECT_EQ(stored->lease_epoch(), 2);
  }
  // One change per trial created and one per winner.
  absl::StatusOr<std::vector<TrialChange>> changes =
      stores[2]->ListTrialChanges("mnist", 0, 0);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_EQ(changes->back().sequence, 2 * kTrials);
}

TEST_F(PostgresStoreTest, BadUrlsAreInvalidArgumentWithoutThePassword) {
  for (const std::string url :
       {"postgresql://alice:s3cret@localhost/ht?nosuchoption=1",
        "postgresql://alice:s3cret@localhost:notaport/ht"}) {
    SCOPED_TRACE(url);
    absl::StatusOr<std::unique_ptr<PostgresStore>> store =
        PostgresStore::Open(url);
    ASSERT_FALSE(store.ok());
    EXPECT_THAT(store.status().code(),
                ::testing::AnyOf(absl::StatusCode::kInvalidArgument,
                                 absl::StatusCode::kUnavailable));
    EXPECT_THAT(store.status().message(), HasSubstr("alice:****@localhost"));
    EXPECT_THAT(store.status().message(), Not(HasSubstr("s3cret")));
  }
  EXPECT_EQ(PostgresStore::Open("studies.db").status().code(),
            absl::StatusCode::kInvalidArgument);
  PostgresOptions none;
  none.max_connections = 0;
  EXPECT_EQ(PostgresStore::Open(url_, none).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PostgresStoreTest, BackupPointsToPgDump) {
  std::unique_ptr<PostgresStore> store = Open();
  ASSERT_NE(store, nullptr);
  absl::Status status = store->Backup("/tmp/copy.db");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("pg_dump"));
}

TEST_F(PostgresStoreTest, DamagedRowsAreDataLoss) {
  std::unique_ptr<PostgresStore> store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
  ASSERT_TRUE(store->CreateTrials("mnist", std::vector<v1::Trial>(2)).ok());
  EXPECT_TRUE(store->CheckIntegrity().ok());

  // A column that disagrees with its message.
  Query("UPDATE trials SET lease_epoch = 7 WHERE trial_id = 1");
  absl::Status status = store->CheckIntegrity();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr("trial 1 of study \"mnist\""));

  // A message that does not parse.
  Query("UPDATE trials SET trial = '\\xffffffff'::bytea WHERE trial_id = 2");
  absl::StatusOr<v1::Trial> trial = store->GetTrial("mnist", 2);
  EXPECT_EQ(trial.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(trial.status().message(), HasSubstr("does not parse"));
  status = store->CheckIntegrity();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr("trial 2 of study \"mnist\""));

  // Trial ids that are no longer dense.
  Query("DELETE FROM trials WHERE trial_id = 1");
  status = store->CheckIntegrity();
  EXPECT_THAT(status.message(), HasSubstr("ids must be 1 to the last"));
}

// A server of its own, which this test stops and starts again.
TEST(PostgresStoreServerTest, ALostServerIsUnavailableUntilItIsBack) {
  absl::StatusOr<std::unique_ptr<test::PostgresServer>> server =
      test::PostgresServer::Start();
  if (!server.ok()) return SkipOrFail(server.status());
  absl::StatusOr<std::string> url = (*server)->CreateDatabase("lost");
  ASSERT_TRUE(url.ok()) << url.status();
  absl::StatusOr<std::unique_ptr<PostgresStore>> store =
      PostgresStore::Open(*url);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->CreateStudy(MakeStudy("mnist")).ok());

  ASSERT_TRUE((*server)->Stop().ok());
  // The call that finds its connection cut, and one that cannot connect.
  for (int i = 0; i < 2; ++i) {
    absl::Status status = (*store)->GetStudy("mnist").status();
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_THAT(status.message(), HasSubstr("PostgreSQL at " + *url));
    status = (*store)->CreateStudy(MakeStudy("cifar"));
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  }

  ASSERT_TRUE((*server)->Restart().ok());
  absl::StatusOr<v1::Study> study = (*store)->GetStudy("mnist");
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_TRUE((*store)->CreateStudy(MakeStudy("cifar")).ok());
  EXPECT_EQ((*store)->ListStudies()->size(), 2u);
}

}  // namespace
}  // namespace hypertune::storage
