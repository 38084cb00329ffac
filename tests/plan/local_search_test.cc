#include "ckptplan/plan/local_search.h"

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "ckptplan/ingest/loader.h"
#include "ckptplan/plan/selector.h"
#include "ckptplan/ir/synth.h"
#include "test_graphs.h"
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
  // With its dropouts recomputable (renamed: as if their random state were
  // replayed), the greedy drops their outputs first and then stalls.
  for (Node& node : graph.nodes) {
    if (node.op == "dropout") node.op = "replayed_mask";
  }
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

TEST_CASE("local search: a drop whose producer re-runs already adds no cost") {
  // p makes a and b (cost 5); q reads both; backward l_bwd (makes a 1000-
  // byte t), m (reads t), ga (reads a), gb (reads b). Save-all peaks at m:
  // in 10 + a 100 + b 100 + t 1000 + d 10 = 1220 (l died after l_bwd). From
  // a dropped and b saved: 1120 there, the budget, so a stays dropped; p
  // re-runs before ga for a's copy. Dropping b too costs nothing more (b's
  // copy comes from that re-run, p re-running once) and frees b's 100
  // bytes at m: a move local search makes at equal cost and lower peak. It
  // rules out by their added cost only drops that re-run a node no chain
  // re-runs now (verify mode simulates each it rules out).
  using testing::GraphBuilder;
  constexpr Phase F = Phase::kForward, B = Phase::kBackward;
  GraphBuilder g;
  g.Tensor("in", 10, TensorKind::kInput).Tensor("a", 100).Tensor("b", 100).Tensor("l", 4);
  g.Tensor("t", 1000).Tensor("d", 10).Tensor("da", 10).Tensor("db", 10);
  g.Node("p", "split", F, {"in"}, {"a", "b"}, 5).Node("q", "sum", F, {"a", "b"}, {"l"}, 1);
  g.Node("l_bwd", "sum_bwd", B, {"l"}, {"t"}, 1).Node("m", "shrink", B, {"t"}, {"d"}, 1);
  g.Node("ga", "bwd", B, {"d", "a"}, {"da"}, 1).Node("gb", "bwd", B, {"d", "b"}, {"db"}, 1);
  const Graph graph = g.Build();
  const TensorId a = Id(graph, "a"), b = Id(graph, "b");
  CHECK(Simulate(graph, SaveAll(graph), {}).peak_bytes == 1220);
  SaveSet start = SaveAll(graph);
  start[a] = 0;
  SaveSet both = start;
  both[b] = 0;
  const SimResult from = Simulate(graph, start, {});
  const SimResult to = Simulate(graph, both, {});
  CHECK(from.peak_bytes == 1120);
  CHECK(to.recompute_cost == from.recompute_cost);  // 5: p once
  CHECK(to.peak_bytes < from.peak_bytes);
  LocalSearchOptions options;
  options.budget_bytes = from.peak_bytes;
  options.verify = true;
  LocalSearchResult result;
  CHECK_NOTHROW(result = ImprovePlan(graph, start, options));
  CHECK(result.keep == both);
  CHECK(result.costed > 0);  // the drop of l re-runs q, which nothing re-runs now
}

TEST_CASE("local search: where a cap stops it does not depend on pruning") {
  // Floors and DropDelta answer moves without simulating them; the cap
  // counts moves considered, so with pruning on, off and verified (every
  // answer simulated and compared) the search stops at the same move and
  // returns the same plan. Caps of 7 and 40 stop most searches mid-round.
  std::vector<Graph> graphs;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    RandomGraphOptions random;
    random.seed = seed;
    random.layers = 4 + static_cast<int>(seed % 5);
    random.width = 2 + static_cast<int>(seed % 3);
    random.max_inputs = 1 + static_cast<int>(seed % 3);
    graphs.push_back(RandomTrainingGraph(random));
  }
  graphs.push_back(testing::SmallTransformer(1, /*layers=*/2));
  graphs.push_back(testing::SmallTransformer(2, /*layers=*/1));  // two regions, copies
  size_t fast_scores = 0, cut = 0, floored = 0, stopped = 0, costed = 0;
  for (size_t i = 0; i < graphs.size(); ++i) {
    const Graph& graph = graphs[i];
    const int64_t save_all = Simulate(graph, SaveAll(graph), {}).peak_bytes;
    for (double fraction : {0.6, 0.8}) {
      GreedyOptions greedy;
      greedy.budget_bytes = static_cast<int64_t>(fraction * static_cast<double>(save_all));
      const SaveSet start = GreedyPlan(graph, SaveAll(graph), greedy).keep;
      for (size_t cap : {size_t{7}, size_t{40}, size_t{20000}}) {
        CAPTURE(i);
        CAPTURE(fraction);
        CAPTURE(cap);
        LocalSearchOptions options;
        options.budget_bytes = greedy.budget_bytes;
        options.max_considered = cap;
        const LocalSearchResult on = ImprovePlan(graph, start, options);
        options.prune = false;
        const LocalSearchResult off = ImprovePlan(graph, start, options);
        options.prune = true;
        options.verify = true;
        LocalSearchResult verified;
        CHECK_NOTHROW(verified = ImprovePlan(graph, start, options));
        CHECK(on.keep == off.keep);
        CHECK(on.keep == verified.keep);
        CHECK(on.moves == off.moves);
        CHECK(on.considered == off.considered);
        CHECK(on.peak == off.peak);
        CHECK(on.recompute_cost == off.recompute_cost);
        CHECK(off.fast_scores == 0);
        CHECK(off.floored == 0);
        CHECK(off.costed == 0);
        fast_scores += on.fast_scores;
        costed += verified.costed;
        cut += verified.cut_scores;
        floored += on.floored;
        stopped += on.considered >= cap;
      }
    }
  }
  // The corpus exercises the shortcuts and the cap, drops' scores cut short
  // and drops ruled out by the cost they add to a fitting plan (each
  // simulated too in verify mode).
  MESSAGE(fast_scores << " scored by DropDelta, " << cut << " cut short in verify mode, "
                      << costed << " drops ruled out by the cost they add");
  CHECK(fast_scores > 100);
  CHECK(cut > 100);
  CHECK(costed > 50);
  CHECK(floored > 10);
  CHECK(stopped > 10);
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
