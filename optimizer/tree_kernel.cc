#include "optimizer/tree_kernel.h"

#include "optimizer/conditional.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

namespace hypertune::optimizer {
namespace {

using SparseActivity = TreeKernel::SparseActivity;

// k_g on the group's own block of columns: column k of the block is
// g.columns[k] (Block below), so that its work never touches the columns
// of other groups.
std::unique_ptr<Kernel> GroupKernel(const TreeKernelGroup& g) {
  assert(!g.columns.empty() && g.columns.size() == g.categorical.size());
  std::vector<int> numeric, categorical;
  for (size_t k = 0; k < g.columns.size(); ++k) {
    (g.categorical[k] ? categorical : numeric).push_back(static_cast<int>(k));
  }
  if (categorical.empty()) return std::make_unique<Matern52Kernel>(numeric);
  if (numeric.empty()) return std::make_unique<HammingKernel>(categorical);
  return std::make_unique<ProductKernel>(
      std::make_unique<Matern52Kernel>(numeric),
      std::make_unique<HammingKernel>(categorical));
}

// A group active at some row, and those rows (ascending).
struct GroupRows {
  int group;
  std::vector<int> rows;
};

// The groups active at some row of `active`, ascending, each with its rows.
std::vector<GroupRows> RowsByGroup(const SparseActivity& active) {
  std::vector<std::pair<int, int>> pairs;  // (group, row)
  pairs.reserve(active.groups.size());
  for (size_t i = 0; i + 1 < active.begin.size(); ++i) {
    for (int k = active.begin[i]; k < active.begin[i + 1]; ++k) {
      pairs.emplace_back(active.groups[k], static_cast<int>(i));
    }
  }
  std::sort(pairs.begin(), pairs.end());
  std::vector<GroupRows> out;
  for (const auto& [g, i] : pairs) {
    if (out.empty() || out.back().group != g) out.push_back({g, {}});
    out.back().rows.push_back(i);
  }
  return out;
}

// The entry of `by_group` (ascending groups) for group g, from `*next` on;
// advances *next past the groups below g. Null if g has no rows.
const GroupRows* FindGroup(const std::vector<GroupRows>& by_group, int g,
                           size_t* next) {
  while (*next < by_group.size() && by_group[*next].group < g) ++*next;
  if (*next == by_group.size() || by_group[*next].group != g) return nullptr;
  return &by_group[*next];
}

// The rows `rows` of x, restricted to the columns `columns`.
Eigen::MatrixXd Block(const Eigen::MatrixXd& x, const std::vector<int>& rows,
                      const std::vector<int>& columns) {
  return x(rows, columns);
}

// N per row: prod_g (1 + w_g a_g) - 1, over the active groups in ascending
// order (an inactive group's factor is exactly 1).
Eigen::VectorXd Normalizer(const SparseActivity& active,
                           const Eigen::VectorXd& w) {
  const Eigen::Index rows = static_cast<Eigen::Index>(active.begin.size()) - 1;
  Eigen::VectorXd n(rows);
  for (Eigen::Index i = 0; i < rows; ++i) {
    double product = 1.0;
    for (int k = active.begin[i]; k < active.begin[i + 1]; ++k) {
      product *= 1.0 + w[active.groups[k]];
    }
    n[i] = product - 1.0;
  }
  return n;
}

}  // namespace

TreeKernel::TreeKernel(std::vector<TreeKernelGroup> groups)
    : groups_(std::move(groups)) {
  assert(!groups_.empty() && groups_[0].parent_group == -1);
  int offset = 0;
  switches_.resize(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    assert(g == 0 || (groups_[g].parent_group >= 0 &&
                      groups_[g].parent_group < static_cast<int>(g)));
    kernels_.push_back(GroupKernel(groups_[g]));
    offsets_.push_back(offset);
    offset += kernels_.back()->num_params();
  }
  weights_offset_ = offset;
  log_w_ = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(groups_.size()));
  w_ = log_w_.array().exp();
  // The switches: each child group's intervals cut its parent column into
  // elementary segments; a segment lists every group accepting it.
  auto switch_of = [&](const TreeKernelGroup& child) -> ChildSwitch& {
    std::vector<ChildSwitch>& own = switches_[child.parent_group];
    for (ChildSwitch& s : own) {
      if (s.parent_column == child.parent_column) return s;
    }
    own.push_back({child.parent_column, {}, {}});
    return own.back();
  };
  for (size_t g = 1; g < groups_.size(); ++g) {
    ChildSwitch& s = switch_of(groups_[g]);
    for (const auto& [low, high] : groups_[g].accepted) {
      if (!(low < high)) continue;
      s.endpoints.push_back(low);
      s.endpoints.push_back(high);
    }
  }
  for (std::vector<ChildSwitch>& own : switches_) {
    for (ChildSwitch& s : own) {
      std::sort(s.endpoints.begin(), s.endpoints.end());
      s.endpoints.erase(std::unique(s.endpoints.begin(), s.endpoints.end()),
                        s.endpoints.end());
      s.segment_groups.resize(s.endpoints.empty() ? 0 : s.endpoints.size() - 1);
    }
  }
  for (size_t g = 1; g < groups_.size(); ++g) {
    ChildSwitch& s = switch_of(groups_[g]);
    for (const auto& [low, high] : groups_[g].accepted) {
      if (!(low < high)) continue;
      const auto first =
          std::lower_bound(s.endpoints.begin(), s.endpoints.end(), low);
      const auto last =
          std::lower_bound(s.endpoints.begin(), s.endpoints.end(), high);
      for (auto e = first; e != last; ++e) {
        std::vector<int>& accepting =
            s.segment_groups[static_cast<size_t>(e - s.endpoints.begin())];
        // Groups arrive in ascending order; a repeated interval adds none.
        if (accepting.empty() || accepting.back() != static_cast<int>(g)) {
          accepting.push_back(static_cast<int>(g));
        }
      }
    }
  }
}

