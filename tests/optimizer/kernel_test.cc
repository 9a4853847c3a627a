#include "optimizer/kernel.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace hypertune::optimizer {
namespace {

// Points with numeric columns in [0,1] and categorical columns (those
// flagged) holding indices 0..2.
Eigen::MatrixXd RandomPoints(int n, const std::vector<bool>& categorical,
                             std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0, 1);
  Eigen::MatrixXd x(n, static_cast<int>(categorical.size()));
  for (int i = 0; i < n; ++i) {
    for (size_t j = 0; j < categorical.size(); ++j) {
      x(i, j) = categorical[j] ? std::floor(3 * unit(rng)) : unit(rng);
    }
  }
  return x;
}

struct KernelCase {
  const char* name;
  std::vector<bool> categorical;
  KernelStructure structure = KernelStructure::kProduct;
};

class KernelGradientTest : public ::testing::TestWithParam<KernelCase> {};

TEST_P(KernelGradientTest, ParameterGradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(1);
  const std::vector<bool>& categorical = GetParam().categorical;
  std::unique_ptr<Kernel> k =
      MakeMixedKernel(categorical, GetParam().structure);
  Eigen::VectorXd p(k->num_params());
  for (int i = 0; i < p.size(); ++i) p[i] = -1.0 + 0.3 * i;
  k->set_log_params(p);
  const Eigen::MatrixXd x = RandomPoints(9, categorical, rng);
  Eigen::MatrixXd w = Eigen::MatrixXd::Random(9, 9);
  w = (w + w.transpose()).eval();
  const Eigen::VectorXd g = k->ContractGradient(x, w);
  ASSERT_EQ(g.size(), p.size());
  const double h = 1e-6;
  for (int i = 0; i < p.size(); ++i) {
    Eigen::VectorXd up = p, down = p;
    up[i] += h;
    down[i] -= h;
    k->set_log_params(up);
    const double f_up = (w.array() * k->Matrix(x, x).array()).sum();
    k->set_log_params(down);
    const double f_down = (w.array() * k->Matrix(x, x).array()).sum();
    k->set_log_params(p);
    EXPECT_NEAR(g[i], (f_up - f_down) / (2 * h), 1e-6 * (1 + std::abs(g[i])))
        << "parameter " << i;
  }
}

TEST_P(KernelGradientTest, InputGradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(2);
  const std::vector<bool>& categorical = GetParam().categorical;
  std::unique_ptr<Kernel> k =
      MakeMixedKernel(categorical, GetParam().structure);
  Eigen::VectorXd p(k->num_params());
  for (int i = 0; i < p.size(); ++i) p[i] = -0.5 - 0.2 * i;
  k->set_log_params(p);
  const Eigen::MatrixXd b = RandomPoints(6, categorical, rng);
  Eigen::VectorXd x = RandomPoints(1, categorical, rng).row(0).transpose();
  // Including a training point itself (r = 0).
  for (const Eigen::VectorXd& at : {x, Eigen::VectorXd(b.row(0).transpose())}) {
    const Eigen::MatrixXd grad = k->InputGradient(at, b);
    for (int j = 0; j < at.size(); ++j) {
      if (categorical[j]) {
        EXPECT_EQ(grad.col(j).norm(), 0.0);
        continue;
      }
      const double h = 1e-6;
      Eigen::VectorXd up = at, down = at;
      up[j] += h;
      down[j] -= h;
      const Eigen::VectorXd fd =
          (k->Matrix(up.transpose(), b) - k->Matrix(down.transpose(), b))
              .row(0)
              .transpose() /
          (2 * h);
      EXPECT_LT((grad.col(j) - fd).norm(), 1e-6) << "dimension " << j;
    }
  }
}

const KernelCase kKernelCases[] = {
    {"Matern", {false, false, false}},
    {"Hamming", {true, true}},
    {"Product", {false, true, false, true}},
    {"Additive", {false, false, false}, KernelStructure::kAdditive},
    {"AdditiveProduct", {false, true, false, true}, KernelStructure::kAdditive},
};

INSTANTIATE_TEST_SUITE_P(Kernels, KernelGradientTest,
                         ::testing::ValuesIn(kKernelCases),
                         [](const auto& info) {
                           return std::string(info.param.name);
                         });

