#include "optimizer/tree_kernel.h"

#include "optimizer/conditional.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

namespace hypertune::optimizer {
namespace {

using ActivityMatrix = TreeKernel::ActivityMatrix;

std::unique_ptr<Kernel> GroupKernel(const TreeKernelGroup& g) {
  assert(!g.columns.empty() && g.columns.size() == g.categorical.size());
  std::vector<int> numeric, categorical;
  for (size_t k = 0; k < g.columns.size(); ++k) {
    (g.categorical[k] ? categorical : numeric).push_back(g.columns[k]);
  }
  if (categorical.empty()) return std::make_unique<Matern52Kernel>(numeric);
  if (numeric.empty()) return std::make_unique<HammingKernel>(categorical);
  return std::make_unique<ProductKernel>(
      std::make_unique<Matern52Kernel>(numeric),
      std::make_unique<HammingKernel>(categorical));
}

// The rows of column g of `active` that are true.
std::vector<int> ActiveRows(const ActivityMatrix& active, int g) {
  std::vector<int> rows;
  for (Eigen::Index i = 0; i < active.rows(); ++i) {
    if (active(i, g)) rows.push_back(static_cast<int>(i));
  }
  return rows;
}

Eigen::MatrixXd SelectRows(const Eigen::MatrixXd& x,
                           const std::vector<int>& rows) {
  if (static_cast<Eigen::Index>(rows.size()) == x.rows()) return x;
  return x(rows, Eigen::all);
}

// N per row: prod_g (1 + w_g a_g) - 1.
Eigen::VectorXd Normalizer(const ActivityMatrix& active, const Eigen::VectorXd& w) {
  Eigen::VectorXd n = Eigen::VectorXd::Ones(active.rows());
  for (Eigen::Index g = 0; g < active.cols(); ++g) {
    n.array() *= 1.0 + w[g] * active.col(g).cast<double>();
  }
  return n.array() - 1.0;
}

}  // namespace

TreeKernel::TreeKernel(std::vector<TreeKernelGroup> groups)
    : groups_(std::move(groups)) {
  assert(!groups_.empty() && groups_[0].parent_group == -1);
  int offset = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    assert(g == 0 || (groups_[g].parent_group >= 0 &&
                      groups_[g].parent_group < static_cast<int>(g)));
    kernels_.push_back(GroupKernel(groups_[g]));
    offsets_.push_back(offset);
    offset += kernels_.back()->num_params();
  }
  weights_offset_ = offset;
  log_w_ = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(groups_.size()));
}

TreeKernel::TreeKernel(const TreeKernel& other)
    : groups_(other.groups_),
      offsets_(other.offsets_),
      weights_offset_(other.weights_offset_),
      log_w_(other.log_w_) {
  for (const std::unique_ptr<Kernel>& k : other.kernels_) {
    kernels_.push_back(k->Clone());
  }
}

std::unique_ptr<Kernel> TreeKernel::Clone() const {
  return std::unique_ptr<Kernel>(new TreeKernel(*this));
}

int TreeKernel::num_params() const {
  return weights_offset_ + static_cast<int>(groups_.size());
}

Eigen::VectorXd TreeKernel::log_params() const {
  Eigen::VectorXd p(num_params());
  for (size_t g = 0; g < groups_.size(); ++g) {
    p.segment(offsets_[g], kernels_[g]->num_params()) =
        kernels_[g]->log_params();
  }
  p.tail(log_w_.size()) = log_w_;
  return p;
}

void TreeKernel::set_log_params(const Eigen::VectorXd& p) {
  assert(p.size() == num_params());
  for (size_t g = 0; g < groups_.size(); ++g) {
    kernels_[g]->set_log_params(
        p.segment(offsets_[g], kernels_[g]->num_params()));
  }
  log_w_ = p.tail(log_w_.size());
}

TreeKernel::ActivityMatrix TreeKernel::Activity(const Eigen::MatrixXd& x) const {
  const Eigen::Index groups = static_cast<Eigen::Index>(groups_.size());
  ActivityMatrix active(x.rows(), groups);
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    active(i, 0) = true;
    for (Eigen::Index g = 1; g < groups; ++g) {
      const TreeKernelGroup& group = groups_[g];
      bool on = active(i, group.parent_group);
      if (on) {
        const double v = x(i, group.parent_column);
        on = false;
        for (const auto& [low, high] : group.accepted) {
          if (v >= low && v < high) {
            on = true;
            break;
          }
        }
      }
      active(i, g) = on;
    }
  }
  return active;
}

