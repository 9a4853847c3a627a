#include "cli/optuna_import.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <map>
#include <memory>
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
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/json_config.h"
#include "cli/worker_protocol.h"
#include "common/limits.h"

namespace hypertune::cli {

const char kImportOptunaUsage[] =
    "usage: hypertune import-optuna SQLITE_FILE [--study NAME] [--name NEW]\n"
    "\n"
    "Imports the studies of an Optuna RDB storage file (sqlite:///FILE), or\n"
    "only its study NAME, each under its own name (or NEW, for one study):\n"
    "distributions, directions, trials with their states, values, times and\n"
    "intermediate values, the study's and trials' user attributes as their\n"
    "attributes (text as is, other values as JSON; numeric ones also as\n"
    "recorded metrics \"user_attr.KEY\", for plots). COMPLETE -> COMPLETED,\n"
    "PRUNED -> STOPPED, FAIL -> FAILED, RUNNING and WAITING -> REQUESTED\n"
    "(they run again). A define-by-run space becomes conditional\n"
    "parameters, each active under the values of the parameter that tells\n"
    "when Optuna chose it. What cannot be kept (attributes past the\n"
    "server's limits, a dropped step, trials with unreadable values or not\n"
    "fitting the conditions) is listed; an unknown trial state or\n"
    "direction refuses the file. Reads the file only; Python is not\n"
    "needed.\n";

namespace {

using Json = nlohmann::json;

std::string Identifier(const std::string& text);

// Keeps Optuna's attribute `optuna_key` (its value_json parsed) in
// `attributes` as text, under its name made an identifier (the server takes
// names as attribute keys: "my key" becomes "my_key"): a string as itself,
// any other value as its JSON. False, leaving `attributes` as it was, when
// the value is not JSON, the key is empty or it would pass the server's
// limits.
bool KeepAttribute(
    const std::string& optuna_key, const Json& value,
    google::protobuf::Map<std::string, std::string>& attributes) {
  if (value.is_discarded()) return false;
  if (optuna_key.empty()) return false;
  const std::string key = Identifier(optuna_key);
  std::string text =
      value.is_string() ? value.get<std::string>() : value.dump();
  if (key.size() > kMaxNameBytes || text.size() > kMaxAttributeValueBytes ||
      (!attributes.contains(key) &&
       attributes.size() >= static_cast<size_t>(kMaxAttributes))) {
    return false;
  }
  attributes[key] = std::move(text);
  return true;
}

// A value_json of the file parsed; discarded when it is not JSON or nests
// deeper than kMaxJsonDepth (printing it again recurses once per level).
Json ParseStoredJson(const std::string& text) {
  if (JsonTooDeepAt(text, kMaxJsonDepth).has_value()) {
    return Json(Json::value_t::discarded);
  }
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// ----- SQLite -----

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
struct StatementFinalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Db = std::unique_ptr<sqlite3, DbCloser>;
using Statement = std::unique_ptr<sqlite3_stmt, StatementFinalizer>;

absl::StatusOr<Statement> Prepare(sqlite3* db, const std::string& sql,
                                  const std::string& path) {
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) !=
      SQLITE_OK) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not an Optuna storage file (", sqlite3_errmsg(db), ")"));
  }
  return Statement(statement);
}

std::string Text(sqlite3_stmt* s, int column) {
  const unsigned char* text = sqlite3_column_text(s, column);
  return text == nullptr ? std::string()
                         : std::string(reinterpret_cast<const char*>(text));
}

bool IsNull(sqlite3_stmt* s, int column) {
  return sqlite3_column_type(s, column) == SQLITE_NULL;
}

// Whether `table` has `column` (older schemas lack value_type).
bool HasColumn(sqlite3* db, const std::string& table,
               const std::string& column) {
  sqlite3_stmt* raw = nullptr;
  const std::string sql = absl::StrCat("PRAGMA table_info(", table, ")");
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &raw, nullptr) != SQLITE_OK) {
    return false;
  }
  Statement s(raw);
  while (sqlite3_step(s.get()) == SQLITE_ROW) {
    if (Text(s.get(), 1) == column) return true;
  }
  return false;
}

