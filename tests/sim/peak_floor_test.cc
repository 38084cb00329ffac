// PeakFloor: floors under plans' peaks worked out by hand on the tiny chain,
// and checked against simulations of random plans of the single-drop corpus.
#include "ckptplan/sim/peak_floor.h"

#include <doctest/doctest.h>

#include <limits>
#include <random>
#include <vector>
#include <string>

#include "ckptplan/sim/simulator.h"
#include "test_graphs.h"

namespace ckptplan {
namespace {

using testing::GraphBuilder;
using testing::Id;
constexpr Phase F = Phase::kForward, B = Phase::kBackward;

// The tiny chain (as tests/tiny_graph.h's kTinyChain): x -f1-> a -f2-> b
// -f3-> c -s-> l, then s_bwd, f3_bwd, f2_bwd, f1_bwd. Node ids: f1 0, f2 1,
// f3 2, s 3, s_bwd 4, f3_bwd 5, f2_bwd 6, f1_bwd 7.
Graph TinyChain() {
  GraphBuilder b;
  b.Tensor("x", 10, TensorKind::kInput).Tensor("a", 100).Tensor("b", 100).Tensor("c", 100);
  b.Tensor("l", 4).Tensor("dc", 100).Tensor("db", 100).Tensor("da", 100);
  b.Node("f1", "relu", F, {"x"}, {"a"}, 5).Node("f2", "relu", F, {"a"}, {"b"}, 1);
  b.Node("f3", "relu", F, {"b"}, {"c"}, 1).Node("s", "sum", F, {"c"}, {"l"}, 1);
  b.Node("s_bwd", "sum_bwd", B, {"l"}, {"dc"}, 1).Node("f3_bwd", "relu_bwd", B, {"dc", "c"}, {"db"}, 1);
  b.Node("f2_bwd", "relu_bwd", B, {"db", "b"}, {"da"}, 1).Node("f1_bwd", "relu_bwd", B, {"da", "a"}, {}, 1);
  return b.Build();
}

TEST_CASE("peak floor: the tiny chain by hand") {
  // x (10 bytes, resident) -f1-> a -f2-> b -f3-> c -s-> l (4), then s_bwd,
  // f3_bwd, f2_bwd, f1_bwd; a, b, c, dc, db, da 100 bytes.
  // Save-all peaks at f3_bwd (node 5): a, b, c, dc, db live, plus x:
  // 500 + 10 = 510. Forward roots live there: a (last forward read f2),
  // b (f3), c (s), none read by a forward node at or after f3_bwd; their
  // candidates read by a non-forward node at or after it: a (f1_bwd), b
  // (f2_bwd), c (f3_bwd). l died after s_bwd.
  Graph graph = TinyChain();
  const TensorId a = Id(graph, "a"), b = Id(graph, "b"), c = Id(graph, "c"), l = Id(graph, "l");
  const SimContext context(graph);
  const PeakFloor floor(context, Simulate(context, SaveAll(graph), {}));
  CHECK(floor.Of(SaveAll(graph)) == 510);
  SaveSet keep = SaveAll(graph);
  keep[a] = 0;
  // a freed there: 510 - 100 = 410, the plan's peak (f1 re-runs before
  // f1_bwd, when only da and the copy of a live: 210).
  CHECK(floor.Of(keep) == 410);
  CHECK(Simulate(context, keep, {}).peak_bytes == 410);
  keep = SaveAll(graph);
  keep[c] = 0;
  // c freed there, but f3_bwd (node 5) is c's first and last non-forward
  // reader: f3 re-runs before it and the copy of c lives there, 100 back:
  // 510 - 100 + 100 = 510, the plan's peak.
  CHECK(floor.Of(keep) == 510);
  CHECK(Simulate(context, keep, {}).peak_bytes == 510);
  keep = SaveAll(graph);
  keep[l] = 0;
  // l is not live at f3_bwd: 510.
  CHECK(floor.Of(keep) == 510);
  for (TensorId t : {a, b, c, l}) keep[t] = 0;
  // a, b and c freed, c's copy back: 510 - 300 + 100 = 410. And c's chain,
  // re-run before f3_bwd, re-runs f3 and, b and a being dropped, f2 and f1:
  // the copies of b and a, read only after f3_bwd (by f2_bwd and f1_bwd),
  // live there too: 410 + 200 = 510, the plan's peak (copies of a, b, c,
  // with dc and db). (l's last reader, s_bwd, comes before f3_bwd.)
  CHECK(floor.Of(keep) == 510);
  CHECK(Simulate(context, keep, {}).peak_bytes == 510);
}

// Calls visit(context, options, floor) for each graph of the single-drop
// corpus (random graphs, small transformers with views and microbatches,
// concatenated steps, implicit gradients), at a reserve, with the floor
// read off its save-all simulation.
template <typename Visit>
void ForEachCorpusFloor(Visit visit) {
  testing::ForEachDropCorpusGraph([&](const Graph& graph, uint64_t seed, const std::string& what) {
    CAPTURE(what);
    SimOptions options;
    options.reserve_bytes = static_cast<int64_t>(seed % 3) * 50;
    const SimContext context(graph);
    const PeakFloor floor(context, Simulate(context, SaveAll(graph), options));
    visit(context, options, floor);
  });
}

TEST_CASE("peak floor: a copy a chain makes early, read after the step through a view") {
  // in -fr-> r (100, read by the backward only through its view v), v =
  // view(r), r -fg-> w (50), w -fs-> l; backward s_bwd (reads l), g_bwd
  // (reads w, makes dr 100), v_bwd (reads v). Save-all peaks at g_bwd:
  // in 10 + r 100 + w 50 + dw 50 + dr 100 = 310 (l died after s_bwd).
  GraphBuilder b;
  b.Tensor("in", 10, TensorKind::kInput).Tensor("r", 100).Tensor("v", 100, TensorKind::kActivation, "r");
  b.Tensor("w", 50).Tensor("l", 4).Tensor("dw", 50).Tensor("dr", 100).Tensor("dx", 10);
  b.Node("fr", "relu", F, {"in"}, {"r"}, 5).Node("fv", "view", F, {"r"}, {"v"}, 0);
  b.Node("fg", "relu", F, {"r"}, {"w"}, 1).Node("fs", "sum", F, {"w"}, {"l"}, 1);
  b.Node("s_bwd", "sum_bwd", B, {"l"}, {"dw"}, 1);
  b.Node("g_bwd", "relu_bwd", B, {"dw", "w"}, {"dr"}, 1);
  b.Node("v_bwd", "view_bwd", B, {"dr", "v"}, {"dx"}, 1);
  Graph graph = b.Build();
  const TensorId v = Id(graph, "v"), w = Id(graph, "w");
  const SimContext context(graph);
  const SimResult save_all = Simulate(context, SaveAll(graph), {});
  REQUIRE(save_all.peak_bytes == 310);
  const PeakFloor floor(context, save_all);
  SaveSet keep = SaveAll(graph);
  keep[w] = 0;
  // w dropped: g_bwd's chain re-runs fg and, r being no candidate, fr: r's
  // copy is read by fg's re-run alone (v, saved, reads r's original), so
  // only w's copy is back: 310 - 50 + 50 = 310, the plan's peak.
  CHECK(floor.Of(keep) == 310);
  CHECK(Simulate(context, keep, {}).peak_bytes == 310);
  keep[v] = 0;
  // v dropped too: r's original goes after fg (-100), but v_bwd reads v
  // through r's copy, made before g_bwd: it lives there (+100). 310.
  int64_t copies = 0;
  CHECK(floor.Of(keep, &copies) == 310);
  CHECK(copies == 150);
  CHECK(Simulate(context, keep, {}).peak_bytes == 310);
}

TEST_CASE("peak floor: never above a simulated peak") {
  std::mt19937_64 rng(27);
  size_t plans = 0, tight = 0;
  ForEachCorpusFloor([&](const SimContext& context, const SimOptions& options,
                         const PeakFloor& floor) {
    for (int round = 0; round < 20; ++round) {
      SaveSet keep = SaveAll(context.graph);
      const double drop = (round % 5) / 4.0;  // 0 to 1 of the droppable candidates
      for (TensorId t : context.droppable) keep[t] = std::uniform_real_distribution<>(0, 1)(rng) >= drop;
      const int64_t peak = Simulate(context, keep, options).peak_bytes;
      CHECK(floor.Of(keep) <= peak);
      tight += floor.Of(keep) == peak;
      ++plans;
    }
  });
  MESSAGE(plans << " plans, " << tight << " floors equal to the peak");
  CHECK(plans > 200);
}

TEST_CASE("peak floor: the least cost of a fitting plan, on the tiny chain by hand") {
  // Node costs: f1 5, f2 1, f3 1. Save-all peaks at f3_bwd at 510 (above).
  Graph graph = TinyChain();
  const TensorId a = Id(graph, "a"), b = Id(graph, "b"), c = Id(graph, "c");
  const SimContext context(graph);
  const PeakFloor floor(context, Simulate(context, SaveAll(graph), {}));
  SaveSet keep = SaveAll(graph);
  // Nothing dropped: nothing re-runs.
  CHECK(floor.CostOfFitting(keep, 510) == 0);
  keep[a] = 0;
  // a dropped re-runs f1 (its input x is an input): 5. Its floor is 410
  // (above), so at a budget of 410 nothing may be saved again: saving a
  // keeps its 100 bytes at f3_bwd (its reader f1_bwd comes after).
  CHECK(floor.CostOfFitting(keep, 410) == 5);
  // At 510 a fits back whole: 0. At 460 half of its bytes fit: 5 - 2.5.
  CHECK(floor.CostOfFitting(keep, 510) == 0);
  CHECK(floor.CostOfFitting(keep, 460) == 2.5);
  keep = SaveAll(graph);
  keep[b] = 0;
  keep[c] = 0;
  // b re-runs f2 and c re-runs f3 (their inputs a and b are candidates,
  // which a plan may save): 1 + 1 = 2. The floor: 510 - 100 (b) - 100 (c)
  // + 100 (c's copy, f3_bwd its only reader) + 100 (b's copy: c's chain
  // re-runs f2 before f3_bwd, and f2_bwd reads it after) = 510, of which
  // 200 copies. At a budget of 410 the capacity is 410 - (510 - 200) = 100
  // (every copy may go): b (id before c, both 1 a 100 bytes) is saved, and
  // c stays: 2 - 1 = 1.
  // The least a fitting plan costs is 1 indeed: keep a and c, drop b
  // (peak 410: a, c, dc, db and x at f3_bwd); dropping both peaks at 510.
  CHECK(floor.CostOfFitting(keep, 410) == 1);
  SaveSet fitting = SaveAll(graph);
  fitting[b] = 0;
  const SimResult sim = Simulate(context, fitting, {});
  CHECK(sim.peak_bytes == 410);
  CHECK(sim.recompute_cost == 1);
  // Under the floor of every plan (x and the parameters' 10 bytes and the
  // gradients dc, db live at f3_bwd: 310) nothing fits.
  CHECK(floor.CostOfFitting(keep, 200) == std::numeric_limits<double>::infinity());
}

TEST_CASE("peak floor: no fitting plan that saves more costs less than the cost floor") {
  std::mt19937_64 rng(28);
  size_t pairs = 0, positive = 0, tight = 0;
  ForEachCorpusFloor([&](const SimContext& context, const SimOptions& options,
                         const PeakFloor& floor) {
    for (int round = 0; round < 10; ++round) {
      SaveSet keep = SaveAll(context.graph);
      const double drop = 0.25 + (round % 4) / 4.0;  // 0.25 to 1 of the droppable candidates
      std::uniform_real_distribution<> uniform(0, 1);
      for (TensorId t : context.droppable) keep[t] = uniform(rng) >= drop;
      // Plans that save more: each dropped candidate saved at a chance;
      // the budget is one's peak (so that one fits), and each at most that
      // budget must cost at least the floor.
      std::vector<SimResult> more;
      std::vector<SaveSet> sets;
      for (int i = 0; i < 6; ++i) {
        SaveSet superset = keep;
        const double save = i / 5.0;
        for (TensorId t : context.droppable) superset[t] = superset[t] || uniform(rng) < save;
        more.push_back(Simulate(context, superset, options));
        sets.push_back(std::move(superset));
      }
      for (const SimResult& budget_from : more) {
        const int64_t budget = budget_from.peak_bytes;
        const double at_least = floor.CostOfFitting(keep, budget);
        for (const SimResult& plan : more) {
          if (plan.peak_bytes > budget) continue;
          // The floor's shares are divisions: a relative margin and one of
          // the step's cost (as the planner allows).
          CHECK(plan.recompute_cost >= at_least * (1 - 1e-9) - 1e-9 * context.step_cost);
          ++pairs;
          positive += at_least > 0;
          tight += at_least > 0 && plan.recompute_cost <= at_least * (1 + 1e-9);
        }
      }
    }
  });
  MESSAGE(pairs << " fitting plans checked, " << positive << " floors above 0, " << tight
                << " equal to the plan's cost");
  CHECK(pairs > 1000);
  CHECK(positive > 100);
}

TEST_CASE("peak floor: recompute cost floors, by hand and under simulated costs") {
  {
    // The tiny chain: node costs f1 5, f2 1, f3 1. Dropping a, b and c
    // re-runs f1, f2 and f3: 7, the simulation's cost (each chain stops at a
    // candidate or the input x).
    Graph graph = TinyChain();
    const SimContext context(graph);
    SaveSet keep = SaveAll(graph);
    CHECK(RecomputeCostFloor(context, keep) == 0);
    for (const char* name : {"a", "b", "c"}) keep[Id(graph, name)] = 0;
    CHECK(RecomputeCostFloor(context, keep) == 7);
    CHECK(Simulate(context, keep, {}).recompute_cost == 7);
  }
  {
    // A chain through a tensor no plan saves: x -f1-> u -f2-> v, where only v
    // is read by the backward (u is no candidate). Dropping v re-runs f2 and,
    // as u is never saved, f1: 5 + 1 = 6.
    GraphBuilder b;
    b.Tensor("x", 10, TensorKind::kInput).Tensor("u", 100).Tensor("v", 100).Tensor("l", 4);
    b.Tensor("dv", 100);
    b.Node("f1", "relu", F, {"x"}, {"u"}, 5).Node("f2", "relu", F, {"u"}, {"v"}, 1);
    b.Node("s", "sum", F, {"v"}, {"l"}, 1).Node("s_bwd", "sum_bwd", B, {"l"}, {"dv"}, 1);
    b.Node("f2_bwd", "relu_bwd", B, {"dv", "v"}, {}, 1);
    Graph graph = b.Build();
    const SimContext context(graph);
    SaveSet keep = SaveAll(graph);
    keep[Id(graph, "v")] = 0;
    CHECK(RecomputeCostFloor(context, keep) == 6);
    CHECK(Simulate(context, keep, {}).recompute_cost == 6);
  }
  std::mt19937_64 rng(29);
  size_t plans = 0, equal = 0;
  testing::ForEachDropCorpusGraph([&](const Graph& graph, uint64_t, const std::string& what) {
    CAPTURE(what);
    const SimContext context(graph);
    for (int round = 0; round < 20; ++round) {
      SaveSet keep = SaveAll(graph);
      const double drop = (round % 5) / 4.0;
      for (TensorId t : context.droppable) keep[t] = std::uniform_real_distribution<>(0, 1)(rng) >= drop;
      const double cost = Simulate(context, keep, {}).recompute_cost;
      const double at_least = RecomputeCostFloor(context, keep);
      CHECK(at_least <= cost * (1 + 1e-12));
      equal += at_least == cost;
      ++plans;
    }
  });
  MESSAGE(plans << " plans, " << equal << " cost floors equal to the cost");
  CHECK(plans > 200);
}

}  // namespace
}  // namespace ckptplan
