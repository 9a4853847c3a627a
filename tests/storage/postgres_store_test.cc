// PostgresStore's own tests (the shared typed suite runs on it too, in
// study_store_test.cc): URLs and what errors show of them, the schema's
// version and the migration of a version-2 database, several stores on one
// database, conditional writes and appends racing across stores, where a
// curve is kept, a server that goes away and comes back, damaged rows.
#include "storage/postgres_store.h"

#include <libpq-fe.h>

#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "storage/postgres/connection.h"
#include "storage/postgres/schema.h"
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
  // The last number of study "mnist"'s change sequence.
  int64_t LastSequenceOf(PostgresStore& store) {
    absl::StatusOr<std::vector<TrialChange>> changes =
        store.ListTrialChanges("mnist", 0, 0);
    EXPECT_TRUE(changes.ok()) << changes.status();
    return changes.ok() && !changes->empty() ? changes->back().sequence : 0;
  }

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
      EXPECT_EQ(
          (*more)[0].id(),
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

// ----- Measurements in rows of their own (schema version 3) -----

v1::Measurement AccuracyAt(int64_t step, double value) {
  v1::Measurement m;
  m.set_step(step);
  (*m.mutable_metrics())["accuracy"] = value;
  (*m.mutable_metrics())["loss"] = 1 - value;
  return m;
}

bool Same(const google::protobuf::Message& a,
          const google::protobuf::Message& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

// A bytea literal of `bytes` for SQL text.
std::string Bytea(const std::string& bytes) {
  return absl::StrCat("'\\x", absl::BytesToHexString(bytes), "'::bytea");
}

TEST_F(PostgresStoreTest, AnUnfinishedTrialsCurveIsRowsOfItsOwn) {
  std::unique_ptr<PostgresStore> store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
  v1::Trial active;
  active.set_state(v1::Trial::ACTIVE);
  active.set_client_id("w");
  active.set_lease_epoch(1);
  absl::StatusOr<std::vector<v1::Trial>> created =
      store->CreateTrials("mnist", {active});
  ASSERT_TRUE(created.ok()) << created.status();
  v1::Trial expected = (*created)[0];
  constexpr int kReports = 50;
  for (int step = 1; step <= kReports; ++step) {
    absl::StatusOr<TrialHead> head = store->GetTrialHead("mnist", 1);
    ASSERT_TRUE(head.ok()) << head.status();
    ASSERT_EQ(head->measurements, step - 1);
    const v1::Measurement report = AccuracyAt(step, 0.01 * step);
    ASSERT_TRUE(store
                    ->AppendMeasurement(head->trial, report,
                                        TrialVersion::Of(head->trial))
                    .ok());
    *expected.add_measurements() = report;
  }
  // One row per report; the trial's own message holds none of them.
  EXPECT_EQ(Query("SELECT COUNT(*) FROM measurements"),
            std::to_string(kReports));
  EXPECT_EQ(Query("SELECT measurements FROM trials"), std::to_string(kReports));
  v1::Trial head_message;
  ASSERT_TRUE(head_message.ParseFromString(absl::HexStringToBytes(
      Query("SELECT encode(trial, 'hex') FROM trials"))));
  EXPECT_EQ(head_message.measurements_size(), 0);
  // Every read assembles the whole trial.
  EXPECT_TRUE(Same(*store->GetTrial("mnist", 1), expected));
  EXPECT_TRUE(Same((*store->ListTrials("mnist", {}))[0], expected));
  EXPECT_TRUE(
      Same((*store->ListTrialsInStates({v1::Trial::ACTIVE}))[0], expected));
  EXPECT_TRUE(
      Same(store->ListTrialChanges("mnist", 0, 0)->back().trial, expected));
  EXPECT_TRUE(Same(*store->GetStudyWithTrial("mnist", 1)->trial, expected));
  EXPECT_TRUE(
      Same(store->GetStudyOverview("mnist", {v1::Trial::ACTIVE})->trials[0],
           expected));
  EXPECT_EQ(LastSequenceOf(*store), kReports + 1);
  EXPECT_TRUE(store->CheckIntegrity().ok()) << store->CheckIntegrity();

  // A renewal (the whole trial, no change recorded) keeps the rows.
  expected.set_lease_expire_time_ms(9000);
  ASSERT_TRUE(store->RenewTrialLease(expected).ok());
  EXPECT_TRUE(Same(*store->GetTrial("mnist", 1), expected));
  EXPECT_EQ(Query("SELECT COUNT(*) FROM measurements"),
            std::to_string(kReports));
  EXPECT_EQ(LastSequenceOf(*store), kReports + 1);

  // Finished, the curve moves into the trial's message.
  const TrialVersion read = TrialVersion::Of(expected);
  expected.set_state(v1::Trial::COMPLETED);
  ASSERT_TRUE(store->UpdateTrialIf(expected, read).ok());
  EXPECT_EQ(Query("SELECT COUNT(*) FROM measurements"), "0");
  EXPECT_EQ(Query("SELECT measurements FROM trials"), "0");
  EXPECT_TRUE(Same(*store->GetTrial("mnist", 1), expected));
  absl::StatusOr<TrialHead> head = store->GetTrialHead("mnist", 1);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->measurements, kReports);
  EXPECT_TRUE(Same(*head->latest, AccuracyAt(kReports, 0.01 * kReports)));
  EXPECT_TRUE(store->CheckIntegrity().ok()) << store->CheckIntegrity();
  // Appending to it is refused, and the curve stays whole.
  EXPECT_EQ(store
                ->AppendMeasurement(head->trial, AccuracyAt(99, 0.9),
                                    TrialVersion::Of(head->trial))
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Same(*store->GetTrial("mnist", 1), expected));

  // Back to running (a resumed trial), the rows come back; a study deleted
  // takes them with it.
  const TrialVersion finished = TrialVersion::Of(expected);
  expected.set_state(v1::Trial::ACTIVE);
  ASSERT_TRUE(store->UpdateTrialIf(expected, finished).ok());
  EXPECT_EQ(Query("SELECT COUNT(*) FROM measurements"),
            std::to_string(kReports));
  EXPECT_TRUE(Same(*store->GetTrial("mnist", 1), expected));
  ASSERT_TRUE(store->DeleteStudy("mnist").ok());
  EXPECT_EQ(Query("SELECT COUNT(*) FROM measurements"), "0");
}

TEST_F(PostgresStoreTest, DamagedMeasurementRowsAreDataLoss) {
  std::unique_ptr<PostgresStore> store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
  v1::Trial active;
  active.set_state(v1::Trial::ACTIVE);
  active.add_measurements()->set_step(1);
  active.add_measurements()->set_step(2);
  ASSERT_TRUE(store->CreateTrials("mnist", {active}).ok());
  // Created with a curve, it is split at once.
  EXPECT_EQ(Query("SELECT COUNT(*) FROM measurements"), "2");
  EXPECT_TRUE(store->CheckIntegrity().ok()) << store->CheckIntegrity();
  Query("DELETE FROM measurements WHERE idx = 1");
  absl::Status status = store->CheckIntegrity();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr("counts 2 measurements"));
  EXPECT_EQ(store->GetTrialHead("mnist", 1).status().code(),
            absl::StatusCode::kDataLoss);
}