// "2024-05-01 12:03:04.123456" (Optuna's naive datetimes, read as UTC) in
// unix milliseconds; 0 for NULL or text in another form.
int64_t ParseTimeMs(const std::string& text) {
  std::tm tm{};
  int micros = 0;
  char fraction[16] = "";
  if (std::sscanf(text.c_str(), "%d-%d-%d %d:%d:%d%15s", &tm.tm_year,
                  &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec,
                  fraction) < 6) {
    return 0;
  }
  if (fraction[0] == '.') {
    std::string digits = std::string(fraction + 1).substr(0, 6);
    digits.resize(6, '0');
    micros = std::atoi(digits.c_str());
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + micros / 1000;
}

// A value stored with its type (FINITE, INF_POS, INF_NEG, NAN) in
// `columns` (value, type) of `s`; nullopt for NULL or NaN.
std::optional<double> TypedValue(sqlite3_stmt* s, int value_column,
                                 int type_column) {
  const std::string type =
      type_column >= 0 ? Text(s, type_column) : std::string("FINITE");
  if (type == "INF_POS") return std::numeric_limits<double>::infinity();
  if (type == "INF_NEG") return -std::numeric_limits<double>::infinity();
  if (type == "NAN" || IsNull(s, value_column)) return std::nullopt;
  const double v = sqlite3_column_double(s, value_column);
  if (std::isnan(v)) return std::nullopt;
  return v;
}

// ----- Names -----

bool NameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '.' || c == '-';
}

// A study name from Optuna's: other characters become '-', it begins with
// a letter or digit, at most 128 characters.
std::string StudyName(const std::string& optuna_name, int64_t study_id) {
  std::string name;
  for (char c : optuna_name) name += NameChar(c) ? c : '-';
  size_t first = 0;
  while (first < name.size() &&
         !absl::ascii_isalnum(static_cast<unsigned char>(name[first]))) {
    ++first;
  }
  name = name.substr(first, 128);
  if (name.empty()) name = absl::StrCat("optuna-study-", study_id);
  return name;
}

// A parameter or metric name (an identifier): other characters become '_',
// and '_' goes first where a letter or '_' does not.
std::string Identifier(const std::string& text) {
  std::string name;
  for (char c : text) name += NameChar(c) ? c : '_';
  if (name.empty() ||
      !(absl::ascii_isalpha(static_cast<unsigned char>(name[0])) ||
        name[0] == '_')) {
    name.insert(name.begin(), '_');
  }
  return name.substr(0, 128);
}

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
  Json json = ParseStoredJson(text);
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
  // Parameters not in the space: held by no trial that is evidence (only
  // FAILED or WAITING ones), or by a few trials for no reason the others
  // tell.
  std::set<std::string> left_out;
};

// The conditions under which each parameter of `order` (first appearance,
// so that a parent comes before its children) is present in the `evidence`
// trials. A parameter present in some trials only gets as parent the
// earlier CATEGORICAL, DISCRETE or INTEGER parameter whose values tell when
// it is present: the one that leaves the fewest trials unexplained, then
// the one nearest the root, then the first. A parent takes at most half as
// many values as there are trials, each value it is active under seen
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
      space.left_out.insert(name);
      notes.push_back(absl::StrCat(
          "parameter \"", shown,
          "\" is held only by FAILED or WAITING trials: left out of the space "
          "and of those trials"));
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
        space.left_out.insert(name);
        notes.push_back(absl::StrCat(why, "left out of the space (the ",
                                     holding,
                                     " trials with it are kept "
                                     "without it)"));
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
                        absl::StrAppend(out, FormatParameterValue(v));
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

// ----- Reading -----

struct RawParam {
  std::string name;
  double value = 0;
  // Why `value` could not be read; empty when it was.
  std::string problem;
  Distribution distribution;
};

struct RawTrial {
  int64_t trial_id = 0;
  int64_t number = 0;
  std::string state;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  std::vector<RawParam> params;
  std::map<int, double> values;
  std::vector<std::pair<int64_t, double>> intermediate;
  int64_t nan_intermediate = 0;
  std::vector<std::pair<std::string, Json>> user_attrs;
  std::string fail_reason;
  // WAITING (enqueued) trials: their parameters, as the user gave them.
  Json fixed_params;
};

