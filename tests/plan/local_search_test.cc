#include "ckptplan/plan/local_search.h"

#include <string>

#include <doctest/doctest.h>

#include "ckptplan/ingest/loader.h"
#include "ckptplan/plan/selector.h"
#include "ckptplan/ir/synth.h"
#include "tiny_graph.h"

namespace ckptplan {
namespace {

using testing::Id;
using testing::TinyGraph;

constexpr int64_t kMiB = 1 << 20;

TEST_CASE("local search: escapes the greedy's stall on the transformer block") {
  Graph graph =
      LoadGraph(std::string(CKPTPLAN_SOURCE_DIR) + "/sample_graphs/transformer_block.json", {})
          .graph;
  GreedyOptions greedy;
  greedy.budget_bytes = 300 * kMiB;
  GreedyResult stalled = GreedyPlan(graph, SaveAll(graph), greedy);
  REQUIRE_FALSE(stalled.fits);  // 312.1 MiB: no single drop lowers the peak
  LocalSearchOptions options;
  options.budget_bytes = 300 * kMiB;
  LocalSearchResult result = ImprovePlan(graph, stalled.keep, options);
  CHECK(result.fits);
  CHECK(result.moves > 0);
  SimResult sim = Simulate(graph, result.keep, {});
  CHECK(sim.peak_bytes == result.peak);
  CHECK(result.peak <= 300 * kMiB);
  CHECK(sim.recompute_cost == result.recompute_cost);
}

TEST_CASE("local search: makes a fitting plan cheaper without leaving the budget") {
  // The chain of cleanup_test: a and b dropped peak at 410 with cost 6;
  // re-saving a keeps 410 and costs 1 (see cleanup_test for the bytes).
  Graph graph = TinyGraph(
      "T x 10 input; T a 100; T b 100; T c 100; T l 4; T dc 100; T db 100; T da 100;"
      "F f1 relu x -> a 5; F f2 relu a -> b 1; F f3 relu b -> c 1; F s sum c -> l 1;"
      "B s_bwd sum_bwd l -> dc 1; B f3_bwd relu_bwd dc c -> db 1;"
      "B f2_bwd relu_bwd db b -> da 1; B f1_bwd relu_bwd da a -> 1");
  SaveSet keep = SaveAll(graph);
  keep[Id(graph, "a")] = 0;
  keep[Id(graph, "b")] = 0;
  LocalSearchOptions options;
  options.budget_bytes = 410;
  LocalSearchResult result = ImprovePlan(graph, keep, options);
  CHECK(result.fits);
  CHECK(result.peak == 410);
  CHECK(result.recompute_cost == 1);
  CHECK(result.keep[Id(graph, "a")] == 1);
  CHECK(result.keep[Id(graph, "b")] == 0);
  // Once a is saved, re-saving b cannot fit: b's original would also live
  // over s, s_bwd and f3_bwd, whose highest node holds x + a + c + dc + db
  // = 410, so 410 + 100 = 510 > 410 without simulating (see ResaveBounds).
  CHECK(result.floored == 1);
  SUBCASE("a cap on moves considered stops it early") {
    // Re-saving a, the first candidate, is considered; the cap stops the
    // round at b, before the move is taken.
    options.max_considered = 1;
    LocalSearchResult stopped = ImprovePlan(graph, keep, options);
    CHECK(stopped.moves == 0);
    CHECK(stopped.keep == keep);
  }
}

TEST_CASE("synth: U-Net skips live from the encoder to the mirrored decoder") {
  UNetOptions options;
  options.levels = 3;
  Graph graph = UNetGraph(options);
  // enc0.relu (1 MiB) is read by enc0.pool and again, much later, by dec0.cat.
  const TensorId skip = Id(graph, "enc0.relu");
  REQUIRE(skip != kNoId);
  CHECK(graph.tensors[skip].bytes == 1 << 20);
  NodeId last_forward_reader = kNoId;
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    if (node.phase != Phase::kForward) continue;
    for (TensorId t : node.inputs) {
      if (t == skip) last_forward_reader = n;
    }
  }
  REQUIRE(last_forward_reader != kNoId);
  CHECK(graph.nodes[last_forward_reader].name == "dec0.cat");
  CHECK(graph.nodes[last_forward_reader].scope == "dec0");
  // Level i activations are base >> i: the bottleneck is 1 MiB >> 3.
  CHECK(graph.tensors[Id(graph, "mid.relu")].bytes == (1 << 20) >> 3);
}

}  // namespace
}  // namespace ckptplan
