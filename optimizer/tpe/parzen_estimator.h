// The Parzen estimator of TPE (Bergstra et al., "Algorithms for
// hyper-parameter optimization", NeurIPS 2011): a weighted mixture with one
// component per observation plus a prior component, over a group of
// parameters in the unit-cube coordinates of SearchSpace::Encode
// (categories as their index).
//
// A component is a product over the group's parameters (multivariate TPE,
// Falkner et al., "BOHB", ICML 2018; one parameter per group gives the
// univariate estimator of the 2011 paper):
//  - a continuous parameter: a Gaussian truncated to [0,1];
//  - an integer or discrete parameter: the same Gaussian's mass over the
//    value's cell (the share of [0,1] that decodes to it), so that values
//    are scored as the probabilities of what is actually suggested;
//  - a categorical parameter: a distribution over the categories, the
//    observed one with weight 1 and every category with
//    prior_weight / (n + 1), normalized; the prior component is uniform.
// Bandwidths (Watanabe, "Tree-structured Parzen estimator: understanding its
// algorithm components", arXiv 2304.11127, section 3):
//  - univariate: the larger distance to the neighbouring centres (the prior's
//    centre 0.5 among them, the bounds 0 and 1 at the ends); the outermost
//    centres take their inner neighbour's distance (endpoints not
//    considered);
//  - multivariate: Scott's rule as BOHB, 0.2 n^(-1 / (p + 4)) for n
//    observations and p parameters, the same for every component;
//  - both clipped to [1 / min(100, n + 2), 1] (the "magic clip"); the prior
//    is centred at 0.5 with width 1.
// Weights: the caller's per observation (recency, as default_weights),
// then the prior's, normalized together.
//
// Immutable once built; safe to share between threads.
#ifndef HYPERTUNE_OPTIMIZER_TPE_PARZEN_ESTIMATOR_H_
#define HYPERTUNE_OPTIMIZER_TPE_PARZEN_ESTIMATOR_H_

#include <utility>
#include <vector>

#include "optimizer/search_space.h"
#include "optimizer/splitmix.h"

namespace hypertune::optimizer::tpe {

// How the estimator models one parameter of its group.
struct Dimension {
  // Index into the search space's parameters.
  int parameter = 0;
  // Number of categories for a categorical parameter, 0 otherwise.
  int categories = 0;
};

// The model coordinates of every parameter of a group: Dimension's
// parameter order. Categorical coordinates are category indices.
using GroupPoint = std::vector<double>;

struct ParzenOptions {
  // Weight of the prior component (default 1, Optuna's).
  double prior_weight = 1.0;
  // Scott's-rule bandwidth shared by all components (true) or the
  // univariate neighbour rule (false; meant for one-parameter groups).
  bool multivariate = true;
  // LogPdf weighs each component by its bandwidth as well (the product of
  // its continuous parameters' sigmas, renormalized): Optuna 3.1 evaluates
  // its truncated Gaussians without the 1 / sigma factor, which amounts to
  // this. Wide components (isolated trials, the prior) then count for more
  // against narrow ones in clusters; the candidate maximizing
  // log l - log g moves less greedily into l's tightest cluster. Sample is
  // unchanged. Measured on the public functions: benchmarks/README.md.
  bool bandwidth_weights = false;
};

class ParzenEstimator {
 public:
  // `points`: one GroupPoint per observation; `weights`: one non-negative
  // weight each (not normalized). The space gives the cells of integer and
  // discrete parameters.
  // REQUIRES: points.size() == weights.size(); each point has one value per
  // dimension, categories as integral indices in range, numeric values in
  // [0,1].
  ParzenEstimator(const SearchSpace& space, std::vector<Dimension> dims,
                  const std::vector<GroupPoint>& points,
                  const std::vector<double>& weights,
                  const ParzenOptions& options);

  // A point drawn from the mixture: one component by weight, then each
  // parameter from it. Numeric coordinates are continuous in [0,1] (the
  // caller decodes them to values).
  GroupPoint Sample(SplitMix64& rng) const;

  // log density of `x` (log probability for integer, discrete and
  // categorical parameters: the cell of each numeric coordinate is read);
  // with bandwidth_weights, up to a constant that depends on the estimator
  // alone (so log l - log g ranks candidates alike).
  double LogPdf(const GroupPoint& x) const;

  int components() const { return static_cast<int>(log_weight_.size()); }

 private:
  struct NumericDim {
    std::vector<double> mu, sigma;
    // log of each component's mass on [0,1].
    std::vector<double> log_mass;
    // log of the truncated density's normalizer: sqrt(2 pi) sigma mass.
    std::vector<double> log_norm;
    bool cells = false;  // Integer or discrete: mass over the value's cell.
  };
  struct CategoricalDim {
    // components x categories, row-major: log probabilities.
    std::vector<double> log_p;
    int categories = 0;
  };

  const SearchSpace& space_;
  std::vector<Dimension> dims_;
  std::vector<double> weight_, log_weight_;
  // Per dimension: exactly one of the two is used.
  std::vector<NumericDim> numeric_;
  std::vector<CategoricalDim> categorical_;
};

// The cell [lo, hi] of [0,1] whose points decode to the same value as `u`:
// an integer's rounding cell in the scale's measure, a discrete value's
// equal-width bin; for a double, the point itself.
// REQUIRES: p is not categorical; u in [0,1]
std::pair<double, double> CellOf(const ParameterConfig& p, double u);

// log(Phi(b) - Phi(a)) for the standard normal Phi, accurate in the tails.
// REQUIRES: a <= b
double LogGaussMass(double a, double b);

}  // namespace hypertune::optimizer::tpe

#endif  // HYPERTUNE_OPTIMIZER_TPE_PARZEN_ESTIMATOR_H_
