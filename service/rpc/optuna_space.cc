#include "service/rpc/optuna_space.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/double_text.h"
#include "common/identifier.h"
#include "common/limits.h"

namespace hypertune::service {
namespace {

using Json = nlohmann::json;

// Deeper JSON is refused: printing it again recurses once per level.
constexpr int kMaxJsonDepth = 100;

// `text` parsed; discarded when it is not JSON or nests deeper than
// kMaxJsonDepth.
Json ParseJson(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return Json(Json::value_t::discarded);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// A parameter value as a person reads it in a note.
std::string ValueText(const v1::ParameterValue& value) {
  if (value.has_string_value()) return value.string_value();
  if (value.has_int_value()) return absl::StrCat(value.int_value());
  return DoubleText(value.double_value());
}

// ----- Names -----

// Python's str() of a categorical choice: how the objective saw it.
std::string ChoiceText(const Json& choice) {
  if (choice.is_null()) return "None";
  if (choice.is_boolean()) return choice.get<bool>() ? "True" : "False";
  if (choice.is_string()) return choice.get<std::string>();
  if (choice.is_number_integer()) return absl::StrCat(choice.get<int64_t>());
  if (choice.is_number()) return DoubleText(choice.get<double>());
  return choice.dump();
}

bool IsNumber(const Json& j) { return j.is_number() && !j.is_boolean(); }

// ----- Distributions -----

struct Distribution {
  enum Kind { kFloat, kInt, kCategorical } kind = kFloat;
  double low = 0;
  double high = 0;
  bool log = false;
  double step = 0;  // 0: none
  std::vector<Json> choices;
};

const char* KindName(Distribution::Kind kind) {
  switch (kind) {
    case Distribution::kFloat:
      return "float";
    case Distribution::kInt:
      return "int";
    case Distribution::kCategorical:
      return "categorical";
  }
  return "?";
}

absl::StatusOr<Distribution> ParseDistribution(const std::string& text,
                                               const std::string& param) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter \"", param, "\": distribution ", text, ": ", why));
  };
  Json json = ParseJson(text);
  if (json.is_discarded() || !json.is_object() || !json.contains("name") ||
      !json.contains("attributes") || !json["attributes"].is_object()) {
    return bad("not a distribution in Optuna's JSON form");
  }
  const std::string name =
      json["name"].is_string() ? json["name"].get<std::string>() : "";
  const Json& a = json["attributes"];
  auto number = [&](const char* key, double fallback) {
    return a.contains(key) && IsNumber(a[key]) ? a[key].get<double>()
                                               : fallback;
  };
  Distribution d;
  if (name == "CategoricalDistribution") {
    if (!a.contains("choices") || !a["choices"].is_array() ||
        a["choices"].empty()) {
      return bad("no choices");
    }
    d.kind = Distribution::kCategorical;
    for (const Json& c : a["choices"]) d.choices.push_back(c);
    return d;
  }
  if (!a.contains("low") || !a.contains("high") || !IsNumber(a["low"]) ||
      !IsNumber(a["high"])) {
    return bad("no numeric low and high");
  }
  d.low = a["low"].get<double>();
  d.high = a["high"].get<double>();
  const bool log_flag =
      a.contains("log") && a["log"].is_boolean() && a["log"].get<bool>();
  if (name == "FloatDistribution") {
    d.log = log_flag;
    d.step = number("step", 0);
  } else if (name == "UniformDistribution") {
  } else if (name == "LogUniformDistribution") {
    d.log = true;
  } else if (name == "DiscreteUniformDistribution") {
    d.step = number("q", 0);
  } else if (name == "IntDistribution") {
    d.kind = Distribution::kInt;
    d.log = log_flag;
    d.step = number("step", 1);
  } else if (name == "IntUniformDistribution") {
    d.kind = Distribution::kInt;
    d.step = number("step", 1);
  } else if (name == "IntLogUniformDistribution") {
    d.kind = Distribution::kInt;
    d.log = true;
    d.step = number("step", 1);
  } else {
    return bad(absl::StrCat("unknown distribution \"", name, "\""));
  }
  if (!(d.low <= d.high)) return bad("low above high");
  if (d.step < 0 || (d.kind == Distribution::kInt && d.step <= 0) ||
      !std::isfinite(d.step)) {
    return bad("a step that is not positive");
  }
  return d;
}

