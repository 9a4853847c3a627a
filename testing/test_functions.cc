#include "testing/test_functions.h"

#include <cassert>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hypertune::bench {
namespace {

constexpr double kPi = std::numbers::pi;

}  // namespace

double Branin(const Eigen::VectorXd& x) {
  assert(x.size() == 2);
  const double x1 = x[0], x2 = x[1];
  const double b = 5.1 / (4 * kPi * kPi), c = 5 / kPi;
  const double t = x2 - b * x1 * x1 + c * x1 - 6;
  return t * t + 10 * (1 - 1 / (8 * kPi)) * std::cos(x1) + 10;
}

double Hartmann6(const Eigen::VectorXd& x) {
  assert(x.size() == 6);
  static constexpr double kA[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                      {0.05, 10, 17, 0.1, 8, 14},
                                      {3, 3.5, 1.7, 10, 17, 8},
                                      {17, 8, 0.05, 10, 0.1, 14}};
  static constexpr double kP[4][6] = {{1312, 1696, 5569, 124, 8283, 5886},
                                      {2329, 4135, 8307, 3736, 1004, 9991},
                                      {2348, 1451, 3522, 2883, 3047, 6650},
                                      {4047, 8828, 8732, 5743, 1091, 381}};
  static constexpr double kAlpha[4] = {1.0, 1.2, 3.0, 3.2};
  double sum = 0;
  for (int i = 0; i < 4; ++i) {
    double inner = 0;
    for (int j = 0; j < 6; ++j) {
      const double d = x[j] - 1e-4 * kP[i][j];
      inner += kA[i][j] * d * d;
    }
    sum += kAlpha[i] * std::exp(-inner);
  }
  return -sum;
}

double Ackley(const Eigen::VectorXd& x) {
  const Eigen::ArrayXd z = x.array() - kAckleyShift;
  const double d = static_cast<double>(z.size());
  return -20 * std::exp(-0.2 * std::sqrt(z.square().sum() / d)) -
         std::exp((2 * kPi * z).cos().sum() / d) + 20 + std::numbers::e;
}

double Rosenbrock(const Eigen::VectorXd& x) {
  assert(x.size() >= 2);
  double sum = 0;
  for (Eigen::Index i = 0; i + 1 < x.size(); ++i) {
    const double a = x[i + 1] - x[i] * x[i], b = 1 - x[i];
    sum += 100 * a * a + b * b;
  }
  return sum;
}

double Levy(const Eigen::VectorXd& x) {
  const Eigen::ArrayXd w = 1 + (x.array() - 1) / 4;
  const Eigen::Index d = w.size();
  const double first = std::sin(kPi * w[0]);
  double sum = first * first;
  for (Eigen::Index i = 0; i + 1 < d; ++i) {
    const double s = std::sin(kPi * w[i] + 1);
    sum += (w[i] - 1) * (w[i] - 1) * (1 + 10 * s * s);
  }
  const double last = std::sin(2 * kPi * w[d - 1]);
  sum += (w[d - 1] - 1) * (w[d - 1] - 1) * (1 + last * last);
  return sum;
}

double StyblinskiTang(const Eigen::VectorXd& x) {
  const Eigen::ArrayXd a = x.array();
  return 0.5 * (a.pow(4) - 16 * a.square() + 5 * a).sum();
}

double Hartmann3(const Eigen::VectorXd& x) {
  assert(x.size() == 3);
  static constexpr double kA[4][3] = {
      {3, 10, 30}, {0.1, 10, 35}, {3, 10, 30}, {0.1, 10, 35}};
  static constexpr double kP[4][3] = {{3689, 1170, 2673},
                                      {4699, 4387, 7470},
                                      {1091, 8732, 5547},
                                      {381, 5743, 8828}};
  static constexpr double kAlpha[4] = {1.0, 1.2, 3.0, 3.2};
  double sum = 0;
  for (int i = 0; i < 4; ++i) {
    double inner = 0;
    for (int j = 0; j < 3; ++j) {
      const double d = x[j] - 1e-4 * kP[i][j];
      inner += kA[i][j] * d * d;
    }
    sum += kAlpha[i] * std::exp(-inner);
  }
  return -sum;
}

double Shekel(const Eigen::VectorXd& x, int m) {
  assert(x.size() == 4 && m >= 1 && m <= 10);
  static constexpr double kBeta[10] = {1, 2, 2, 4, 4, 6, 3, 7, 5, 5};
  static constexpr double kC[4][10] = {{4, 1, 8, 6, 3, 2, 5, 8, 6, 7},
                                       {4, 1, 8, 6, 7, 9, 3, 1, 2, 3.6},
                                       {4, 1, 8, 6, 3, 2, 5, 8, 6, 7},
                                       {4, 1, 8, 6, 7, 9, 3, 1, 2, 3.6}};
  double sum = 0;
  for (int i = 0; i < m; ++i) {
    double inner = 0.1 * kBeta[i];
    for (int j = 0; j < 4; ++j) {
      const double d = x[j] - kC[j][i];
      inner += d * d;
    }
    sum += 1 / inner;
  }
  return -sum;
}

double SixHumpCamel(const Eigen::VectorXd& x) {
  assert(x.size() == 2);
  const double a = x[0], b = x[1];
  return (4 - 2.1 * a * a + a * a * a * a / 3) * a * a + a * b +
         (-4 + 4 * b * b) * b * b;
}

const std::vector<BenchmarkFunction>& PublicSuite() {
  static const std::vector<BenchmarkFunction>* const kSuite = [] {
    using Bounds = std::vector<std::pair<double, double>>;
    return new std::vector<BenchmarkFunction>{
        {"branin2", Branin, Bounds{{-5.0, 10.0}, {0.0, 15.0}},
         0.397887357729738},
        {"hartmann6", Hartmann6, Bounds(6, {0.0, 1.0}), -3.32236801141551},
        {"ackley5", Ackley, Bounds(5, {-32.768, 32.768}), 0.0},
        {"rosenbrock5", Rosenbrock, Bounds(5, {-5.0, 10.0}), 0.0},
        {"levy10", Levy, Bounds(10, {-10.0, 10.0}), 0.0},
        {"styblinski10", StyblinskiTang, Bounds(10, {-5.0, 5.0}),
         -39.16616570377142 * 10},
        {"hartmann3", Hartmann3, Bounds(3, {0.0, 1.0}), -3.86277978733266},
        {"shekel5", [](const Eigen::VectorXd& x) { return Shekel(x, 5); },
         Bounds(4, {0.0, 10.0}), -10.1531996790582},
        {"shekel7", [](const Eigen::VectorXd& x) { return Shekel(x, 7); },
         Bounds(4, {0.0, 10.0}), -10.4029153367777},
        {"shekel10", [](const Eigen::VectorXd& x) { return Shekel(x, 10); },
         Bounds(4, {0.0, 10.0}), -10.5364431534835},
        {"camel2", SixHumpCamel, Bounds{{-3.0, 3.0}, {-2.0, 2.0}},
         -1.03162845348988},
    };
  }();
  return *kSuite;
}

absl::StatusOr<BenchmarkFunction> FindFunction(std::string_view name) {
  for (const BenchmarkFunction& f : PublicSuite()) {
    if (f.name == name) return f;
  }
  return absl::NotFoundError(absl::StrCat(
      "function \"", std::string(name), "\" is not in the suite (",
      absl::StrJoin(PublicSuite(), ", ",
                    [](std::string* out, const BenchmarkFunction& f) {
                      absl::StrAppend(out, f.name);
                    }),
      ")"));
}

}  // namespace hypertune::bench