// The study's directions as its metrics ("value", or "values_I" with
// several objectives; Optuna >= 3.2's names where it kept them), added to
// out.study's spec; returns their names in objective order.
absl::StatusOr<std::vector<std::string>> ReadMetrics(sqlite3* db,
                                                     const std::string& path,
                                                     const std::string& id,
                                                     OptunaStudy& out) {
  v1::Study& study = out.study;
  std::vector<v1::MetricSpec::Goal> goals;
  {
    absl::StatusOr<Statement> s = Prepare(
        db,
        absl::StrCat("SELECT direction FROM study_directions WHERE study_id = ",
                     id, " ORDER BY objective"),
        path);
    if (!s.ok()) return s.status();
    while (sqlite3_step(s->get()) == SQLITE_ROW) {
      const std::string direction = Text(s->get(), 0);
      if (direction == "MAXIMIZE") {
        goals.push_back(v1::MetricSpec::MAXIMIZE);
      } else if (direction == "MINIMIZE") {
        goals.push_back(v1::MetricSpec::MINIMIZE);
      } else if (direction == "NOT_SET") {
        // Optuna's own default when a study was made without a direction.
        goals.push_back(v1::MetricSpec::MINIMIZE);
        out.notes.push_back(absl::StrCat("objective ", goals.size() - 1,
                                         ": direction NOT_SET, imported as "
                                         "MINIMIZE (Optuna's default)"));
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "study_directions: objective ", goals.size(), " has direction \"",
            direction, "\" (Optuna's are MINIMIZE, MAXIMIZE and NOT_SET)"));
      }
    }
  }
  if (goals.empty()) goals.push_back(v1::MetricSpec::MINIMIZE);
  std::vector<std::string> metric_names;
  for (size_t i = 0; i < goals.size(); ++i) {
    metric_names.push_back(goals.size() == 1 ? "value"
                                             : absl::StrCat("values_", i));
  }
  {
    // Optuna >= 3.2 may name its objectives.
    absl::StatusOr<Statement> s = Prepare(
        db,
        absl::StrCat("SELECT value_json FROM study_system_attributes WHERE "
                     "study_id = ",
                     id, " AND key = 'study:metric_names'"),
        path);
    if (s.ok() && sqlite3_step(s->get()) == SQLITE_ROW) {
      Json names = ParseStoredJson(Text(s->get(), 0));
      if (names.is_array() && names.size() == goals.size()) {
        for (size_t i = 0; i < goals.size(); ++i) {
          if (names[i].is_string()) {
            metric_names[i] = Identifier(names[i].get<std::string>());
          }
        }
      }
    }
  }
  for (size_t i = 0; i < goals.size(); ++i) {
    v1::MetricSpec& m = *study.mutable_spec()->add_metrics();
    m.set_name(metric_names[i]);
    m.set_goal(goals[i]);
    // Several directions: a multi-objective study (its user attributes,
    // which set no role, are then recorded).
    if (goals.size() > 1) m.set_role(v1::MetricSpec::OBJECTIVE);
  }
  if (goals.size() > 1) {
    out.notes.push_back(
        absl::StrCat(goals.size(), " objectives: metrics ",
                     absl::StrJoin(metric_names, ", "),
                     " with Optuna's directions, each an OBJECTIVE"));
  }

  return metric_names;
}

// The study's user attributes into out.study's; those past the limits are
// named in the notes.
absl::Status ReadStudyAttributes(sqlite3* db, const std::string& path,
                                 const std::string& id, OptunaStudy& out) {
  {
    absl::StatusOr<Statement> s = Prepare(
        db,
        absl::StrCat("SELECT key, value_json FROM study_user_attributes WHERE "
                     "study_id = ",
                     id, " ORDER BY key"),
        path);
    if (!s.ok()) return s.status();
    while (sqlite3_step(s->get()) == SQLITE_ROW) {
      const std::string key = Text(s->get(), 0);
      if (!KeepAttribute(key, ParseStoredJson(Text(s->get(), 1)),
                         *out.study.mutable_attributes())) {
        out.notes.push_back(absl::StrCat(
            "study user attribute \"", key,
            "\" not kept: past the limits on attributes (", kMaxAttributes,
            " entries, values of ", kMaxAttributeValueBytes,
            " bytes), or not JSON nested at most ", kMaxJsonDepth, " deep"));
      }
    }
  }

  return absl::OkStatus();
}

