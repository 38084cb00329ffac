#include "ckptplan/plan/cleanup.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

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

TEST_CASE("cleanup: a re-save's floor is the gap's highest node plus the storage") {
  Graph graph = TinyGraph(kChain);
  const TensorId a = Id(graph, "a");
  SimContext context(graph);
  SaveSet keep = SaveAll(graph);
  keep[a] = 0;
  // a dropped: its original ends after f2 (node 1); f1 re-runs (reading only
  // the resident x) right before f1_bwd (node 7). Node peaks of the gap:
  // f3 x + b + c = 10 + 200 = 210; s + l = 314; s_bwd l + dc = 314;
  // f3_bwd x + b + c + dc + db = 410 (the peak); f2_bwd x + b + db + da = 310.
  SimOptions options;
  RegionalMemory memory(context, keep, options);
  CHECK(memory.peak() == 410);
  ResaveBounds floor(context);
  floor.Prepare(memory, memory.RegionOf(a));
  // Re-saving a keeps its 100 bytes over the gap, and no storage read last by
  // the re-run of f1 can leave it: 410 + 100 = 510, the save-all peak.
  CHECK(floor.Floor(a) == 510);
  keep[a] = 1;
  CHECK(Simulate(context, keep, options).peak_bytes == 510);
}

TEST_CASE("cleanup: a re-save's ceiling adds the storage over the gap to a lone chain") {
  Graph graph = TinyGraph(kChain);
  const TensorId a = Id(graph, "a"), b = Id(graph, "b");
  SimContext context(graph);
  SaveSet keep = SaveAll(graph);
  keep[a] = 0;
  SimOptions options;
  RegionalMemory memory(context, keep, options);
  ResaveBounds bounds(context);
  bounds.Prepare(memory, memory.RegionOf(a));
  // a dropped (as above): the chain re-running f1 makes only a', which no
  // recompute step reads. Re-saving a removes it (cost -5) and holds a's 100
  // bytes over the gap f3 .. f2_bwd, whose highest node is f3_bwd at 410:
  // 410 + 100 = 510, what re-saving gives.
  double added = 0;
  int64_t chain_floor = 0;
  CHECK(bounds.Ceiling(keep, a, memory.peak(), &added, &chain_floor) == 510);
  CHECK(added == -5);
  // f1 reads only the resident x: nothing leaves the gap, and the floor is
  // the ceiling.
  CHECK(chain_floor == 510);
  // a and b dropped: b's chain (f1, f2) also makes a', which f2_bwd reads
  // after it, so re-saving b would move f1 to f2_bwd: no ceiling. Nor for a,
  // whose re-run does not end a chain.
  keep[b] = 0;
  RegionalMemory both(context, keep, options);
  bounds.Prepare(both, both.RegionOf(b));
  CHECK(bounds.Ceiling(keep, b, both.peak(), &added) == std::numeric_limits<int64_t>::max());
  CHECK(bounds.Ceiling(keep, a, both.peak(), &added) == std::numeric_limits<int64_t>::max());
}

// Random plans of random steps, in copies and with transformers: no floor is
// above the peak the re-save really gives and many rule a re-save out at a
// budget of the plan's own peak; no ceiling is below it, and the recompute
// cost a ceiling gives is the simulation's, exactly.
TEST_CASE("property: a re-save's floors and ceiling hold its simulated peak") {
  std::mt19937_64 rng(3);
  size_t floors = 0, ruled_out = 0, checked = 0, view_floors = 0;
  size_t ceilings = 0, level = 0, chain_floors = 0, exact = 0, leaving = 0, byproducts = 0;
  constexpr int64_t kNoFloor = std::numeric_limits<int64_t>::min();
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Graph graph;
    if (seed % 5 == 0) {
      graph = testing::SmallTransformer(1 + static_cast<int>(seed % 2));
    } else {
      graph = testing::Copies(testing::RandomStep(seed, 3), 1 + seed % 3);
    }
    CAPTURE(seed);
    SimContext context(graph);
    for (int plan = 0; plan < 6; ++plan) {
      SaveSet keep = SaveAll(graph);
      for (TensorId t : context.candidates) keep[t] = rng() % 3 == 0;
      SimOptions options;
      options.reserve_bytes = 10;
      RegionalMemory memory(context, keep, options);
      ResaveBounds bounds(context);
      for (size_t r = 0; r < memory.size(); ++r) {
        bounds.Prepare(memory, r);
        const bool own = memory.part(r).sim.node_shift() == 0;  // not a copy's
        for (TensorId t : memory.part(r).candidates) {
          if (keep[t]) continue;
          const int64_t bound = bounds.Floor(t);
          double added = 0;
          int64_t chain_floor = kNoFloor;
          int64_t ceiling = own ? bounds.Ceiling(keep, t, memory.peak(), &added, &chain_floor)
                                : std::numeric_limits<int64_t>::max();
          if (own && ceiling == std::numeric_limits<int64_t>::max()) {
            ceiling = bounds.ByproductCeiling(t, memory.peak(), &added);
            byproducts += ceiling != std::numeric_limits<int64_t>::max();
          }
          keep[t] = 1;
          const SimResult resaved = Simulate(context, keep, options);
          keep[t] = 0;
          CAPTURE(graph.tensors[t].name);
          CHECK(bound <= resaved.peak_bytes);
          ++checked;
          if (bound != kNoFloor) {
            ++floors;
            ruled_out += bound > memory.peak();
            view_floors += context.root[t] != t;
          }
          if (ceiling == std::numeric_limits<int64_t>::max()) continue;
          ++ceilings;
          level += ceiling == memory.peak();
          CHECK(resaved.peak_bytes <= ceiling);
          CHECK(resaved.recompute_cost - memory.cost() == added);
          if (chain_floor == kNoFloor) continue;
          ++chain_floors;
          CHECK(chain_floor <= resaved.peak_bytes);
          exact += chain_floor == resaved.peak_bytes;
          // Where storages leave, and the re-save still peaks in the gap.
          leaving += chain_floor < ceiling && ceiling > memory.peak();
        }
      }
    }
  }
  CHECK(checked > 1000);
  CHECK(floors > checked / 4);
  CHECK(view_floors > 20);
  CHECK(ruled_out > 100);
  CHECK(ceilings > checked / 10);
  CHECK(byproducts > 20);
  CHECK(level > 50);
  CHECK(chain_floors > (ceilings - byproducts) / 2);
  CHECK(exact > 20);
  CHECK(leaving > 5);
  MESSAGE(checked << " re-saves, " << floors << " with a floor (" << view_floors
                  << " of views), " << ruled_out << " ruled out; " << ceilings << " with a ceiling ("
                  << byproducts << " of by-products), " << level
                  << " at the plan's own peak; " << chain_floors << " chain floors, " << exact
                  << " exact, " << leaving << " below the ceiling");
}