// Whether two distributions of one parameter are the same.
bool SameDistribution(const Distribution& a, const Distribution& b) {
  return a.kind == b.kind && a.low == b.low && a.high == b.high &&
         a.log == b.log && a.step == b.step && a.choices == b.choices;
}

// Adds `d` to the distributions a parameter had in the file's trials (the
// distinct ones, in the order met). INVALID_ARGUMENT when its kind differs
// from theirs.
absl::Status AddVariant(std::vector<Distribution>& variants,
                        const Distribution& d, const std::string& param) {
  if (!variants.empty() && variants.front().kind != d.kind) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter \"", param, "\" is ", KindName(variants.front().kind),
        " in some trials and ", KindName(d.kind),
        " in others; hypertune cannot map that"));
  }
  for (const Distribution& v : variants) {
    if (SameDistribution(v, d)) return absl::OkStatus();
  }
  variants.push_back(d);
  return absl::OkStatus();
}

constexpr int kMaxDiscreteValues = kMaxValuesPerParameter;

// The values of a distribution with a step (an Int's step 1 included), at
// most `limit` + 1 of them: low, low + step, ... up to high. 15 significant
// digits: 0.3, not 0.30000000000000004 (trials' values are matched to the
// nearest).
std::vector<double> StepValues(const Distribution& d, int limit) {
  std::vector<double> values;
  const double count = std::floor((d.high - d.low) / d.step + 1e-9) + 1;
  const int n = static_cast<int>(std::min<double>(count, limit + 1.0));
  for (int k = 0; k < n; ++k) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.15g", d.low + k * d.step);
    values.push_back(std::strtod(text, nullptr));
  }
  return values;
}

// The parameter spec of a parameter whose trials had `variants` (the union
// of their values); what the spec cannot keep of them is added to `notes`.
absl::StatusOr<v1::ParameterSpec> ToSpec(
    const std::string& name, const std::vector<Distribution>& variants,
    std::vector<std::string>& notes) {
  v1::ParameterSpec spec;
  spec.set_name(name);
  const Distribution& first = variants.front();
  if (first.kind == Distribution::kCategorical) {
    std::vector<Json> choices;
    for (const Distribution& v : variants) {
      for (const Json& c : v.choices) {
        if (std::find(choices.begin(), choices.end(), c) == choices.end()) {
          choices.push_back(c);
        }
      }
    }
    if (std::all_of(choices.begin(), choices.end(), IsNumber)) {
      std::set<double> values;
      for (const Json& c : choices) values.insert(c.get<double>());
      for (double v : values) spec.mutable_discrete_spec()->add_values(v);
      return spec;
    }
    std::set<std::string> seen;
    for (const Json& c : choices) {
      const std::string text = ChoiceText(c);
      if (!seen.insert(text).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "parameter \"", name, "\": two choices read \"", text, "\""));
      }
      spec.mutable_categorical_spec()->add_values(text);
    }
    return spec;
  }
  double low = first.low;
  double high = first.high;
  bool all_log = true;
  bool any_log = false;
  // Ints always have a step (1 by default); Floats may.
  bool all_stepped = true;
  bool any_stepped = false;
  for (const Distribution& v : variants) {
    low = std::min(low, v.low);
    high = std::max(high, v.high);
    all_log = all_log && v.log;
    any_log = any_log || v.log;
    all_stepped = all_stepped && v.step > 0;
    any_stepped = any_stepped || v.step > 0;
  }
  const bool is_int = first.kind == Distribution::kInt;
  if (any_log && !all_log) {
    notes.push_back(absl::StrCat("parameter \"", name,
                                 "\": log scale in some trials only; "
                                 "imported on a linear scale"));
  }
  if (low == high) {
    spec.mutable_discrete_spec()->add_values(low);
    return spec;
  }
  auto number_text = [is_int](double x) {
    return is_int ? absl::StrCat(std::llround(x)) : DoubleText(x);
  };
  auto range_text = [&] {
    return absl::StrCat("[", number_text(low), ", ", number_text(high), "]");
  };
  if (all_stepped) {
    // The union of the variants' values: every integer of the range is an
    // INTEGER parameter, fewer values a DISCRETE one.
    std::set<double> values;
    bool too_many = false;
    for (const Distribution& v : variants) {
      for (double x : StepValues(v, kMaxDiscreteValues)) values.insert(x);
      if (values.size() > static_cast<size_t>(kMaxDiscreteValues)) {
        too_many = true;
        break;
      }
    }
    const bool every_integer =
        is_int && !too_many &&
        values.size() == static_cast<size_t>(high - low + 1);
    const bool unit_steps =
        is_int &&
        std::all_of(variants.begin(), variants.end(),
                    [](const Distribution& v) { return v.step == 1; });
    if (!unit_steps && !every_integer && !too_many) {
      for (double v : values) spec.mutable_discrete_spec()->add_values(v);
      return spec;
    }
    if (!unit_steps && !every_integer) {
      notes.push_back(absl::StrCat(
          "parameter \"", name, "\": Optuna's step (",
          absl::StrJoin(variants, ", ",
                        [&](std::string* out, const Distribution& v) {
                          absl::StrAppend(out, number_text(v.step));
                        }),
          ") over ", range_text(), " gives more than ", kMaxDiscreteValues,
          " values, past what a DISCRETE parameter holds; imported as ",
          is_int ? "INTEGER" : "DOUBLE", " ", range_text(),
          " without the step"));
    }
  } else if (any_stepped) {
    notes.push_back(absl::StrCat(
        "parameter \"", name,
        "\": a step in some trials and none in others; imported as DOUBLE ",
        range_text(), " without the step"));
  }
  if (is_int) {
    auto& s = *spec.mutable_integer_spec();
    s.set_min(static_cast<int64_t>(std::llround(low)));
    s.set_max(static_cast<int64_t>(std::llround(high)));
    if (all_log) s.set_scale(v1::LOG);
    return spec;
  }
  auto& s = *spec.mutable_double_spec();
  s.set_min(low);
  s.set_max(high);
  if (all_log) s.set_scale(v1::LOG);
  return spec;
}

