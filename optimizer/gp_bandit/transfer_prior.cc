#include "optimizer/gp_bandit/transfer_prior.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "optimizer/gp_bandit/coordinates.h"
#include "optimizer/output_transform.h"

namespace hypertune::optimizer::gp_bandit {
const PriorFit* TransferPriors::ForObjective(
    const SearchSpace& space, uint64_t seed,
    const std::vector<PriorStudy>& priors, int objective) {
  const Coordinates coords(space);
  std::vector<bool> shared(coords.dim(), false);
  std::vector<Eigen::VectorXd> rows;
  std::vector<double> values;
  for (const PriorStudy& prior : priors) {
    // Sharing no parameter, a study predicts nothing here.
    if (std::none_of(prior.shared.begin(), prior.shared.end(),
                     [](bool b) { return b; })) {
      continue;
    }
    // Each study's values on their own scale: studies differ in offset and
    // spread, not in where their optima lie.
    std::vector<double> y;
    for (const Observation& o : prior.trials) {
      if (static_cast<int>(o.values.size()) <= objective) continue;
      const double v = o.values[objective];
      if (!std::isfinite(v)) continue;  // As in the study's own model.
      y.push_back(v);
      rows.push_back(
          TransferMean::Project(prior.shared,
                                coords.FromAssignment(space, o.x).transpose())
              .row(0)
              .transpose());
    }
    if (y.empty()) continue;
    for (int j = 0; j < coords.dim(); ++j) {
      if (prior.shared[j]) shared[j] = true;
    }
    const Eigen::VectorXd warped = TransformOutputs(Eigen::Map<Eigen::VectorXd>(
        y.data(), static_cast<Eigen::Index>(y.size())));
    values.insert(values.end(), warped.data(), warped.data() + warped.size());
  }
  if (static_cast<int>(fits_.size()) <= objective) fits_.resize(objective + 1);
  std::optional<PriorFit>& cached = fits_[objective];
  if (rows.empty()) return nullptr;
  Eigen::MatrixXd x = ToMatrix(rows, coords.dim());
  Eigen::VectorXd y = Eigen::Map<const Eigen::VectorXd>(
      values.data(), static_cast<Eigen::Index>(values.size()));
  if (cached && cached->seed == seed && cached->shared == shared &&
      cached->x.rows() == x.rows() && cached->x == x && cached->y == y) {
    return &*cached;
  }
  cached.reset();
  // As a local model: the trials nearest the best.
  KeepNearestBest(coords, options_->max_local_points, x, y);
  const int n = static_cast<int>(x.rows());
  Eigen::MatrixXd fx = x;
  Eigen::VectorXd fy = y;
  KeepNearestBest(coords, options_->max_fit_points, fx, fy);
  const gp_bandit::Fit fit =
      *FitCheckpoint(space, seed, fx, fy, n, /*allow_additive=*/false,
                     Targets::kAsGiven, *options_, [] { return false; });
  const std::unique_ptr<Kernel> kernel = coords.MakeKernel(fit.structure);
  absl::StatusOr<GaussianProcess> gp =
      GaussianProcess::Create(*kernel, fit.params, x, y);
  if (!gp.ok()) return nullptr;
  Eigen::MatrixXd anchors = Rows(x, TopEntries(y, kAnchors));
  cached = PriorFit{seed,
                    std::move(x),
                    std::move(y),
                    shared,
                    std::make_shared<const TransferMean>(*std::move(gp), shared,
                                                         PriorWeight{}),
                    fit,
                    std::move(anchors)};
  return &*cached;
}

absl::StatusOr<MetricModel> BuildTransferModel(
    const SearchSpace& space, uint64_t seed, const Eigen::MatrixXd& x,
    const Eigen::VectorXd& y, Targets targets, const std::vector<int>* subset,
    bool allow_local, const PriorFit& prior, MetricFits& fits) {
  const Coordinates coords(space);
  absl::StatusOr<MetricModel> m;
  if (x.rows() >= kMinModelPoints) {
    // The study's own model, hyperparameters and all: at weight 0 it is
    // the model the study would have without a prior.
    m = fits.Build(space, seed, x, y, targets, subset, allow_local);
  } else {
    // Too few own trials to fit: the hyperparameter prior's mode (unit
    // signal, little noise), as uncertain about the residual as the prior
    // allows.
    const std::unique_ptr<Kernel> kernel =
        coords.MakeKernel(KernelStructure::kProduct);
    const GpParams params =
        PriorFor(coords, KernelStructure::kProduct).Mode(kernel->num_params());
    const Eigen::VectorXd own =
        y.size() > 0 ? ToTargets(targets, y) : Eigen::VectorXd();
    absl::StatusOr<GaussianProcess> gp =
        GaussianProcess::Create(*kernel, params, x, own);
    if (!gp.ok()) return gp.status();
    m = MetricModel{*std::move(gp),
                    KernelStructure::kProduct,
                    params,
                    NumericLengthscales(coords, params),
                    x,
                    own,
                    Eigen::VectorXd::Zero(coords.dim()),
                    Eigen::VectorXd::Ones(coords.dim())};
  }
  if (!m.ok()) return m.status();
  m->gp.SetPriorMean(
      std::make_shared<const TransferMean>(prior.mean->WithWeight(
          FitPriorWeight(prior.mean->Unweighted(m->data_x), m->targets))));
  return m;
}

}  // namespace hypertune::optimizer::gp_bandit
