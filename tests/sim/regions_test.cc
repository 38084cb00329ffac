// Regions: FindRegions' cuts and simulating one region at a time.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ckptplan/sim/regions.h"
#include "ckptplan/sim/drop_delta.h"  // SimResultDifference
#include "ckptplan/sim/simulator.h"
#include "ckptplan/ir/synth.h"
#include "test_graphs.h"

namespace ckptplan {
namespace {

using testing::Concatenate;

TEST_CASE("two chained steps are two regions, each simulated on its own") {
  Graph one = testing::ChainGraph();
  Graph graph = Concatenate({one, one});
  SimContext context(graph);
  std::vector<Region> regions = FindRegions(context);
  // The first cut comes as early as possible: after the first f_bwd (node 5),
  // as the optimizer node reads only w (resident) and dw (a gradient). The
  // second part's tail (f_bwd, opt) makes no candidate, so it stays with it.
  REQUIRE(regions.size() == 2);
  CHECK(regions[0].first == 0);
  CHECK(regions[0].end == 5);
  CHECK(regions[1].first == 5);
  CHECK(regions[1].end == 14);

  // Any cut no storage crosses may bound a simulated range: take part two.
  SimOptions options;
  options.first_node = 7;
  options.end_node = 14;
  SimResult part = Simulate(context, SaveAll(graph), options);
  // The chain graph's totals (simulator_test) less its resident 124 bytes:
  // f 1000, g a+b 3000, h a+b+loss 3004, h_bwd a+b+db 5000, g_bwd a+db+da 4000,
  // f_bwd da+dw 1008, opt dw 8.
  CHECK(part.total == std::vector<int64_t>{1000, 3000, 3004, 5000, 4000, 1008, 8});
  CHECK(part.node_peak == part.total);
  SimResult whole = Simulate(context, SaveAll(graph), SimOptions());
  // The whole step adds both parts' resident 2 x 124 and the first part's
  // gradient dw (8 bytes, live to the step's end): 256 bytes on every node.
  for (NodeId n = 7; n < 14; ++n) CHECK(whole.node_peak[n] == part.node_peak[n - 7] + 256);

  // The first region: storages it makes live within it, except the gradient.
  options.first_node = 0;
  options.end_node = 7;
  SimResult first = Simulate(context, SaveAll(graph), options);
  CHECK(first.total == part.total);
}

TEST_CASE("a step whose activations cross every cut is one region") {
  Graph graph = testing::ChainGraph();
  std::vector<Region> regions = FindRegions(SimContext(graph));
  REQUIRE(regions.size() == 1);
  CHECK(regions[0].first == 0);
  CHECK(regions[0].end == graph.nodes.size());
}

TEST_CASE("regions that are copies of one another share a shape") {
  // Four chain steps (7 nodes, 8 tensors each) cut after each part's g_bwd:
  // [0, 5) is p0's f..g_bwd; [5, 12) and [12, 19) are p0 (p1)'s f_bwd, opt
  // and p1 (p2)'s f..g_bwd; [19, 28) is p2's tail and all of p3.
  Graph one = testing::ChainGraph();
  Graph graph = Concatenate({one, one, one, one});
  SimContext context(graph);
  std::vector<Region> regions = FindRegions(context);
  REQUIRE(regions.size() == 4);
  CHECK(regions[1].first == 5);
  CHECK(regions[2].first == 12);
  std::vector<RegionShape> shapes = ShapeRegions(context, regions);
  REQUIRE(shapes.size() == 4);
  // Regions 1 and 2 differ by one part: 7 nodes and 8 tensors on.
  CHECK(shapes[1].first_of_shape == 1);
  CHECK(shapes[2].first_of_shape == 1);
  CHECK(shapes[2].node_shift == 7);
  CHECK(shapes[2].tensor_shift == 8);
  CHECK(shapes[1].copies == 2);
  CHECK(shapes[2].copies == 2);
  // The first and last regions have other lengths.
  CHECK(shapes[0].first_of_shape == 0);
  CHECK(shapes[0].copies == 1);
  CHECK(shapes[3].first_of_shape == 3);
  CHECK(shapes[3].copies == 1);

  // The context's region-of-node table agrees with the regions, and
  // RegionalMemory reads it.
  RegionalMemory memory(context, SaveAll(graph), SimOptions());
  for (size_t r = 0; r < regions.size(); ++r) {
    for (NodeId n = regions[r].first; n < regions[r].end; ++n) {
      CHECK(context.region_of_node()[n] == r);
    }
  }
  for (TensorId t : context.candidates) CHECK(memory.RegionOf(t) == context.RegionOf(t));
  // Copies with equal plans have equal keys; another plan, another key.
  SaveSet keep = SaveAll(graph);
  std::vector<uint8_t> plan1, plan2;
  const uint64_t key1 = memory.PlanKey(1, keep, &plan1);
  CHECK(memory.PlanKey(2, keep, &plan2) == key1);
  CHECK(plan1 == plan2);
  CHECK(RegionPlanKey(shapes[1], plan1) == key1);
  keep[memory.part(2).candidates[0]] = 0;
  CHECK(memory.PlanKey(2, keep, &plan2) != key1);
  CHECK(plan2[0] == 0);

  // One byte more on p2's b (read in region 2) makes region 2 its own shape.
  graph.tensors[testing::Id(graph, "p2.b")].bytes += 1;
  SimContext changed(graph);
  shapes = ShapeRegions(changed, FindRegions(changed));
  CHECK(shapes[2].first_of_shape == 2);
  CHECK(shapes[1].copies == 1);

  // So does an op of another name (the min cut's policy reads ops).
  graph.tensors[testing::Id(graph, "p2.b")].bytes -= 1;
  graph.nodes[12 + 2].op = "gemm";
  SimContext renamed(graph);
  shapes = ShapeRegions(renamed, FindRegions(renamed));
  CHECK(shapes[2].first_of_shape == 2);
}

// A random plan (each tensor saved with odds 2 in 3) of `graph`'s first
// `period` tensors, repeated: with `period` the tensors of one part of
// copies, the same plan in every part.
SaveSet RandomPlan(const Graph& graph, size_t period, std::mt19937_64& rng) {
  std::vector<uint8_t> bits(period);
  for (uint8_t& bit : bits) bit = rng() % 3 != 0;
  SaveSet keep = SaveAll(graph);
  for (TensorId t = 0; t < graph.tensors.size(); ++t) keep[t] = bits[t % period];
  return keep;
}

// The start of a RegionalMemory for `keep` against simulations of its own:
// every region's figures (a copy's, while shared), simulation, offsets and
// highest node peak. Returns the shapes (distinct first_of_shape) among
// the regions.
size_t CheckStart(const SimContext& context, const SaveSet& keep, const RegionalMemory& memory) {
  const SimResult whole = Simulate(context, keep, SimOptions());
  CHECK(memory.peak() == whole.peak_bytes);
  std::vector<size_t> first_of_shape;
  for (size_t r = 0; r < memory.size(); ++r) {
    const RegionalMemory::Part& part = memory.part(r);
    const SimResult own = Simulate(context, keep, memory.OptionsFor(r));
    const SimResult& figures = part.sim.figures();
    CHECK(figures.node_peak == own.node_peak);
    CHECK(figures.total == own.total);
    CHECK(figures.peak_bytes == own.peak_bytes);
    CHECK(figures.recompute_cost == own.recompute_cost);
    CHECK(SimResultDifference(part.sim.full(), own) == "");
    int64_t max = std::numeric_limits<int64_t>::min();
    for (NodeId n = part.range.first; n < part.range.end; ++n) {
      CHECK(part.offset[n - part.range.first] ==
            whole.node_peak[n] - own.node_peak[n - part.range.first]);
      max = std::max(max, whole.node_peak[n]);
    }
    CHECK(part.max == max);
    first_of_shape.push_back(context.shapes()[r].first_of_shape);
  }
  std::sort(first_of_shape.begin(), first_of_shape.end());
  return static_cast<size_t>(std::unique(first_of_shape.begin(), first_of_shape.end()) -
                             first_of_shape.begin());
}

TEST_CASE("property: copies share simulations, trials and the start, each its own's") {
  // A trial of a copy's plan shares the copy's simulation (Try). A
  // RegionalMemory simulates the whole step, then each region, but copies
  // of a region (same shape) with the same plan once: a plan repeated in
  // every part gives one simulation per shape; a plan that differs from part
  // to part may give more.
  std::mt19937_64 rng(11);
  size_t shared = 0, started_shared = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const Graph step = testing::RandomStep(seed, 3);
    const Graph graph = testing::Copies(step, 4);
    CAPTURE(seed);
    SimContext context(graph);
    SimOptions options;
    RegionalMemory memory(context, SaveAll(graph), options);
    const size_t per_part = step.tensors.size();
    RegionalMemory::Trial trial;
    for (int plan = 0; plan < 8; ++plan) {
      CAPTURE(plan);
      const SaveSet keep = RandomPlan(graph, per_part, rng);
      for (size_t r = 0; r < memory.size(); ++r) {
        memory.Try(r, keep, &trial);
        SimResult own = Simulate(context, keep, memory.OptionsFor(r));
        CHECK(SimResultDifference(trial.sim.full(), own) == "");
        // The figures-only trial agrees too.
        const int64_t region_max = trial.region_max;
        memory.Try(r, keep, &trial, /*need_sim=*/false);
        CHECK(trial.region_max == region_max);
      }
      const RegionalMemory started(context, keep, options);
      const size_t shapes = CheckStart(context, keep, started);
      CHECK(started.start_simulations() == 1 + shapes);  // the step, then one per shape
      started_shared += 1 + started.size() - started.start_simulations();
      const SaveSet mixed = RandomPlan(graph, graph.tensors.size(), rng);
      const RegionalMemory mixed_start(context, mixed, options);
      CheckStart(context, mixed, mixed_start);
      CHECK(mixed_start.start_simulations() <= 1 + mixed_start.size());
    }
    shared += memory.shared_trials();
  }
  MESSAGE(shared << " trials and " << started_shared << " starting simulations shared");
  CHECK(shared > 100);
  CHECK(started_shared > 50);
}

// Random plans of concatenated random graphs and small transformers: every
// region's node peaks differ from the whole step's by the same amount
// whatever the plan, and region recompute costs add up to the step's.
TEST_CASE("property: region simulations match the whole step up to a plan-free offset") {
  std::mt19937_64 rng(7);
  size_t checked_regions = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::vector<Graph> parts;
    const int count = 2 + static_cast<int>(seed % 3);
    for (int i = 0; i < count; ++i) {
      if ((seed + i) % 4 == 0) {
        TransformerOptions options;
        options.layers = 1 + i % 2;
        options.batch = 2;
        options.seq = 8;
        options.hidden = 16;
        options.heads = 2;
        options.vocab = 50;
        parts.push_back(TransformerGraph(options));
      } else {
        RandomGraphOptions options;
        options.seed = seed * 10 + i;
        options.layers = 2 + static_cast<int>((seed + i) % 5);
        options.width = 1 + static_cast<int>((seed + i) % 3);
        options.optimizer = (seed + i) % 2 == 0;
        parts.push_back(RandomTrainingGraph(options));
      }
    }
    Graph graph = Concatenate(parts);
    graph.training.implicit_gradient_bytes = seed % 2 == 0 ? 64 : 0;
    CAPTURE(seed);
    SimContext context(graph);
    std::vector<Region> regions = FindRegions(context);
    CHECK(regions.size() >= static_cast<size_t>(count));
    std::vector<int64_t> offset;
    for (int plan = 0; plan < 6; ++plan) {
      SaveSet keep = SaveAll(graph);
      for (TensorId t : context.candidates) keep[t] = plan == 0 ? 1 : (rng() % 3 != 0);
      SimOptions options;
      options.reserve_bytes = 10;
      SimResult whole = Simulate(context, keep, options);
      double cost = 0;
      int64_t peak = 0;
      for (const Region& region : regions) {
        options.first_node = region.first;
        options.end_node = region.end;
        SimResult part = Simulate(context, keep, options);
        cost += part.recompute_cost;
        for (NodeId n = region.first; n < region.end; ++n) {
          const int64_t difference = whole.node_peak[n] - part.node_peak[n - region.first];
          if (plan == 0) {
            offset.push_back(difference);
          } else {
            CHECK(difference == offset[n]);
          }
          peak = std::max(peak, part.node_peak[n - region.first] + difference);
        }
        ++checked_regions;
      }
      CHECK(cost == whole.recompute_cost);
      CHECK(peak == whole.peak_bytes);
    }
  }
  CHECK(checked_regions > 500);
}

}  // namespace
}  // namespace ckptplan
