// What the store tests share (study_store_test.cc's typed suite,
// sqlite_store_test.cc): messages to store, a temporary directory, a proto
// matcher.
#ifndef HYPERTUNE_TESTS_STORAGE_STORE_TEST_UTIL_H_
#define HYPERTUNE_TESTS_STORAGE_STORE_TEST_UTIL_H_

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "hypertune/v1/hypertune.pb.h"
#include "storage/store_options.h"
#include "storage/study_store.h"

namespace hypertune::storage {

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
inline std::vector<std::string> OddStrings() {
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

inline v1::Study MakeStudy(const std::string& name) {
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

inline v1::Trial MakeTrial(v1::Trial::State state,
                           const std::string& client_id = "") {
  v1::Trial trial;
  trial.set_state(state);
  trial.set_client_id(client_id);
  v1::ParameterValue* lr = trial.add_parameters();
  lr->set_name("lr");
  lr->set_double_value(0.01);
  return trial;
}

inline std::vector<v1::Trial> MakeTrials(int n, v1::Trial::State state,
                                         const std::string& client_id = "") {
  return std::vector<v1::Trial>(n, MakeTrial(state, client_id));
}

inline std::vector<int64_t> Ids(const std::vector<v1::Trial>& trials) {
  std::vector<int64_t> ids;
  for (const v1::Trial& trial : trials) ids.push_back(trial.id());
  return ids;
}

inline std::vector<int64_t> Range(int64_t first, int64_t last) {
  std::vector<int64_t> ids;
  for (int64_t id = first; id <= last; ++id) ids.push_back(id);
  return ids;
}

// StoreOptions for a SQLite store on `path`, the rest at their defaults.
inline StoreOptions SqliteAt(const std::string& path) {
  StoreOptions options;
  options.path = path;
  return options;
}

// The sequence number of the change that created CreateLeasedTrial's trial.
inline constexpr int64_t kCreated = 1;

// The highest change sequence of `study_name` (0 with no trials).
inline int64_t LastSequence(StudyStore& store, const std::string& study_name) {
  absl::StatusOr<std::vector<TrialChange>> changes =
      store.ListTrialChanges(study_name, 0, 0);
  EXPECT_TRUE(changes.ok()) << changes.status();
  return !changes.ok() || changes->empty() ? 0 : changes->back().sequence;
}

// Creates study "mnist" with one trial, in `state` under lease `epoch` and
// held by "worker-a", and returns it as stored; its change is kCreated.
inline v1::Trial CreateLeasedTrial(StudyStore& store, v1::Trial::State state,
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

// The names of the files in `dir` that hold ".tmp-" (a backup's leftover).
inline std::vector<std::string> TemporaryFiles(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".tmp-") != std::string::npos) names.push_back(name);
  }
  return names;
}

}  // namespace hypertune::storage

#endif  // HYPERTUNE_TESTS_STORAGE_STORE_TEST_UTIL_H_
