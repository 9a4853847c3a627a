// Multi-objective math on outcome vectors, all maximized: Pareto dominance,
// non-dominated sorting, the hypervolume indicator, hypervolume
// scalarizations and greedy hypervolume subset selection.
//
// Conventions: a point set is a matrix whose rows are points (one column per
// objective); the reference point r lies below the region of interest; the
// hypervolume of a set Y is the Lebesgue measure of the union of the boxes
// [r, y] over y in Y (points not above r in every objective add nothing).
//
// Pure functions; thread-safe.
#ifndef HYPERTUNE_OPTIMIZER_PARETO_H_
#define HYPERTUNE_OPTIMIZER_PARETO_H_

#include <cstdint>
#include <vector>

#include <Eigen/Core>

namespace hypertune::optimizer {

// True if a is at least b in every objective and better in one.
// REQUIRES: a.size() == b.size()
bool Dominates(const Eigen::VectorXd& a, const Eigen::VectorXd& b);

// The rows of y no other row dominates (the Pareto front), in increasing
// order. Duplicated points are all kept.
std::vector<int> ParetoFrontRows(const Eigen::MatrixXd& y);

// The non-domination rank of every row: 0 for the Pareto front, 1 for the
// front of what remains, and so on (Deb et al., "A fast and elitist
// multiobjective genetic algorithm: NSGA-II", IEEE TEC 6(2), 2002).
std::vector<int> NondominatedRanks(const Eigen::MatrixXd& y);

// The hypervolume of the rows of y above r, exactly, by slicing along the
// last objective (While et al., "A faster algorithm for calculating
// hypervolume", IEEE TEC 10(1), 2006): one objective is a maximum, two a
// sweep over the points sorted by the first objective, O(n log n); each
// further objective multiplies the cost by n (3 objectives: O(n^2 log n)).
// REQUIRES: y.cols() == r.size() >= 1
double Hypervolume(const Eigen::MatrixXd& y, const Eigen::VectorXd& r);

// The hypervolume scalarization of Golovin and Zhang ("Random hypervolume
// scalarizations for provable multi-objective black box optimization",
// ICML 2020), for a direction lambda on the positive unit sphere:
//   s_lambda(y) = min_i max(0, (y_i - r_i) / lambda_i)^m,  m objectives.
// min_i (y_i - r_i) / lambda_i is the distance from r along lambda to the
// boundary of the box [r, y], so their hypervolume lemma is integration in
// polar coordinates:
//   HV_r(Y) = c_m E_lambda[max_{y in Y} s_lambda(y)],
// with lambda uniform on the sphere's positive part and c_m the constant
// below; hence the hypervolume improvement of a point is
//   HV_r(Y + {y}) - HV_r(Y) = c_m E_lambda[(s_lambda(y) - max_Y s_lambda)_+].
// REQUIRES: sizes agree, lambda > 0
double HypervolumeScalarization(const Eigen::VectorXd& y,
                                const Eigen::VectorXd& r,
                                const Eigen::VectorXd& lambda);

// c_m = pi^(m/2) / (2^m Gamma(m/2 + 1)): the volume of the unit ball's
// positive orthant. REQUIRES: m >= 1
double HypervolumeScalarizationConstant(int m);

// `count` quasi-random draws of N(0, I_m) (rows): points of the scrambled
// Sobol sequence in 2 ceil(m / 2) dimensions (scrambled by `seed`), each
// pair of coordinates mapped to two deviates by Box-Muller.
// REQUIRES: 1 <= m <= SobolSequence::kMaxDimension / 2, count >= 1
Eigen::MatrixXd QuasiNormalSamples(int m, int count, uint64_t seed);

// `count` directions on the positive part of the unit sphere in m
// dimensions (rows), quasi-uniform: QuasiNormalSamples folded into the
// positive orthant and normalized (a standard normal vector's direction is
// uniform on the sphere). REQUIRES: as QuasiNormalSamples
Eigen::MatrixXd PositiveSphereDirections(int m, int count, uint64_t seed);

// Greedy hypervolume subset selection: `count` rows of y chosen one at a
// time, each time the one adding the most hypervolume above r (ties: the
// lowest row). Returns them in the order chosen; the greedy subset's
// hypervolume is within a factor 1 - 1/e of the best subset's, the
// hypervolume being monotone submodular (Guerreiro et al., "Greedy
// hypervolume subset selection in low dimensions", Evol. Comput. 24(3),
// 2016). REQUIRES: 0 <= count <= y.rows()
std::vector<int> GreedyHypervolumeSubset(const Eigen::MatrixXd& y,
                                         const Eigen::VectorXd& r, int count);

// A reference point for a front: its nadir (the worst value of each
// objective over the front) less a tenth of the front's range in that
// objective, at least `min_margin` (BoTorch's infer_reference_point, with a
// floor for a front of one point). REQUIRES: front.rows() >= 1
Eigen::VectorXd InferReferencePoint(const Eigen::MatrixXd& front,
                                    double min_margin);

}  // namespace hypertune::optimizer

#endif  // HYPERTUNE_OPTIMIZER_PARETO_H_