TEST(Matern52KernelTest, KnownValues) {
  Matern52Kernel k({0, 1});
  k.set_log_params(Eigen::Vector2d(std::log(0.5), std::log(2.0)));
  Eigen::MatrixXd a(1, 2), b(2, 2);
  a << 0.1, 0.2;
  b << 0.1, 0.2,  //
      0.4, 1.0;
  const Eigen::MatrixXd kab = k.Matrix(a, b);
  EXPECT_DOUBLE_EQ(kab(0, 0), 1.0);
  // r = sqrt((0.3 / 0.5)^2 + (0.8 / 2)^2) = sqrt(0.52).
  const double r = std::sqrt(0.52), s5 = std::sqrt(5.0);
  EXPECT_NEAR(kab(0, 1), (1 + s5 * r + 5 * r * r / 3) * std::exp(-s5 * r),
              1e-14);
}

TEST(AdditiveMatern52KernelTest, AveragesOneDimensionalKernels) {
  AdditiveMatern52Kernel k({0, 1});
  k.set_log_params(Eigen::Vector2d(std::log(0.5), std::log(2.0)));
  Eigen::MatrixXd a(1, 2), b(2, 2);
  a << 0.1, 0.2;
  b << 0.1, 0.2,  //
      0.4, 1.0;
  const Eigen::MatrixXd kab = k.Matrix(a, b);
  EXPECT_DOUBLE_EQ(kab(0, 0), 1.0);
  const double s5 = std::sqrt(5.0);
  auto m = [s5](double r) {
    return (1 + s5 * r + 5 * r * r / 3) * std::exp(-s5 * r);
  };
  EXPECT_NEAR(kab(0, 1), (m(0.3 / 0.5) + m(0.8 / 2)) / 2, 1e-14);
  // Points differing in one dimension only stay correlated at least 1/2.
  Eigen::MatrixXd far(1, 2);
  far << 100.0, 0.2;
  EXPECT_NEAR(k.Matrix(a, far)(0, 0), 0.5, 1e-12);
}

TEST(AdditiveMatern52KernelTest, MatchesTheDirectFormulaAtEveryLengthscale) {
  // The kernel factors exp(-|u - v|) into per-point exponentials; they must
  // agree with the direct formula up to the bounds' shortest lengthscale.
  std::mt19937_64 rng(3);
  const Eigen::MatrixXd a = RandomPoints(7, {false, false}, rng);
  const Eigen::MatrixXd b = RandomPoints(9, {false, false}, rng);
  const double s5 = std::sqrt(5.0);
  for (double l : {0.025, 0.3, 10.0}) {
    AdditiveMatern52Kernel k({0, 1});
    k.set_log_params(Eigen::Vector2d(std::log(l), std::log(2 * l)));
    const Eigen::MatrixXd kab = k.Matrix(a, b);
    for (int i = 0; i < a.rows(); ++i) {
      for (int j = 0; j < b.rows(); ++j) {
        double expected = 0;
        for (int c = 0; c < 2; ++c) {
          const double r = std::abs(a(i, c) - b(j, c)) / (c == 0 ? l : 2 * l);
          expected += (1 + s5 * r + 5 * r * r / 3) * std::exp(-s5 * r) / 2;
        }
        EXPECT_NEAR(kab(i, j), expected, 1e-13 * (1 + expected))
            << "l " << l << " at " << i << "," << j;
      }
    }
  }
}

TEST(HammingKernelTest, DependsOnlyOnEquality) {
  HammingKernel k({0});
  k.set_log_params(Eigen::VectorXd::Constant(1, std::log(0.5)));
  Eigen::MatrixXd a(3, 1);
  a << 0, 1, 2;
  const Eigen::MatrixXd kaa = k.Matrix(a, a);
  EXPECT_DOUBLE_EQ(kaa(0, 0), 1.0);
  EXPECT_DOUBLE_EQ(kaa(0, 1), std::exp(-2.0));
  EXPECT_DOUBLE_EQ(kaa(0, 2), kaa(0, 1));  // 0-2 is not "farther" than 0-1.
}

}  // namespace
}  // namespace hypertune::optimizer
