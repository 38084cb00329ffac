#include "ckptplan/emit/trace.h"

#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "ckptplan/ingest/json_loader.h"
#include "ckptplan/sim/simulator.h"
#include "report_fixture.h"

namespace ckptplan {
namespace {

using nlohmann::json;
using testing::CountOf;
using testing::kMlpGraph;
using testing::RunCli;
using testing::Slurp;
using testing::Spit;
using testing::TempDir;

SimResult DropH1(const Graph& graph, SaveSet* keep) {
  *keep = SaveAll(graph);
  for (TensorId t = 0; t < graph.tensors.size(); ++t) {
    if (graph.tensors[t].name == "h1") (*keep)[t] = 0;
  }
  SimOptions options;
  options.record_categories = true;
  return Simulate(graph, *keep, options);
}

// Checks the Trace Event format's required fields on every event and returns
// the lane name of each thread id.
std::map<int, std::string> CheckTraceEvents(const json& trace) {
  REQUIRE(trace.is_object());
  REQUIRE(trace["traceEvents"].is_array());
  CHECK(trace["displayTimeUnit"] == "ms");
  std::map<int, std::string> lanes;
  for (const json& event : trace["traceEvents"]) {
    REQUIRE(event["name"].is_string());
    REQUIRE(event["ph"].is_string());
    REQUIRE(event["ts"].is_number());
    REQUIRE(event["pid"].is_number_integer());
    REQUIRE(event["tid"].is_number_integer());
    std::string ph = event["ph"];
    CHECK((ph == "M" || ph == "X" || ph == "C"));
    if (ph == "X") CHECK(event["dur"].is_number());
    if (ph == "C" || ph == "M") CHECK(event["args"].is_object());
    if (ph == "M" && event["name"] == "thread_name") {
      lanes[event["tid"].get<int>()] = event["args"]["name"].get<std::string>();
    }
  }
  return lanes;
}

TEST_CASE("trace: required fields, lanes named, one counter per step whose max is the peak") {
  Graph graph = ParseJsonGraph(kMlpGraph, "mlp.json");
  SaveSet keep;
  SimResult sim = DropH1(graph, &keep);
  REQUIRE(sim.peak_bytes == 53 * 1024);  // see report_fixture.h
  json trace = json::parse(TraceJson(graph, sim, "planned"));
  std::map<int, std::string> lanes = CheckTraceEvents(trace);
  std::map<std::string, int> lane_ids;
  for (auto& [tid, name] : lanes) lane_ids[name] = tid;
  REQUIRE(lane_ids.count("forward"));
  REQUIRE(lane_ids.count("backward"));
  REQUIRE(lane_ids.count("recompute"));
  CHECK(lane_ids.size() == lanes.size());  // distinct lanes

  int64_t counter_max = 0;
  size_t counters = 0;
  std::map<int, double> lane_end;  // slices on one lane must not overlap
  std::vector<std::string> recomputed;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] == "C") {
      ++counters;
      const json& args = event["args"];
      REQUIRE(args.size() == kNumCategories + 1);
      int64_t sum = 0;
      for (size_t c = 0; c < kNumCategories; ++c) {
        sum += args.at(std::string(ToString(static_cast<Category>(c)))).get<int64_t>();
      }
      CHECK(sum == args["total"].get<int64_t>());
      CHECK(args["total"].get<int64_t>() == sim.total[event["ts"].get<size_t>()]);
      counter_max = std::max(counter_max, args["total"].get<int64_t>());
    } else if (event["ph"] == "X") {
      int tid = event["tid"];
      REQUIRE(lanes.count(tid));
      CHECK(event["ts"].get<double>() >= lane_end[tid]);
      lane_end[tid] = event["ts"].get<double>() + event["dur"].get<double>();
      if (tid == lane_ids["recompute"]) recomputed.push_back(event["name"]);
      if (tid == lane_ids["forward"]) CHECK(event["cat"] == "forward");
    }
  }
  CHECK(counters == sim.steps.size());
  CHECK(counter_max == sim.peak_bytes);
  // h1 is recomputed by re-running fc1 alone.
  CHECK(recomputed == std::vector<std::string>{"fc1"});
}

