// The CPU ops against finite differences, closed forms and naive loops.
#include "trainer_sdk/trainer/ops.h"

#include <cmath>
#include <functional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trainer_sdk/trainer/rng.h"
#include "trainer_sdk/trainer/schedule.h"
#include "trainer_sdk/trainer/thread_pool.h"

namespace hypertune::train {
namespace {

std::vector<float> Random(size_t n, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = float(scale * rng.Normal());
  return v;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

// Central differences of loss() in each coordinate of *x against `analytic`.
void ExpectGradient(const std::function<double()>& loss, std::vector<float>* x,
                    const std::vector<float>& analytic, const char* what,
                    double eps = 1e-2, double tol = 2e-2) {
  ASSERT_EQ(x->size(), analytic.size()) << what;
  double worst = 0.0;
  size_t worst_i = 0;
  for (size_t i = 0; i < x->size(); ++i) {
    const float saved = (*x)[i];
    (*x)[i] = saved + float(eps);
    const double up = loss();
    (*x)[i] = saved - float(eps);
    const double down = loss();
    (*x)[i] = saved;
    const double numeric = (up - down) / (2 * eps);
    const double err =
        std::abs(numeric - analytic[i]) / (tol + tol * std::abs(numeric));
    if (err > worst) {
      worst = err;
      worst_i = i;
    }
  }
  EXPECT_LE(worst, 1.0) << what << ": worst mismatch at " << worst_i
                        << ", analytic " << analytic[worst_i];
}

// Direct convolution, the definition.
std::vector<float> NaiveConv(const std::vector<float>& in,
                             const std::vector<float>& w, const ConvShape& s) {
  std::vector<float> out(s.out_size(), 0.0f);
  for (int n = 0; n < s.n; ++n)
    for (int o = 0; o < s.out_c; ++o)
      for (int y = 0; y < s.out_h(); ++y)
        for (int x = 0; x < s.out_w(); ++x) {
          double sum = 0.0;
          for (int c = 0; c < s.in_c; ++c)
            for (int ky = 0; ky < s.kernel; ++ky)
              for (int kx = 0; kx < s.kernel; ++kx) {
                const int iy = y * s.stride - s.pad + ky;
                const int ix = x * s.stride - s.pad + kx;
                if (iy < 0 || iy >= s.in_h || ix < 0 || ix >= s.in_w) continue;
                sum +=
                    double(
                        in[((size_t(n) * s.in_c + c) * s.in_h + iy) * s.in_w +
                           ix]) *
                    w[((size_t(o) * s.in_c + c) * s.kernel + ky) * s.kernel +
                      kx];
              }
          out[((size_t(n) * s.out_c + o) * s.out_h() + y) * s.out_w() + x] =
              float(sum);
        }
  return out;
}

class ConvTest : public ::testing::TestWithParam<ConvShape> {};

TEST_P(ConvTest, ForwardMatchesDefinition) {
  const ConvShape s = GetParam();
  auto in = Random(s.in_size(), 1);
  auto w = Random(s.weight_size(), 2);
  std::vector<float> out(s.out_size());
  Conv2dForward(out.data(), in.data(), w.data(), s);
  auto expected = NaiveConv(in, w, s);
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(out[i], expected[i], 1e-4 * (1 + std::abs(expected[i]))) << i;
  }
}

TEST_P(ConvTest, BackwardMatchesFiniteDifferences) {
  const ConvShape s = GetParam();
  auto in = Random(s.in_size(), 3);
  auto w = Random(s.weight_size(), 4);
  const auto r = Random(s.out_size(), 5);
  std::vector<float> out(s.out_size());
  auto loss = [&] {
    Conv2dForward(out.data(), in.data(), w.data(), s);
    return Dot(out, r);
  };
  std::vector<float> d_in(s.in_size()), d_w(s.weight_size());
  Conv2dBackward(d_in.data(), d_w.data(), r.data(), in.data(), w.data(), s);
  ExpectGradient(loss, &in, d_in, "d_in");
  ExpectGradient(loss, &w, d_w, "d_weight");
}

TEST_P(ConvTest, BitIdenticalForAnyThreadCount) {
  ConvShape s = GetParam();
  s.n = 11;  // several chunks, one short
  auto in = Random(s.in_size(), 6);
  auto w = Random(s.weight_size(), 7);
  auto d_out = Random(s.out_size(), 8);
  std::vector<float> ref_in(s.in_size()), ref_w(s.weight_size());
  Conv2dBackward(ref_in.data(), ref_w.data(), d_out.data(), in.data(), w.data(),
                 s);
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    std::vector<float> d_in(s.in_size()), d_w(s.weight_size());
    Conv2dBackward(d_in.data(), d_w.data(), d_out.data(), in.data(), w.data(),
                   s, &pool);
    EXPECT_EQ(d_in, ref_in) << threads;
    EXPECT_EQ(d_w, ref_w) << threads;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvTest,
    ::testing::Values(ConvShape{2, 3, 5, 6, 4, 3, 1, 1},  // 3x3 same
                      ConvShape{2, 2, 7, 6, 3, 3, 2, 1},  // 3x3 stride 2
                      ConvShape{2, 3, 6, 5, 4, 1, 2, 0},  // 1x1 stride 2
                      ConvShape{2, 3, 4, 4, 2, 1, 1, 0},  // 1x1 pointwise
                      ConvShape{1, 2, 9, 9, 3, 7, 2, 3},  // imagenet stem
                      ConvShape{2, 8, 12, 12, 5, 3, 1, 1},
                      ConvShape{2, 9, 14, 11, 4, 3, 1, 1},
                      ConvShape{2, 1, 6, 7, 16, 3, 1, 1},   // one input channel
                      ConvShape{3, 18, 5, 5, 17, 3, 2, 1},  // partial tiles
                      ConvShape{2, 5, 9, 8, 20, 1, 2, 0}));  // 1x1 s2, odd h

TEST(BatchNormTest, TrainForwardNormalizesAndUpdatesRunningStats) {
  BatchNormShape s{3, 2, 4};
  auto in = Random(s.size(), 9, 2.0);
  for (size_t i = 0; i < in.size(); ++i) in[i] += 5.0f;
  std::vector<float> gamma{1, 1}, beta{0, 0}, mean(2), inv_std(2);
  std::vector<float> running_mean{0, 0}, running_var{1, 1}, out(s.size());
  BatchNormForwardTrain(out.data(), mean.data(), inv_std.data(),
                        running_mean.data(), running_var.data(), in.data(),
                        gamma.data(), beta.data(), nullptr, false, s);
  for (int c = 0; c < 2; ++c) {
    double m = 0, v = 0, om = 0, ov = 0;
    for (int n = 0; n < 3; ++n)
      for (int j = 0; j < 4; ++j) m += in[(n * 2 + c) * 4 + j] / 12.0;
    for (int n = 0; n < 3; ++n)
      for (int j = 0; j < 4; ++j) {
        const double x = in[(n * 2 + c) * 4 + j];
        v += (x - m) * (x - m) / 12.0;
        om += out[(n * 2 + c) * 4 + j] / 12.0;
      }
    for (int n = 0; n < 3; ++n)
      for (int j = 0; j < 4; ++j)
        ov += std::pow(out[(n * 2 + c) * 4 + j] - om, 2) / 12.0;
    EXPECT_NEAR(mean[c], m, 1e-5);
    EXPECT_NEAR(om, 0.0, 1e-5);
    EXPECT_NEAR(ov, v / (v + 1e-5), 1e-4);
    EXPECT_NEAR(running_mean[c], 0.1 * m, 1e-5);
    EXPECT_NEAR(running_var[c], 0.9 + 0.1 * v * 12.0 / 11.0, 1e-4);  // unbiased
  }
}

TEST(BatchNormTest, FusedResidualReluMatchesComposition) {
  BatchNormShape s{2, 3, 5};
  auto in = Random(s.size(), 10);
  auto residual = Random(s.size(), 11);
  std::vector<float> gamma{0.5f, 1.5f, -1.0f}, beta{0.1f, -0.2f, 0.3f};
  std::vector<float> mean(3), inv_std(3), rm(3), rv(3, 1.0f);
  std::vector<float> plain(s.size()), fused(s.size());
  BatchNormForwardTrain(plain.data(), mean.data(), inv_std.data(), rm.data(),
                        rv.data(), in.data(), gamma.data(), beta.data(),
                        nullptr, false, s);
  BatchNormForwardTrain(fused.data(), mean.data(), inv_std.data(), rm.data(),
                        rv.data(), in.data(), gamma.data(), beta.data(),
                        residual.data(), true, s);
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_NEAR(fused[i], std::max(plain[i] + residual[i], 0.0f), 1e-6);
  }
  // Eval mode with running stats equal to the batch's reproduces training.
  std::vector<float> eval(s.size());
  std::vector<float> var(3);
  for (int c = 0; c < 3; ++c) var[c] = 1.0f / (inv_std[c] * inv_std[c]) - s.eps;
  BatchNormForwardEval(eval.data(), in.data(), gamma.data(), beta.data(),
                       mean.data(), var.data(), nullptr, false, s);
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_NEAR(eval[i], plain[i], 1e-4);
}

TEST(BatchNormTest, BackwardMatchesFiniteDifferences) {
  BatchNormShape s{3, 2, 5};
  auto in = Random(s.size(), 12);
  std::vector<float> gamma{0.7f, 1.3f}, beta{0.2f, -0.1f};
  const auto r = Random(s.size(), 13);
  std::vector<float> mean(2), inv_std(2), rm(2), rv(2), out(s.size());
  auto loss = [&] {
    BatchNormForwardTrain(out.data(), mean.data(), inv_std.data(), rm.data(),
                          rv.data(), in.data(), gamma.data(), beta.data(),
                          nullptr, false, s);
    return Dot(out, r);
  };
  loss();
  std::vector<float> d_in(s.size()), d_gamma(2), d_beta(2);
  BatchNormBackward(d_in.data(), d_gamma.data(), d_beta.data(), r.data(),
                    in.data(), gamma.data(), mean.data(), inv_std.data(), s);
  ExpectGradient(loss, &in, d_in, "d_in", 1e-2, 3e-2);
  ExpectGradient(loss, &gamma, d_gamma, "d_gamma");
  ExpectGradient(loss, &beta, d_beta, "d_beta");
}

TEST(BatchNormTest, BitIdenticalForAnyThreadCount) {
  BatchNormShape s{5, 3, 12000};  // one task per image
  const auto in = Random(s.size(), 16, 3.0);
  const auto residual = Random(s.size(), 17);
  const auto d_out = Random(s.size(), 18);
  const std::vector<float> gamma{0.5f, 1.5f, -1.0f}, beta{0.1f, -0.2f, 0.3f};
  auto run = [&](ThreadPool* pool) {
    std::vector<float> mean(3), inv_std(3), rm(3), rv(3, 1.0f), out(s.size());
    std::vector<float> d_in(s.size()), d_gamma(3), d_beta(3);
    BatchNormForwardTrain(out.data(), mean.data(), inv_std.data(), rm.data(),
                          rv.data(), in.data(), gamma.data(), beta.data(),
                          residual.data(), true, s, pool);
    BatchNormBackward(d_in.data(), d_gamma.data(), d_beta.data(), d_out.data(),
                      in.data(), gamma.data(), mean.data(), inv_std.data(), s,
                      pool);
    for (const auto* v :
         {&mean, &inv_std, &rm, &rv, &d_in, &d_gamma, &d_beta}) {
      out.insert(out.end(), v->begin(), v->end());
    }
    return out;
  };
  const std::vector<float> reference = run(nullptr);
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    EXPECT_EQ(run(&pool), reference) << threads;
  }
}

