#include "optimizer/gp.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "optimizer/hyperparameter_sampling.h"
#include "optimizer/kernel.h"
#include "optimizer/output_transform.h"

namespace hypertune::optimizer {
namespace {

struct Data {
  Eigen::MatrixXd x;
  Eigen::VectorXd y;
};

Data SmoothData(int n, int d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  Data data{Eigen::MatrixXd(n, d), Eigen::VectorXd(n)};
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) data.x(i, j) = unit(rng);
    data.y[i] = std::sin(3 * data.x(i, 0)) + data.x.row(i).squaredNorm();
  }
  data.y = Standardize(data.y);
  return data;
}

TEST(NegLogPosteriorTest, GradientMatchesFiniteDifferences) {
  const Data data = SmoothData(15, 3, 1);
  std::vector<bool> categorical = {false, false, true};
  Data mixed = data;
  for (int i = 0; i < mixed.x.rows(); ++i) {
    mixed.x(i, 2) = std::floor(3 * mixed.x(i, 2));
  }
  auto check = [](const Kernel& kernel, const Data& d) {
    const GpPrior prior = GpPrior::ForDimension(3);
    GpParams p;
    p.kernel = Eigen::Vector3d(-1.0, -0.3, 0.2);
    p.log_signal_variance = 0.3;
    p.log_noise_variance = -3;
    p.mean = 0.1;
    const Eigen::VectorXd flat = p.Flat();
    Eigen::VectorXd grad;
    const double value = NegLogPosterior(kernel, d.x, d.y, flat, prior, &grad);
    ASSERT_TRUE(std::isfinite(value));
    for (int i = 0; i < flat.size(); ++i) {
      const double h = 1e-6;
      Eigen::VectorXd up = flat, down = flat;
      up[i] += h;
      down[i] -= h;
      const double fd =
          (NegLogPosterior(kernel, d.x, d.y, up, prior, nullptr) -
           NegLogPosterior(kernel, d.x, d.y, down, prior, nullptr)) /
          (2 * h);
      EXPECT_NEAR(grad[i], fd, 1e-5 * (1 + std::abs(fd))) << "parameter " << i;
    }
  };
  check(*MakeMixedKernel({false, false, false}), data);
  check(*MakeMixedKernel(categorical), mixed);
}

TEST(SampleGpParamsTest, DrawsStayInBoundsAndFollowTheData) {
  // y varies along x0 only: the draws give x1 the longer lengthscale, and
  // are reproducible from the generator's seed.
  std::mt19937_64 engine(3);
  std::uniform_real_distribution<double> unit(0, 1);
  Eigen::MatrixXd x(30, 2);
  Eigen::VectorXd y(30);
  for (int i = 0; i < 30; ++i) {
    x(i, 0) = unit(engine);
    x(i, 1) = unit(engine);
    y[i] = std::sin(6 * x(i, 0));
  }
  y = Standardize(y);
  const auto kernel = MakeMixedKernel({false, false});
  const GpPrior prior = GpPrior::ForDimension(2);
  const double min_noise = 1e-6;
  const GpParams start =
      FitGpParams(*kernel, x, y, {prior.Mode(2)}, prior, min_noise, 60);
  SplitMix64 rng(11);
  const std::vector<GpParams> draws = SampleGpParams(
      *kernel, x, y, start, prior, min_noise, rng, {.samples = 12});
  ASSERT_EQ(draws.size(), 12u);
  const ParamBounds bounds = GpParamBounds(2, min_noise);
  double log_l0 = 0, log_l1 = 0;
  int distinct = 0;
  for (size_t k = 0; k < draws.size(); ++k) {
    const Eigen::VectorXd flat = draws[k].Flat();
    EXPECT_TRUE((flat.array() >= bounds.lower.array()).all());
    EXPECT_TRUE((flat.array() <= bounds.upper.array()).all());
    log_l0 += draws[k].kernel[0] / draws.size();
    log_l1 += draws[k].kernel[1] / draws.size();
    if (k > 0 && !(draws[k] == draws[k - 1])) ++distinct;
  }
  // A chain that never moved would return copies of the start.
  EXPECT_GE(distinct, 6);
  // Around the MAP fit along x0; far longer along the irrelevant x1.
  EXPECT_NEAR(log_l0, start.kernel[0], 0.5);
  EXPECT_GT(log_l1, log_l0 + 1.0);
  SplitMix64 again(11);
  const std::vector<GpParams> replay = SampleGpParams(
      *kernel, x, y, start, prior, min_noise, again, {.samples = 12});
  for (size_t k = 0; k < draws.size(); ++k) EXPECT_TRUE(replay[k] == draws[k]);
}