// A region whose simulation is shared with a copy (RegionSim) gives the same
// floors as its own simulation would.
TEST_CASE("property: a re-save's floor reads a simulation shared with a copy") {
  std::mt19937_64 rng(9);
  size_t compared = 0, floors = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const Graph graph = testing::Copies(testing::RandomStep(seed, 3), 4);
    CAPTURE(seed);
    SimContext context(graph);
    RegionalMemory memory(context, SaveAll(graph), SimOptions{});
    // A region that is a copy of an earlier one, and that one.
    size_t copy = 0;
    while (copy < memory.size() && memory.part(copy).shape.first_of_shape == copy) ++copy;
    REQUIRE(copy < memory.size());
    const size_t source = memory.part(copy).shape.first_of_shape;
    const std::vector<TensorId>& from = memory.part(source).candidates;
    const std::vector<TensorId>& to = memory.part(copy).candidates;
    REQUIRE(from.size() == to.size());
    // The same random plan in both; the copy's trial is then answered by
    // the source's, and applying it leaves the copy a shared simulation.
    SaveSet keep = SaveAll(graph);
    for (size_t i = 0; i < from.size(); ++i) keep[from[i]] = keep[to[i]] = rng() % 2;
    RegionalMemory::Trial trial;
    memory.Try(source, keep, &trial);
    memory.Apply(&trial);
    memory.Try(copy, keep, &trial);
    memory.Apply(&trial);
    CHECK(memory.shared_trials() == 1);
    ResaveBounds shared(context);
    shared.Prepare(memory, copy);
    RegionalMemory fresh(context, keep, SimOptions{});
    ResaveBounds own(context);
    own.Prepare(fresh, copy);
    for (TensorId t : to) {
      if (keep[t]) continue;
      CAPTURE(graph.tensors[t].name);
      CHECK(shared.Floor(t) == own.Floor(t));
      ++compared;
      floors += own.Floor(t) != std::numeric_limits<int64_t>::min();
    }
  }
  CHECK(compared > 30);
  CHECK(floors > compared / 4);
}

TEST_CASE("property: the cleanup re-saves what a plain re-simulating cleanup does") {
  std::mt19937_64 rng(5);
  size_t resaved = 0, pended = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    const Graph graph = testing::Copies(testing::RandomStep(seed, 3), 1 + seed % 3);
    CAPTURE(seed);
    SimContext context(graph);
    for (int plan = 0; plan < 4; ++plan) {
      SaveSet keep = SaveAll(graph);
      for (TensorId t : context.candidates) keep[t] = rng() % 3 == 0;
      const int64_t dropped = Simulate(context, keep, SimOptions{}).peak_bytes;
      const int64_t all = Simulate(context, SaveAll(graph), SimOptions{}).peak_bytes;
      // Budgets from the plan's own peak up to the save-all peak.
      for (int64_t budget : {dropped, (dropped + all) / 2, all}) {
        CleanupResult cleaned = ResaveDropped(context, keep, budget, 0);
        CHECK(cleaned.keep == testing::PlainCleanup(graph, keep, budget));
        CleanupOptions options;
        options.verify = true;
        CleanupResult verified;
        CHECK_NOTHROW(verified = ResaveDropped(context, keep, budget, 0, options));
        CHECK(verified.keep == cleaned.keep);
        options = {};
        options.prune = false;
        const CleanupResult simulated = ResaveDropped(context, keep, budget, 0, options);
        CHECK(simulated.keep == cleaned.keep);
        CHECK(simulated.scored == 0);
        CHECK(simulated.pended == 0);
        resaved += cleaned.resaved.size();
        pended += cleaned.pended;
      }
    }
  }
  CHECK(resaved > 200);
  CHECK(pended > 20);
  MESSAGE(resaved << " re-saves, " << pended << " applied without simulating");
}

