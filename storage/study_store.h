// StudyStore: where studies and their trials live.
//
// An abstract interface with a SQLite implementation (the embedded default),
// a PostgreSQL one (several servers, one leading) and an in-memory one for
// tests; all pass the same typed test suite.
// OpenStore (open_store.h) opens the one StoreOptions name. It stores the
// API's own messages and knows nothing of gRPC: errors are absl::Status
// with NOT_FOUND / ALREADY_EXISTS / INVALID_ARGUMENT / ABORTED / DATA_LOSS /
// INTERNAL, converted to gRPC codes by the service alone.
//
// Thread safety: every method may be called from any thread. Each call is
// atomic; callers that read, decide and write (the service) hold their own
// per-study lock around the sequence.
#ifndef HYPERTUNE_STORAGE_STUDY_STORE_H_
#define HYPERTUNE_STORAGE_STUDY_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::storage {

namespace v1 = ::hypertune::v1;

// Which trials ListTrials returns, in increasing id order.
struct TrialQuery {
  // Only these states; empty means all.
  std::vector<v1::Trial::State> states;
  // Only trials held by this client; empty means any.
  std::string client_id;
  // Only ids greater than this (keyset pagination).
  int64_t after_id = 0;
  // At most this many; 0 means no limit.
  int limit = 0;
};

// A trial's state and lease epoch as a caller read them. A conditional
// write applies only while the stored trial still has both, so that the
// database, not the caller's locks alone, decides who owns a trial.
struct TrialVersion {
  v1::Trial::State state = v1::Trial::STATE_UNSPECIFIED;
  int64_t lease_epoch = 0;

  static TrialVersion Of(const v1::Trial& trial) {
    return {trial.state(), trial.lease_epoch()};
  }
};

// A trial as of its latest change. Every change to a study's trials gets
// the next number of that study's change sequence (WatchTrials resumes from
// one), so a trial appears once, at its newest sequence.
struct TrialChange {
  int64_t sequence = 0;
  v1::Trial trial;
};

// A study and one of its trials, read together.
struct StudyWithTrial {
  v1::Study study;
  // NOT_FOUND if the study has no such trial.
  absl::StatusOr<v1::Trial> trial;
};

// A trial without its measurements, with what a new report needs of them:
// reading it costs the same however long the trial's curve is.
struct TrialHead {
  // The trial with `measurements` empty.
  v1::Trial trial;
  // How many measurements the trial holds, and the bytes they take in its
  // serialized form (the whole trial's size is trial.ByteSizeLong() plus
  // this).
  int64_t measurements = 0;
  int64_t measurement_bytes = 0;
  // The latest measurement; none when the trial has none.
  std::optional<v1::Measurement> latest;
};

// A study with its trial counts and some of its trials, read together.
struct StudyOverview {
  v1::Study study;
  // Trials by state (absent states: none).
  absl::flat_hash_map<v1::Trial::State, int64_t> counts;
  // The trials in the states asked for, by increasing id.
  std::vector<v1::Trial> trials;
};

class StudyStore {
 public:
  virtual ~StudyStore() = default;

  // Stores `study` as given (the service fills state and times).
  // ALREADY_EXISTS if a study of that name exists.
  virtual absl::Status CreateStudy(const v1::Study& study) = 0;

  // NOT_FOUND if absent. trial_counts is left empty: see CountTrials.
  virtual absl::StatusOr<v1::Study> GetStudy(std::string_view name) = 0;

  // All studies, by name.
  virtual absl::StatusOr<std::vector<v1::Study>> ListStudies() = 0;

  // Replaces the stored study of the same name. NOT_FOUND if absent.
  virtual absl::Status UpdateStudy(const v1::Study& study) = 0;

  // Applies `modify` to the stored study and stores the result, as one
  // atomic step: concurrent calls on a study never lose each other's
  // changes (running totals such as device_seconds). `modify` must not
  // change the name. NOT_FOUND if absent.
  virtual absl::Status ModifyStudy(
      std::string_view name, absl::FunctionRef<void(v1::Study&)> modify) = 0;

  // Removes the study and all its trials. NOT_FOUND if absent.
  virtual absl::Status DeleteStudy(std::string_view name) = 0;

  // Appends `trials` to the study in one transaction, giving them the next
  // dense ids (the first trial of a study is 1) and study_name; returns them
  // as stored. NOT_FOUND if the study is absent.
  virtual absl::StatusOr<std::vector<v1::Trial>> CreateTrials(
      std::string_view study_name, std::vector<v1::Trial> trials) = 0;

  // NOT_FOUND if the study or trial is absent.
  virtual absl::StatusOr<v1::Trial> GetTrial(std::string_view study_name,
                                             int64_t trial_id) = 0;

  // The study and its trial, for callers that check the study before they
  // look at the trial (a store may read both in one round trip). NOT_FOUND
  // if the study is absent; a missing trial is NOT_FOUND in `trial`.
  virtual absl::StatusOr<StudyWithTrial> GetStudyWithTrial(
      std::string_view study_name, int64_t trial_id) {
    absl::StatusOr<v1::Study> study = GetStudy(study_name);
    if (!study.ok()) return study.status();
    return StudyWithTrial{*std::move(study), GetTrial(study_name, trial_id)};
  }

