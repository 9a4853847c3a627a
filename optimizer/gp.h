// A Gaussian-process regression model (Rasmussen and Williams, "Gaussian
// Processes for Machine Learning", 2006, ch. 2 and 5):
//   f ~ GP(m, s2 k(x, x')),  y = f(x) + N(0, noise),
// with a constant mean m, a signal variance s2, a noise variance and a
// kernel k (kernel.h) of unit variance. Parameters, their priors and the
// MAP fit are free functions; GaussianProcess holds one conditioned model
// and extends its Cholesky factor in O(n^2) per added point.
//
// GaussianProcess is a value type (copy = independent model, used for
// fantasies); const methods are safe to call concurrently.
#ifndef HYPERTUNE_OPTIMIZER_GP_H_
#define HYPERTUNE_OPTIMIZER_GP_H_

#include <functional>
#include <memory>
#include <vector>

#include <Eigen/Core>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "optimizer/kernel.h"
#include "optimizer/splitmix.h"

namespace hypertune::optimizer {

struct GpParams {
  Eigen::VectorXd kernel;  // The kernel's log parameters.
  double log_signal_variance = 0.0;
  double log_noise_variance = -4.0;
  double mean = 0.0;

  // [kernel..., log_signal_variance, log_noise_variance, mean].
  Eigen::VectorXd Flat() const;
  static GpParams FromFlat(const Eigen::VectorXd& flat);

  bool operator==(const GpParams& other) const;
};

// Priors for MAP estimation, all on the log parameters except the mean
// (BoTorch's current default; Hvarfner et al., "Vanilla Bayesian
// optimization performs great in high dimensions", ICML 2024):
//   log lengthscale ~ N(sqrt(2) + ln(d) / 2, sqrt(3))   (BoTorch's default)
//   log signal var  ~ N(0, 1)      (outputs are standardized)
//   log noise var   ~ N(-4, 1)     (BoTorch's LogNormal(-4, 1))
//   mean            ~ N(0, 1)
struct GpPrior {
  double lengthscale_loc = 1.41421356237309505;
  double lengthscale_scale = 1.73205080756887729;
  double signal_loc = 0.0, signal_scale = 1.0;
  double noise_loc = -4.0, noise_scale = 1.0;
  double mean_scale = 1.0;

  // The prior for a model on d input dimensions. REQUIRES: d >= 1
  static GpPrior ForDimension(int d);

  // log p(params) up to a constant; adds its gradient (flat layout) to
  // *grad when grad is not null.
  double LogDensity(const Eigen::VectorXd& flat, int num_kernel_params,
                    Eigen::VectorXd* grad) const;
  // The mode of every marginal (lengthscales at exp(loc - scale^2)).
  GpParams Mode(int num_kernel_params) const;
  // A draw from the prior, clipped into ParamBounds.
  GpParams Sample(int num_kernel_params, SplitMix64& rng) const;
};

// Box bounds on the flat parameters for the fit: lengthscales in
// [0.025, 100] (0.025 is BoTorch's floor), signal variance in [1e-3, 1e2],
// noise variance in [min_noise, 1], mean in [-3, 3].
struct ParamBounds {
  Eigen::VectorXd lower, upper;
};
ParamBounds GpParamBounds(int num_kernel_params, double min_noise);

// The negative log posterior -log p(y | x, params) - log p(params), up to a
// constant, with its gradient in the flat layout (when grad is not null):
//   -log p(y|x) = 1/2 r' K^-1 r + 1/2 log|K| + n/2 log(2 pi),  r = y - m,
//   K = s2 C + noise I,
//   d(-log p(y|x)) / d theta = -1/2 tr((a a' - K^-1) dK/d theta),  a = K^-1 r,
//   d(-log p(y|x)) / d m = -sum(a)   (Rasmussen and Williams, eq. 5.9).
// Returns +infinity when K cannot be factored.
// REQUIRES: y.size() == x.rows() >= 1
double NegLogPosterior(const Kernel& kernel, const Eigen::MatrixXd& x,
                       const Eigen::VectorXd& y, const Eigen::VectorXd& flat,
                       const GpPrior& prior, Eigen::VectorXd* grad);

// The MAP parameters: the best of L-BFGS-B runs on NegLogPosterior in the
// box GpParamBounds, one run from each start (at most max_iterations each).
// Once `stop` (if given) returns true, the runs end at their next step and
// the result is meaningless: the caller drops it.
// REQUIRES: !starts.empty(); y.size() == x.rows() >= 1
GpParams FitGpParams(const Kernel& kernel, const Eigen::MatrixXd& x,
                     const Eigen::VectorXd& y,
                     const std::vector<GpParams>& starts, const GpPrior& prior,
                     double min_noise, int max_iterations,
                     const std::function<bool()>& stop = {});

// A mean function beyond the GP's constant mean (Rasmussen and Williams,
// section 2.7): the model is then m(x) + GP(mean, s2 k) and conditions on
// y - m(x). Transfer uses it for an earlier study's prediction.
class MeanFunction {
 public:
  virtual ~MeanFunction() = default;
  // m(x), its gradient with respect to x in *grad if not null.
  virtual double Value(const Eigen::VectorXd& x,
                       Eigen::VectorXd* grad) const = 0;
  // m at each row of xs.
  virtual Eigen::VectorXd Values(const Eigen::MatrixXd& xs) const = 0;
};

class GaussianProcess {
 public:
  // The model conditioned on (x, y). Escalates a diagonal jitter (up to
  // 1e-3 s2) while the Cholesky factorization fails; FAILED_PRECONDITION
  // if it still fails or a parameter is not finite.
  // REQUIRES: y.size() == x.rows()
  static absl::StatusOr<GaussianProcess> Create(const Kernel& kernel,
                                                const GpParams& params,
                                                const Eigen::MatrixXd& x,
                                                const Eigen::VectorXd& y);