// The study's trials as stored, in number order, each with its
// parameters, values, intermediate values and attributes.
absl::StatusOr<std::vector<RawTrial>> ReadRawTrials(sqlite3* db,
                                                    const std::string& path,
                                                    const std::string& id) {
  std::vector<RawTrial> raw;
  std::map<int64_t, size_t> by_id;
  {
    absl::StatusOr<Statement> s =
        Prepare(db,
                absl::StrCat("SELECT trial_id, number, state, datetime_start, "
                             "datetime_complete FROM trials WHERE study_id = ",
                             id, " ORDER BY number, trial_id"),
                path);
    if (!s.ok()) return s.status();
    while (sqlite3_step(s->get()) == SQLITE_ROW) {
      RawTrial& t = raw.emplace_back();
      t.trial_id = sqlite3_column_int64(s->get(), 0);
      t.number = sqlite3_column_int64(s->get(), 1);
      t.state = Text(s->get(), 2);
      if (t.state != "COMPLETE" && t.state != "PRUNED" && t.state != "FAIL" &&
          t.state != "RUNNING" && t.state != "WAITING") {
        return absl::InvalidArgumentError(absl::StrCat(
            "trial ", t.number, ": state \"", t.state,
            "\" is not an Optuna trial state (COMPLETE, PRUNED, FAIL, "
            "RUNNING, WAITING)"));
      }
      t.start_ms = ParseTimeMs(Text(s->get(), 3));
      t.end_ms = ParseTimeMs(Text(s->get(), 4));
      by_id[t.trial_id] = raw.size() - 1;
    }
  }
  const std::string in_study = absl::StrCat(
      " IN (SELECT trial_id FROM trials WHERE study_id = ", id, ")");
  {
    absl::StatusOr<Statement> s = Prepare(
        db,
        absl::StrCat("SELECT trial_id, param_name, param_value, "
                     "distribution_json FROM trial_params WHERE trial_id",
                     in_study, " ORDER BY param_id"),
        path);
    if (!s.ok()) return s.status();
    while (sqlite3_step(s->get()) == SQLITE_ROW) {
      auto it = by_id.find(sqlite3_column_int64(s->get(), 0));
      if (it == by_id.end()) continue;
      RawParam p;
      p.name = Text(s->get(), 1);
      const int type = sqlite3_column_type(s->get(), 2);
      if (type == SQLITE_FLOAT || type == SQLITE_INTEGER) {
        p.value = sqlite3_column_double(s->get(), 2);
      } else {
        p.problem = absl::StrCat(
            "parameter \"", p.name, "\": the stored value ",
            type == SQLITE_NULL
                ? "is NULL"
                : absl::StrCat("\"", Text(s->get(), 2), "\" is not a number"));
      }
      absl::StatusOr<Distribution> d =
          ParseDistribution(Text(s->get(), 3), p.name);
      if (!d.ok()) return d.status();
      p.distribution = *std::move(d);
      raw[it->second].params.push_back(std::move(p));
    }
  }
  {
    const bool typed = HasColumn(db, "trial_values", "value_type");
    absl::StatusOr<Statement> s =
        Prepare(db,
                absl::StrCat("SELECT trial_id, objective, value",
                             typed ? ", value_type" : "",
                             " FROM trial_values WHERE trial_id", in_study),
                path);
    if (!s.ok()) return s.status();
    while (sqlite3_step(s->get()) == SQLITE_ROW) {
      auto it = by_id.find(sqlite3_column_int64(s->get(), 0));
      if (it == by_id.end()) continue;
      std::optional<double> v = TypedValue(s->get(), 2, typed ? 3 : -1);
      if (v) raw[it->second].values[sqlite3_column_int(s->get(), 1)] = *v;
    }
  }
  {
    const bool typed =
        HasColumn(db, "trial_intermediate_values", "intermediate_value_type");
    absl::StatusOr<Statement> s =
        Prepare(db,
                absl::StrCat("SELECT trial_id, step, intermediate_value",
                             typed ? ", intermediate_value_type" : "",
                             " FROM trial_intermediate_values WHERE trial_id",
                             in_study, " ORDER BY trial_id, step"),
                path);
    if (!s.ok()) return s.status();
    while (sqlite3_step(s->get()) == SQLITE_ROW) {
      auto it = by_id.find(sqlite3_column_int64(s->get(), 0));
      if (it == by_id.end()) continue;
      std::optional<double> v = TypedValue(s->get(), 2, typed ? 3 : -1);
      if (v) {
        raw[it->second].intermediate.emplace_back(
            sqlite3_column_int64(s->get(), 1), *v);
      } else {
        ++raw[it->second].nan_intermediate;
      }
    }
  }
  for (const char* table :
       {"trial_user_attributes", "trial_system_attributes"}) {
    const bool user = std::string(table) == "trial_user_attributes";
    absl::StatusOr<Statement> s =
        Prepare(db,
                absl::StrCat("SELECT trial_id, key, value_json FROM ", table,
                             " WHERE trial_id", in_study, " ORDER BY key"),
                path);
    if (!s.ok()) return s.status();
    while (sqlite3_step(s->get()) == SQLITE_ROW) {
      auto it = by_id.find(sqlite3_column_int64(s->get(), 0));
      if (it == by_id.end()) continue;
      Json value = ParseStoredJson(Text(s->get(), 2));
      if (user) {
        raw[it->second].user_attrs.emplace_back(Text(s->get(), 1), value);
      } else if (Text(s->get(), 1) == "fail_reason" && value.is_string()) {
        raw[it->second].fail_reason = value.get<std::string>();
      } else if (Text(s->get(), 1) == "fixed_params" && value.is_object()) {
        raw[it->second].fixed_params = value;
      }
    }
  }

  return raw;
}

