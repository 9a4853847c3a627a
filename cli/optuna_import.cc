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
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/worker_protocol.h"
#include "service/limits.h"

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
    "(they run again). What cannot be kept (attributes past the server's\n"
    "limits, trials of conditional search spaces) is listed. Reads the file\n"
    "only; Python is not needed.\n";

namespace {

using Json = nlohmann::json;

// Keeps Optuna attribute `key` (its value_json parsed) in `attributes` as
// text: a string as itself, any other value as its JSON. False, leaving
// `attributes` as it was, when it would pass the server's limits.
bool KeepAttribute(const std::string& key, const Json& value,
                   google::protobuf::Map<std::string, std::string>& attributes) {
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  if (key.empty() || key.size() > service::kMaxNameBytes ||
      text.size() > service::kMaxAttributeValueBytes ||
      (!attributes.contains(key) &&
       attributes.size() >= static_cast<size_t>(service::kMaxAttributes))) {
    return false;
  }
  attributes[key] = std::move(text);
  return true;
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
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not an Optuna storage file (", sqlite3_errmsg(db),
                     ")"));
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
                  &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                  &tm.tm_sec, fraction) < 6) {
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
  if (name.empty() || !(absl::ascii_isalpha(static_cast<unsigned char>(name[0])) ||
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
  if (choice.is_number()) return FormatDouble(choice.get<double>());
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
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object() || !json.contains("name") ||
      !json.contains("attributes") || !json["attributes"].is_object()) {
    return bad("not a distribution in Optuna's JSON form");
  }
  const std::string name = json["name"].is_string() ? json["name"].get<std::string>() : "";
  const Json& a = json["attributes"];
  auto number = [&](const char* key, double fallback) {
    return a.contains(key) && IsNumber(a[key]) ? a[key].get<double>() : fallback;
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
  const bool log_flag = a.contains("log") && a["log"].is_boolean() && a["log"].get<bool>();
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
  return d;
}

// The union of `a` and `b` (a parameter whose range changed between
// trials). INVALID_ARGUMENT when their kinds differ.
absl::Status Merge(Distribution& a, const Distribution& b,
                   const std::string& param) {
  if (a.kind != b.kind) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter \"", param, "\" is ", KindName(a.kind), " in some trials and ",
        KindName(b.kind), " in others; hypertune cannot map that"));
  }
  if (a.kind == Distribution::kCategorical) {
    for (const Json& c : b.choices) {
      if (std::find(a.choices.begin(), a.choices.end(), c) == a.choices.end()) {
        a.choices.push_back(c);
      }
    }
    return absl::OkStatus();
  }
  a.low = std::min(a.low, b.low);
  a.high = std::max(a.high, b.high);
  a.log = a.log && b.log;
  if (a.step != b.step) a.step = a.kind == Distribution::kInt ? 1 : 0;
  return absl::OkStatus();
}

constexpr int kMaxDiscreteValues = 1000;

