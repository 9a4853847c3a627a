#include "optimizer/acquisition.h"

#include <cmath>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "optimizer/acquisition_optimizer.h"
#include "optimizer/gp.h"
#include "optimizer/kernel.h"

namespace hypertune::optimizer {
namespace {

// log h(z) in long double straight from the definition; its ~19 digits
// survive the cancellation down to z = -30 with >12 digits to spare.
double LogHReference(double z) {
  const long double zl = z;
  const long double pdf = std::exp(-zl * zl / 2) / std::sqrt(2 * M_PIl);
  const long double cdf = 0.5L * std::erfc(-zl / std::sqrt(2.0L));
  return static_cast<double>(std::log(pdf + zl * cdf));
}

TEST(LogHTest, MatchesTheDefinitionAcrossBranches) {
  for (double z : {5.0, 1.0, 0.0, -0.5, -0.999, -1.0, -1.001, -3.0, -10.0,
                   -24.99, -25.0, -25.01, -30.0}) {
    double dz;
    const double value = LogH(z, &dz);
    EXPECT_NEAR(value, LogHReference(z), 1e-9 * (1 + std::abs(value)))
        << "z = " << z;
    const double h = 1e-5;
    double unused;
    const double fd = (LogH(z + h, &unused) - LogH(z - h, &unused)) / (2 * h);
    EXPECT_NEAR(dz, fd, 1e-6 * (1 + std::abs(fd))) << "z = " << z;
  }
}

TEST(LogHTest, FiniteFarBelowWithTheAsymptote) {
  for (double z : {-1e3, -1e5, -1e8, -1e20, -1e200}) {
    double dz;
    const double value = LogH(z, &dz);
    EXPECT_TRUE(std::isfinite(value)) << z;
    EXPECT_TRUE(std::isfinite(dz)) << z;
    EXPECT_GT(dz, 0) << z;
    if (std::abs(z) < 1e50) {
      // log phi(z) - 2 log|z|.
      const double asymptote =
          -0.5 * z * z - 0.5 * std::log(2 * M_PI) - 2 * std::log(-z);
      EXPECT_NEAR(value, asymptote, 1e-6 * std::abs(asymptote)) << z;
      EXPECT_NEAR(dz, -z, 1e-3 * -z) << z;  // Phi / h ~ |z|.
    }
  }
}

TEST(AcquireTest, LogEiClosedForm) {
  // EI(mu = 1, sigma = 2, best = 0) = sigma h(0.5).
  const double z = 0.5;
  const double pdf = std::exp(-z * z / 2) / std::sqrt(2 * M_PI);
  const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
  const AcquisitionValue a = Acquire(AcquisitionKind::kLogEi, 1, 2, 0, 0);
  EXPECT_NEAR(a.value, std::log(2 * (pdf + z * cdf)), 1e-14);
}

TEST(AcquireTest, SigmaToZeroStaysFinite) {
  for (AcquisitionKind kind : {AcquisitionKind::kLogEi, AcquisitionKind::kUcb,
                               AcquisitionKind::kLogPi}) {
    for (double sigma : {0.0, 1e-300, 1e-12}) {
      for (double mean : {-1.0, 0.0, 1.0}) {
        const AcquisitionValue a = Acquire(kind, mean, sigma, 0.0, 1.8);
        EXPECT_TRUE(std::isfinite(a.value));
        EXPECT_TRUE(std::isfinite(a.d_mean));
        EXPECT_TRUE(std::isfinite(a.d_sigma));
      }
    }
  }
  // Certain improvement: EI -> mu - best.
  EXPECT_NEAR(Acquire(AcquisitionKind::kLogEi, 1.0, 0.0, 0.0, 0).value, 0.0,
              1e-9);
}

TEST(AcquireTest, GradientsMatchFiniteDifferences) {
  for (AcquisitionKind kind : {AcquisitionKind::kLogEi, AcquisitionKind::kUcb,
                               AcquisitionKind::kLogPi}) {
    for (double mean : {-8.0, -2.0, 0.3, 2.0}) {
      const double sigma = 0.7, h = 1e-6;
      const AcquisitionValue a = Acquire(kind, mean, sigma, 0.5, 1.8);
      const double fd_mean = (Acquire(kind, mean + h, sigma, 0.5, 1.8).value -
                              Acquire(kind, mean - h, sigma, 0.5, 1.8).value) /
                             (2 * h);
      const double fd_sigma = (Acquire(kind, mean, sigma + h, 0.5, 1.8).value -
                               Acquire(kind, mean, sigma - h, 0.5, 1.8).value) /
                              (2 * h);
      EXPECT_NEAR(a.d_mean, fd_mean, 1e-5 * (1 + std::abs(fd_mean)));
      EXPECT_NEAR(a.d_sigma, fd_sigma, 1e-5 * (1 + std::abs(fd_sigma)));
    }
  }
}

TEST(LogNormalCdfTest, StableInTheTail) {
  double d;
  EXPECT_NEAR(LogNormalCdf(0.0, &d), std::log(0.5), 1e-15);
  // log Phi(-40) ~ -804.608.
  const double v = LogNormalCdf(-40.0, &d);
  EXPECT_NEAR(v, -804.6084420137538, 1e-8);
  EXPECT_NEAR(d, 40.025, 0.01);
}

struct Model {
  GaussianProcess gp;
  GaussianProcess feasibility;
};

Model MakeModel() {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0, 1);
  Eigen::MatrixXd x(12, 2);
  Eigen::VectorXd y(12), labels(12);
  for (int i = 0; i < 12; ++i) {
    x(i, 0) = unit(rng);
    x(i, 1) = unit(rng);
    y[i] = -std::pow(x(i, 0) - 0.3, 2) - std::pow(x(i, 1) - 0.6, 2);
    labels[i] = i % 3 == 0 ? -1 : 1;
  }
  const auto kernel = MakeMixedKernel({false, false});
  GpParams p = GpPrior::ForDimension(2).Mode(2);
  p.log_noise_variance = std::log(1e-4);
  return {GaussianProcess::Create(*kernel, p, x, y).value(),
          GaussianProcess::Create(*kernel, p, x, labels).value()};
}

// The gradient Evaluate gives at x against central differences, and its
// value against EvaluateBatch's.
void ExpectConsistentAt(const Acquisition& acq, const Eigen::Vector2d& x) {
  Eigen::VectorXd grad;
  const double value = acq.Evaluate(x, &grad);
  EXPECT_NEAR(value, acq.EvaluateBatch(x.transpose())[0], 1e-10);
  for (int j = 0; j < 2; ++j) {
    const double h = 1e-6;
    Eigen::Vector2d up = x, down = x;
    up[j] += h;
    down[j] -= h;
    const double fd =
        (acq.Evaluate(up, nullptr) - acq.Evaluate(down, nullptr)) / (2 * h);
    EXPECT_NEAR(grad[j], fd, 1e-5 * (1 + std::abs(fd)));
  }
}

TEST(AcquisitionFunctionTest, GradientMatchesFiniteDifferences) {
  const Model m = MakeModel();
  for (AcquisitionKind kind : {AcquisitionKind::kLogEi, AcquisitionKind::kUcb,
                               AcquisitionKind::kLogPi}) {
    for (const GaussianProcess* feasibility :
         {static_cast<const GaussianProcess*>(nullptr), &m.feasibility}) {
      const AcquisitionFunction acq(&m.gp, feasibility, kind, 0.0, 1.8);
      for (const Eigen::Vector2d& x :
           {Eigen::Vector2d(0.2, 0.7), Eigen::Vector2d(0.9, 0.05)}) {
        ExpectConsistentAt(acq, x);
      }
    }
  }
}

TEST(IntegratedAcquisitionTest, AveragesWhatTheLogIsOfAndDifferentiates) {
  const Model m = MakeModel();
  // A second model: the same data under shorter lengthscales.
  GpParams p = m.gp.params();
  p.kernel.array() -= 1.0;
  const std::vector<GaussianProcess> models = {
      m.gp,
      GaussianProcess::Create(m.gp.kernel(), p, m.gp.x(), m.gp.y()).value()};
  const AcquisitionFunction a(&models[0], nullptr, AcquisitionKind::kLogEi, 0.0,
                              1.8);
  const AcquisitionFunction b(&models[1], nullptr, AcquisitionKind::kLogEi, 0.0,
                              1.8);
  const AcquisitionFunction ua(&models[0], nullptr, AcquisitionKind::kUcb, 0.0,
                               1.8);
  const AcquisitionFunction ub(&models[1], nullptr, AcquisitionKind::kUcb, 0.0,
                               1.8);
  const IntegratedAcquisition both(models, nullptr, AcquisitionKind::kLogEi,
                                   0.0, 1.8);
  const std::vector<GaussianProcess> first = {models[0]};
  const IntegratedAcquisition alone(first, nullptr, AcquisitionKind::kLogEi,
                                    0.0, 1.8);
  const IntegratedAcquisition ucb(models, nullptr, AcquisitionKind::kUcb, 0.0,
                                  1.8);
  const IntegratedAcquisition feasible(models, &m.feasibility,
                                       AcquisitionKind::kLogEi, 0.0, 1.8);
  for (const Eigen::Vector2d& x :
       {Eigen::Vector2d(0.2, 0.7), Eigen::Vector2d(0.9, 0.05)}) {
    const double va = a.Evaluate(x, nullptr), vb = b.Evaluate(x, nullptr);
    ASSERT_NE(va, vb);
    // log((EI_a + EI_b) / 2), and the plain mean for UCB.
    EXPECT_NEAR(both.Evaluate(x, nullptr),
                std::log((std::exp(va) + std::exp(vb)) / 2), 1e-12);
    EXPECT_NEAR(ucb.Evaluate(x, nullptr),
                (ua.Evaluate(x, nullptr) + ub.Evaluate(x, nullptr)) / 2, 1e-12);
    EXPECT_NEAR(alone.Evaluate(x, nullptr), va, 1e-12);
    for (const IntegratedAcquisition* acq : {&both, &ucb, &feasible}) {
      ExpectConsistentAt(*acq, x);
    }
  }
}

TEST(MaximizeAcquisitionTest, FindsTheMaximumAndRanksResults) {
  const Model m = MakeModel();
  const AcquisitionFunction acq(&m.gp, nullptr, AcquisitionKind::kUcb, 0, 0);
  AcquisitionDomain domain{
      {0, 0}, Eigen::Vector2d(0, 0), Eigen::Vector2d(1, 1), {}};
  const std::vector<ScoredPoint> ranked = MaximizeAcquisition(
      acq, domain, Eigen::MatrixXd(0, 2), Eigen::Vector2d(0.1, 0.1), 3);
  ASSERT_FALSE(ranked.empty());
  for (size_t i = 1; i < ranked.size(); ++i) {
    EXPECT_GE(ranked[i - 1].value, ranked[i].value);
  }
  // With beta = 0 the acquisition is the posterior mean; no Sobol point of
  // a dense grid beats the polished maximum.
  double grid_best = -1e300;
  for (double a = 0; a <= 1; a += 0.01) {
    for (double b = 0; b <= 1; b += 0.01) {
      grid_best =
          std::max(grid_best, acq.Evaluate(Eigen::Vector2d(a, b), nullptr));
    }
  }
  EXPECT_GE(ranked[0].value, grid_best - 1e-6);
}

// A known acquisition that counts its evaluations: a peak at x0 = 0.3 on
// the numeric column 0, plus 1 for each categorical column at category
// `peak`. Records which (column, category) the evaluations without a
// gradient (the categorical ascent's) saw.
class CountingAcquisition final : public Acquisition {
 public:
  CountingAcquisition(std::vector<int> categorical, int peak)
      : categorical_(std::move(categorical)), peak_(peak) {}

