#include "optimizer/metric_acquisition.h"

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "optimizer/kernel.h"
#include "optimizer/pareto.h"
#include "optimizer/splitmix.h"

namespace hypertune::optimizer {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

TEST(LogProbabilityWithinTest, MatchesTheNormalCdf) {
  struct Case {
    double mean, sigma, lower, upper;
  };
  for (const Case& c : std::vector<Case>{{0.3, 1.2, -kInf, 1.0},
                                         {0.3, 1.2, -0.5, kInf},
                                         {0.3, 1.2, -0.5, 1.0},
                                         {-1.0, 0.5, 0.0, 0.4},
                                         {2.0, 0.5, -1.0, 0.0}}) {
    const double expected =
        (std::isfinite(c.upper) ? NormalCdf((c.upper - c.mean) / c.sigma) : 1) -
        (std::isfinite(c.lower) ? NormalCdf((c.lower - c.mean) / c.sigma) : 0);
    EXPECT_NEAR(
        std::exp(LogProbabilityWithin(c.mean, c.sigma, c.lower, c.upper).value),
        expected, 1e-12)
        << c.mean << " " << c.sigma << " [" << c.lower << ", " << c.upper
        << "]";
  }
  EXPECT_EQ(LogProbabilityWithin(3, 1, -kInf, kInf).value, 0.0);
}

TEST(LogProbabilityWithinTest, StaysFiniteAndAccurateInTheTails) {
  // P(F <= -30) for F ~ N(0, 1): log Phi(-30) = -454.32...
  EXPECT_NEAR(LogProbabilityWithin(0, 1, -kInf, -30).value, -454.3212, 1e-3);
  // Both bounds far in one tail: Phi(-40) - Phi(-41) ~ Phi(-40).
  const double tail = LogProbabilityWithin(0, 1, 40, 41).value;
  EXPECT_TRUE(std::isfinite(tail));
  EXPECT_NEAR(tail, LogProbabilityWithin(0, 1, 40, kInf).value, 1e-9);
  EXPECT_NEAR(LogProbabilityWithin(0, 1, -41, -40).value, tail, 1e-9);
  // A certain model: ~0 inside, very negative outside, never NaN.
  EXPECT_NEAR(LogProbabilityWithin(0.5, 0, 0, 1).value, 0.0, 1e-12);
  EXPECT_LT(LogProbabilityWithin(1.5, 0, 0, 1).value, -1e15);
}

TEST(LogProbabilityWithinTest, DerivativesMatchFiniteDifferences) {
  struct Case {
    double mean, sigma, lower, upper;
  };
  const double h = 1e-6;
  for (const Case& c : std::vector<Case>{{0.3, 1.2, -kInf, 1.0},
                                         {0.3, 1.2, -0.5, kInf},
                                         {0.3, 1.2, -0.5, 1.0},
                                         {-3.0, 0.5, 0.0, 0.4},
                                         {8.0, 0.5, -kInf, 0.0}}) {
    const AcquisitionValue v =
        LogProbabilityWithin(c.mean, c.sigma, c.lower, c.upper);
    const double dm =
        (LogProbabilityWithin(c.mean + h, c.sigma, c.lower, c.upper).value -
         LogProbabilityWithin(c.mean - h, c.sigma, c.lower, c.upper).value) /
        (2 * h);
    const double ds =
        (LogProbabilityWithin(c.mean, c.sigma + h, c.lower, c.upper).value -
         LogProbabilityWithin(c.mean, c.sigma - h, c.lower, c.upper).value) /
        (2 * h);
    EXPECT_NEAR(v.d_mean, dm, 1e-5 * (1 + std::abs(dm))) << c.mean;
    EXPECT_NEAR(v.d_sigma, ds, 1e-5 * (1 + std::abs(ds))) << c.mean;
  }
}

TEST(LogSoftplusTest, MatchesTheDirectFormulaAndItsAsymptotes) {
  for (double u : {-30.0, -3.0, 0.0, 2.5, 30.0}) {
    EXPECT_NEAR(LogSoftplus(u), std::log(std::log1p(std::exp(u))), 1e-12) << u;
  }
  EXPECT_DOUBLE_EQ(LogSoftplus(-1000), -1000);
  EXPECT_NEAR(LogSoftplus(1000), std::log(1000.0), 1e-12);
}

// A GP on a few points of [0,1]^2 with fixed parameters.
GaussianProcess SmallGp(double shift, const Kernel& kernel) {
  Eigen::MatrixXd x(5, 2);
  x << 0.1, 0.2, 0.8, 0.3, 0.5, 0.5, 0.3, 0.9, 0.9, 0.9;
  Eigen::VectorXd y(5);
  for (int i = 0; i < 5; ++i) {
    y[i] = std::sin(3 * x(i, 0) + shift) + x(i, 1) * shift;
  }
  GpParams params;
  params.kernel = Eigen::VectorXd::Constant(kernel.num_params(), std::log(0.4));
  params.log_noise_variance = std::log(1e-4);
  return GaussianProcess::Create(kernel, params, x, y).value();
}

TEST(LogHypervolumeImprovementTest, CertainPosteriorGivesTheExactImprovement) {
  const std::unique_ptr<Kernel> kernel = MakeMixedKernel({false, false});
  const GaussianProcess a = SmallGp(0, *kernel), b = SmallGp(1, *kernel);
  Eigen::MatrixXd front(3, 2);
  front << 1, 0, 0.4, 0.6, 0, 1;
  Eigen::VectorXd r(2);
  r << -1, -1;
  HypervolumeImprovementOptions options;
  options.samples = 4096;
  options.temperature = 1e-6;
  const LogHypervolumeImprovement ehvi({&a, &b}, front, r, 3, options);
  for (const Eigen::Vector2d& y :
       {Eigen::Vector2d(0.8, 0.8), Eigen::Vector2d(1.5, -0.5),
        Eigen::Vector2d(0.2, 0.7)}) {
    Eigen::MatrixXd with(4, 2);
    with << front, y.transpose();
    const double improvement = Hypervolume(with, r) - Hypervolume(front, r);
    const double estimate =
        HypervolumeScalarizationConstant(2) *
        std::exp(ehvi.FromMoments(y, Eigen::Vector2d(1e-12, 1e-12), nullptr,
                                  nullptr));
    EXPECT_NEAR(estimate, improvement, 0.02 * improvement) << y.transpose();
  }
  // A dominated outcome improves nothing: far below the improving ones.
  const double dominated =
      ehvi.FromMoments(Eigen::Vector2d(0.2, 0.2), Eigen::Vector2d(1e-12, 1e-12),
                       nullptr, nullptr);
  const double improving =
      ehvi.FromMoments(Eigen::Vector2d(0.8, 0.8), Eigen::Vector2d(1e-12, 1e-12),
                       nullptr, nullptr);
  EXPECT_LT(dominated, improving - 100);
}

TEST(LogHypervolumeImprovementTest, UncertaintyAddsExpectedImprovement) {
  const std::unique_ptr<Kernel> kernel = MakeMixedKernel({false, false});
  const GaussianProcess a = SmallGp(0, *kernel), b = SmallGp(1, *kernel);
  Eigen::MatrixXd front(2, 2);
  front << 1, 0, 0, 1;
  const LogHypervolumeImprovement ehvi({&a, &b}, front, Eigen::Vector2d(-1, -1),
                                       3);
  // On the front itself: improvement only through the spread.
  const Eigen::Vector2d on_front(1.0, 0.0);
  double previous = -kInf;
  for (double sigma : {0.01, 0.1, 0.5}) {
    const double v = ehvi.FromMoments(on_front, Eigen::Vector2d(sigma, sigma),
                                      nullptr, nullptr);
    EXPECT_GT(v, previous) << sigma;
    previous = v;
  }
}

TEST(LogHypervolumeImprovementTest, GradientsMatchFiniteDifferences) {
  const std::unique_ptr<Kernel> kernel = MakeMixedKernel({false, false});
  const GaussianProcess a = SmallGp(0, *kernel), b = SmallGp(1, *kernel);
  Eigen::MatrixXd front(2, 2);
  front << 0.9, 0.2, 0.3, 1.1;
  const LogHypervolumeImprovement ehvi({&a, &b}, front,
                                       Eigen::Vector2d(-1.5, -1.5), 11);
  // Moments: analytic against central differences.
  const Eigen::Vector2d mean(0.6, 0.7), sigma(0.3, 0.2);
  Eigen::VectorXd dm, ds;
  ehvi.FromMoments(mean, sigma, &dm, &ds);
  const double h = 1e-7;
  for (int i = 0; i < 2; ++i) {
    Eigen::Vector2d up = mean, down = mean;
    up[i] += h;
    down[i] -= h;
    EXPECT_NEAR(dm[i],
                (ehvi.FromMoments(up, sigma, nullptr, nullptr) -
                 ehvi.FromMoments(down, sigma, nullptr, nullptr)) /
                    (2 * h),
                1e-4 * (1 + std::abs(dm[i])));
    Eigen::Vector2d sup = sigma, sdown = sigma;
    sup[i] += h;
    sdown[i] -= h;
    EXPECT_NEAR(ds[i],
                (ehvi.FromMoments(mean, sup, nullptr, nullptr) -
                 ehvi.FromMoments(mean, sdown, nullptr, nullptr)) /
                    (2 * h),
                1e-4 * (1 + std::abs(ds[i])));
  }
  // Inputs: through both GPs.
  for (const Eigen::Vector2d& x :
       {Eigen::Vector2d(0.37, 0.61), Eigen::Vector2d(0.7, 0.15)}) {
    Eigen::VectorXd grad;
    ehvi.Evaluate(x, &grad);
    for (int j = 0; j < 2; ++j) {
      Eigen::VectorXd up = x, down = x;
      up[j] += 1e-6;
      down[j] -= 1e-6;
      const double fd =
          (ehvi.Evaluate(up, nullptr) - ehvi.Evaluate(down, nullptr)) / 2e-6;
      EXPECT_NEAR(grad[j], fd, 1e-3 * (1 + std::abs(fd))) << x.transpose();
    }
    Eigen::MatrixXd xs(1, 2);
    xs.row(0) = x.transpose();
    EXPECT_NEAR(ehvi.EvaluateBatch(xs)[0], ehvi.Evaluate(x, nullptr), 1e-9);
  }
}

TEST(ConstrainedAcquisitionTest, AddsTheLogProbabilityOfEveryConstraint) {
  const std::unique_ptr<Kernel> kernel = MakeMixedKernel({false, false});
  const GaussianProcess f = SmallGp(0, *kernel), c1 = SmallGp(1, *kernel),
                        c2 = SmallGp(2, *kernel);
  const AcquisitionFunction ei(&f, nullptr, AcquisitionKind::kLogEi, 0.5, 1.8);
  const std::vector<ConstraintModel> constraints = {{&c1, -kInf, 0.3},
                                                    {&c2, -0.2, 1.0}};
  const ConstrainedAcquisition with_objective(&ei, constraints, nullptr);
  const ConstrainedAcquisition feasibility_only(nullptr, constraints, nullptr);
  const Eigen::Vector2d x(0.42, 0.58);
  double expected = 0;
  for (const ConstraintModel& c : constraints) {
    Eigen::VectorXd mean, var;
    c.gp->Predict(x.transpose(), &mean, &var);
    expected +=
        std::log((std::isfinite(c.upper)
                      ? NormalCdf((c.upper - mean[0]) / std::sqrt(var[0]))
                      : 1.0) -
                 (std::isfinite(c.lower)
                      ? NormalCdf((c.lower - mean[0]) / std::sqrt(var[0]))
                      : 0.0));
  }
  EXPECT_NEAR(feasibility_only.Evaluate(x, nullptr), expected, 1e-10);
  EXPECT_NEAR(with_objective.Evaluate(x, nullptr),
              ei.Evaluate(x, nullptr) + expected, 1e-10);
  // Gradients and the batch form agree with the pointwise value.
  for (const ConstrainedAcquisition* a : {&with_objective, &feasibility_only}) {
    Eigen::VectorXd grad;
    a->Evaluate(x, &grad);
    for (int j = 0; j < 2; ++j) {
      Eigen::VectorXd up = x, down = x;
      up[j] += 1e-6;
      down[j] -= 1e-6;
      const double fd =
          (a->Evaluate(up, nullptr) - a->Evaluate(down, nullptr)) / 2e-6;
      EXPECT_NEAR(grad[j], fd, 1e-4 * (1 + std::abs(fd)));
    }
    Eigen::MatrixXd xs(1, 2);
    xs.row(0) = x.transpose();
    EXPECT_NEAR(a->EvaluateBatch(xs)[0], a->Evaluate(x, nullptr), 1e-10);
  }
}

}  // namespace
}  // namespace hypertune::optimizer