// Two servers on one database writing one trial from the same read: one
// regrants it (a new lease epoch), the other appends a report that stops
// it. Each changes the trial's version, so exactly one lands and the other
// is ABORTED, whichever comes first.
TEST_F(PostgresStoreTest, StoresRacingToAppendHaveOneWinner) {
  std::unique_ptr<PostgresStore> first = Open();
  std::unique_ptr<PostgresStore> second = Open();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(first->CreateStudy(MakeStudy("mnist")).ok());
  v1::Trial active;
  active.set_state(v1::Trial::ACTIVE);
  active.set_lease_epoch(1);
  constexpr int kRounds = 20;
  for (int round = 0; round < kRounds; ++round) {
    absl::StatusOr<std::vector<v1::Trial>> created =
        first->CreateTrials("mnist", {active});
    ASSERT_TRUE(created.ok()) << created.status();
    const v1::Trial read = (*created)[0];
    v1::Trial regranted = read;
    regranted.set_lease_epoch(2);
    v1::Trial stopping = read;
    stopping.set_state(v1::Trial::STOPPING);
    absl::Status appended;
    absl::Status granted;
    std::latch start(2);
    std::thread appender([&] {
      start.arrive_and_wait();
      appended = first->AppendMeasurement(stopping, AccuracyAt(1, 0.5),
                                          TrialVersion::Of(read));
    });
    std::thread granter([&] {
      start.arrive_and_wait();
      granted = second->UpdateTrialIf(regranted, TrialVersion::Of(read));
    });
    appender.join();
    granter.join();
    // Whichever came second was fenced by the first.
    EXPECT_NE(appended.ok(), granted.ok()) << appended << " / " << granted;
    EXPECT_EQ((appended.ok() ? granted : appended).code(),
              absl::StatusCode::kAborted);
    absl::StatusOr<v1::Trial> stored = second->GetTrial("mnist", read.id());
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_EQ(stored->measurements_size(), appended.ok() ? 1 : 0);
    EXPECT_EQ(stored->state(),
              appended.ok() ? v1::Trial::STOPPING : v1::Trial::ACTIVE);
    EXPECT_EQ(stored->lease_epoch(), granted.ok() ? 2 : 1);
  }
  EXPECT_TRUE(first->CheckIntegrity().ok()) << first->CheckIntegrity();
}