TEST(ElementwiseTest, ReluAndAdd) {
  std::vector<float> x{-1.0f, 0.0f, 2.0f}, y(3), d{5.0f, 6.0f, 7.0f}, dx(3);
  ReluForward(y.data(), x.data(), 3);
  EXPECT_THAT(y, ::testing::ElementsAre(0.0f, 0.0f, 2.0f));
  ReluBackward(dx.data(), d.data(), y.data(), 3);
  EXPECT_THAT(dx, ::testing::ElementsAre(0.0f, 0.0f, 7.0f));
  AddInPlace(dx.data(), d.data(), 3);
  EXPECT_THAT(dx, ::testing::ElementsAre(5.0f, 6.0f, 14.0f));
}

TEST(PoolTest, MaxPoolMatchesFiniteDifferences) {
  PoolShape s{2, 2, 7, 6, 3, 2, 1};
  auto in = Random(s.in_size(), 14);
  const auto r = Random(s.out_size(), 15);
  std::vector<float> out(s.out_size());
  std::vector<int32_t> argmax(s.out_size());
  auto loss = [&] {
    MaxPoolForward(out.data(), argmax.data(), in.data(), s);
    return Dot(out, r);
  };
  loss();
  std::vector<float> d_in(s.in_size());
  MaxPoolBackward(d_in.data(), r.data(), argmax.data(), s);
  ExpectGradient(loss, &in, d_in, "d_in", 1e-3);
}