TEST_CASE("property: the cleanup's stop sees fitting plans that grow to its own") {
  // CleanupOptions::stop is called before the first re-save and after each
  // one applied, with plans that fit and that the cleanup's plan saves all
  // of; stopping after the n-th call leaves the plan it was called with.
  std::mt19937_64 rng(6);
  size_t calls_seen = 0, stopped = 0;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    const Graph graph = testing::Copies(testing::RandomStep(seed, 3), 1 + seed % 3);
    CAPTURE(seed);
    SimContext context(graph);
    SaveSet keep = SaveAll(graph);
    for (TensorId t : context.candidates) keep[t] = rng() % 3 == 0;
    const int64_t dropped = Simulate(context, keep, SimOptions{}).peak_bytes;
    const int64_t all = Simulate(context, SaveAll(graph), SimOptions{}).peak_bytes;
    const int64_t budget = (dropped + all) / 2;
    std::vector<SaveSet> seen;
    CleanupOptions options;
    options.stop = [&](const SaveSet& plan) {
      seen.push_back(plan);
      return false;
    };
    const CleanupResult whole = ResaveDropped(context, keep, budget, 0, options);
    CHECK_FALSE(whole.stopped);
    REQUIRE(seen.size() == whole.resaved.size() + 1);  // before the first, after each
    CHECK(seen.front() == keep);
    for (size_t i = 0; i < seen.size(); ++i) {
      CHECK(Simulate(context, seen[i], SimOptions{}).peak_bytes <= budget);
      for (TensorId t : context.candidates) {
        if (seen[i][t]) CHECK(whole.keep[t]);
        if (i > 0 && seen[i - 1][t]) CHECK(seen[i][t]);
      }
    }
    calls_seen += seen.size();
    // Stopped at the middle call: the plan it was called with.
    const size_t stop_at = seen.size() / 2;
    size_t calls = 0;
    options.stop = [&](const SaveSet&) { return calls++ == stop_at; };
    const CleanupResult part = ResaveDropped(context, keep, budget, 0, options);
    CHECK(part.stopped);
    CHECK(part.keep == seen[stop_at]);
    CHECK(part.resaved.size() == stop_at);
    ++stopped;
  }
  MESSAGE(calls_seen << " plans seen by stop");
  CHECK(calls_seen > 50);
}

TEST_CASE("property: every re-save the cleanup answers without simulating simulates as judged") {
  // The drop corpus (random steps, small transformers whose views share a
  // root, concatenated steps) under random plans: verify mode simulates each
  // floor, ceiling and DropDelta score and throws on a verdict or cost it
  // does not bear out; the plan is the plain cleanup's.
  size_t graphs = 0, scored = 0, pended = 0, patched = 0, caught_up = 0;
  testing::ForEachDropCorpusGraph([&](const Graph& graph, uint64_t seed, const std::string& name) {
    if (seed % 4 != 0 && name.rfind("transformer", 0) != 0) return;  // a quarter of the random ones
    ++graphs;
    CAPTURE(name);
    const SimContext context(graph);
    std::mt19937_64 rng(seed);
    const int64_t all = Simulate(context, SaveAll(graph), SimOptions{}).peak_bytes;
    for (int plan = 0; plan < 3; ++plan) {
      SaveSet keep = SaveAll(graph);
      for (TensorId t : context.candidates) keep[t] = rng() % 3 == 0;
      const int64_t dropped = Simulate(context, keep, SimOptions{}).peak_bytes;
      for (int64_t budget : {dropped, (dropped + all) / 2}) {
        CleanupOptions options;
        options.verify = true;
        CleanupResult verified;
        CHECK_NOTHROW(verified = ResaveDropped(context, keep, budget, 0, options));
        CHECK(verified.keep == testing::PlainCleanup(graph, keep, budget));
        scored += verified.scored;
        pended += verified.pended;
        patched += verified.patched;
        caught_up += verified.caught_up_by_patches;
      }
    }
  });
  MESSAGE(graphs << " graphs, " << scored << " re-saves scored by DropDelta, " << pended
                 << " applied without simulating (" << caught_up
                 << " caught up by patches), " << patched << " from DropDelta's patch");
  CHECK(graphs > 30);
  CHECK(scored > 50);
  CHECK(pended > 50);
  CHECK(patched > 50);
  // Verify mode compared the simulation caught up by patches with a
  // simulation of the plan, field by field.
  CHECK(caught_up > 50);
}

}  // namespace
}  // namespace ckptplan
