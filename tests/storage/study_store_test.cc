// One suite run against every StudyStore, and OpenStore's tests.
// SqliteStore's own (persistence, schema versioning, pragmas, damaged files,
// backups, group commit) are in sqlite_store_test.cc, PostgresStore's in
// postgres_store_test.cc.
#include "storage/study_store.h"

#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <latch>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "storage/memory_store.h"
#include "storage/open_store.h"
#include "storage/postgres_store.h"
#include "storage/sqlite_store.h"
#include "tests/storage/postgres_test_util.h"
#include "tests/storage/store_test_util.h"

namespace hypertune::storage {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Pair;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

// ----- The suite over every store -----

// The stores the suite runs against. A value parameter rather than a type
// one: the tests use a store only through StudyStore, and a typed suite
// compiled every test once per store (a quarter of the file's compile time
// is all it needs; docs/install.md).
enum class StoreKind {
  kMemory,
  kSqlite,
  // A SqliteStore on ":memory:", where one connection serves reads and
  // writes.
  kSqliteInMemory,
  // A PostgresStore on a fresh database of the test binary's own server;
  // the test is skipped where PostgreSQL is not installed.
  kPostgres,
};

std::string StoreName(StoreKind kind) {
  switch (kind) {
    case StoreKind::kMemory:
      return "Memory";
    case StoreKind::kSqlite:
      return "Sqlite";
    case StoreKind::kSqliteInMemory:
      return "SqliteInMemory";
    case StoreKind::kPostgres:
      return "Postgres";
  }
  return "Unknown";
}

// The store of `kind`; null where it could not be made (the test has
// failed, or been skipped, saying why).
std::unique_ptr<StudyStore> MakeStore(StoreKind kind, const TempDir& dir) {
  switch (kind) {
    case StoreKind::kMemory:
      return std::make_unique<MemoryStore>();
    case StoreKind::kSqlite:
    case StoreKind::kSqliteInMemory: {
      absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(
          kind == StoreKind::kSqlite ? dir.File("studies.db") : ":memory:");
      EXPECT_TRUE(store.ok()) << store.status();
      return store.ok() ? std::move(*store) : nullptr;
    }
    case StoreKind::kPostgres: {
      absl::StatusOr<std::string> url = FreshPostgresDatabase();
      if (!url.ok()) {
        SkipOrFail(url.status());
        return nullptr;
      }
      absl::StatusOr<std::unique_ptr<PostgresStore>> store =
          PostgresStore::Open(*url);
      EXPECT_TRUE(store.ok()) << store.status();
      return store.ok() ? std::move(*store) : nullptr;
    }
  }
  ADD_FAILURE() << "unknown store kind " << static_cast<int>(kind);
  return nullptr;
}

class StudyStoreTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    store_ = MakeStore(GetParam(), dir_);
    if (IsSkipped()) return;
    ASSERT_NE(store_, nullptr);
  }

  // Creates a study named `name`, failing the test on error.
  void Create(const std::string& name) {
    ASSERT_TRUE(store_->CreateStudy(MakeStudy(name)).ok());
  }

  void ExpectIntegrityOk() {
    absl::Status status = store_->CheckIntegrity();
    EXPECT_TRUE(status.ok()) << status;
  }

  TempDir dir_;
  std::unique_ptr<StudyStore> store_;
};

INSTANTIATE_TEST_SUITE_P(Stores, StudyStoreTest,
                         ::testing::Values(StoreKind::kMemory,
                                           StoreKind::kSqlite,
                                           StoreKind::kSqliteInMemory,
                                           StoreKind::kPostgres),
                         [](const ::testing::TestParamInfo<StoreKind>& info) {
                           return StoreName(info.param);
                         });

TEST_P(StudyStoreTest, CreateThenGetReturnsTheStudy) {
  v1::Study study = MakeStudy("mnist");
  ASSERT_TRUE(this->store_->CreateStudy(study).ok());
  absl::StatusOr<v1::Study> got = this->store_->GetStudy("mnist");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, EqualsProto(study));
}

TEST_P(StudyStoreTest, TrialCountsAreNotStored) {
  v1::Study study = MakeStudy("mnist");
  (*study.mutable_trial_counts())["COMPLETED"] = 3;
  ASSERT_TRUE(this->store_->CreateStudy(study).ok());
  absl::StatusOr<v1::Study> got = this->store_->GetStudy("mnist");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->trial_counts(), IsEmpty());
  EXPECT_EQ(got->spec().seed(), 42u);
}

TEST_P(StudyStoreTest, DuplicateStudyIsAlreadyExists) {
  this->Create("mnist");
  v1::Study other = MakeStudy("mnist");
  other.set_state(v1::Study::PAUSED);
  absl::Status status = this->store_->CreateStudy(other);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
  EXPECT_THAT(status.message(), HasSubstr("mnist"));
  // The first one is untouched.
  EXPECT_EQ(this->store_->GetStudy("mnist")->state(), v1::Study::ACTIVE);
}

TEST_P(StudyStoreTest, ListStudiesIsSortedByName) {
  absl::StatusOr<std::vector<v1::Study>> empty = this->store_->ListStudies();
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_THAT(*empty, IsEmpty());

  for (const char* name : {"b", "c", "a", "B"}) this->Create(name);
  absl::StatusOr<std::vector<v1::Study>> studies = this->store_->ListStudies();
  ASSERT_TRUE(studies.ok()) << studies.status();
  std::vector<std::string> names;
  for (const v1::Study& study : *studies) names.push_back(study.name());
  EXPECT_THAT(names, ElementsAre("B", "a", "b", "c"));
}

TEST_P(StudyStoreTest, UpdateStudyReplacesIt) {
  this->Create("mnist");
  v1::Study changed = MakeStudy("mnist");
  changed.set_state(v1::Study::COMPLETED);
  changed.mutable_spec()->set_max_trials(50);
  ASSERT_TRUE(this->store_->UpdateStudy(changed).ok());
  absl::StatusOr<v1::Study> got = this->store_->GetStudy("mnist");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, EqualsProto(changed));
}

TEST_P(StudyStoreTest, ModifyStudyFromManyThreadsLosesNoChange) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  constexpr int kThreads = 8;
  constexpr int kRounds = 25;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        absl::Status s = store.ModifyStudy("mnist", [](v1::Study& study) {
          study.set_device_seconds(study.device_seconds() + 1);
        });
        if (!s.ok()) ++failures[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(failures, Each(0));
  absl::StatusOr<v1::Study> got = store.GetStudy("mnist");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->device_seconds(), kThreads * kRounds);
  // The rest of the study is as created.
  v1::Study expected = MakeStudy("mnist");
  expected.set_device_seconds(kThreads * kRounds);
  EXPECT_THAT(*got, EqualsProto(expected));
  EXPECT_EQ(store.ModifyStudy("nope", [](v1::Study&) {}).code(),
            absl::StatusCode::kNotFound);
}

