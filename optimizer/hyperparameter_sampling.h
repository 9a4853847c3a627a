// Draws of a GP's hyperparameters from their posterior, for acquisitions
// that average over them instead of trusting one MAP fit (Snoek, Larochelle
// and Adams, "Practical Bayesian optimization of machine learning
// algorithms", NeurIPS 2012: the integrated acquisition). With few trials
// the likelihood is flat and multimodal in the lengthscales, and a single
// fit flips between modes from one trial to the next.
// Pure function of its inputs; thread-safe.
#ifndef HYPERTUNE_OPTIMIZER_HYPERPARAMETER_SAMPLING_H_
#define HYPERTUNE_OPTIMIZER_HYPERPARAMETER_SAMPLING_H_

#include <vector>

#include <Eigen/Core>

#include "optimizer/gp.h"
#include "optimizer/kernel.h"
#include "optimizer/splitmix.h"

namespace hypertune::optimizer {

struct HyperparameterSamplingOptions {
  // Draws returned (default 16).
  int samples = 16;
  // Steps discarded before the first draw (default 8); after them every
  // thin-th step is a draw (default 2).
  int burn_in = 8;
  int thin = 2;
};

// Draws from p(params | x, y) proportional to p(y | x, params) p(params),
// by elliptical slice sampling (Murray, Adams and MacKay, AISTATS 2010):
// GpPrior is Gaussian in the flat (log) parameters, so each step moves on
// an ellipse through the current point and a prior draw, shrinking the
// bracket until the likelihood clears a random threshold. The chain starts
// at `start` (a MAP fit) and stays inside GpParamBounds(min_noise).
// REQUIRES: y.size() == x.rows() >= 1; start within the bounds.
std::vector<GpParams> SampleGpParams(
    const Kernel& kernel, const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
    const GpParams& start, const GpPrior& prior, double min_noise,
    SplitMix64& rng, const HyperparameterSamplingOptions& options = {});

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_HYPERPARAMETER_SAMPLING_H_
