// Importing into hypertuned: whole exported studies (ImportStudy, `hypertune
// import`) and warm-start results (ImportTrials, `hypertune trials import`,
// `hypertune study create --warm-start-from`). The StudyService methods are
// defined in study_import.cc; this header holds the pure pieces they use.
//
// An imported study keeps what its export says: trial ids, states,
// measurements, reasons, costs, times, lease epochs and retry counts, its
// own state and creation time. Two things cannot carry over to another
// server, because no worker of that server holds them: an ACTIVE trial is
// queued again (REQUESTED, no lease; its lease epoch kept, so the next grant
// gets a new one), and a STOPPING trial is STOPPED (its last measurement
// final, ended now). REQUESTED and PAUSED trials stay as they are.
//
// A study without a state is imported ACTIVE.
//
// Warm-start trials (Trial.warm_start) are COMPLETED results brought from
// elsewhere: the optimizer learns from them, max_trials does not count them.
//
// Thread safety: pure functions.
#ifndef HYPERTUNE_SERVICE_RPC_STUDY_IMPORT_H_
#define HYPERTUNE_SERVICE_RPC_STUDY_IMPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"
#include "optimizer/search_space.h"

namespace hypertune::service {

// The most an ImportStudy stream may carry, serialized: 1 GiB.
inline constexpr size_t kMaxImportBytes = size_t{1} << 30;

// A study and its trials as an ImportStudy stream delivers them. The
// trials are kept serialized (protobuf's wire form), as they arrive: parsed,
// a trial takes several times its bytes, so an import is parsed a chunk at
// a time when it is checked and stored.
struct ImportedStudy {
  v1::Study study;
  std::vector<std::string> trials;
};

// Collects an ImportStudy stream: `next` fills in the next message and
// returns false at the end. INVALID_ARGUMENT if the first message lacks the
// study, a later one carries another, or the stream passes kMaxImportBytes.
absl::StatusOr<ImportedStudy> ReadImportStream(
    absl::FunctionRef<bool(v1::ImportStudyRequest&)> next);

// Checks trial `index` (0-based) of an imported study named `study_name`
// and turns it into the trial to store (see the header comment): its id
// must be index + 1, its parameters fit `space` (stored canonical; a
// FAILED trial's may be incomplete and are then kept as given), a
// COMPLETED one's final measurement has the objective. `now` ends STOPPING
// trials. INVALID_ARGUMENT naming `trials[index].<field>` otherwise.
absl::Status PrepareImportedTrial(const v1::StudySpec& spec,
                                  const optimizer::SearchSpace& space,
                                  const std::string& study_name, int index,
                                  int64_t now, v1::Trial& trial);

// The warm-start trial that a known result `given` (parameters and final
// measurement) becomes in a study of `spec`: COMPLETED, warm_start, created,
// started and ended `now`. INVALID_ARGUMENT naming `field` if it is not a
// COMPLETED (or unset) trial whose parameters fit `space` and whose final
// measurement has the objective.
absl::StatusOr<v1::Trial> WarmStartTrial(const std::string& field,
                                         const v1::StudySpec& spec,
                                         const optimizer::SearchSpace& space,
                                         const v1::Trial& given, int64_t now);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_STUDY_IMPORT_H_