TEST_P(StudyStoreTest, DeleteStudyRemovesIt) {
  this->Create("mnist");
  this->Create("cifar");
  ASSERT_TRUE(this->store_->DeleteStudy("mnist").ok());
  EXPECT_EQ(this->store_->GetStudy("mnist").status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<std::vector<v1::Study>> studies = this->store_->ListStudies();
  ASSERT_TRUE(studies.ok()) << studies.status();
  ASSERT_EQ(studies->size(), 1u);
  EXPECT_EQ((*studies)[0].name(), "cifar");
}

TEST_P(StudyStoreTest, EveryMethodSaysNotFoundForAMissingStudy) {
  StudyStore& store = *this->store_;
  this->Create("other");
  const auto kNotFound = absl::StatusCode::kNotFound;
  EXPECT_EQ(store.GetStudy("nope").status().code(), kNotFound);
  EXPECT_EQ(store.UpdateStudy(MakeStudy("nope")).code(), kNotFound);
  EXPECT_EQ(store.DeleteStudy("nope").code(), kNotFound);
  EXPECT_EQ(store.CreateTrials("nope", MakeTrials(2, v1::Trial::REQUESTED))
                .status()
                .code(),
            kNotFound);
  EXPECT_EQ(store.CreateTrials("nope", {}).status().code(), kNotFound);
  EXPECT_EQ(store.GetTrial("nope", 1).status().code(), kNotFound);
  EXPECT_EQ(store.GetStudyWithTrial("nope", 1).status().code(), kNotFound);
  v1::Trial trial = MakeTrial(v1::Trial::ACTIVE);
  trial.set_study_name("nope");
  trial.set_id(1);
  EXPECT_EQ(store.UpdateTrial(trial).code(), kNotFound);
  EXPECT_EQ(store.ListTrials("nope", {}).status().code(), kNotFound);
  EXPECT_EQ(store.CountTrials("nope").status().code(), kNotFound);

  absl::Status status = store.GetTrial("nope", 1).status();
  EXPECT_THAT(status.message(), HasSubstr("study \"nope\" not found"));
  // Nothing was created on the way.
  EXPECT_EQ(store.ListStudies()->size(), 1u);
}

TEST_P(StudyStoreTest, MissingTrialIsNotFound) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(2, v1::Trial::REQUESTED)).ok());
  for (int64_t id : {int64_t{0}, int64_t{3}, int64_t{-1}, int64_t{1} << 40}) {
    absl::Status status = store.GetTrial("mnist", id).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << id;
    EXPECT_THAT(status.message(), HasSubstr("trial " + std::to_string(id)));
    v1::Trial trial = MakeTrial(v1::Trial::ACTIVE);
    trial.set_study_name("mnist");
    trial.set_id(id);
    EXPECT_EQ(store.UpdateTrial(trial).code(), absl::StatusCode::kNotFound)
        << id;
  }
  // The failed updates created nothing.
  EXPECT_EQ(store.ListTrials("mnist", {})->size(), 2u);
}

TEST_P(StudyStoreTest, StudyWithTrialReadsBothOrSaysWhichIsMissing) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  absl::StatusOr<std::vector<v1::Trial>> created =
      store.CreateTrials("mnist", MakeTrials(2, v1::Trial::REQUESTED));
  ASSERT_TRUE(created.ok()) << created.status();

  absl::StatusOr<StudyWithTrial> read = store.GetStudyWithTrial("mnist", 2);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(read->study, EqualsProto(*store.GetStudy("mnist")));
  ASSERT_TRUE(read->trial.ok()) << read->trial.status();
  EXPECT_THAT(*read->trial, EqualsProto((*created)[1]));

  // The study is there, the trial is not: the study still comes back.
  read = store.GetStudyWithTrial("mnist", 3);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->study.name(), "mnist");
  EXPECT_EQ(read->trial.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(read->trial.status().message(), HasSubstr("trial 3"));
}

TEST_P(StudyStoreTest, ALargeBatchOfTrialsIsStoredWhole) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  // More than one statement's worth in the PostgreSQL store.
  constexpr int kTrials = 150;
  std::vector<v1::Trial> input = MakeTrials(kTrials, v1::Trial::REQUESTED);
  for (int i = 0; i < kTrials; ++i) input[i].set_client_id(absl::StrCat(i));
  absl::StatusOr<std::vector<v1::Trial>> created =
      store.CreateTrials("mnist", input);
  ASSERT_TRUE(created.ok()) << created.status();
  absl::StatusOr<std::vector<v1::Trial>> stored = store.ListTrials("mnist", {});
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), static_cast<size_t>(kTrials));
  for (int i = 0; i < kTrials; ++i) {
    EXPECT_EQ((*stored)[i].id(), i + 1);
    EXPECT_EQ((*stored)[i].client_id(), absl::StrCat(i));
    EXPECT_THAT((*stored)[i], EqualsProto((*created)[i]));
  }
  absl::StatusOr<std::vector<TrialChange>> changes =
      store.ListTrialChanges("mnist", 0, 0);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), static_cast<size_t>(kTrials));
  EXPECT_EQ(changes->front().sequence, 1);
  EXPECT_EQ(changes->back().sequence, kTrials);
}

TEST_P(StudyStoreTest, CreateTrialsAssignsDenseIdsPerStudy) {
  StudyStore& store = *this->store_;
  this->Create("a");
  this->Create("b");

  std::vector<v1::Trial> input = MakeTrials(3, v1::Trial::REQUESTED);
  input[0].set_id(77);           // Ignored: the store assigns ids.
  input[1].set_study_name("b");  // Ignored too.
  absl::StatusOr<std::vector<v1::Trial>> first = store.CreateTrials("a", input);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(Ids(*first), ElementsAre(1, 2, 3));
  for (const v1::Trial& trial : *first) EXPECT_EQ(trial.study_name(), "a");

  absl::StatusOr<std::vector<v1::Trial>> second =
      store.CreateTrials("a", MakeTrials(2, v1::Trial::REQUESTED));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(Ids(*second), ElementsAre(4, 5));

  absl::StatusOr<std::vector<v1::Trial>> none = store.CreateTrials("a", {});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(*none, IsEmpty());

  absl::StatusOr<std::vector<v1::Trial>> other =
      store.CreateTrials("b", MakeTrials(2, v1::Trial::REQUESTED));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_THAT(Ids(*other), ElementsAre(1, 2));
  for (const v1::Trial& trial : *other) EXPECT_EQ(trial.study_name(), "b");

  absl::StatusOr<std::vector<v1::Trial>> third =
      store.CreateTrials("a", MakeTrials(1, v1::Trial::REQUESTED));
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_THAT(Ids(*third), ElementsAre(6));

  // What CreateTrials returned is what is stored.
  absl::StatusOr<v1::Trial> stored = store.GetTrial("a", 1);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_THAT(*stored, EqualsProto((*first)[0]));
}

TEST_P(StudyStoreTest, TrialRoundTripsWithMeasurementsAndOddStrings) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  const double kInf = std::numeric_limits<double>::infinity();

  v1::Trial trial = MakeTrial(v1::Trial::ACTIVE, "host-1-0");
  v1::ParameterValue* category = trial.add_parameters();
  category->set_name("optimizer");
  category->set_string_value(OddStrings()[0]);
  v1::ParameterValue* layers = trial.add_parameters();
  layers->set_name("layers");
  layers->set_int_value(-3);
  trial.set_lease_epoch(2);
  trial.set_lease_expire_time_ms(1'700'000'060'000);
  absl::StatusOr<std::vector<v1::Trial>> created =
      store.CreateTrials("mnist", {trial});
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_EQ(created->size(), 1u);

  v1::Trial updated = (*created)[0];
  for (int step = 1; step <= 3; ++step) {
    v1::Measurement* m = updated.add_measurements();
    m->set_step(step);
    m->set_elapsed_seconds(1.5 * step);
    (*m->mutable_metrics())["accuracy"] = 0.1 * step;
    (*m->mutable_metrics())["loss"] = step == 3 ? kInf : 1.0 / step;
    (*m->mutable_metrics())["margin"] = -kInf;
  }
  *updated.mutable_final_measurement() = updated.measurements(2);
  updated.set_state(v1::Trial::INFEASIBLE);
  updated.set_infeasible_reason(OddStrings()[1]);
  updated.set_checkpoint_uri(OddStrings()[3]);
  updated.set_log_path(OddStrings()[5]);
  updated.set_client_id(OddStrings()[4]);
  updated.set_device_seconds(12.25);
  ASSERT_TRUE(store.UpdateTrial(updated).ok());

  absl::StatusOr<v1::Trial> got = store.GetTrial("mnist", 1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, EqualsProto(updated));
  EXPECT_EQ(got->measurements(2).metrics().at("loss"), kInf);
  EXPECT_EQ(got->measurements(0).metrics().at("margin"), -kInf);
  EXPECT_EQ(got->infeasible_reason(), std::string("nul\0inside", 10));
  EXPECT_EQ(got->checkpoint_uri().size(), 10u * 1024 + 3);
}