TreeKernel::TreeKernel(const TreeKernel& other)
    : groups_(other.groups_),
      switches_(other.switches_),
      offsets_(other.offsets_),
      weights_offset_(other.weights_offset_),
      log_w_(other.log_w_),
      w_(other.w_) {
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
  w_ = log_w_.array().exp();
}

TreeKernel::SparseActivity TreeKernel::ActiveGroups(
    const Eigen::MatrixXd& x) const {
  SparseActivity active;
  active.begin.reserve(static_cast<size_t>(x.rows()) + 1);
  active.begin.push_back(0);
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    const size_t first = active.groups.size();
    // Breadth first from group 0: the row's groups are its own queue.
    active.groups.push_back(0);
    for (size_t k = first; k < active.groups.size(); ++k) {
      for (const ChildSwitch& s : switches_[active.groups[k]]) {
        const double v = x(i, s.parent_column);
        if (std::isnan(v)) continue;
        const std::ptrdiff_t segment =
            std::upper_bound(s.endpoints.begin(), s.endpoints.end(), v) -
            s.endpoints.begin() - 1;
        if (segment < 0 ||
            segment >= static_cast<std::ptrdiff_t>(s.segment_groups.size())) {
          continue;
        }
        for (int g : s.segment_groups[static_cast<size_t>(segment)]) {
          active.groups.push_back(g);
        }
      }
    }
    std::sort(active.groups.begin() + static_cast<std::ptrdiff_t>(first),
              active.groups.end());
    active.begin.push_back(static_cast<int>(active.groups.size()));
  }
  return active;
}

TreeKernel::ActivityMatrix TreeKernel::Activity(
    const Eigen::MatrixXd& x) const {
  const SparseActivity sparse = ActiveGroups(x);
  ActivityMatrix active = ActivityMatrix::Constant(
      x.rows(), static_cast<Eigen::Index>(groups_.size()), false);
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    for (int k = sparse.begin[i]; k < sparse.begin[i + 1]; ++k) {
      active(i, sparse.groups[k]) = true;
    }
  }
  return active;
}

Eigen::MatrixXd TreeKernel::Matrix(const Eigen::MatrixXd& a,
                                   const Eigen::MatrixXd& b) const {
  const SparseActivity act_a = ActiveGroups(a);
  const SparseActivity act_b = ActiveGroups(b);
  const std::vector<GroupRows> groups_b = RowsByGroup(act_b);
  Eigen::ArrayXXd p = Eigen::ArrayXXd::Ones(a.rows(), b.rows());
  size_t next = 0;
  for (const GroupRows& ra : RowsByGroup(act_a)) {
    const GroupRows* rb = FindGroup(groups_b, ra.group, &next);
    if (rb == nullptr) continue;
    const int g = ra.group;
    const Eigen::ArrayXXd f =
        1.0 + w_[g] * kernels_[g]
                          ->Matrix(Block(a, ra.rows, groups_[g].columns),
                                   Block(b, rb->rows, groups_[g].columns))
                          .array();
    p(ra.rows, rb->rows) *= f;
  }
  const Eigen::VectorXd na = Normalizer(act_a, w_), nb = Normalizer(act_b, w_);
  const Eigen::ArrayXd ia = na.array().rsqrt(), ib = nb.array().rsqrt();
  return (((p - 1.0).colwise() * ia).rowwise() * ib.transpose()).matrix();
}

