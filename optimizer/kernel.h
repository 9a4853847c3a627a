// Kernels: correlation functions k(x, x') with k(x, x) = 1 on the model's
// coordinates (rows of a matrix are points). A kernel supplies its value,
// its gradient with respect to its own parameters (which live in log space,
// all of them log lengthscales here) and its gradient with respect to the
// first input; the GP scales it by a signal variance.
//
// Numeric dimensions are points of [0,1]; categorical dimensions hold the
// category's index (0, 1, ...) and are compared for equality only.
// Immutable apart from set_log_params; not thread-safe while being set.
#ifndef HYPERTUNE_OPTIMIZER_KERNEL_H_
#define HYPERTUNE_OPTIMIZER_KERNEL_H_

#include <memory>
#include <vector>

#include <Eigen/Core>

namespace hypertune::optimizer {

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual std::unique_ptr<Kernel> Clone() const = 0;

  // The parameters, in log space (log lengthscales).
  virtual int num_params() const = 0;
  virtual Eigen::VectorXd log_params() const = 0;
  // REQUIRES: p.size() == num_params()
  virtual void set_log_params(const Eigen::VectorXd& p) = 0;

  // K(a, b): entry (i, j) is k(a.row(i), b.row(j)).
  virtual Eigen::MatrixXd Matrix(const Eigen::MatrixXd& a,
                                 const Eigen::MatrixXd& b) const = 0;

  // g_p = sum_ij w_ij dK(x, x)_ij / d log_params[p]: the contraction that
  // the marginal likelihood's gradient needs, without materializing one
  // n x n matrix per parameter.
  // REQUIRES: w symmetric, w.rows() == w.cols() == x.rows()
  virtual Eigen::VectorXd ContractGradient(const Eigen::MatrixXd& x,
                                           const Eigen::MatrixXd& w) const = 0;

  // Row i: the gradient of k(x, b.row(i)) with respect to x (zero on the
  // dimensions the kernel does not differentiate: categorical ones).
  virtual Eigen::MatrixXd InputGradient(const Eigen::VectorXd& x,
                                        const Eigen::MatrixXd& b) const = 0;
};

// Matérn-5/2 with one lengthscale per dimension (ARD) over the columns
// `dims` (Rasmussen and Williams, "Gaussian Processes for Machine Learning",
// 2006, eq. 4.17):
//   k(r) = (1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r),
//   r^2 = sum_j (x_j - x'_j)^2 / l_j^2.
// Derivatives used below, with s(r) = 5/3 (1 + sqrt(5) r) exp(-sqrt(5) r):
//   dk / d log l_j = s(r) (x_j - x'_j)^2 / l_j^2,
//   dk / dx_j      = -s(r) (x_j - x'_j) / l_j^2,
// both finite at r = 0 (no division by r).
class Matern52Kernel final : public Kernel {
 public:
  // Lengthscales start at 1. REQUIRES: !dims.empty()
  explicit Matern52Kernel(std::vector<int> dims);

  std::unique_ptr<Kernel> Clone() const override;
  int num_params() const override;
  Eigen::VectorXd log_params() const override { return log_l_; }
  void set_log_params(const Eigen::VectorXd& p) override;
  Eigen::MatrixXd Matrix(const Eigen::MatrixXd& a,
                         const Eigen::MatrixXd& b) const override;
  Eigen::VectorXd ContractGradient(const Eigen::MatrixXd& x,
                                   const Eigen::MatrixXd& w) const override;
  Eigen::MatrixXd InputGradient(const Eigen::VectorXd& x,
                                const Eigen::MatrixXd& b) const override;

 private:
  // The kernel's columns of a, each divided by its lengthscale.
  Eigen::MatrixXd Scaled(const Eigen::MatrixXd& a) const;

  std::vector<int> dims_;
  Eigen::VectorXd log_l_;
  Eigen::VectorXd inv_l_;
};

// A Hamming-type kernel for categorical columns `dims` (as BoTorch's
// CategoricalKernel, with one lengthscale per dimension):
//   k(x, x') = exp(-sum_c [x_c != x'_c] / l_c),
//   dk / d log l_c = k [x_c != x'_c] / l_c.
// Categories are unordered: only equality matters.
class HammingKernel final : public Kernel {
 public:
  // Lengthscales start at 1. REQUIRES: !dims.empty()
  explicit HammingKernel(std::vector<int> dims);