TEST_P(StudyStoreTest, OddStudyNamesRoundTripVerbatim) {
  StudyStore& store = *this->store_;
  const std::vector<std::string> names = OddStrings();
  for (const std::string& name : names) {
    SCOPED_TRACE(name.size());
    ASSERT_TRUE(store.CreateStudy(MakeStudy(name)).ok());
    absl::StatusOr<std::vector<v1::Trial>> trials =
        store.CreateTrials(name, MakeTrials(1, v1::Trial::REQUESTED));
    ASSERT_TRUE(trials.ok()) << trials.status();
    EXPECT_EQ((*trials)[0].study_name(), name);
  }
  for (const std::string& name : names) {
    absl::StatusOr<v1::Study> study = store.GetStudy(name);
    ASSERT_TRUE(study.ok()) << study.status();
    EXPECT_EQ(study->name(), name);
    absl::StatusOr<v1::Trial> trial = store.GetTrial(name, 1);
    ASSERT_TRUE(trial.ok()) << trial.status();
    EXPECT_EQ(trial->study_name(), name);
    // One trial each: "nul" and "nul\0inside" are different studies.
    EXPECT_EQ(store.ListTrials(name, {})->size(), 1u);
  }
  // A prefix up to the NUL is not a match, nor is the name cut short.
  EXPECT_EQ(store.GetStudy(std::string_view("nul\0", 4)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store.GetStudy(std::string(10 * 1024, 'k')).status().code(),
            absl::StatusCode::kNotFound);

  absl::StatusOr<std::vector<v1::Study>> listed = store.ListStudies();
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::vector<std::string> listed_names;
  for (const v1::Study& study : *listed) listed_names.push_back(study.name());
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(listed_names, sorted);

  // The injection string did nothing: everything is still there.
  ASSERT_TRUE(store.DeleteStudy(names[0]).ok());
  EXPECT_EQ(store.ListStudies()->size(), names.size() - 1);
  EXPECT_TRUE(store.GetTrial(names[1], 1).ok());
}

TEST_P(StudyStoreTest, InvalidUtf8IsRefusedUnchanged) {
  StudyStore& store = *this->store_;
  const std::string bad = "\xff\xfe not utf-8";
  EXPECT_EQ(store.CreateStudy(MakeStudy(bad)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(*store.ListStudies(), IsEmpty());

  this->Create("mnist");
  v1::Study study = MakeStudy("mnist");
  study.mutable_spec()->mutable_metrics(0)->set_name(bad);
  EXPECT_EQ(store.UpdateStudy(study).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.GetStudy("mnist")->spec().metrics(0).name(), "accuracy");

  std::vector<v1::Trial> batch = MakeTrials(3, v1::Trial::REQUESTED);
  batch[2].set_checkpoint_uri(bad);
  absl::Status status = store.CreateTrials("mnist", batch).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("trial 3 of study \"mnist\""));
  EXPECT_THAT(*store.ListTrials("mnist", {}), IsEmpty());

  absl::StatusOr<std::vector<v1::Trial>> created =
      store.CreateTrials("mnist", MakeTrials(1, v1::Trial::ACTIVE, "w"));
  ASSERT_TRUE(created.ok()) << created.status();
  v1::Trial trial = (*created)[0];
  trial.set_client_id(bad);
  EXPECT_EQ(store.UpdateTrial(trial).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(*store.GetTrial("mnist", 1), EqualsProto((*created)[0]));
}

TEST_P(StudyStoreTest, ListTrialsFiltersByState) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  // Ids 1..3 REQUESTED, 4..5 ACTIVE, 6 COMPLETED, 7 INFEASIBLE.
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(3, v1::Trial::REQUESTED)).ok());
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(2, v1::Trial::ACTIVE)).ok());
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(1, v1::Trial::COMPLETED)).ok());
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(1, v1::Trial::INFEASIBLE)).ok());

  auto list = [&](std::vector<v1::Trial::State> states) {
    TrialQuery query;
    query.states = std::move(states);
    absl::StatusOr<std::vector<v1::Trial>> trials =
        store.ListTrials("mnist", query);
    EXPECT_TRUE(trials.ok()) << trials.status();
    return trials.ok() ? Ids(*trials) : std::vector<int64_t>{};
  };
  EXPECT_EQ(list({}), Range(1, 7));
  EXPECT_THAT(list({v1::Trial::ACTIVE}), ElementsAre(4, 5));
  EXPECT_THAT(list({v1::Trial::INFEASIBLE, v1::Trial::COMPLETED}),
              ElementsAre(6, 7));
  EXPECT_THAT(list({v1::Trial::ACTIVE, v1::Trial::ACTIVE}), ElementsAre(4, 5));
  EXPECT_THAT(list({v1::Trial::STOPPED}), IsEmpty());

  // The filter follows updates.
  absl::StatusOr<v1::Trial> trial = store.GetTrial("mnist", 2);
  ASSERT_TRUE(trial.ok()) << trial.status();
  trial->set_state(v1::Trial::ACTIVE);
  ASSERT_TRUE(store.UpdateTrial(*trial).ok());
  EXPECT_THAT(list({v1::Trial::ACTIVE}), ElementsAre(2, 4, 5));
  EXPECT_THAT(list({v1::Trial::REQUESTED}), ElementsAre(1, 3));
}

TEST_P(StudyStoreTest, ListTrialsFiltersByClientId) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  const std::string odd = std::string("w\0'1", 4);
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(2, v1::Trial::ACTIVE, "w")).ok());
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(2, v1::Trial::ACTIVE, odd)).ok());
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(1, v1::Trial::REQUESTED)).ok());
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(1, v1::Trial::COMPLETED, "w"))
          .ok());

  auto list = [&](const std::string& client_id,
                  std::vector<v1::Trial::State> states) {
    TrialQuery query;
    query.client_id = client_id;
    query.states = std::move(states);
    absl::StatusOr<std::vector<v1::Trial>> trials =
        store.ListTrials("mnist", query);
    EXPECT_TRUE(trials.ok()) << trials.status();
    return trials.ok() ? Ids(*trials) : std::vector<int64_t>{};
  };
  EXPECT_THAT(list("w", {}), ElementsAre(1, 2, 6));
  EXPECT_THAT(list(odd, {}), ElementsAre(3, 4));
  EXPECT_THAT(list("w", {v1::Trial::ACTIVE}), ElementsAre(1, 2));
  EXPECT_THAT(list("x", {}), IsEmpty());
  EXPECT_EQ(list("", {}), Range(1, 6));

  // A trial handed to another worker moves with its client id.
  absl::StatusOr<v1::Trial> trial = store.GetTrial("mnist", 5);
  ASSERT_TRUE(trial.ok()) << trial.status();
  trial->set_state(v1::Trial::ACTIVE);
  trial->set_client_id(odd);
  ASSERT_TRUE(store.UpdateTrial(*trial).ok());
  EXPECT_THAT(list(odd, {v1::Trial::ACTIVE}), ElementsAre(3, 4, 5));
}

