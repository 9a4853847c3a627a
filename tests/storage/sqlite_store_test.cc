// SqliteStore's own tests: persistence, schema versioning and migrations,
// pragmas, damaged files, the file lock, backups and group commit. The
// typed suite every store passes is in study_store_test.cc.
#include "storage/sqlite_store.h"

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

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/open_store.h"
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
  for (const std::string& live : {path_, same_by_another_name, path_ + "-wal",
                                  path_ + "-shm", path_ + ".lock"}) {
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
    // Open (or not closed cleanly), a database has a WAL: its pages would be
    // applied to a new copy. (Served by a store, a copy would be live and
    // never replaced: BackupReplacesOnlyBackupsNeverALiveDatabase.)
    std::ofstream(copy_path + "-wal") << "pages";
    absl::Status status = store->Backup(copy_path);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(status.message(), HasSubstr(copy_path + "-wal"));
    std::filesystem::remove(copy_path + "-wal");
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

TEST_F(SqliteStoreTest, BackupReplacesOnlyBackupsNeverALiveDatabase) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateStudy(MakeStudy("mine")).ok());
  // A stopped sibling server's database, beside ours.
  const std::string sibling_path = dir_.File("sibling.db");
  {
    absl::StatusOr<std::unique_ptr<SqliteStore>> sibling =
        SqliteStore::Open(sibling_path);
    ASSERT_TRUE(sibling.ok()) << sibling.status();
    ASSERT_TRUE((*sibling)->CreateStudy(MakeStudy("theirs")).ok());
  }
  absl::Status refused = store->Backup(sibling_path);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("not a hypertune backup"));
  {
    absl::StatusOr<std::unique_ptr<SqliteStore>> sibling =
        SqliteStore::Open(sibling_path);
    ASSERT_TRUE(sibling.ok()) << sibling.status();
    EXPECT_TRUE((*sibling)->GetStudy("theirs").ok());
  }

  // A backup is replaced by the next one, until it is served: then it is a
  // live database like any other.
  const std::string copy_path = dir_.File("copy.db");
  ASSERT_TRUE(store->Backup(copy_path).ok());
  absl::Status again = store->Backup(copy_path);
  ASSERT_TRUE(again.ok()) << again;
  {
    absl::StatusOr<std::unique_ptr<SqliteStore>> restored =
        SqliteStore::Open(copy_path);
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_TRUE((*restored)->GetStudy("mine").ok());
  }
  EXPECT_EQ(store->Backup(copy_path).code(),
            absl::StatusCode::kFailedPrecondition);
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
    raw.Query("DROP TABLE measurements");
    raw.Query("ALTER TABLE trials DROP COLUMN measurements");
    raw.Query("ALTER TABLE trials DROP COLUMN measurement_bytes");
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
    raw.Query("DROP TABLE measurements");
    raw.Query("ALTER TABLE trials DROP COLUMN measurements");
    raw.Query("ALTER TABLE trials DROP COLUMN measurement_bytes");
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
  EXPECT_EQ(raw.Query("SELECT MAX(version) FROM schema_version"),
            std::to_string(SqliteStore::kSchemaVersion));
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

TEST_F(SqliteStoreTest, MigratesAVersionFiveFileSplittingMeasurements) {
  // Trial 2 as version 5 stored it: its measurements inside its message.
  v1::Trial old = MakeTrial(v1::Trial::ACTIVE, "worker-a");
  old.set_study_name("mnist");
  old.set_id(2);
  old.set_lease_epoch(4);
  for (int step = 1; step <= 3; ++step) {
    v1::Measurement* m = old.add_measurements();
    m->set_step(step);
    (*m->mutable_metrics())["accuracy"] = 0.1 * step;
  }
  {
    std::unique_ptr<SqliteStore> store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->CreateStudy(MakeStudy("mnist")).ok());
    ASSERT_TRUE(
        store->CreateTrials("mnist", MakeTrials(1, v1::Trial::COMPLETED)).ok());
  }
  {
    RawDb raw(path_);
    raw.Query("DROP TABLE measurements");
    raw.Query("ALTER TABLE trials DROP COLUMN measurements");
    raw.Query("ALTER TABLE trials DROP COLUMN measurement_bytes");
    raw.Query("DELETE FROM schema_version WHERE version >= 6");
    v1::Trial done = old;
    done.set_id(3);
    done.set_state(v1::Trial::COMPLETED);
    const std::string finished = absl::StrCat(
        "INSERT INTO trials(study_id, trial_id, state, client_id, trial, "
        "sequence, lease_epoch) VALUES (1, 3, ?1, x'', x'",
        absl::BytesToHexString(done.SerializeAsString()), "', 3, 4)");
    raw.Query(finished.c_str(), {v1::Trial::COMPLETED});
    const std::string insert = absl::StrCat(
        "INSERT INTO trials(study_id, trial_id, state, client_id, trial, "
        "sequence, lease_epoch) VALUES (1, 2, ?1, x'",
        absl::BytesToHexString("worker-a"), "', x'",
        absl::BytesToHexString(old.SerializeAsString()), "', 2, 4)");
    raw.Query(insert.c_str(), {v1::Trial::ACTIVE});
    ASSERT_EQ(raw.Query("SELECT MAX(version) FROM schema_version"), "5");
  }
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  RawDb raw(path_);
  EXPECT_EQ(raw.Query("SELECT MAX(version) FROM schema_version"), "6");
  // The measurements moved to rows of their own, and read back in place.
  EXPECT_EQ(raw.Query("SELECT COUNT(*) FROM measurements WHERE trial_id = 2"),
            "3");
  EXPECT_EQ(raw.Query("SELECT measurements FROM trials WHERE trial_id = 2"),
            "3");
  EXPECT_THAT(*store->GetTrial("mnist", 2), EqualsProto(old));
  absl::StatusOr<TrialHead> head = store->GetTrialHead("mnist", 2);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->measurements, 3);
  EXPECT_EQ(head->latest->step(), 3);
  EXPECT_EQ(head->trial.ByteSizeLong() + head->measurement_bytes,
            old.ByteSizeLong());
  // And grow from there.
  v1::Measurement next;
  next.set_step(4);
  (*next.mutable_metrics())["accuracy"] = 0.4;
  ASSERT_TRUE(
      store->AppendMeasurement(head->trial, next, TrialVersion::Of(old)).ok());
  *old.add_measurements() = next;
  EXPECT_THAT(*store->GetTrial("mnist", 2), EqualsProto(old));
  EXPECT_EQ(store->GetTrial("mnist", 1)->measurements_size(), 0);
  // A finished trial keeps its curve in its message.
  EXPECT_EQ(raw.Query("SELECT COUNT(*) FROM measurements WHERE trial_id = 3"),
            "0");
  EXPECT_EQ(store->GetTrial("mnist", 3)->measurements_size(), 3);
  EXPECT_EQ(*store->IntegrityCheck(), "ok");
}