  std::unique_ptr<Kernel> Clone() const override;
  int num_params() const override;
  Eigen::VectorXd log_params() const override { return log_l_; }
  void set_log_params(const Eigen::VectorXd& p) override;
  Eigen::MatrixXd Matrix(const Eigen::MatrixXd& a,
                         const Eigen::MatrixXd& b) const override;
  Eigen::VectorXd ContractGradient(const Eigen::MatrixXd& x,
                                   const Eigen::MatrixXd& w) const override;
  Eigen::MatrixXd InputGradient(const Eigen::VectorXd& x,
                                const Eigen::MatrixXd& b) const override;

 private:
  std::vector<int> dims_;
  Eigen::VectorXd log_l_;
};

// The first-order additive Matérn-5/2 over the columns `dims`, one 1-d
// kernel per dimension averaged (Duvenaud et al., "Additive Gaussian
// processes", NeurIPS 2011, order 1):
//   k(x, x') = 1/D sum_j m(|x_j - x'_j| / l_j),  m the 1-d Matérn-5/2.
// It suits objectives that are sums of per-dimension effects (separable
// ones), where the product kernel needs exponentially more data; the GP
// bandit chooses between the two by marginal likelihood.
// Derivatives as Matern52Kernel's, per dimension, divided by D.
class AdditiveMatern52Kernel final : public Kernel {
 public:
  // Lengthscales start at 1. REQUIRES: !dims.empty()
  explicit AdditiveMatern52Kernel(std::vector<int> dims);

  std::unique_ptr<Kernel> Clone() const override;
  int num_params() const override;
  Eigen::VectorXd log_params() const override { return log_l_; }
  void set_log_params(const Eigen::VectorXd& p) override;
  Eigen::MatrixXd Matrix(const Eigen::MatrixXd& a,
                         const Eigen::MatrixXd& b) const override;
  Eigen::VectorXd ContractGradient(const Eigen::MatrixXd& x,
                                   const Eigen::MatrixXd& w) const override;
  Eigen::MatrixXd InputGradient(const Eigen::VectorXd& x,
                                const Eigen::MatrixXd& b) const override;

 private:
  std::vector<int> dims_;
  Eigen::VectorXd log_l_;
  Eigen::VectorXd inv_l_;
};

// k = k1 * k2; parameters are k1's followed by k2's. By the product rule,
// sum w_ij d(K1 o K2)_ij / dp = sum (w o K2)_ij dK1_ij / dp for k1's p.
class ProductKernel final : public Kernel {
 public:
  ProductKernel(std::unique_ptr<Kernel> k1, std::unique_ptr<Kernel> k2);

  std::unique_ptr<Kernel> Clone() const override;
  int num_params() const override;
  Eigen::VectorXd log_params() const override;
  void set_log_params(const Eigen::VectorXd& p) override;
  Eigen::MatrixXd Matrix(const Eigen::MatrixXd& a,
                         const Eigen::MatrixXd& b) const override;
  Eigen::VectorXd ContractGradient(const Eigen::MatrixXd& x,
                                   const Eigen::MatrixXd& w) const override;
  Eigen::MatrixXd InputGradient(const Eigen::VectorXd& x,
                                const Eigen::MatrixXd& b) const override;

 private:
  std::unique_ptr<Kernel> k1_, k2_;
};

// How the numeric dimensions combine.
enum class KernelStructure {
  kProduct,   // Matérn-5/2 ARD (default)
  kAdditive,  // AdditiveMatern52Kernel
};

// The kernel for a space whose columns `categorical[j]` say which dimensions
// are categorical: `structure` on the numeric ones times Hamming on the
// categorical ones (either alone when the other kind is absent).
// REQUIRES: !categorical.empty()
std::unique_ptr<Kernel> MakeMixedKernel(
    const std::vector<bool>& categorical,
    KernelStructure structure = KernelStructure::kProduct);

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_KERNEL_H_
