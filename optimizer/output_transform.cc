#include "optimizer/output_transform.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

namespace hypertune::optimizer {

double Quantile(const Eigen::VectorXd& y, double p) {
  assert(y.size() >= 1);
  std::vector<double> v(y.data(), y.data() + y.size());
  std::sort(v.begin(), v.end());
  const double rank = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (rank - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

Eigen::VectorXd WinsorizeLowerTail(const Eigen::VectorXd& y) {
  if (y.size() < 4) return y;
  const double q1 = Quantile(y, 0.25), q3 = Quantile(y, 0.75);
  const double fence = q1 - 1.5 * (q3 - q1);
  return y.cwiseMax(fence);
}

double YeoJohnson(double y, double lambda) {
  constexpr double kEps = 1e-8;
  if (y >= 0) {
    if (std::abs(lambda) < kEps) return std::log1p(y);
    return std::expm1(lambda * std::log1p(y)) / lambda;
  }
  if (std::abs(lambda - 2) < kEps) return -std::log1p(-y);
  return -std::expm1((2 - lambda) * std::log1p(-y)) / (2 - lambda);
}

namespace {

double YeoJohnsonLogLikelihood(const Eigen::VectorXd& y, double lambda) {
  Eigen::VectorXd psi(y.size());
  double jacobian = 0;
  for (Eigen::Index i = 0; i < y.size(); ++i) {
    psi[i] = YeoJohnson(y[i], lambda);
    jacobian += std::copysign(std::log1p(std::abs(y[i])), y[i]);
  }
  const double var = (psi.array() - psi.mean()).square().mean();
  if (!(var > 0) || !std::isfinite(var)) return -1e300;
  return -0.5 * static_cast<double>(y.size()) * std::log(var) +
         (lambda - 1) * jacobian;
}

}  // namespace

double FitYeoJohnsonLambda(const Eigen::VectorXd& y) {
  const double kInvPhi = 0.6180339887498949;
  double a = -2, b = 4;
  double c = b - kInvPhi * (b - a), d = a + kInvPhi * (b - a);
  double fc = YeoJohnsonLogLikelihood(y, c), fd = YeoJohnsonLogLikelihood(y, d);
  for (int i = 0; i < 40; ++i) {
    if (fc > fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - kInvPhi * (b - a);
      fc = YeoJohnsonLogLikelihood(y, c);
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + kInvPhi * (b - a);
      fd = YeoJohnsonLogLikelihood(y, d);
    }
  }
  return 0.5 * (a + b);
}

Eigen::VectorXd Standardize(const Eigen::VectorXd& y) {
  const double mean = y.mean();
  Eigen::VectorXd centred = y.array() - mean;
  const double sd =
      std::sqrt(centred.squaredNorm() /
                static_cast<double>(std::max<Eigen::Index>(y.size() - 1, 1)));
  if (!(sd > 1e-300)) return Eigen::VectorXd::Zero(y.size());
  return centred / sd;
}

Eigen::VectorXd TransformOutputs(const Eigen::VectorXd& y) {
  assert(y.size() >= 1);
  Eigen::VectorXd z = Standardize(WinsorizeLowerTail(y));
  if (y.size() >= 4 && z.squaredNorm() > 0) {
    const double lambda = FitYeoJohnsonLambda(z);
    for (Eigen::Index i = 0; i < z.size(); ++i) z[i] = YeoJohnson(z[i], lambda);
  }
  return Standardize(z);
}

}  // namespace hypertune::optimizer