TEST_F(SqliteStoreTest, AReportWritesOneMeasurementRowWhateverTheCurve) {
  std::unique_ptr<SqliteStore> store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  v1::Trial trial = CreateLeasedTrial(*store, v1::Trial::ACTIVE, 1);
  for (int step = 1; step <= 50; ++step) {
    v1::Measurement m;
    m.set_step(step);
    (*m.mutable_metrics())["accuracy"] = step / 100.0;
    ASSERT_TRUE(
        store->AppendMeasurement(trial, m, TrialVersion::Of(trial)).ok());
    *trial.add_measurements() = m;
  }
  RawDb raw(path_);
  // Rows keyed by position; the trial's own message holds none of them.
  EXPECT_EQ(raw.Query("SELECT COUNT(*) FROM measurements"), "50");
  EXPECT_EQ(raw.Query("SELECT MAX(idx) FROM measurements"), "49");
  v1::Trial head = trial;
  head.clear_measurements();
  EXPECT_EQ(raw.Query("SELECT length(trial) FROM trials"),
            std::to_string(head.ByteSizeLong()));
  EXPECT_THAT(*store->GetTrial("mnist", 1), EqualsProto(trial));
  // A whole-trial write that keeps the curve (a checkpoint) keeps the rows.
  trial.set_checkpoint_uri("file:///ckpt/50");
  ASSERT_TRUE(store->UpdateTrialIf(trial, TrialVersion::Of(trial)).ok());
  EXPECT_THAT(*store->GetTrial("mnist", 1), EqualsProto(trial));
  EXPECT_EQ(raw.Query("SELECT COUNT(*) FROM measurements"), "50");
  // A finished trial keeps its curve in its own message: one row to read.
  v1::Trial completed = trial;
  completed.set_state(v1::Trial::COMPLETED);
  ASSERT_TRUE(store->UpdateTrialIf(completed, TrialVersion::Of(trial)).ok());
  EXPECT_EQ(raw.Query("SELECT COUNT(*) FROM measurements"), "0");
  EXPECT_EQ(raw.Query("SELECT length(trial) FROM trials"),
            std::to_string(completed.ByteSizeLong()));
  EXPECT_THAT(*store->GetTrial("mnist", 1), EqualsProto(completed));
  absl::StatusOr<TrialHead> finished = store->GetTrialHead("mnist", 1);
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_EQ(finished->measurements, 50);
  EXPECT_EQ(finished->latest->step(), 50);
  EXPECT_EQ(finished->trial.measurements_size(), 0);
  EXPECT_EQ(finished->trial.ByteSizeLong() + finished->measurement_bytes,
            completed.ByteSizeLong());
  v1::Measurement late;
  late.set_step(51);
  EXPECT_EQ(
      store->AppendMeasurement(completed, late, TrialVersion::Of(completed))
          .code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(*store->GetTrial("mnist", 1), EqualsProto(completed));
  // Rows of an unfinished trial go with its study.
  v1::Trial running = MakeTrial(v1::Trial::ACTIVE, "worker-b");
  *running.add_measurements() = late;
  ASSERT_TRUE(store->CreateTrials("mnist", {running}).ok());
  EXPECT_EQ(raw.Query("SELECT COUNT(*) FROM measurements"), "1");
  ASSERT_TRUE(store->DeleteStudy("mnist").ok());
  EXPECT_EQ(raw.Query("SELECT COUNT(*) FROM measurements"), "0");
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
