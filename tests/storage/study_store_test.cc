// One typed suite run against every StudyStore, plus OpenStore's tests and
// SqliteStore's own (persistence, schema versioning, pragmas, damaged
// files). PostgresStore's own are in postgres_store_test.cc.
#include "storage/study_store.h"

#include <sqlite3.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <latch>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
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

// ----- Helpers -----

MATCHER_P(EqualsProto, expected,
          "equals " + std::string(expected.ShortDebugString())) {
  google::protobuf::util::MessageDifferencer differencer;
  std::string diff;
  differencer.ReportDifferencesToString(&diff);
  if (differencer.Compare(expected, arg)) return true;
  *result_listener << "differs: " << diff;
  return false;
}

// Strings that must round-trip byte for byte. (Proto3 strings must be UTF-8;
// other bytes are refused, see InvalidUtf8IsRefusedUnchanged.)
std::vector<std::string> OddStrings() {
  return {
      "x'); DROP TABLE trials;--",
      std::string("nul\0inside", 10),
      std::string("nul"),  // Distinct from the one above.
      std::string(10 * 1024, 'k') + "end",
      "quote\"and'back\\slash",
      "\xce\xbb = \xe5\xad\xa6\xe7\xbf\x92\xe7\x8e\x87 \xf0\x9f\x94\xa5",
  };
}

// A fresh directory under the system's temp dir, removed with everything in
// it when destroyed.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "storage_test_XXXXXX")
            .string();
    char* made = mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr) << "mkdtemp failed";
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string File(const std::string& name) const {
    return (path_ / name).string();
  }

 private:
  std::filesystem::path path_;
};

v1::Study MakeStudy(const std::string& name) {
  v1::Study study;
  study.set_name(name);
  study.set_state(v1::Study::ACTIVE);
  study.set_create_time_ms(1'700'000'000'000);
  v1::StudySpec* spec = study.mutable_spec();
  v1::ParameterSpec* lr = spec->add_parameters();
  lr->set_name("lr");
  lr->mutable_double_spec()->set_min(1e-5);
  lr->mutable_double_spec()->set_max(1e-1);
  lr->mutable_double_spec()->set_scale(v1::LOG);
  v1::MetricSpec* metric = spec->add_metrics();
  metric->set_name("accuracy");
  metric->set_goal(v1::MetricSpec::MAXIMIZE);
  spec->set_seed(42);
  return study;
}

v1::Trial MakeTrial(v1::Trial::State state, const std::string& client_id = "") {
  v1::Trial trial;
  trial.set_state(state);
  trial.set_client_id(client_id);
  v1::ParameterValue* lr = trial.add_parameters();
  lr->set_name("lr");
  lr->set_double_value(0.01);
  return trial;
}

std::vector<v1::Trial> MakeTrials(int n, v1::Trial::State state,
                                  const std::string& client_id = "") {
  return std::vector<v1::Trial>(n, MakeTrial(state, client_id));
}

std::vector<int64_t> Ids(const std::vector<v1::Trial>& trials) {
  std::vector<int64_t> ids;
  for (const v1::Trial& trial : trials) ids.push_back(trial.id());
  return ids;
}

std::vector<int64_t> Range(int64_t first, int64_t last) {
  std::vector<int64_t> ids;
  for (int64_t id = first; id <= last; ++id) ids.push_back(id);
  return ids;
}

// ----- The typed suite -----

// A SqliteStore on ":memory:", where one connection serves reads and writes.
struct SqliteInMemory {};

template <typename Store>
std::unique_ptr<StudyStore> MakeStore(const TempDir& dir);

template <>
std::unique_ptr<StudyStore> MakeStore<MemoryStore>(const TempDir&) {
  return std::make_unique<MemoryStore>();
}

template <>
std::unique_ptr<StudyStore> MakeStore<SqliteStore>(const TempDir& dir) {
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(dir.File("studies.db"));
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

template <>
std::unique_ptr<StudyStore> MakeStore<SqliteInMemory>(const TempDir&) {
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(":memory:");
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

// A PostgresStore on a fresh database of the test binary's own server;
// null, with the test skipped, where PostgreSQL is not installed.
template <>
std::unique_ptr<StudyStore> MakeStore<PostgresStore>(const TempDir&) {
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

template <typename Store>
class StudyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = MakeStore<Store>(dir_);
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

using StoreTypes =
    ::testing::Types<MemoryStore, SqliteStore, SqliteInMemory, PostgresStore>;
class StoreNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, MemoryStore>) return "Memory";
    if (std::is_same_v<T, PostgresStore>) return "Postgres";
    return std::is_same_v<T, SqliteStore> ? "Sqlite" : "SqliteInMemory";
  }
};
TYPED_TEST_SUITE(StudyStoreTest, StoreTypes, StoreNames);

TYPED_TEST(StudyStoreTest, CreateThenGetReturnsTheStudy) {
  v1::Study study = MakeStudy("mnist");
  ASSERT_TRUE(this->store_->CreateStudy(study).ok());
  absl::StatusOr<v1::Study> got = this->store_->GetStudy("mnist");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, EqualsProto(study));
}

TYPED_TEST(StudyStoreTest, TrialCountsAreNotStored) {
  v1::Study study = MakeStudy("mnist");
  (*study.mutable_trial_counts())["COMPLETED"] = 3;
  ASSERT_TRUE(this->store_->CreateStudy(study).ok());
  absl::StatusOr<v1::Study> got = this->store_->GetStudy("mnist");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->trial_counts(), IsEmpty());
  EXPECT_EQ(got->spec().seed(), 42u);
}

TYPED_TEST(StudyStoreTest, DuplicateStudyIsAlreadyExists) {
  this->Create("mnist");
  v1::Study other = MakeStudy("mnist");
  other.set_state(v1::Study::PAUSED);
  absl::Status status = this->store_->CreateStudy(other);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
  EXPECT_THAT(status.message(), HasSubstr("mnist"));
  // The first one is untouched.
  EXPECT_EQ(this->store_->GetStudy("mnist")->state(), v1::Study::ACTIVE);
}

TYPED_TEST(StudyStoreTest, ListStudiesIsSortedByName) {
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

TYPED_TEST(StudyStoreTest, UpdateStudyReplacesIt) {
  this->Create("mnist");
  v1::Study changed = MakeStudy("mnist");
  changed.set_state(v1::Study::COMPLETED);
  changed.mutable_spec()->set_max_trials(50);
  ASSERT_TRUE(this->store_->UpdateStudy(changed).ok());
  absl::StatusOr<v1::Study> got = this->store_->GetStudy("mnist");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, EqualsProto(changed));
}

