// GP_BANDIT's suggestions, to 1e-6, on a fixed set of requests that
// walks every branch of its pipeline: one objective (with infeasible and
// pending trials), objective + constraint, several objectives, cost-aware,
// transfer, a conditional space, local models, the initial design, and a
// sequential study on one long-lived instance (caches, warm refits).
//
// A refactoring guard: the golden file (golden/gp_bandit_suggestions.txt)
// was written by this test (HYPERTUNE_WRITE_GOLDEN=1) before the code
// moved; a change that means to alter suggestions rewrites it and says so.
// The test and its optimizer are built for a fixed target (x86-64-v2, no
// fused multiply-adds: portable/CMakeLists.txt), so every x86-64 machine
// computes the same instructions. libm still picks routines by CPU (its FMA
// ones where there is FMA), which moves a long study's points by about
// 1e-8, so numbers agree to a relative 1e-6; a change of behaviour moves
// them far more. Another compiler is another build: the file records it,
// and the test skips, saying why.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "optimizer/gp_bandit_suggester.h"
#include "optimizer/splitmix.h"
#include "tests/optimizer/spaces.h"

namespace hypertune::optimizer {
namespace {

std::string BuildFingerprint() {
  std::string isa;
#ifdef __AVX512F__
  isa += " avx512f";
#endif
#ifdef __AVX2__
  isa += " avx2";
#endif
#ifdef __FMA__
  isa += " fma";
#endif
#ifdef __SSE4_2__
  isa += " sse4.2";
#endif
  return absl::StrCat("build: ", __VERSION__, isa);
}

std::string Hex(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%a", v);
  return buffer;
}

std::string Line(const std::string& name,
                 const std::vector<Assignment>& points) {
  std::string line = name + ":";
  for (const Assignment& a : points) {
    line += " [";
    for (size_t j = 0; j < a.size(); ++j) {
      absl::StrAppend(&line, j ? " " : "", Hex(a[j]));
    }
    line += "]";
  }
  return line;
}

// A mixed flat space: linear and log doubles, an integer, a discrete and a
// categorical parameter.
SearchSpace MixedSpace() {
  std::vector<ParameterConfig> p(5);
  p[0].name = "lr";
  p[0].min = 1e-4;
  p[0].max = 1;
  p[0].scale = Scale::kLog;
  p[1].name = "momentum";
  p[2].name = "layers";
  p[2].type = ParameterType::kInteger;
  p[2].min = 1;
  p[2].max = 8;
  p[3].name = "batch";
  p[3].type = ParameterType::kDiscrete;
  p[3].values = {16, 32, 64, 128};
  p[4].name = "optimizer";
  p[4].type = ParameterType::kCategorical;
  p[4].categories = {"sgd", "adam", "rmsprop"};
  return SearchSpace::Create(p).value();
}

// A categorical root with a child under each of two categories.
SearchSpace ConditionalSpace() {
  std::vector<ParameterConfig> p(4);
  p[0].name = "model";
  p[0].type = ParameterType::kCategorical;
  p[0].categories = {"linear", "tree", "net"};
  p[1].name = "alpha";
  p[1].parent = 0;
  p[1].parent_values = {0};
  p[2].name = "depth";
  p[2].type = ParameterType::kInteger;
  p[2].min = 1;
  p[2].max = 10;
  p[2].parent = 0;
  p[2].parent_values = {1};
  p[3].name = "x";
  return SearchSpace::Create(p).value();
}

// A smooth function of the encoding with a categorical offset.
double Objective(const SearchSpace& space, const Assignment& a, double shift) {
  const Eigen::VectorXd u = space.Encode(a);
  double f = 0;
  for (int j = 0; j < space.dim(); ++j) {
    const double c = 0.3 + 0.1 * j + shift;
    f -= (u[j] - c) * (u[j] - c);
  }
  return f + 0.2 * std::sin(7 * u[0]);
}

Observation Completed(const Assignment& a, std::vector<double> values) {
  Observation o;
  o.x = a;
  o.outcome = Outcome::kCompleted;
  o.values = std::move(values);
  return o;
}

Observation WithOutcome(const Assignment& a, Outcome outcome) {
  Observation o;
  o.x = a;
  o.outcome = outcome;
  return o;
}

// `n` random points of `space` (seeded), each made into an observation.
std::vector<Observation> History(
    const SearchSpace& space, int n, uint64_t seed,
    const std::function<Observation(const Assignment&, int)>& make) {
  SplitMix64 rng(seed);
  std::vector<Observation> history;
  for (int i = 0; i < n; ++i) {
    Eigen::VectorXd u(space.dim());
    for (int j = 0; j < space.dim(); ++j) u[j] = rng.NextUnit();
    history.push_back(make(space.Decode(u), i));
  }
  return history;
}

std::vector<Assignment> Suggest(const SuggestRequest& request,
                                GpBanditOptions options = {}) {
  GpBanditSuggester suggester(std::move(options));
  return suggester.Suggest(request).value();
}

SuggestRequest RequestFor(const SearchSpace& space,
                          std::vector<Observation> history, int count,
                          uint64_t seed) {
  SuggestRequest r;
  r.space = &space;
  r.history = std::move(history);
  r.trials_created = static_cast<int64_t>(r.history.size());
  r.count = count;
  r.seed = seed;
  return r;
}

// One objective with infeasible and pending trials.
std::vector<Observation> OneObjectiveHistory(const SearchSpace& space, int n) {
  return History(space, n, 11, [&](const Assignment& a, int i) {
    if (i % 9 == 4) return WithOutcome(a, Outcome::kInfeasible);
    if (i >= n - 2) return WithOutcome(a, Outcome::kPending);
    return Completed(a, {Objective(space, a, 0)});
  });
}

// Objective, a second objective, and a constraint on the first coordinate.
std::vector<Observation> MetricsHistory(const SearchSpace& space, int n,
                                        int metrics) {
  return History(space, n, 13, [&](const Assignment& a, int i) {
    if (i >= n - 1) return WithOutcome(a, Outcome::kPending);
    const Eigen::VectorXd u = space.Encode(a);
    std::vector<double> v = {Objective(space, a, 0)};
    if (metrics == 3) v.push_back(Objective(space, a, 0.3));
    v.push_back(u[1] + u[0]);  // constraint: <= 1.1
    return Completed(a, v);
  });
}

std::vector<MetricConfig> MetricConfigs(int metrics) {
  std::vector<MetricConfig> configs(metrics);
  configs.back().role = MetricRole::kConstraint;
  configs.back().upper = 1.1;
  return configs;
}

std::vector<std::string> GoldenLines() {
  std::vector<std::string> lines = {BuildFingerprint()};
  const SearchSpace mixed = MixedSpace();

  lines.push_back(
      Line("initial design",
           Suggest(RequestFor(mixed, OneObjectiveHistory(mixed, 3), 3, 5))));
  lines.push_back(
      Line("one objective",
           Suggest(RequestFor(mixed, OneObjectiveHistory(mixed, 18), 3, 5))));
  {
    SuggestRequest r = RequestFor(mixed, OneObjectiveHistory(mixed, 18), 3, 5);
    r.metrics = {MetricConfig{}};
    lines.push_back(Line("one objective as metrics", Suggest(r)));
  }
  {
    // A batch with nothing pending: its first pick averages over
    // hyperparameter draws, its later ones do not.
    SuggestRequest r = RequestFor(mixed, OneObjectiveHistory(mixed, 18), 3, 5);
    std::erase_if(r.history, [](const Observation& o) {
      return o.outcome == Outcome::kPending;
    });
    lines.push_back(Line("one objective, none pending", Suggest(r)));
  }
  {
    SuggestRequest r = RequestFor(mixed, MetricsHistory(mixed, 16, 2), 2, 7);
    r.metrics = MetricConfigs(2);
    lines.push_back(Line("objective and constraint", Suggest(r)));
  }
  {
    SuggestRequest r = RequestFor(mixed, MetricsHistory(mixed, 16, 3), 2, 7);
    r.metrics = MetricConfigs(3);
    lines.push_back(Line("two objectives and a constraint", Suggest(r)));
  }
  {
    SuggestRequest r = RequestFor(mixed, OneObjectiveHistory(mixed, 14), 2, 9);
    for (size_t i = 0; i < r.history.size(); ++i) {
      if (r.history[i].outcome != Outcome::kPending) {
        r.history[i].cost = 1.0 + 10.0 * mixed.Encode(r.history[i].x)[2];
      }
    }
    r.cost = {.enabled = true, .budget = 200, .spent = 60, .max_trials = 40};
    lines.push_back(Line("cost-aware", Suggest(r)));
    r.history.resize(6);
    r.trials_created = 6;
    lines.push_back(Line("cost-aware design", Suggest(r)));
  }
  {
    std::vector<PriorStudy> priors(1);
    priors[0].shared = std::vector<bool>(mixed.dim(), true);
    priors[0].trials = History(mixed, 24, 17, [&](const Assignment& a, int) {
      return Completed(a, {3 * Objective(mixed, a, 0.05) + 1});
    });
    for (int own : {2, 9}) {
      SuggestRequest r =
          RequestFor(mixed, OneObjectiveHistory(mixed, own), 2, 3);
      r.priors = &priors;
      lines.push_back(Line(absl::StrCat("transfer ", own), Suggest(r)));
    }
  }
  {
    const SearchSpace tree = ConditionalSpace();
    lines.push_back(
        Line("conditional",
             Suggest(RequestFor(tree, OneObjectiveHistory(tree, 16), 2, 21))));
  }
  {
    GpBanditOptions local;
    local.max_local_points = 20;
    local.max_fit_points = 16;
    lines.push_back(
        Line("local",
             Suggest(RequestFor(mixed, OneObjectiveHistory(mixed, 30), 2, 23),
                     local)));
    SuggestRequest r = RequestFor(mixed, MetricsHistory(mixed, 30, 2), 2, 23);
    r.metrics = MetricConfigs(2);
    lines.push_back(Line("local with a constraint", Suggest(r, local)));
  }
  {
    // One instance through a sequential study: caches, warm refits and the
    // incremental factor along the way.
    const SearchSpace box = Box(2);
    GpBanditSuggester suggester;
    const std::vector<Observation> history = RunSequentialStudy(
        suggester, box, 14, 29, nullptr, [&](const Assignment& a) {
          return Completed(a, {Objective(box, a, 0.2)});
        });
    std::vector<Assignment> points;
    for (const Observation& o : history) points.push_back(o.x);
    lines.push_back(Line("sequential", points));
  }
  return lines;
}

// Whether golden lines `a` and `b` hold the same text around their numbers
// and numbers equal to a relative (or, near 0, absolute) 1e-6.
bool SameSuggestions(const std::string& a, const std::string& b) {
  std::istringstream in_a(a), in_b(b);
  std::string word_a, word_b;
  while (in_a >> word_a) {
    if (!(in_b >> word_b)) return false;
    if (word_a == word_b) continue;
    // A number, with the same brackets around it.
    const auto brackets = [](const std::string& w) {
      return std::count(w.begin(), w.end(), '[') * 100 +
             std::count(w.begin(), w.end(), ']');
    };
    if (brackets(word_a) != brackets(word_b)) return false;
    const auto strip = [](std::string w) {
      std::erase_if(w, [](char c) { return c == '[' || c == ']'; });
      return w;
    };
    const std::string x_text = strip(word_a), y_text = strip(word_b);
    char* x_end = nullptr;
    char* y_end = nullptr;
    const double x = std::strtod(x_text.c_str(), &x_end);
    const double y = std::strtod(y_text.c_str(), &y_end);
    if (*x_end != '\0' || *y_end != '\0' || x_text.empty() || y_text.empty()) {
      return false;
    }
    if (std::abs(x - y) > 1e-6 * std::max(1.0, std::abs(y))) return false;
  }
  return !(in_b >> word_b);
}

TEST(GpBanditGoldenTest, SuggestionsMatchTheRecordedOnes) {
  const std::string path = std::string(HYPERTUNE_SOURCE_DIR) +
                           "/tests/optimizer/golden/gp_bandit_suggestions.txt";
  const std::vector<std::string> lines = GoldenLines();
  if (std::getenv("HYPERTUNE_WRITE_GOLDEN") != nullptr) {
    std::ofstream out(path);
    for (const std::string& line : lines) out << line << "\n";
    ASSERT_TRUE(out.good()) << path;
    GTEST_SKIP() << "wrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing golden file " << path;
  std::vector<std::string> golden;
  for (std::string line; std::getline(in, line);) golden.push_back(line);
  ASSERT_FALSE(golden.empty());
  if (golden.front() != lines.front()) {
    GTEST_SKIP() << "the golden file was recorded under another build ("
                 << golden.front() << "; this is " << lines.front()
                 << "): floating point differs, nothing to compare";
  }
  ASSERT_EQ(golden.size(), lines.size());
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_TRUE(SameSuggestions(lines[i], golden[i]))
        << "now:    " << lines[i] << "\nrecorded: " << golden[i];
  }
}

}  // namespace
}  // namespace hypertune::optimizer
