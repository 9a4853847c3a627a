// The public benchmark functions of BENCHMARKS.md section 1, the same
// definitions, bounds and known minima as shared/peers/functions.py, and
// after them functions with narrow basins and local optima (hartmann3, the
// Shekel family, the six-hump camel), defined for the peers in
// benchmarks/extra_functions.py. All are minimized. Pure functions; the
// suite is immutable and thread-safe.
#ifndef HYPERTUNE_TESTING_TEST_FUNCTIONS_H_
#define HYPERTUNE_TESTING_TEST_FUNCTIONS_H_

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "absl/status/statusor.h"

namespace hypertune::bench {

// Each takes a point of its own domain (not the unit cube).

// Branin-Hoo, 2-d; minimum 0.397887 at (-pi, 12.275), (pi, 2.275),
// (9.42478, 2.475).
double Branin(const Eigen::VectorXd& x);
// Hartmann 6-d; minimum -3.32237 near (0.20169, 0.150011, 0.476874,
// 0.275332, 0.311652, 0.6573).
double Hartmann6(const Eigen::VectorXd& x);
// Ackley with its minimum 0 moved to (kAckleyShift, ..., kAckleyShift).
inline constexpr double kAckleyShift = 7.0;
double Ackley(const Eigen::VectorXd& x);
// Rosenbrock; minimum 0 at (1, ..., 1). REQUIRES: x.size() >= 2
double Rosenbrock(const Eigen::VectorXd& x);
// Levy; minimum 0 at (1, ..., 1).
double Levy(const Eigen::VectorXd& x);
// Styblinski-Tang; minimum -39.16617 d at (-2.903534, ..., -2.903534).
double StyblinskiTang(const Eigen::VectorXd& x);
// Hartmann 3-d; minimum -3.8627798 near (0.114589, 0.555649, 0.852547).
double Hartmann3(const Eigen::VectorXd& x);
// Shekel with m of its ten basins (m in 5, 7, 10) on [0, 10]^4; the global
// minimum lies in the basin at (4, 4, 4, 4), whose width is sqrt(0.1).
double Shekel(const Eigen::VectorXd& x, int m);
// The six-hump camel on [-3, 3] x [-2, 2]; minimum -1.0316285 at
// +-(0.0898420, -0.7126564).
double SixHumpCamel(const Eigen::VectorXd& x);

struct BenchmarkFunction {
  std::string name;  // e.g. "branin2": the family and the dimension.
  std::function<double(const Eigen::VectorXd&)> f;
  std::vector<std::pair<double, double>> bounds;  // [low, high] per dimension.
  double minimum;                                 // The known global minimum.

  int dim() const { return static_cast<int>(bounds.size()); }
};

// branin2, hartmann6, ackley5, rosenbrock5, levy10, styblinski10, in the
// peer's order, then hartmann3, shekel5, shekel7, shekel10, camel2.
const std::vector<BenchmarkFunction>& PublicSuite();

// The suite's function called `name`; NOT_FOUND listing the known names.
absl::StatusOr<BenchmarkFunction> FindFunction(std::string_view name);

}  // namespace hypertune::bench

#endif  // HYPERTUNE_TESTING_TEST_FUNCTIONS_H_
