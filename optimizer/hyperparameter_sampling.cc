#include "optimizer/hyperparameter_sampling.h"

#include <cassert>
#include <cmath>
#include <limits>
#include <numbers>

namespace hypertune::optimizer {
namespace {

// Shrinkings per step before the step gives up and stays put.
constexpr int kMaxShrinks = 64;

}  // namespace

std::vector<GpParams> SampleGpParams(
    const Kernel& kernel, const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
    const GpParams& start, const GpPrior& prior, double min_noise,
    SplitMix64& rng, const HyperparameterSamplingOptions& options) {
  assert(y.size() == x.rows() && x.rows() >= 1);
  const int nk = kernel.num_params();
  const ParamBounds bounds = GpParamBounds(nk, min_noise);
  // The prior's mean and standard deviation, per flat parameter.
  Eigen::VectorXd mu(nk + 3), sd(nk + 3);
  mu.head(nk).setConstant(prior.lengthscale_loc);
  sd.head(nk).setConstant(prior.lengthscale_scale);
  mu[nk] = prior.signal_loc;
  sd[nk] = prior.signal_scale;
  mu[nk + 1] = prior.noise_loc;
  sd[nk + 1] = prior.noise_scale;
  mu[nk + 2] = 0.0;
  sd[nk + 2] = prior.mean_scale;
  // log p(y | x, params): the posterior less the prior.
  auto log_likelihood = [&](const Eigen::VectorXd& flat) {
    if ((flat.array() < bounds.lower.array()).any() ||
        (flat.array() > bounds.upper.array()).any()) {
      return -std::numeric_limits<double>::infinity();
    }
    return -NegLogPosterior(kernel, x, y, flat, prior, nullptr) -
           prior.LogDensity(flat, nk, nullptr);
  };

  Eigen::VectorXd current = start.Flat();
  double current_ll = log_likelihood(current);
  std::vector<GpParams> draws;
  const int steps = options.burn_in + options.samples * options.thin;
  for (int step = 1; step <= steps; ++step) {
    Eigen::VectorXd nu(nk + 3);
    for (int i = 0; i < nk + 3; ++i) nu[i] = sd[i] * rng.NextNormal();
    const double threshold = current_ll + std::log(1.0 - rng.NextUnit());
    double angle = 2 * std::numbers::pi * rng.NextUnit();
    double low = angle - 2 * std::numbers::pi, high = angle;
    for (int shrink = 0; shrink < kMaxShrinks; ++shrink) {
      const Eigen::VectorXd proposal =
          mu + (current - mu) * std::cos(angle) + nu * std::sin(angle);
      const double ll = log_likelihood(proposal);
      if (ll > threshold) {
        current = proposal;
        current_ll = ll;
        break;
      }
      (angle < 0 ? low : high) = angle;
      angle = low + (high - low) * rng.NextUnit();
    }
    if (step > options.burn_in &&
        (step - options.burn_in) % options.thin == 0) {
      draws.push_back(GpParams::FromFlat(current));
    }
  }
  return draws;
}

}  // namespace hypertune::optimizer
