#include "optimizer/gp.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include "optimizer/box_minimizer.h"

namespace hypertune::optimizer {
namespace {

constexpr double kLog2Pi = 1.83787706640934548356;
constexpr double kMinLengthscale = 0.025;
constexpr double kMaxLengthscale = 100.0;
// Jitter escalation, relative to the signal variance.
constexpr double kFirstJitter = 1e-9;
constexpr double kMaxJitter = 1e-3;
// Queries per block in Predict.
constexpr Eigen::Index kPredictBlock = 128;

// log N(v; loc, scale) up to a constant, and its derivative.
double LogNormalDensity(double v, double loc, double scale, double* d) {
  const double z = (v - loc) / scale;
  *d = -z / scale;
  return -0.5 * z * z;
}

}  // namespace

Eigen::VectorXd GpParams::Flat() const {
  Eigen::VectorXd flat(kernel.size() + 3);
  flat << kernel, log_signal_variance, log_noise_variance, mean;
  return flat;
}

GpParams GpParams::FromFlat(const Eigen::VectorXd& flat) {
  const Eigen::Index nk = flat.size() - 3;
  GpParams p;
  p.kernel = flat.head(nk);
  p.log_signal_variance = flat[nk];
  p.log_noise_variance = flat[nk + 1];
  p.mean = flat[nk + 2];
  return p;
}

bool GpParams::operator==(const GpParams& other) const {
  return kernel.size() == other.kernel.size() && kernel == other.kernel &&
         log_signal_variance == other.log_signal_variance &&
         log_noise_variance == other.log_noise_variance && mean == other.mean;
}

GpPrior GpPrior::ForDimension(int d) {
  assert(d >= 1);
  GpPrior prior;
  prior.lengthscale_loc = 1.41421356237309505 + 0.5 * std::log(d);
  return prior;
}

double GpPrior::LogDensity(const Eigen::VectorXd& flat, int num_kernel_params,
                           Eigen::VectorXd* grad) const {
  double total = 0, d = 0;
  for (int i = 0; i < num_kernel_params; ++i) {
    total += LogNormalDensity(flat[i], lengthscale_loc, lengthscale_scale, &d);
    if (grad) (*grad)[i] += d;
  }
  const int k = num_kernel_params;
  total += LogNormalDensity(flat[k], signal_loc, signal_scale, &d);
  if (grad) (*grad)[k] += d;
  total += LogNormalDensity(flat[k + 1], noise_loc, noise_scale, &d);
  if (grad) (*grad)[k + 1] += d;
  total += LogNormalDensity(flat[k + 2], 0.0, mean_scale, &d);
  if (grad) (*grad)[k + 2] += d;
  return total;
}

GpParams GpPrior::Mode(int num_kernel_params) const {
  GpParams p;
  // The mode of LogNormal(loc, scale) is exp(loc - scale^2).
  p.kernel = Eigen::VectorXd::Constant(
      num_kernel_params,
      std::max(lengthscale_loc - lengthscale_scale * lengthscale_scale,
               std::log(kMinLengthscale)));
  p.log_signal_variance = signal_loc;
  p.log_noise_variance = noise_loc;
  p.mean = 0;
  return p;
}

GpParams GpPrior::Sample(int num_kernel_params, SplitMix64& rng) const {
  GpParams p;
  p.kernel.resize(num_kernel_params);
  for (int i = 0; i < num_kernel_params; ++i) {
    // Half the prior's spread: full-width draws put lengthscales at the
    // bounds too often to be useful starts.
    p.kernel[i] = lengthscale_loc - lengthscale_scale * lengthscale_scale / 2 +
                  0.5 * lengthscale_scale * rng.NextNormal();
  }
  p.log_signal_variance = signal_loc + signal_scale * 0.5 * rng.NextNormal();
  p.log_noise_variance = noise_loc + noise_scale * rng.NextNormal();
  p.mean = 0.5 * rng.NextNormal();
  const ParamBounds b = GpParamBounds(num_kernel_params, 0.0);
  Eigen::VectorXd flat = p.Flat().cwiseMax(b.lower).cwiseMin(b.upper);
  return GpParams::FromFlat(flat);
}

ParamBounds GpParamBounds(int num_kernel_params, double min_noise) {
  const int n = num_kernel_params + 3;
  ParamBounds b{Eigen::VectorXd(n), Eigen::VectorXd(n)};
  b.lower.head(num_kernel_params).setConstant(std::log(kMinLengthscale));
  b.upper.head(num_kernel_params).setConstant(std::log(kMaxLengthscale));
  b.lower[num_kernel_params] = std::log(1e-3);
  b.upper[num_kernel_params] = std::log(1e2);
  b.lower[num_kernel_params + 1] = std::log(std::max(min_noise, 1e-12));
  b.upper[num_kernel_params + 1] = 0.0;
  b.lower[num_kernel_params + 2] = -3.0;
  b.upper[num_kernel_params + 2] = 3.0;
  return b;
}

double NegLogPosterior(const Kernel& kernel, const Eigen::MatrixXd& x,
                       const Eigen::VectorXd& y, const Eigen::VectorXd& flat,
                       const GpPrior& prior, Eigen::VectorXd* grad) {
  assert(y.size() == x.rows() && x.rows() >= 1);
  const int nk = kernel.num_params();
  if (!flat.allFinite()) return std::numeric_limits<double>::infinity();
  const GpParams p = GpParams::FromFlat(flat);
  std::unique_ptr<Kernel> k = kernel.Clone();
  k->set_log_params(p.kernel);
  const double s2 = std::exp(p.log_signal_variance);
  const double noise = std::exp(p.log_noise_variance);
  const Eigen::Index n = x.rows();

  const Eigen::MatrixXd c = k->Matrix(x, x);
  Eigen::MatrixXd kxx = s2 * c;
  kxx.diagonal().array() += noise + kFirstJitter * s2;
  const Eigen::LLT<Eigen::MatrixXd> llt(kxx);
  if (llt.info() != Eigen::Success) {
    return std::numeric_limits<double>::infinity();
  }
  const Eigen::VectorXd r = y.array() - p.mean;
  const Eigen::VectorXd a = llt.solve(r);
  const Eigen::MatrixXd& l = llt.matrixLLT();
  double value = 0.5 * r.dot(a) + l.diagonal().array().log().sum() +
                 0.5 * static_cast<double>(n) * kLog2Pi;

  if (grad) {
    grad->setZero(flat.size());
    // w = a a' - K^-1, so that d(log p(y|x))/d theta = 1/2 tr(w dK).
    Eigen::MatrixXd w = -llt.solve(Eigen::MatrixXd::Identity(n, n));
    w.noalias() += a * a.transpose();
    grad->head(nk) = -0.5 * s2 * k->ContractGradient(x, w);
    (*grad)[nk] = -0.5 * s2 * (w.array() * c.array()).sum();
    (*grad)[nk + 1] = -0.5 * noise * w.trace();
    (*grad)[nk + 2] = -a.sum();
    Eigen::VectorXd prior_grad = Eigen::VectorXd::Zero(flat.size());
    value -= prior.LogDensity(flat, nk, &prior_grad);
    *grad -= prior_grad;
  } else {
    value -= prior.LogDensity(flat, nk, nullptr);
  }
  return value;
}

GpParams FitGpParams(const Kernel& kernel, const Eigen::MatrixXd& x,
                     const Eigen::VectorXd& y,
                     const std::vector<GpParams>& starts, const GpPrior& prior,
                     double min_noise, int max_iterations,
                     const std::function<bool()>& stop) {
  assert(!starts.empty());
  const ParamBounds bounds = GpParamBounds(kernel.num_params(), min_noise);
  auto objective = [&](const Eigen::VectorXd& flat, Eigen::VectorXd& grad) {
    if (stop && stop()) {
      // A flat objective: the minimizer ends at once.
      grad.setZero(flat.size());
      return 0.0;
    }
    return NegLogPosterior(kernel, x, y, flat, prior, &grad);
  };
  BoxMinimizerOptions options;
  options.max_iterations = max_iterations;
  options.gradient_tolerance = 1e-4;
  options.relative_tolerance = 1e-8;
  GpParams best = starts.front();
  double best_value = std::numeric_limits<double>::infinity();
  for (const GpParams& start : starts) {
    const BoxMinimum m = MinimizeInBox(objective, start.Flat(), bounds.lower,
                                       bounds.upper, options);
    if (m.value < best_value) {
      best_value = m.value;
      best = GpParams::FromFlat(m.x);
    }
  }
  if (!std::isfinite(best_value)) {
    // Nothing could be factored: the clamped first start is the best guess.
    best = GpParams::FromFlat(
        starts.front().Flat().cwiseMax(bounds.lower).cwiseMin(bounds.upper));
  }
  return best;
}

GaussianProcess::GaussianProcess(const Kernel& kernel, const GpParams& params,
                                 const Eigen::MatrixXd& x,
                                 const Eigen::VectorXd& y)
    : kernel_(kernel.Clone()), params_(params), x_(x), y_(y) {
  kernel_->set_log_params(params.kernel);
  signal_ = std::exp(params.log_signal_variance);
  noise_ = std::exp(params.log_noise_variance);
  noise_per_point_ = Eigen::VectorXd::Constant(x.rows(), noise_);
  prior_at_x_ = Eigen::VectorXd::Zero(x.rows());
}

GaussianProcess::GaussianProcess(const GaussianProcess& other)
    : kernel_(other.kernel_->Clone()),
      params_(other.params_),
      signal_(other.signal_),
      noise_(other.noise_),
      jitter_(other.jitter_),
      x_(other.x_),
      y_(other.y_),
      noise_per_point_(other.noise_per_point_),
      prior_mean_(other.prior_mean_),
      prior_at_x_(other.prior_at_x_),
      l_(other.l_),
      alpha_(other.alpha_) {}

GaussianProcess& GaussianProcess::operator=(const GaussianProcess& other) {
  if (this != &other) *this = GaussianProcess(other);
  return *this;
}

absl::StatusOr<GaussianProcess> GaussianProcess::Create(
    const Kernel& kernel, const GpParams& params, const Eigen::MatrixXd& x,
    const Eigen::VectorXd& y) {
  assert(y.size() == x.rows());
  if (!params.Flat().allFinite()) {
    return absl::FailedPreconditionError("GP parameters are not finite");
  }
  GaussianProcess gp(kernel, params, x, y);
  if (absl::Status s = gp.Factor(); !s.ok()) return s;
  return gp;
}

absl::Status GaussianProcess::Factor() {
  Eigen::MatrixXd k = signal_ * kernel_->Matrix(x_, x_);
  k.diagonal() += noise_per_point_;
  if (jitter_ == 0) jitter_ = kFirstJitter * signal_;
  for (; jitter_ <= kMaxJitter * signal_; jitter_ *= 100) {
    Eigen::MatrixXd kj = k;
    kj.diagonal().array() += jitter_;
    Eigen::LLT<Eigen::MatrixXd> llt(kj);
    if (llt.info() == Eigen::Success) {
      l_ = llt.matrixL();
      UpdateAlpha();
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(
      "GP kernel matrix is not positive definite even with jitter 1e-3");
}

void GaussianProcess::UpdateAlpha() {
  alpha_ = (y_.array() - params_.mean - prior_at_x_.array()).matrix();
  l_.triangularView<Eigen::Lower>().solveInPlace(alpha_);
  l_.triangularView<Eigen::Lower>().transpose().solveInPlace(alpha_);
}

absl::Status GaussianProcess::AddPoint(const Eigen::VectorXd& x, double y,
                                       double noise) {
  const Eigen::Index n = x_.rows();
  if (noise < 0) noise = noise_;
  x_.conservativeResize(n + 1, Eigen::NoChange);
  x_.row(n) = x.transpose();
  y_.conservativeResize(n + 1);
  y_[n] = y;
  noise_per_point_.conservativeResize(n + 1);
  noise_per_point_[n] = noise;
  prior_at_x_.conservativeResize(n + 1);
  prior_at_x_[n] = prior_mean_ ? prior_mean_->Value(x, nullptr) : 0.0;
  // New row of L: l = L^-1 k, pivot sqrt(k(x, x) + noise + jitter - l'l).
  Eigen::VectorXd k =
      signal_ * kernel_->Matrix(x_.topRows(n), x.transpose()).col(0);
  l_.triangularView<Eigen::Lower>().solveInPlace(k);
  const double pivot2 = signal_ + noise + jitter_ - k.squaredNorm();
  if (!(pivot2 > 1e-12 * signal_) || !k.allFinite()) {
    const double jitter = jitter_;
    jitter_ *= 100;
    if (absl::Status s = Factor(); !s.ok()) {
      // Leave the model as it was.
      jitter_ = jitter;
      x_.conservativeResize(n, Eigen::NoChange);
      y_.conservativeResize(n);
      noise_per_point_.conservativeResize(n);
      prior_at_x_.conservativeResize(n);
      return s;
    }
    return absl::OkStatus();
  }
  l_.conservativeResize(n + 1, n + 1);
  l_.col(n).setZero();
  l_.row(n).head(n) = k.transpose();
  l_(n, n) = std::sqrt(pivot2);
  UpdateAlpha();
  return absl::OkStatus();
}

void GaussianProcess::SetTargets(const Eigen::VectorXd& y) {
  assert(y.size() == x_.rows());
  y_ = y;
  UpdateAlpha();
}

void GaussianProcess::SetPriorMean(std::shared_ptr<const MeanFunction> mean) {
  prior_mean_ = std::move(mean);
  prior_at_x_ = prior_mean_ && x_.rows() > 0 ? prior_mean_->Values(x_)
                                             : Eigen::VectorXd::Zero(x_.rows());
  UpdateAlpha();
}

void GaussianProcess::Predict(const Eigen::MatrixXd& xq, Eigen::VectorXd* mean,
                              Eigen::VectorXd* variance) const {
  mean->resize(xq.rows());
  variance->resize(xq.rows());
  // In blocks of queries, so that a block's solve stays in cache: all 1280
  // candidates of an acquisition at once took ~1.5x longer, mostly faulting
  // in freshly mapped pages.
  for (Eigen::Index start = 0; start < xq.rows(); start += kPredictBlock) {
    const Eigen::Index rows =
        std::min<Eigen::Index>(kPredictBlock, xq.rows() - start);
    Eigen::MatrixXd v =
        signal_ * kernel_->Matrix(xq.middleRows(start, rows), x_).transpose();
    mean->segment(start, rows) =
        (v.transpose() * alpha_).array() + params_.mean;
    l_.triangularView<Eigen::Lower>().solveInPlace(v);
    variance->segment(start, rows) =
        (signal_ - v.colwise().squaredNorm().transpose().array()).max(0.0);
  }
  if (prior_mean_ && xq.rows() > 0) *mean += prior_mean_->Values(xq);
}

void GaussianProcess::PredictWithGradient(const Eigen::VectorXd& x,
                                          double* mean, double* variance,
                                          Eigen::VectorXd* dmean,
                                          Eigen::VectorXd* dvariance) const {
  const bool gradients = dmean != nullptr || dvariance != nullptr;
  const Eigen::VectorXd k =
      signal_ * kernel_->Matrix(x.transpose(), x_).row(0).transpose();
  const Eigen::MatrixXd dk =
      gradients ? Eigen::MatrixXd(signal_ * kernel_->InputGradient(x, x_))
                : Eigen::MatrixXd();
  *mean = params_.mean + k.dot(alpha_);
  if (dmean != nullptr) *dmean = dk.transpose() * alpha_;
  Eigen::VectorXd v = k;
  l_.triangularView<Eigen::Lower>().solveInPlace(v);
  *variance = std::max(signal_ - v.squaredNorm(), 0.0);
  if (dvariance != nullptr) {
    l_.triangularView<Eigen::Lower>().transpose().solveInPlace(v);
    *dvariance = -2.0 * (dk.transpose() * v);
  }
  if (prior_mean_) {
    Eigen::VectorXd dprior;
    *mean += prior_mean_->Value(x, &dprior);
    if (dmean != nullptr) *dmean += dprior;
  }
}

}  // namespace hypertune::optimizer