TEST_P(StudyStoreTest, ListTrialsPagesWithAfterIdAndLimit) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  this->Create("other");
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(25, v1::Trial::REQUESTED)).ok());
  ASSERT_TRUE(
      store.CreateTrials("other", MakeTrials(30, v1::Trial::ACTIVE)).ok());

  std::vector<int64_t> seen;
  std::vector<size_t> page_sizes;
  TrialQuery query;
  query.limit = 7;
  for (int page = 0; page < 10; ++page) {
    absl::StatusOr<std::vector<v1::Trial>> trials =
        store.ListTrials("mnist", query);
    ASSERT_TRUE(trials.ok()) << trials.status();
    page_sizes.push_back(trials->size());
    if (trials->empty()) break;
    for (const v1::Trial& trial : *trials) seen.push_back(trial.id());
    query.after_id = trials->back().id();
  }
  EXPECT_THAT(page_sizes, ElementsAre(7, 7, 7, 4, 0));
  EXPECT_EQ(seen, Range(1, 25));

  TrialQuery tail;
  tail.after_id = 20;
  EXPECT_EQ(Ids(*store.ListTrials("mnist", tail)), Range(21, 25));
  tail.after_id = 25;
  EXPECT_THAT(*store.ListTrials("mnist", tail), IsEmpty());

  TrialQuery negative;
  negative.limit = -1;
  EXPECT_EQ(store.ListTrials("mnist", negative).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(StudyStoreTest, ListTrialsPagesThroughAFilter) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  // Odd ids COMPLETED, even ids ACTIVE.
  for (int i = 1; i <= 20; ++i) {
    ASSERT_TRUE(
        store
            .CreateTrials("mnist", MakeTrials(1, i % 2 ? v1::Trial::COMPLETED
                                                       : v1::Trial::ACTIVE))
            .ok());
  }
  TrialQuery query;
  query.states = {v1::Trial::COMPLETED};
  query.limit = 3;
  std::vector<int64_t> seen;
  while (true) {
    absl::StatusOr<std::vector<v1::Trial>> trials =
        store.ListTrials("mnist", query);
    ASSERT_TRUE(trials.ok()) << trials.status();
    if (trials->empty()) break;
    EXPECT_LE(trials->size(), 3u);
    for (const v1::Trial& trial : *trials) seen.push_back(trial.id());
    query.after_id = trials->back().id();
  }
  EXPECT_THAT(seen, ElementsAre(1, 3, 5, 7, 9, 11, 13, 15, 17, 19));
}

TEST_P(StudyStoreTest, CountTrialsByState) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  this->Create("other");
  absl::StatusOr<absl::flat_hash_map<v1::Trial::State, int64_t>> counts =
      store.CountTrials("mnist");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_THAT(*counts, IsEmpty());

  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(3, v1::Trial::REQUESTED)).ok());
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(2, v1::Trial::COMPLETED)).ok());
  ASSERT_TRUE(
      store.CreateTrials("other", MakeTrials(4, v1::Trial::FAILED)).ok());
  counts = store.CountTrials("mnist");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_THAT(*counts, UnorderedElementsAre(Pair(v1::Trial::REQUESTED, 3),
                                            Pair(v1::Trial::COMPLETED, 2)));

  // Counts follow state changes (and not other updates), and deletions.
  absl::StatusOr<v1::Trial> trial = store.GetTrial("mnist", 1);
  ASSERT_TRUE(trial.ok()) << trial.status();
  trial->set_state(v1::Trial::ACTIVE);
  ASSERT_TRUE(store.UpdateTrial(*trial).ok());
  trial->set_client_id("w");
  ASSERT_TRUE(store.UpdateTrial(*trial).ok());
  counts = store.CountTrials("mnist");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_THAT(*counts, UnorderedElementsAre(Pair(v1::Trial::REQUESTED, 2),
                                            Pair(v1::Trial::ACTIVE, 1),
                                            Pair(v1::Trial::COMPLETED, 2)));
  ASSERT_TRUE(store.DeleteStudy("other").ok());
  this->Create("other");
  counts = store.CountTrials("other");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_THAT(*counts, IsEmpty());
  this->ExpectIntegrityOk();
}

TEST_P(StudyStoreTest, OverviewReadsTheStudyCountsAndTrialsInStates) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  this->Create("other");
  const std::vector<v1::Trial::State> live = {v1::Trial::REQUESTED,
                                              v1::Trial::ACTIVE};
  absl::StatusOr<StudyOverview> overview =
      store.GetStudyOverview("mnist", live);
  ASSERT_TRUE(overview.ok()) << overview.status();
  EXPECT_THAT(overview->study, EqualsProto(*store.GetStudy("mnist")));
  EXPECT_THAT(overview->counts, IsEmpty());
  EXPECT_THAT(overview->trials, IsEmpty());

  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(2, v1::Trial::COMPLETED)).ok());
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(2, v1::Trial::REQUESTED)).ok());
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(1, v1::Trial::ACTIVE, "w")).ok());
  ASSERT_TRUE(
      store.CreateTrials("other", MakeTrials(3, v1::Trial::ACTIVE)).ok());
  overview = store.GetStudyOverview("mnist", live);
  ASSERT_TRUE(overview.ok()) << overview.status();
  EXPECT_THAT(overview->counts,
              UnorderedElementsAre(Pair(v1::Trial::COMPLETED, 2),
                                   Pair(v1::Trial::REQUESTED, 2),
                                   Pair(v1::Trial::ACTIVE, 1)));
  EXPECT_THAT(Ids(overview->trials), ElementsAre(3, 4, 5));
  EXPECT_THAT(overview->trials[2], EqualsProto(*store.GetTrial("mnist", 5)));
  // A state asked for that no trial has adds nothing.
  overview = store.GetStudyOverview("mnist", {v1::Trial::STOPPING});
  ASSERT_TRUE(overview.ok()) << overview.status();
  EXPECT_THAT(overview->trials, IsEmpty());
  EXPECT_EQ(overview->counts.size(), 3u);

  EXPECT_EQ(store.GetStudyOverview("nope", live).status().code(),
            absl::StatusCode::kNotFound);
  absl::Status none = store.GetStudyOverview("mnist", {}).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.message(), HasSubstr("states"));
}

// (trial id, sequence) of each change.
std::vector<std::pair<int64_t, int64_t>> IdsAndSequences(
    const std::vector<TrialChange>& changes) {
  std::vector<std::pair<int64_t, int64_t>> result;
  for (const TrialChange& change : changes) {
    result.emplace_back(change.trial.id(), change.sequence);
  }
  return result;
}

TEST_P(StudyStoreTest, TrialChangesFollowTheStudysSequence) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  this->Create("other");
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(3, v1::Trial::REQUESTED)).ok());
  ASSERT_TRUE(
      store.CreateTrials("other", MakeTrials(2, v1::Trial::REQUESTED)).ok());
  absl::StatusOr<std::vector<TrialChange>> changes =
      store.ListTrialChanges("mnist", 0, 0);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_EQ(IdsAndSequences(*changes),
            (std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 2}, {3, 3}}));

  // An update moves the trial to the end, once; a lease renewal does not.
  absl::StatusOr<v1::Trial> first = store.GetTrial("mnist", 1);
  ASSERT_TRUE(first.ok()) << first.status();
  first->set_state(v1::Trial::ACTIVE);
  ASSERT_TRUE(store.UpdateTrial(*first).ok());
  first->set_lease_expire_time_ms(1234);
  ASSERT_TRUE(store.RenewTrialLease(*first).ok());
  changes = store.ListTrialChanges("mnist", 0, 0);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_EQ(IdsAndSequences(*changes),
            (std::vector<std::pair<int64_t, int64_t>>{{2, 2}, {3, 3}, {1, 4}}));
  EXPECT_EQ(changes->back().trial.lease_expire_time_ms(), 1234);
  EXPECT_EQ(changes->back().trial.state(), v1::Trial::ACTIVE);

  // Resuming after a sequence number, with a limit.
  changes = store.ListTrialChanges("mnist", 2, 1);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_EQ(IdsAndSequences(*changes),
            (std::vector<std::pair<int64_t, int64_t>>{{3, 3}}));
  changes = store.ListTrialChanges("mnist", 4, 0);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_THAT(*changes, IsEmpty());

  // New trials continue the sequence; other studies have their own.
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(1, v1::Trial::REQUESTED)).ok());
  changes = store.ListTrialChanges("mnist", 4, 0);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_EQ(IdsAndSequences(*changes),
            (std::vector<std::pair<int64_t, int64_t>>{{4, 5}}));
  changes = store.ListTrialChanges("other", 0, 0);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_EQ(IdsAndSequences(*changes),
            (std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 2}}));

  EXPECT_EQ(store.ListTrialChanges("missing", 0, 0).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store.ListTrialChanges("mnist", 0, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::Trial missing = MakeTrial(v1::Trial::ACTIVE);
  missing.set_study_name("mnist");
  missing.set_id(99);
  EXPECT_EQ(store.RenewTrialLease(missing).code(), absl::StatusCode::kNotFound);
}

TEST_P(StudyStoreTest, DeleteStudyRemovesItsTrials) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  this->Create("other");
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(5, v1::Trial::ACTIVE)).ok());
  ASSERT_TRUE(
      store.CreateTrials("other", MakeTrials(2, v1::Trial::ACTIVE)).ok());
  ASSERT_TRUE(store.DeleteStudy("mnist").ok());
  EXPECT_EQ(store.GetTrial("mnist", 1).status().code(),
            absl::StatusCode::kNotFound);

  // A new study of the same name starts from nothing, at id 1.
  this->Create("mnist");
  absl::StatusOr<std::vector<v1::Trial>> none = store.ListTrials("mnist", {});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(*none, IsEmpty());
  EXPECT_THAT(*store.CountTrials("mnist"), IsEmpty());
  EXPECT_EQ(store.GetTrial("mnist", 1).status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<std::vector<v1::Trial>> fresh =
      store.CreateTrials("mnist", MakeTrials(2, v1::Trial::REQUESTED));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_THAT(Ids(*fresh), ElementsAre(1, 2));

  // The other study kept its trials.
  EXPECT_EQ(Ids(*store.ListTrials("other", {})), Range(1, 2));
}