// The value of a trial's parameter under `spec`: Optuna stores a choice's
// index for categorical distributions (of the trial's own distribution),
// the value itself otherwise.
absl::StatusOr<v1::ParameterValue> ToValue(const v1::ParameterSpec& spec,
                                           const Distribution& own,
                                           double stored) {
  v1::ParameterValue value;
  value.set_name(spec.name());
  double number = stored;
  if (std::isnan(stored)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter \"", spec.name(), "\": the stored value is NaN"));
  }
  if (own.kind == Distribution::kCategorical) {
    // An index: a whole number below the number of choices.
    const double index = stored;
    if (std::floor(index) != index || index < 0 ||
        index >= static_cast<double>(own.choices.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter \"", spec.name(), "\": choice index ", DoubleText(stored),
          " is not one of the ", own.choices.size(), " choices' indices"));
    }
    const Json& choice = own.choices[static_cast<size_t>(index)];
    if (spec.has_categorical_spec()) {
      value.set_string_value(ChoiceText(choice));
      return value;
    }
    number = choice.get<double>();
  }
  switch (spec.kind_case()) {
    case v1::ParameterSpec::kIntegerSpec:
      value.set_int_value(static_cast<int64_t>(std::llround(number)));
      break;
    case v1::ParameterSpec::kDiscreteSpec: {
      // The nearest value: a step's multiples may differ in the last bit.
      double best = spec.discrete_spec().values(0);
      for (double v : spec.discrete_spec().values()) {
        if (std::abs(v - number) < std::abs(best - number)) best = v;
      }
      value.set_double_value(best);
      break;
    }
    default:
      value.set_double_value(number);
  }
  return value;
}

// The value of an enqueued trial's parameter, as the user gave it.
absl::StatusOr<v1::ParameterValue> FixedValue(const v1::ParameterSpec& spec,
                                              const Json& given) {
  if (spec.has_categorical_spec()) {
    v1::ParameterValue value;
    value.set_name(spec.name());
    value.set_string_value(ChoiceText(given));
    return value;
  }
  if (!IsNumber(given)) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter \"", spec.name(), "\": fixed value ",
                     given.dump(), " is not a number"));
  }
  Distribution own;  // numeric: the value is stored as is
  return ToValue(spec, own, given.get<double>());
}

// ----- Conditional parameters -----

