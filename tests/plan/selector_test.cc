#include "ckptplan/plan/selector.h"

#include <doctest/doctest.h>

#include "json_graphs.h"

namespace ckptplan {
namespace {

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

}  // namespace
}  // namespace ckptplan