TEST(PoolTest, GlobalAveragePool) {
  std::vector<float> in{1, 2, 3, 4, 5, 6, 7, 8}, out(4), d_in(8);
  GlobalAvgPoolForward(out.data(), in.data(), 2, 2, 2);
  EXPECT_THAT(out, ::testing::ElementsAre(1.5f, 3.5f, 5.5f, 7.5f));
  std::vector<float> d_out{2, 4, 6, 8};
  GlobalAvgPoolBackward(d_in.data(), d_out.data(), 2, 2, 2);
  EXPECT_THAT(d_in, ::testing::ElementsAre(1, 1, 2, 2, 3, 3, 4, 4));
}

TEST(LinearTest, BackwardMatchesFiniteDifferences) {
  const int n = 3, in_f = 4, out_f = 5;
  auto in = Random(n * in_f, 16);
  auto w = Random(out_f * in_f, 17);
  auto b = Random(out_f, 18);
  const auto r = Random(n * out_f, 19);
  std::vector<float> out(n * out_f);
  auto loss = [&] {
    LinearForward(out.data(), in.data(), w.data(), b.data(), n, in_f, out_f);
    return Dot(out, r);
  };
  loss();
  EXPECT_NEAR(out[0],
              in[0] * w[0] + in[1] * w[1] + in[2] * w[2] + in[3] * w[3] + b[0],
              1e-5);
  std::vector<float> d_in(n * in_f), d_w(out_f * in_f), d_b(out_f);
  LinearBackward(d_in.data(), d_w.data(), d_b.data(), r.data(), in.data(),
                 w.data(), n, in_f, out_f);
  ExpectGradient(loss, &in, d_in, "d_in");
  ExpectGradient(loss, &w, d_w, "d_weight");
  ExpectGradient(loss, &b, d_b, "d_bias");
}