// A trial's parameters by their Optuna names.
using ParameterValues = std::map<std::string, v1::ParameterValue>;

// A value as a key: the category, or the number's shortest text.
std::string ValueKey(const v1::ParameterValue& v) {
  if (v.has_string_value()) return "s" + v.string_value();
  if (v.has_int_value()) return absl::StrCat("n", v.int_value());
  return "n" + DoubleText(v.double_value());
}

// When a parameter is active: when `parent` (an Optuna name) is active and
// holds one of `values`.
struct Condition {
  std::string parent;
  std::vector<v1::ParameterValue> values;
};

struct InferredSpace {
  // Parameters without an entry are always active.
  std::map<std::string, Condition> conditions;
  // Parameters not in the space, with why: held by no trial that is
  // evidence (only FAIL or WAITING ones), or by a few trials for no reason
  // the others tell.
  std::map<std::string, std::string> left_out;
};

// The conditions under which each parameter of `order` (by the number of
// trials holding it, most first, then by name: a parent before its
// children, whatever order the trials list them in) is present in the
// `evidence` trials. A parameter present in some trials only gets as parent the
// earlier CATEGORICAL, DISCRETE or INTEGER parameter whose values tell when
// it is present: the one that leaves the fewest trials unexplained, then
// the one nearest the root, then the first in `order`. A parent takes at most
// half as many values as there are trials, each value it is active under seen
// twice, and at most one in ten of the trials holding the parameter may
// disagree with it (the caller leaves those out). With no such parent, the
// parameter is always active when most trials hold it (the others are left
// out), else not in the space (the trials that hold it keep the rest);
// `notes` says which.
InferredSpace InferConditions(
    const std::vector<std::string>& order,
    const std::map<std::string, v1::ParameterSpec>& specs,
    const std::vector<const ParameterValues*>& evidence,
    std::vector<std::string>& notes) {
  InferredSpace space;
  std::map<std::string, int> depth;
  const size_t n = evidence.size();
  for (size_t k = 0; k < order.size(); ++k) {
    const std::string& name = order[k];
    const std::string& shown = specs.at(name).name();
    const size_t holding = std::count_if(
        evidence.begin(), evidence.end(),
        [&](const ParameterValues* t) { return t->contains(name); });
    if (holding == n) {
      depth[name] = 0;
      continue;
    }
    if (holding == 0) {
      const std::string why = absl::StrCat(
          "parameter \"", shown,
          "\" is held only by FAILED or WAITING trials: left out of the space "
          "and of those trials");
      space.left_out[name] = why;
      notes.push_back(why);
      continue;
    }
    struct Choice {
      std::string parent;
      std::vector<v1::ParameterValue> values;
      size_t unexplained = 0;
      int depth = 0;
    };
    std::optional<Choice> best;
    for (size_t j = 0; j < k; ++j) {
      const std::string& parent = order[j];
      if (space.left_out.contains(parent)) continue;
      const v1::ParameterSpec& p = specs.at(parent);
      if (!p.has_categorical_spec() && !p.has_discrete_spec() &&
          !p.has_integer_spec()) {
        continue;
      }
      Choice choice{parent, {}, 0, depth[parent] + 1};
      // Per value of the parent: trials with and without this parameter.
      std::map<std::string, std::pair<size_t, size_t>> counts;
      std::map<std::string, v1::ParameterValue> value_of;
      for (const ParameterValues* t : evidence) {
        const bool has = t->contains(name);
        auto v = t->find(parent);
        if (v == t->end()) {
          if (has) ++choice.unexplained;
          continue;
        }
        const std::string key = ValueKey(v->second);
        value_of.emplace(key, v->second);
        ++(has ? counts[key].first : counts[key].second);
      }
      // A parent of many values seen once each would "explain" anything by
      // naming the trials: it needs at most half as many values as trials,
      // and each value it is active under seen twice.
      if (counts.size() * 2 > n) continue;
      bool supported = true;
      for (const auto& [key, count] : counts) {
        const auto [with, without] = count;
        if (with > 0 && with >= without) {
          choice.values.push_back(value_of[key]);
          choice.unexplained += without;
          supported = supported && with + without >= 2;
        } else {
          choice.unexplained += with;
        }
      }
      if (choice.values.empty() || !supported) continue;
      if (!best.has_value() || std::tie(choice.unexplained, choice.depth) <
                                   std::tie(best->unexplained, best->depth)) {
        best = std::move(choice);
      }
    }
    // A parent that a few trials disagree with (cut short before choosing
    // it, say: at most one in ten of those that hold it) still explains it.
    // Unexplained, it is either always active (the trials without it left
    // out) or not in the space (the trials keep the rest): whichever loses
    // less.
    const size_t without_it = n - holding;
    if (!best.has_value() || best->unexplained * 10 > holding) {
      const std::string why = absl::StrCat(
          "parameter \"", shown, "\" is in ", holding, " of ", n,
          " trials, and no CATEGORICAL, DISCRETE or INTEGER parameter's "
          "values tell when: ");
      if (holding >= without_it) {
        depth[name] = 0;
        notes.push_back(absl::StrCat(why, "imported as always active (the ",
                                     without_it,
                                     " trials without it are left out)"));
      } else {
        const std::string note =
            absl::StrCat(why, "left out of the space (the ", holding,
                         " trials with it are kept without it)");
        space.left_out[name] = note;
        notes.push_back(note);
      }
      continue;
    }
    // The parent's values in its own order.
    const v1::ParameterSpec& p = specs.at(best->parent);
    auto rank = [&p](const v1::ParameterValue& v) -> double {
      if (!v.has_string_value()) {
        return v.has_int_value() ? static_cast<double>(v.int_value())
                                 : v.double_value();
      }
      const auto& categories = p.categorical_spec().values();
      return static_cast<double>(
          std::find(categories.begin(), categories.end(), v.string_value()) -
          categories.begin());
    };
    std::sort(best->values.begin(), best->values.end(),
              [&](const v1::ParameterValue& a, const v1::ParameterValue& b) {
                return rank(a) < rank(b);
              });
    const std::string when = absl::StrCat(
        "active when \"", p.name(), "\" is ",
        absl::StrJoin(best->values, " or ",
                      [](std::string* out, const v1::ParameterValue& v) {
                        absl::StrAppend(out, ValueText(v));
                      }));
    if (best->unexplained == 0) {
      notes.push_back(
          absl::StrCat("parameter \"", shown, "\" is conditional: ", when));
    } else {
      notes.push_back(absl::StrCat(
          "parameter \"", shown,
          "\": no parameter's values tell exactly when it is present; "
          "imported as ",
          when, ", which all but ", best->unexplained,
          " trials agree with (those are left out)"));
    }
    depth[name] = best->depth;
    space.conditions[name] = Condition{best->parent, std::move(best->values)};
  }
  return space;
}