TYPED_TEST(StudyStoreTest, ModifyStudyFromManyThreadsLosesNoChange) {
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

TYPED_TEST(StudyStoreTest, DeleteStudyRemovesIt) {
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

TYPED_TEST(StudyStoreTest, EveryMethodSaysNotFoundForAMissingStudy) {
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

TYPED_TEST(StudyStoreTest, MissingTrialIsNotFound) {
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

TYPED_TEST(StudyStoreTest, StudyWithTrialReadsBothOrSaysWhichIsMissing) {
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

TYPED_TEST(StudyStoreTest, ALargeBatchOfTrialsIsStoredWhole) {
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

TYPED_TEST(StudyStoreTest, CreateTrialsAssignsDenseIdsPerStudy) {
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

TYPED_TEST(StudyStoreTest, TrialRoundTripsWithMeasurementsAndOddStrings) {
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

TYPED_TEST(StudyStoreTest, OddStudyNamesRoundTripVerbatim) {
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

TYPED_TEST(StudyStoreTest, InvalidUtf8IsRefusedUnchanged) {
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

TYPED_TEST(StudyStoreTest, ListTrialsFiltersByState) {
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

TYPED_TEST(StudyStoreTest, ListTrialsFiltersByClientId) {
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

TYPED_TEST(StudyStoreTest, ListTrialsPagesWithAfterIdAndLimit) {
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

TYPED_TEST(StudyStoreTest, ListTrialsPagesThroughAFilter) {
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

TYPED_TEST(StudyStoreTest, CountTrialsByState) {
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

TYPED_TEST(StudyStoreTest, OverviewReadsTheStudyCountsAndTrialsInStates) {
  StudyStore& store = *this->store_;
  this->Create("mnist");
  this->Create("other");
  const std::vector<v1::Trial::State> live = {v1::Trial::REQUESTED,
                                              v1::Trial::ACTIVE};
  absl::StatusOr<StudyOverview> overview = store.GetStudyOverview("mnist", live);
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
  EXPECT_THAT(overview->counts, UnorderedElementsAre(
                                    Pair(v1::Trial::COMPLETED, 2),
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

TYPED_TEST(StudyStoreTest, TrialChangesFollowTheStudysSequence) {
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
  EXPECT_EQ(store.RenewTrialLease(missing).code(),
            absl::StatusCode::kNotFound);
}

TYPED_TEST(StudyStoreTest, DeleteStudyRemovesItsTrials) {
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

TYPED_TEST(StudyStoreTest, ConcurrentCreateTrialsGetDistinctDenseIds) {
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

TYPED_TEST(StudyStoreTest, ConcurrentWritesOnOwnTrialsAllLand) {
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
      EXPECT_THAT(trial.checkpoint_uri(),
                  StartsWith(trial.client_id() + "/"));
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

TYPED_TEST(StudyStoreTest, ReadYourWritesFromManyThreads) {
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

TYPED_TEST(StudyStoreTest, ListTrialsInStatesSpansStudies) {
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

// The sequence number of the change that created CreateLeasedTrial's trial.
constexpr int64_t kCreated = 1;

// The highest change sequence of `study_name` (0 with no trials).
int64_t LastSequence(StudyStore& store, const std::string& study_name) {
  absl::StatusOr<std::vector<TrialChange>> changes =
      store.ListTrialChanges(study_name, 0, 0);
  EXPECT_TRUE(changes.ok()) << changes.status();
  return !changes.ok() || changes->empty() ? 0 : changes->back().sequence;
}

// Creates study "mnist" with one trial, in `state` under lease `epoch` and
// held by "worker-a", and returns it as stored; its change is kCreated.
v1::Trial CreateLeasedTrial(StudyStore& store, v1::Trial::State state,
                            int64_t epoch) {
  EXPECT_TRUE(store.CreateStudy(MakeStudy("mnist")).ok());
  v1::Trial trial = MakeTrial(state, "worker-a");
  trial.set_lease_epoch(epoch);
  trial.set_lease_expire_time_ms(1000);
  absl::StatusOr<std::vector<v1::Trial>> created =
      store.CreateTrials("mnist", {trial});
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() && created->size() == 1 ? (*created)[0] : trial;
}

TYPED_TEST(StudyStoreTest, UpdateTrialIfAppliesWhileStateAndEpochMatch) {
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

TYPED_TEST(StudyStoreTest, UpdateTrialIfIsAbortedWhenStateOrEpochChanged) {
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

TYPED_TEST(StudyStoreTest, ConditionalUpdatesSayNotFoundForAMissingTrial) {
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

TYPED_TEST(StudyStoreTest, RenewTrialLeaseRefusesAStaleStateOrEpoch) {
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

TYPED_TEST(StudyStoreTest, RacingUpdateTrialIfFromOneReadHasOneWinner) {
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

// The names of the files in `dir` that hold ".tmp-" (a backup's leftover).
std::vector<std::string> TemporaryFiles(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".tmp-") != std::string::npos) names.push_back(name);
  }
  return names;
}

TYPED_TEST(StudyStoreTest, BackupIsACopyAsOfTheCallOrNeedsSqlite) {
  StudyStore& store = *this->store_;
  const v1::Trial stored = CreateLeasedTrial(store, v1::Trial::ACTIVE, 3);
  const std::string copy_path = this->dir_.File("copy.db");

  absl::Status status = store.Backup(copy_path);
  // Neither keeps its studies in a file of its own.
  if constexpr (std::is_same_v<TypeParam, MemoryStore> ||
                std::is_same_v<TypeParam, PostgresStore>) {
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

// StoreOptions for a SQLite store on `path`, the rest at their defaults.
StoreOptions SqliteAt(const std::string& path) {
  StoreOptions options;
  options.path = path;
  return options;
}

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

// ----- SqliteStore only -----

// A second, raw connection to look at the file from outside the store.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
  }
  ~RawDb() { sqlite3_close(db_); }

  // Runs fixed `sql` with optional integer bindings; returns the first
  // column of the first row as text ("" without rows).
  std::string Query(const char* sql, std::vector<int64_t> bindings = {}) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &statement, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db_);
      return "";
    }
    for (size_t i = 0; i < bindings.size(); ++i) {
      sqlite3_bind_int64(statement, static_cast<int>(i) + 1, bindings[i]);
    }
    std::string first;
    int rc;
    bool first_row = true;
    while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
      if (first_row && sqlite3_column_text(statement, 0) != nullptr) {
        first =
            reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
      }
      first_row = false;
    }
    EXPECT_EQ(rc, SQLITE_DONE) << sql << ": " << sqlite3_errmsg(db_);
    sqlite3_finalize(statement);
    return first;
  }

 private:
  sqlite3* db_ = nullptr;
};

class SqliteStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<SqliteStore> OpenOrDie(const SqliteOptions& options = {}) {
    absl::StatusOr<std::unique_ptr<SqliteStore>> store =
        SqliteStore::Open(path_, options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  TempDir dir_;
  const std::string path_ = dir_.File("studies.db");
};

TEST_F(SqliteStoreTest, DataSurvivesCloseAndReopen) {
  v1::Study study = MakeStudy("mnist");
  std::vector<v1::Trial> created;
  {
    std::unique_ptr<SqliteStore> store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->CreateStudy(study).ok());
    absl::StatusOr<std::vector<v1::Trial>> trials =
        store->CreateTrials("mnist", MakeTrials(3, v1::Trial::ACTIVE, "w"));
    ASSERT_TRUE(trials.ok()) << trials.status();
    created = *trials;
  }
  std::unique_ptr<SqliteStore> store = OpenOrDie({.durable_full = true});
  ASSERT_NE(store, nullptr);
  absl::StatusOr<v1::Study> got = store->GetStudy("mnist");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(*got, EqualsProto(study));
  absl::StatusOr<v1::Trial> trial = store->GetTrial("mnist", 2);
  ASSERT_TRUE(trial.ok()) << trial.status();
  EXPECT_THAT(*trial, EqualsProto(created[1]));
  // Ids continue where they stopped.
  absl::StatusOr<std::vector<v1::Trial>> more =
      store->CreateTrials("mnist", MakeTrials(1, v1::Trial::REQUESTED));
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_THAT(Ids(*more), ElementsAre(4));
}

TEST_F(SqliteStoreTest, RecordsTheSchemaVersion) {
  ASSERT_NE(OpenOrDie(), nullptr);
  RawDb raw(path_);
  EXPECT_EQ(raw.Query("SELECT MAX(version) FROM schema_version"),
            std::to_string(SqliteStore::kSchemaVersion));
  // Reopening migrates nothing twice.
  ASSERT_NE(OpenOrDie(), nullptr);
  EXPECT_EQ(raw.Query("SELECT COUNT(*) FROM schema_version"),
            std::to_string(SqliteStore::kSchemaVersion));
}

TEST_F(SqliteStoreTest, RefusesANewerSchema) {
  ASSERT_NE(OpenOrDie(), nullptr);
  {
    RawDb raw(path_);
    raw.Query(
        "INSERT INTO schema_version(version, applied_time_ms) VALUES (?1, 0)",
        {SqliteStore::kSchemaVersion + 1});
  }
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(),
              HasSubstr("schema version is " +
                        std::to_string(SqliteStore::kSchemaVersion + 1)));
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
}

TEST_F(SqliteStoreTest, UsesWal) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  RawDb raw(path_);
  // journal_mode is stored in the file; the raw connection sees it.
  EXPECT_EQ(raw.Query("PRAGMA journal_mode"), "wal");
  EXPECT_TRUE(std::filesystem::exists(path_ + "-wal"));
}

TEST_F(SqliteStoreTest, IntegrityCheckIsOk) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
  ASSERT_TRUE(
      store->CreateTrials("mnist", MakeTrials(50, v1::Trial::ACTIVE)).ok());
  ASSERT_TRUE(store->DeleteStudy("mnist").ok());
  // Foreign keys are on: the trials went with their study.
  RawDb raw(path_);
  EXPECT_EQ(raw.Query("SELECT COUNT(*) FROM trials"), "0");
  absl::StatusOr<std::string> report = store->IntegrityCheck();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(*report, "ok");
}

TEST_F(SqliteStoreTest, CheckIntegrityReportsDamageAsDataLoss) {
  {
    std::unique_ptr<SqliteStore> store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    CreateLeasedTrial(*store, v1::Trial::ACTIVE, 1);
    EXPECT_TRUE(store->CheckIntegrity().ok());
  }
  {
    // An index whose declared columns no longer match its entries.
    RawDb raw(path_);
    raw.Query("PRAGMA writable_schema=ON");
    raw.Query(
        "UPDATE sqlite_master SET sql = "
        "'CREATE INDEX trials_in_state ON trials(client_id)' "
        "WHERE name = 'trials_in_state'");
  }
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  absl::Status status = store->CheckIntegrity();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr(path_));
  EXPECT_THAT(status.message(),
              HasSubstr("row 1 missing from index trials_in_state"));
}

// ----- One store per file -----

TEST_F(SqliteStoreTest, ASecondOpenOfTheFileIsRefusedWhileTheFirstLives) {
  {
    std::unique_ptr<SqliteStore> first = OpenOrDie();
    ASSERT_NE(first, nullptr);
    ASSERT_TRUE(first->CreateStudy(MakeStudy("mnist")).ok());
    // Twice: a refused open leaves nothing behind that changes the answer.
    for (int attempt = 0; attempt < 2; ++attempt) {
      absl::StatusOr<std::unique_ptr<SqliteStore>> second =
          SqliteStore::Open(path_);
      ASSERT_FALSE(second.ok());
      EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_THAT(second.status().message(), HasSubstr(path_));
      EXPECT_THAT(second.status().message(),
                  HasSubstr("another hypertuned holds it"));
      EXPECT_THAT(second.status().message(), Not(HasSubstr("\n")));
    }
    absl::StatusOr<std::unique_ptr<StudyStore>> through_open_store =
        OpenStore(SqliteAt(path_));
    EXPECT_EQ(through_open_store.status().code(),
              absl::StatusCode::kFailedPrecondition);
    // The holder is untouched by the refusals.
    EXPECT_TRUE(first->GetStudy("mnist").ok());
    ASSERT_TRUE(
        first->CreateTrials("mnist", MakeTrials(1, v1::Trial::REQUESTED)).ok());
    EXPECT_TRUE(first->CheckIntegrity().ok());
  }
  // Destroying the first store releases the file.
  std::unique_ptr<SqliteStore> reopened = OpenOrDie();
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(Ids(*reopened->ListTrials("mnist", {})), Range(1, 1));
}

TEST_F(SqliteStoreTest, AnotherProcessHoldsTheFileUntilItDies) {
  int opened[2];
  ASSERT_EQ(pipe(opened), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child holds the file until killed.
    close(opened[0]);
    absl::StatusOr<std::unique_ptr<SqliteStore>> store =
        SqliteStore::Open(path_);
    if (!store.ok()) _exit(1);
    const char byte = 1;
    if (write(opened[1], &byte, 1) != 1) _exit(2);
    while (true) pause();
  }
  close(opened[1]);
  char byte = 0;
  const bool child_opened = read(opened[0], &byte, 1) == 1;
  close(opened[0]);
  absl::StatusOr<std::unique_ptr<SqliteStore>> refused =
      SqliteStore::Open(path_);
  // kill -9 releases the lock with the process. (Killed before any
  // assertion, so that no failure leaves the child behind.)
  kill(child, SIGKILL);
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(child_opened) << "the child could not open the file";
  EXPECT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("another hypertuned holds it"));
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->CheckIntegrity().ok());
}

// ----- Backup -----

TEST_F(SqliteStoreTest, BackupUnderWritesHasEveryTrialWrittenBeforeIt) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
  // A few MiB: the copy takes several steps while the writer goes on.
  v1::Trial written = MakeTrial(v1::Trial::REQUESTED);
  for (int step = 1; step <= 20; ++step) {
    v1::Measurement* measurement = written.add_measurements();
    measurement->set_step(step);
    (*measurement->mutable_metrics())["loss"] = 1.0 / step;
  }
  constexpr int kPreloaded = 8000;
  for (int i = 0; i < kPreloaded / 500; ++i) {
    ASSERT_TRUE(
        store->CreateTrials("mnist", std::vector<v1::Trial>(500, written))
            .ok());
  }

  // The writer appends trials and rewrites old ones (pages the copy may
  // already hold) until told to stop; `acknowledged` is the highest id whose
  // CreateTrials returned.
  std::atomic<bool> stop{false};
  std::atomic<int64_t> acknowledged{kPreloaded};
  std::latch wrote_once(1);
  absl::Status writer_status;
  std::thread writer([&] {
    bool counted_down = false;
    for (int64_t round = 0; !stop.load(); ++round) {
      absl::StatusOr<std::vector<v1::Trial>> created =
          store->CreateTrials("mnist", std::vector<v1::Trial>(10, written));
      if (!created.ok()) {
        writer_status = created.status();
        break;
      }
      acknowledged.store(created->back().id());
      v1::Trial old = written;
      old.set_study_name("mnist");
      old.set_id(round % kPreloaded + 1);
      old.set_client_id("writer-" + std::to_string(round));
      if (absl::Status s = store->UpdateTrial(old); !s.ok()) {
        writer_status = s;
        break;
      }
      if (!counted_down) {
        wrote_once.count_down();
        counted_down = true;
      }
    }
    if (!counted_down) wrote_once.count_down();
  });
  wrote_once.wait();
  const int64_t before = acknowledged.load();
  const std::string copy_path = dir_.File("backup.db");
  absl::Status backup = store->Backup(copy_path);
  stop.store(true);
  writer.join();
  ASSERT_TRUE(writer_status.ok()) << writer_status;
  ASSERT_TRUE(backup.ok()) << backup;
  EXPECT_THAT(TemporaryFiles(dir_.File("")), IsEmpty());

  absl::StatusOr<std::unique_ptr<SqliteStore>> copy =
      SqliteStore::Open(copy_path);
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_TRUE((*copy)->CheckIntegrity().ok());
  absl::StatusOr<std::vector<v1::Trial>> copied =
      (*copy)->ListTrials("mnist", {});
  ASSERT_TRUE(copied.ok()) << copied.status();
  ASSERT_GE(static_cast<int64_t>(copied->size()), before);
  // One snapshot: dense ids, each trial whole.
  EXPECT_EQ(Ids(*copied), Range(1, static_cast<int64_t>(copied->size())));
  for (const v1::Trial& trial : *copied) {
    ASSERT_EQ(trial.measurements_size(), 20) << trial.id();
  }
  // The live store kept every write.
  EXPECT_EQ(store->ListTrials("mnist", {})->size(),
            static_cast<size_t>(acknowledged.load()));
  EXPECT_TRUE(store->CheckIntegrity().ok());
}

TEST_F(SqliteStoreTest, BackupRefusesTheLiveFiles) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
  const std::string same_by_another_name =
      (std::filesystem::path(path_).parent_path() / "." /
       std::filesystem::path(path_).filename())
          .string();
  for (const std::string& live :
       {path_, same_by_another_name, path_ + "-wal", path_ + "-shm",
        path_ + ".lock"}) {
    SCOPED_TRACE(live);
    absl::Status status = store->Backup(live);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr("is the live database"));
  }
  EXPECT_EQ(store->Backup("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(TemporaryFiles(dir_.File("")), IsEmpty());
  EXPECT_TRUE(store->GetStudy("mnist").ok());
  EXPECT_TRUE(store->CheckIntegrity().ok());
}

TEST_F(SqliteStoreTest, BackupReplacesAClosedCopyButNotAnOpenOne) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateStudy(MakeStudy("first")).ok());
  const std::string copy_path = dir_.File("backup.db");
  ASSERT_TRUE(store->Backup(copy_path).ok());
  ASSERT_TRUE(store->CreateStudy(MakeStudy("second")).ok());
  {
    // Open, a database has a WAL: its pages would be applied to a new copy.
    absl::StatusOr<std::unique_ptr<SqliteStore>> open_copy =
        SqliteStore::Open(copy_path);
    ASSERT_TRUE(open_copy.ok()) << open_copy.status();
    absl::Status status = store->Backup(copy_path);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(status.message(), HasSubstr(copy_path + "-wal"));
  }
  // Closed cleanly, it is replaced by a copy of now.
  ASSERT_TRUE(store->Backup(copy_path).ok());
  absl::StatusOr<std::unique_ptr<SqliteStore>> copy =
      SqliteStore::Open(copy_path);
  ASSERT_TRUE(copy.ok()) << copy.status();
  absl::StatusOr<std::vector<v1::Study>> studies = (*copy)->ListStudies();
  ASSERT_TRUE(studies.ok()) << studies.status();
  std::vector<std::string> names;
  for (const v1::Study& study : *studies) names.push_back(study.name());
  EXPECT_THAT(names, ElementsAre("first", "second"));
  EXPECT_THAT(TemporaryFiles(dir_.File("")), IsEmpty());
}

TEST_F(SqliteStoreTest, BackupIntoAMissingDirectoryNamesIt) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  const std::string destination = dir_.File("no/such/dir/backup.db");
  absl::Status status = store->Backup(destination);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_THAT(status.message(), HasSubstr(destination));
}

TEST_F(SqliteStoreTest, NonDatabaseFileIsAClearError) {
  {
    std::ofstream file(path_);
    for (int i = 0; i < 200; ++i) file << "this is a text file, not SQLite\n";
  }
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
  EXPECT_THAT(store.status().message(), HasSubstr("not a database"));
}

TEST_F(SqliteStoreTest, MissingDirectoryIsAClearError) {
  const std::string path = dir_.File("no/such/dir/studies.db");
  absl::StatusOr<std::unique_ptr<SqliteStore>> store = SqliteStore::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr(path));
  EXPECT_THAT(store.status().message(), HasSubstr("unable to open"));
}

TEST_F(SqliteStoreTest, UnparseableBlobsAreDataLoss) {
  {
    std::unique_ptr<SqliteStore> store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
    ASSERT_TRUE(
        store->CreateTrials("mnist", MakeTrials(2, v1::Trial::ACTIVE)).ok());
  }
  {
    RawDb raw(path_);
    // 0xff... is never a valid field tag sequence.
    raw.Query("UPDATE trials SET trial = x'ffffffffff' WHERE trial_id = 2");
    raw.Query("UPDATE studies SET study = x'ffffffffff'");
  }
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  absl::Status trial = store->GetTrial("mnist", 2).status();
  EXPECT_EQ(trial.code(), absl::StatusCode::kDataLoss) << trial;
  EXPECT_THAT(trial.message(), HasSubstr("trial 2 of study \"mnist\""));
  EXPECT_TRUE(store->GetTrial("mnist", 1).ok());
  EXPECT_EQ(store->ListTrials("mnist", {}).status().code(),
            absl::StatusCode::kDataLoss);
  absl::Status study = store->GetStudy("mnist").status();
  EXPECT_EQ(study.code(), absl::StatusCode::kDataLoss) << study;
  EXPECT_THAT(study.message(), HasSubstr("study \"mnist\""));
  EXPECT_EQ(store->ListStudies().status().code(), absl::StatusCode::kDataLoss);
}

// Queues writes, each on its own thread, while the store's commits are
// paused, one after another in the order added; Commit resumes, so that they
// are committed together, and waits for them all.
class PausedBatch {
 public:
  explicit PausedBatch(SqliteStore& store) : store_(store) {
    store_.PauseCommitsForTesting();
  }
  PausedBatch(const PausedBatch&) = delete;
  PausedBatch& operator=(const PausedBatch&) = delete;
  ~PausedBatch() { Commit(); }

  // Runs `write` on a new thread; returns once it is queued.
  // REQUIRES: `write` makes exactly one write call, which reaches the queue
  // (it is not refused before, as invalid UTF-8 would be).
  void Add(std::function<void()> write) {
    threads_.emplace_back(std::move(write));
    store_.AwaitQueuedWritesForTesting(static_cast<int>(threads_.size()));
  }

  void Commit() {
    store_.ResumeCommitsForTesting();
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
  }

 private:
  SqliteStore& store_;
  std::vector<std::thread> threads_;
};

TEST_F(SqliteStoreTest, OneBatchFailsOnlyItsFailingWrites) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
  ASSERT_TRUE(
      store->CreateTrials("mnist", MakeTrials(2, v1::Trial::ACTIVE)).ok());
  const SqliteStore::CommitStats before = store->GetCommitStats();

  v1::Trial missing = MakeTrial(v1::Trial::COMPLETED);
  missing.set_study_name("mnist");
  missing.set_id(99);
  v1::Trial completed = *store->GetTrial("mnist", 1);
  completed.set_state(v1::Trial::COMPLETED);
  v1::Study paused = MakeStudy("mnist");
  paused.set_state(v1::Study::PAUSED);
  // The second trial cannot be stored: the first, inserted before it, must
  // be undone with it.
  std::vector<v1::Trial> half_bad = MakeTrials(2, v1::Trial::REQUESTED);
  half_bad[1].set_checkpoint_uri("\xff not utf-8");

  absl::Status create_new, create_duplicate, update_missing, update_completed,
      delete_missing, update_study;
  absl::StatusOr<std::vector<v1::Trial>> new_trials, bad_trials;
  {
    PausedBatch batch(*store);
    batch.Add([&] { create_new = store->CreateStudy(MakeStudy("new")); });
    batch.Add(
        [&] { create_duplicate = store->CreateStudy(MakeStudy("mnist")); });
    // Applied in queue order: "new" exists by now.
    batch.Add([&] {
      new_trials = store->CreateTrials("new", MakeTrials(2, v1::Trial::ACTIVE));
    });
    batch.Add([&] { update_missing = store->UpdateTrial(missing); });
    batch.Add([&] { bad_trials = store->CreateTrials("mnist", half_bad); });
    batch.Add([&] { update_completed = store->UpdateTrial(completed); });
    batch.Add([&] { delete_missing = store->DeleteStudy("gone"); });
    batch.Add([&] { update_study = store->UpdateStudy(paused); });
    batch.Commit();
  }
  const SqliteStore::CommitStats after = store->GetCommitStats();
  EXPECT_EQ(after.batches - before.batches, 1);
  EXPECT_EQ(after.writes - before.writes, 8);
  EXPECT_EQ(after.largest_batch, 8);

  EXPECT_TRUE(create_new.ok()) << create_new;
  EXPECT_EQ(create_duplicate.code(), absl::StatusCode::kAlreadyExists)
      << create_duplicate;
  ASSERT_TRUE(new_trials.ok()) << new_trials.status();
  EXPECT_THAT(Ids(*new_trials), ElementsAre(1, 2));
  EXPECT_EQ(update_missing.code(), absl::StatusCode::kNotFound)
      << update_missing;
  EXPECT_THAT(update_missing.message(), HasSubstr("trial 99"));
  EXPECT_EQ(bad_trials.status().code(), absl::StatusCode::kInvalidArgument)
      << bad_trials.status();
  EXPECT_THAT(bad_trials.status().message(),
              HasSubstr("trial 4 of study \"mnist\""));
  EXPECT_TRUE(update_completed.ok()) << update_completed;
  EXPECT_EQ(delete_missing.code(), absl::StatusCode::kNotFound)
      << delete_missing;
  EXPECT_TRUE(update_study.ok()) << update_study;

  // What succeeded is stored, also after reopening; nothing of the rest.
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "open" : "reopened");
    if (pass == 1) {
      store.reset();
      store = OpenOrDie();
      ASSERT_NE(store, nullptr);
    }
    EXPECT_EQ(store->GetStudy("mnist")->state(), v1::Study::PAUSED);
    EXPECT_EQ(Ids(*store->ListTrials("mnist", {})), Range(1, 2));
    EXPECT_EQ(store->GetTrial("mnist", 1)->state(), v1::Trial::COMPLETED);
    EXPECT_EQ(Ids(*store->ListTrials("new", {})), Range(1, 2));
    EXPECT_EQ(store->ListStudies()->size(), 2u);
    EXPECT_EQ(*store->IntegrityCheck(), "ok");
  }
}

TEST_F(SqliteStoreTest, QueuedWritesShareCommitsUpToTheLimit) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
  constexpr int kWrites = SqliteStore::kMaxBatchWrites + 10;
  absl::StatusOr<std::vector<v1::Trial>> trials =
      store->CreateTrials("mnist", MakeTrials(kWrites, v1::Trial::ACTIVE));
  ASSERT_TRUE(trials.ok()) << trials.status();
  const SqliteStore::CommitStats before = store->GetCommitStats();

  std::vector<absl::Status> statuses(kWrites);
  {
    PausedBatch batch(*store);
    for (int i = 0; i < kWrites; ++i) {
      batch.Add([&, i] {
        v1::Trial trial = (*trials)[i];
        trial.set_state(v1::Trial::COMPLETED);
        statuses[i] = store->UpdateTrial(trial);
      });
    }
  }
  for (int i = 0; i < kWrites; ++i) EXPECT_TRUE(statuses[i].ok()) << i;
  // The first batch takes as many as it may; the next, the rest.
  const SqliteStore::CommitStats after = store->GetCommitStats();
  EXPECT_EQ(after.batches - before.batches, 2);
  EXPECT_EQ(after.writes - before.writes, kWrites);
  EXPECT_EQ(after.largest_batch, SqliteStore::kMaxBatchWrites);
  EXPECT_THAT(*store->CountTrials("mnist"),
              UnorderedElementsAre(Pair(v1::Trial::COMPLETED, kWrites)));
}

TEST_F(SqliteStoreTest, AFailedTransactionFailsEveryWriteOfTheBatch) {
  // No waiting for locks: the batch's BEGIN fails at once.
  std::unique_ptr<SqliteStore> store = OpenOrDie({.busy_timeout_ms = 0});
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
  ASSERT_TRUE(
      store->CreateTrials("mnist", MakeTrials(2, v1::Trial::ACTIVE)).ok());
  v1::Trial completed = *store->GetTrial("mnist", 1);
  completed.set_state(v1::Trial::COMPLETED);

  RawDb intruder(path_);
  intruder.Query("BEGIN IMMEDIATE");  // Holds the write lock.
  absl::Status update, create_study;
  absl::StatusOr<std::vector<v1::Trial>> create_trials;
  {
    PausedBatch batch(*store);
    batch.Add([&] { update = store->UpdateTrial(completed); });
    batch.Add([&] {
      create_trials =
          store->CreateTrials("mnist", MakeTrials(1, v1::Trial::ACTIVE));
    });
    batch.Add([&] { create_study = store->CreateStudy(MakeStudy("new")); });
  }
  for (const absl::Status& status :
       {update, create_trials.status(), create_study}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_THAT(status.message(), HasSubstr("database is locked"));
  }
  EXPECT_THAT(update.message(), HasSubstr("updating trial 1 of study"));
  EXPECT_THAT(create_study.message(), HasSubstr("creating study \"new\""));

  intruder.Query("ROLLBACK");
  EXPECT_EQ(store->GetTrial("mnist", 1)->state(), v1::Trial::ACTIVE);
  EXPECT_EQ(store->ListTrials("mnist", {})->size(), 2u);
  EXPECT_EQ(store->GetStudy("new").status().code(),
            absl::StatusCode::kNotFound);
  // Writing works again.
  EXPECT_TRUE(store->UpdateTrial(completed).ok());
  EXPECT_EQ(store->GetTrial("mnist", 1)->state(), v1::Trial::COMPLETED);
}

TEST_F(SqliteStoreTest, ReadsDoNotWaitForQueuedWrites) {
  for (const std::string& path : {path_, std::string(":memory:")}) {
    SCOPED_TRACE(path);
    absl::StatusOr<std::unique_ptr<SqliteStore>> opened =
        SqliteStore::Open(path);
    ASSERT_TRUE(opened.ok()) << opened.status();
    SqliteStore& store = **opened;
    ASSERT_TRUE(store.CreateStudy(MakeStudy("mnist")).ok());
    ASSERT_TRUE(
        store.CreateTrials("mnist", MakeTrials(1, v1::Trial::ACTIVE)).ok());
    v1::Trial completed = *store.GetTrial("mnist", 1);
    completed.set_state(v1::Trial::COMPLETED);

    absl::Status update;
    PausedBatch batch(store);
    batch.Add([&] { update = store.UpdateTrial(completed); });
    // The write is queued, not committed: reads go on and do not see it.
    EXPECT_EQ(store.GetTrial("mnist", 1)->state(), v1::Trial::ACTIVE);
    EXPECT_THAT(*store.ListTrialsInStates({v1::Trial::COMPLETED}), IsEmpty());
    EXPECT_EQ(*store.IntegrityCheck(), "ok");
    batch.Commit();
    EXPECT_TRUE(update.ok()) << update;
    EXPECT_EQ(store.GetTrial("mnist", 1)->state(), v1::Trial::COMPLETED);
  }
}

TEST_F(SqliteStoreTest, ReopenAfterManyConcurrentWritesKeepsEverything) {
  constexpr int kThreads = 32;
  constexpr int kWritesPerThread = 50;  // One create, then updates.
  {
    std::unique_ptr<SqliteStore> store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
    std::vector<int> failures(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        absl::StatusOr<std::vector<v1::Trial>> created = store->CreateTrials(
            "mnist",
            MakeTrials(1, v1::Trial::ACTIVE, "worker-" + std::to_string(t)));
        if (!created.ok()) {
          ++failures[t];
          return;
        }
        v1::Trial trial = (*created)[0];
        for (int step = 1; step < kWritesPerThread; ++step) {
          trial.add_measurements()->set_step(step);
          if (!store->UpdateTrial(trial).ok()) ++failures[t];
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << t;
    EXPECT_EQ(store->GetCommitStats().writes, 1 + kThreads * kWritesPerThread);
  }
  std::unique_ptr<SqliteStore> store = OpenOrDie({.durable_full = true});
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::vector<v1::Trial>> trials =
      store->ListTrials("mnist", {});
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_EQ(Ids(*trials), Range(1, kThreads));
  std::set<std::string> clients;
  for (const v1::Trial& trial : *trials) {
    EXPECT_EQ(trial.measurements_size(), kWritesPerThread - 1) << trial.id();
    clients.insert(trial.client_id());
  }
  EXPECT_EQ(clients.size(), static_cast<size_t>(kThreads));
  EXPECT_EQ(*store->IntegrityCheck(), "ok");
  absl::StatusOr<std::vector<v1::Trial>> more =
      store->CreateTrials("mnist", MakeTrials(1, v1::Trial::REQUESTED));
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_THAT(Ids(*more), ElementsAre(kThreads + 1));
}

// Reads exactly `size` bytes; false at end of file or on error.
bool ReadFully(int fd, void* data, size_t size) {
  char* next = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = read(fd, next, size);
    if (got <= 0) return false;
    next += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

TEST_F(SqliteStoreTest, AcknowledgedWritesSurviveKillNine) {
  constexpr int kThreads = 8;
  constexpr int kAcksBeforeKill = 400;
  {
    std::unique_ptr<SqliteStore> store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
    ASSERT_TRUE(
        store->CreateTrials("mnist", MakeTrials(kThreads, v1::Trial::ACTIVE))
            .ok());
  }
  int acks[2];
  ASSERT_EQ(pipe(acks), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child reports each update once UpdateTrial returned, until killed.
    close(acks[0]);
    absl::StatusOr<std::unique_ptr<SqliteStore>> store =
        SqliteStore::Open(path_);
    if (!store.ok()) _exit(1);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        absl::StatusOr<v1::Trial> trial = (*store)->GetTrial("mnist", t + 1);
        if (!trial.ok()) _exit(2);
        for (int64_t step = 1; step <= 100'000; ++step) {
          trial->add_measurements()->set_step(step);
          if (!(*store)->UpdateTrial(*trial).ok()) _exit(3);
          const int64_t ack[2] = {trial->id(), step};
          if (write(acks[1], ack, sizeof ack) != sizeof ack) _exit(4);
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    _exit(0);
  }
  close(acks[1]);
  std::vector<int64_t> acked(kThreads + 1, 0);  // By trial id.
  int received = 0;
  int64_t ack[2];
  while (received < kAcksBeforeKill && ReadFully(acks[0], ack, sizeof ack)) {
    ASSERT_TRUE(ack[0] >= 1 && ack[0] <= kThreads) << ack[0];
    acked[ack[0]] = std::max(acked[ack[0]], ack[1]);
    ++received;
  }
  kill(child, SIGKILL);
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  close(acks[0]);
  ASSERT_EQ(received, kAcksBeforeKill) << "the writer stopped early";
  EXPECT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL);

  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->IntegrityCheck(), "ok");
  for (int64_t id = 1; id <= kThreads; ++id) {
    absl::StatusOr<v1::Trial> trial = store->GetTrial("mnist", id);
    ASSERT_TRUE(trial.ok()) << trial.status();
    // Every acknowledged report is there (later ones may be too).
    EXPECT_GE(trial->measurements_size(), acked[id]) << id;
    for (int i = 0; i < trial->measurements_size(); ++i) {
      EXPECT_EQ(trial->measurements(i).step(), i + 1) << id;
    }
  }
}

TEST_F(SqliteStoreTest, MigratesAVersionOneFile) {
  {
    std::unique_ptr<SqliteStore> store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
    ASSERT_TRUE(
        store->CreateTrials("mnist", MakeTrials(2, v1::Trial::ACTIVE)).ok());
  }
  {
    // Back to what version 1 wrote.
    RawDb raw(path_);
    raw.Query("DROP TRIGGER trial_counts_insert");
    raw.Query("DROP TRIGGER trial_counts_delete");
    raw.Query("DROP TRIGGER trial_counts_update");
    raw.Query("DROP TABLE trial_counts");
    raw.Query("DROP INDEX trials_by_state");
    raw.Query("CREATE INDEX trials_by_state ON trials(study_id, state)");
    raw.Query("DROP INDEX trials_by_client");
    raw.Query("CREATE INDEX trials_by_client ON trials(study_id, client_id)");
    raw.Query("DROP INDEX trials_in_state");
    raw.Query("DROP INDEX trials_by_sequence");
    raw.Query("ALTER TABLE trials DROP COLUMN sequence");
    raw.Query("ALTER TABLE trials DROP COLUMN lease_epoch");
    raw.Query("DELETE FROM schema_version WHERE version >= 2");
  }
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  RawDb raw(path_);
  EXPECT_EQ(raw.Query("SELECT MAX(version) FROM schema_version"),
            std::to_string(SqliteStore::kSchemaVersion));
  EXPECT_EQ(raw.Query("SELECT COUNT(*) FROM sqlite_master "
                      "WHERE type = 'index' AND name = 'trials_in_state'"),
            "1");
  absl::StatusOr<std::vector<v1::Trial>> active =
      store->ListTrialsInStates({v1::Trial::ACTIVE});
  ASSERT_TRUE(active.ok()) << active.status();
  EXPECT_EQ(Ids(*active), Range(1, 2));
  // Trials from before the change sequence are numbered by id, and later
  // changes continue after them.
  absl::StatusOr<std::vector<TrialChange>> changes =
      store->ListTrialChanges("mnist", 0, 0);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), 2u);
  EXPECT_EQ((*changes)[1].sequence, 2);
  ASSERT_TRUE(store->UpdateTrial((*changes)[0].trial).ok());
  changes = store->ListTrialChanges("mnist", 2, 0);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_EQ((*changes)[0].sequence, 3);
  EXPECT_EQ((*changes)[0].trial.id(), 1);
  // The counts table starts from the trials already there.
  absl::StatusOr<absl::flat_hash_map<v1::Trial::State, int64_t>> counts =
      store->CountTrials("mnist");
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_THAT(*counts, UnorderedElementsAre(Pair(v1::Trial::ACTIVE, 2)));
}

TEST_F(SqliteStoreTest, ConditionalUpdatesOfOneBatchSeeEachOther) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  const v1::Trial read = CreateLeasedTrial(*store, v1::Trial::REQUESTED, 0);
  v1::Trial to_a = read;
  to_a.set_state(v1::Trial::ACTIVE);
  to_a.set_client_id("worker-a");
  to_a.set_lease_epoch(1);
  v1::Trial to_b = to_a;
  to_b.set_client_id("worker-b");
  v1::Trial reported = to_a;
  reported.add_measurements()->set_step(1);
  const SqliteStore::CommitStats before = store->GetCommitStats();

  absl::Status grant_a, grant_b, report;
  {
    PausedBatch batch(*store);
    // Both grants from the same read: the first queued wins.
    batch.Add(
        [&] { grant_a = store->UpdateTrialIf(to_a, TrialVersion::Of(read)); });
    batch.Add(
        [&] { grant_b = store->UpdateTrialIf(to_b, TrialVersion::Of(read)); });
    // A write from what the winner wrote, in the same transaction.
    batch.Add([&] {
      report = store->UpdateTrialIf(reported, TrialVersion::Of(to_a));
    });
  }
  EXPECT_EQ(store->GetCommitStats().batches - before.batches, 1);
  EXPECT_TRUE(grant_a.ok()) << grant_a;
  EXPECT_EQ(grant_b.code(), absl::StatusCode::kAborted) << grant_b;
  EXPECT_THAT(grant_b.message(),
              HasSubstr("REQUESTED under lease epoch 0 then, ACTIVE under "
                        "lease epoch 1 now"));
  EXPECT_TRUE(report.ok()) << report;
  EXPECT_THAT(*store->GetTrial("mnist", 1), EqualsProto(reported));
  // The creation, then the grant and the report: the loser left no change.
  EXPECT_EQ(LastSequence(*store, "mnist"), 3);
}

TEST_F(SqliteStoreTest, LeaseEpochColumnFollowsEveryTrialWrite) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  RawDb raw(path_);
  auto column = [&] {
    return raw.Query("SELECT lease_epoch FROM trials WHERE trial_id = 1");
  };
  v1::Trial trial = CreateLeasedTrial(*store, v1::Trial::ACTIVE, 5);
  EXPECT_EQ(column(), "5");
  // Unconditional, keeping the state and client (the message-only update).
  trial.set_lease_epoch(6);
  ASSERT_TRUE(store->UpdateTrial(trial).ok());
  EXPECT_EQ(column(), "6");
  // Unconditional, changing the state.
  trial.set_state(v1::Trial::REQUESTED);
  trial.set_lease_epoch(7);
  ASSERT_TRUE(store->UpdateTrial(trial).ok());
  EXPECT_EQ(column(), "7");
  // Conditional, both ways.
  v1::Trial next = trial;
  next.set_lease_epoch(8);
  ASSERT_TRUE(store->UpdateTrialIf(next, TrialVersion::Of(trial)).ok());
  EXPECT_EQ(column(), "8");
  trial = next;
  next.set_state(v1::Trial::ACTIVE);
  next.set_lease_epoch(9);
  ASSERT_TRUE(store->UpdateTrialIf(next, TrialVersion::Of(trial)).ok());
  EXPECT_EQ(column(), "9");
  // A renewal keeps it.
  next.set_lease_expire_time_ms(9000);
  ASSERT_TRUE(store->RenewTrialLease(next).ok());
  EXPECT_EQ(column(), "9");
  EXPECT_EQ(*store->IntegrityCheck(), "ok");
}

TEST_F(SqliteStoreTest, MigratesAVersionFourFileFillingLeaseEpochs) {
  {
    std::unique_ptr<SqliteStore> store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
    std::vector<v1::Trial> trials = {MakeTrial(v1::Trial::REQUESTED),
                                     MakeTrial(v1::Trial::ACTIVE, "worker-a"),
                                     MakeTrial(v1::Trial::COMPLETED, "w")};
    trials[1].set_lease_epoch(3);
    trials[2].set_lease_epoch(7);
    ASSERT_TRUE(store->CreateTrials("mnist", trials).ok());
  }
  {
    // Back to what version 4 wrote, with a fourth trial whose message does
    // not parse (0xff... is never a valid field tag sequence).
    RawDb raw(path_);
    raw.Query("ALTER TABLE trials DROP COLUMN lease_epoch");
    raw.Query("DELETE FROM schema_version WHERE version >= 5");
    raw.Query(
        "INSERT INTO trials(study_id, trial_id, state, client_id, trial, "
        "sequence) VALUES (1, 4, ?1, x'', x'ffffffffff', 4)",
        {v1::Trial::ACTIVE});
    ASSERT_EQ(raw.Query("SELECT MAX(version) FROM schema_version"), "4");
  }
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  RawDb raw(path_);
  EXPECT_EQ(raw.Query("SELECT MAX(version) FROM schema_version"), "5");
  const char* kEpoch = "SELECT lease_epoch FROM trials WHERE trial_id = ?1";
  EXPECT_EQ(raw.Query(kEpoch, {1}), "0");
  EXPECT_EQ(raw.Query(kEpoch, {2}), "3");
  EXPECT_EQ(raw.Query(kEpoch, {3}), "7");
  // The unreadable trial keeps 0 and stays unreadable; the file opened.
  EXPECT_EQ(raw.Query(kEpoch, {4}), "0");
  EXPECT_EQ(store->GetTrial("mnist", 4).status().code(),
            absl::StatusCode::kDataLoss);

  // Conditional updates compare against the filled-in epochs.
  absl::StatusOr<v1::Trial> active = store->GetTrial("mnist", 2);
  ASSERT_TRUE(active.ok()) << active.status();
  v1::Trial completed = *active;
  completed.set_state(v1::Trial::COMPLETED);
  absl::Status stale = store->UpdateTrialIf(completed, {v1::Trial::ACTIVE, 0});
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted) << stale;
  EXPECT_THAT(stale.message(), HasSubstr("ACTIVE under lease epoch 3 now"));
  EXPECT_TRUE(store->UpdateTrialIf(completed, TrialVersion::Of(*active)).ok());
  EXPECT_EQ(store->GetTrial("mnist", 2)->state(), v1::Trial::COMPLETED);
  EXPECT_EQ(*store->IntegrityCheck(), "ok");
}

TEST_F(SqliteStoreTest, ReadConnectionsAreBounded) {
  EXPECT_EQ(
      SqliteStore::Open(path_, {.max_read_connections = 0}).status().code(),
      absl::StatusCode::kInvalidArgument);

  // One read connection serves many threads in turn.
  std::unique_ptr<SqliteStore> store = OpenOrDie({.max_read_connections = 1});
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
  constexpr int kThreads = 8;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        if (!store->GetStudy("mnist").ok()) ++failures[t];
        if (!store->ListTrials("mnist", {}).ok()) ++failures[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << t;
}

}  // namespace
}  // namespace hypertune::storage