Eigen::VectorXd TreeKernel::ContractGradient(const Eigen::MatrixXd& x,
                                             const Eigen::MatrixXd& w) const {
  const SparseActivity act = ActiveGroups(x);
  const Eigen::VectorXd& weight = w_;
  const std::vector<GroupRows> groups = RowsByGroup(act);
  std::vector<Eigen::MatrixXd> xs(groups.size());
  std::vector<Eigen::ArrayXXd> kg(groups.size());
  Eigen::ArrayXXd p = Eigen::ArrayXXd::Ones(x.rows(), x.rows());
  for (size_t e = 0; e < groups.size(); ++e) {
    const int g = groups[e].group;
    xs[e] = Block(x, groups[e].rows, groups_[g].columns);
    kg[e] = kernels_[g]->Matrix(xs[e], xs[e]).array();
    p(groups[e].rows, groups[e].rows) *= 1.0 + weight[g] * kg[e];
  }
  const Eigen::ArrayXd n = Normalizer(act, weight).array();
  const Eigen::ArrayXd inv_sqrt_n = n.rsqrt();
  // W o D and (W o k) 1.
  const Eigen::ArrayXXd wd =
      (w.array().colwise() * inv_sqrt_n).rowwise() * inv_sqrt_n.transpose();
  const Eigen::ArrayXd wk_rows = (wd * (p - 1.0)).rowwise().sum();
  const Eigen::ArrayXXd wdp = wd * p;

  Eigen::VectorXd grad = Eigen::VectorXd::Zero(num_params());
  for (size_t e = 0; e < groups.size(); ++e) {
    const int g = groups[e].group;
    const std::vector<int>& rows = groups[e].rows;
    // W o D o (P / F_g) o w_g on the group's active block.
    const Eigen::ArrayXXd m =
        weight[g] * wdp(rows, rows) / (1.0 + weight[g] * kg[e]);
    grad.segment(offsets_[g], kernels_[g]->num_params()) =
        kernels_[g]->ContractGradient(xs[e], m.matrix());
    double log_n_term = 0;
    for (int i : rows) {
      const double s = (n[i] + 1.0) / n[i] * weight[g] / (1.0 + weight[g]);
      log_n_term += s * wk_rows[i];
    }
    grad[weights_offset_ + g] = (m * kg[e]).sum() - log_n_term;
  }
  return grad;
}

Eigen::MatrixXd TreeKernel::InputGradient(const Eigen::VectorXd& x,
                                          const Eigen::MatrixXd& b) const {
  const Eigen::MatrixXd xr = x.transpose();
  const SparseActivity act_x = ActiveGroups(xr);
  const SparseActivity act_b = ActiveGroups(b);
  const std::vector<GroupRows> groups_b = RowsByGroup(act_b);
  const Eigen::VectorXd& weight = w_;
  // The groups active at x and at some row of b, ascending.
  std::vector<const GroupRows*> shared;
  std::vector<Eigen::VectorXd> xg;  // x on each shared group's columns.
  std::vector<Eigen::MatrixXd> bg;  // Its active rows of b, alike.
  std::vector<Eigen::ArrayXd> kg;
  Eigen::ArrayXd p = Eigen::ArrayXd::Ones(b.rows());
  size_t next = 0;
  for (int k = act_x.begin[0]; k < act_x.begin[1]; ++k) {
    const int g = act_x.groups[k];
    const GroupRows* rb = FindGroup(groups_b, g, &next);
    if (rb == nullptr) continue;
    shared.push_back(rb);
    xg.push_back(x(groups_[g].columns));
    bg.push_back(Block(b, rb->rows, groups_[g].columns));
    kg.push_back(kernels_[g]
                     ->Matrix(xg.back().transpose(), bg.back())
                     .row(0)
                     .transpose()
                     .array());
    p(rb->rows) *= 1.0 + weight[g] * kg.back();
  }
  const double nx = Normalizer(act_x, weight)[0];
  const Eigen::ArrayXd d = (nx * Normalizer(act_b, weight).array()).rsqrt();
  Eigen::MatrixXd grad = Eigen::MatrixXd::Zero(b.rows(), b.cols());
  for (size_t e = 0; e < shared.size(); ++e) {
    const int g = shared[e]->group;
    const std::vector<int>& rows = shared[e]->rows;
    const Eigen::ArrayXd coefficient =
        weight[g] * d(rows) * p(rows) / (1.0 + weight[g] * kg[e]);
    const Eigen::MatrixXd gg = kernels_[g]->InputGradient(xg[e], bg[e]);
    grad(rows, groups_[g].columns) += coefficient.matrix().asDiagonal() * gg;
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
      const double low =
          v == parent.min ? -kInf : (t(v - 0.5) - lo) / (hi - lo);
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