TEST_P(StudyStoreTest, ConcurrentCreateTrialsGetDistinctDenseIds) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  constexpr int kThreads = 8;
  constexpr int kBatches = 20;
  constexpr int kBatchSize = 3;
  std::vector<std::vector<int64_t>> ids(kThreads);
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string client = "worker-" + std::to_string(t);
      for (int b = 0; b < kBatches; ++b) {
        absl::StatusOr<std::vector<v1::Trial>> trials = store.CreateTrials(
            "mnist", MakeTrials(kBatchSize, v1::Trial::ACTIVE, client));
        if (!trials.ok() || trials->size() != kBatchSize) {
          ++failures[t];
          continue;
        }
        // A batch is one transaction: its ids are consecutive.
        for (int i = 1; i < kBatchSize; ++i) {
          if ((*trials)[i].id() != (*trials)[0].id() + i) ++failures[t];
        }
        for (const v1::Trial& trial : *trials) ids[t].push_back(trial.id());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  std::vector<int64_t> all;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[t], 0) << "thread " << t;
    all.insert(all.end(), ids[t].begin(), ids[t].end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, Range(1, kThreads * kBatches * kBatchSize));

  // Each thread's trials are stored under its own client id.
  TrialQuery query;
  query.client_id = "worker-3";
  absl::StatusOr<std::vector<v1::Trial>> mine =
      store.ListTrials("mnist", query);
  ASSERT_TRUE(mine.ok()) << mine.status();
  std::vector<int64_t> expected = ids[3];
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Ids(*mine), expected);
}

