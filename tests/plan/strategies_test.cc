#include "ckptplan/plan/strategies.h"

#include <algorithm>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "bench_quality/exhaustive.h"
#include "ckptplan/ir/synth.h"
#include "test_graphs.h"
#include "tiny_graph.h"

namespace ckptplan {
namespace {

using testing::Id;
using testing::TinyGraph;

// testing::kTinyChain: x -f1-> a -f2-> b -f3-> c -> loss, 100-byte activations,
// save-all peak 510 at f3_bwd; f1 costs 5, f2 and f3 cost 1.
constexpr const char* kChain = testing::kTinyChain;

TEST_CASE("strategies: names round-trip") {
  for (Strategy s : AllStrategies()) {
    Strategy parsed;
    REQUIRE(ParseStrategy(ToString(s), &parsed));
    CHECK(parsed == s);
  }
  Strategy unused;
  CHECK_FALSE(ParseStrategy("optimal", &unused));
}

TEST_CASE("strategies: segments keep only tensors that cross a segment boundary") {
  Graph graph = TinyGraph(kChain);
  const TensorId a = Id(graph, "a"), b = Id(graph, "b"), c = Id(graph, "c"), l = Id(graph, "l");
  // One segment: nothing is read across a boundary, every candidate dropped.
  SaveSet one = SegmentPlan(graph, 1);
  CHECK((one[a] == 0 && one[b] == 0 && one[c] == 0 && one[l] == 0));
  // Four segments of one node: a, b, c are read by the next segment; l only
  // by backward.
  SaveSet four = SegmentPlan(graph, 4);
  CHECK((four[a] == 1 && four[b] == 1 && four[c] == 1 && four[l] == 0));
  // Two segments {f1, f2} {f3, s}: only b is read across the boundary.
  SaveSet two = SegmentPlan(graph, 2);
  CHECK((two[a] == 0 && two[b] == 1 && two[c] == 0 && two[l] == 0));
  // No scopes: scope checkpointing checkpoints nothing.
  CHECK(ScopeCheckpointPlan(graph) == SaveAll(graph));
}

TEST_CASE("strategies: SegmentPlans gives CheckpointGroups' plan of each segment count") {
  // The reference: forward node i of F in group i * k / F, checkpointed.
  auto reference = [](const Graph& graph, int k) {
    std::vector<NodeId> forward;
    for (NodeId n = 0; n < graph.nodes.size(); ++n) {
      if (graph.nodes[n].phase == Phase::kForward) forward.push_back(n);
    }
    std::vector<uint32_t> group(graph.nodes.size(), kNoId);
    const size_t count = std::clamp<size_t>(static_cast<size_t>(std::max(k, 1)), 1,
                                            std::max<size_t>(forward.size(), 1));
    for (size_t i = 0; i < forward.size(); ++i) {
      group[forward[i]] = static_cast<uint32_t>(i * count / forward.size());
    }
    return CheckpointGroups(graph, group);
  };
  std::vector<Graph> graphs;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    RandomGraphOptions random;
    random.seed = seed;
    random.layers = 3 + static_cast<int>(seed % 7);
    random.width = 1 + static_cast<int>(seed % 4);
    random.max_inputs = 1 + static_cast<int>(seed % 3);
    graphs.push_back(RandomTrainingGraph(random));
  }
  graphs.push_back(testing::SmallTransformer(2, /*layers=*/2));
  graphs.push_back(TinyGraph(kChain));
  size_t dropped = 0;
  for (size_t i = 0; i < graphs.size(); ++i) {
    const SimContext context(graphs[i]);
    const SegmentPlans plans(context);
    for (int k = 0; k <= static_cast<int>(plans.forward()) + 2; ++k) {
      CAPTURE(i);
      CAPTURE(k);
      const SaveSet keep = plans.Plan(k);
      CHECK(keep == reference(graphs[i], k));
      for (uint8_t saved : keep) dropped += !saved;
    }
    CHECK(SqrtSegmentsPlan(context) == SqrtSegmentsPlan(graphs[i]));
    CHECK(ScopeCheckpointPlan(context) == ScopeCheckpointPlan(graphs[i]));
  }
  CHECK(dropped > 500);
}

TEST_CASE("strategies: a module's internal tensors are made and read inside it only") {
  Graph graph = TinyGraph(kChain);
  const TensorId a = Id(graph, "a");
  // Nodes: f1 f2 f3 s (forward), then backward. Module {f1, f2}: a is read by
  // f2 only (inside); b is read by f3 (outside), so it stays as the input of
  // the rest; c and l are made outside any module.
  const uint32_t none = kNoId;
  std::vector<uint32_t> group(graph.nodes.size(), none);
  group[0] = group[1] = 0;
  CHECK(InternalCandidates(graph, group) == std::vector<TensorId>{a});
  // With f3 in a module of its own, c still escapes it: s, in no module,
  // reads it.
  group[2] = 1;
  CHECK(InternalCandidates(graph, group) == std::vector<TensorId>{a});
  group[3] = 1;  // s joins f3: c (read by s) and l (read by backward only) are internal
  CHECK(InternalCandidates(graph, group) ==
        std::vector<TensorId>{a, Id(graph, "c"), Id(graph, "l")});
}

TEST_CASE("strategies: knapsack counts saved bytes for the whole step") {
  Graph graph = TinyGraph(kChain);
  const TensorId a = Id(graph, "a"), b = Id(graph, "b"), c = Id(graph, "c"), l = Id(graph, "l");
  CHECK(KnapsackPlan(graph, 510, 0) == SaveAll(graph));
  // Fixed part = save-all peak 510 - saved bytes (a + b + c + l = 304) =
  // 206; budget 410 leaves 204 for saved bytes: a (cost 5) + one of b, c
  // (cost 1) + l (4 bytes, cost 1) = 204 bytes, value 7.
  SaveSet keep = KnapsackPlan(graph, 410, 0);
  CHECK(keep[a] == 1);
  CHECK(keep[l] == 1);
  CHECK(keep[b] + keep[c] == 1);
  // Below the fixed part nothing can be saved.
  SaveSet none = KnapsackPlan(graph, 200, 0);
  CHECK((none[a] == 0 && none[b] == 0 && none[c] == 0 && none[l] == 0));
}

// KnapsackPlan's table without its shortcuts (rows of no value skipped,
// cells the items fill whole read as their sum): every row, every cell. Its
// items and capacity are restated from KnapsackPlan on purpose, so that the
// reference stands on its own.
SaveSet PlainKnapsack(const SimContext& context, int64_t budget_bytes) {
  const Graph& graph = context.graph;
  const std::vector<TensorId>& candidates = context.droppable;
  SaveSet keep = SaveAll(graph);
  std::vector<int64_t> weight;
  std::vector<double> value;
  int64_t total = 0;
  for (TensorId t : candidates) {
    weight.push_back(graph.tensors[graph.StorageRoot(t)].bytes);
    value.push_back(graph.NodeCost(graph.tensors[t].producer));
    total += weight.back();
  }
  const int64_t capacity = budget_bytes - (Simulate(context, keep, {}).peak_bytes - total);
  if (capacity >= total) return keep;
  for (TensorId t : candidates) keep[t] = 0;
  if (capacity <= 0) return keep;
  const int64_t k = static_cast<int64_t>(candidates.size());
  const int64_t buckets = std::clamp<int64_t>((int64_t{1} << 26) / k, 64, 4096);
  const int64_t unit = std::max<int64_t>(1, (capacity + buckets - 1) / buckets);
  const int64_t cap = capacity / unit;
  std::vector<double> best(cap + 1, 0);
  std::vector<std::vector<bool>> take(k, std::vector<bool>(cap + 1, false));
  for (int64_t i = 0; i < k; ++i) {
    const int64_t w = (weight[i] + unit - 1) / unit;
    for (int64_t c = cap; c >= w; --c) {
      if (best[c - w] + value[i] > best[c]) {
        best[c] = best[c - w] + value[i];
        take[i][c] = true;
      }
    }
  }
  int64_t c = cap;
  for (int64_t i = k - 1; i >= 0; --i) {
    if (!take[i][c]) continue;
    keep[candidates[i]] = 1;
    c -= (weight[i] + unit - 1) / unit;
  }
  return keep;
}

TEST_CASE("strategies: the knapsack's shortcuts choose as the plain table") {
  // Random graphs and small transformers (views of no cost, costs spread
  // over orders of magnitude), at budgets from the fixed part to save-all.
  size_t plans = 0, differ_from_all = 0;
  testing::ForEachDropCorpusGraph([&](const Graph& graph, uint64_t, const std::string& what) {
    CAPTURE(what);
    const SimContext context(graph);
    const int64_t save_all = Simulate(context, SaveAll(graph), {}).peak_bytes;
    for (int percent = 40; percent <= 100; percent += 7) {
      CAPTURE(percent);
      const int64_t budget = save_all * percent / 100;
      const SaveSet keep = KnapsackPlan(context, budget, 0);
      CHECK(keep == PlainKnapsack(context, budget));
      ++plans;
      differ_from_all += keep != SaveAll(graph);
    }
  });
  MESSAGE(plans << " knapsack plans, " << differ_from_all << " dropping something");
  CHECK(differ_from_all > 100);
}

TEST_CASE("exhaustive: the front answers every budget") {
  Graph graph = TinyGraph(kChain);
  std::vector<FrontPoint> front = ExhaustiveFront(graph, 0);
  REQUIRE(!front.empty());
  for (size_t i = 1; i < front.size(); ++i) {
    CHECK(front[i].peak > front[i - 1].peak);
    CHECK(front[i].recompute_cost < front[i - 1].recompute_cost);
  }
  // Save-all (510) costs nothing; any plan under it re-runs at least one
  // node (cost >= 1), and dropping b alone reaches 410 at cost 1.
  REQUIRE(CheapestUnder(front, 510) != nullptr);
  CHECK(CheapestUnder(front, 510)->recompute_cost == 0);
  REQUIRE(CheapestUnder(front, 410) != nullptr);
  CHECK(CheapestUnder(front, 410)->recompute_cost == 1);
  // Lower bound: x 10 + f2_bwd's db + b + da = 310; nothing fits below.
  CHECK(ComputeLowerBound(graph, 0).bytes == 310);
  CHECK(CheapestUnder(front, 309) == nullptr);
}

}  // namespace
}  // namespace ckptplan