// A database as the build before measurement rows left it (schema version
// 2): Open migrates it, splitting the curves of unfinished trials only.
TEST_F(PostgresStoreTest, MigratesAVersion2Database) {
  {
    absl::StatusOr<std::unique_ptr<postgres::Connection>> db =
        postgres::Connection::Open(url_, url_, 10);
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE(postgres::MigrateTo(**db, 2).ok());
  }
  EXPECT_EQ(Query("SELECT MAX(version) FROM schema_version"), "2");
  const v1::Study study = MakeStudy("mnist");
  std::vector<v1::Trial> trials(3);
  for (int i = 0; i < 3; ++i) {
    v1::Trial& trial = trials[i];
    trial.set_study_name("mnist");
    trial.set_id(i + 1);
    trial.set_state(i == 1 ? v1::Trial::COMPLETED : v1::Trial::ACTIVE);
    trial.set_client_id("w");
    trial.set_lease_epoch(1);
    // The third has no curve yet.
    for (int step = 1; i < 2 && step <= 4; ++step) {
      *trial.add_measurements() = AccuracyAt(step, 0.1 * step);
    }
  }
  Query(absl::StrCat(
      "INSERT INTO studies(name, state, create_time_ms, last_trial_id, "
      "last_sequence, study) VALUES (",
      Bytea("mnist"), ", ", study.state(), ", 0, 3, 3, ",
      Bytea(study.SerializeAsString()), ")"));
  for (const v1::Trial& trial : trials) {
    Query(
        absl::StrCat("INSERT INTO trials(study_id, trial_id, state, client_id, "
                     "lease_epoch, sequence, trial) SELECT id, ",
                     trial.id(), ", ", trial.state(), ", ",
                     Bytea(trial.client_id()), ", 1, ", trial.id(), ", ",
                     Bytea(trial.SerializeAsString()), " FROM studies"));
  }

  std::unique_ptr<PostgresStore> store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(Query("SELECT MAX(version) FROM schema_version"),
            std::to_string(PostgresStore::kSchemaVersion));
  // The active trial's curve is rows; the completed one keeps its curve.
  EXPECT_EQ(Query("SELECT COUNT(*) FROM measurements WHERE trial_id = 1"), "4");
  EXPECT_EQ(Query("SELECT COUNT(*) FROM measurements"), "4");
  for (const v1::Trial& trial : trials) {
    absl::StatusOr<v1::Trial> read = store->GetTrial("mnist", trial.id());
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_TRUE(Same(*read, trial)) << trial.id();
  }
  EXPECT_TRUE(store->CheckIntegrity().ok()) << store->CheckIntegrity();
  // And the migrated trial takes reports.
  absl::StatusOr<TrialHead> head = store->GetTrialHead("mnist", 1);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->measurements, 4);
  EXPECT_TRUE(Same(*head->latest, AccuracyAt(4, 0.4)));
  ASSERT_TRUE(store
                  ->AppendMeasurement(head->trial, AccuracyAt(5, 0.5),
                                      TrialVersion::Of(head->trial))
                  .ok());
  v1::Trial expected = trials[0];
  *expected.add_measurements() = AccuracyAt(5, 0.5);
  EXPECT_TRUE(Same(*store->GetTrial("mnist", 1), expected));
  EXPECT_TRUE(store->CheckIntegrity().ok()) << store->CheckIntegrity();
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