TEST_P(StudyStoreTest, ConcurrentWritesOnOwnTrialsAllLand) {
  StudyStore& store = *this->store_;
  this->Create("even");
  this->Create("odd");
  constexpr int kThreads = 64;
  constexpr int kTrialsPerThread = 10;
  constexpr int kReportsPerTrial = 4;  // 10 * (1 + 4) = 50 writes a thread.
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string study = t % 2 == 0 ? "even" : "odd";
      const std::string client = "worker-" + std::to_string(t);
      for (int i = 0; i < kTrialsPerThread; ++i) {
        std::vector<v1::Trial> input = MakeTrials(1, v1::Trial::ACTIVE, client);
        input[0].set_checkpoint_uri(client + "/" + std::to_string(i));
        absl::StatusOr<std::vector<v1::Trial>> created =
            store.CreateTrials(study, input);
        if (!created.ok() || created->size() != 1) {
          ++failures[t];
          continue;
        }
        v1::Trial trial = (*created)[0];
        for (int step = 1; step <= kReportsPerTrial; ++step) {
          v1::Measurement* m = trial.add_measurements();
          m->set_step(step);
          (*m->mutable_metrics())["accuracy"] = 0.1 * step;
          if (step == kReportsPerTrial) trial.set_state(v1::Trial::COMPLETED);
          if (!store.UpdateTrial(trial).ok()) ++failures[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << t;

  for (const std::string study : {"even", "odd"}) {
    SCOPED_TRACE(study);
    absl::StatusOr<std::vector<v1::Trial>> trials = store.ListTrials(study, {});
    ASSERT_TRUE(trials.ok()) << trials.status();
    EXPECT_EQ(Ids(*trials), Range(1, kThreads / 2 * kTrialsPerThread));
    std::set<std::string> uris;
    for (const v1::Trial& trial : *trials) {
      EXPECT_EQ(trial.state(), v1::Trial::COMPLETED) << trial.id();
      ASSERT_EQ(trial.measurements_size(), kReportsPerTrial) << trial.id();
      EXPECT_EQ(trial.measurements(kReportsPerTrial - 1).step(),
                kReportsPerTrial);
      // The trial is the one its client created.
      EXPECT_THAT(trial.checkpoint_uri(), StartsWith(trial.client_id() + "/"));
      uris.insert(trial.checkpoint_uri());
    }
    std::set<std::string> expected;
    for (int t = study == "even" ? 0 : 1; t < kThreads; t += 2) {
      for (int i = 0; i < kTrialsPerThread; ++i) {
        expected.insert("worker-" + std::to_string(t) + "/" +
                        std::to_string(i));
      }
    }
    EXPECT_EQ(uris, expected);
    EXPECT_THAT(*store.CountTrials(study),
                UnorderedElementsAre(Pair(v1::Trial::COMPLETED,
                                          kThreads / 2 * kTrialsPerThread)));
  }
  this->ExpectIntegrityOk();
}

TEST_P(StudyStoreTest, ReadYourWritesFromManyThreads) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  constexpr int kThreads = 16;
  constexpr int kRounds = 20;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string client = "worker-" + std::to_string(t);
      absl::StatusOr<std::vector<v1::Trial>> created =
          store.CreateTrials("mnist", MakeTrials(1, v1::Trial::ACTIVE, client));
      if (!created.ok()) {
        ++failures[t];
        return;
      }
      v1::Trial trial = (*created)[0];
      TrialQuery mine;
      mine.client_id = client;
      for (int round = 1; round <= kRounds; ++round) {
        trial.add_measurements()->set_step(round);
        if (round == kRounds) trial.set_state(v1::Trial::COMPLETED);
        if (!store.UpdateTrial(trial).ok()) ++failures[t];
        // Each read starts after the write returned, so it sees the write.
        absl::StatusOr<v1::Trial> got = store.GetTrial("mnist", trial.id());
        if (!got.ok() || got->measurements_size() != round) ++failures[t];
        absl::StatusOr<std::vector<v1::Trial>> listed =
            store.ListTrials("mnist", mine);
        if (!listed.ok() || listed->size() != 1 ||
            (*listed)[0].measurements_size() != round) {
          ++failures[t];
        }
      }
      absl::StatusOr<std::vector<v1::Trial>> completed =
          store.ListTrialsInStates({v1::Trial::COMPLETED});
      if (!completed.ok() || std::none_of(completed->begin(), completed->end(),
                                          [&](const v1::Trial& other) {
                                            return other.id() == trial.id();
                                          })) {
        ++failures[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << t;
  EXPECT_THAT(*store.CountTrials("mnist"),
              UnorderedElementsAre(Pair(v1::Trial::COMPLETED, kThreads)));
}

TEST_P(StudyStoreTest, ListTrialsInStatesSpansStudies) {
  StudyStore& store = *this->store_;
  for (const char* name : {"b", "a", "c"}) this->Create(name);
  // b: 1 ACTIVE, 2 REQUESTED, 3 ACTIVE; a: 1 COMPLETED, 2 ACTIVE;
  // c: 1 REQUESTED.
  for (v1::Trial::State state :
       {v1::Trial::ACTIVE, v1::Trial::REQUESTED, v1::Trial::ACTIVE}) {
    ASSERT_TRUE(store.CreateTrials("b", MakeTrials(1, state)).ok());
  }
  ASSERT_TRUE(
      store.CreateTrials("a", MakeTrials(1, v1::Trial::COMPLETED)).ok());
  ASSERT_TRUE(store.CreateTrials("a", MakeTrials(1, v1::Trial::ACTIVE)).ok());
  ASSERT_TRUE(
      store.CreateTrials("c", MakeTrials(1, v1::Trial::REQUESTED)).ok());

  using Key = std::pair<std::string, int64_t>;
  auto list = [&](std::vector<v1::Trial::State> states) {
    absl::StatusOr<std::vector<v1::Trial>> trials =
        store.ListTrialsInStates(states);
    EXPECT_TRUE(trials.ok()) << trials.status();
    std::vector<Key> keys;
    if (!trials.ok()) return keys;
    for (const v1::Trial& trial : *trials) {
      keys.emplace_back(trial.study_name(), trial.id());
    }
    return keys;
  };
  EXPECT_THAT(list({v1::Trial::ACTIVE}),
              ElementsAre(Key("a", 2), Key("b", 1), Key("b", 3)));
  EXPECT_THAT(
      list({v1::Trial::REQUESTED, v1::Trial::ACTIVE, v1::Trial::ACTIVE}),
      ElementsAre(Key("a", 2), Key("b", 1), Key("b", 2), Key("b", 3),
                  Key("c", 1)));
  EXPECT_THAT(list({v1::Trial::STOPPED}), IsEmpty());
  // No states: all of them, as in TrialQuery.
  EXPECT_THAT(list({}), ElementsAre(Key("a", 1), Key("a", 2), Key("b", 1),
                                    Key("b", 2), Key("b", 3), Key("c", 1)));

  // The trials come whole.
  absl::StatusOr<std::vector<v1::Trial>> active =
      store.ListTrialsInStates({v1::Trial::ACTIVE});
  ASSERT_TRUE(active.ok()) << active.status();
  ASSERT_EQ(active->size(), 3u);
  EXPECT_THAT((*active)[2], EqualsProto(*store.GetTrial("b", 3)));

  // It follows updates and deletions.
  absl::StatusOr<v1::Trial> trial = store.GetTrial("b", 1);
  ASSERT_TRUE(trial.ok()) << trial.status();
  trial->set_state(v1::Trial::COMPLETED);
  ASSERT_TRUE(store.UpdateTrial(*trial).ok());
  EXPECT_THAT(list({v1::Trial::ACTIVE}), ElementsAre(Key("a", 2), Key("b", 3)));
  ASSERT_TRUE(store.DeleteStudy("a").ok());
  EXPECT_THAT(list({v1::Trial::ACTIVE}), ElementsAre(Key("b", 3)));
  EXPECT_THAT(list({v1::Trial::COMPLETED}), ElementsAre(Key("b", 1)));
}

// ----- Conditional updates -----

TEST_P(StudyStoreTest, UpdateTrialIfAppliesWhileStateAndEpochMatch) {
  StudyStore& store = *this->store_;
  const v1::Trial read = CreateLeasedTrial(store, v1::Trial::ACTIVE, 3);

  // A report: the same state, client and epoch.
  v1::Trial reported = read;
  reported.add_measurements()->set_step(1);
  ASSERT_TRUE(store.UpdateTrialIf(reported, TrialVersion::Of(read)).ok());
  EXPECT_THAT(*store.GetTrial("mnist", 1), EqualsProto(reported));
  EXPECT_EQ(LastSequence(store, "mnist"), 2);

  // Back to the queue: a new state, client and epoch.
  v1::Trial requeued = reported;
  requeued.set_state(v1::Trial::REQUESTED);
  requeued.set_client_id("");
  ASSERT_TRUE(store.UpdateTrialIf(requeued, TrialVersion::Of(reported)).ok());
  v1::Trial granted = requeued;
  granted.set_state(v1::Trial::ACTIVE);
  granted.set_client_id("worker-b");
  granted.set_lease_epoch(4);
  ASSERT_TRUE(store.UpdateTrialIf(granted, TrialVersion::Of(requeued)).ok());
  EXPECT_THAT(*store.GetTrial("mnist", 1), EqualsProto(granted));
  EXPECT_EQ(LastSequence(store, "mnist"), 4);

  // The new version is what the next conditional update must name.
  v1::Trial completed = granted;
  completed.set_state(v1::Trial::COMPLETED);
  EXPECT_EQ(store.UpdateTrialIf(completed, TrialVersion::Of(read)).code(),
            absl::StatusCode::kAborted);
  ASSERT_TRUE(store.UpdateTrialIf(completed, TrialVersion::Of(granted)).ok());
  EXPECT_THAT(*store.GetTrial("mnist", 1), EqualsProto(completed));
  EXPECT_THAT(*store.CountTrials("mnist"),
              UnorderedElementsAre(Pair(v1::Trial::COMPLETED, 1)));
}

TEST_P(StudyStoreTest, UpdateTrialIfIsAbortedWhenStateOrEpochChanged) {
  StudyStore& store = *this->store_;
  const v1::Trial stored = CreateLeasedTrial(store, v1::Trial::ACTIVE, 3);

  struct Case {
    TrialVersion read;
    std::string then;
  };
  const Case cases[] = {
      {{v1::Trial::ACTIVE, 2}, "ACTIVE under lease epoch 2 then"},
      {{v1::Trial::REQUESTED, 3}, "REQUESTED under lease epoch 3 then"},
      {{v1::Trial::STOPPING, 4}, "STOPPING under lease epoch 4 then"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.then);
    // Writes that keep the state read and writes that change it.
    for (v1::Trial::State state : {c.read.state, v1::Trial::COMPLETED}) {
      v1::Trial update = stored;
      update.set_state(state);
      update.add_measurements()->set_step(1);
      absl::Status status = store.UpdateTrialIf(update, c.read);
      EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
      EXPECT_THAT(status.message(), HasSubstr("trial 1 of study \"mnist\""));
      EXPECT_THAT(status.message(), HasSubstr(c.then));
      EXPECT_THAT(status.message(),
                  HasSubstr("ACTIVE under lease epoch 3 now"));
    }
  }
  // Nothing was written, and no change recorded.
  EXPECT_THAT(*store.GetTrial("mnist", 1), EqualsProto(stored));
  EXPECT_THAT(*store.ListTrialChanges("mnist", kCreated, 0), IsEmpty());
  EXPECT_THAT(*store.CountTrials("mnist"),
              UnorderedElementsAre(Pair(v1::Trial::ACTIVE, 1)));
}

TEST_P(StudyStoreTest, ConditionalUpdatesSayNotFoundForAMissingTrial) {
  StudyStore& store = *this->store_;
  const v1::Trial stored = CreateLeasedTrial(store, v1::Trial::ACTIVE, 3);

  v1::Trial no_study = stored;
  no_study.set_study_name("nope");
  v1::Trial no_trial = stored;
  no_trial.set_id(99);
  const TrialVersion read = TrialVersion::Of(stored);
  for (const auto& [trial, missing] :
       {std::pair(no_study, "study \"nope\" not found"),
        std::pair(no_trial, "trial 99 of study \"mnist\" not found")}) {
    SCOPED_TRACE(missing);
    absl::Status update = store.UpdateTrialIf(trial, read);
    EXPECT_EQ(update.code(), absl::StatusCode::kNotFound) << update;
    EXPECT_THAT(update.message(), HasSubstr(missing));
    absl::Status renew = store.RenewTrialLease(trial);
    EXPECT_EQ(renew.code(), absl::StatusCode::kNotFound) << renew;
    EXPECT_THAT(renew.message(), HasSubstr(missing));
  }
  EXPECT_THAT(*store.ListTrialChanges("mnist", kCreated, 0), IsEmpty());
  EXPECT_EQ(Ids(*store.ListTrials("mnist", {})), Range(1, 1));
}

TEST_P(StudyStoreTest, RenewTrialLeaseRefusesAStaleStateOrEpoch) {
  StudyStore& store = *this->store_;
  const v1::Trial stored = CreateLeasedTrial(store, v1::Trial::ACTIVE, 3);

  v1::Trial stale_epoch = stored;
  stale_epoch.set_lease_epoch(2);
  stale_epoch.set_lease_expire_time_ms(5000);
  v1::Trial stale_state = stored;
  stale_state.set_state(v1::Trial::STOPPING);
  stale_state.set_lease_expire_time_ms(5000);
  for (const v1::Trial& renewal : {stale_epoch, stale_state}) {
    absl::Status status = store.RenewTrialLease(renewal);
    EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
    EXPECT_THAT(status.message(), HasSubstr("trial 1 of study \"mnist\""));
    EXPECT_THAT(status.message(), HasSubstr("ACTIVE under lease epoch 3 now"));
  }
  EXPECT_THAT(*store.GetTrial("mnist", 1), EqualsProto(stored));

  // The current version renews, and watchers see no change.
  v1::Trial renewed = stored;
  renewed.set_lease_expire_time_ms(5000);
  ASSERT_TRUE(store.RenewTrialLease(renewed).ok());
  EXPECT_EQ(store.GetTrial("mnist", 1)->lease_expire_time_ms(), 5000);
  EXPECT_THAT(*store.ListTrialChanges("mnist", kCreated, 0), IsEmpty());
}

TEST_P(StudyStoreTest, RacingUpdateTrialIfFromOneReadHasOneWinner) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  constexpr int kTrials = 30;
  constexpr int kWriters = 4;
  absl::StatusOr<std::vector<v1::Trial>> created =
      store.CreateTrials("mnist", MakeTrials(kTrials, v1::Trial::REQUESTED));
  ASSERT_TRUE(created.ok()) << created.status();
  const std::vector<v1::Trial>& read = *created;

  // Every writer grants every trial to itself, from the same read; they
  // start together so that their writes interleave.
  std::vector<std::vector<absl::Status>> statuses(
      kWriters, std::vector<absl::Status>(kTrials));
  std::latch start(kWriters);
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      start.arrive_and_wait();
      for (int i = 0; i < kTrials; ++i) {
        v1::Trial granted = read[i];
        granted.set_state(v1::Trial::ACTIVE);
        granted.set_client_id("writer-" + std::to_string(w));
        granted.set_lease_epoch(1);
        statuses[w][i] =
            store.UpdateTrialIf(granted, TrialVersion::Of(read[i]));
      }
    });
  }
  for (std::thread& writer : writers) writer.join();

  for (int i = 0; i < kTrials; ++i) {
    SCOPED_TRACE(read[i].id());
    std::vector<int> winners;
    for (int w = 0; w < kWriters; ++w) {
      if (statuses[w][i].ok()) {
        winners.push_back(w);
      } else {
        EXPECT_EQ(statuses[w][i].code(), absl::StatusCode::kAborted)
            << statuses[w][i];
      }
    }
    ASSERT_EQ(winners.size(), 1u);
    absl::StatusOr<v1::Trial> stored = store.GetTrial("mnist", read[i].id());
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_EQ(stored->client_id(), "writer-" + std::to_string(winners[0]));
    EXPECT_EQ(stored->lease_epoch(), 1);
  }
  // One change per trial created and one per winner, none per loser.
  EXPECT_EQ(LastSequence(store, "mnist"), 2 * kTrials);
  EXPECT_THAT(*store.CountTrials("mnist"),
              UnorderedElementsAre(Pair(v1::Trial::ACTIVE, kTrials)));
}

