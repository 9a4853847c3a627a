// Model-based multi-fidelity (as BOHB, Falkner et al., ICML 2018): a study
// whose trials are paused and promoted at rungs (ASHA, Hyperband) has
// results of several fidelities, and a model fitted on all of them would
// compare an epoch-1 loss with an epoch-81 one. So the model sees one
// fidelity: the highest rung that enough trials reached. Pure functions;
// thread-safe.
#ifndef HYPERTUNE_OPTIMIZER_FIDELITY_H_
#define HYPERTUNE_OPTIMIZER_FIDELITY_H_

#include "optimizer/suggester.h"

namespace hypertune::optimizer {

// The fewest trials a rung needs to be the one modelled: d + 1, at least 4,
// the fewest that fix a linear trend with a point to spare.
int MinTrialsAtFidelity(int dim);

// `request` as a model-based algorithm fits it. Without
// request.fidelity: the request itself. With it: one objective, the
// primary one at the highest rung that MinTrialsAtFidelity trials reached
// (HighestRungObservations): each trial with a value there is completed
// with that value (turned into maximization) whatever its state, the
// other completed trials are left out (another fidelity), pending and
// infeasible ones stay; without such a rung, no trial is completed.
// REQUIRES: ValidateRequest(request).ok()
SuggestRequest AtOneFidelity(const SuggestRequest& request);

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_FIDELITY_H_