TEST(LossTest, KnownValues) {
  float loss = 0;
  std::vector<float> zeros(4, 0.0f);
  int32_t label = 2;
  SoftmaxCrossEntropy(&loss, nullptr, zeros.data(), &label, 1, 4, 0.1f);
  EXPECT_NEAR(loss, std::log(4.0), 1e-6);
  std::vector<float> z{2.0f, 0.0f};
  label = 0;
  SoftmaxCrossEntropy(&loss, nullptr, z.data(), &label, 1, 2, 0.0f);
  EXPECT_NEAR(loss, std::log1p(std::exp(-2.0)), 1e-6);
  // eps 0.1, k 2: target (0.95, 0.05).
  SoftmaxCrossEntropy(&loss, nullptr, z.data(), &label, 1, 2, 0.1f);
  EXPECT_NEAR(loss, std::log(std::exp(2.0) + 1.0) - 0.95 * 2.0, 1e-6);
}

TEST(LossTest, GradientOfMeanLossMatchesFiniteDifferences) {
  const int n = 3, k = 4;
  auto logits = Random(n * k, 20);
  std::vector<int32_t> labels{1, 3, 0};
  std::vector<float> losses(n), d(n * k);
  auto loss = [&] {
    SoftmaxCrossEntropy(losses.data(), nullptr, logits.data(), labels.data(), n,
                        k, 0.2f);
    return (double(losses[0]) + losses[1] + losses[2]) / n;
  };
  SoftmaxCrossEntropy(losses.data(), d.data(), logits.data(), labels.data(), n,
                      k, 0.2f);
  ExpectGradient(loss, &logits, d, "d_logits", 1e-2, 1e-2);
}

TEST(SgdTest, KnownUpdate) {
  // g' = 0.5 + 0.1 * 1 = 0.6; v = 0.9 * 0.2 + 0.6 = 0.78.
  float w = 1.0f, v = 0.2f;
  const float g = 0.5f;
  SgdUpdate(&w, &v, &g, 1, SgdStep{0.1f, 0.9f, 0.1f, false});
  EXPECT_NEAR(v, 0.78f, 1e-6);
  EXPECT_NEAR(w, 1.0f - 0.1f * 0.78f, 1e-6);
  w = 1.0f;
  v = 0.2f;
  SgdUpdate(&w, &v, &g, 1, SgdStep{0.1f, 0.9f, 0.1f, true});
  EXPECT_NEAR(w, 1.0f - 0.1f * (0.6f + 0.9f * 0.78f), 1e-6);
}

TEST(ScheduleTest, WarmupThenCosine) {
  Schedule s{0.4, 4, 12};
  EXPECT_DOUBLE_EQ(LearningRate(s, 0), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(s, 3), 0.4);
  EXPECT_DOUBLE_EQ(LearningRate(s, 4), 0.4);
  EXPECT_NEAR(LearningRate(s, 8), 0.2, 1e-12);  // half-way through the decay
  EXPECT_NEAR(LearningRate(s, 11), 0.4 * 0.5 * (1 + std::cos(M_PI * 7 / 8)),
              1e-12);
  EXPECT_DOUBLE_EQ(LearningRate(s, 12), 0.0);
  EXPECT_DOUBLE_EQ(LearningRate(Schedule{0.1, 0, 10}, 0), 0.1);
  EXPECT_EQ(StepsPerEpoch(10, 4), 2);
  EXPECT_EQ(StepsPerEpoch(8, 4), 2);
}

}  // namespace
}  // namespace hypertune::train