// ----- Backup -----

TEST_P(StudyStoreTest, BackupIsACopyAsOfTheCallOrNeedsSqlite) {
  StudyStore& store = *this->store_;
  const v1::Trial stored = CreateLeasedTrial(store, v1::Trial::ACTIVE, 3);
  const std::string copy_path = this->dir_.File("copy.db");

  absl::Status status = store.Backup(copy_path);
  // Neither keeps its studies in a file of its own.
  if (GetParam() == StoreKind::kMemory || GetParam() == StoreKind::kPostgres) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(status.message(), HasSubstr("backup needs the SQLite store"));
    EXPECT_FALSE(std::filesystem::exists(copy_path));
    return;
  }
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_THAT(TemporaryFiles(this->dir_.File("")), IsEmpty());
  absl::StatusOr<std::unique_ptr<SqliteStore>> copy =
      SqliteStore::Open(copy_path);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_TRUE((*copy)->CheckIntegrity().ok());
  EXPECT_THAT(*(*copy)->GetStudy("mnist"), EqualsProto(MakeStudy("mnist")));
  EXPECT_THAT(*(*copy)->GetTrial("mnist", 1), EqualsProto(stored));
  EXPECT_EQ(LastSequence(**copy, "mnist"), kCreated);

  // The store goes on, and the copy does not follow it.
  ASSERT_TRUE(
      store.CreateTrials("mnist", MakeTrials(1, v1::Trial::REQUESTED)).ok());
  EXPECT_EQ(Ids(*(*copy)->ListTrials("mnist", {})), Range(1, 1));
  EXPECT_EQ(Ids(*store.ListTrials("mnist", {})), Range(1, 2));
}

// ----- OpenStore -----

TEST(OpenStoreTest, APathIsASqliteFile) {
  TempDir dir;
  const std::string path = dir.File("studies.db");
  {
    absl::StatusOr<std::unique_ptr<StudyStore>> store =
        OpenStore(SqliteAt(path));
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_NE(dynamic_cast<SqliteStore*>(store->get()), nullptr);
    ASSERT_TRUE((*store)->CreateStudy(MakeStudy("mnist")).ok());
  }
  EXPECT_TRUE(std::filesystem::exists(path));
  StoreOptions durable = SqliteAt(path);
  durable.sqlite.durable_full = true;
  absl::StatusOr<std::unique_ptr<StudyStore>> reopened = OpenStore(durable);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_TRUE((*reopened)->GetStudy("mnist").ok());
  EXPECT_TRUE((*reopened)->CheckIntegrity().ok());
}