  GaussianProcess(const GaussianProcess& other);
  GaussianProcess& operator=(const GaussianProcess& other);
  GaussianProcess(GaussianProcess&&) = default;
  GaussianProcess& operator=(GaussianProcess&&) = default;

  // Conditions on one more observation in O(n^2) by appending a row to the
  // Cholesky factor; refactors with more jitter when the new pivot is not
  // positive. FAILED_PRECONDITION if even that fails (the model is then
  // unchanged). `noise` overrides the noise variance of this observation
  // (negative: the model's): fantasies of pending trials use ~0, since
  // their evaluation will reveal f there.
  absl::Status AddPoint(const Eigen::VectorXd& x, double y,
                        double noise = -1.0);

  // Replaces the targets (same points), O(n^2).
  // REQUIRES: y.size() == size()
  void SetTargets(const Eigen::VectorXd& y);

  // Adds `mean` (null: none) to the constant mean, for the data conditioned
  // on and for predictions alike; O(n^2). Targets keep their values.
  void SetPriorMean(std::shared_ptr<const MeanFunction> mean);

  int size() const { return static_cast<int>(x_.rows()); }
  const Eigen::MatrixXd& x() const { return x_; }
  const Eigen::VectorXd& y() const { return y_; }
  const GpParams& params() const { return params_; }
  const Kernel& kernel() const { return *kernel_; }
  double jitter() const { return jitter_; }
  // L with L L' = s2 C + diag(noise per point) + jitter I.
  const Eigen::MatrixXd& cholesky() const { return l_; }

  // Posterior mean and variance of the latent f at each row of xq.
  void Predict(const Eigen::MatrixXd& xq, Eigen::VectorXd* mean,
               Eigen::VectorXd* variance) const;

  // The same at one point, with gradients with respect to x:
  //   dmu = dk' a,  dvar = -2 dk' K^-1 k.
  // With dmean and dvariance both null the gradients are skipped (the same
  // mean and variance, bit for bit, at about half the cost).
  void PredictWithGradient(const Eigen::VectorXd& x, double* mean,
                           double* variance, Eigen::VectorXd* dmean,
                           Eigen::VectorXd* dvariance) const;

 private:
  GaussianProcess(const Kernel& kernel, const GpParams& params,
                  const Eigen::MatrixXd& x, const Eigen::VectorXd& y);
  // Factors K from scratch with the current jitter, escalating it on
  // failure.
  absl::Status Factor();
  void UpdateAlpha();

  std::unique_ptr<Kernel> kernel_;
  GpParams params_;
  double signal_ = 1.0, noise_ = 0.0, jitter_ = 0.0;
  Eigen::MatrixXd x_;
  Eigen::VectorXd y_;
  Eigen::VectorXd noise_per_point_;  // The diagonal's noise, per point.
  std::shared_ptr<const MeanFunction> prior_mean_;  // May be null.
  Eigen::VectorXd prior_at_x_;  // prior_mean_ at each point; 0 without.
  Eigen::MatrixXd l_;
  Eigen::VectorXd alpha_;  // K^-1 (y - mean - prior_at_x)
};

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_GP_H_
