#include "ckptplan/plan/fast_score.h"

#include <stdexcept>
#include <string>

#include <doctest/doctest.h>

#include "ckptplan/sim/regions.h"
#include "ckptplan/sim/simulator.h"
#include "tiny_graph.h"

namespace ckptplan {
namespace {

using testing::Id;
using testing::TinyGraph;

// The chain of cleanup_test: every node cost an integer, so DropDelta answers.
Graph Chain() {
  return TinyGraph(
      "T x 10 input; T a 100; T b 100; T c 100; T l 4; T dc 100; T db 100; T da 100;"
      "F f1 relu x -> a 5; F f2 relu a -> b 1; F f3 relu b -> c 1; F s sum c -> l 1;"
      "B s_bwd sum_bwd l -> dc 1; B f3_bwd relu_bwd dc c -> db 1;"
      "B f2_bwd relu_bwd db b -> da 1; B f1_bwd relu_bwd da a -> 1");
}

TEST_CASE("fast score: each drop scored equals its simulation") {
  const Graph graph = Chain();
  const SimContext context(graph);
  SaveSet keep = SaveAll(graph);
  const RegionalMemory memory(context, keep, {});
  FastDropScorer scorer(context, "test");
  size_t scored = 0;
  for (TensorId t : context.droppable) {
    const size_t r = memory.RegionOf(t);
    FastScore score;
    if (!scorer.Score(memory, r, keep, t, &score)) continue;
    ++scored;
    RegionalMemory::Trial trial;
    CHECK_NOTHROW(scorer.Confirm(memory, r, keep, t, score, &trial));
    CHECK(keep == SaveAll(graph));  // Confirm puts the bit back
    keep[t] = 0;
    const SimResult whole = Simulate(context, keep, {});
    keep[t] = 1;
    CHECK(score.peak == whole.peak_bytes);
    CHECK(score.cost == whole.recompute_cost);
  }
  CHECK(scored > 0);
  // Dropping a re-runs f1 alone (b is saved): it adds f1's cost, 5.
  FastScore a;
  REQUIRE(scorer.Score(memory, memory.RegionOf(Id(graph, "a")), keep, Id(graph, "a"), &a));
  CHECK(a.added_cost == 5);
  CHECK(a.cost == 5);
}

TEST_CASE("fast score: a score the simulation does not give throws, naming the caller") {
  const Graph graph = Chain();
  const SimContext context(graph);
  SaveSet keep = SaveAll(graph);
  const RegionalMemory memory(context, keep, {});
  FastDropScorer scorer(context, "test search");
  const TensorId a = Id(graph, "a");
  const size_t r = memory.RegionOf(a);
  FastScore score;
  REQUIRE(scorer.Score(memory, r, keep, a, &score));
  score.added_cost += 1;
  RegionalMemory::Trial trial;
  CHECK_THROWS_WITH_AS(scorer.Confirm(memory, r, keep, a, score, &trial),
                       doctest::Contains("test search: DropDelta scored dropping 'a'"),
                       std::logic_error);
  CHECK(keep[a] == 1);
}

}  // namespace
}  // namespace ckptplan
