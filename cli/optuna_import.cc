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
#include "cli/worker/worker_protocol.h"
#include "common/identifier.h"
#include "common/limits.h"
#include "trainer_sdk/client_core.h"

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
  const std::string key = ToIdentifier(optuna_key);
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

// A study name from Optuna's: other characters become '-', it begins with
// a letter or digit, at most 128 characters.
std::string StudyName(const std::string& optuna_name, int64_t study_id) {
  std::string name;
  for (char c : optuna_name) name += IsIdentifierChar(c) ? c : '-';
  size_t first = 0;
  while (first < name.size() &&
         !absl::ascii_isalnum(static_cast<unsigned char>(name[first]))) {
    ++first;
  }
  name = name.substr(first, 128);
  if (name.empty()) name = absl::StrCat("optuna-study-", study_id);
  return name;
}

bool IsNumber(const Json& j) { return j.is_number() && !j.is_boolean(); }

// ----- Reading -----

struct RawParam {
  std::string name;
  double value = 0;
  // Why `value` could not be read; empty when it was.
  std::string problem;
  // As the file keeps it (Optuna's distribution_to_json).
  std::string distribution_json;
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
            metric_names[i] = ToIdentifier(names[i].get<std::string>());
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
      p.distribution_json = Text(s->get(), 3);
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

// The search space of the trials, as the server infers it (the one
// mapping of Optuna's spaces: service/rpc/optuna_space.h), added to out.study's
// spec, with its notes; the answer says how each trial fits.
absl::StatusOr<v1::InferOptunaSpaceResponse> BuildSpace(
    const std::vector<RawTrial>& raw, const std::string& path,
    const std::string& optuna_name, const SpaceInferrer& infer,
    OptunaStudy& out) {
  v1::InferOptunaSpaceRequest request;
  std::map<std::string, int> distribution_index;
  bool any_parameter = false;
  for (const RawTrial& t : raw) {
    v1::OptunaTrial& trial = *request.add_trials();
    trial.set_number(t.number);
    trial.set_state(t.state);
    if (t.fixed_params.is_object()) {
      trial.set_fixed_params_json(t.fixed_params.dump());
    }
    for (const RawParam& p : t.params) {
      any_parameter = true;
      auto [it, inserted] = distribution_index.try_emplace(
          p.distribution_json, request.distributions_size());
      if (inserted) request.add_distributions(p.distribution_json);
      v1::OptunaParam& param = *trial.add_params();
      param.set_name(p.name);
      param.set_distribution(it->second);
      param.set_value(p.value);
      param.set_problem(p.problem);
    }
  }
  if (!any_parameter) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": Optuna study \"", optuna_name,
                     "\" has no trial with parameters; nothing to import"));
  }
  absl::StatusOr<v1::InferOptunaSpaceResponse> space = infer(request);
  if (!space.ok()) return space.status();
  if (space->trials_size() != static_cast<int>(raw.size())) {
    return absl::InternalError(absl::StrCat("InferOptunaSpace answered for ",
                                            space->trials_size(), " of ",
                                            raw.size(), " trials"));
  }
  for (const auto& p : space->parameters()) {
    *out.study.mutable_spec()->add_parameters() = p.spec();
  }
  for (const std::string& note : space->notes()) out.notes.push_back(note);
  return space;
}

// The trials in hypertune's form, into out.trials; those that cannot be
// imported are counted and named in the notes. Returns the earliest
// creation time (0 with no trial).
int64_t ConvertTrials(const std::vector<RawTrial>& raw,
                      const v1::InferOptunaSpaceResponse& space,
                      const std::vector<std::string>& metric_names,
                      int64_t now_ms, OptunaStudy& out) {
  std::map<std::string, int64_t> dropped_attrs;  // key -> trials
  int64_t created_ms = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    const RawTrial& t = raw[i];
    const v1::InferOptunaSpaceResponse::TrialFit& fit =
        space.trials(static_cast<int>(i));
    // Not fitting the space (the notes say why).
    if (!fit.kept()) {
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
    *trial.mutable_parameters() = fit.parameters();
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
          (*final_m.mutable_metrics())[ToIdentifier("user_attr." + key)] = v;
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
                                      int64_t now_ms,
                                      const SpaceInferrer& infer) {
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
  absl::StatusOr<v1::InferOptunaSpaceResponse> space =
      BuildSpace(*raw, path, optuna_name, infer, out);
  if (!space.ok()) return space.status();
  const int64_t created_ms =
      ConvertTrials(*raw, *space, *metric_names, now_ms, out);
  out.study.set_create_time_ms(created_ms > 0 ? created_ms : now_ms);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<OptunaStudy>> ReadOptunaFile(
    const std::string& path, const std::optional<std::string>& study_name,
    int64_t now_ms, const SpaceInferrer& infer) {
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
        ReadStudy(db.get(), path, id, name, now_ms, infer);
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
  // The space is the server's to infer (InferOptunaSpace), as for the
  // Python bridge.
  const internal::ClientCore core(context.client.options());
  const SpaceInferrer infer = [&core](const v1::InferOptunaSpaceRequest& r)
      -> absl::StatusOr<v1::InferOptunaSpaceResponse> {
    v1::InferOptunaSpaceResponse response;
    absl::Status status =
        core.Call("InferOptunaSpace", internal::Retry::kIdempotent,
                  [&](grpc::ClientContext& c) {
                    return core.stub().InferOptunaSpace(&c, r, &response);
                  });
    if (!status.ok()) return status;
    return response;
  };
  absl::StatusOr<std::vector<OptunaStudy>> studies = ReadOptunaFile(
      parsed->positional[0], parsed->Get("study"), now_ms, infer);
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