// The space the trials were sampled from, and each trial's values in it.
struct TrialSpace {
  // Parameters by their Optuna name, in the order they first appear.
  std::vector<std::string> order;
  std::map<std::string, v1::ParameterSpec> specs;
  // Per raw trial: its values by Optuna name, and whether all could be read.
  std::vector<ParameterValues> values;
  std::vector<bool> readable;
  InferredSpace inferred;
};

// The search space (each parameter's distributions merged, names made
// identifiers, conditions inferred from a define-by-run space), added to
// out.study's spec, with each trial's values in it.
absl::StatusOr<TrialSpace> BuildSpace(const std::vector<RawTrial>& raw,
                                      const std::string& path,
                                      const std::string& optuna_name,
                                      OptunaStudy& out) {
  v1::Study& study = out.study;
  TrialSpace trial_space;
  std::vector<std::string>& order = trial_space.order;
  std::map<std::string, v1::ParameterSpec>& specs = trial_space.specs;
  // The search space: each parameter's distributions merged, in the order
  // parameters first appear; names made identifiers.
  std::map<std::string, std::vector<Distribution>> variants;
  for (const RawTrial& t : raw) {
    for (const RawParam& p : t.params) {
      auto [it, inserted] = variants.try_emplace(p.name);
      if (inserted) order.push_back(p.name);
      if (absl::Status s = AddVariant(it->second, p.distribution, p.name);
          !s.ok()) {
        return s;
      }
    }
  }
  if (order.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": Optuna study \"", optuna_name,
                     "\" has no trial with parameters; nothing to import"));
  }
  std::set<std::string> used;
  for (const std::string& name : order) {
    std::string id_name = Identifier(name);
    while (!used.insert(id_name).second) id_name += "_";
    if (id_name != name) {
      out.notes.push_back(
          absl::StrCat("parameter \"", name, "\" is named \"", id_name, "\""));
    }
    absl::StatusOr<v1::ParameterSpec> spec =
        ToSpec(id_name, variants[name], out.notes);
    if (!spec.ok()) return spec.status();
    specs[name] = *std::move(spec);
  }

  // Each trial's parameters under the space (a WAITING one's: those it was
  // enqueued with); a trial with a value that cannot be read is left out.
  std::vector<ParameterValues>& values = trial_space.values;
  std::vector<bool>& readable = trial_space.readable;
  values.resize(raw.size());
  readable.assign(raw.size(), true);
  for (size_t i = 0; i < raw.size(); ++i) {
    const RawTrial& t = raw[i];
    auto refuse = [&](absl::string_view why) {
      out.notes.push_back(absl::StrCat("Optuna trial ", t.number, " (", t.state,
                                       ") left out: ", why));
      readable[i] = false;
    };
    for (const RawParam& p : t.params) {
      if (!p.problem.empty()) {
        refuse(p.problem);
        break;
      }
      absl::StatusOr<v1::ParameterValue> value =
          ToValue(specs[p.name], p.distribution, p.value);
      if (!value.ok()) {
        refuse(value.status().message());
        break;
      }
      values[i][p.name] = *std::move(value);
    }
    if (readable[i] && t.fixed_params.is_object()) {
      for (const std::string& name : order) {
        if (values[i].contains(name) || !t.fixed_params.contains(name))
          continue;
        absl::StatusOr<v1::ParameterValue> value =
            FixedValue(specs[name], t.fixed_params[name]);
        if (!value.ok()) {
          refuse(value.status().message());
          break;
        }
        values[i][name] = *std::move(value);
      }
    }
  }

  // A define-by-run space: which parameters the trials hold, under which
  // values of which others, makes the conditional parameters. FAILED trials
  // may have stopped before choosing all theirs, and WAITING ones are given
  // only some: neither is evidence.
  std::vector<const ParameterValues*> evidence;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (readable[i] && raw[i].state != "FAIL" && raw[i].state != "WAITING") {
      evidence.push_back(&values[i]);
    }
  }
  InferredSpace space = InferConditions(order, specs, evidence, out.notes);
  for (const std::string& name : order) {
    if (space.left_out.contains(name)) continue;
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
    *study.mutable_spec()->add_parameters() = spec;
  }

  trial_space.inferred = std::move(space);
  return trial_space;
}

