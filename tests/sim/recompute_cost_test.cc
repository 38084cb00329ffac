// RecomputeCost: the recompute cost of a simulation without the
// simulation, equal to Simulate's to the bit on random plans of the
// single-drop corpus, over the whole step and over each region.
#include <doctest/doctest.h>

#include <random>
#include <string>

#include "ckptplan/sim/simulator.h"
#include "test_graphs.h"

namespace ckptplan {
namespace {

TEST_CASE("recompute cost: the same as the simulation's, without it") {
  std::mt19937_64 rng(2712);
  size_t plans = 0, recomputing = 0;
  testing::ForEachDropCorpusGraph([&](const Graph& graph, uint64_t, const std::string& what) {
    CAPTURE(what);
    const SimContext context(graph);
    for (int round = 0; round < 12; ++round) {
      SaveSet keep = SaveAll(graph);
      const double drop = (round % 4) / 3.0;
      for (TensorId t : context.droppable) {
        keep[t] = std::uniform_real_distribution<>(0, 1)(rng) >= drop;
      }
      // With no simulation before it (its forward prefix run, not read)...
      if (round == 2 || round == 3) {
        const SimContext fresh(graph);
        CHECK(RecomputeCost(fresh, keep, {}) == Simulate(context, keep, {}).recompute_cost);
      }
      // ... and after them (the forward prefix a simulation kept).
      for (int pass = 0; pass < 2; ++pass) {
        const SimResult sim = Simulate(context, keep, {});
        CHECK(RecomputeCost(context, keep, {}) == sim.recompute_cost);
        recomputing += sim.recompute_cost > 0;
        ++plans;
      }
      for (const Region& region : context.regions()) {
        SimOptions options;
        options.first_node = region.first;
        options.end_node = region.end;
        CHECK(RecomputeCost(context, keep, options) ==
              Simulate(context, keep, options).recompute_cost);
      }
    }
  });
  MESSAGE(plans << " plans, " << recomputing << " recomputing");
  CHECK(recomputing > 1000);
}

}  // namespace
}  // namespace ckptplan
