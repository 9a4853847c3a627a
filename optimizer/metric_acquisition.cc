#include "optimizer/metric_acquisition.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "optimizer/pareto.h"
#include "optimizer/splitmix.h"

namespace hypertune::optimizer {
namespace {

constexpr double kSqrt2 = 1.41421356237309505;
constexpr double kLogSqrt2Pi = 0.918938533204672742;

double LogPhi(double z) { return -0.5 * z * z - kLogSqrt2Pi; }

// log(1 / (1 + e^-u)), without overflow for either sign of u.
double LogSigmoid(double u) {
  return u > 0 ? -std::log1p(std::exp(-u)) : u - std::log1p(std::exp(u));
}

// The log of a sum of exponentials, shifted by the largest term.
double LogSumExp(const Eigen::VectorXd& v) {
  const double m = v.maxCoeff();
  if (!std::isfinite(m)) return m;
  return m + std::log((v.array() - m).exp().sum());
}

// sign(t) |t|^m for a small positive integer m.
double SignedPower(double t, int m) {
  double p = 1;
  for (int i = 0; i < m; ++i) p *= std::abs(t);
  return t < 0 ? -p : p;
}

}  // namespace

AcquisitionValue LogProbabilityWithin(double mean, double sigma, double lower,
                                      double upper) {
  assert(lower <= upper);
  sigma = std::max(sigma, kMinSigma);
  const bool has_lower = std::isfinite(lower), has_upper = std::isfinite(upper);
  if (!has_lower && !has_upper) return {0, 0, 0};
  const double z_l = has_lower ? (lower - mean) / sigma : 0;
  const double z_u = has_upper ? (upper - mean) / sigma : 0;
  double log_p, unused;
  if (!has_lower) {
    log_p = LogNormalCdf(z_u, &unused);
  } else if (!has_upper) {
    log_p = LogNormalCdf(-z_l, &unused);
  } else if (z_l > 0 || z_u < 0) {
    // Both bounds in one tail: the difference of two small CDFs, the larger
    // first, as log a + log(1 - b / a).
    const double a =
        z_l > 0 ? LogNormalCdf(-z_l, &unused) : LogNormalCdf(z_u, &unused);
    const double b =
        z_l > 0 ? LogNormalCdf(-z_u, &unused) : LogNormalCdf(z_l, &unused);
    // b < a unless the interval is a point, whose probability is 0: keep
    // the logarithm finite (about -690 below a).
    log_p = a + Log1mExp(std::min(b - a, -1e-300));
  } else {
    log_p = std::log(0.5 * std::erfc(-z_u / kSqrt2) -
                     0.5 * std::erfc(-z_l / kSqrt2));
  }
  // phi(z) / P at each finite bound: d log P = dP / P.
  const double r_l = has_lower ? std::exp(LogPhi(z_l) - log_p) : 0;
  const double r_u = has_upper ? std::exp(LogPhi(z_u) - log_p) : 0;
  return {log_p, (r_l - r_u) / sigma,
          ((has_lower ? z_l * r_l : 0) - (has_upper ? z_u * r_u : 0)) / sigma};
}

double LogSoftplus(double u) {
  if (u > 40) return std::log(u + std::log1p(std::exp(-u)));
  if (u < -40) return u;  // log1p(e^u) = e^u (1 - e^u / 2 ...)
  return std::log(std::log1p(std::exp(u)));
}

ConstrainedAcquisition::ConstrainedAcquisition(
    const Acquisition* objective, std::vector<ConstraintModel> constraints,
    const GaussianProcess* classifier)
    : objective_(objective),
      constraints_(std::move(constraints)),
      classifier_(classifier) {}

double ConstrainedAcquisition::Evaluate(const Eigen::VectorXd& x,
                                        Eigen::VectorXd* grad) const {
  double value = 0;
  if (objective_ != nullptr) {
    value = objective_->Evaluate(x, grad);
  } else if (grad) {
    *grad = Eigen::VectorXd::Zero(x.size());
  }
  for (const ConstraintModel& c : constraints_) {
    double mean, var;
    Eigen::VectorXd dmean, dvar;
    c.gp->PredictWithGradient(x, &mean, &var, &dmean, &dvar);
    const double sigma = std::sqrt(std::max(var, 0.0));
    const AcquisitionValue p =
        LogProbabilityWithin(mean, sigma, c.lower, c.upper);
    value += p.value;
    if (grad) {
      *grad += p.d_mean * dmean;
      if (sigma > kMinSigma) *grad += (p.d_sigma / (2 * sigma)) * dvar;
    }
  }
  if (classifier_ != nullptr) {
    value += LogFeasibilityWeight(*classifier_, x, grad);
  }
  return value;
}

Eigen::VectorXd ConstrainedAcquisition::EvaluateBatch(
    const Eigen::MatrixXd& xs) const {
  Eigen::VectorXd out = objective_ != nullptr
                            ? objective_->EvaluateBatch(xs)
                            : Eigen::VectorXd::Zero(xs.rows());
  for (const ConstraintModel& c : constraints_) {
    Eigen::VectorXd mean, var;
    c.gp->Predict(xs, &mean, &var);
    for (Eigen::Index i = 0; i < xs.rows(); ++i) {
      out[i] += LogProbabilityWithin(mean[i], std::sqrt(std::max(var[i], 0.0)),
                                     c.lower, c.upper)
                    .value;
    }
  }
  if (classifier_ != nullptr) out += LogFeasibilityWeights(*classifier_, xs);
  return out;
}

LogHypervolumeImprovement::LogHypervolumeImprovement(
    std::vector<const GaussianProcess*> objectives,
    const Eigen::MatrixXd& front, const Eigen::VectorXd& reference,
    uint64_t seed, const HypervolumeImprovementOptions& options)
    : objectives_(std::move(objectives)),
      reference_(reference),
      temperature_(options.temperature) {
  const int m = static_cast<int>(objectives_.size());
  assert(m >= 2 && front.cols() == m && reference.size() == m &&
         front.rows() >= 1);
  directions_ = PositiveSphereDirections(m, options.samples, seed);
  normals_ = QuasiNormalSamples(m, options.samples, MixSeeds(seed, 0x6e6f726d));
  front_best_ = Eigen::VectorXd::Zero(options.samples);
  for (int k = 0; k < options.samples; ++k) {
    const Eigen::VectorXd lambda = directions_.row(k).transpose();
    for (Eigen::Index i = 0; i < front.rows(); ++i) {
      front_best_[k] = std::max(
          front_best_[k], HypervolumeScalarization(front.row(i).transpose(),
                                                   reference_, lambda));
    }
  }
}

double LogHypervolumeImprovement::FromMoments(const Eigen::VectorXd& mean,
                                              const Eigen::VectorXd& sigma,
                                              Eigen::VectorXd* d_mean,
                                              Eigen::VectorXd* d_sigma) const {
  const int m = static_cast<int>(mean.size());
  const int samples = static_cast<int>(directions_.rows());
  Eigen::VectorXd log_terms(samples), z(samples), dz_dt(samples);
  std::vector<int> argmin(samples);
  for (int k = 0; k < samples; ++k) {
    // t = min_i (y_i - r_i) / lambda_i at the draw y = mu + sigma eps.
    double t = std::numeric_limits<double>::infinity();
    for (int i = 0; i < m; ++i) {
      const double ti = (mean[i] + sigma[i] * normals_(k, i) - reference_[i]) /
                        directions_(k, i);
      if (ti < t) {
        t = ti;
        argmin[k] = i;
      }
    }
    z[k] = SignedPower(t, m) - front_best_[k];
    // d(sign(t)|t|^m)/dt = m |t|^(m-1).
    dz_dt[k] = m * std::abs(SignedPower(t, m - 1));
    log_terms[k] = std::log(temperature_) + LogSoftplus(z[k] / temperature_);
  }
  const double log_sum = LogSumExp(log_terms);
  if (d_mean != nullptr || d_sigma != nullptr) {
    Eigen::VectorXd gm = Eigen::VectorXd::Zero(m),
                    gs = Eigen::VectorXd::Zero(m);
    for (int k = 0; k < samples; ++k) {
      // d softplus_tau(z) / dz = sigmoid(z / tau); over the sum.
      const double w = std::exp(LogSigmoid(z[k] / temperature_) - log_sum);
      const int i = argmin[k];
      const double dt_dmean = 1 / directions_(k, i);
      gm[i] += w * dz_dt[k] * dt_dmean;
      gs[i] += w * dz_dt[k] * dt_dmean * normals_(k, i);
    }
    if (d_mean != nullptr) *d_mean = gm;
    if (d_sigma != nullptr) *d_sigma = gs;
  }
  return log_sum - std::log(static_cast<double>(samples));
}

double LogHypervolumeImprovement::Evaluate(const Eigen::VectorXd& x,
                                           Eigen::VectorXd* grad) const {
  const int m = static_cast<int>(objectives_.size());
  Eigen::VectorXd mean(m), sigma(m);
  std::vector<Eigen::VectorXd> dmean(m), dvar(m);
  for (int i = 0; i < m; ++i) {
    double mu, var;
    objectives_[i]->PredictWithGradient(x, &mu, &var, &dmean[i], &dvar[i]);
    mean[i] = mu;
    sigma[i] = std::max(std::sqrt(std::max(var, 0.0)), kMinSigma);
  }
  Eigen::VectorXd gm, gs;
  const double value =
      FromMoments(mean, sigma, grad ? &gm : nullptr, grad ? &gs : nullptr);
  if (grad) {
    *grad = Eigen::VectorXd::Zero(x.size());
    for (int i = 0; i < m; ++i) {
      *grad += gm[i] * dmean[i];
      // dsigma = dvar / (2 sigma); zero where sigma is floored.
      if (sigma[i] > kMinSigma) *grad += (gs[i] / (2 * sigma[i])) * dvar[i];
    }
  }
  return value;
}

Eigen::VectorXd LogHypervolumeImprovement::EvaluateBatch(
    const Eigen::MatrixXd& xs) const {
  const int m = static_cast<int>(objectives_.size());
  Eigen::MatrixXd mean(xs.rows(), m), sigma(xs.rows(), m);
  for (int i = 0; i < m; ++i) {
    Eigen::VectorXd mu, var;
    objectives_[i]->Predict(xs, &mu, &var);
    mean.col(i) = mu;
    sigma.col(i) = var.cwiseMax(0.0).cwiseSqrt().cwiseMax(kMinSigma);
  }
  Eigen::VectorXd out(xs.rows());
  for (Eigen::Index r = 0; r < xs.rows(); ++r) {
    out[r] = FromMoments(mean.row(r).transpose(), sigma.row(r).transpose(),
                         nullptr, nullptr);
  }
  return out;
}

}  // namespace hypertune::optimizer
