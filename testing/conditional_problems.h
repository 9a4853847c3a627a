// Tree-structured benchmark problems for conditional search spaces
// (`hypertune-bench conditional` and `conditional-latency`), and their
// in-process drivers: regret of an algorithm on the tree, or on the
// flattened space (every child always active), and suggestion latency on a
// 20-parameter tree against its flattened twin. The definitions match
// benchmarks/peers_optuna_conditional.py line for line.
//
// Pure functions of their arguments; thread-compatible.
#ifndef HYPERTUNE_TESTING_CONDITIONAL_PROBLEMS_H_
#define HYPERTUNE_TESTING_CONDITIONAL_PROBLEMS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "optimizer/search_space.h"
#include "optimizer/suggester.h"
#include "testing/regret.h"

namespace hypertune::bench {

// Parameter configs for trees: under `parent` (an index, or
// optimizer::kNoParent) when it takes one of `parent_values`.
optimizer::ParameterConfig CategoricalParameter(
    std::string name, std::vector<std::string> categories,
    int parent = optimizer::kNoParent, std::vector<double> parent_values = {});
optimizer::ParameterConfig NumericParameter(
    std::string name, double min, double max, int parent = optimizer::kNoParent,
    std::vector<double> parent_values = {},
    optimizer::Scale scale = optimizer::Scale::kLinear,
    optimizer::ParameterType type = optimizer::ParameterType::kDouble);
optimizer::ParameterConfig DiscreteParameter(
    std::string name, std::vector<double> values,
    int parent = optimizer::kNoParent, std::vector<double> parent_values = {});

struct TreeProblem {
  std::string name;
  // The tree: parents, children and their conditions.
  std::vector<optimizer::ParameterConfig> parameters;
  // Minimized; reads only the parameters active under the parents' values,
  // so it is defined on the flattened space's assignments too.
  std::function<double(const optimizer::Assignment&)> f;
  double minimum = 0;
};

// "jenatton": the synthetic tree of Jenatton et al., "Bayesian optimization
// with tree-structured dependencies" (ICML 2017), section 5.1: binary
// choices x1; x2 under x1 = 0, x3 under x1 = 1; leaves x4..x7 in [-1, 1]
// and shared r8 (under x1 = 0), r9 (under x1 = 1) in [0, 1];
//   f = x4^2 + 0.1 + r8 | x5^2 + 0.2 + r8 | x6^2 + 0.3 + r9 | x7^2 + 0.4 + r9;
// minimum 0.1.
// "training": a training-like tree: optimizer in {sgd, adam, rmsprop} with
// their own learning rates (log) and momenta/betas, model in {mlp, resnet}
// with layers (integer), width (integer, log) or depth (discrete) and a
// width multiplier, weight decay (log) and batch size (discrete) always;
// a sum of bowls in the natural coordinates, minimum 0.05 (adam, lr 1e-3,
// beta1 0.9, beta2 0.999; resnet 34, multiplier 1.25; weight decay 1e-4;
// batch 128).
std::vector<TreeProblem> TreeProblems();
absl::StatusOr<TreeProblem> FindTreeProblem(const std::string& name);

// The same parameters without parents: every child always active.
std::vector<optimizer::ParameterConfig> Flattened(
    std::vector<optimizer::ParameterConfig> parameters);

// Minimizes problem.f with options.trials sequential trials of
// options.algorithm on the tree (flatten: on the flattened space).
// options.parallel must be 1.
absl::StatusOr<RegretRun> RunTreeRegret(const TreeProblem& problem,
                                        bool flatten,
                                        const RegretOptions& options);

// A 20-parameter tree (a 4-way categorical root, 3 always-active doubles,
// 4 double children per branch) or its flattened twin with `history`
// completed random trials of a smooth function, then `rounds` rounds of
// suggest + complete; statistics of the suggestion times.
absl::StatusOr<LatencyResult> MeasureTreeLatency(optimizer::Algorithm algorithm,
                                                 bool flatten, int history,
                                                 int rounds = 20);

}  // namespace hypertune::bench

#endif  // HYPERTUNE_TESTING_CONDITIONAL_PROBLEMS_H_
