// hypertune_dashboard_bench: issue 20's targets for the dashboard, in
// headless Chromium (testing/browser.h) against an in-process server on a
// study of TRIALS trials with MEASUREMENTS measurements each (default
// 10,000 x 10; testing/http_test_util.h: WriteDashboardStudies):
//   - the study page's first render (navigation start to the first paint
//     of the page, what is in the window drawn, as the page records it),
//     target <= 1.5 s; and the time until every plot is drawn (those below
//     the window are drawn when the browser is next idle);
//   - each interaction, from the event to the next paint: filter by state,
//     search, range filter, sort, next page, brush the parallel coordinates
//     (real mouse events), open a trial and come back; target <= 150 ms;
//   - what the page loaded (bytes over the wire, per kind).
// Prints one line per measurement, the median of RUNS runs (default 3).
//
//   hypertune_dashboard_bench [TRIALS] [MEASUREMENTS] [RUNS]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "testing/browser.h"
#include "testing/http_test_util.h"

namespace {

using hypertune::test::Browser;
using json = nlohmann::json;

// The expression that runs `action` (JavaScript statements, may await) and
// resolves to the milliseconds from its start to the next paint after it.
std::string Timed(const std::string& action) {
  return absl::StrCat(
      "(async () => { const t0 = performance.now(); ", action,
      "; await new Promise((r) => requestAnimationFrame(() => "
      "setTimeout(r, 0))); return performance.now() - t0; })()");
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "dashboard_bench: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int trials = argc > 1 ? std::atoi(argv[1]) : 10000;
  const int measurements = argc > 2 ? std::atoi(argv[2]) : 10;
  const int runs = argc > 3 ? std::atoi(argv[3]) : 3;
  const auto chromium = hypertune::test::FindChromium();
  if (!chromium) return Fail("chromium not found; nothing measured");
  hypertune::test::TempDir dir;
  if (!hypertune::test::WriteTokenFile(dir.File("tokens")).ok()) {
    return Fail("cannot write the token file");
  }
  auto written = hypertune::test::WriteDashboardStudies(
      dir.File("db"), "bench", "alice", trials, measurements);
  if (!written.ok()) return Fail(std::string(written.status().message()));
  auto server =
      hypertune::test::StartHttpServer(dir.File("db"), dir.File("tokens"));
  if (!server.ok()) return Fail(std::string(server.status().message()));
  const std::string base =
      absl::StrCat("http://", (*server)->http_address(), "/");
  std::printf("study: %d trials x %d measurements, %d runs (medians)\n", trials,
              measurements, runs);

  // Each measurement's runs, printed in the order first measured.
  struct Series {
    std::vector<std::string> order;
    std::map<std::string, std::vector<double>> values;
    std::vector<double>& operator[](const std::string& name) {
      if (!values.count(name)) order.push_back(name);
      return values[name];
    }
  } ms;
  std::map<std::string, double> bytes;
  for (int run = 0; run < runs; ++run) {
    // A laptop's window (the tests use a taller one, to see more at once).
    auto b = Browser::Start(*chromium, dir.File(absl::StrCat("p", run)),
                            /*width=*/1440, /*height=*/900);
    if (!b.ok()) return Fail(std::string(b.status().message()));
    Browser& page = **b;
    if (!page.Open(base +
                   "#study=bench&live=0&token=" + hypertune::test::kAliceToken)
             .ok()) {
      return Fail("cannot open the page");
    }
    if (!page.WaitFor("document.body.hasAttribute('data-first-render-ms') && "
                      "document.body.hasAttribute('data-charts-drawn')",
                      60000)
             .ok()) {
      return Fail("the study page did not render in 60 s");
    }
    auto body = page.Evaluate(
        "({first: +document.body.dataset.firstRenderMs, "
        "load: +document.body.dataset.loadMs, "
        "render: +document.body.dataset.renderMs, "
        "all: +document.body.dataset.chartsDrawnMs, "
        "code: +document.body.dataset.renderCodeMs})");
    if (!body.ok()) return Fail(std::string(body.status().message()));
    ms["first render (navigation to painted page)"].push_back((*body)["first"]);
    ms["  of which: data (study + compact feed)"].push_back((*body)["load"]);
    auto feed = page.Evaluate("JSON.parse(document.body.dataset.loadTimes)");
    if (feed.ok() && feed->is_object()) {
      ms["    feed: until the answer's headers"].push_back((*feed)["answer"]);
      ms["    feed: reading and parsing its body"].push_back((*feed)["parse"]);
      ms["    feed: building the rows"].push_back((*feed)["rows"]);
    }
    ms["  of which: drawing what is in the window, and the table"].push_back(
        (*body)["render"]);
    ms["    the page's code"].push_back((*body)["code"]);
    ms["every plot drawn (navigation to the last one)"].push_back(
        std::max((*body)["all"].get<double>(), (*body)["first"].get<double>()));
    auto charts = page.Evaluate(
        "Object.assign(JSON.parse(document.body.dataset.chartMs), "
        "{table: +document.body.dataset.tableMs})");
    if (charts.ok() && charts->is_object()) {
      for (auto& [k, v] : charts->items()) {
        ms["    drawing " + k].push_back(v.get<double>());
      }
    }
    (void)page.WaitFor("document.querySelector('#importance[data-params]')",
                       60000);
    auto importance = page.Evaluate("+document.body.dataset.importanceMs");
    if (importance.ok() && importance->is_number()) {
      ms["importance (server fANOVA, after the first render)"].push_back(
          *importance);
    }
    if (run == 0) {
      // Where the first render's time went: each request's start and end,
      // and the document's milestones (ms from navigation start).
      auto timeline = page.Evaluate(
          "(() => { const n = performance.getEntriesByType('navigation')[0]; "
          "const out = [['document', 0, n.responseEnd], ['DOMContentLoaded', "
          "n.domContentLoadedEventStart, n.domContentLoadedEventEnd]]; for "
          "(const e of performance.getEntriesByType('resource')) out.push(["
          "e.name.replace(location.origin, '').slice(0, 60), e.startTime, "
          "e.responseEnd]); return out; })()");
      if (timeline.ok() && timeline->is_array()) {
        std::printf("timeline of the first run (ms from navigation start):\n");
        for (const json& e : *timeline) {
          std::printf("  %-62s %7.0f %7.0f\n", e[0].get<std::string>().c_str(),
                      e[1].get<double>(), e[2].get<double>());
        }
      }
      auto sizes = page.Evaluate(
          "(() => { const out = {}; for (const e of "
          "performance.getEntriesByType('resource')) { const k = "
          "e.name.includes('/changes') ? 'compact feed' : "
          "e.name.includes('/importance') ? 'importance' : "
          "e.name.includes('/assets/') ? 'assets (js, css)' : 'other api'; "
          "out[k] = (out[k] || 0) + e.transferSize; } return out; })()");
      if (sizes.ok()) {
        for (auto& [k, v] : sizes->items()) bytes[k] = v.get<double>();
      }
    }
    const std::vector<std::pair<std::string, std::string>> actions = {
        {"filter by state (hide COMPLETED)",
         "document.querySelector(\"#state-filter "
         "input[data-state='COMPLETED']\").click()"},
        {"filter by state (show COMPLETED)",
         "document.querySelector(\"#state-filter "
         "input[data-state='COMPLETED']\").click()"},
        {"search ('out of memory')",
         "{ const s = document.getElementById('trial-search'); s.value = "
         "'out of memory'; s.dispatchEvent(new Event('input')); }"},
        {"search cleared",
         "{ const s = document.getElementById('trial-search'); s.value = ''; "
         "s.dispatchEvent(new Event('input')); }"},
        {"range filter (depth 2..4)",
         "document.getElementById('range-column').value = 'p:depth'; "
         "document.getElementById('range-min').value = '2'; "
         "document.getElementById('range-max').value = '4'; "
         "document.getElementById('range-add').click()"},
        {"range filter removed",
         "document.querySelector(\"#active-filters [data-filter='p:depth'] "
         "button\").click()"},
        {"sort by the objective",
         "document.querySelector(\"#trials th[data-key='m:loss']\").click()"},
        {"sort by the objective, descending",
         "document.querySelector(\"#trials th[data-key='m:loss']\").click()"},
        {"next page", "document.getElementById('next').click()"},
    };
    for (const auto& [name, action] : actions) {
      auto t = page.Evaluate(Timed(action));
      if (!t.ok()) return Fail(name + ": " + std::string(t.status().message()));
      ms[name].push_back(*t);
    }
    // Brush: real mouse events through the DevTools protocol, timed from
    // the press to the paint after the release.
    auto rect = page.Evaluate(
        "(() => { const o = document.querySelector('#parallel "
        ".brush[data-axis=\"loss\"] .overlay'); o.scrollIntoView({block: "
        "'center'}); const r = o.getBoundingClientRect(); return {x: r.left "
        "+ r.width / 2, top: r.top, height: r.height}; })()");
    if (!rect.ok() || !rect->is_object()) return Fail("no brush overlay");
    const double x = (*rect)["x"], top = (*rect)["top"],
                 height = (*rect)["height"];
    (void)page.Evaluate("window.brushT0 = performance.now()");
    (void)page.Mouse("mousePressed", x, top + 0.05 * height);
    (void)page.Mouse("mouseMoved", x, top + 0.3 * height);
    (void)page.Mouse("mouseMoved", x, top + 0.6 * height);
    (void)page.Mouse("mouseReleased", x, top + 0.6 * height);
    auto brush = page.Evaluate(
        "new Promise((r) => requestAnimationFrame(() => setTimeout(() => "
        "r(performance.now() - window.brushT0), 0)))");
    if (brush.ok()) {
      ms["brush the parallel coordinates (press, 2 moves, release)"].push_back(
          *brush);
    }
    auto inside = page.Evaluate(
        "+document.getElementById('parallel').getAttribute('data-brush-ms')");
    if (inside.ok() && inside->is_number()) {
      ms["  of which the page's handlers (lines and table redrawn)"].push_back(
          *inside);
    }
    auto brushed = page.Evaluate(
        "+document.getElementById('trials').getAttribute('data-total')");
    if (!brushed.ok() || *brushed == trials) return Fail("the brush missed");
    auto open = page.Evaluate(Timed(
        "document.querySelector('#trials tbody tr').click(); await new "
        "Promise((r) => { const p = () => "
        "document.querySelector('#trial-page[data-loaded=\"1\"]') ? r() : "
        "setTimeout(p, 1); p(); })"));
    if (open.ok())
      ms["open a trial (its page with the full trial)"].push_back(*open);
    auto back = page.Evaluate(
        Timed("history.back(); await new Promise((r) => { const p = () => "
              "document.getElementById('study-page') ? r() : setTimeout(p, 1); "
              "p(); })"));
    if (back.ok()) ms["back to the study page"].push_back(*back);
  }
  for (const std::string& name : ms.order) {
    std::printf("%-60s %8.1f ms\n", name.c_str(), Median(ms.values[name]));
  }
  for (const auto& [name, value] : bytes) {
    std::printf("loaded: %-52s %8.0f kB\n", name.c_str(), value / 1000);
  }
  return 0;
}
