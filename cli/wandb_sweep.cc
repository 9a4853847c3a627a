#include "cli/wandb_sweep.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/identifier.h"
#include "common/limits.h"
#include "nlohmann/json.hpp"

namespace hypertune::cli {
namespace {

// The first rung and the largest full budget hypertune's ASHA takes
// (optimizer/early_stopping.h, EarlyStoppingConfig::kMaxResource).
constexpr int64_t kMaxResource = int64_t{1} << 53;

// A plain YAML scalar read as YAML 1.1 does (PyYAML, which `wandb sweep`
// uses), except that an exponent without a '.' (1e-4) is a number too.
struct Scalar {
  enum class Kind { kNull, kBool, kInt, kFloat, kString };
  Kind kind = Kind::kString;
  std::string text;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;

  bool IsNumber() const { return kind == Kind::kInt || kind == Kind::kFloat; }
};

bool IsInt(std::string_view t) {
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) t.remove_prefix(1);
  return !t.empty() && std::all_of(t.begin(), t.end(), absl::ascii_isdigit);
}

// [-+]? (digits [. digits?] | . digits) ([eE] [-+]? digits)?, or .inf/.nan.
bool IsFloat(std::string_view t) {
  for (std::string_view special :
       {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf",
        "-.INF", ".nan", ".NaN", ".NAN"}) {
    if (t == special) return true;
  }
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) t.remove_prefix(1);
  size_t i = 0;
  size_t digits = 0;
  while (i < t.size() && absl::ascii_isdigit(t[i])) ++i, ++digits;
  if (i < t.size() && t[i] == '.') {
    ++i;
    while (i < t.size() && absl::ascii_isdigit(t[i])) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
    const size_t start = i;
    while (i < t.size() && absl::ascii_isdigit(t[i])) ++i;
    if (i == start) return false;
  }
  return i == t.size();
}

