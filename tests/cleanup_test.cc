#include "ckptplan/cleanup.h"

#include <doctest/doctest.h>

#include "tiny_graph.h"

namespace ckptplan {
namespace {

using testing::Id;
using testing::TinyGraph;

// testing::kTinyChain: x -f1-> a -f2-> b -f3-> c -> loss, 100-byte activations,
// save-all peak 510 at f3_bwd; f1 costs 5, f2 and f3 cost 1.
constexpr const char* kChain = testing::kTinyChain;

TEST_CASE("cleanup: re-saves a drop that a later drop made unnecessary") {
  Graph graph = TinyGraph(kChain);
  const TensorId a = Id(graph, "a"), b = Id(graph, "b");
  SimOptions options;
  // Save-all peak at f3_bwd: x 10 + a + b + c + dc + db = 10 + 500 = 510.
  CHECK(Simulate(graph, SaveAll(graph), options).peak_bytes == 510);
  SaveSet both = SaveAll(graph);
  both[a] = 0;
  both[b] = 0;
  // a and b dropped: f3_bwd holds x + c + dc + db = 310; recomputing b
  // re-runs f1 then f2 (cost 5 + 1 = 6); f2_bwd holds x + a' + b' + db + da
  // = 410, the peak.
  SimResult dropped_both = Simulate(graph, both, options);
  CHECK(dropped_both.peak_bytes == 410);
  CHECK(dropped_both.recompute_cost == 6);
  // Budget 410: b alone fits (f3_bwd: x + a + c + dc + db = 410; f2_bwd:
  // x + a + b' + db + da = 410) at cost 1, so the drop of a is undone (it
  // removes 5 of recompute); re-saving b as well would give back 510.
  CleanupResult cleaned = ResaveDropped(graph, both, 410, 0);
  CHECK(cleaned.resaved == std::vector<TensorId>{a});
  CHECK(cleaned.keep[a] == 1);
  CHECK(cleaned.keep[b] == 0);
  CHECK(cleaned.peak_before == 410);
  CHECK(cleaned.peak_after == 410);
  CHECK(cleaned.cost_before == 6);
  CHECK(cleaned.cost_after == 1);
}

TEST_CASE("cleanup: re-saves everything when the budget allows it, nothing when over") {
  Graph graph = TinyGraph(kChain);
  SaveSet both = SaveAll(graph);
  both[Id(graph, "a")] = 0;
  both[Id(graph, "b")] = 0;
  CleanupResult roomy = ResaveDropped(graph, both, 510, 0);
  CHECK(roomy.resaved.size() == 2);
  CHECK(roomy.cost_after == 0);
  CHECK(roomy.peak_after == 510);
  // Over budget already (410 > 400): the pass changes nothing.
  CleanupResult over = ResaveDropped(graph, both, 400, 0);
  CHECK(over.resaved.empty());
  CHECK(over.keep == both);
}

}  // namespace
}  // namespace ckptplan