// The parameter spec of merged distribution `d`.
absl::StatusOr<v1::ParameterSpec> ToSpec(const std::string& name,
                                         const Distribution& d) {
  v1::ParameterSpec spec;
  spec.set_name(name);
  if (d.kind == Distribution::kCategorical) {
    if (std::all_of(d.choices.begin(), d.choices.end(), IsNumber)) {
      std::set<double> values;
      for (const Json& c : d.choices) values.insert(c.get<double>());
      for (double v : values) spec.mutable_discrete_spec()->add_values(v);
      return spec;
    }
    std::set<std::string> seen;
    for (const Json& c : d.choices) {
      const std::string text = ChoiceText(c);
      if (!seen.insert(text).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "parameter \"", name, "\": two choices read \"", text, "\""));
      }
      spec.mutable_categorical_spec()->add_values(text);
    }
    return spec;
  }
  const bool has_step = d.step > 0 && !(d.kind == Distribution::kInt && d.step == 1);
  const double count = has_step ? std::floor((d.high - d.low) / d.step + 1e-9) + 1 : 0;
  if (d.low == d.high || (has_step && count <= kMaxDiscreteValues)) {
    auto& values = *spec.mutable_discrete_spec()->mutable_values();
    const int n = d.low == d.high ? 1 : static_cast<int>(count);
    for (int k = 0; k < n; ++k) {
      // 15 significant digits: 0.3, not 0.30000000000000004 (trials' values
      // are matched to the nearest one).
      char text[32];
      std::snprintf(text, sizeof(text), "%.15g", d.low + k * d.step);
      values.Add(std::strtod(text, nullptr));
    }
    return spec;
  }
  if (d.kind == Distribution::kInt) {
    auto& s = *spec.mutable_integer_spec();
    s.set_min(static_cast<int64_t>(std::llround(d.low)));
    s.set_max(static_cast<int64_t>(std::llround(d.high)));
    if (d.log) s.set_scale(v1::LOG);
    return spec;
  }
  auto& s = *spec.mutable_double_spec();
  s.set_min(d.low);
  s.set_max(d.high);
  if (d.log) s.set_scale(v1::LOG);
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
  if (own.kind == Distribution::kCategorical) {
    const double index = std::round(stored);
    if (index < 0 || index >= static_cast<double>(own.choices.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter \"", spec.name(), "\": choice index ", stored,
          " out of range"));
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
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter \"", spec.name(), "\": fixed value ", given.dump(),
        " is not a number"));
  }
  Distribution own;  // numeric: the value is stored as is
  return ToValue(spec, own, given.get<double>());
}

// ----- Reading -----