TEST(GaussianProcessTest, IncrementalCholeskyAgreesWithFullFactorization) {
  const Data data = SmoothData(40, 4, 2);
  const auto kernel = MakeMixedKernel({false, false, false, false});
  GpParams p = GpPrior::ForDimension(4).Mode(4);
  p.log_noise_variance = std::log(1e-6);
  const GaussianProcess full =
      GaussianProcess::Create(*kernel, p, data.x, data.y).value();
  GaussianProcess grown =
      GaussianProcess::Create(*kernel, p, data.x.topRows(25), data.y.head(25))
          .value();
  for (int i = 25; i < 40; ++i) {
    ASSERT_TRUE(grown.AddPoint(data.x.row(i).transpose(), data.y[i]).ok());
  }
  ASSERT_EQ(grown.size(), 40);
  EXPECT_LT((grown.cholesky() - full.cholesky()).cwiseAbs().maxCoeff(), 1e-9);
  Eigen::VectorXd m1, v1, m2, v2;
  const Eigen::MatrixXd q = SmoothData(10, 4, 3).x;
  full.Predict(q, &m1, &v1);
  grown.Predict(q, &m2, &v2);
  EXPECT_LT((m1 - m2).cwiseAbs().maxCoeff(), 1e-8);
  EXPECT_LT((v1 - v2).cwiseAbs().maxCoeff(), 1e-8);
}

TEST(GaussianProcessTest, DuplicatePointsStayFactorable) {
  // Exact duplicates with a tiny noise: the jitter keeps K factorable.
  Eigen::MatrixXd x(3, 1);
  x << 0.5, 0.5, 0.5;
  const auto kernel = MakeMixedKernel({false});
  GpParams p = GpPrior::ForDimension(1).Mode(1);
  p.log_noise_variance = std::log(1e-12);
  absl::StatusOr<GaussianProcess> gp =
      GaussianProcess::Create(*kernel, p, x, Eigen::Vector3d(1, 1, 1));
  ASSERT_TRUE(gp.ok()) << gp.status();
  ASSERT_TRUE(gp->AddPoint(Eigen::VectorXd::Constant(1, 0.5), 1.0).ok());
  Eigen::VectorXd m, v;
  gp->Predict(x, &m, &v);
  EXPECT_TRUE(m.allFinite());
  EXPECT_TRUE(v.allFinite());
}

TEST(GaussianProcessTest, PosteriorInterpolatesTrainingDataWithSmallNoise) {
  const Data data = SmoothData(30, 2, 4);
  const auto kernel = MakeMixedKernel({false, false});
  const GpPrior prior = GpPrior::ForDimension(2);
  const GpParams p =
      FitGpParams(*kernel, data.x, data.y, {prior.Mode(2)}, prior, 1e-6, 100);
  EXPECT_LT(std::exp(p.log_noise_variance), 1e-2);
  const GaussianProcess gp =
      GaussianProcess::Create(*kernel, p, data.x, data.y).value();
  Eigen::VectorXd mean, var;
  gp.Predict(data.x, &mean, &var);
  EXPECT_LT((mean - data.y).cwiseAbs().maxCoeff(), 0.05);
  EXPECT_LT(var.maxCoeff(), 0.01);
  // Far less certain away from the data.
  Eigen::MatrixXd far(1, 2);
  far << 3.0, 3.0;
  gp.Predict(far, &mean, &var);
  EXPECT_GT(var[0], 0.5 * std::exp(p.log_signal_variance));
}