Scalar Classify(const YAML::Node& node) {
  Scalar s;
  if (node.IsNull()) {
    s.kind = Scalar::Kind::kNull;
    return s;
  }
  s.text = node.Scalar();
  // Quoted ("!") or explicitly tagged: a string.
  if (node.Tag() != "?") return s;
  const std::string& t = s.text;
  static const std::set<std::string> kTrue = {
      "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
  static const std::set<std::string> kFalse = {
      "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
  if (t == "~" || t == "null" || t == "Null" || t == "NULL") {
    s.kind = Scalar::Kind::kNull;
  } else if (kTrue.count(t) || kFalse.count(t)) {
    s.kind = Scalar::Kind::kBool;
    s.boolean = kTrue.count(t) > 0;
  } else if (IsInt(t) && absl::SimpleAtoi(t, &s.integer)) {
    s.kind = Scalar::Kind::kInt;
    s.number = static_cast<double>(s.integer);
  } else if (IsFloat(t)) {
    std::string lowered = absl::AsciiStrToLower(t);
    if (lowered.find(".inf") != std::string::npos) {
      s.number = lowered[0] == '-' ? -std::numeric_limits<double>::infinity()
                                   : std::numeric_limits<double>::infinity();
    } else if (lowered == ".nan") {
      s.number = std::numeric_limits<double>::quiet_NaN();
    } else if (!absl::SimpleAtod(t, &s.number)) {
      return s;
    }
    s.kind = Scalar::Kind::kFloat;
  }
  return s;
}

// As Python's str() writes a YAML boolean (W&B's ${args} does).
std::string BoolText(bool b) { return b ? "True" : "False"; }

// One problem: its line (1-based; 0 unknown), the key's path and what.
struct Problem {
  int line = 0;
  std::string path;
  std::string what;
};

int LineOf(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  return mark.is_null() ? 0 : mark.line + 1;
}

// The entries of a mapping by key, the first of each; a key given twice is a
// problem.
class Entries {
 public:
  Entries(const YAML::Node& map, const std::string& path,
          std::vector<Problem>* problems) {
    for (auto it = map.begin(); it != map.end(); ++it) {
      const std::string key = it->first.IsScalar() ? it->first.Scalar() : "?";
      if (!index_.emplace(key, entries_.size()).second) {
        problems->push_back(
            {LineOf(it->first), Join(path, key), "is given twice; keep one"});
        continue;
      }
      entries_.push_back({key, it->first, it->second});
    }
  }

  struct Entry {
    std::string key;
    YAML::Node key_node;
    YAML::Node value;
  };

  const std::vector<Entry>& all() const { return entries_; }

  const Entry* Find(const std::string& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &entries_[it->second];
  }

  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : absl::StrCat(path, ".", key);
  }

 private:
  std::vector<Entry> entries_;
  std::map<std::string, size_t> index_;
};

enum class Method { kBayes, kRandom, kGrid };

class Mapper {
 public:
  Mapper(std::string_view source) : source_(source) {}

  absl::StatusOr<WandbSweep> Map(std::string_view yaml, std::string_view name);

 private:
  void Add(const YAML::Node& at, const std::string& path, std::string what) {
    problems_.push_back({LineOf(at), path, std::move(what)});
  }

  // The scalar at `entry`, or a problem saying it must be one.
  std::optional<Scalar> ScalarOf(const Entries::Entry& entry,
                                 const std::string& path) {
    if (!entry.value.IsScalar() && !entry.value.IsNull()) {
      Add(entry.key_node, path, "must be a single value");
      return std::nullopt;
    }
    return Classify(entry.value);
  }

  std::optional<std::string> StringOf(const Entries::Entry& entry,
                                      const std::string& path) {
    std::optional<Scalar> s = ScalarOf(entry, path);
    if (!s.has_value()) return std::nullopt;
    if (s->kind == Scalar::Kind::kNull) {
      Add(entry.key_node, path, "must not be empty");
      return std::nullopt;
    }
    return s->text;
  }

  std::optional<double> NumberOf(const Entries::Entry& entry,
                                 const std::string& path) {
    std::optional<Scalar> s = ScalarOf(entry, path);
    if (!s.has_value()) return std::nullopt;
    if (!s->IsNumber() || !std::isfinite(s->number)) {
      Add(entry.key_node, path,
          absl::StrCat("must be a finite number, got \"", s->text, "\""));
      return std::nullopt;
    }
    return s->number;
  }

  // A whole number >= `min`.
  std::optional<int64_t> IntOf(const Entries::Entry& entry,
                               const std::string& path, int64_t min) {
    std::optional<Scalar> s = ScalarOf(entry, path);
    if (!s.has_value()) return std::nullopt;
    if (s->kind != Scalar::Kind::kInt || s->integer < min) {
      Add(entry.key_node, path,
          absl::StrCat("must be an integer >= ", min, ", got \"", s->text,
                       "\""));
      return std::nullopt;
    }
    return s->integer;
  }

  void Unknown(const Entries::Entry& entry, const std::string& path,
               const std::string& what) {
    Add(entry.key_node, Entries::Join(path, entry.key),
        absl::StrCat("unknown key ", what));
  }

  void MapMetric(const YAML::Node& node, const std::string& path, int line_hint,
                 v1::MetricSpec* metric);
  void MapParameters(const YAML::Node& node, const std::string& prefix,
                     const std::string& path);
  void MapParameter(const std::string& name, const Entries::Entry& at,
                    const std::string& path);
  void MapEarlyTerminate(const Entries::Entry& entry);
  void MapCommand(const Entries::Entry& entry);

  std::string source_;
  Method method_ = Method::kBayes;
  std::vector<Problem> problems_;
  v1::Study study_;
  std::vector<std::string> notes_;
  std::vector<std::string> booleans_;
};

void Mapper::MapMetric(const YAML::Node& node, const std::string& path,
                       int line_hint, v1::MetricSpec* metric) {
  if (!node.IsMap()) {
    problems_.push_back(
        {line_hint, path, "must be a mapping with name and goal"});
    return;
  }
  Entries entries(node, path, &problems_);
  for (const Entries::Entry& e : entries.all()) {
    const std::string key_path = Entries::Join(path, e.key);
    if (e.key == "name") {
      if (std::optional<std::string> s = StringOf(e, key_path)) {
        metric->set_name(*s);
      }
    } else if (e.key == "goal") {
      std::optional<std::string> goal = StringOf(e, key_path);
      if (goal == "minimize") {
        metric->set_goal(v1::MetricSpec::MINIMIZE);
      } else if (goal == "maximize") {
        metric->set_goal(v1::MetricSpec::MAXIMIZE);
      } else if (goal.has_value()) {
        Add(e.key_node, key_path,
            absl::StrCat("\"", *goal, "\" is not minimize or maximize"));
      }
    } else if (e.key == "target") {
      Add(e.key_node, key_path,
          "not supported: hypertune does not end a study when a trial "
          "reaches a value; remove it (run_cap bounds the study)");
    } else if (e.key == "impute" || e.key == "impute_while_running") {
      Add(e.key_node, key_path,
          "not supported: hypertune never invents a value for a failed "
          "trial (a FAILED trial is left out of the model, an INFEASIBLE "
          "one steers the search away); remove it");
    } else {
      Unknown(e, path, "(a metric has name, goal, target, impute)");
    }
  }
  if (metric->name().empty() && entries.Find("name") == nullptr) {
    problems_.push_back(
        {line_hint, Entries::Join(path, "name"), "missing: the metric's name"});
  }
  if (metric->goal() == v1::MetricSpec::GOAL_UNSPECIFIED) {
    metric->set_goal(v1::MetricSpec::MINIMIZE);  // W&B's default.
  }
}

void Mapper::MapParameters(const YAML::Node& node, const std::string& prefix,
                           const std::string& path) {
  if (!node.IsMap() || node.size() == 0) {
    problems_.push_back(
        {LineOf(node), path, "must be a mapping of at least one parameter"});
    return;
  }
  Entries entries(node, path, &problems_);
  for (const Entries::Entry& e : entries.all()) {
    const std::string key_path = Entries::Join(path, e.key);
    // W&B's names: [A-Za-z_][A-Za-z0-9_.-]*. A '.' would be ambiguous with
    // the '.' that joins nested names here.
    if (e.key.empty() || !IsIdentifierStart(e.key[0]) ||
        !std::all_of(e.key.begin(), e.key.end(),
                     [](char c) { return IsIdentifierChar(c) && c != '.'; })) {
      Add(e.key_node, key_path,
          "a parameter's name is a letter or '_', then letters, digits, "
          "'_' and '-' ('.' joins nested names here)");
      continue;
    }
    MapParameter(prefix + e.key, e, key_path);
  }
}

void Mapper::MapParameter(const std::string& name, const Entries::Entry& at,
                          const std::string& path) {
  if (!at.value.IsMap()) {
    Add(at.key_node, path,
        "must be a mapping (values, value, distribution, min, max...)");
    return;
  }
  Entries entries(at.value, path, &problems_);
  if (const Entries::Entry* nested = entries.Find("parameters")) {
    if (entries.all().size() > 1) {
      Add(at.key_node, path,
          "a parameter with nested `parameters` has no other keys");
      return;
    }
    MapParameters(nested->value, name + ".", Entries::Join(path, "parameters"));
    return;
  }
  static const std::set<std::string> kKeys = {"distribution",
                                              "values",
                                              "value",
                                              "probabilities",
                                              "min",
                                              "max",
                                              "mu",
                                              "sigma",
                                              "q",
                                              "a",
                                              "b"};
  for (const Entries::Entry& e : entries.all()) {
    if (!kKeys.count(e.key)) {
      Unknown(e, path,
              "(a parameter has distribution, values, value, min, max, q, "
              "mu, sigma, a, b, probabilities or parameters)");
    }
  }
  const Entries::Entry* values = entries.Find("values");
  const Entries::Entry* value = entries.Find("value");
  const Entries::Entry* min = entries.Find("min");
  const Entries::Entry* max = entries.Find("max");
  if (const Entries::Entry* p = entries.Find("probabilities")) {
    Add(p->key_node, Entries::Join(path, "probabilities"),
        "not supported: hypertune draws each value alike; remove it");
    return;
  }
  std::string distribution;
  const YAML::Node* distribution_at = &at.key_node;
  if (const Entries::Entry* d = entries.Find("distribution")) {
    std::optional<std::string> text =
        StringOf(*d, Entries::Join(path, "distribution"));
    if (!text.has_value()) return;
    distribution = *text;
    distribution_at = &d->key_node;
  } else if (values != nullptr) {
    distribution = "categorical";
  } else if (value != nullptr) {
    distribution = "constant";
  } else if (min != nullptr && max != nullptr) {
    const bool ints = min->value.IsScalar() && max->value.IsScalar() &&
                      Classify(min->value).kind == Scalar::Kind::kInt &&
                      Classify(max->value).kind == Scalar::Kind::kInt;
    distribution = ints ? "int_uniform" : "uniform";
  } else {
    Add(at.key_node, path,
        "needs values, value, or min and max (or nested parameters)");
    return;
  }

  // The keys each distribution takes besides `distribution` (W&B's schema).
  static const std::map<std::string, std::set<std::string>> kTakes = {
      {"constant", {"value"}},
      {"categorical", {"values"}},
      {"int_uniform", {"min", "max"}},
      {"uniform", {"min", "max"}},
      {"q_uniform", {"min", "max", "q"}},
      {"log_uniform", {"min", "max"}},
      {"log_uniform_values", {"min", "max"}},
      {"q_log_uniform", {"min", "max", "q"}},
      {"q_log_uniform_values", {"min", "max", "q"}},
      {"inv_log_uniform", {"min", "max"}},
      {"inv_log_uniform_values", {"min", "max"}}};
  static const std::set<std::string> kRefused = {"normal",
                                                 "q_normal",
                                                 "log_normal",
                                                 "q_log_normal",
                                                 "beta",
                                                 "q_beta",
                                                 "categorical_w_probabilities"};
  const std::string dist_path = Entries::Join(path, "distribution");
  if (kRefused.count(distribution)) {
    Add(*distribution_at, dist_path,
        absl::StrCat(distribution,
                     " is not supported: hypertune searches a bounded range "
                     "drawn uniformly in a linear or log scale, or a list "
                     "of values (use uniform, log_uniform_values or values)"));
    return;
  }
  auto takes = kTakes.find(distribution);
  if (takes == kTakes.end()) {
    Add(*distribution_at, dist_path,
        absl::StrCat("unknown distribution \"", distribution, "\""));
    return;
  }
  bool keys_ok = true;
  for (const Entries::Entry& e : entries.all()) {
    if (e.key != "distribution" && kKeys.count(e.key) &&
        !takes->second.count(e.key)) {
      Add(e.key_node, Entries::Join(path, e.key),
          absl::StrCat("is not a key of distribution ", distribution,
                       " (it takes ", absl::StrJoin(takes->second, ", "), ")"));
      keys_ok = false;
    }
  }
  for (const std::string& key : takes->second) {
    if (key != "q" && entries.Find(key) == nullptr) {
      Add(*distribution_at, Entries::Join(path, key),
          absl::StrCat("missing: distribution ", distribution, " needs it"));
      keys_ok = false;
    }
  }
  if (!keys_ok) return;

  v1::ParameterSpec* p = study_.mutable_spec()->add_parameters();
  p->set_name(name);
  const bool grid = method_ == Method::kGrid;

  // constant and categorical: one list of values.
  if (distribution == "constant" || distribution == "categorical") {
    std::vector<Scalar> list;
    const Entries::Entry* e = distribution == "constant" ? value : values;
    const std::string list_path = Entries::Join(path, e->key);
    if (distribution == "constant") {
      if (!e->value.IsScalar() && !e->value.IsNull()) {
        Add(e->key_node, list_path, "must be a single value");
        return;
      }
      list.push_back(Classify(e->value));
    } else {
      if (!e->value.IsSequence() || e->value.size() == 0) {
        Add(e->key_node, list_path, "must be a list of at least one value");
        return;
      }
      for (const YAML::Node& item : e->value) {
        if (!item.IsScalar()) {
          Add(item.IsNull() ? e->key_node : item, list_path,
              "each value must be a number, a string or a boolean (lists, "
              "mappings and nulls are not supported)");
          return;
        }
        list.push_back(Classify(item));
      }
    }
    for (const Scalar& s : list) {
      if (s.kind == Scalar::Kind::kNull) {
        Add(e->key_node, list_path, "null is not supported as a value");
        return;
      }
    }
    const bool numeric = std::all_of(
        list.begin(), list.end(), [](const Scalar& s) { return s.IsNumber(); });
    if (numeric) {
      // Ordered numbers, each once (W&B repeats nothing it draws uniformly
      // but a repeated value's weight; hypertune keeps the set).
      std::set<double> numbers;
      for (const Scalar& s : list) {
        if (!std::isfinite(s.number)) {
          Add(e->key_node, list_path,
              absl::StrCat("\"", s.text, "\" is not a finite number"));
          return;
        }
        numbers.insert(s.number);
      }
      for (double n : numbers) p->mutable_discrete_spec()->add_values(n);
      return;
    }
    std::set<std::string> seen;
    bool any_bool = false;
    for (const Scalar& s : list) {
      const std::string text =
          s.kind == Scalar::Kind::kBool ? BoolText(s.boolean) : s.text;
      any_bool = any_bool || s.kind == Scalar::Kind::kBool;
      if (seen.insert(text).second) {
        p->mutable_categorical_spec()->add_values(text);
      }
    }
    if (any_bool) booleans_.push_back(name);
    return;
  }

  // The rest: a range.
  std::optional<double> lo = NumberOf(*min, Entries::Join(path, "min"));
  std::optional<double> hi = NumberOf(*max, Entries::Join(path, "max"));
  if (!lo.has_value() || !hi.has_value()) return;
  double q = 1;
  if (const Entries::Entry* qe = entries.Find("q")) {
    std::optional<double> given = NumberOf(*qe, Entries::Join(path, "q"));
    if (!given.has_value()) return;
    if (*given <= 0) {
      Add(qe->key_node, Entries::Join(path, "q"), "must be > 0");
      return;
    }
    q = *given;
  }
  if (*lo > *hi) {
    Add(min->key_node, Entries::Join(path, "min"),
        absl::StrCat("is above max (", min->value.Scalar(), " > ",
                     max->value.Scalar(), ")"));
    return;
  }
  auto needs_values_for_grid = [&]() {
    Add(*distribution_at, path,
        absl::StrCat("grid needs values, value, int_uniform or q_uniform; ",
                     distribution, " is a continuous range"));
  };
  auto log_range = [&](double low, double high) {
    if (grid) return needs_values_for_grid();
    if (!(low > 0)) {
      Add(min->key_node, Entries::Join(path, "min"),
          absl::StrCat(distribution, " needs min > 0"));
      return;
    }
    v1::ParameterSpec::DoubleSpec* d = p->mutable_double_spec();
    d->set_min(low);
    d->set_max(high);
    d->set_scale(v1::LOG);
  };
  if (distribution == "int_uniform") {
    std::optional<int64_t> a = IntOf(*min, Entries::Join(path, "min"),
                                     std::numeric_limits<int64_t>::min());
    std::optional<int64_t> b = IntOf(*max, Entries::Join(path, "max"),
                                     std::numeric_limits<int64_t>::min());
    if (!a.has_value() || !b.has_value()) return;
    p->mutable_integer_spec()->set_min(*a);
    p->mutable_integer_spec()->set_max(*b);
  } else if (distribution == "uniform") {
    if (grid) return needs_values_for_grid();
    p->mutable_double_spec()->set_min(*lo);
    p->mutable_double_spec()->set_max(*hi);
  } else if (distribution == "log_uniform_values" ||
             distribution == "inv_log_uniform_values") {
    // log(1/X) uniform on [log(1/max), log(1/min)] is log(X) uniform on
    // [log(min), log(max)]: the same distribution.
    log_range(*lo, *hi);
  } else if (distribution == "log_uniform") {
    // min and max are natural logarithms of the bounds.
    log_range(std::exp(*lo), std::exp(*hi));
  } else if (distribution == "inv_log_uniform") {
    // log(1/X) uniform on [min, max]: X log-uniform on [e^-max, e^-min].
    log_range(std::exp(-*hi), std::exp(-*lo));
  } else if (distribution == "q_uniform") {
    // round(X / q) * q for X uniform on [min, max]: the multiples of q from
    // round(min / q) to round(max / q).
    const double first = std::round(*lo / q);
    const double last = std::round(*hi / q);
    if (q == 1 && std::floor(*lo) == *lo && std::floor(*hi) == *hi &&
        std::abs(*lo) < 9e15 && std::abs(*hi) < 9e15) {
      p->mutable_integer_spec()->set_min(static_cast<int64_t>(*lo));
      p->mutable_integer_spec()->set_max(static_cast<int64_t>(*hi));
    } else if (last - first + 1 > kMaxValuesPerParameter) {
      Add(*distribution_at, path,
          absl::StrCat("q_uniform makes ", last - first + 1,
                       " values, over hypertune's limit of ",
                       kMaxValuesPerParameter, "; use uniform"));
    } else {
      for (double k = first; k <= last; ++k) {
        p->mutable_discrete_spec()->add_values(k * q);
      }
    }
  } else if (distribution == "q_log_uniform_values" ||
             distribution == "q_log_uniform") {
    // With q = 1, round(X) for X log-uniform: hypertune's LOG integers.
    const double low = distribution == "q_log_uniform" ? std::exp(*lo) : *lo;
    const double high = distribution == "q_log_uniform" ? std::exp(*hi) : *hi;
    if (grid) return needs_values_for_grid();
    if (q != 1) {
      Add(entries.Find("q")->key_node, Entries::Join(path, "q"),
          absl::StrCat("not supported with ", distribution,
                       ": hypertune's log-scaled integers are quantized "
                       "by 1; use q: 1 or log_uniform_values"));
      return;
    }
    const int64_t a = std::llround(low);
    const int64_t b = std::llround(high);
    if (a < 1 || !(high < 9e15)) {
      Add(min->key_node, path,
          absl::StrCat(distribution,
                       " with q 1 needs bounds that round to integers >= 1"));
      return;
    }
    p->mutable_integer_spec()->set_min(a);
    p->mutable_integer_spec()->set_max(b);
    p->mutable_integer_spec()->set_scale(v1::LOG);
  }
}

// W&B's hyperband (src/sweeps/hyperband_stopping.py of wandb/sweeps) stops
// a running run whose metric at a band is below the band's top 1/eta: one
// bracket of ASHA that stops, never pauses. Its bands are max_iter / eta^i
// (i = 1..s, truncated, while >= 1) or min_iter * eta^k (truncated); ASHA's
// rungs are round(min_resource * eta^k) below max_resource. The sweep maps
// when the two lists agree.
void Mapper::MapEarlyTerminate(const Entries::Entry& entry) {
  const std::string path = "early_terminate";
  if (!entry.value.IsMap()) {
    Add(entry.key_node, path, "must be a mapping (type: hyperband, ...)");
    return;
  }
  Entries entries(entry.value, path, &problems_);
  std::optional<int64_t> min_iter, max_iter, s;
  double eta = 3;
  bool ok = true;
  bool has_type = false;
  for (const Entries::Entry& e : entries.all()) {
    const std::string key_path = Entries::Join(path, e.key);
    if (e.key == "type") {
      has_type = true;
      std::optional<std::string> type = StringOf(e, key_path);
      if (type.has_value() && *type != "hyperband") {
        Add(e.key_node, key_path,
            absl::StrCat("\"", *type, "\" is not supported (hyperband is)"));
        ok = false;
      }
    } else if (e.key == "min_iter") {
      min_iter = IntOf(e, key_path, 1);
      ok = ok && min_iter.has_value();
    } else if (e.key == "max_iter") {
      max_iter = IntOf(e, key_path, 1);
      ok = ok && max_iter.has_value();
    } else if (e.key == "s") {
      std::optional<double> n = NumberOf(e, key_path);
      if (n.has_value() && *n >= 1 && std::floor(*n) == *n && *n <= 64) {
        s = static_cast<int64_t>(*n);
      } else {
        if (n.has_value()) {
          Add(e.key_node, key_path, "must be a whole number from 1 to 64");
        }
        ok = false;
      }
    } else if (e.key == "eta") {
      std::optional<double> n = NumberOf(e, key_path);
      if (n.has_value() && (*n < 2 || *n > 1e6)) {
        Add(e.key_node, key_path,
            absl::StrCat("must be from 2 to 10^6 in hypertune's ASHA, got ",
                         e.value.Scalar()));
        ok = false;
      } else if (n.has_value()) {
        eta = *n;
      } else {
        ok = false;
      }
    } else if (e.key == "strict") {
      std::optional<Scalar> b = ScalarOf(e, key_path);
      if (b.has_value() && (b->kind != Scalar::Kind::kBool || b->boolean)) {
        Add(e.key_node, key_path,
            "only false is supported (hypertune's ASHA keeps the top 1/eta "
            "of each rung)");
        ok = false;
      }
    } else {
      Unknown(e, path,
              "(early_terminate has type, min_iter, max_iter, s, eta, "
              "strict)");
      ok = false;
    }
  }
  if (!has_type) {
    Add(entry.key_node, Entries::Join(path, "type"),
        "missing: type: hyperband");
    ok = false;
  }
  if (min_iter.has_value() && max_iter.has_value()) {
    Add(entries.Find("min_iter")->key_node, path,
        "give min_iter, or max_iter with s, not both");
    ok = false;
  } else if (max_iter.has_value() && !s.has_value() && ok) {
    Add(entries.Find("max_iter")->key_node, Entries::Join(path, "s"),
        "missing: max_iter needs s (the number of bands)");
    ok = false;
  } else if (!min_iter.has_value() && !max_iter.has_value() && ok) {
    Add(entry.key_node, path, "needs min_iter, or max_iter with s");
    ok = false;
  }
  if (!ok) return;

  // W&B's bands, below kMaxResource.
  std::vector<int64_t> bands;
  int64_t min_resource = 0;
  int64_t max_resource = 0;
  if (max_iter.has_value()) {
    double band = static_cast<double>(*max_iter);
    for (int64_t i = 0; i < *s; ++i) {
      band /= eta;
      if (band < 1) break;
      bands.push_back(static_cast<int64_t>(band));
    }
    std::sort(bands.begin(), bands.end());
    if (bands.empty()) {
      Add(entries.Find("max_iter")->key_node, path,
          "max_iter / eta is below 1: no band to stop runs at");
      return;
    }
    min_resource = bands.front();
    max_resource = *max_iter;
  } else {
    for (double band = static_cast<double>(*min_iter);
         band < static_cast<double>(kMaxResource); band *= eta) {
      bands.push_back(static_cast<int64_t>(band));
    }
    min_resource = *min_iter;
    max_resource = kMaxResource;
  }
  std::vector<int64_t> rungs;
  for (double r = static_cast<double>(min_resource);
       std::round(r) < static_cast<double>(max_resource); r *= eta) {
    rungs.push_back(std::llround(r));
  }
  if (rungs != bands) {
    Add(entry.key_node, path,
        absl::StrCat("W&B's bands [", absl::StrJoin(bands, ", "),
                     "] are not ASHA's rungs [", absl::StrJoin(rungs, ", "),
                     "] for eta ", eta,
                     ": use a whole eta and a max_iter that is a multiple of "
                     "eta^s"));
    return;
  }
  v1::EarlyStoppingSpec* es = study_.mutable_spec()->mutable_early_stopping();
  es->set_rule(v1::EarlyStoppingSpec::ASHA);
  es->set_min_resource(min_resource);
  es->set_max_resource(max_resource);
  es->set_reduction_factor(eta);
}

void Mapper::MapCommand(const Entries::Entry& entry) {
  if (!entry.value.IsSequence() || entry.value.size() == 0) {
    Add(entry.key_node, "command", "must be a list of at least one word");
    return;
  }
  static const std::set<std::string> kMacros = {"env",
                                                "interpreter",
                                                "program",
                                                "args",
                                                "args_no_hyphens",
                                                "args_json",
                                                "args_json_file",
                                                "args_no_boolean_flags"};
  nlohmann::json words = nlohmann::json::array();
  for (const YAML::Node& item : entry.value) {
    if (!item.IsScalar()) {
      Add(item.IsNull() ? entry.key_node : item, "command",
          "each word must be a string");
      return;
    }
    const std::string word = item.Scalar();
    if (word.starts_with("${") && word.ends_with("}")) {
      const std::string macro = word.substr(2, word.size() - 3);
      if (!kMacros.count(macro) &&
          !(macro.starts_with("envvar:") && macro.size() > 7)) {
        Add(item, "command",
            absl::StrCat("unknown macro ", word, " (known: ${",
                         absl::StrJoin(kMacros, "}, ${"),
                         "}, ${envvar:NAME})"));
        return;
      }
    }
    words.push_back(word);
  }
  (*study_.mutable_attributes())[kWandbCommand] = words.dump();
}

absl::StatusOr<WandbSweep> Mapper::Map(std::string_view yaml,
                                       std::string_view name) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ":", e.mark.is_null() ? 0 : e.mark.line + 1,
                     ": not YAML: ", e.msg));
  }
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": a sweep configuration is a YAML mapping"));
  }
  Entries top(root, "", &problems_);
  // The method first: it decides what a parameter may be.
  if (const Entries::Entry* m = top.Find("method")) {
    std::optional<std::string> method = StringOf(*m, "method");
    if (method == "bayes") {
      study_.mutable_spec()->set_algorithm(v1::GP_BANDIT);
    } else if (method == "random") {
      method_ = Method::kRandom;
      study_.mutable_spec()->set_algorithm(v1::RANDOM);
    } else if (method == "grid") {
      method_ = Method::kGrid;
      study_.mutable_spec()->set_algorithm(v1::GRID);
    } else if (method.has_value()) {
      Add(m->key_node, "method",
          absl::StrCat("\"", *method,
                       "\" is not supported (bayes, random or grid)"));
    }
  } else {
    problems_.push_back({1, "method", "missing: bayes, random or grid"});
  }
  auto keep = [&](const Entries::Entry& e, const std::string& key) {
    if (std::optional<std::string> text = StringOf(e, e.key)) {
      (*study_.mutable_attributes())[key] = *text;
      return true;
    }
    return false;
  };
  for (const Entries::Entry& e : top.all()) {
    if (e.key == "method") continue;
    if (e.key == "name") {
      if (keep(e, "wandb.name") && name.empty()) {
        // W&B's names are free text; a study's is not (the server's rule).
        const std::string& text = e.value.Scalar();
        if (text.empty() || !absl::ascii_isalnum(text[0]) ||
            text.size() > kMaxNameBytes ||
            !std::all_of(text.begin(), text.end(), [](char c) {
              return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-';
            })) {
          Add(e.key_node, "name",
              absl::StrCat("\"", text,
                           "\" is no study name (letters, digits and \"._-\", "
                           "a letter or digit first): give the study a NAME"));
        }
        study_.set_name(text);
      }
    } else if (e.key == "description") {
      keep(e, "wandb.description");
    } else if (e.key == "project" || e.key == "entity") {
      if (keep(e, "wandb." + e.key)) {
        notes_.push_back(
            absl::StrCat(e.key, ": kept as the study's attribute wandb.", e.key,
                         " (hypertune does not talk to W&B)"));
      }
    } else if (e.key == "program") {
      keep(e, kWandbProgram);
    } else if (e.key == "command") {
      MapCommand(e);
    } else if (e.key == "metric") {
      if (top.Find("metrics") != nullptr) {
        Add(e.key_node, "metric", "give metric or metrics, not both");
        continue;
      }
      MapMetric(e.value, "metric", LineOf(e.key_node),
                study_.mutable_spec()->add_metrics());
    } else if (e.key == "metrics") {
      if (!e.value.IsSequence() || e.value.size() == 0) {
        Add(e.key_node, "metrics", "must be a list of metrics");
        continue;
      }
      for (size_t i = 0; i < e.value.size(); ++i) {
        v1::MetricSpec* metric = study_.mutable_spec()->add_metrics();
        MapMetric(e.value[i], absl::StrCat("metrics[", i, "]"),
                  LineOf(e.value[i]), metric);
        metric->set_role(v1::MetricSpec::OBJECTIVE);
      }
    } else if (e.key == "parameters") {
      MapParameters(e.value, "", "parameters");
    } else if (e.key == "early_terminate") {
      MapEarlyTerminate(e);
    } else if (e.key == "run_cap") {
      if (std::optional<int64_t> cap = IntOf(e, "run_cap", 1)) {
        if (*cap > std::numeric_limits<int32_t>::max()) {
          Add(e.key_node, "run_cap", "is over 2147483647");
        } else {
          study_.mutable_spec()->set_max_trials(static_cast<int32_t>(*cap));
        }
      }
    } else if (e.key == "kind") {
      std::optional<std::string> kind = StringOf(e, "kind");
      if (kind.has_value() && *kind != "sweep") {
        Add(e.key_node, "kind", absl::StrCat("\"", *kind, "\" is not sweep"));
      }
    } else if (e.key == "apiVersion" || e.key == "controller") {
      notes_.push_back(absl::StrCat(
          e.key, ": ignored (the hypertune server is the controller)"));
    } else if (e.key == "job" || e.key == "image_uri" || e.key == "scheduler") {
      Add(e.key_node, e.key,
          "not supported: W&B Launch and custom schedulers have no "
          "counterpart; hypertune's worker runs program and command");
    } else {
      Unknown(e, "",
              "(a sweep has program, command, method, metric, metrics, "
              "parameters, early_terminate, run_cap, name, description, "
              "project, entity)");
    }
  }
  if (top.Find("parameters") == nullptr) {
    problems_.push_back({1, "parameters", "missing: the search space"});
  }
  if (study_.spec().metrics().empty() && top.Find("metric") == nullptr &&
      top.Find("metrics") == nullptr) {
    problems_.push_back({1, "metric",
                         "missing: a hypertune study optimizes a metric "
                         "(name and goal)"});
  }
  // ASHA judges the one objective, as W&B's hyperband judges `metric`.
  if (study_.spec().has_early_stopping() && study_.spec().metrics_size() > 1) {
    Add(top.Find("early_terminate")->key_node, "early_terminate",
        "needs one metric (metric, not metrics)");
  }
  if (!booleans_.empty()) {
    (*study_.mutable_attributes())[kWandbBooleans] =
        nlohmann::json(booleans_).dump();
  }
  if (!name.empty()) study_.set_name(std::string(name));
  if (study_.name().empty() && problems_.empty()) {
    problems_.push_back(
        {1, "name", "missing: give the study a NAME or the sweep a name"});
  }

  if (!problems_.empty()) {
    std::stable_sort(
        problems_.begin(), problems_.end(),
        [](const Problem& a, const Problem& b) { return a.line < b.line; });
    auto text = [&](const Problem& p) {
      return absl::StrCat(source_, ":", p.line, ": ", p.path, ": ", p.what);
    };
    if (problems_.size() == 1) {
      return absl::InvalidArgumentError(text(problems_[0]));
    }
    std::string message =
        absl::StrCat(source_, ": ", problems_.size(), " problems:");
    for (const Problem& p : problems_)
      absl::StrAppend(&message, "\n  ", text(p));
    return absl::InvalidArgumentError(message);
  }
  WandbSweep sweep;
  sweep.study = std::move(study_);
  sweep.notes = std::move(notes_);
  return sweep;
}

}  // namespace

absl::StatusOr<WandbSweep> ParseWandbSweep(std::string_view yaml,
                                           std::string_view source,
                                           std::string_view name) {
  return Mapper(source).Map(yaml, name);
}

}  // namespace hypertune::cli