TEST_CASE("timeline csv: a row per step, a column per category, quoted names") {
  std::string text = kMlpGraph;
  text.replace(text.find("\"id\": \"act\""), 11, "\"id\": \"act,\\\"gelu\\\"\"");
  Graph graph = ParseJsonGraph(text, "mlp.json");
  SaveSet keep;
  SimResult sim = DropH1(graph, &keep);
  std::string csv = TimelineCsv(graph, sim);
  CHECK(CountOf(csv, "\n") == sim.steps.size() + 1);
  CHECK(
      csv.rfind("step,node,op,phase,recompute,parameters,gradients,optimizer_state,buffers,inputs,"
                "saved_activations,temporaries,recomputed,reserve,collectives,total\n",
                0) == 0);
  CHECK(csv.find("\n1,\"act,\"\"gelu\"\"\",gelu,forward,0,") != std::string::npos);
  // Peak row, act_bwd at step 7 (after loss_bwd, fc2_bwd and the recompute of
  // fc1): params 8192, dw2 4096, adam 16384, x 1024, da1 + dh1 16384
  // temporaries, h1 8192 recomputed, no collectives; total 54272 (53 KiB).
  CHECK(csv.find(
            "\n7,act_bwd,gelu_backward,backward,0,8192,4096,16384,0,1024,0,16384,8192,0,0,54272\n") !=
        std::string::npos);
  CHECK(csv.find("\n6,fc1,linear,forward,1,") != std::string::npos);
}

TEST_CASE("trace replaces invalid UTF-8 in names instead of failing") {
  Graph graph = ParseJsonGraph(kMlpGraph, "mlp.json");
  graph.nodes[0].name = "fc\xff";
  SaveSet keep;
  SimResult sim = DropH1(graph, &keep);
  json trace = json::parse(TraceJson(graph, sim, "planned"));
  bool found = false;
  for (const json& event : trace["traceEvents"]) found |= event["name"] == "fc\xEF\xBF\xBD";
  CHECK(found);
}

TEST_CASE("trace and csv need per-category records") {
  Graph graph = ParseJsonGraph(kMlpGraph, "mlp.json");
  SimResult bare = Simulate(graph, SaveAll(graph), SimOptions{});
  CHECK_THROWS_AS(TraceJson(graph, bare, "x"), std::logic_error);
  CHECK_THROWS_AS(TimelineCsv(graph, bare), std::logic_error);
}

TEST_CASE("cli --trace: counters' maximum equals the plan file's predicted peak") {
  TempDir dir("trace_cli");
  Spit(dir / "mlp.json", kMlpGraph);
  REQUIRE(RunCli(dir, "plan '" + (dir / "mlp.json") + "' --budget 54KiB -o '" +
                          (dir / "plan.json") + "' --trace '" + (dir / "trace.json") +
                          "' --timeline-csv '" + (dir / "t.csv") + "'") == 0);
  int64_t predicted = json::parse(Slurp(dir / "plan.json"))["predicted_peak_bytes"];
  json trace = json::parse(Slurp(dir / "trace.json"));
  CheckTraceEvents(trace);
  int64_t counter_max = 0;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] == "C")
      counter_max = std::max(counter_max, event["args"]["total"].get<int64_t>());
  }
  CHECK(counter_max == predicted);
  CHECK(predicted == 53 * 1024);  // see report_fixture.h

  // simulate --plan gives the same timeline as the plan run.
  REQUIRE(RunCli(dir, "simulate '" + (dir / "mlp.json") + "' --plan '" + (dir / "plan.json") +
                          "' --timeline-csv '" + (dir / "s.csv") + "'") == 0);
  CHECK(Slurp(dir / "s.csv") == Slurp(dir / "t.csv"));
}

}  // namespace
}  // namespace ckptplan