struct RawParam {
  std::string name;
  double value = 0;
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

absl::StatusOr<OptunaStudy> ReadStudy(sqlite3* db, const std::string& path,
                                      int64_t study_id,
                                      const std::string& optuna_name,
                                      int64_t now_ms) {
  OptunaStudy out;
  out.optuna_name = optuna_name;
  const std::string id = absl::StrCat(study_id);
  v1::Study& study = out.study;
  study.set_name(StudyName(optuna_name, study_id));
  if (study.name() != optuna_name) {
    out.notes.push_back(absl::StrCat("named \"", study.name(),
                                     "\" (the Optuna name is not a valid "
                                     "study name)"));
  }
  study.set_state(v1::Study::ACTIVE);

  // Directions -> metrics.
  std::vector<v1::MetricSpec::Goal> goals;
  {
    absl::StatusOr<Statement> s = Prepare(
        db,
        absl::StrCat("SELECT direction FROM study_directions WHERE study_id = ",
                     id, " ORDER BY objective"),
        path);
    if (!s.ok()) return s.status();
    while (sqlite3_step(s->get()) == SQLITE_ROW) {
      goals.push_back(Text(s->get(), 0) == "MAXIMIZE" ? v1::MetricSpec::MAXIMIZE
                                                      : v1::MetricSpec::MINIMIZE);
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
                     "study_id = ", id, " AND key = 'study:metric_names'"),
        path);
    if (s.ok() && sqlite3_step(s->get()) == SQLITE_ROW) {
      Json names = Json::parse(Text(s->get(), 0), nullptr, false);
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
    out.notes.push_back(absl::StrCat(
        goals.size(), " objectives: metrics ", absl::StrJoin(metric_names, ", "),
        " with Optuna's directions, each an OBJECTIVE"));
  }

  // Study user attributes.
  {
    absl::StatusOr<Statement> s = Prepare(
        db,
        absl::StrCat("SELECT key, value_json FROM study_user_attributes WHERE "
                     "study_id = ", id, " ORDER BY key"),
        path);
    if (!s.ok()) return s.status();
    while (sqlite3_step(s->get()) == SQLITE_ROW) {
      const std::string key = Text(s->get(), 0);
      if (!KeepAttribute(key, Json::parse(Text(s->get(), 1), nullptr, false),
                         *study.mutable_attributes())) {
        out.notes.push_back(absl::StrCat(
            "study user attribute \"", key,
            "\" not kept: past the limits on attributes (", 
            service::kMaxAttributes, " entries, values of ",
            service::kMaxAttributeValueBytes, " bytes)"));
      }
    }
  }

  // Trials.
  std::vector<RawTrial> raw;
  std::map<int64_t, size_t> by_id;
  {
    absl::StatusOr<Statement> s = Prepare(
        db,
        absl::StrCat("SELECT trial_id, number, state, datetime_start, "
                     "datetime_complete FROM trials WHERE study_id = ", id,
                     " ORDER BY number, trial_id"),
        path);
    if (!s.ok()) return s.status();
    while (sqlite3_step(s->get()) == SQLITE_ROW) {
      RawTrial& t = raw.emplace_back();
      t.trial_id = sqlite3_column_int64(s->get(), 0);
      t.number = sqlite3_column_int64(s->get(), 1);
      t.state = Text(s->get(), 2);
      t.start_ms = ParseTimeMs(Text(s->get(), 3));
      t.end_ms = ParseTimeMs(Text(s->get(), 4));
      by_id[t.trial_id] = raw.size() - 1;
    }
  }
  const std::string in_study =
      absl::StrCat(" IN (SELECT trial_id FROM trials WHERE study_id = ", id, ")");
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
      p.value = sqlite3_column_double(s->get(), 2);
      absl::StatusOr<Distribution> d = ParseDistribution(Text(s->get(), 3), p.name);
      if (!d.ok()) return d.status();
      p.distribution = *std::move(d);
      raw[it->second].params.push_back(std::move(p));
    }
  }
  {
    const bool typed = HasColumn(db, "trial_values", "value_type");
    absl::StatusOr<Statement> s = Prepare(
        db,
        absl::StrCat("SELECT trial_id, objective, value", typed ? ", value_type" : "",
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
    const bool typed = HasColumn(db, "trial_intermediate_values",
                                 "intermediate_value_type");
    absl::StatusOr<Statement> s = Prepare(
        db,
        absl::StrCat("SELECT trial_id, step, intermediate_value",
                     typed ? ", intermediate_value_type" : "",
                     " FROM trial_intermediate_values WHERE trial_id", in_study,
                     " ORDER BY trial_id, step"),
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
  for (const char* table : {"trial_user_attributes", "trial_system_attributes"}) {
    const bool user = std::string(table) == "trial_user_attributes";
    absl::StatusOr<Statement> s = Prepare(
        db,
        absl::StrCat("SELECT trial_id, key, value_json FROM ", table,
                     " WHERE trial_id", in_study, " ORDER BY key"),
        path);
    if (!s.ok()) return s.status();
    while (sqlite3_step(s->get()) == SQLITE_ROW) {
      auto it = by_id.find(sqlite3_column_int64(s->get(), 0));
      if (it == by_id.end()) continue;
      Json value = Json::parse(Text(s->get(), 2), nullptr, false);
      if (user) {
        raw[it->second].user_attrs.emplace_back(Text(s->get(), 1), value);
      } else if (Text(s->get(), 1) == "fail_reason" && value.is_string()) {
        raw[it->second].fail_reason = value.get<std::string>();
      } else if (Text(s->get(), 1) == "fixed_params" && value.is_object()) {
        raw[it->second].fixed_params = value;
      }
    }
  }

  // The search space: each parameter's distributions merged, in the order
  // parameters first appear; names made identifiers.
  std::vector<std::string> order;
  std::map<std::string, Distribution> merged;
  for (const RawTrial& t : raw) {
    for (const RawParam& p : t.params) {
      auto [it, inserted] = merged.emplace(p.name, p.distribution);
      if (inserted) {
        order.push_back(p.name);
      } else if (absl::Status s = Merge(it->second, p.distribution, p.name);
                 !s.ok()) {
        return s;
      }
    }
  }
  if (order.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": Optuna study \"", optuna_name,
        "\" has no trial with parameters; nothing to import"));
  }
  std::map<std::string, v1::ParameterSpec> specs;
  std::set<std::string> used;
  for (const std::string& name : order) {
    std::string id_name = Identifier(name);
    while (!used.insert(id_name).second) id_name += "_";
    if (id_name != name) {
      out.notes.push_back(absl::StrCat("parameter \"", name, "\" is named \"",
                                       id_name, "\""));
    }
    absl::StatusOr<v1::ParameterSpec> spec = ToSpec(id_name, merged[name]);
    if (!spec.ok()) return spec.status();
    *study.mutable_spec()->add_parameters() = *spec;
    specs[name] = *std::move(spec);
  }

  std::map<std::string, int64_t> dropped_attrs;  // key -> trials
  int64_t created_ms = 0;
  for (const RawTrial& t : raw) {
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
    std::set<std::string> have;
    bool bad_value = false;
    for (const RawParam& p : t.params) {
      absl::StatusOr<v1::ParameterValue> value =
          ToValue(specs[p.name], p.distribution, p.value);
      if (!value.ok()) {
        out.notes.push_back(absl::StrCat("Optuna trial ", t.number, ": ",
                                         value.status().message()));
        bad_value = true;
        break;
      }
      have.insert(p.name);
      *trial.add_parameters() = *std::move(value);
    }
    // An enqueued trial's parameters are in its fixed_params until it runs.
    if (!bad_value && t.fixed_params.is_object()) {
      for (const std::string& name : order) {
        if (have.contains(name) || !t.fixed_params.contains(name)) continue;
        absl::StatusOr<v1::ParameterValue> value =
            FixedValue(specs[name], t.fixed_params[name]);
        if (!value.ok()) {
          out.notes.push_back(absl::StrCat("Optuna trial ", t.number, ": ",
                                           value.status().message()));
          bad_value = true;
          break;
        }
        have.insert(name);
        *trial.add_parameters() = *std::move(value);
      }
    }
    // In the space's order, as the server stores them.
    std::sort(trial.mutable_parameters()->begin(),
              trial.mutable_parameters()->end(),
              [&](const v1::ParameterValue& a, const v1::ParameterValue& b) {
                auto rank = [&](const std::string& n) {
                  for (int i = 0; i < study.spec().parameters_size(); ++i) {
                    if (study.spec().parameters(i).name() == n) return i;
                  }
                  return 0;
                };
                return rank(a.name()) < rank(b.name());
              });
    if (bad_value || (have.size() < order.size() &&
                      trial.state() != v1::Trial::FAILED)) {
      if (!bad_value) {
        std::vector<std::string> missing;
        for (const std::string& n : order) {
          if (!have.contains(n)) missing.push_back(n);
        }
        out.notes.push_back(absl::StrCat(
            "Optuna trial ", t.number, " (", t.state, ") left out: it has no ",
            absl::StrJoin(missing, ", "),
            " (conditional search spaces are not imported)"));
      }
      ++out.skipped_trials;
      continue;
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
      out.notes.push_back(absl::StrCat("Optuna trial ", t.number,
                                       " is COMPLETE without a value; left out"));
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
        " trials) not kept: past the limits on attributes (",
        service::kMaxAttributes, " entries, values of ",
        service::kMaxAttributeValueBytes, " bytes)"));
  }
  study.set_create_time_ms(created_ms > 0 ? created_ms : now_ms);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<OptunaStudy>> ReadOptunaFile(
    const std::string& path, const std::optional<std::string>& study_name,
    int64_t now_ms) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  Db db(raw);
  if (rc != SQLITE_OK) {
    return absl::NotFoundError(absl::StrCat(
        "cannot open \"", path, "\": ", raw ? sqlite3_errmsg(raw) : "out of memory"));
  }
  sqlite3_busy_timeout(db.get(), 5000);
  absl::StatusOr<Statement> s = Prepare(
      db.get(), "SELECT study_id, study_name FROM studies ORDER BY study_id", path);
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
    return absl::NotFoundError(absl::StrCat(path, " has no Optuna study \"",
                                            *study_name, "\""));
  }
  std::vector<OptunaStudy> out;
  for (const auto& [id, name] : studies) {
    absl::StatusOr<OptunaStudy> study = ReadStudy(db.get(), path, id, name, now_ms);
    if (!study.ok()) {
      return absl::Status(study.status().code(),
                          absl::StrCat("Optuna study \"", name, "\": ",
                                       study.status().message()));
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
      return UsageError("--name: the file holds several studies; pick one "
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
                          absl::StrCat("Optuna study \"", s.optuna_name, "\": ",
                                       study.status().message()));
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