TEST(GaussianProcessTest,
     PredictWithGradientMatchesPredictAndFiniteDifferences) {
  const Data data = SmoothData(20, 3, 5);
  const auto kernel = MakeMixedKernel({false, false, false});
  GpParams p = GpPrior::ForDimension(3).Mode(3);
  p.mean = 0.2;
  const GaussianProcess gp =
      GaussianProcess::Create(*kernel, p, data.x, data.y).value();
  const Eigen::Vector3d x(0.3, 0.6, 0.1);
  double mean, var;
  Eigen::VectorXd dmean, dvar;
  gp.PredictWithGradient(x, &mean, &var, &dmean, &dvar);
  Eigen::VectorXd m, v;
  gp.Predict(x.transpose(), &m, &v);
  EXPECT_NEAR(mean, m[0], 1e-12);
  EXPECT_NEAR(var, v[0], 1e-12);
  for (int j = 0; j < 3; ++j) {
    const double h = 1e-6;
    Eigen::Vector3d up = x, down = x;
    up[j] += h;
    down[j] -= h;
    Eigen::VectorXd mu, vu, md, vd;
    gp.Predict(up.transpose(), &mu, &vu);
    gp.Predict(down.transpose(), &md, &vd);
    EXPECT_NEAR(dmean[j], (mu[0] - md[0]) / (2 * h), 1e-6);
    EXPECT_NEAR(dvar[j], (vu[0] - vd[0]) / (2 * h), 1e-6);
  }
}

// Acquisition evaluations without a gradient skip it; they must see the
// very moments that the gradient's evaluations see, or the optimizer's
// comparisons would change.
TEST(GaussianProcessTest, PredictWithoutGradientsGivesTheSameMoments) {
  const Data data = SmoothData(20, 3, 5);
  const auto kernel = MakeMixedKernel({false, false, false});
  GpParams p = GpPrior::ForDimension(3).Mode(3);
  p.mean = 0.2;
  const GaussianProcess gp =
      GaussianProcess::Create(*kernel, p, data.x, data.y).value();
  for (const Eigen::Vector3d& x :
       {Eigen::Vector3d(0.3, 0.6, 0.1), Eigen::Vector3d(0.9, 0.05, 0.5)}) {
    double mean, var, bare_mean, bare_var;
    Eigen::VectorXd dmean, dvar;
    gp.PredictWithGradient(x, &mean, &var, &dmean, &dvar);
    gp.PredictWithGradient(x, &bare_mean, &bare_var, nullptr, nullptr);
    EXPECT_EQ(bare_mean, mean);
    EXPECT_EQ(bare_var, var);
  }
}

TEST(GaussianProcessTest, PredictOfManyQueriesMatchesOneAtATime) {
  // Predict works through queries in blocks: 300 cross two block edges and
  // end in a partial block.
  const Data data = SmoothData(50, 3, 6);
  const auto kernel = MakeMixedKernel({false, false, false});
  GpParams p = GpPrior::ForDimension(3).Mode(3);
  p.mean = -0.4;
  const GaussianProcess gp =
      GaussianProcess::Create(*kernel, p, data.x, data.y).value();
  const Eigen::MatrixXd queries = SmoothData(300, 3, 7).x;
  Eigen::VectorXd mean, var;
  gp.Predict(queries, &mean, &var);
  ASSERT_EQ(mean.size(), 300);
  ASSERT_EQ(var.size(), 300);
  for (int i = 0; i < 300; ++i) {
    Eigen::VectorXd m, v;
    gp.Predict(queries.row(i), &m, &v);
    EXPECT_NEAR(mean[i], m[0], 1e-12) << "query " << i;
    EXPECT_NEAR(var[i], v[0], 1e-12) << "query " << i;
  }
}

