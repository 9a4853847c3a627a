// GP_BANDIT's models stage for one metric: the GP of an objective, a
// constraint or the log cost, with hyperparameters fitted at scheduled
// history sizes (checkpoints) and cached between suggestions, the Cholesky
// factor extended in O(n^2) per new trial, and the large fits optionally
// run in the background.
//
// Determinism: the schedule, the fit starts and the factor's construction
// order are functions of the history alone, so a fresh MetricFits replaying
// a request computes bit-for-bit what a long-lived one computes from its
// caches. Not thread-safe: one per metric of one suggester.
#ifndef HYPERTUNE_OPTIMIZER_GP_BANDIT_METRIC_MODEL_H_
#define HYPERTUNE_OPTIMIZER_GP_BANDIT_METRIC_MODEL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <Eigen/Core>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "optimizer/gp.h"
#include "optimizer/gp_bandit/coordinates.h"
#include "optimizer/gp_bandit/options.h"
#include "optimizer/kernel.h"
#include "optimizer/search_space.h"

namespace hypertune::optimizer::gp_bandit {

// The fewest completed trials a model is fitted on.
inline constexpr int kMinModelPoints = 2;

// How a metric's values become GP targets.
enum class Targets {
  kWarped,        // TransformOutputs (objectives).
  kStandardized,  // (y - mean) / sd (constraints: bounds map alike).
  kAsGiven,       // y itself (the transfer prior's, already warped).
};

// The affine map of Standardize (output_transform.h), kept to map a
// constraint's bounds the same way: (y - mean) / scale, scale the sample
// standard deviation (1 for a constant sample, which Standardize maps to
// zeros alike).
struct Standardization {
  double mean = 0, scale = 1;
};
Standardization StandardizationOf(const Eigen::VectorXd& y);

// A metric's values as GP targets.
Eigen::VectorXd ToTargets(Targets kind, const Eigen::VectorXd& y);

// Fitted hyperparameters and the kernel they are for.
struct Fit {
  KernelStructure structure;
  GpParams params;
};

// One metric's GP on the completed trials.
struct MetricModel {
  GaussianProcess gp;
  KernelStructure structure;
  GpParams params;
  Eigen::VectorXd lengthscales;  // Numeric dimensions; 1 elsewhere.
  Eigen::MatrixXd data_x;        // The rows conditioned on.
  Eigen::VectorXd targets;       // Their targets.
  Eigen::VectorXd lower, upper;  // The search box (a local model's).
  double target_mean = 0, target_scale = 1;  // kStandardized's map.
};

// The history size (completed trials) of the last full hyperparameter fit
// at or before n: every size below 20, then steps of max(5, c / 10), so
// full fits come every ~10% of growth. REQUIRES: n >= 2
int LastRefitCheckpoint(int n);

// The hyperparameters of the fitted data xc, yc (checkpoint c): the product
// kernel, or the additive one if allowed and clearly more likely; nullopt
// if `stop` returns true first.
std::optional<Fit> FitCheckpoint(const SearchSpace& space, uint64_t seed,
                                 const Eigen::MatrixXd& xc,
                                 const Eigen::VectorXd& yc, int c,
                                 bool allow_additive, Targets targets,
                                 const GpBanditOptions& options,
                                 const std::function<bool()>& stop);

// One metric's fits and caches; each cache is checked against the request
// before use.
class MetricFits {
 public:
  // REQUIRES: options outlives this object.
  explicit MetricFits(const GpBanditOptions& options) : options_(&options) {}
  // Tells a background fit still running to stop; it finishes on its own.
  ~MetricFits();
  MetricFits(MetricFits&&) = default;
  MetricFits& operator=(MetricFits&&) = default;

  // The GP of one metric (values y on the rows of x, model coordinates):
  // hyperparameters from the checkpoint schedule, conditioned on the rows
  // `subset` if given, else on all rows, or past max_local_points (when
  // allow_local) on the nearest to the incumbent within their bounding box.
  absl::StatusOr<MetricModel> Build(const SearchSpace& space, uint64_t seed,
                                    const Eigen::MatrixXd& x,
                                    const Eigen::VectorXd& y, Targets targets,
                                    const std::vector<int>* subset,
                                    bool allow_local);

 private:
  struct FitCache {
    int checkpoint;
    uint64_t seed;
    bool allow_additive;
    Eigen::MatrixXd x;  // The data fitted (model coordinates), raw values.
    Eigen::VectorXd y;
    Fit fit;

    // Whether this is the fit of exactly these inputs.
    bool Holds(int c, uint64_t s, bool additive, const Eigen::MatrixXd& xc,
               const Eigen::VectorXd& yc) const {
      return checkpoint == c && seed == s && allow_additive == additive &&
             x.rows() == xc.rows() && x.cols() == xc.cols() && x == xc &&
             y == yc;
    }
  };
  // A full fit off the request path, shared with its job.
  struct BackgroundFit {
    absl::Mutex mu;
    bool running ABSL_GUARDED_BY(mu) = false;
    std::optional<FitCache> done ABSL_GUARDED_BY(mu);
    // Set when the owner goes: the job stops at its next start and its
    // result is dropped.
    std::atomic<bool> cancelled{false};
  };

  // The hyperparameters at checkpoint c (the first c completed trials),
  // from the cache when it holds the same data.
  Fit CheckpointParams(const SearchSpace& space, uint64_t seed,
                       const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                       int c, bool allow_additive, Targets targets);
  // Hands checkpoint c's fit to options_->background_fits unless one is
  // running; adopts a finished one into fit_.
  void FitInBackground(const SearchSpace& space, uint64_t seed,
                       Eigen::MatrixXd xc, Eigen::VectorXd yc, int c,
                       bool allow_additive, Targets targets);

  const GpBanditOptions* options_;
  std::optional<FitCache> fit_;
  std::shared_ptr<BackgroundFit> background_;
  // A GP with the checkpoint's parameters on a prefix of the completed
  // trials, built as "factor the checkpoint's prefix, then append".
  std::optional<GaussianProcess> factor_;
  KernelStructure factor_structure_ = KernelStructure::kProduct;
};

}  // namespace hypertune::optimizer::gp_bandit

#endif  // HYPERTUNE_OPTIMIZER_GP_BANDIT_METRIC_MODEL_H_
