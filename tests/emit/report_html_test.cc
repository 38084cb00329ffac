#include "ckptplan/emit/report_html.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "ckptplan/ingest/json_loader.h"
#include "ckptplan/plan/selector.h"
#include "ckptplan/sim/simulator.h"
#include "ckptplan/base/size.h"
#include "report_fixture.h"

namespace ckptplan {
namespace {

using testing::CountOf;
using testing::kMlpGraph;
using testing::RunCli;
using testing::Slurp;
using testing::Spit;
using testing::TempDir;

SimResult Recorded(const Graph& graph, const SaveSet& keep) {
  SimOptions options;
  options.record_categories = true;
  return Simulate(graph, keep, options);
}

// Save set with only h1 dropped: what the greedy picks for a 54 KiB budget.
SaveSet DropH1(const Graph& graph) {
  SaveSet keep = SaveAll(graph);
  for (TensorId t = 0; t < graph.tensors.size(); ++t) {
    if (graph.tensors[t].name == "h1") keep[t] = 0;
  }
  return keep;
}

// Values of `attribute="..."` inside the element whose id is `id`.
std::string AttributeOf(const std::string& html, const std::string& id,
                        const std::string& attribute) {
  std::smatch match;
  std::regex element("<[^>]*id=\"" + id + "\"[^>]*>");
  if (!std::regex_search(html, match, element)) return "";
  std::string tag = match.str();
  std::smatch value;
  if (!std::regex_search(tag, value, std::regex(attribute + "=\"([^\"]*)\""))) return "";
  return value[1].str();
}

TEST_CASE("DownsampleByMax keeps every step when there are fewer steps than buckets") {
  SimResult sim;
  sim.total = {5, 9, 3, 9, 1};
  Downsampled buckets = DownsampleByMax(sim, 10);
  CHECK(buckets.first_step == std::vector<uint32_t>{0, 1, 2, 3, 4});
  CHECK(buckets.step == std::vector<uint32_t>{0, 1, 2, 3, 4});
}

TEST_CASE("DownsampleByMax over 10^5 steps draws each bucket's highest step and the exact peak") {
  SimResult sim;
  const uint32_t steps = 100000;
  sim.total.resize(steps);
  // A saw-tooth with a single spike one step wide: a naive stride sampler
  // would skip it.
  for (uint32_t s = 0; s < steps; ++s) sim.total[s] = 1000 + (s * 7919u) % 997;
  sim.total[54321] = 123456789;
  Downsampled buckets = DownsampleByMax(sim, 860);
  REQUIRE(buckets.step.size() == 860);
  int64_t drawn_max = 0;
  for (size_t b = 0; b < buckets.step.size(); ++b) {
    uint32_t begin = buckets.first_step[b];
    uint32_t end = b + 1 < buckets.step.size() ? buckets.first_step[b + 1] : steps;
    REQUIRE(begin < end);
    REQUIRE(buckets.step[b] >= begin);
    REQUIRE(buckets.step[b] < end);
    int64_t best = *std::max_element(sim.total.begin() + begin, sim.total.begin() + end);
    REQUIRE(sim.total[buckets.step[b]] == best);
    drawn_max = std::max(drawn_max, sim.total[buckets.step[b]]);
  }
  CHECK(buckets.first_step.front() == 0);
  CHECK(drawn_max == 123456789);
  CHECK(std::find(buckets.step.begin(), buckets.step.end(), 54321u) != buckets.step.end());
}

TEST_CASE("html report: one series per category per chart, peaks and tables from the SimResult") {
  Graph graph = ParseJsonGraph(kMlpGraph, "mlp.json");
  SimResult save_all = Recorded(graph, SaveAll(graph));
  SaveSet keep = DropH1(graph);
  SimResult planned = Recorded(graph, keep);
  REQUIRE(planned.peak_bytes == 53 * 1024);   // see report_fixture.h
  REQUIRE(save_all.peak_bytes == 55 * 1024);  // see report_fixture.h

  HtmlReportInput input;
  input.command = "plan";
  input.graph_path = "mlp.json";
  input.budget_bytes = 54 * 1024;
  input.save_all = &save_all;
  input.planned = &planned;
  input.keep = &keep;
  std::string html = RenderHtmlReport(graph, input);

  CHECK(CountOf(html, "<svg class=\"chart\"") == 2);
  CHECK(CountOf(html, "class=\"series\"") == 2 * kNumCategories);
  for (size_t c = 0; c < kNumCategories; ++c) {
    std::string name(ToString(static_cast<Category>(c)));
    CHECK(CountOf(html, "data-category=\"" + name + "\"") == 2);
  }
  CHECK(AttributeOf(html, "planned-peak", "data-bytes") == std::to_string(53 * 1024));
  CHECK(AttributeOf(html, "save-all-peak", "data-bytes") == std::to_string(55 * 1024));
  CHECK(AttributeOf(html, "chart-planned", "data-drawn-max-bytes") == std::to_string(53 * 1024));
  CHECK(AttributeOf(html, "chart-save-all", "data-drawn-max-bytes") == std::to_string(55 * 1024));
  CHECK(html.find("budget 54.0 KiB") != std::string::npos);
  CHECK(CountOf(html, "class=\"swatch budget-swatch\"") == 1);
  // Phases: forward, backward (with the recompute of h1) and optimizer.
  CHECK(CountOf(html, "class=\"phase phase-forward\"") == 2);
  CHECK(CountOf(html, "class=\"phase phase-backward\"") == 2);
  CHECK(CountOf(html, "class=\"phase phase-optimizer\"") == 2);
  // The decision: h1 (8 KiB) recomputed by re-running fc1 (10 us).
  CHECK(html.find("<tr><td>h1</td><td class=\"num\" data-bytes=\"8192\"") != std::string::npos);
  CHECK(html.find("10.0 us</td><td>fc1</td>") != std::string::npos);
  // Top tensors at the plan's peak (act_bwd) carry op and module scope.
  CHECK(html.find("<td>fc2_bwd</td><td>linear_backward</td><td>mlp/fc2</td>") != std::string::npos);
  // Self-contained: nothing the browser would fetch.
  for (const char* fetch :
       {"http:", "https:", "src=", "href=", "<link", "url(", "@import", "<script"}) {
    CHECK_MESSAGE(html.find(fetch) == std::string::npos, fetch);
  }
  CHECK(RenderHtmlReport(graph, input) == html);
}

TEST_CASE("html report escapes names and shows one chart when simulating save-all") {
  std::string text = kMlpGraph;
  text.replace(text.find("\"id\": \"fc2_bwd\""), 15, "\"id\": \"<b>&fc2\"");
  Graph graph = ParseJsonGraph(text, "mlp.json");
  SimResult save_all = Recorded(graph, SaveAll(graph));
  SaveSet keep = SaveAll(graph);
  HtmlReportInput input;
  input.command = "simulate";
  input.graph_path = "mlp.json";
  input.save_all = &save_all;
  input.planned = &save_all;
  input.keep = &keep;
  std::string html = RenderHtmlReport(graph, input);
  CHECK(CountOf(html, "<svg class=\"chart\"") == 1);
  CHECK(CountOf(html, "class=\"series\"") == kNumCategories);
  CHECK(html.find("<b>&fc2") == std::string::npos);
  CHECK(html.find("&lt;b&gt;&amp;fc2") != std::string::npos);
  CHECK(html.find("class=\"budget\"") == std::string::npos);                // no budget: no line
  CHECK(html.find("class=\"swatch budget-swatch\"") == std::string::npos);  // nor legend entry
}

TEST_CASE("html report needs per-category records") {
  Graph graph = ParseJsonGraph(kMlpGraph, "mlp.json");
  SimResult bare = Simulate(graph, SaveAll(graph), SimOptions{});
  SaveSet keep = SaveAll(graph);
  HtmlReportInput input;
  input.save_all = &bare;
  input.planned = &bare;
  input.keep = &keep;
  CHECK_THROWS_AS(RenderHtmlReport(graph, input), std::logic_error);
}

TEST_CASE("html report stays small and exact at 10^5 steps") {
  // A chain of 50000 forward nodes, each making a 1 KiB activation that the
  // mirrored backward node reads. Save-all peaks at the first backward node:
  // all 50000 saved activations (50000 KiB) + its 1 KiB gradient output.
  const int layers = 50000;
  Graph graph;
  graph.source = "chain";
  for (int i = 0; i <= layers; ++i) graph.tensors.push_back({"a" + std::to_string(i), 1024});
  graph.tensors[0].kind = TensorKind::kInput;
  for (int i = 0; i <= layers; ++i) graph.tensors.push_back({"g" + std::to_string(i), 1024});
  for (int i = 1; i <= layers; ++i) {
    Node node;
    node.name = "f" + std::to_string(i);
    node.op = "tanh";
    node.inputs = {static_cast<TensorId>(i - 1)};
    node.outputs = {static_cast<TensorId>(i)};
    graph.nodes.push_back(node);
  }
  for (int i = layers; i >= 1; --i) {
    Node node;
    node.name = "b" + std::to_string(i);
    node.op = "tanh_backward";
    node.phase = Phase::kBackward;
    node.inputs = {static_cast<TensorId>(i)};
    if (i < layers) node.inputs.push_back(static_cast<TensorId>(layers + 1 + i + 1));
    node.outputs = {static_cast<TensorId>(layers + 1 + i)};
    graph.nodes.push_back(node);
  }
  graph.Finalize();
  ValidateGraph(graph);
  SimResult sim = Recorded(graph, SaveAll(graph));
  REQUIRE(sim.steps.size() == 2 * layers);
  SaveSet keep = SaveAll(graph);
  HtmlReportInput input;
  input.command = "simulate";
  input.graph_path = "chain";
  input.save_all = &sim;
  input.planned = &sim;
  input.keep = &keep;
  std::string html = RenderHtmlReport(graph, input);
  CHECK(AttributeOf(html, "chart-planned", "data-drawn-max-bytes") ==
        std::to_string(sim.peak_bytes));
  CHECK(AttributeOf(html, "chart-planned", "data-buckets") == "860");
  CHECK(AttributeOf(html, "planned-peak", "data-bytes") == std::to_string(sim.peak_bytes));
  CHECK(html.size() < 1000000);
}

TEST_CASE("sweep section: sorted by budget, feasible points on the curve, infeasible marked") {
  std::vector<SweepPoint> points = {
      {40 * 1024, 39 * 1024, 30.0, true}, {20 * 1024, 35 * 1024, 0, false},
      {60 * 1024, 55 * 1024, 0.0, true},  {30 * 1024, 0, 0, false},
      {50 * 1024, 48 * 1024, 10.0, true},
  };
  std::string html = SweepSectionHtml(points, CostUnit::kMicroseconds);
  CHECK(CountOf(html, "sweep-point feasible") == 3);
  CHECK(CountOf(html, "sweep-point infeasible") == 2);
  CHECK(CountOf(html, "<polyline class=\"sweep-line\"") == 1);
  // Table rows in budget order: 20, 30, 40, 50, 60 KiB.
  size_t previous = 0;
  for (int kib : {20, 30, 40, 50, 60}) {
    size_t at =
        html.find("<tr><td class=\"num\" data-bytes=\"" + std::to_string(kib * 1024) + "\"");
    REQUIRE(at != std::string::npos);
    CHECK(at > previous);
    previous = at;
  }
  CHECK(html.find("30.0 us") != std::string::npos);
  CHECK(html.find("infeasible, lowest peak 35.0 KiB") != std::string::npos);
  CHECK(html.find("<td class=\"num\" data-bytes=\"35840\" title=\"35840 bytes\">35.0 "
                  "KiB</td><td>-</td><td>no</td>") != std::string::npos);
  CHECK(SweepSectionHtml({}, CostUnit::kFlops).find("No sweep points") != std::string::npos);

  Graph graph = ParseJsonGraph(kMlpGraph, "mlp.json");
  HtmlReportInput input;
  input.command = "sweep";
  input.graph_path = "mlp.json";
  input.sweep = points;
  std::string page = RenderHtmlReport(graph, input);
  CHECK(page.find(html) != std::string::npos);
  CHECK(page.find("class=\"series\"") == std::string::npos);
}

bool HaveChromium() { return std::system("command -v chromium >/dev/null 2>&1") == 0; }

// Loads `url` in headless Chromium with console logging; returns the DOM
// after load and puts console messages (errors included) in `console`.
std::string ChromiumDom(const TempDir& dir, const std::string& html_path, std::string* console) {
  std::string command =
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
      "--disable-background-networking --disable-component-update --disable-sync "
      "--user-data-dir='" +
      (dir / "profile") +
      "' --enable-logging=stderr --v=0 --dump-dom "
      "'file://" +
      html_path + "' >'" + (dir / "dom") + "' 2>'" + (dir / "chromium.log") + "'";
  int status = std::system(command.c_str());
  REQUIRE_MESSAGE(status == 0, "chromium failed; see " << dir / "chromium.log");
  console->clear();
  std::istringstream log(Slurp(dir / "chromium.log"));
  for (std::string line; std::getline(log, line);) {
    if (line.find("CONSOLE") != std::string::npos) *console += line + "\n";
  }
  return Slurp(dir / "dom");
}

// Without chromium this case is skipped, and says so: doctest counts it as
// skipped, and ctest runs it alone as `report_chromium`, which exits 77
// (skipped) when chromium is missing (CMakeLists.txt).
TEST_CASE("html report renders in headless Chromium without errors and shows the plan's peak" *
          doctest::skip(!HaveChromium())) {
  TempDir dir("report_html");
  // Save-all peaks at 330.1 MiB; 320 MiB makes the plan recompute.
  std::string sample = CKPTPLAN_SOURCE_DIR "/sample_graphs/transformer_block.json";
  REQUIRE(RunCli(dir, "plan '" + sample + "' --budget 320MiB -o '" + (dir / "plan.json") +
                          "' --report '" + (dir / "report.html") + "'") == 0);
  nlohmann::json plan = nlohmann::json::parse(Slurp(dir / "plan.json"));
  int64_t predicted = plan["predicted_peak_bytes"];
  REQUIRE(plan["save_all_peak_bytes"].get<int64_t>() > predicted);

  std::string console;
  std::string dom = ChromiumDom(dir, dir / "report.html", &console);
  CHECK_MESSAGE(console.empty(), console);
  CHECK(dom.find("<h1>ckptplan memory report</h1>") != std::string::npos);
  CHECK(CountOf(dom, "class=\"series\"") == 2 * kNumCategories);
  for (size_t c = 0; c < kNumCategories; ++c) {
    std::string name(ToString(static_cast<Category>(c)));
    CHECK(CountOf(dom, "data-category=\"" + name + "\"") == 2);
  }
  CHECK(AttributeOf(dom, "planned-peak", "data-bytes") == std::to_string(predicted));
  CHECK(dom.find(">" + FormatBytes(predicted) + "</td>") != std::string::npos);
  CHECK(AttributeOf(dom, "chart-planned", "data-drawn-max-bytes") == std::to_string(predicted));
  CHECK(AttributeOf(dom, "save-all-peak", "data-bytes") ==
        std::to_string(plan["save_all_peak_bytes"].get<int64_t>()));

  // The console check does catch a broken page.
  Spit(dir / "broken.html",
       "<!DOCTYPE html><html><body><script>undefined_function();</script></body></html>");
  ChromiumDom(dir, dir / "broken.html", &console);
  CHECK(console.find("undefined_function") != std::string::npos);
}

TEST_CASE("reports are byte-identical across runs and absent when the run fails") {
  TempDir dir("report_repeat");
  Spit(dir / "mlp.json", kMlpGraph);
  std::string outputs[2];
  for (int run = 0; run < 2; ++run) {
    std::string suffix = std::to_string(run);
    REQUIRE(RunCli(dir, "plan '" + (dir / "mlp.json") + "' --budget 54KiB --report '" +
                            (dir / ("r" + suffix + ".html")) + "' --trace '" +
                            (dir / ("t" + suffix + ".json")) + "' --timeline-csv '" +
                            (dir / ("t" + suffix + ".csv")) + "'") == 0);
    outputs[run] = Slurp(dir / ("r" + suffix + ".html")) + Slurp(dir / ("t" + suffix + ".json")) +
                   Slurp(dir / ("t" + suffix + ".csv"));
  }
  CHECK(outputs[0].size() > 1000);
  CHECK(outputs[0] == outputs[1]);

  // 50 KiB is under the 53 KiB lower bound: exit 3, no report files at all.
  CHECK(RunCli(dir, "plan '" + (dir / "mlp.json") + "' --budget 50KiB --report '" +
                        (dir / "bad.html") + "' --trace '" + (dir / "bad.json") +
                        "' --timeline-csv '" + (dir / "bad.csv") + "'") == 3);
  CHECK_FALSE(std::filesystem::exists(dir / "bad.html"));
  CHECK_FALSE(std::filesystem::exists(dir / "bad.json"));
  CHECK_FALSE(std::filesystem::exists(dir / "bad.csv"));
}

}  // namespace
}  // namespace ckptplan