// The MAP objective of `structure` on (x, y), fitted from the prior's mode
// (the additive kernel with the d = 1 prior, as the GP bandit does).
double FittedNegLogPosterior(KernelStructure structure, const Data& data) {
  const int d = static_cast<int>(data.x.cols());
  const std::unique_ptr<Kernel> kernel =
      MakeMixedKernel(std::vector<bool>(d, false), structure);
  const GpPrior prior =
      GpPrior::ForDimension(structure == KernelStructure::kAdditive ? 1 : d);
  const GpParams p =
      FitGpParams(*kernel, data.x, data.y, {prior.Mode(kernel->num_params())},
                  prior, 1e-6, 100);
  return NegLogPosterior(*kernel, data.x, data.y, p.Flat(), prior, nullptr);
}

// What the GP bandit's kernel selection relies on: the marginal likelihood
// prefers the additive kernel on a separable objective and the product
// kernel on one driven by an interaction, each by a clear margin.
TEST(KernelSelectionTest, MarginalLikelihoodPicksTheRightStructure) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> unit(0, 1);
  const int n = 60, d = 5;
  Data separable{Eigen::MatrixXd(n, d), Eigen::VectorXd(n)};
  Data interaction{Eigen::MatrixXd(n, d), Eigen::VectorXd(n)};
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) separable.x(i, j) = unit(rng);
    separable.y[i] = 0;
    for (int j = 0; j < d; ++j) {
      separable.y[i] += std::sin(6 * separable.x(i, j) + j);
    }
    interaction.x.row(i) = separable.x.row(i);
    interaction.y[i] = std::sin(6 * separable.x(i, 0) * separable.x(i, 1)) *
                       std::cos(4 * separable.x(i, 2) * separable.x(i, 3));
  }
  separable.y = Standardize(separable.y);
  interaction.y = Standardize(interaction.y);
  EXPECT_LT(FittedNegLogPosterior(KernelStructure::kAdditive, separable),
            FittedNegLogPosterior(KernelStructure::kProduct, separable) - 2);
  EXPECT_LT(FittedNegLogPosterior(KernelStructure::kProduct, interaction),
            FittedNegLogPosterior(KernelStructure::kAdditive, interaction) - 2);
}

TEST(OutputTransformTest, PreservesOrderAndStandardizes) {
  Eigen::VectorXd y(8);
  y << -1000, -3, -2.5, -2, -1, -0.5, -0.4, -0.39;
  const Eigen::VectorXd t = TransformOutputs(y);
  EXPECT_NEAR(t.mean(), 0, 1e-12);
  EXPECT_NEAR(Standardize(t).norm(), t.norm(), 1e-9);
  for (int i = 1; i < y.size(); ++i) EXPECT_LT(t[i - 1], t[i]);
  // The outlier is winsorized: it no longer dwarfs the rest.
  EXPECT_GT(t[0], -3.5);
  // Constant inputs stay finite.
  EXPECT_TRUE(TransformOutputs(Eigen::VectorXd::Constant(5, 2.0)).allFinite());
}

TEST(OutputTransformTest, YeoJohnsonIsMonotoneAndInvertibleAtKnownPoints) {
  EXPECT_DOUBLE_EQ(YeoJohnson(3.0, 1.0), 3.0);
  EXPECT_DOUBLE_EQ(YeoJohnson(-3.0, 1.0), -3.0);
  EXPECT_NEAR(YeoJohnson(std::exp(1.0) - 1, 0.0), 1.0, 1e-15);
  for (double lambda : {-2.0, 0.0, 0.5, 2.0, 4.0}) {
    double previous = -1e300;
    for (double y = -5; y <= 5; y += 0.25) {
      const double t = YeoJohnson(y, lambda);
      EXPECT_GT(t, previous);
      previous = t;
    }
  }
}

}  // namespace
}  // namespace hypertune::optimizer
