// The Prometheus registry: counters and histograms by label, the text format.
#include "service/server/metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hypertune::service {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(CounterFamilyTest, CountsPerLabelValuesAndRendersSorted) {
  CounterFamily counter("x_total", "Things.", {"kind"});
  counter.Increment({"b"});
  counter.Increment({"a"}, 2.5);
  counter.Increment({"b"});
  EXPECT_EQ(counter.Value({"b"}), 2);
  EXPECT_EQ(counter.Value({"never"}), 0);
  std::string out;
  counter.Render(&out);
  EXPECT_EQ(out,
            "# HELP x_total Things.\n# TYPE x_total counter\n"
            "x_total{kind=\"a\"} 2.5\nx_total{kind=\"b\"} 2\n");
}

TEST(HistogramFamilyTest, BucketsAreCumulativeWithSumAndCount) {
  HistogramFamily histogram("lat_seconds", "Latency.", {"m"}, {0.1, 1});
  histogram.Observe({"f"}, 0.05);
  histogram.Observe({"f"}, 0.1);  // A bound belongs to its bucket (le).
  histogram.Observe({"f"}, 0.5);
  histogram.Observe({"f"}, 7);
  EXPECT_EQ(histogram.Count({"f"}), 4u);
  std::string out;
  histogram.Render(&out);
  EXPECT_THAT(out, HasSubstr("# TYPE lat_seconds histogram\n"));
  EXPECT_THAT(out, HasSubstr("lat_seconds_bucket{m=\"f\",le=\"0.1\"} 2\n"));
  EXPECT_THAT(out, HasSubstr("lat_seconds_bucket{m=\"f\",le=\"1\"} 3\n"));
  EXPECT_THAT(out, HasSubstr("lat_seconds_bucket{m=\"f\",le=\"+Inf\"} 4\n"));
  EXPECT_THAT(out, HasSubstr("lat_seconds_sum{m=\"f\"} 7.65\n"));
  EXPECT_THAT(out, HasSubstr("lat_seconds_count{m=\"f\"} 4\n"));
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  Metrics metrics;
  metrics.CountLeaseExpiry("odd\"name");
  std::string out;
  metrics.Render(&out, [](const std::string&) { return true; });
  EXPECT_THAT(
      out,
      HasSubstr("hypertune_lease_expiries_total{study=\"odd\\\"name\"} 1\n"));
}

TEST(MetricsTest, RecordsWhatTheServiceReports) {
  Metrics metrics;
  metrics.ObserveSuggestSeconds(0.002);
  metrics.ObserveRpc("SuggestTrials", "OK", 0.003);
  metrics.ObserveRpc("SuggestTrials", "OK", 0.004);
  EXPECT_EQ(metrics.suggest_seconds().Count({}), 1u);
  EXPECT_EQ(metrics.rpc_requests().Value({"SuggestTrials", "OK"}), 2);
  EXPECT_EQ(metrics.rpc_seconds().Count({"SuggestTrials"}), 2u);
  std::string out;
  metrics.Render(&out, [](const std::string&) { return true; });
  EXPECT_THAT(out, HasSubstr("hypertune_suggest_duration_seconds_count 1\n"));
}

// Per-study series show only the studies the scraper may see.
TEST(MetricsTest, PerStudySeriesAreFiltered) {
  Metrics metrics;
  metrics.CountLeaseExpiry("mine");
  metrics.CountLeaseExpiry("theirs");
  std::string out;
  metrics.Render(&out,
                 [](const std::string& study) { return study == "mine"; });
  EXPECT_THAT(out,
              HasSubstr("hypertune_lease_expiries_total{study=\"mine\"} 1"));
  EXPECT_THAT(out, Not(HasSubstr("theirs")));
}

TEST(AppendGaugeTest, OneSamplePerRow) {
  std::string out;
  AppendGauge("g", "A gauge.", {"s"}, {{{"x"}, 3}, {{"y"}, 0.5}}, &out);
  EXPECT_EQ(
      out, "# HELP g A gauge.\n# TYPE g gauge\ng{s=\"x\"} 3\ng{s=\"y\"} 0.5\n");
}

}  // namespace
}  // namespace hypertune::service
