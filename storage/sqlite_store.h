// SqliteStore: the StudyStore kept in one SQLite file (the embedded default).
//
// The file is in WAL mode with foreign keys on. Each study and trial is kept
// as its serialized proto message; a few columns beside it (name, state,
// client id) exist only for lookups. Every statement is prepared once, cached
// and given its values through bindings, so names of any bytes round-trip
// verbatim. The schema carries a version and migrates forward on Open; a
// file written by a newer build is refused.
//
// Durability: with the default synchronous=NORMAL a committed call survives
// a crash (kill -9) of the process; durable_full also survives power loss.
//
// Thread safety: every method may be called from any thread; one connection
// guarded by a mutex serializes them. The server is meant to be the file's
// only writer.
#ifndef HYPERTUNE_STORAGE_SQLITE_STORE_H_
#define HYPERTUNE_STORAGE_SQLITE_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "storage/study_store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hypertune::storage {

struct SqliteOptions {
  // synchronous=FULL instead of NORMAL: also survives power loss, slower
  // commits. Default false.
  bool durable_full = false;
  // How long a call waits for a lock held by another connection. Default 5 s.
  int busy_timeout_ms = 5000;
};

class SqliteStore : public StudyStore {
 public:
  // The schema version this build writes; Open migrates older files to it.
  static constexpr int kSchemaVersion = 1;

  // Opens (creating if absent) the database at `path` and migrates its
  // schema. FAILED_PRECONDITION if the file is not a SQLite database or has
  // a schema newer than kSchemaVersion; other failures name the step and
  // SQLite's message.
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(
      const std::string& path, const SqliteOptions& options = {});

  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;
  ~SqliteStore() override;

  absl::Status CreateStudy(const v1::Study& study) override;
  absl::StatusOr<v1::Study> GetStudy(std::string_view name) override;
  absl::StatusOr<std::vector<v1::Study>> ListStudies() override;
  absl::Status UpdateStudy(const v1::Study& study) override;
  absl::Status DeleteStudy(std::string_view name) override;
  absl::StatusOr<std::vector<v1::Trial>> CreateTrials(
      std::string_view study_name, std::vector<v1::Trial> trials) override;
  absl::StatusOr<v1::Trial> GetTrial(std::string_view study_name,
                                     int64_t trial_id) override;
  absl::Status UpdateTrial(const v1::Trial& trial) override;
  absl::StatusOr<std::vector<v1::Trial>> ListTrials(
      std::string_view study_name, const TrialQuery& query) override;
  absl::StatusOr<absl::flat_hash_map<v1::Trial::State, int64_t>> CountTrials(
      std::string_view study_name) override;

  // Runs PRAGMA integrity_check; returns its report, "ok" when the file is
  // sound.
  absl::StatusOr<std::string> IntegrityCheck();

 private:
  struct StatementDeleter {
    void operator()(sqlite3_stmt* statement) const;
  };
  using StatementPtr = std::unique_ptr<sqlite3_stmt, StatementDeleter>;
  class Transaction;

  SqliteStore(sqlite3* db, std::string path);

  // Sets the pragmas and migrates the schema; run once by Open.
  absl::Status Initialize(const SqliteOptions& options);
  absl::Status Migrate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Returns the cached statement for `sql`, preparing it on first use.
  // REQUIRES: `sql` is fixed text, never built from values.
  absl::StatusOr<sqlite3_stmt*> Prepared(absl::string_view sql)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Prepares, runs to completion and finalizes one statement without
  // caching it (pragmas, migrations); returns the first row's first column
  // as text ("" without rows). `what` names the step in errors.
  // REQUIRES: `sql` is fixed text.
  absl::StatusOr<std::string> RunOnce(const char* sql, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Returns the row id of the named study, or NOT_FOUND.
  absl::StatusOr<int64_t> StudyId(std::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  const std::string path_;
  // By SQL text. Finalized before db_ is closed.
  absl::flat_hash_map<std::string, StatementPtr> statements_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace hypertune::storage

#endif  // HYPERTUNE_STORAGE_SQLITE_STORE_H_
