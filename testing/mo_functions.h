// The multi-objective and constrained benchmark problems of the issue-18
// protocol (benchmarks/README.md, "Multi-objective and constrained"), the
// same definitions, bounds, reference points and optima as
// benchmarks/peers_optuna_mo.py. Every objective is minimized; a constraint
// holds when its value is <= 0. Self-contained (no dependency on
// functions.h). Pure functions; the suites are immutable and thread-safe.
#ifndef HYPERTUNE_TESTING_MO_FUNCTIONS_H_
#define HYPERTUNE_TESTING_MO_FUNCTIONS_H_

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "absl/status/statusor.h"

namespace hypertune::bench {

// Zitzler, Deb and Thiele, "Comparison of multiobjective evolutionary
// algorithms: empirical results", Evol. Comput. 8(2), 2000, on [0,1]^d:
//   f1 = x1,  g = 1 + 9 / (d - 1) sum_{i>=2} x_i,
//   ZDT1: f2 = g (1 - sqrt(f1 / g))                       (convex front)
//   ZDT2: f2 = g (1 - (f1 / g)^2)                         (concave front)
//   ZDT3: f2 = g (1 - sqrt(f1 / g) - f1 / g sin(10 pi f1))  (5 pieces)
// The Pareto set is x2..xd = 0 (g = 1). REQUIRES: x.size() >= 2
Eigen::VectorXd Zdt1(const Eigen::VectorXd& x);
Eigen::VectorXd Zdt2(const Eigen::VectorXd& x);
Eigen::VectorXd Zdt3(const Eigen::VectorXd& x);

// Deb, Thiele, Laumanns and Zitzler, "Scalable multi-objective optimization
// test problems", CEC 2002, with 3 objectives on [0,1]^d:
//   g = sum_{i>=3} (x_i - 1/2)^2,
//   f1 = (1 + g) cos(x1 pi/2) cos(x2 pi/2),
//   f2 = (1 + g) cos(x1 pi/2) sin(x2 pi/2),
//   f3 = (1 + g) sin(x1 pi/2).
// The front is the unit sphere's positive orthant. REQUIRES: x.size() >= 3
Eigen::VectorXd Dtlz2(const Eigen::VectorXd& x);

struct MultiObjectiveProblem {
  std::string name;  // e.g. "zdt1": the family (dimension in `bounds`).
  std::function<Eigen::VectorXd(const Eigen::VectorXd&)> f;
  std::vector<std::pair<double, double>> bounds;
  int objectives;
  // The fixed reference point (minimization), BoTorch's for these
  // problems (botorch.test_functions.multi_objective): 11 in every
  // objective for ZDT, 1.1 (the true front's nadir plus a tenth) for DTLZ2.
  Eigen::VectorXd reference;
  // The hypervolume between the true front and `reference`.
  double front_hypervolume;

  int dim() const { return static_cast<int>(bounds.size()); }
};

// zdt1, zdt2, zdt3 (d = 6) and dtlz2 (d = 6, 3 objectives).
const std::vector<MultiObjectiveProblem>& MultiObjectiveSuite();
// NOT_FOUND listing the known names.
absl::StatusOr<MultiObjectiveProblem> FindMultiObjectiveProblem(
    std::string_view name);

// The hypervolume of the true front of the ZDT3 problem above `reference`
// (minimization), from `samples` points of the front's curve
// f2 = 1 - sqrt(f1) - f1 sin(10 pi f1), f1 in [0, 1]; converges as the
// sample grows (used to check the constant in the suite).
double Zdt3FrontHypervolume(const Eigen::VectorXd& reference, int samples);

struct ConstrainedProblem {
  std::string name;
  std::function<double(const Eigen::VectorXd&)> f;
  // Each constraint holds where its value is <= 0.
  std::function<Eigen::VectorXd(const Eigen::VectorXd&)> constraints;
  int num_constraints;
  std::vector<std::pair<double, double>> bounds;
  // The best feasible value, and the regret charged while no feasible point
  // has been found: the largest value of f over the box minus `minimum`.
  double minimum;
  double infeasible_regret;

  int dim() const { return static_cast<int>(bounds.size()); }
};

// Gardner, Kusner, Xu, Weinberger and Cunningham, "Bayesian optimization
// with inequality constraints", ICML 2014, on [0,6]^2:
//   f = cos(2 x1) cos(x2) + sin(x1),  c = cos(x1) cos(x2) - sin(x1) sin(x2)
//   - 1/2 <= 0.
double GardnerObjective(const Eigen::VectorXd& x);
Eigen::VectorXd GardnerConstraints(const Eigen::VectorXd& x);

// Gramacy et al., "Modeling an augmented Lagrangian for blackbox
// constrained optimization", Technometrics 58(1), 2016, on [0,1]^2:
//   f = x1 + x2,
//   c1 = 3/2 - x1 - 2 x2 - 1/2 sin(2 pi (x1^2 - 2 x2)) <= 0,
//   c2 = x1^2 + x2^2 - 3/2 <= 0.
double GramacyObjective(const Eigen::VectorXd& x);
Eigen::VectorXd GramacyConstraints(const Eigen::VectorXd& x);

// Branin on [-5,10] x [0,15] inside the disc of radius sqrt(50) around
// (2.5, 7.5) (Gelbart, Snoek and Adams, "Bayesian optimization with unknown
// constraints", UAI 2014): c = (x1 - 2.5)^2 + (x2 - 7.5)^2 - 50 <= 0.
double BraninObjective(const Eigen::VectorXd& x);
Eigen::VectorXd BraninDiscConstraints(const Eigen::VectorXd& x);

// gardner, gramacy, branin_disc.
const std::vector<ConstrainedProblem>& ConstrainedSuite();
absl::StatusOr<ConstrainedProblem> FindConstrainedProblem(
    std::string_view name);

}  // namespace hypertune::bench

#endif  // HYPERTUNE_TESTING_MO_FUNCTIONS_H_