// The parameters of `order` active in a trial holding `values`, in order.
std::vector<std::string> ActiveParameters(const std::vector<std::string>& order,
                                          const InferredSpace& space,
                                          const ParameterValues& values) {
  std::vector<std::string> active;
  std::set<std::string> is_active;
  for (const std::string& name : order) {
    if (space.left_out.contains(name)) continue;
    auto c = space.conditions.find(name);
    bool on = c == space.conditions.end();
    if (!on && is_active.contains(c->second.parent)) {
      auto v = values.find(c->second.parent);
      on = v != values.end() &&
           std::any_of(c->second.values.begin(), c->second.values.end(),
                       [&](const v1::ParameterValue& allowed) {
                         return ValueKey(allowed) == ValueKey(v->second);
                       });
    }
    if (on) {
      active.push_back(name);
      is_active.insert(name);
    }
  }
  return active;
}

// One parameter of a request trial, its distribution parsed.
struct TrialParam {
  std::string name;
  double value = 0;
  std::string problem;
  Distribution distribution;
};

bool KnownState(const std::string& state) {
  return state == "COMPLETE" || state == "PRUNED" || state == "FAIL" ||
         state == "RUNNING" || state == "WAITING";
}

}  // namespace

absl::StatusOr<v1::InferOptunaSpaceResponse> InferOptunaSpace(
    const v1::InferOptunaSpaceRequest& request) {
  v1::InferOptunaSpaceResponse out;
  std::vector<std::string> notes;
  const int n_trials = request.trials_size();

  // Each distribution parsed once; each trial's parameters with theirs.
  std::vector<std::optional<Distribution>> parsed(request.distributions_size());
  std::vector<std::vector<TrialParam>> params(n_trials);
  std::map<std::string, std::vector<Distribution>> variants;  // by name
  for (int i = 0; i < n_trials; ++i) {
    const v1::OptunaTrial& t = request.trials(i);
    if (!KnownState(t.state())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trial ", t.number(), ": state \"", t.state(),
          "\" is not an Optuna trial state (COMPLETE, PRUNED, FAIL, "
          "RUNNING, WAITING)"));
    }
    std::set<std::string> seen;
    for (const v1::OptunaParam& p : t.params()) {
      if (!seen.insert(p.name()).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "trial ", t.number(), " holds parameter \"", p.name(), "\" twice"));
      }
      const int d = p.distribution();
      if (d < 0 || d >= request.distributions_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "trial ", t.number(), ", parameter \"", p.name(),
            "\": distribution ", d, " is not one of the request's ",
            request.distributions_size()));
      }
      if (!parsed[d].has_value()) {
        absl::StatusOr<Distribution> distribution =
            ParseDistribution(request.distributions(d), p.name());
        if (!distribution.ok()) return distribution.status();
        parsed[d] = *std::move(distribution);
      }
      TrialParam& param = params[i].emplace_back();
      param.name = p.name();
      param.value = p.value();
      param.problem = p.problem();
      param.distribution = *parsed[d];
      if (absl::Status s =
              AddVariant(variants[p.name()], param.distribution, p.name());
          !s.ok()) {
        return s;
      }
    }
  }
  if (variants.empty()) {
    return absl::InvalidArgumentError(
        "no trial has parameters; there is no space to infer");
  }

  // Each parameter's spec, its name made an identifier (by name order, so
  // that two names made alike get the same suffixes whatever the order).
  std::map<std::string, v1::ParameterSpec> specs;
  std::set<std::string> used;
  for (const auto& [name, distributions] : variants) {
    std::string id_name = ToIdentifier(name);
    while (!used.insert(id_name).second) id_name += "_";
    if (id_name != name) {
      notes.push_back(
          absl::StrCat("parameter \"", name, "\" is named \"", id_name, "\""));
    }
    absl::StatusOr<v1::ParameterSpec> spec =
        ToSpec(id_name, distributions, notes);
    if (!spec.ok()) return spec.status();
    specs[name] = *std::move(spec);
  }

  // Each trial's values under the space (a WAITING one's: those it was
  // enqueued with); a trial with a value that cannot be read is not kept.
  std::vector<ParameterValues> values(n_trials);
  std::vector<std::string> refused(n_trials);
  for (int i = 0; i < n_trials; ++i) {
    const v1::OptunaTrial& t = request.trials(i);
    for (const TrialParam& p : params[i]) {
      if (!p.problem.empty()) {
        refused[i] = p.problem;
        break;
      }
      absl::StatusOr<v1::ParameterValue> value =
          ToValue(specs[p.name], p.distribution, p.value);
      if (!value.ok()) {
        refused[i] = std::string(value.status().message());
        break;
      }
      values[i][p.name] = *std::move(value);
    }
    if (refused[i].empty() && !t.fixed_params_json().empty()) {
      const Json fixed = ParseJson(t.fixed_params_json());
      if (!fixed.is_object()) {
        refused[i] = "its fixed parameters are not a JSON object";
      } else {
        for (const auto& [name, spec] : specs) {
          if (values[i].contains(name) || !fixed.contains(name)) continue;
          absl::StatusOr<v1::ParameterValue> value =
              FixedValue(spec, fixed[name]);
          if (!value.ok()) {
            refused[i] = std::string(value.status().message());
            break;
          }
          values[i][name] = *std::move(value);
        }
      }
    }
    if (!refused[i].empty()) {
      notes.push_back(absl::StrCat("Optuna trial ", t.number(), " (", t.state(),
                                   ") left out: ", refused[i]));
    }
  }

  // A define-by-run space: which parameters the trials hold, under which
  // values of which others, makes the conditional parameters. FAIL trials
  // may have stopped before choosing all theirs, and WAITING ones are given
  // only some: neither is evidence.
  std::vector<const ParameterValues*> evidence;
  for (int i = 0; i < n_trials; ++i) {
    const std::string& state = request.trials(i).state();
    if (refused[i].empty() && state != "FAIL" && state != "WAITING") {
      evidence.push_back(&values[i]);
    }
  }
  // Parents before children without trusting the order in which a trial
  // lists its parameters (Optuna's storage: by name): a parent is held by
  // every trial that holds its child. Ties go to the parameter first held
  // by a lower-numbered trial, then by name.
  std::map<std::string, size_t> holding;
  for (const ParameterValues* t : evidence) {
    for (const auto& [name, value] : *t) ++holding[name];
  }
  std::map<std::string, int64_t> first_number;
  for (int i = 0; i < n_trials; ++i) {
    for (const TrialParam& p : params[i]) {
      const int64_t number = request.trials(i).number();
      int64_t& first = first_number.try_emplace(p.name, number).first->second;
      first = std::min(first, number);
    }
  }
  std::vector<std::string> order;
  for (const auto& [name, spec] : specs) order.push_back(name);
  std::stable_sort(order.begin(), order.end(),
                   [&](const std::string& a, const std::string& b) {
                     return std::make_tuple(-static_cast<int64_t>(holding[a]),
                                            first_number[a]) <
                            std::make_tuple(-static_cast<int64_t>(holding[b]),
                                            first_number[b]);
                   });
  InferredSpace space = InferConditions(order, specs, evidence, notes);

  for (const std::string& name : order) {
    if (auto left = space.left_out.find(name); left != space.left_out.end()) {
      v1::InferOptunaSpaceResponse::LeftOut& l = *out.add_left_out();
      l.set_optuna_name(name);
      l.set_reason(left->second);
      continue;
    }
    v1::ParameterSpec& spec = specs[name];
    if (auto c = space.conditions.find(name); c != space.conditions.end()) {
      spec.set_parent(specs[c->second.parent].name());
      for (const v1::ParameterValue& v : c->second.values) {
        if (v.has_string_value()) {
          spec.add_parent_categories(v.string_value());
        } else {
          spec.add_parent_values(v.has_int_value()
                                     ? static_cast<double>(v.int_value())
                                     : v.double_value());
        }
      }
    }
    v1::InferOptunaSpaceResponse::Parameter& p = *out.add_parameters();
    p.set_optuna_name(name);
    *p.mutable_spec() = spec;
  }

  // How each trial fits: a FAIL one may hold any part of the space; the
  // others hold exactly their active parameters.
  for (int i = 0; i < n_trials; ++i) {
    const v1::OptunaTrial& t = request.trials(i);
    v1::InferOptunaSpaceResponse::TrialFit& fit = *out.add_trials();
    if (!refused[i].empty()) {
      fit.set_reason(refused[i]);
      continue;
    }
    std::vector<std::string> held;
    for (const std::string& name : order) {
      if (values[i].contains(name) && !space.left_out.contains(name)) {
        held.push_back(name);
      }
    }
    if (t.state() != "FAIL") {
      const std::vector<std::string> active =
          ActiveParameters(order, space, values[i]);
      if (held != active) {
        auto absent_from = [&](const std::vector<std::string>& these,
                               const std::vector<std::string>& those) {
          std::vector<std::string> absent;
          for (const std::string& name : these) {
            if (std::find(those.begin(), those.end(), name) == those.end()) {
              absent.push_back(specs[name].name());
            }
          }
          return absent;
        };
        const std::vector<std::string> missing = absent_from(active, held);
        const std::vector<std::string> inactive = absent_from(held, active);
        std::vector<std::string> why;
        if (!missing.empty()) {
          why.push_back(
              absl::StrCat("it has no ", absl::StrJoin(missing, ", ")));
        }
        if (!inactive.empty()) {
          why.push_back(absl::StrCat("it holds ", absl::StrJoin(inactive, ", "),
                                     ", inactive under its parent's value"));
        }
        fit.set_reason(absl::StrJoin(why, "; "));
        notes.push_back(absl::StrCat("Optuna trial ", t.number(), " (",
                                     t.state(), ") left out: ", fit.reason()));
        continue;
      }
    }
    fit.set_kept(true);
    for (const std::string& name : held) {
      *fit.add_parameters() = values[i].at(name);
    }
  }
  for (std::string& note : notes) out.add_notes(std::move(note));
  return out;
}

}  // namespace hypertune::service
