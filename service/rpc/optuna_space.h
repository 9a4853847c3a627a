// The one mapping of an Optuna study's search space to hypertune's
// (InferOptunaSpace): `hypertune import-optuna` and the Python Optuna
// bridge both send their Optuna trials here, so that one study gets one
// space whichever path it takes.
//
// The mapping (docs/optuna-bridge.md and the README's "Import from Optuna"):
//   - distributions: Float(low, high) -> DOUBLE (LOG when log); Float with a
//     step -> DISCRETE of its values; Int -> INTEGER (LOG when log), with a
//     step > 1 -> DISCRETE; Categorical -> DISCRETE when every choice is a
//     number, else CATEGORICAL of the choices' Python str() forms; the
//     older Uniform, LogUniform, DiscreteUniform, IntUniform and
//     IntLogUniform likewise. A parameter whose distribution differs
//     between trials gets their union (of the steps' values, too). A range
//     of one value becomes a one-value DISCRETE. A step over more than
//     kMaxValuesPerParameter values, or a log scale or a step in only some
//     trials, is dropped, and the notes say so. Names are made identifiers
//     ("my param" -> "my_param").
//   - a define-by-run space becomes conditional parameters: a parameter
//     that some trials lack (FAIL and WAITING ones aside) gets as parent the
//     CATEGORICAL, DISCRETE or INTEGER parameter whose values tell when it
//     is present, active under those values. Where no parameter tells (with
//     at most one in ten of its trials disagreeing), it is always active if
//     most trials hold it, else left out of the space. A trial that does
//     not hold exactly its active parameters is not kept, unless it FAILed
//     (it may have failed before choosing them all).
//   - the order of a trial's parameters, and of the trials, does not matter
//     (Optuna's storage returns parameters by name, not in the order the
//     objective asked for them): parameters are ranked by how many trials
//     hold them (a parent before its children), then by the lowest trial
//     number holding them, then by name; the space lists them so.
//
// Thread safety: a pure function.
#ifndef HYPERTUNE_SERVICE_RPC_OPTUNA_SPACE_H_
#define HYPERTUNE_SERVICE_RPC_OPTUNA_SPACE_H_

#include "absl/status/statusor.h"
#include "hypertune/v1/hypertune.pb.h"

namespace hypertune::service {

// The space of `request`'s trials and how each fits it. INVALID_ARGUMENT
// when a distribution is not Optuna's JSON, a parameter's distributions
// differ in kind between trials, two categorical choices read alike, or no
// trial has parameters.
absl::StatusOr<v1::InferOptunaSpaceResponse> InferOptunaSpace(
    const v1::InferOptunaSpaceRequest& request);

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_RPC_OPTUNA_SPACE_H_