TEST(OpenStoreTest, MemoryIsAPrivateSqliteDatabase) {
  absl::StatusOr<std::unique_ptr<StudyStore>> first =
      OpenStore(SqliteAt(":memory:"));
  absl::StatusOr<std::unique_ptr<StudyStore>> second =
      OpenStore(SqliteAt(":memory:"));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(dynamic_cast<SqliteStore*>(first->get()), nullptr);
  ASSERT_TRUE((*first)->CreateStudy(MakeStudy("mnist")).ok());
  EXPECT_EQ((*second)->GetStudy("mnist").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(OpenStoreTest, KindMemoryIsAMemoryStore) {
  TempDir dir;
  const std::string path = dir.File("studies.db");
  StoreOptions options = SqliteAt(path);
  options.kind = StoreOptions::Kind::kMemory;
  absl::StatusOr<std::unique_ptr<StudyStore>> store = OpenStore(options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_NE(dynamic_cast<MemoryStore*>(store->get()), nullptr);
  ASSERT_TRUE((*store)->CreateStudy(MakeStudy("mnist")).ok());
  EXPECT_TRUE((*store)->CheckIntegrity().ok());
  // The path is not read.
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(OpenStoreTest, APostgresqlUrlIsAPostgresStore) {
  absl::StatusOr<std::string> url = FreshPostgresDatabase();
  if (!url.ok()) return SkipOrFail(url.status());
  // Any case of either scheme, as --db gives it; or kind kPostgres.
  for (const std::string& location :
       {*url, "PostgreSQL" + url->substr(std::string("postgresql").size()),
        "postgres" + url->substr(std::string("postgresql").size())}) {
    SCOPED_TRACE(location);
    absl::StatusOr<std::unique_ptr<StudyStore>> store =
        OpenStore(SqliteAt(location));
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_NE(dynamic_cast<PostgresStore*>(store->get()), nullptr);
  }
  StoreOptions options = SqliteAt(*url);
  options.kind = StoreOptions::Kind::kPostgres;
  options.postgres.max_connections = 1;
  absl::StatusOr<std::unique_ptr<StudyStore>> store = OpenStore(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->CreateStudy(MakeStudy("mnist")).ok());
  EXPECT_TRUE((*store)->CheckIntegrity().ok());
}

TEST(OpenStoreTest, AnUnreachablePostgresqlServerIsUnavailable) {
  TempDir dir;  // No server listens there.
  for (const std::string& location :
       {"postgresql://alice:s3cret@/hypertune?host=" + dir.File(""),
        "postgres:///hypertune?password=s3cret&host=" + dir.File("")}) {
    SCOPED_TRACE(location);
    absl::StatusOr<std::unique_ptr<StudyStore>> store =
        OpenStore(SqliteAt(location));
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(store.status().message(), HasSubstr("****"));
    EXPECT_THAT(store.status().message(), HasSubstr(dir.File("")));
    // A URL may carry a password: it is never repeated.
    EXPECT_THAT(store.status().message(), Not(HasSubstr("s3cret")));
  }
  StoreOptions kind_only;
  kind_only.kind = StoreOptions::Kind::kPostgres;
  kind_only.path = dir.File("studies.db");
  EXPECT_EQ(OpenStore(kind_only).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(OpenStoreTest, OptionsAndErrorsAreSqlites) {
  TempDir dir;
  StoreOptions no_readers = SqliteAt(dir.File("studies.db"));
  no_readers.sqlite.max_read_connections = 0;
  EXPECT_EQ(OpenStore(no_readers).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string missing = dir.File("no/such/dir/studies.db");
  absl::StatusOr<std::unique_ptr<StudyStore>> store =
      OpenStore(SqliteAt(missing));
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr(missing));
}

// A measurement at `step` with accuracy `value`.
v1::Measurement AccuracyAt(int64_t step, double value) {
  v1::Measurement m;
  m.set_step(step);
  (*m.mutable_metrics())["accuracy"] = value;
  (*m.mutable_metrics())["loss"] = 1 - value;
  return m;
}

TEST_P(StudyStoreTest, AppendMeasurementGrowsTheCurveEveryReadSees) {
  StudyStore& store = *this->store_;
  const v1::Trial created = CreateLeasedTrial(store, v1::Trial::ACTIVE, 3);
  v1::Trial expected = created;
  *expected.add_measurements() = AccuracyAt(1, 0.5);
  *expected.add_measurements() = AccuracyAt(2, 0.6);
  ASSERT_TRUE(store.UpdateTrialIf(expected, TrialVersion::Of(created)).ok());

  absl::StatusOr<TrialHead> head = store.GetTrialHead("mnist", 1);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->measurements, 2);
  ASSERT_TRUE(head->latest.has_value());
  EXPECT_THAT(*head->latest, EqualsProto(AccuracyAt(2, 0.6)));
  EXPECT_EQ(head->trial.measurements_size(), 0);
  EXPECT_EQ(head->trial.ByteSizeLong() + head->measurement_bytes,
            expected.ByteSizeLong());

  // The head as changed by a report, with the report's measurement.
  v1::Trial next = head->trial;
  next.set_lease_expire_time_ms(5000);
  ASSERT_TRUE(store
                  .AppendMeasurement(next, AccuracyAt(3, 0.7),
                                     TrialVersion::Of(head->trial))
                  .ok());
  expected.set_lease_expire_time_ms(5000);
  *expected.add_measurements() = AccuracyAt(3, 0.7);
  EXPECT_THAT(*store.GetTrial("mnist", 1), EqualsProto(expected));
  absl::StatusOr<std::vector<v1::Trial>> listed = store.ListTrials("mnist", {});
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_THAT((*listed)[0], EqualsProto(expected));
  absl::StatusOr<std::vector<v1::Trial>> running =
      store.ListTrialsInStates({v1::Trial::ACTIVE});
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_EQ(running->size(), 1u);
  EXPECT_THAT((*running)[0], EqualsProto(expected));
  // A change watchers see, after the creation and the first report.
  absl::StatusOr<std::vector<TrialChange>> changes =
      store.ListTrialChanges("mnist", 2, 0);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_EQ((*changes)[0].sequence, 3);
  EXPECT_THAT((*changes)[0].trial, EqualsProto(expected));
  head = store.GetTrialHead("mnist", 1);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->measurements, 3);
  EXPECT_THAT(*head->latest, EqualsProto(AccuracyAt(3, 0.7)));
  EXPECT_EQ(head->trial.ByteSizeLong() + head->measurement_bytes,
            expected.ByteSizeLong());

  // A whole-trial write that moves the curve away (a new attempt) leaves
  // none, and the next append starts a new curve.
  v1::Trial retried = expected;
  *retried.add_earlier_attempts()->mutable_measurements() =
      retried.measurements();
  retried.clear_measurements();
  ASSERT_TRUE(store.UpdateTrialIf(retried, TrialVersion::Of(expected)).ok());
  EXPECT_THAT(*store.GetTrial("mnist", 1), EqualsProto(retried));
  head = store.GetTrialHead("mnist", 1);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->measurements, 0);
  EXPECT_EQ(head->measurement_bytes, 0);
  EXPECT_FALSE(head->latest.has_value());
  ASSERT_TRUE(store
                  .AppendMeasurement(retried, AccuracyAt(1, 0.4),
                                     TrialVersion::Of(retried))
                  .ok());
  *retried.add_measurements() = AccuracyAt(1, 0.4);
  EXPECT_THAT(*store.GetTrial("mnist", 1), EqualsProto(retried));
}

TEST_P(StudyStoreTest, AppendMeasurementIsFencedByStateAndEpoch) {
  StudyStore& store = *this->store_;
  const v1::Trial created = CreateLeasedTrial(store, v1::Trial::ACTIVE, 3);

  absl::Status stale = store.AppendMeasurement(created, AccuracyAt(1, 0.5),
                                               {v1::Trial::ACTIVE, 2});
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted) << stale;
  EXPECT_THAT(stale.message(), HasSubstr("ACTIVE under lease epoch 3 now"));
  stale = store.AppendMeasurement(created, AccuracyAt(1, 0.5),
                                  {v1::Trial::REQUESTED, 3});
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted) << stale;
  EXPECT_THAT(*store.GetTrial("mnist", 1), EqualsProto(created));
  EXPECT_EQ(LastSequence(store, "mnist"), kCreated);

  v1::Trial missing = created;
  missing.set_id(9);
  EXPECT_EQ(store
                .AppendMeasurement(missing, AccuracyAt(1, 0.5),
                                   TrialVersion::Of(created))
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store.GetTrialHead("mnist", 9).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store.GetTrialHead("nope", 1).status().code(),
            absl::StatusCode::kNotFound);

  // A report that stops the trial changes its state with the append.
  v1::Trial stopping = created;
  stopping.set_state(v1::Trial::STOPPING);
  stopping.set_stop_reason("below the median");
  ASSERT_TRUE(store
                  .AppendMeasurement(stopping, AccuracyAt(1, 0.5),
                                     TrialVersion::Of(created))
                  .ok());
  *stopping.add_measurements() = AccuracyAt(1, 0.5);
  EXPECT_THAT(*store.GetTrial("mnist", 1), EqualsProto(stopping));
  EXPECT_THAT(*store.CountTrials("mnist"),
              UnorderedElementsAre(Pair(v1::Trial::STOPPING, 1)));
  // The version it was read at is gone.
  EXPECT_EQ(store
                .AppendMeasurement(created, AccuracyAt(2, 0.6),
                                   TrialVersion::Of(created))
                .code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(store.GetTrial("mnist", 1)->measurements_size(), 1);
}

TEST_P(StudyStoreTest, AppendMeasurementRefusesAMessageThatWouldNotReadBack) {
  StudyStore& store = *this->store_;
  const v1::Trial created = CreateLeasedTrial(store, v1::Trial::ACTIVE, 3);
  v1::Measurement bad;
  bad.set_step(1);
  (*bad.mutable_metrics())["\xff"] = 1;
  EXPECT_EQ(
      store.AppendMeasurement(created, bad, TrialVersion::Of(created)).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(*store.GetTrial("mnist", 1), EqualsProto(created));
}

}  // namespace
}  // namespace hypertune::storage