// The trials in hypertune's form, into out.trials; those that cannot be
// imported are counted and named in the notes. Returns the earliest
// creation time (0 with no trial).
int64_t ConvertTrials(const std::vector<RawTrial>& raw, const TrialSpace& ts,
                      const std::vector<std::string>& metric_names,
                      int64_t now_ms, OptunaStudy& out) {
  const std::vector<std::string>& order = ts.order;
  const std::vector<ParameterValues>& values = ts.values;
  const std::vector<bool>& readable = ts.readable;
  const InferredSpace& space = ts.inferred;
  std::map<std::string, int64_t> dropped_attrs;  // key -> trials
  int64_t created_ms = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    const RawTrial& t = raw[i];
    if (!readable[i]) {
      ++out.skipped_trials;
      continue;
    }
    v1::Trial trial;
    trial.set_client_id(absl::StrCat("optuna trial ", t.number));
    if (t.state == "COMPLETE") {
      trial.set_state(v1::Trial::COMPLETED);
    } else if (t.state == "PRUNED") {
      trial.set_state(v1::Trial::STOPPED);
      trial.set_stop_reason("pruned by Optuna");
    } else if (t.state == "FAIL") {
      trial.set_state(v1::Trial::FAILED);
      trial.set_failure_reason(t.fail_reason.empty() ? "failed in Optuna"
                                                     : t.fail_reason);
    } else {
      // RUNNING (its Optuna worker is gone, or elsewhere) and WAITING
      // (enqueued): a hypertune worker runs them.
      trial.set_state(v1::Trial::REQUESTED);
      if (t.state == "RUNNING") {
        trial.set_failure_reason(
            "RUNNING in Optuna when imported; queued to run again");
      }
    }
    // In the space's order, as the server stores them.
    std::vector<std::string> held;
    for (const std::string& name : order) {
      auto v = values[i].find(name);
      if (v == values[i].end() || space.left_out.contains(name)) continue;
      held.push_back(name);
      *trial.add_parameters() = v->second;
    }
    // A FAILED trial may hold any part of the space; the others hold
    // exactly their active parameters.
    if (trial.state() != v1::Trial::FAILED) {
      const std::vector<std::string> active =
          ActiveParameters(order, space, values[i]);
      if (held != active) {
        auto absent_from = [](const std::vector<std::string>& these,
                              const std::vector<std::string>& those) {
          std::vector<std::string> absent;
          for (const std::string& name : these) {
            if (std::find(those.begin(), those.end(), name) == those.end()) {
              absent.push_back(name);
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
        out.notes.push_back(
            absl::StrCat("Optuna trial ", t.number, " (", t.state,
                         ") left out: ", absl::StrJoin(why, "; ")));
        ++out.skipped_trials;
        continue;
      }
    }
    const std::string& objective = metric_names[0];
    int64_t last_step = 0;
    for (const auto& [step, v] : t.intermediate) {
      v1::Measurement& m = *trial.add_measurements();
      m.set_step(step);
      (*m.mutable_metrics())[objective] = v;
      last_step = std::max(last_step, step);
    }
    if (t.nan_intermediate > 0) {
      out.notes.push_back(absl::StrCat("Optuna trial ", t.number, ": ",
                                       t.nan_intermediate,
                                       " NaN intermediate values left out"));
    }
    v1::Measurement final_m;
    final_m.set_step(last_step);
    if (t.start_ms > 0 && t.end_ms >= t.start_ms) {
      final_m.set_elapsed_seconds((t.end_ms - t.start_ms) / 1000.0);
    }
    for (const auto& [objective_index, v] : t.values) {
      if (objective_index >= 0 &&
          static_cast<size_t>(objective_index) < metric_names.size()) {
        (*final_m.mutable_metrics())[metric_names[objective_index]] = v;
      }
    }
    if (trial.state() == v1::Trial::STOPPED &&
        !final_m.metrics().contains(objective) && !t.intermediate.empty()) {
      (*final_m.mutable_metrics())[objective] = t.intermediate.back().second;
    }
    if (trial.state() == v1::Trial::COMPLETED &&
        !final_m.metrics().contains(objective)) {
      out.notes.push_back(absl::StrCat(
          "Optuna trial ", t.number, " is COMPLETE without a value; left out"));
      ++out.skipped_trials;
      continue;
    }
    for (const auto& [key, value] : t.user_attrs) {
      if (!KeepAttribute(key, value, *trial.mutable_attributes())) {
        ++dropped_attrs[key];
      }
      if (IsNumber(value) || value.is_boolean()) {
        const double v = value.is_boolean() ? (value.get<bool>() ? 1.0 : 0.0)
                                            : value.get<double>();
        if (!std::isnan(v)) {
          (*final_m.mutable_metrics())[Identifier("user_attr." + key)] = v;
        }
      }
    }
    if (!final_m.metrics().empty()) {
      *trial.mutable_final_measurement() = std::move(final_m);
    }
    trial.set_create_time_ms(t.start_ms > 0 ? t.start_ms : now_ms);
    trial.set_start_time_ms(trial.state() == v1::Trial::REQUESTED &&
                                    t.state == "WAITING"
                                ? 0
                                : t.start_ms);
    trial.set_end_time_ms(t.end_ms);
    if (created_ms == 0 || trial.create_time_ms() < created_ms) {
      created_ms = trial.create_time_ms();
    }
    trial.set_id(static_cast<int64_t>(out.trials.size()) + 1);
    out.trials.push_back(std::move(trial));
  }
  for (const auto& [key, n] : dropped_attrs) {
    out.notes.push_back(absl::StrCat(
        "trial user attribute \"", key, "\" (on ", n,
        " trials) not kept: past the limits on attributes (", kMaxAttributes,
        " entries, values of ", kMaxAttributeValueBytes,
        " bytes), or not JSON nested at most ", kMaxJsonDepth, " deep"));
  }
  return created_ms;
}

absl::StatusOr<OptunaStudy> ReadStudy(sqlite3* db, const std::string& path,
                                      int64_t study_id,
                                      const std::string& optuna_name,
                                      int64_t now_ms) {
  OptunaStudy out;
  out.optuna_name = optuna_name;
  const std::string id = absl::StrCat(study_id);
  out.study.set_name(StudyName(optuna_name, study_id));
  if (out.study.name() != optuna_name) {
    out.notes.push_back(absl::StrCat("named \"", out.study.name(),
                                     "\" (the Optuna name is not a valid "
                                     "study name)"));
  }
  out.study.set_state(v1::Study::ACTIVE);
  absl::StatusOr<std::vector<std::string>> metric_names =
      ReadMetrics(db, path, id, out);
  if (!metric_names.ok()) return metric_names.status();
  if (absl::Status s = ReadStudyAttributes(db, path, id, out); !s.ok())
    return s;
  absl::StatusOr<std::vector<RawTrial>> raw = ReadRawTrials(db, path, id);
  if (!raw.ok()) return raw.status();
  absl::StatusOr<TrialSpace> space = BuildSpace(*raw, path, optuna_name, out);
  if (!space.ok()) return space.status();
  const int64_t created_ms =
      ConvertTrials(*raw, *space, *metric_names, now_ms, out);
  out.study.set_create_time_ms(created_ms > 0 ? created_ms : now_ms);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<OptunaStudy>> ReadOptunaFile(
    const std::string& path, const std::optional<std::string>& study_name,
    int64_t now_ms) {
  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  Db db(raw);
  if (rc != SQLITE_OK) {
    return absl::NotFoundError(
        absl::StrCat("cannot open \"", path,
                     "\": ", raw ? sqlite3_errmsg(raw) : "out of memory"));
  }
  sqlite3_busy_timeout(db.get(), 5000);
  absl::StatusOr<Statement> s = Prepare(
      db.get(), "SELECT study_id, study_name FROM studies ORDER BY study_id",
      path);
  if (!s.ok()) return s.status();
  std::vector<std::pair<int64_t, std::string>> studies;
  while (true) {
    const int step = sqlite3_step(s->get());
    if (step == SQLITE_DONE) break;
    if (step != SQLITE_ROW) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": cannot read its studies: ", sqlite3_errmsg(db.get())));
    }
    const std::string name = Text(s->get(), 1);
    if (!study_name || *study_name == name) {
      studies.emplace_back(sqlite3_column_int64(s->get(), 0), name);
    }
  }
  if (study_name && studies.empty()) {
    return absl::NotFoundError(
        absl::StrCat(path, " has no Optuna study \"", *study_name, "\""));
  }
  std::vector<OptunaStudy> out;
  for (const auto& [id, name] : studies) {
    absl::StatusOr<OptunaStudy> study =
        ReadStudy(db.get(), path, id, name, now_ms);
    if (!study.ok()) {
      return absl::Status(study.status().code(),
                          absl::StrCat("Optuna study \"", name,
                                       "\": ", study.status().message()));
    }
    out.push_back(*std::move(study));
  }
  return out;
}

