// Maximizes an acquisition function over a mixed domain (numeric
// coordinates in a box, categorical ones as category indices), the way
// Ax/BoTorch and Optuna's GPSampler do: score ~1k scrambled-Sobol points
// plus perturbations of the best observed points, polish the best few by
// L-BFGS-B with analytic gradients on the numeric coordinates, then improve
// categorical coordinates by enumeration (within a budget of evaluations).
//
// Work, in acquisition evaluations: raw_samples + perturbations in one
// batch, then per polish start at most ~2 polish_iterations with gradient
// (the line search's) and max_category_evaluations + 2 without.
// Pure function of its inputs; thread-compatible.
#ifndef HYPERTUNE_OPTIMIZER_ACQUISITION_OPTIMIZER_H_
#define HYPERTUNE_OPTIMIZER_ACQUISITION_OPTIMIZER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include <Eigen/Core>

#include "optimizer/acquisition.h"

namespace hypertune::optimizer {

struct AcquisitionDomain {
  // Per dimension: 0 for a numeric coordinate, else the number of
  // categories (the coordinate is then an index 0..k-1).
  std::vector<int> categories;
  // The box for numeric coordinates (unit cube or a trust region); ignored
  // on categorical dimensions.
  Eigen::VectorXd lower, upper;
  // Optional: moves a point onto the nearest point the search space can
  // represent (e.g. the centre of an integer's cell).
  std::function<void(Eigen::VectorXd&)> snap;
};

struct AcquisitionOptimizerOptions {
  // Scrambled-Sobol candidates (default 1024).
  int raw_samples = 1024;
  // Perturbations of the anchors, in all (default 256).
  int perturbations = 256;
  // Best candidates polished by L-BFGS-B (default 5).
  int polish_starts = 5;
  // Of the polish starts, how many are the best Sobol candidates rather than
  // the best candidates overall (which cluster near the incumbent), so that
  // other basins get polished too (default 0).
  int global_starts = 0;
  // Iterations per polish (default 40).
  int polish_iterations = 40;
  // Other categories that the coordinate ascent after each polish tries, in
  // all over the categorical coordinates (default 256). Where the
  // categories fit, every one is tried; otherwise coordinates with few get
  // all of theirs and the rest share what is left evenly, each trying a
  // random subset (the Sobol candidates and perturbations have already
  // sampled them all). So one start costs at most this many evaluations
  // plus two, whatever the number of categories: a 1,000-category root of
  // a conditional space cost 1,000 per start, each under 16 draws.
  int max_category_evaluations = 256;
  // Points returned, best first (default 16).
  int max_results = 16;
  // Whether the points returned are pairwise distinct (default false).
  // Clamping to the domain's faces maps many candidates onto one point;
  // without this the results can be copies of one already-evaluated point.
  bool distinct_results = false;
};

struct ScoredPoint {
  Eigen::VectorXd x;
  double value;
};

// Returns up to options.max_results points of the domain sorted by
// decreasing acquisition (the first is the best found). `anchors` (rows,
// best first; may be empty) seed the perturbation candidates, perturbed by
// N(0, scale_j^2) on numeric dimension j (scale: perturbation_scale).
// REQUIRES: domain sizes agree; perturbation_scale.size() == dimension.
std::vector<ScoredPoint> MaximizeAcquisition(
    const Acquisition& acquisition, const AcquisitionDomain& domain,
    const Eigen::MatrixXd& anchors, const Eigen::VectorXd& perturbation_scale,
    uint64_t seed, const AcquisitionOptimizerOptions& options = {});

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_ACQUISITION_OPTIMIZER_H_
