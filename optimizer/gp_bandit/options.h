// GP_BANDIT's options: one plain struct, one comment and default per field,
// saying what the field does and why it is set as it is
// (gp_bandit_suggester.h describes the method they tune). The measurements
// behind each default are in benchmarks/README.md ("GP_BANDIT: what was
// measured while tuning it"), not here.
#ifndef HYPERTUNE_OPTIMIZER_GP_BANDIT_OPTIONS_H_
#define HYPERTUNE_OPTIMIZER_GP_BANDIT_OPTIONS_H_

#include "optimizer/acquisition.h"
#include "optimizer/acquisition_optimizer.h"
#include "optimizer/metric_acquisition.h"
#include "optimizer/suggester.h"

namespace hypertune::optimizer {

struct GpBanditOptions {
  // The acquisition (default LogEI).
  AcquisitionKind acquisition = AcquisitionKind::kLogEi;
  // UCB's coefficient on standardized outputs (default 1.8, Vizier's).
  double ucb_beta = 1.8;
  // Initial design size; 0 means InitialDesignSize (default 0).
  int initial_trials = 0;
  // Up to integrate_below completed trials (default 50), the acquisition
  // is averaged over this many posterior draws of the hyperparameters
  // instead of taken under the MAP fit alone; 0 disables (default 16). With
  // few trials the MAP fit is often confidently wrong about which
  // dimensions matter, and the average hedges; past integrate_below the
  // posterior is narrow and the draws only cost prediction time. One
  // objective without a transfer prior, and only for picks made with no
  // trial pending: under the pending points' fantasies the draws sent a
  // batch over the whole cube while the sequential run refined.
  int hyperparameter_draws = 16;
  int integrate_below = 50;
  // Floor on the noise variance of the standardized outputs (default 1e-6).
  double min_noise_variance = 1e-6;
  // Prior draws used as fit starts besides the prior's mode (default 3; at
  // most 1 for fits past warm_refit_below trials).
  int fit_restarts = 3;
  // L-BFGS-B iterations per start of a full fit (default 60).
  int fit_iterations = 60;
  // Iterations of the warm refit between full fits (default 30).
  int warm_fit_iterations = 30;
  // Below this many completed trials the hyperparameters are refitted,
  // warm, at every suggestion (default 100).
  int warm_refit_below = 100;
  // Where the full fits past warm_refit_below trials run (the latency
  // spikes). Empty (the default): on the request path, so that a seed and a
  // history always give the same suggestion. Given: each is handed to the
  // runner, one at a time per metric, and suggestions meanwhile use the
  // latest fitted hyperparameters, the Cholesky factor extended by each new
  // trial; a fresh instance uses the prior's mode until its first fit
  // lands.
  FitRunner background_fits;
  // Full fits use at most this many points, the nearest to the incumbent
  // (default 256): the fit's cost is cubic in them.
  int max_fit_points = 256;
  // Past this many completed trials the GP is local: the nearest
  // max_local_points to the incumbent, searched within their bounding box
  // (TuRBO-like trust region; default 400). Keeps a suggestion's cost flat
  // in the history's size.
  int max_local_points = 400;
  // At each full fit, also fit a first-order additive kernel (kernel.h) and
  // keep whichever has the higher log posterior (default true). Separable
  // objectives need far fewer trials under the additive model. Not past
  // max_local_points trials (its kernel costs d times more).
  bool select_additive = true;
  // After maximizing the acquisition, each coordinate of the pick moves
  // toward the incumbent's value (a double nine tenths of the way, never
  // onto it: gp_bandit/pick.h) if the acquisition (log EI units) loses at
  // most this much in all; 0 disables (default 0.1). Along dimensions the
  // model deems irrelevant the acquisition is flat and its maximizer
  // arbitrary, drawn from the Sobol candidates; the incumbent's value is
  // the best the data supports.
  double incumbent_pull_tolerance = 0.1;
  // Upper bound on the numeric lengthscales (unit-cube units) of the
  // models the single-objective acquisition is taken under, the MAP fit's
  // and the hyperparameter draws'; 0 disables (default 0.3). The fit
  // itself, the perturbation scales and the feasibility model are left as
  // they are. A fit on trials near one optimum judges the dimensions along
  // which that optimum is flat irrelevant (lengthscales of 10 and more) and
  // the rest of the cube known, and LogEI stays there; with the bound the
  // model stays uncertain a short way from the data in every dimension
  // (cf. Berkenkamp et al., "No-regret Bayesian optimization with unknown
  // hyperparameters", JMLR 2019, who shrink lengthscales for the same
  // reason). One objective, no constraints, flat spaces, the product kernel
  // and no transfer prior; costs one more Cholesky factorization per
  // suggestion.
  double max_acquisition_lengthscale = 0.3;
  // With trials pending (asynchronous workers, or a batch), a pick searches
  // only the incumbent +- its fitted lengthscale, at most this much
  // (unit-cube units), along each numeric dimension, whenever the pick made
  // without the pending trials falls in that box; 0 disables (default 0.3;
  // gp_bandit/pending_region.h). The batch then refines where the
  // sequential run would refine, instead of spreading over a lengthscale
  // under the pending points' fantasies, and explores the whole cube where
  // it would explore. One objective, no constraints, flat spaces; costs one
  // more acquisition maximization per suggestion made with trials pending.
  double pending_region_half_width = 0.3;
  // Past this many completed trials, delegate to TPE; 0 never (default 0).
  int tpe_fallback_above = 0;
  AcquisitionOptimizerOptions acquisition_optimizer;
  // The hypervolume-improvement estimate for several objectives.
  HypervolumeImprovementOptions hypervolume;
  // Several objectives: where the hypervolume's reference point lies,
  // from the feasible front's nadir (0) to the feasible trials' nadir (1)
  // (default 0.5). Near the front, the search stays near the front's
  // extent (BoTorch's nadir less a tenth of the front's range never grew
  // ZDT2's front past its first points); at the data's nadir, extreme
  // points with one objective at its best weigh too much (DTLZ2's faces).
  double reference_slack = 0.5;
  // ... and at least this far below the front's nadir, in standardized
  // units (default 0.1).
  double min_reference_margin = 0.1;
};

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_GP_BANDIT_OPTIONS_H_