Eigen::MatrixXd TreeKernel::Matrix(const Eigen::MatrixXd& a,
                                   const Eigen::MatrixXd& b) const {
  const ActivityMatrix act_a = Activity(a);
  const ActivityMatrix act_b = Activity(b);
  const Eigen::VectorXd w = log_w_.array().exp();
  Eigen::ArrayXXd p = Eigen::ArrayXXd::Ones(a.rows(), b.rows());
  for (int g = 0; g < num_groups(); ++g) {
    const std::vector<int> ra = ActiveRows(act_a, g);
    const std::vector<int> rb = ActiveRows(act_b, g);
    if (ra.empty() || rb.empty()) continue;
    const Eigen::ArrayXXd f =
        1.0 + w[g] * kernels_[g]
                         ->Matrix(SelectRows(a, ra), SelectRows(b, rb))
                         .array();
    p(ra, rb) *= f;
  }
  const Eigen::VectorXd na = Normalizer(act_a, w), nb = Normalizer(act_b, w);
  const Eigen::ArrayXd ia = na.array().rsqrt(), ib = nb.array().rsqrt();
  return (((p - 1.0).colwise() * ia).rowwise() * ib.transpose()).matrix();
}

Eigen::VectorXd TreeKernel::ContractGradient(const Eigen::MatrixXd& x,
                                             const Eigen::MatrixXd& w) const {
  const ActivityMatrix act = Activity(x);
  const Eigen::VectorXd weight = log_w_.array().exp();
  const int groups = num_groups();
  std::vector<std::vector<int>> rows(groups);
  std::vector<Eigen::MatrixXd> xs(groups);
  std::vector<Eigen::ArrayXXd> kg(groups);
  Eigen::ArrayXXd p = Eigen::ArrayXXd::Ones(x.rows(), x.rows());
  for (int g = 0; g < groups; ++g) {
    rows[g] = ActiveRows(act, g);
    if (rows[g].empty()) continue;
    xs[g] = SelectRows(x, rows[g]);
    kg[g] = kernels_[g]->Matrix(xs[g], xs[g]).array();
    p(rows[g], rows[g]) *= 1.0 + weight[g] * kg[g];
  }
  const Eigen::ArrayXd n = Normalizer(act, weight).array();
  const Eigen::ArrayXd inv_sqrt_n = n.rsqrt();
  // W o D and (W o k) 1.
  const Eigen::ArrayXXd wd =
      (w.array().colwise() * inv_sqrt_n).rowwise() * inv_sqrt_n.transpose();
  const Eigen::ArrayXd wk_rows = (wd * (p - 1.0)).rowwise().sum();
  const Eigen::ArrayXXd wdp = wd * p;

  Eigen::VectorXd grad = Eigen::VectorXd::Zero(num_params());
  for (int g = 0; g < groups; ++g) {
    if (rows[g].empty()) continue;
    // W o D o (P / F_g) o w_g on the group's active block.
    const Eigen::ArrayXXd m =
        weight[g] * wdp(rows[g], rows[g]) / (1.0 + weight[g] * kg[g]);
    grad.segment(offsets_[g], kernels_[g]->num_params()) =
        kernels_[g]->ContractGradient(xs[g], m.matrix());
    double log_n_term = 0;
    for (int i : rows[g]) {
      const double s = (n[i] + 1.0) / n[i] * weight[g] / (1.0 + weight[g]);
      log_n_term += s * wk_rows[i];
    }
    grad[weights_offset_ + g] = (m * kg[g]).sum() - log_n_term;
  }
  return grad;
}

