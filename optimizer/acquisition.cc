#include "optimizer/acquisition.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace hypertune::optimizer {
namespace {

constexpr double kSqrt2 = 1.41421356237309505;
constexpr double kSqrtHalfPi = 1.25331413731550025;   // sqrt(pi / 2)
constexpr double kLogSqrt2Pi = 0.918938533204672742;  // log sqrt(2 pi)
constexpr double kInvSqrtPi = 0.564189583547756287;
// Beyond this |z| squaring would overflow; the asymptotes hold long before.
constexpr double kMaxAbsZ = 1e100;

double LogPhi(double z) { return -0.5 * z * z - kLogSqrt2Pi; }

}  // namespace

double Erfcx(double x) {
  assert(x >= 0);
  if (x < 25) return std::exp(x * x) * std::erfc(x);
  // erfcx(x) ~ 1 / (x sqrt(pi)) (1 - 1/(2x^2) + 3/(4x^4) - 15/(8x^6) + ...).
  const double t = 1 / (2 * x * x);
  return kInvSqrtPi / x *
         (1 - t * (1 - 3 * t * (1 - 5 * t * (1 - 7 * t * (1 - 9 * t)))));
}

double Log1mExp(double a) {
  constexpr double kLn2 = 0.693147180559945309;
  return a > -kLn2 ? std::log(-std::expm1(a)) : std::log1p(-std::exp(a));
}

double LogNormalCdf(double z, double* dlog_dz) {
  z = std::clamp(z, -kMaxAbsZ, kMaxAbsZ);
  if (z > -5) {
    const double cdf = 0.5 * std::erfc(-z / kSqrt2);
    *dlog_dz = std::exp(LogPhi(z)) / cdf;
    return std::log(cdf);
  }
  // Phi(z) = phi(z) sqrt(pi/2) erfcx(-z / sqrt2) for z < 0.
  const double ratio = kSqrtHalfPi * Erfcx(-z / kSqrt2);  // Phi / phi
  *dlog_dz = 1 / ratio;
  return LogPhi(z) + std::log(ratio);
}

double LogH(double z, double* dlogh_dz) {
  z = std::clamp(z, -kMaxAbsZ, kMaxAbsZ);
  if (z > -1) {
    const double cdf = 0.5 * std::erfc(-z / kSqrt2);
    const double h = std::exp(LogPhi(z)) + z * cdf;
    *dlogh_dz = cdf / h;
    return std::log(h);
  }
  const double t = -z;
  if (z > -25) {
    const double cdf_over_pdf = kSqrtHalfPi * Erfcx(t / kSqrt2);
    // h / phi = 1 - |z| Phi / phi.
    const double log_h_over_pdf = Log1mExp(std::log(t * cdf_over_pdf));
    *dlogh_dz = cdf_over_pdf / std::exp(log_h_over_pdf);
    return LogPhi(z) + log_h_over_pdf;
  }
  const double u = 1 / (z * z);
  // h / phi = u (1 - 3u (1 - 5u (1 - 7u (1 - 9u)))),
  // Phi / phi = (1 / |z|) (1 - u (1 - 3u (1 - 5u (1 - 7u)))).
  const double h_over_pdf =
      u * (1 - 3 * u * (1 - 5 * u * (1 - 7 * u * (1 - 9 * u))));
  const double cdf_over_pdf =
      (1 / t) * (1 - u * (1 - 3 * u * (1 - 5 * u * (1 - 7 * u))));
  *dlogh_dz = cdf_over_pdf / h_over_pdf;
  return LogPhi(z) + std::log(h_over_pdf);
}

AcquisitionValue Acquire(AcquisitionKind kind, double mean, double sigma,
                         double best, double ucb_beta) {
  sigma = std::max(sigma, kMinSigma);
  const double z = (mean - best) / sigma;
  switch (kind) {
    case AcquisitionKind::kLogEi: {
      double dz = 0;
      const double value = LogH(z, &dz) + std::log(sigma);
      return {value, dz / sigma, (1 - dz * z) / sigma};
    }
    case AcquisitionKind::kUcb:
      return {mean + ucb_beta * sigma, 1.0, ucb_beta};
    case AcquisitionKind::kLogPi: {
      double dz = 0;
      const double value = LogNormalCdf(z, &dz);
      return {value, dz / sigma, -dz * z / sigma};
    }
  }
  return {0, 0, 0};
}

double LogFeasibilityWeight(const GaussianProcess& classifier,
                            const Eigen::VectorXd& x, Eigen::VectorXd* grad) {
  double fmean, fvar, dlog;
  Eigen::VectorXd dfmean, dfvar;
  classifier.PredictWithGradient(x, &fmean, &fvar, grad ? &dfmean : nullptr,
                                 grad ? &dfvar : nullptr);
  const double scale = std::sqrt(kFeasibilityKappa * kFeasibilityKappa + fvar);
  const double value = LogNormalCdf(fmean / scale, &dlog);
  // d(mu / s) = dmu / s - mu dvar / (2 s^3).
  if (grad) {
    *grad +=
        dlog * (dfmean / scale - (fmean / (2 * scale * scale * scale)) * dfvar);
  }
  return value;
}

