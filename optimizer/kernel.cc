#include "optimizer/kernel.h"

#include <cassert>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

namespace hypertune::optimizer {
namespace {

constexpr double kSqrt5 = 2.23606797749978969641;

}  // namespace

Matern52Kernel::Matern52Kernel(std::vector<int> dims)
    : dims_(std::move(dims)),
      log_l_(Eigen::VectorXd::Zero(static_cast<Eigen::Index>(dims_.size()))),
      inv_l_(Eigen::VectorXd::Ones(static_cast<Eigen::Index>(dims_.size()))) {
  assert(!dims_.empty());
}

std::unique_ptr<Kernel> Matern52Kernel::Clone() const {
  return std::make_unique<Matern52Kernel>(*this);
}

int Matern52Kernel::num_params() const {
  return static_cast<int>(dims_.size());
}

void Matern52Kernel::set_log_params(const Eigen::VectorXd& p) {
  assert(p.size() == num_params());
  log_l_ = p;
  inv_l_ = (-p.array()).exp();
}

Eigen::MatrixXd Matern52Kernel::Scaled(const Eigen::MatrixXd& a) const {
  Eigen::MatrixXd s(a.rows(), static_cast<Eigen::Index>(dims_.size()));
  for (size_t j = 0; j < dims_.size(); ++j) {
    s.col(static_cast<Eigen::Index>(j)) =
        a.col(dims_[j]) * inv_l_[static_cast<Eigen::Index>(j)];
  }
  return s;
}

Eigen::MatrixXd Matern52Kernel::Matrix(const Eigen::MatrixXd& a,
                                       const Eigen::MatrixXd& b) const {
  const Eigen::MatrixXd as = Scaled(a), bs = Scaled(b);
  // r^2 = |a|^2 + |b|^2 - 2 a.b, clamped at 0 against cancellation.
  Eigen::MatrixXd r2 = -2.0 * as * bs.transpose();
  r2.colwise() += as.rowwise().squaredNorm();
  r2.rowwise() += bs.rowwise().squaredNorm().transpose();
  const Eigen::ArrayXXd r = r2.array().max(0.0).sqrt();
  return ((1.0 + kSqrt5 * r + (5.0 / 3.0) * r.square()) * (-kSqrt5 * r).exp())
      .matrix();
}

Eigen::VectorXd Matern52Kernel::ContractGradient(
    const Eigen::MatrixXd& x, const Eigen::MatrixXd& w) const {
  const Eigen::MatrixXd xs = Scaled(x);
  Eigen::MatrixXd r2 = -2.0 * xs * xs.transpose();
  const Eigen::VectorXd sq = xs.rowwise().squaredNorm();
  r2.colwise() += sq;
  r2.rowwise() += sq.transpose();
  const Eigen::ArrayXXd r = r2.array().max(0.0).sqrt();
  // m = w o s(r), symmetric; then
  // g_j = sum_ik m_ik (xs_ij - xs_kj)^2 = 2 (sum_i m_i. xs_ij^2 - xs_j' m
  // xs_j).
  const Eigen::MatrixXd m =
      (w.array() * (5.0 / 3.0) * (1.0 + kSqrt5 * r) * (-kSqrt5 * r).exp())
          .matrix();
  const Eigen::VectorXd row_sums = m.rowwise().sum();
  const Eigen::MatrixXd mx = m * xs;
  Eigen::VectorXd g(xs.cols());
  for (Eigen::Index j = 0; j < xs.cols(); ++j) {
    g[j] =
        2.0 * (row_sums.dot(xs.col(j).cwiseAbs2()) - xs.col(j).dot(mx.col(j)));
  }
  return g;
}

Eigen::MatrixXd Matern52Kernel::InputGradient(const Eigen::VectorXd& x,
                                              const Eigen::MatrixXd& b) const {
  Eigen::MatrixXd grad = Eigen::MatrixXd::Zero(b.rows(), b.cols());
  Eigen::MatrixXd diff(b.rows(), static_cast<Eigen::Index>(dims_.size()));
  for (size_t j = 0; j < dims_.size(); ++j) {
    const Eigen::Index jj = static_cast<Eigen::Index>(j);
    diff.col(jj) = (x[dims_[j]] - b.col(dims_[j]).array()).matrix() *
                   inv_l_[jj];  // (x_j - b_ij) / l_j
  }
  const Eigen::ArrayXd r = diff.rowwise().norm().array();
  const Eigen::ArrayXd s =
      (5.0 / 3.0) * (1.0 + kSqrt5 * r) * (-kSqrt5 * r).exp();
  for (size_t j = 0; j < dims_.size(); ++j) {
    const Eigen::Index jj = static_cast<Eigen::Index>(j);
    grad.col(dims_[j]) = (-s * diff.col(jj).array() * inv_l_[jj]).matrix();
  }
  return grad;
}

AdditiveMatern52Kernel::AdditiveMatern52Kernel(std::vector<int> dims)
    : dims_(std::move(dims)),
      log_l_(Eigen::VectorXd::Zero(static_cast<Eigen::Index>(dims_.size()))),
      inv_l_(Eigen::VectorXd::Ones(static_cast<Eigen::Index>(dims_.size()))) {
  assert(!dims_.empty());
}

std::unique_ptr<Kernel> AdditiveMatern52Kernel::Clone() const {
  return std::make_unique<AdditiveMatern52Kernel>(*this);
}

int AdditiveMatern52Kernel::num_params() const {
  return static_cast<int>(dims_.size());
}

void AdditiveMatern52Kernel::set_log_params(const Eigen::VectorXd& p) {
  assert(p.size() == num_params());
  log_l_ = p;
  inv_l_ = (-p.array()).exp();
}

namespace {

// For u = sqrt5 a / l and v = sqrt5 b / l (one dimension), writes
// t(i, k) = |u_i - v_k| and e(i, k) = exp(-t(i, k)). The exponential
// factors as exp(-u_i) exp(v_k) (u_i >= v_k) or exp(u_i) exp(-v_k), so it
// takes 2(n + m) exps instead of n m: the additive kernel's cost was all in
// them. Direct exps where the factors could overflow.
void ScaledDistanceAndDecay(const Eigen::ArrayXd& u, const Eigen::ArrayXd& v,
                            Eigen::ArrayXXd& t, Eigen::ArrayXXd& e) {
  constexpr double kMaxFactorExponent = 300;
  for (Eigen::Index k = 0; k < v.size(); ++k) {
    t.col(k) = (u - v[k]).abs();
  }
  if (std::max(u.abs().maxCoeff(), v.abs().maxCoeff()) > kMaxFactorExponent) {
    e = (-t).exp();
    return;
  }
  const Eigen::ArrayXd u_down = (-u).exp(), u_up = u.exp();
  const Eigen::ArrayXd v_down = (-v).exp(), v_up = v.exp();
  for (Eigen::Index k = 0; k < v.size(); ++k) {
    e.col(k) = (u >= v[k]).select(u_down * v_up[k], u_up * v_down[k]);
  }
}

}  // namespace

Eigen::MatrixXd AdditiveMatern52Kernel::Matrix(const Eigen::MatrixXd& a,
                                               const Eigen::MatrixXd& b) const {
  Eigen::ArrayXXd k = Eigen::ArrayXXd::Zero(a.rows(), b.rows());
  Eigen::ArrayXXd t(a.rows(), b.rows()), e(a.rows(), b.rows());
  for (size_t j = 0; j < dims_.size(); ++j) {
    // t = sqrt5 r: the Matern-5/2 term is (1 + t + t^2 / 3) exp(-t).
    const double scale = kSqrt5 * inv_l_[static_cast<Eigen::Index>(j)];
    const int c = dims_[j];
    ScaledDistanceAndDecay(scale * a.col(c).array(), scale * b.col(c).array(),
                           t, e);
    k += (1.0 + t + t.square() / 3.0) * e;
  }
  return (k / static_cast<double>(dims_.size())).matrix();
}

Eigen::VectorXd AdditiveMatern52Kernel::ContractGradient(
    const Eigen::MatrixXd& x, const Eigen::MatrixXd& w) const {
  Eigen::VectorXd g(static_cast<Eigen::Index>(dims_.size()));
  Eigen::ArrayXXd t(x.rows(), x.rows()), e(x.rows(), x.rows());
  for (size_t j = 0; j < dims_.size(); ++j) {
    const double scale = kSqrt5 * inv_l_[static_cast<Eigen::Index>(j)];
    const int c = dims_[j];
    const Eigen::ArrayXd u = scale * x.col(c).array();
    ScaledDistanceAndDecay(u, u, t, e);
    // dm / d log l = (5/3) r^2 (1 + sqrt5 r) exp(-sqrt5 r)
    //              = t^2 (1 + t) exp(-t) / 3.
    g[static_cast<Eigen::Index>(j)] =
        (w.array() * t.square() * (1.0 + t) * e).sum() /
        (3.0 * static_cast<double>(dims_.size()));
  }
  return g;
}

Eigen::MatrixXd AdditiveMatern52Kernel::InputGradient(
    const Eigen::VectorXd& x, const Eigen::MatrixXd& b) const {
  Eigen::MatrixXd grad = Eigen::MatrixXd::Zero(b.rows(), b.cols());
  const double scale = 1.0 / static_cast<double>(dims_.size());
  for (size_t j = 0; j < dims_.size(); ++j) {
    const double inv_l = inv_l_[static_cast<Eigen::Index>(j)];
    const int c = dims_[j];
    const Eigen::ArrayXd diff = (x[c] - b.col(c).array()) * inv_l;
    const Eigen::ArrayXd r = diff.abs();
    grad.col(c) = (-scale * (5.0 / 3.0) * (1.0 + kSqrt5 * r) *
                   (-kSqrt5 * r).exp() * diff * inv_l)
                      .matrix();
  }
  return grad;
}

HammingKernel::HammingKernel(std::vector<int> dims)
    : dims_(std::move(dims)),
      log_l_(Eigen::VectorXd::Zero(static_cast<Eigen::Index>(dims_.size()))) {
  assert(!dims_.empty());
}

std::unique_ptr<Kernel> HammingKernel::Clone() const {
  return std::make_unique<HammingKernel>(*this);
}

int HammingKernel::num_params() const { return static_cast<int>(dims_.size()); }

void HammingKernel::set_log_params(const Eigen::VectorXd& p) {
  assert(p.size() == num_params());
  log_l_ = p;
}

Eigen::MatrixXd HammingKernel::Matrix(const Eigen::MatrixXd& a,
                                      const Eigen::MatrixXd& b) const {
  Eigen::MatrixXd distance = Eigen::MatrixXd::Zero(a.rows(), b.rows());
  for (size_t c = 0; c < dims_.size(); ++c) {
    const double inv_l = std::exp(-log_l_[static_cast<Eigen::Index>(c)]);
    const int d = dims_[c];
    for (Eigen::Index j = 0; j < b.rows(); ++j) {
      distance.col(j).array() +=
          (a.col(d).array() != b(j, d)).cast<double>() * inv_l;
    }
  }
  return (-distance.array()).exp().matrix();
}

Eigen::VectorXd HammingKernel::ContractGradient(
    const Eigen::MatrixXd& x, const Eigen::MatrixXd& w) const {
  const Eigen::MatrixXd wk = (w.array() * Matrix(x, x).array()).matrix();
  Eigen::VectorXd g(static_cast<Eigen::Index>(dims_.size()));
  for (size_t c = 0; c < dims_.size(); ++c) {
    const double inv_l = std::exp(-log_l_[static_cast<Eigen::Index>(c)]);
    const int d = dims_[c];
    double sum = 0;
    for (Eigen::Index j = 0; j < x.rows(); ++j) {
      sum += ((x.col(d).array() != x(j, d)).cast<double>() * wk.col(j).array())
                 .sum();
    }
    g[static_cast<Eigen::Index>(c)] = sum * inv_l;
  }
  return g;
}

Eigen::MatrixXd HammingKernel::InputGradient(const Eigen::VectorXd&,
                                             const Eigen::MatrixXd& b) const {
  return Eigen::MatrixXd::Zero(b.rows(), b.cols());
}

ProductKernel::ProductKernel(std::unique_ptr<Kernel> k1,
                             std::unique_ptr<Kernel> k2)
    : k1_(std::move(k1)), k2_(std::move(k2)) {}

std::unique_ptr<Kernel> ProductKernel::Clone() const {
  return std::make_unique<ProductKernel>(k1_->Clone(), k2_->Clone());
}

int ProductKernel::num_params() const {
  return k1_->num_params() + k2_->num_params();
}

Eigen::VectorXd ProductKernel::log_params() const {
  Eigen::VectorXd p(num_params());
  p << k1_->log_params(), k2_->log_params();
  return p;
}

void ProductKernel::set_log_params(const Eigen::VectorXd& p) {
  assert(p.size() == num_params());
  k1_->set_log_params(p.head(k1_->num_params()));
  k2_->set_log_params(p.tail(k2_->num_params()));
}

Eigen::MatrixXd ProductKernel::Matrix(const Eigen::MatrixXd& a,
                                      const Eigen::MatrixXd& b) const {
  return (k1_->Matrix(a, b).array() * k2_->Matrix(a, b).array()).matrix();
}

Eigen::VectorXd ProductKernel::ContractGradient(
    const Eigen::MatrixXd& x, const Eigen::MatrixXd& w) const {
  const Eigen::MatrixXd w1 = (w.array() * k2_->Matrix(x, x).array()).matrix();
  const Eigen::MatrixXd w2 = (w.array() * k1_->Matrix(x, x).array()).matrix();
  Eigen::VectorXd g(num_params());
  g << k1_->ContractGradient(x, w1), k2_->ContractGradient(x, w2);
  return g;
}

Eigen::MatrixXd ProductKernel::InputGradient(const Eigen::VectorXd& x,
                                             const Eigen::MatrixXd& b) const {
  const Eigen::MatrixXd xr = x.transpose();
  const Eigen::VectorXd v1 = k1_->Matrix(xr, b).row(0).transpose();
  const Eigen::VectorXd v2 = k2_->Matrix(xr, b).row(0).transpose();
  return v2.asDiagonal() * k1_->InputGradient(x, b) +
         v1.asDiagonal() * k2_->InputGradient(x, b);
}

std::unique_ptr<Kernel> MakeMixedKernel(const std::vector<bool>& categorical,
                                        KernelStructure structure) {
  assert(!categorical.empty());
  std::vector<int> numeric_dims, categorical_dims;
  for (size_t j = 0; j < categorical.size(); ++j) {
    (categorical[j] ? categorical_dims : numeric_dims)
        .push_back(static_cast<int>(j));
  }
  auto numeric = [&]() -> std::unique_ptr<Kernel> {
    if (structure == KernelStructure::kAdditive) {
      return std::make_unique<AdditiveMatern52Kernel>(numeric_dims);
    }
    return std::make_unique<Matern52Kernel>(numeric_dims);
  };
  if (categorical_dims.empty()) return numeric();
  if (numeric_dims.empty()) {
    return std::make_unique<HammingKernel>(std::move(categorical_dims));
  }
  return std::make_unique<ProductKernel>(
      numeric(), std::make_unique<HammingKernel>(std::move(categorical_dims)));
}

}  // namespace hypertune::optimizer
