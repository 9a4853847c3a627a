// Acquisition functions: what a posterior N(mu, sigma^2) at a point is worth
// to evaluate next, in log space where that matters. All maximized; every
// function returns finite values and derivatives for every finite input,
// including sigma -> 0 (sigma is floored at kMinSigma) and z -> -infinity.
//
// Pure math except the Acquisition implementations, which bind models; they
// are immutable and safe to share between threads.
#ifndef HYPERTUNE_OPTIMIZER_ACQUISITION_H_
#define HYPERTUNE_OPTIMIZER_ACQUISITION_H_

#include <vector>

#include <Eigen/Core>

#include "optimizer/gp.h"

namespace hypertune::optimizer {

// Standardized outputs; below this the posterior is treated as certain.
inline constexpr double kMinSigma = 1e-9;

// The probit link's own scale in the infeasibility classifier's weight
// Phi(mu / sqrt(kappa^2 + var)) (AcquisitionFunction): small, so that where
// the model is sure (labels -1) the weight is ~Phi(-10).
inline constexpr double kFeasibilityKappa = 0.1;

// erfcx(x) = exp(x^2) erfc(x) for x >= 0, accurate where erfc underflows
// (asymptotic series for x >= 25). REQUIRES: x >= 0
double Erfcx(double x);

// log(1 - exp(a)) for a < 0 without cancellation (Maechler, "Accurately
// computing log(1 - exp(-|a|))", 2012): log(-expm1(a)) for a > -ln 2,
// log1p(-exp(a)) below.
double Log1mExp(double a);

// log Phi(z) for the standard normal CDF, with d/dz = phi(z) / Phi(z);
// uses erfcx below z = -5 so it stays finite (about -z^2/2) far out.
double LogNormalCdf(double z, double* dlog_dz);

// log h(z), h(z) = phi(z) + z Phi(z): expected improvement of a standard
// normal over z' = -z (Ament et al., "Unexpected improvements to expected
// improvement for Bayesian optimization", NeurIPS 2023, eq. 9):
//   z > -1:        log(phi(z) + z Phi(z))
//   -25 < z <= -1: log phi(z) + log1mexp(log(|z| sqrt(pi/2) erfcx(-z/sqrt2)))
//   z <= -25:      log phi(z) + log(1/z^2 - 3/z^4 + 15/z^6 - 105/z^8 + ...)
// (the last is the asymptotic expansion of h/phi, free of the cancellation
// in 1 - |z| Phi/phi; it tends to -z^2/2 - 2 ln|z|). Writes
// d log h / dz = Phi(z) / h(z) to *dlogh_dz.
double LogH(double z, double* dlogh_dz);

// The infeasibility classifier's log weight at x (AcquisitionFunction),
// log Phi(mu_f / sqrt(kappa^2 + var_f)); adds its gradient with respect to
// x to *grad if not null.
double LogFeasibilityWeight(const GaussianProcess& classifier,
                            const Eigen::VectorXd& x, Eigen::VectorXd* grad);
// The same at each row of xs.
Eigen::VectorXd LogFeasibilityWeights(const GaussianProcess& classifier,
                                      const Eigen::MatrixXd& xs);

enum class AcquisitionKind {
  kLogEi,  // log expected improvement (default)
  kUcb,    // upper confidence bound mu + beta sigma
  kLogPi,  // log probability of improvement
};

struct AcquisitionValue {
  double value;
  double d_mean;   // d value / d mu
  double d_sigma;  // d value / d sigma
};

// The acquisition at N(mean, sigma^2) against the incumbent `best`:
//   LogEI = log h((mu - best) / sigma) + log sigma
//   UCB   = mu + beta sigma
//   LogPI = log Phi((mu - best) / sigma)
// sigma below kMinSigma counts as kMinSigma.
AcquisitionValue Acquire(AcquisitionKind kind, double mean, double sigma,
                         double best, double ucb_beta);

// What the acquisition maximizer (acquisition_optimizer.h) maximizes: a
// function of a point in the model's coordinates, larger is better.
class Acquisition {
 public:
  virtual ~Acquisition() = default;
  // The value at x, its gradient with respect to x in *grad if not null.
  virtual double Evaluate(const Eigen::VectorXd& x,
                          Eigen::VectorXd* grad) const = 0;
  // Values at each row of xs.
  virtual Eigen::VectorXd EvaluateBatch(const Eigen::MatrixXd& xs) const = 0;
};

// The acquisition over a GP's posterior, optionally weighted by a
// feasibility model: value(x) = acq(x) + log P(feasible | x) with
//   P(feasible | x) = Phi(mu_f(x) / sqrt(kappa^2 + var_f(x))),
// the probit approximation over a GP regressing +1 (feasible) / -1
// (infeasible) labels (cf. Gardner et al., "Bayesian optimization with
// inequality constraints", ICML 2014): ~1/2 where nothing is known, ~0 near
// infeasible trials. For UCB the log weight is added as is.
class AcquisitionFunction final : public Acquisition {
 public:
  // The models must outlive this object; feasibility may be null.
  AcquisitionFunction(const GaussianProcess* model,
                      const GaussianProcess* feasibility, AcquisitionKind kind,
                      double best, double ucb_beta);

  double Evaluate(const Eigen::VectorXd& x,
                  Eigen::VectorXd* grad) const override;
  Eigen::VectorXd EvaluateBatch(const Eigen::MatrixXd& xs) const override;

 private:
  const GaussianProcess* model_;
  const GaussianProcess* feasibility_;
  AcquisitionKind kind_;
  double best_;
  double ucb_beta_;
};

// One acquisition averaged over models of the same data under different
// hyperparameters (posterior draws, hyperparameter_sampling.h): the
// integrated acquisition of Snoek et al. (NeurIPS 2012). LogEI and LogPI are
// averaged as what they are the log of (log mean exp), UCB as it is.
class IntegratedAcquisition final : public Acquisition {
 public:
  // The models must outlive this object; feasibility may be null.
  // REQUIRES: !models.empty()
  IntegratedAcquisition(const std::vector<GaussianProcess>& models,
                        const GaussianProcess* feasibility,
                        AcquisitionKind kind, double best, double ucb_beta);
  // Temporaries would not outlive it.
  IntegratedAcquisition(std::vector<GaussianProcess>&& models,
                        const GaussianProcess* feasibility,
                        AcquisitionKind kind, double best,
                        double ucb_beta) = delete;

  double Evaluate(const Eigen::VectorXd& x,
                  Eigen::VectorXd* grad) const override;
  Eigen::VectorXd EvaluateBatch(const Eigen::MatrixXd& xs) const override;

 private:
  std::vector<AcquisitionFunction> parts_;
  bool log_scale_;
};

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_ACQUISITION_H_
