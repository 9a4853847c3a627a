// One typed suite run against every StudyStore, plus SqliteStore's own
// tests (persistence, schema versioning, pragmas, damaged files).
#include "storage/study_store.h"

#include <sqlite3.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "storage/memory_store.h"
#include "storage/sqlite_store.h"

namespace hypertune::storage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
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

template <typename Store>
std::unique_ptr<Store> MakeStore(const TempDir& dir);

template <>
std::unique_ptr<MemoryStore> MakeStore<MemoryStore>(const TempDir&) {
  return std::make_unique<MemoryStore>();
}

template <>
std::unique_ptr<SqliteStore> MakeStore<SqliteStore>(const TempDir& dir) {
  absl::StatusOr<std::unique_ptr<SqliteStore>> store =
      SqliteStore::Open(dir.File("studies.db"));
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

template <typename Store>
class StudyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = MakeStore<Store>(dir_);
    ASSERT_NE(store_, nullptr);
  }

  // Creates a study named `name`, failing the test on error.
  void Create(const std::string& name) {
    ASSERT_TRUE(store_->CreateStudy(MakeStudy(name)).ok());
  }

  TempDir dir_;
  std::unique_ptr<StudyStore> store_;
};

using StoreTypes = ::testing::Types<MemoryStore, SqliteStore>;
class StoreNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    return std::is_same_v<T, MemoryStore> ? "Memory" : "Sqlite";
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

}  // namespace
}  // namespace hypertune::storage
