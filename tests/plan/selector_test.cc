#include "ckptplan/plan/selector.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <doctest/doctest.h>

#include "ckptplan/cli/commands.h"
#include "ckptplan/base/errors.h"
#include "ckptplan/emit/json_writer.h"
#include "ckptplan/base/output_file.h"
#include "ckptplan/emit/plan_io.h"
#include "ckptplan/plan/planner.h"
#include "ckptplan/ingest/synth.h"
#include "cli_util.h"
#include "test_graphs.h"

namespace ckptplan {
namespace {

namespace fs = std::filesystem;

TEST_CASE("greedy drops the cheapest tensor per byte of peak freed") {
  Graph graph = testing::FromJson(testing::kChainGraph);
  GreedyOptions options;
  options.budget_bytes = 4500;
  GreedyResult result = GreedyPlan(graph, SaveAll(graph), options);
  // Dropping a: peak 5124 -> 4124 (1000 B) for f's 100 FLOP. Dropping b:
  // the recomputed b is live at h_bwd again, so the peak stays 5124.
  CHECK(result.fits);
  CHECK(result.start_peak == 5124);
  CHECK(result.peak == 4124);
  REQUIRE(result.drops.size() == 1);
  CHECK(result.drops[0] == testing::Id(graph, "a"));
  CHECK(result.recompute_cost == 100);
}

TEST_CASE("greedy stops at the budget and does nothing when save-all fits") {
  Graph graph = testing::FromJson(testing::kChainGraph);
  GreedyOptions options;
  options.budget_bytes = 5124;  // exactly the save-all peak
  GreedyResult result = GreedyPlan(graph, SaveAll(graph), options);
  CHECK(result.fits);
  CHECK(result.drops.empty());
  options.budget_bytes = 4000;  // below the lower bound of 4124
  result = GreedyPlan(graph, SaveAll(graph), options);
  CHECK_FALSE(result.fits);
  CHECK(result.peak == 4124);
}

TEST_CASE("greedy makes progress through tied peaks") {
  // Two microbatches with the same shape: x_i -> a_i -> b_i -> loss_i, whose
  // backward peaks are equal. Per microbatch, save-all:
  //   f: a 1000; g: a + b 2000; l: 2000 (loss is 0 B);
  //   l_bwd: a + b + db 10 = 2010 (the tied peak); g_bwd: a + db + da = 1020.
  // Dropping a_i frees it after g: l_bwd 1010, recompute f 1010, g_bwd 1020,
  // so that microbatch now peaks at g (2000). Dropping a0 alone leaves the
  // peak at 2010 (microbatch 1) but removes one of the two peak steps.
  std::string tensors = R"({"id":"x0","bytes":0,"kind":"input"},{"id":"x1","bytes":0,"kind":"input"})";
  std::string nodes;
  for (std::string i : {"0", "1"}) {
    for (std::string t : {"a", "b"}) tensors += R"(,{"id":")" + t + i + R"(","bytes":1000})";
    for (std::string t : {"loss", "db", "da"}) {
      tensors += R"(,{"id":")" + t + i + R"(","bytes":)" + (t == "loss" ? "0" : "10") + "}";
    }
    nodes += std::string(i == "0" ? "" : ",") +
             R"({"id":"f)" + i + R"(","op":"exp","phase":"forward","inputs":["x)" + i + R"("],"outputs":["a)" + i + R"("],"flops":5},
 {"id":"g)" + i + R"(","op":"exp","phase":"forward","inputs":["a)" + i + R"("],"outputs":["b)" + i + R"("],"flops":5},
 {"id":"l)" + i + R"(","op":"sum","phase":"forward","inputs":["b)" + i + R"("],"outputs":["loss)" + i + R"("],"flops":1},
 {"id":"l_bwd)" + i + R"(","op":"sum_bwd","phase":"backward","inputs":["loss)" + i + R"(","b)" + i + R"("],"outputs":["db)" + i + R"("],"flops":1},
 {"id":"g_bwd)" + i + R"(","op":"exp_bwd","phase":"backward","inputs":["db)" + i + R"(","a)" + i + R"("],"outputs":["da)" + i + R"("],"flops":1})";
  }
  Graph graph = testing::FromJson(R"({"format":"ckptplan.graph","version":1,"tensors":[)" +
                                  tensors + R"(],"nodes":[)" + nodes + "]}");
  SimResult save_all = Simulate(graph, SaveAll(graph), SimOptions{});
  CHECK(save_all.peak_bytes == 2010);
  GreedyOptions options;
  options.budget_bytes = 2005;
  GreedyResult result = GreedyPlan(graph, SaveAll(graph), options);
  CHECK(result.fits);
  CHECK(result.peak == 2000);
  REQUIRE(result.drops.size() == 2);
  CHECK(graph.tensors[result.drops[0]].name == "a0");  // equal scores: lower id first
  CHECK(graph.tensors[result.drops[1]].name == "a1");
  CHECK(result.recompute_cost == 10);  // f0 + f1
}

// Writes `text` to a file under this process's scratch dir; returns its path.
std::string TempFile(const std::string& name, const std::string& text) {
  static const std::string dir = testing::ScratchDir("selector");
  std::string path = dir + "/" + name;
  WriteFileAtomic(path, text);
  return path;
}

TEST_CASE("property: on random training graphs plans fit, re-simulate from the plan file, "
          "never raise the peak, and infeasible budgets are reported") {
  int feasible = 0, infeasible = 0;
  for (uint64_t seed = 1; seed <= 150; ++seed) {
    RandomGraphOptions random;
    random.seed = seed;
    random.layers = 2 + static_cast<int>(seed % 7);
    random.width = 1 + static_cast<int>(seed % 4);
    random.max_inputs = 1 + static_cast<int>(seed % 3);
    Graph graph = RandomTrainingGraph(random);
    const std::string graph_path = TempFile("graph.json", GraphToJson(graph));
    const int64_t reserve = static_cast<int64_t>(seed % 3) * 100;
    SimOptions sim_options;
    sim_options.reserve_bytes = reserve;
    const int64_t save_all_peak = Simulate(graph, SaveAll(graph), sim_options).peak_bytes;
    const LowerBound bound = ComputeLowerBound(graph, reserve);
    for (double fraction : {1.0, 0.9, 0.75, 0.6, 0.4}) {
      CAPTURE(seed);
      CAPTURE(fraction);
      const int64_t budget = static_cast<int64_t>(fraction * save_all_peak);
      GreedyOptions greedy_options{budget, reserve};
      GreedyResult greedy = GreedyPlan(graph, SaveAll(graph), greedy_options);
      // The greedy never raises the peak, drop after drop.
      SaveSet keep = SaveAll(graph);
      int64_t previous = save_all_peak;
      for (TensorId t : greedy.drops) {
        keep[t] = 0;
        int64_t peak = Simulate(graph, keep, sim_options).peak_bytes;
        CHECK(peak <= previous);
        previous = peak;
      }
      CHECK(greedy.peak >= bound.bytes);  // no plan beats the lower bound

      PlanOptions options;
      options.graph_path = graph_path;
      options.budget_bytes = budget;
      options.reserve_bytes = reserve;
      options.output_path = graph_path + ".plan.json";
      fs::remove(options.output_path);
      std::ostringstream out;
      // `plan` runs the default planner, which fits wherever the greedy does.
      PlannerOptions planner_options;
      planner_options.budget_bytes = budget;
      planner_options.reserve_bytes = reserve;
      const PlannerResult best = PlanGraph(graph, planner_options);
      if (greedy.fits) CHECK(best.fits);
      CHECK(best.peak >= bound.bytes);
      if (!best.fits) {
        CHECK_THROWS_AS(RunPlan(options, out), InfeasibleError);
        CHECK_FALSE(fs::exists(options.output_path));
        ++infeasible;
        continue;
      }
      REQUIRE(RunPlan(options, out) == kExitOk);
      ++feasible;
      // Re-simulate from the plan file alone.
      LoadedPlan plan = ReadPlan(graph, options.output_path);
      SimOptions replay;
      replay.reserve_bytes = plan.reserve_bytes;
      const int64_t replayed = Simulate(graph, plan.keep, replay).peak_bytes;
      CHECK(replayed <= budget);
      CHECK(replayed == plan.predicted_peak_bytes);
      CHECK(plan.budget_bytes == budget);
    }
  }
  // The corpus exercises both outcomes.
  CHECK(feasible > 100);
  CHECK(infeasible > 20);
  MESSAGE("random plans: " << feasible << " feasible, " << infeasible << " infeasible");
}

}  // namespace
}  // namespace ckptplan