  double Evaluate(const Eigen::VectorXd& x,
                  Eigen::VectorXd* grad) const override {
    if (grad != nullptr) {
      ++with_gradient_;
      *grad = Eigen::VectorXd::Zero(x.size());
      (*grad)[0] = -2 * (x[0] - 0.3);
    } else {
      ++without_gradient_;
      for (int j : categorical_) seen_.insert({j, static_cast<int>(x[j])});
    }
    return Value(x);
  }
  Eigen::VectorXd EvaluateBatch(const Eigen::MatrixXd& xs) const override {
    Eigen::VectorXd out(xs.rows());
    for (Eigen::Index i = 0; i < xs.rows(); ++i) {
      out[i] = Value(xs.row(i).transpose());
    }
    return out;
  }

  int without_gradient() const { return without_gradient_; }
  // Whether an evaluation without a gradient saw `category` in column j.
  bool Saw(int j, int category) const { return seen_.contains({j, category}); }

 private:
  double Value(const Eigen::VectorXd& x) const {
    double v = -(x[0] - 0.3) * (x[0] - 0.3);
    for (int j : categorical_) v += x[j] == peak_ ? 1.0 : 0.0;
    return v;
  }

  std::vector<int> categorical_;
  int peak_;
  mutable int with_gradient_ = 0;
  mutable int without_gradient_ = 0;
  mutable std::set<std::pair<int, int>> seen_;
};

TEST(MaximizeAcquisitionTest, CategoryAscentTriesEveryCategoryThatFits) {
  const CountingAcquisition acq({1, 2}, 2);
  const AcquisitionDomain domain{
      {0, 12, 3}, Eigen::Vector3d(0, 0, 0), Eigen::Vector3d(1, 1, 1), {}};
  AcquisitionOptimizerOptions options;
  options.raw_samples = 16;
  options.perturbations = 0;
  const std::vector<ScoredPoint> ranked =
      MaximizeAcquisition(acq, domain, Eigen::MatrixXd(0, 3),
                          Eigen::Vector3d(0.1, 0, 0), 5, options);
  ASSERT_FALSE(ranked.empty());
  for (int c = 0; c < 12; ++c) EXPECT_TRUE(acq.Saw(1, c)) << c;
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(acq.Saw(2, c)) << c;
  EXPECT_EQ(ranked[0].x[1], 2);
  EXPECT_EQ(ranked[0].x[2], 2);
  EXPECT_NEAR(ranked[0].x[0], 0.3, 1e-4);
}

// A 1,000-category coordinate (a conditional space's root) cost 1,000
// evaluations per polish start; the ascent now stays within
// max_category_evaluations, the small coordinate still tried in full.
TEST(MaximizeAcquisitionTest, CategoryAscentStaysWithinItsBudget) {
  const CountingAcquisition acq({1, 2}, 2);
  const AcquisitionDomain domain{
      {0, 1000, 3}, Eigen::Vector3d(0, 0, 0), Eigen::Vector3d(1, 1, 1), {}};
  const AcquisitionOptimizerOptions options;
  const std::vector<ScoredPoint> ranked =
      MaximizeAcquisition(acq, domain, Eigen::MatrixXd(0, 3),
                          Eigen::Vector3d(0.1, 0, 0), 5, options);
  ASSERT_FALSE(ranked.empty());
  EXPECT_TRUE(std::isfinite(ranked[0].value));
  // Per start: the value before the ascent, the categories tried, the value
  // after it.
  EXPECT_LE(acq.without_gradient(),
            options.polish_starts * (options.max_category_evaluations + 2));
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(acq.Saw(2, c)) << c;
}

}  // namespace
}  // namespace hypertune::optimizer
