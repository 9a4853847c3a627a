// Reading an Optuna RDB storage file (its SQLite schema, Optuna 2.x and 3.x)
// into hypertune studies, with the sqlite3 library: no Python needed.
//
// The mapping (README, "Import from Optuna"):
//   - each Optuna study becomes a study of the same name (characters a study
//     name may not hold become '-'); its directions become the metrics
//     "value" (one objective) or "values_0", "values_1", ... (several; until
//     metrics carry roles, the first is the objective and the others are
//     recorded), MINIMIZE or MAXIMIZE as Optuna had them;
//   - the search space (distributions, names made identifiers, a
//     define-by-run space made conditional parameters) and which trials fit
//     it are the server's InferOptunaSpace (service/rpc/optuna_space.h, the one
//     mapping, which the Python Optuna bridge uses too); its notes are
//     passed on;
//   - trials keep their order (hypertune id = rank by Optuna number, from
//     1) and their times; client_id says "optuna trial N". COMPLETE ->
//     COMPLETED with the values as final metrics; PRUNED -> STOPPED (final:
//     its value, else its last intermediate value); FAIL -> FAILED with
//     Optuna's fail_reason; RUNNING and WAITING -> REQUESTED (no worker of
//     hypertune holds them: they run again). Intermediate values become
//     measurements at their steps (NaN ones are left out). Another state,
//     or a direction other than MINIMIZE, MAXIMIZE or NOT_SET (MINIMIZE, as
//     Optuna has it), refuses the file; a trial whose parameter value is
//     not a number (text, NULL, NaN, a choice index out of range) is left
//     out, named in the notes;
//   - user attributes, the study's and each trial's, become its attributes
//     (text as is, other values as JSON; a key made a name: "my key" ->
//     "my_key"); numbers and booleans of a trial are also recorded metrics
//     "user_attr.KEY" of its final measurement. Those past the attribute
//     limits (limits.h) are left out and listed in the notes.
//
// Thread safety: no shared state.
#ifndef HYPERTUNE_CLI_OPTUNA_IMPORT_H_
#define HYPERTUNE_CLI_OPTUNA_IMPORT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::cli {

struct OptunaStudy {
  std::string optuna_name;
  v1::Study study;
  // Dense ids from 1, ready for ImportStudy.
  std::vector<v1::Trial> trials;
  // Trials of the file not imported, and what could not be kept.
  int64_t skipped_trials = 0;
  std::vector<std::string> notes;
};

// Infers a study's space from its Optuna trials: the InferOptunaSpace call.
using SpaceInferrer =
    std::function<absl::StatusOr<v1::InferOptunaSpaceResponse>(
        const v1::InferOptunaSpaceRequest&)>;

// The studies of the Optuna SQLite file at `path` (only `study_name` when
// given: NOT_FOUND if absent), each space inferred by `infer`. `now_ms`
// stands for missing times. INVALID_ARGUMENT if the file is not an Optuna
// storage or a distribution cannot be mapped.
absl::StatusOr<std::vector<OptunaStudy>> ReadOptunaFile(
    const std::string& path, const std::optional<std::string>& study_name,
    int64_t now_ms, const SpaceInferrer& infer);

}  // namespace hypertune::cli

#endif  // HYPERTUNE_CLI_OPTUNA_IMPORT_H_
