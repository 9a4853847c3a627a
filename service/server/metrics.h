// Metrics: hypertuned's Prometheus registry. Counters and histograms with
// labels, rendered in the Prometheus text exposition format (version 0.0.4)
// by /metrics. The service records what it does through the few named
// methods below; gauges that describe current state (trials by state,
// database size) are computed at scrape time by the HTTP layer and appended
// with AppendGauge.
//
// Thread-safe: every method may be called from any thread. Recording takes a
// short per-family lock; rendering copies under the same locks.
#ifndef HYPERTUNE_SERVICE_SERVER_METRICS_H_
#define HYPERTUNE_SERVICE_SERVER_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace hypertune::service {

// A counter per combination of label values.
class CounterFamily {
 public:
  // REQUIRES: `name` is a valid metric name ending in "_total".
  CounterFamily(std::string name, std::string help,
                std::vector<std::string> label_names);

  // REQUIRES: label_values.size() equals the number of label names.
  void Increment(const std::vector<std::string>& label_values, double by = 1.0);
  // Whether a series (given its label values) is shown.
  using LabelFilter =
      std::function<bool(const std::vector<std::string>& label_values)>;

  // The current value; 0 for label values never incremented.
  double Value(const std::vector<std::string>& label_values) const;
  // Appends the HELP, TYPE and sample lines of the series `keep` accepts
  // (all when it is empty).
  void Render(std::string* out, const LabelFilter& keep = nullptr) const;

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, double> values_ ABSL_GUARDED_BY(mu_);
};

// A histogram (cumulative buckets, sum and count) per combination of label
// values.
class HistogramFamily {
 public:
  // REQUIRES: `bounds` strictly increasing; the +Inf bucket is implied.
  HistogramFamily(std::string name, std::string help,
                  std::vector<std::string> label_names,
                  std::vector<double> bounds);

  void Observe(const std::vector<std::string>& label_values, double value);
  // How many observations the label values have had.
  uint64_t Count(const std::vector<std::string>& label_values) const;
  void Render(std::string* out) const;

 private:
  struct Series {
    std::vector<uint64_t> buckets;  // Per bound, not cumulative; +Inf last.
    double sum = 0;
    uint64_t count = 0;
  };
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, Series> series_ ABSL_GUARDED_BY(mu_);
};

// Bucket bounds in seconds from 100 us to 30 s, for latencies.
std::vector<double> LatencyBuckets();

// `value` with the escapes the text format requires in a label value
// (backslash, double quote, newline).
std::string EscapeLabelValue(const std::string& value);

// Appends a gauge: HELP and TYPE lines, then one sample per row (label
// values in `label_names` order, value). REQUIRES: each row has as many
// label values as there are names.
void AppendGauge(
    const std::string& name, const std::string& help,
    const std::vector<std::string>& label_names,
    const std::vector<std::pair<std::vector<std::string>, double>>& rows,
    std::string* out);

class Metrics {
 public:
  Metrics();

  // One SuggestTrials call took `seconds` (all of it, queueing included).
  void ObserveSuggestSeconds(double seconds);
  // A trial's lease of study `study` ran out.
  void CountLeaseExpiry(const std::string& study);
  // A suggestion of study `study` fell back from its `algorithm`'s own
  // method (Suggester::last_fallback_reason gives `reason`).
  void CountSuggestFallback(const std::string& study,
                            const std::string& algorithm,
                            const std::string& reason);
  // One gRPC call of `method` (the short name, e.g. "SuggestTrials") ended
  // with `code` (the canonical code's name, e.g. "OK") after `seconds`.
  void ObserveRpc(const std::string& method, const std::string& code,
                  double seconds);
  // One HTTP request on route `route` (a pattern like
  // "/api/studies/{name}") answered `status` after `seconds`.
  void ObserveHttp(const std::string& route, int status, double seconds);

  // The families, for tests and for the exposition.
  const CounterFamily& rpc_requests() const { return rpc_requests_; }
  const HistogramFamily& rpc_seconds() const { return rpc_seconds_; }
  const HistogramFamily& suggest_seconds() const { return suggest_seconds_; }
  const CounterFamily& lease_expiries() const { return lease_expiries_; }
  const CounterFamily& suggest_fallbacks() const { return suggest_fallbacks_; }

  // Appends every family in the text format; per-study series only for the
  // studies `study_visible` accepts (the scraper's own).
  void Render(
      std::string* out,
      const std::function<bool(const std::string& study)>& study_visible) const;

 private:
  CounterFamily rpc_requests_;
  HistogramFamily rpc_seconds_;
  HistogramFamily suggest_seconds_;
  CounterFamily lease_expiries_;
  CounterFamily suggest_fallbacks_;
  CounterFamily http_requests_;
  HistogramFamily http_seconds_;
};

}  // namespace hypertune::service

#endif  // HYPERTUNE_SERVICE_SERVER_METRICS_H_
