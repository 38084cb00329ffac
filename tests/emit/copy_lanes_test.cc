#include "ckptplan/emit/copy_lanes.h"

#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "ckptplan/emit/report_html.h"
#include "ckptplan/emit/trace.h"
#include "ckptplan/sim/simulator.h"
#include "offload_graphs.h"

namespace ckptplan {
namespace {

using testing::OffloadChain;
using testing::OffloadLink;

struct Offloaded {
  OffloadedGraph off;
  SimResult sim;
};

// `a` of OffloadChain() offloaded over a link of out / in bytes per us.
Offloaded OffloadA(const Graph& graph, double out_bytes_per_us, double in_bytes_per_us) {
  Offloaded result{ApplyOffload(graph, {testing::Id(graph, "a")},
                                OffloadLink(graph, out_bytes_per_us, in_bytes_per_us)),
                   {}};
  SimOptions sim_options;
  sim_options.record_categories = true;
  result.sim = Simulate(result.off.graph, SaveAll(result.off.graph), sim_options);
  return result;
}

TEST_CASE("copy lanes: each copy spans the steps its times fall in") {
  const Graph graph = OffloadChain();
  // 1000 B/us both ways: out over [10, 11) us, back over [40, 41) us.
  // Steps of the rewrite: f1 0, f2 1, offload-wait:a 2, f3 3, g1 4, reload:a 5,
  // g1b 6, g2 7. f2 runs over [10, 20) us: out begins at step 1 + 0/10 and
  // ends at 1 + 1/10; g1b over [40, 50): back spans [6, 6.1].
  const Offloaded a = OffloadA(graph, 1000, 1000);
  const std::vector<CopySlice> slices = CopySlices(a.sim, a.off);
  REQUIRE(slices.size() == 2);
  CHECK(slices[0].to_host);
  CHECK(slices[0].bytes == 1000);
  CHECK(slices[0].host_bytes == 1024);
  CHECK(slices[0].begin_step == doctest::Approx(1.0));
  CHECK(slices[0].end_step == doctest::Approx(1.1));
  CHECK_FALSE(slices[1].to_host);
  CHECK(slices[1].start_us == 40);
  CHECK(slices[1].begin_step == doctest::Approx(6.0));
  CHECK(slices[1].end_step == doctest::Approx(6.1));
}

TEST_CASE("copy lanes: a wait for a copy maps to the start of the step that waits") {
  const Graph graph = OffloadChain();
  // Back at 40 B/us: 25 us from 30 us (g1's start) to 55 us; g2, due at 50 us,
  // waits 5 us and runs over [55, 65). Steps: f1 0, f2 1, wait 2, f3 3,
  // reload:a 4, g1 5, g1b 6, g2 7: the copy back spans [5, 7], the wait
  // included.
  const Offloaded a = OffloadA(graph, 1000, 40);
  CHECK(a.off.node_start_us[5] == 55);
  CHECK(a.off.node_end_us[5] == 65);
  const std::vector<CopySlice> slices = CopySlices(a.sim, a.off);
  REQUIRE(slices.size() == 2);
  CHECK(slices[1].begin_step == doctest::Approx(5.0));
  CHECK(slices[1].end_step == doctest::Approx(7.0));
}

TEST_CASE("trace: the copies on a copy-to-host and a copy-to-device lane") {
  const Graph graph = OffloadChain();
  const Offloaded a = OffloadA(graph, 1000, 1000);
  const nlohmann::json trace =
      nlohmann::json::parse(TraceJson(a.off.graph, a.sim, "planned", &a.off));
  std::map<int, std::string> lanes;
  std::vector<nlohmann::json> copies;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    if (event["name"] == "thread_name") lanes[event["tid"]] = event["args"]["name"];
    if (event["ph"] == "X" && event["tid"].get<int>() >= 5) copies.push_back(event);
  }
  CHECK(lanes[5] == "copy to host");
  CHECK(lanes[6] == "copy to device");
  REQUIRE(copies.size() == 2);
  CHECK(copies[0]["name"] == "a");
  CHECK(copies[0]["tid"] == 5);
  CHECK(copies[0]["ts"].get<double>() == doctest::Approx(1.0));
  CHECK(copies[0]["dur"].get<double>() == doctest::Approx(0.1));
  CHECK(copies[0]["args"]["bytes"] == 1000);
  CHECK(copies[0]["args"]["start_us"] == 10.0);
  CHECK(copies[1]["tid"] == 6);
  CHECK(copies[1]["ts"].get<double>() == doctest::Approx(6.0));
  // Without the offload record: no copy lanes, the trace as before.
  const std::string plain = TraceJson(a.off.graph, a.sim, "planned");
  CHECK(plain.find("copy to host") == std::string::npos);
}

TEST_CASE("html report: copy lanes under the planned chart and the offloads' table") {
  const Graph graph = OffloadChain();
  const Offloaded a = OffloadA(graph, 1000, 1000);
  const SaveSet keep = SaveAll(a.off.graph);
  HtmlReportInput input;
  input.command = "plan";
  input.graph_path = "chain.json";
  input.save_all = &a.sim;
  input.planned = &a.sim;
  input.keep = &keep;
  input.offloaded = &a.off;
  const std::string html = RenderHtmlReport(a.off.graph, input);
  CHECK(html.find("id=\"copy-lanes\"") != std::string::npos);
  CHECK(html.find("data-copies=\"2\"") != std::string::npos);
  // 8 steps over 860 px from x = 80: out at 80 + 1.0 * 107.5 = 187.5, 0.1
  // steps = 10.75 px wide; back at 80 + 6 * 107.5 = 725.
  CHECK(html.find("class=\"copy copy-out\" fill=\"#0072B2\" x=\"187.5\" y=\"4\" width=\"10.8\"") !=
        std::string::npos);
  CHECK(html.find("class=\"copy copy-in\" fill=\"#009E73\" x=\"725.0\"") != std::string::npos);
  CHECK(html.find("<table id=\"offloads\">") != std::string::npos);
  CHECK(html.find("<td>f2</td><td>g1b</td>") != std::string::npos);  // freed after, back before
  input.offloaded = nullptr;
  CHECK(RenderHtmlReport(a.off.graph, input).find("copy-lanes") == std::string::npos);
}

}  // namespace
}  // namespace ckptplan