Eigen::MatrixXd TreeKernel::InputGradient(const Eigen::VectorXd& x,
                                          const Eigen::MatrixXd& b) const {
  const Eigen::MatrixXd xr = x.transpose();
  const ActivityMatrix act_x = Activity(xr);
  const ActivityMatrix act_b = Activity(b);
  const Eigen::VectorXd weight = log_w_.array().exp();
  const int groups = num_groups();
  std::vector<std::vector<int>> rows(groups);
  std::vector<Eigen::ArrayXd> kg(groups);
  Eigen::ArrayXd p = Eigen::ArrayXd::Ones(b.rows());
  for (int g = 0; g < groups; ++g) {
    if (!act_x(0, g)) continue;
    rows[g] = ActiveRows(act_b, g);
    if (rows[g].empty()) continue;
    kg[g] = kernels_[g]->Matrix(xr, SelectRows(b, rows[g])).row(0).transpose().array();
    p(rows[g]) *= 1.0 + weight[g] * kg[g];
  }
  const double nx = Normalizer(act_x, weight)[0];
  const Eigen::ArrayXd d =
      (nx * Normalizer(act_b, weight).array()).rsqrt();
  Eigen::MatrixXd grad = Eigen::MatrixXd::Zero(b.rows(), b.cols());
  for (int g = 0; g < groups; ++g) {
    if (rows[g].empty()) continue;
    const Eigen::ArrayXd coefficient =
        weight[g] * d(rows[g]) * p(rows[g]) / (1.0 + weight[g] * kg[g]);
    const Eigen::MatrixXd gg =
        kernels_[g]->InputGradient(x, SelectRows(b, rows[g]));
    grad(rows[g], Eigen::all) +=
        coefficient.matrix().asDiagonal() * gg;
  }
  return grad;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The stretch [low, high) of the unit interval that Decode maps to the
// parent value v (a category index for CATEGORICAL parents, whose model
// coordinate is the index itself).
std::pair<double, double> AcceptedInterval(const ParameterConfig& parent,
                                           double v) {
  switch (parent.type) {
    case ParameterType::kCategorical:
      return {v - 0.5, v + 0.5};
    case ParameterType::kDiscrete: {
      const size_t n = parent.values.size();
      const size_t k = static_cast<size_t>(
          std::lower_bound(parent.values.begin(), parent.values.end(), v) -
          parent.values.begin());
      return {k == 0 ? -kInf : static_cast<double>(k) / n,
              k + 1 == n ? kInf : static_cast<double>(k + 1) / n};
    }
    case ParameterType::kInteger: {
      // Decode: t = lo + u (hi - lo) over [min - 0.5, max + 0.5] (in log
      // coordinates for kLog), then round.
      auto t = [&](double x) {
        return parent.scale == Scale::kLog ? std::log(x) : x;
      };
      const double lo = t(parent.min - 0.5), hi = t(parent.max + 0.5);
      const double low = v == parent.min ? -kInf : (t(v - 0.5) - lo) / (hi - lo);
      const double high =
          v == parent.max ? kInf : (t(v + 0.5) - lo) / (hi - lo);
      return {low, high};
    }
    case ParameterType::kDouble:
      break;
  }
  return {0.0, 0.0};
}

}  // namespace

std::vector<TreeKernelGroup> TreeKernelGroups(const SearchSpace& space) {
  const std::vector<ParameterConfig>& params = space.parameters();
  const std::vector<ConditionGroup> conditions = ConditionGroups(params);
  std::vector<TreeKernelGroup> groups;
  for (const ConditionGroup& c : conditions) {
    TreeKernelGroup g;
    for (int i : c.parameters) {
      g.columns.push_back(i);
      g.categorical.push_back(params[i].type == ParameterType::kCategorical);
    }
    g.parent_group = c.parent_group;
    if (c.parent != kNoParent) {
      g.parent_column = c.parent;
      for (double v : c.parent_values) {
        g.accepted.push_back(AcceptedInterval(params[c.parent], v));
      }
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

Eigen::VectorXd TreeKernelLengthscales(
    const std::vector<TreeKernelGroup>& groups,
    const Eigen::VectorXd& log_params, int dim) {
  Eigen::VectorXd l = Eigen::VectorXd::Ones(dim);
  int offset = 0;
  for (const TreeKernelGroup& g : groups) {
    // GroupKernel's layout: the numeric columns' lengthscales first.
    for (size_t k = 0; k < g.columns.size(); ++k) {
      if (!g.categorical[k]) l[g.columns[k]] = std::exp(log_params[offset++]);
    }
    for (size_t k = 0; k < g.columns.size(); ++k) {
      if (g.categorical[k]) ++offset;
    }
  }
  return l;
}

}  // namespace hypertune::optimizer
