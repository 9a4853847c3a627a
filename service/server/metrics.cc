#include "service/server/metrics.h"

#include <cassert>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/double_text.h"

namespace hypertune::service {
namespace {

// A sample value as the text format wants it.
std::string FormatValue(double value) {
  return DoubleText(value, kPrometheusNonFinite);
}

// `{a="x",b="y"}` (with `extra` as one more pair when not empty), or "" for
// no labels.
std::string Labels(const std::vector<std::string>& names,
                   const std::vector<std::string>& values,
                   const std::string& extra_name = "",
                   const std::string& extra_value = "") {
  if (names.empty() && extra_name.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ",";
    absl::StrAppend(&out, names[i], "=\"", EscapeLabelValue(values[i]), "\"");
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ",";
    absl::StrAppend(&out, extra_name, "=\"", extra_value, "\"");
  }
  out += "}";
  return out;
}

void AppendHeader(const std::string& name, const std::string& help,
                  const char* type, std::string* out) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type,
                  "\n");
}

}  // namespace

std::vector<double> LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30};
}

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void AppendGauge(
    const std::string& name, const std::string& help,
    const std::vector<std::string>& label_names,
    const std::vector<std::pair<std::vector<std::string>, double>>& rows,
    std::string* out) {
  AppendHeader(name, help, "gauge", out);
  for (const auto& [values, value] : rows) {
    assert(values.size() == label_names.size());
    absl::StrAppend(out, name, Labels(label_names, values), " ",
                    FormatValue(value), "\n");
  }
}

CounterFamily::CounterFamily(std::string name, std::string help,
                             std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)) {}

void CounterFamily::Increment(const std::vector<std::string>& label_values,
                              double by) {
  assert(label_values.size() == label_names_.size());
  absl::MutexLock lock(&mu_);
  values_[label_values] += by;
}

double CounterFamily::Value(
    const std::vector<std::string>& label_values) const {
  absl::MutexLock lock(&mu_);
  auto it = values_.find(label_values);
  return it == values_.end() ? 0.0 : it->second;
}

void CounterFamily::Render(std::string* out, const LabelFilter& keep) const {
  std::map<std::vector<std::string>, double> values;
  {
    absl::MutexLock lock(&mu_);
    values = values_;
  }
  AppendHeader(name_, help_, "counter", out);
  for (const auto& [labels, value] : values) {
    if (keep && !keep(labels)) continue;
    absl::StrAppend(out, name_, Labels(label_names_, labels), " ",
                    FormatValue(value), "\n");
  }
}

HistogramFamily::HistogramFamily(std::string name, std::string help,
                                 std::vector<std::string> label_names,
                                 std::vector<double> bounds)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      bounds_(std::move(bounds)) {}

void HistogramFamily::Observe(const std::vector<std::string>& label_values,
                              double value) {
  assert(label_values.size() == label_names_.size());
  size_t bucket = 0;
  while (bucket < bounds_.size() && value > bounds_[bucket]) ++bucket;
  absl::MutexLock lock(&mu_);
  Series& series = series_[label_values];
  if (series.buckets.empty()) series.buckets.assign(bounds_.size() + 1, 0);
  ++series.buckets[bucket];
  series.sum += value;
  ++series.count;
}

uint64_t HistogramFamily::Count(
    const std::vector<std::string>& label_values) const {
  absl::MutexLock lock(&mu_);
  auto it = series_.find(label_values);
  return it == series_.end() ? 0 : it->second.count;
}

void HistogramFamily::Render(std::string* out) const {
  std::map<std::vector<std::string>, Series> series;
  {
    absl::MutexLock lock(&mu_);
    series = series_;
  }
  AppendHeader(name_, help_, "histogram", out);
  for (const auto& [labels, s] : series) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += s.buckets[i];
      std::string le =
          i < bounds_.size() ? FormatValue(bounds_[i]) : std::string("+Inf");
      absl::StrAppend(out, name_, "_bucket",
                      Labels(label_names_, labels, "le", le), " ", cumulative,
                      "\n");
    }
    absl::StrAppend(out, name_, "_sum", Labels(label_names_, labels), " ",
                    FormatValue(s.sum), "\n");
    absl::StrAppend(out, name_, "_count", Labels(label_names_, labels), " ",
                    s.count, "\n");
  }
}

Metrics::Metrics()
    : rpc_requests_("hypertune_rpc_requests_total",
                    "gRPC calls handled, by method and status code.",
                    {"method", "code"}),
      rpc_seconds_("hypertune_rpc_duration_seconds",
                   "gRPC call latency in seconds, by method.", {"method"},
                   LatencyBuckets()),
      suggest_seconds_("hypertune_suggest_duration_seconds",
                       "SuggestTrials latency in seconds (queueing and the "
                       "model fit included).",
                       {}, LatencyBuckets()),
      lease_expiries_("hypertune_lease_expiries_total",
                      "Trial leases that ran out, by study.", {"study"}),
      suggest_fallbacks_(
          "hypertune_suggest_fallbacks_total",
          "Suggestions whose algorithm fell back from its own method (a "
          "model that could not be fitted, an acquisition with no new "
          "maximizer), by study, algorithm and reason.",
          {"study", "algorithm", "reason"}),
      http_requests_("hypertune_http_requests_total",
                     "HTTP requests answered, by route and status.",
                     {"route", "status"}),
      http_seconds_("hypertune_http_duration_seconds",
                    "HTTP request latency in seconds (until the headers of a "
                    "streamed answer), by route.",
                    {"route"}, LatencyBuckets()) {}

void Metrics::ObserveSuggestSeconds(double seconds) {
  suggest_seconds_.Observe({}, seconds);
}

void Metrics::CountLeaseExpiry(const std::string& study) {
  lease_expiries_.Increment({study});
}

void Metrics::CountSuggestFallback(const std::string& study,
                                   const std::string& algorithm,
                                   const std::string& reason) {
  suggest_fallbacks_.Increment({study, algorithm, reason});
}

void Metrics::ObserveRpc(const std::string& method, const std::string& code,
                         double seconds) {
  rpc_requests_.Increment({method, code});
  rpc_seconds_.Observe({method}, seconds);
}

void Metrics::ObserveHttp(const std::string& route, int status,
                          double seconds) {
  http_requests_.Increment({route, absl::StrCat(status)});
  http_seconds_.Observe({route}, seconds);
}

void Metrics::Render(
    std::string* out,
    const std::function<bool(const std::string& study)>& study_visible) const {
  rpc_requests_.Render(out);
  rpc_seconds_.Render(out);
  suggest_seconds_.Render(out);
  for (const CounterFamily* per_study :
       {&lease_expiries_, &suggest_fallbacks_}) {
    per_study->Render(out, [&](const std::vector<std::string>& labels) {
      return study_visible(labels[0]);
    });
  }
  http_requests_.Render(out);
  http_seconds_.Render(out);
}

}  // namespace hypertune::service