absl::Status RunImportOptunaCommand(const CommandContext& context,
                                    const Args& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, {{"study"}, {"name"}});
  if (!parsed.ok()) return parsed.status();
  if (parsed->positional.size() != 1) {
    return UsageError("import-optuna takes one SQLITE_FILE");
  }
  const int64_t now_ms = static_cast<int64_t>(std::time(nullptr)) * 1000;
  absl::StatusOr<std::vector<OptunaStudy>> studies =
      ReadOptunaFile(parsed->positional[0], parsed->Get("study"), now_ms);
  if (!studies.ok()) return studies.status();
  if (std::optional<std::string> name = parsed->Get("name")) {
    if (studies->size() != 1) {
      return UsageError(
          "--name: the file holds several studies; pick one "
          "with --study");
    }
    studies->front().study.set_name(*name);
  }
  if (studies->empty()) {
    context.out << "no Optuna studies in " << parsed->positional[0] << "\n";
    return absl::OkStatus();
  }
  for (const OptunaStudy& s : *studies) {
    absl::StatusOr<v1::Study> study =
        context.client.ImportStudy(s.study, s.trials);
    if (!study.ok()) {
      return absl::Status(study.status().code(),
                          absl::StrCat("Optuna study \"", s.optuna_name,
                                       "\": ", study.status().message()));
    }
    std::map<std::string, int64_t> counts(study->trial_counts().begin(),
                                          study->trial_counts().end());
    std::vector<std::string> parts;
    for (const auto& [state, n] : counts) {
      parts.push_back(absl::StrCat(state, "=", n));
    }
    context.out << "imported Optuna study \"" << s.optuna_name << "\" as \""
                << study->name() << "\": " << s.trials.size() << " trials"
                << (parts.empty() ? "" : " (") << absl::StrJoin(parts, " ")
                << (parts.empty() ? "" : ")") << ", "
                << study->spec().parameters_size() << " parameters";
    if (s.skipped_trials > 0) {
      context.out << ", " << s.skipped_trials << " trials left out";
    }
    context.out << "\n";
    for (const std::string& note : s.notes) {
      context.out << "  note: " << note << "\n";
    }
  }
  return absl::OkStatus();
}

}  // namespace hypertune::cli