Eigen::VectorXd LogFeasibilityWeights(const GaussianProcess& classifier,
                                      const Eigen::MatrixXd& xs) {
  Eigen::VectorXd fmean, fvar;
  classifier.Predict(xs, &fmean, &fvar);
  Eigen::VectorXd out(xs.rows());
  double unused;
  for (Eigen::Index i = 0; i < xs.rows(); ++i) {
    out[i] = LogNormalCdf(
        fmean[i] / std::sqrt(kFeasibilityKappa * kFeasibilityKappa + fvar[i]),
        &unused);
  }
  return out;
}

AcquisitionFunction::AcquisitionFunction(const GaussianProcess* model,
                                         const GaussianProcess* feasibility,
                                         AcquisitionKind kind, double best,
                                         double ucb_beta)
    : model_(model),
      feasibility_(feasibility),
      kind_(kind),
      best_(best),
      ucb_beta_(ucb_beta) {}

double AcquisitionFunction::Evaluate(const Eigen::VectorXd& x,
                                     Eigen::VectorXd* grad) const {
  double mean, var;
  Eigen::VectorXd dmean, dvar;
  // Without grad the GP skips its gradients: about half of the work of the
  // categorical ascent's evaluations and of the pull's.
  model_->PredictWithGradient(x, &mean, &var, grad ? &dmean : nullptr,
                              grad ? &dvar : nullptr);
  const double sigma = std::sqrt(var);
  const AcquisitionValue a = Acquire(kind_, mean, sigma, best_, ucb_beta_);
  double value = a.value;
  if (grad) {
    *grad = a.d_mean * dmean;
    // dsigma = dvar / (2 sigma); zero where sigma is floored.
    if (sigma > kMinSigma) *grad += (a.d_sigma / (2 * sigma)) * dvar;
  }
  if (feasibility_ != nullptr) {
    value += LogFeasibilityWeight(*feasibility_, x, grad);
  }
  return value;
}

Eigen::VectorXd AcquisitionFunction::EvaluateBatch(
    const Eigen::MatrixXd& xs) const {
  Eigen::VectorXd mean, var;
  model_->Predict(xs, &mean, &var);
  Eigen::VectorXd out(xs.rows());
  for (Eigen::Index i = 0; i < xs.rows(); ++i) {
    out[i] = Acquire(kind_, mean[i], std::sqrt(var[i]), best_, ucb_beta_).value;
  }
  if (feasibility_ != nullptr) out += LogFeasibilityWeights(*feasibility_, xs);
  return out;
}

IntegratedAcquisition::IntegratedAcquisition(
    const std::vector<GaussianProcess>& models,
    const GaussianProcess* feasibility, AcquisitionKind kind, double best,
    double ucb_beta)
    : log_scale_(kind != AcquisitionKind::kUcb) {
  assert(!models.empty());
  parts_.reserve(models.size());
  for (const GaussianProcess& model : models) {
    parts_.emplace_back(&model, feasibility, kind, best, ucb_beta);
  }
}

double IntegratedAcquisition::Evaluate(const Eigen::VectorXd& x,
                                       Eigen::VectorXd* grad) const {
  const int k = static_cast<int>(parts_.size());
  Eigen::VectorXd values(k);
  std::vector<Eigen::VectorXd> grads(grad ? k : 0);
  for (int i = 0; i < k; ++i) {
    values[i] = parts_[i].Evaluate(x, grad ? &grads[i] : nullptr);
  }
  // Weights of the parts in the value's gradient.
  Eigen::VectorXd weights = Eigen::VectorXd::Constant(k, 1.0 / k);
  double value = values.mean();
  if (log_scale_) {
    const double top = values.maxCoeff();
    if (!std::isfinite(top)) {
      if (grad) *grad = Eigen::VectorXd::Zero(x.size());
      return top;
    }
    weights = (values.array() - top).exp();
    const double total = weights.sum();
    value = top + std::log(total / k);
    weights /= total;
  }
  if (grad) {
    *grad = Eigen::VectorXd::Zero(x.size());
    for (int i = 0; i < k; ++i) {
      if (weights[i] > 0) *grad += weights[i] * grads[i];
    }
  }
  return value;
}

Eigen::VectorXd IntegratedAcquisition::EvaluateBatch(
    const Eigen::MatrixXd& xs) const {
  Eigen::MatrixXd values(xs.rows(), parts_.size());
  for (size_t i = 0; i < parts_.size(); ++i) {
    values.col(static_cast<Eigen::Index>(i)) = parts_[i].EvaluateBatch(xs);
  }
  if (!log_scale_) return values.rowwise().mean();
  Eigen::VectorXd out(xs.rows());
  const double log_k = std::log(static_cast<double>(parts_.size()));
  for (Eigen::Index r = 0; r < xs.rows(); ++r) {
    const double top = values.row(r).maxCoeff();
    out[r] =
        std::isfinite(top)
            ? top + std::log((values.row(r).array() - top).exp().sum()) - log_k
            : top;
  }
  return out;
}

}  // namespace hypertune::optimizer
