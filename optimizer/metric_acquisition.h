// Acquisition functions over several models: the log expected hypervolume
// improvement of several objectives, and constraints that weight an
// acquisition by the probability that they hold. GP_BANDIT combines them
// for multi-objective and constrained studies (gp_bandit_suggester.h).
//
// Immutable; safe to share between threads. The models passed in must
// outlive these objects.
#ifndef HYPERTUNE_OPTIMIZER_METRIC_ACQUISITION_H_
#define HYPERTUNE_OPTIMIZER_METRIC_ACQUISITION_H_

#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "optimizer/acquisition.h"
#include "optimizer/gp.h"

namespace hypertune::optimizer {

// log P(lower <= F <= upper) for F ~ N(mean, sigma^2), with its derivatives
// (d_mean, d_sigma as in AcquisitionValue): with z_u = (upper - mean) /
// sigma and z_l = (lower - mean) / sigma,
//   P = Phi(z_u) - Phi(z_l),
//   dP/dmean = (phi(z_l) - phi(z_u)) / sigma,
//   dP/dsigma = (z_l phi(z_l) - z_u phi(z_u)) / sigma,
// computed in the tail where both CDFs are small (Phi(-z_l) - Phi(-z_u) when
// z_l > 0) so that neither cancellation nor underflow loses it. Either
// bound may be infinite; sigma below kMinSigma counts as kMinSigma.
// REQUIRES: lower <= upper
AcquisitionValue LogProbabilityWithin(double mean, double sigma, double lower,
                                      double upper);

// log(log(1 + exp(u))), finite for every finite u (it tends to u as
// u -> -infinity and to log(u) as u -> +infinity).
double LogSoftplus(double u);

// A constraint's model: lower <= f(x) <= upper in the GP's target units.
struct ConstraintModel {
  const GaussianProcess* gp;
  double lower, upper;
};

// The probability that every constraint holds, as a weight on another
// acquisition (Gardner et al., "Bayesian optimization with inequality
// constraints", ICML 2014; Gelbart, Snoek and Adams, "Bayesian optimization
// with unknown constraints", UAI 2014), with independent GPs per
// constraint, in log space:
//   value(x) = objective(x) + sum_j log P(l_j <= c_j(x) <= u_j)
//              + log P(feasible | x) (the infeasibility classifier, as in
//                AcquisitionFunction).
// With no objective (null: no feasible point is known yet) it maximizes the
// probability of feasibility alone, seeking a first feasible point.
class ConstrainedAcquisition final : public Acquisition {
 public:
  // objective and classifier may be null.
  ConstrainedAcquisition(const Acquisition* objective,
                         std::vector<ConstraintModel> constraints,
                         const GaussianProcess* classifier);

  double Evaluate(const Eigen::VectorXd& x,
                  Eigen::VectorXd* grad) const override;
  Eigen::VectorXd EvaluateBatch(const Eigen::MatrixXd& xs) const override;

 private:
  const Acquisition* objective_;
  std::vector<ConstraintModel> constraints_;
  const GaussianProcess* classifier_;
};

struct HypervolumeImprovementOptions {
  // Paired draws (direction, posterior sample) of the estimate (default
  // 256).
  int samples = 256;
  // Softplus temperature, in units of the scalarization (default 1e-3).
  double temperature = 1e-3;
};

// The expected hypervolume improvement (Emmerich, Giannakoglou and
// Naujoks, "Single- and multiobjective evolutionary optimization assisted
// by Gaussian random field metamodels", IEEE TEC 10(4), 2006) of m
// independent GP objectives over a front, estimated through random
// hypervolume scalarizations (Golovin and Zhang, ICML 2020; pareto.h):
//   EHVI(x) = c_m E_{lambda, eps}[(s_lambda(mu(x) + sigma(x) eps) -
//   M_lambda)_+], M_lambda = max_{y in front} s_lambda(y),
// with lambda uniform on the positive unit sphere and eps ~ N(0, I_m),
// both quasi-random and fixed per object (common random numbers, so the
// estimate is a deterministic, almost everywhere differentiable function
// of x). In log space, as LogEI (Ament et al., NeurIPS 2023; their qLogEHVI
// smooths the same way): (.)_+ becomes softplus_tau(z) = tau log(1 + e^(z /
// tau)) and s_lambda is extended below zero by sign(t) |t|^m, so that the
// value and its gradient stay informative where every draw is dominated:
//   value(x) = log(1/K sum_k softplus_tau(s_k(x) - M_k))   (c_m dropped).
class LogHypervolumeImprovement final : public Acquisition {
 public:
  // REQUIRES: objectives.size() == front.cols() == reference.size() >= 2;
  // front.rows() >= 1
  LogHypervolumeImprovement(std::vector<const GaussianProcess*> objectives,
                            const Eigen::MatrixXd& front,
                            const Eigen::VectorXd& reference, uint64_t seed,
                            const HypervolumeImprovementOptions& options = {});

  double Evaluate(const Eigen::VectorXd& x,
                  Eigen::VectorXd* grad) const override;
  Eigen::VectorXd EvaluateBatch(const Eigen::MatrixXd& xs) const override;

  // The value at posterior means and standard deviations (one per
  // objective), with derivatives with respect to them if not null.
  double FromMoments(const Eigen::VectorXd& mean, const Eigen::VectorXd& sigma,
                     Eigen::VectorXd* d_mean, Eigen::VectorXd* d_sigma) const;

 private:
  std::vector<const GaussianProcess*> objectives_;
  Eigen::VectorXd reference_;
  Eigen::MatrixXd directions_;  // K x m, rows on the positive unit sphere.
  Eigen::MatrixXd normals_;     // K x m standard normal draws.
  Eigen::VectorXd front_best_;  // M_k per direction.
  double temperature_;
};

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_METRIC_ACQUISITION_H_