  // The study, its trial counts and its trials in `states` (which must not
  // be empty), for callers that plan on all three (a store may read them in
  // one round trip). NOT_FOUND if the study is absent.
  virtual absl::StatusOr<StudyOverview> GetStudyOverview(
      std::string_view name, const std::vector<v1::Trial::State>& states) {
    if (states.empty()) {
      return absl::InvalidArgumentError(
          "states: name at least one trial state");
    }
    StudyOverview overview;
    absl::StatusOr<v1::Study> study = GetStudy(name);
    if (!study.ok()) return study.status();
    overview.study = *std::move(study);
    auto counts = CountTrials(name);
    if (!counts.ok()) return counts.status();
    overview.counts = *std::move(counts);
    bool any = false;
    for (v1::Trial::State state : states) {
      auto count = overview.counts.find(state);
      any |= count != overview.counts.end() && count->second > 0;
    }
    if (!any) return overview;
    TrialQuery query;
    query.states = states;
    absl::StatusOr<std::vector<v1::Trial>> trials = ListTrials(name, query);
    if (!trials.ok()) return trials.status();
    overview.trials = *std::move(trials);
    return overview;
  }

  // Replaces the stored trial (matched by study_name and id) and records the
  // change in the study's change sequence. NOT_FOUND if absent.
  virtual absl::Status UpdateTrial(const v1::Trial& trial) = 0;

  // UpdateTrial if the stored trial's state and lease epoch are still
  // `read`: ABORTED naming the trial and what it is now otherwise (another
  // writer changed it since the caller read it), NOT_FOUND if absent.
  virtual absl::Status UpdateTrialIf(const v1::Trial& trial,
                                     const TrialVersion& read) = 0;

  // The trial without its measurements (TrialHead). NOT_FOUND if the study
  // or trial is absent. The default reads the whole trial; a store that
  // keeps measurements apart reads only the head and the latest one.
  virtual absl::StatusOr<TrialHead> GetTrialHead(std::string_view study_name,
                                                 int64_t trial_id);

  // Appends `measurement` to the stored trial's measurements and stores the
  // rest of `head` (a trial as GetTrialHead returns it: its own
  // measurements are ignored), if the stored trial's state and lease epoch
  // are still `read` (ABORTED otherwise, NOT_FOUND if absent); records the
  // change. The default rewrites the whole trial; a store that keeps
  // measurements apart writes the head and one measurement, whatever the
  // curve's length. INVALID_ARGUMENT for a message that would not read back;
  // FAILED_PRECONDITION for a finished trial (read or written as COMPLETED,
  // STOPPED, FAILED or INFEASIBLE: it takes no reports).
  virtual absl::Status AppendMeasurement(const v1::Trial& head,
                                         const v1::Measurement& measurement,
                                         const TrialVersion& read);

  // Stores `trial` without recording a change, for lease renewals, which
  // watchers of the study need not see: only if the stored trial still has
  // `trial`'s state and lease epoch (a renewal changes neither), ABORTED
  // otherwise, NOT_FOUND if absent.
  virtual absl::Status RenewTrialLease(const v1::Trial& trial) = 0;

  // The study's trials changed after `after_sequence`, by increasing
  // sequence; at most `limit` (0 means no limit). NOT_FOUND if the study is
  // absent.
  virtual absl::StatusOr<std::vector<TrialChange>> ListTrialChanges(
      std::string_view study_name, int64_t after_sequence, int limit) = 0;

  // Trials matching `query`, by increasing id. NOT_FOUND if the study is
  // absent.
  virtual absl::StatusOr<std::vector<v1::Trial>> ListTrials(
      std::string_view study_name, const TrialQuery& query) = 0;

  // The number of trials in each state (absent states: none).
  // NOT_FOUND if the study is absent.
  virtual absl::StatusOr<absl::flat_hash_map<v1::Trial::State, int64_t>>
  CountTrials(std::string_view study_name) = 0;

  // Every trial of every study whose state is one of `states` (empty: all
  // states, as in TrialQuery), ordered by study name, then id. Cheap when
  // few trials match: the lease sweeper calls it for ACTIVE trials.
  virtual absl::StatusOr<std::vector<v1::Trial>> ListTrialsInStates(
      const std::vector<v1::Trial::State>& states) = 0;

  // Checks that what is stored is sound: OK, or DATA_LOSS saying what is
  // damaged. May read everything; meant for start-up checks and tests.
  virtual absl::Status CheckIntegrity() = 0;

  // Writes a consistent copy of everything stored, as of the moment of the
  // call, to a new database file at `destination_path` (replacing a file
  // there only once the copy is complete), while other calls go on.
  // FAILED_PRECONDITION where the store keeps nothing in a file (the
  // memory store); INVALID_ARGUMENT for a destination that cannot be
  // written to (the live database itself); other failures name the step.
  virtual absl::Status Backup(const std::string& destination_path) = 0;
};

}  // namespace hypertune::storage

#endif  // HYPERTUNE_STORAGE_STUDY_STORE_H_
