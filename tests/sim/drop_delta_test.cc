// Differential test: every drop DropDelta scores must score as a simulation
// of the drop does (the range's highest node peak and the recompute cost it
// adds), on random graphs, small transformers and steps of several regions,
// under random plans and random per-node offsets.
#include "ckptplan/sim/drop_delta.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "ckptplan/ir/synth.h"
#include "ckptplan/sim/simulator.h"
#include "test_graphs.h"
#include "ir_graphs.h"

namespace ckptplan {
namespace {

struct Counts {
  size_t scored = 0;  // saved candidates asked about
  size_t known = 0;   // answered without simulating
  size_t long_walks = 0;  // last reads found through the root's readers
  size_t whole_replays = 0;  // drops inside a chain that is re-run whole
  size_t costed_view_reruns = 0, unread_copy_remakes = 0;  // re-saves of those shapes
  size_t moved_view_reruns = 0;  // costed views' nodes among the moved ones
  size_t resaves = 0, resaves_known = 0;  // dropped candidates asked about, answered
};

// The range's highest node peak of `trial`, offsets added.
int64_t RangeHighest(const SimResult& trial, const std::vector<int64_t>* offset) {
  int64_t highest = RangeMax::kEmpty;
  for (size_t n = 0; n < trial.node_peak.size(); ++n) {
    highest = std::max(highest, trial.node_peak[n] + (offset ? (*offset)[n] : 0));
  }
  return highest;
}

// Checks every saved droppable candidate of every region (and of the whole
// step) under `keep`; returns how many DropDelta answered.
void CheckPlan(const SimContext& context, const SaveSet& keep, std::mt19937_64& random,
               const std::string& what, Counts* counts) {
  const Graph& graph = context.graph;
  std::vector<Region> ranges = testing::RegionsAndStep(context);
  DropDelta delta(context);
  for (const Region& range : ranges) {
    SimOptions options;
    options.record_details = false;
    options.first_node = range.first;
    options.end_node = range.end;
    const SimResult base = Simulate(context, keep, options);
    // Offsets, as RegionalMemory's per-node ones: any values must do.
    std::vector<int64_t> offset(range.end - range.first);
    for (int64_t& value : offset) value = static_cast<int64_t>(random() % 200) - 100;
    const bool offsets = random() % 2 == 0;
    delta.Index(base, keep, range.first, range.end, offsets ? &offset : nullptr);
    // Flipping `t` (a drop of a saved candidate, a re-save of a dropped
    // one) scores as its simulation does.
    auto check = [&](TensorId t, bool resave, size_t* asked, size_t* answered) {
      const NodeId p = graph.tensors[t].producer;
      if (keep[t] == resave || p < range.first || p >= range.end) return;
      ++*asked;
      const DropDelta::Result scored = resave ? delta.ScoreResave(t) : delta.Score(t);
      if (!scored.known) return;
      ++*answered;
      SaveSet flipped = keep;
      flipped[t] ^= 1;
      const SimResult trial = Simulate(context, flipped, options);
      CAPTURE(what);
      CAPTURE(graph.tensors[t].name);
      CAPTURE(resave);
      CAPTURE(range.first);
      CAPTURE(range.end);
      CHECK(scored.region_max == RangeHighest(trial, offsets ? &offset : nullptr));
      CHECK(scored.added_cost == trial.recompute_cost - base.recompute_cost);
    };
    for (TensorId t : context.droppable) check(t, false, &counts->scored, &counts->known);
    for (TensorId t : context.candidates) {
      check(t, true, &counts->resaves, &counts->resaves_known);
    }
  }
  counts->long_walks += delta.long_walks();
  counts->whole_replays += delta.whole_replays();
  counts->costed_view_reruns += delta.costed_view_reruns();
  counts->unread_copy_remakes += delta.unread_copy_remakes();
  counts->moved_view_reruns += delta.moved_view_reruns();
}

// Save-all and random plans of `graph` (testing::ForEachRandomPlan).
void CheckGraph(const Graph& graph, uint64_t seed, const std::string& what, Counts* counts) {
  const SimContext context(graph);
  testing::ForEachRandomPlan(context, seed, [&](const SaveSet& keep, std::mt19937_64& random) {
    CheckPlan(context, keep, random, what, counts);
  });
}

TEST_CASE("drops DropDelta scores score as their simulations do") {
  Counts counts;
  testing::ForEachDropCorpusGraph([&](const Graph& graph, uint64_t seed, const std::string& name) {
    CheckGraph(graph, seed, name, &counts);
  });
  MESSAGE("DropDelta answered " << counts.known << " of " << counts.scored << " drops ("
                                << counts.whole_replays << " re-running the chain they run "
                                << "inside whole), " << counts.resaves_known << " of "
                                << counts.resaves << " re-saves (" << counts.costed_view_reruns
                                << " re-running a costed view, " << counts.moved_view_reruns
                                << " moving one)");
  // The corpus must exercise the shortcut, and not only on trivial drops;
  // also drops whose steps do not stay one run inside the chain they run in.
  CHECK(counts.known > 2000);
  CHECK(counts.whole_replays > 0);
  CHECK(counts.costed_view_reruns > 0);
  CHECK(counts.moved_view_reruns > 0);
  CHECK(counts.known * 4 > counts.scored);
  CHECK(counts.resaves_known > 1000);
  CHECK(counts.resaves_known * 4 > counts.resaves);
}

TEST_CASE("drops whose storages' last kept reads lie far back score as their simulations do") {
  // Deep, narrow random DAGs: inputs from many layers back make storages
  // whose earlier reads lie more steps back than LastKeptRead walks one by
  // one, so it reads its per-root index of the steps.
  Counts counts;
  for (uint64_t seed = 500; seed < 504; ++seed) {
    const Graph graph = testing::DeepRandomGraph(seed);
    const SimContext context(graph);
    std::mt19937_64 random(seed);
    for (unsigned share : {0u, 50u}) {
      SaveSet keep = SaveAll(graph);
      for (TensorId t : context.droppable) keep[t] = random() % 100 >= share;
      CheckPlan(context, keep, random, "deep random " + std::to_string(seed), &counts);
    }
  }
  MESSAGE("DropDelta answered " << counts.known << " of " << counts.scored << " drops, "
                                << counts.long_walks << " last reads through the root's readers");
  CHECK(counts.long_walks > 0);
  CHECK(counts.known * 2 > counts.scored);
}

// Re-saving dropped `resaved` of whole-step plan `keep`: DropDelta answers,
// and as the simulation does, with `highest` and `added_cost` (worked out
// by hand by the caller).
void CheckResave(const Graph& graph, const SaveSet& keep, TensorId resaved, int64_t highest,
                 double added_cost) {
  const SimContext context(graph);
  SimOptions options;
  options.record_details = false;
  const SimResult base = Simulate(context, keep, options);
  DropDelta delta(context);
  delta.Index(base, keep, 0, static_cast<NodeId>(graph.nodes.size()), nullptr);
  const DropDelta::Result scored = delta.ScoreResave(resaved);
  REQUIRE(scored.known);
  SaveSet flipped = keep;
  flipped[resaved] = 1;
  const SimResult trial = Simulate(context, flipped, options);
  CHECK(scored.region_max == RangeHighest(trial, nullptr));
  CHECK(scored.region_max == highest);
  CHECK(scored.added_cost == trial.recompute_cost - base.recompute_cost);
  CHECK(scored.added_cost == added_cost);
}

TEST_CASE("a re-save that moves a re-run node to a later reader scores its new step") {
  // m makes o and s; v reads o. With o (no candidate), s and t dropped, the
  // first backward read of t (v_bwd) re-runs m and v; m_bwd then reads the
  // copy of s that chain made. Re-saving t takes the chain away, and m
  // re-runs alone right before m_bwd, with its workspace: the new step is
  // the peak, which no old step that stays shows.
  const Phase kF = Phase::kForward, kB = Phase::kBackward;
  const Graph graph = testing::GraphBuilder()
                          .Tensor("x", 10, TensorKind::kInput)
                          .Tensor("a", 8).Tensor("o", 4).Tensor("s", 2).Tensor("t", 4)
                          .Tensor("l", 1).Tensor("dt", 4).Tensor("dd", 4).Tensor("da", 8)
                          .Node("fa", "relu", kF, {"x"}, {"a"}, 1)
                          .Node("m", "ln", kF, {"a"}, {"o", "s"}, 1, /*workspace_bytes=*/1000)
                          .Node("v", "relu", kF, {"o"}, {"t"}, 1)
                          .Node("loss", "sum", kF, {"t"}, {"l"}, 1)
                          .Node("loss_bwd", "sum_bwd", kB, {"l"}, {"dt"}, 1)
                          .Node("v_bwd", "relu_bwd", kB, {"dt", "t"}, {"dd"}, 1)
                          .Node("m_bwd", "ln_bwd", kB, {"dd", "s", "a"}, {"da"}, 1)
                          .Node("fa_bwd", "relu_bwd", kB, {"da", "a"}, {}, 1)
                          .Build();
  SaveSet keep = SaveAll(graph);
  const TensorId s = testing::Id(graph, "s"), t = testing::Id(graph, "t");
  keep[s] = keep[t] = 0;
  // By hand, at m's new step (right before m_bwd): x 10 (an input: all
  // step) + a 8 (saved: read by m, m_bwd, fa_bwd) + dd 4 (read by m_bwd) +
  // the copies m makes, o 4 and s 2, + m's workspace 1000 = 1028. t (saved
  // now) died after v_bwd. The highest old step that stays is m's forward
  // step: x 10 + a 8 + o 4 + s 2 + 1000 = 1024.
  // m still runs; v's cost (1) is saved.
  CheckResave(graph, keep, t, 10 + 8 + 4 + 4 + 2 + 1000, -1);
}

TEST_CASE("a re-save whose moved nodes re-run as several chains in one group scores each step") {
  // v reads p (from m1) and q (from m2); r reads p, q and z. With p, q, z
  // and t dropped, v_bwd re-runs m1, m2 and v for t, and r needs only a
  // chain for z (fz). Re-saving t takes that chain away: at r, p, q and z
  // are missing, and each starts a chain before r in r's input order.
  const Phase kF = Phase::kForward, kB = Phase::kBackward;
  auto expect = [&](const std::vector<std::string>& r_inputs, int64_t expected) {
    CAPTURE(expected);
    const Graph graph = testing::GraphBuilder()
                            .Tensor("x", 10, TensorKind::kInput)
                            .Tensor("a", 8).Tensor("p", 100).Tensor("q", 200).Tensor("z", 300)
                            .Tensor("t", 4).Tensor("l", 1).Tensor("dt", 4).Tensor("dd", 4)
                            .Tensor("dpq", 8)
                            .Node("fa", "relu", kF, {"x"}, {"a"}, 1)
                            .Node("m1", "mm", kF, {"a"}, {"p"}, 1, /*workspace_bytes=*/1100)
                            .Node("m2", "mm", kF, {"a"}, {"q"}, 1, /*workspace_bytes=*/700)
                            .Node("fz", "mm", kF, {"a"}, {"z"}, 1)
                            .Node("v", "add", kF, {"p", "q"}, {"t"}, 1)
                            .Node("loss", "sum", kF, {"t"}, {"l"}, 1)
                            .Node("loss_bwd", "sum_bwd", kB, {"l"}, {"dt"}, 1)
                            .Node("v_bwd", "add_bwd", kB, {"dt", "t"}, {"dd"}, 1)
                            .Node("r", "r_bwd", kB, r_inputs, {"dpq"}, 1)
                            .Node("fa_bwd", "relu_bwd", kB, {"dpq", "a"}, {}, 1)
                            .Build();
    SaveSet keep = SaveAll(graph);
    for (const char* name : {"p", "q", "z", "t"}) keep[testing::Id(graph, name)] = 0;
    const TensorId t = testing::Id(graph, "t");
    // m1 and m2 still run; v's cost (1) is saved.
    CheckResave(graph, keep, t, expected, -1);
  };
  // By hand (t, saved now, died after v_bwd; the highest old step that
  // stays is forward m1: x 10 + a 8 + p 100 + workspace 1100 = 1218).
  // r reads p, z, q: m1, then fz (the old chain), then m2:
  //   m1: x 10 + a 8 + dd 4 + p 100 + workspace 1100 = 1222;
  //   fz: x 10 + a 8 + dd 4 + p 100 + z 300 = 422;
  //   m2: x 10 + a 8 + dd 4 + p 100 + z 300 + q 200 + workspace 700 = 1322.
  // Placing m2 before fz would give 1222.
  expect({"dd", "p", "z", "q"}, 10 + 8 + 4 + 100 + 300 + 200 + 700);
  // r reads p, q, z: m1 and m2 at one place, then fz:
  //   m1: 1222 as above; m2: x 10 + a 8 + dd 4 + p 100 + q 200 + 700 = 1022;
  //   fz: x 10 + a 8 + dd 4 + p 100 + q 200 + z 300 = 622.
  // Numbering m2's step from m1's key would count q at m1: 1422.
  expect({"dd", "p", "q", "z"}, 10 + 8 + 4 + 100 + 1100);
}

TEST_CASE("a re-save whose moved node re-runs inside a later chain scores its step there") {
  // v_bwd re-runs m and v for t; n2_bwd's chain for w re-runs nu and n2,
  // and n2 reads the copy of p that m made. Re-saving t takes the first
  // chain away: replayed depth first, the chain for w re-runs nu (for u),
  // then m (for p, which is missing now), then n2.
  const Phase kF = Phase::kForward, kB = Phase::kBackward;
  const Graph graph = testing::GraphBuilder()
                          .Tensor("x", 10, TensorKind::kInput)
                          .Tensor("a", 8).Tensor("p", 100).Tensor("u", 50).Tensor("t", 4)
                          .Tensor("w", 30).Tensor("l", 1).Tensor("dl", 4).Tensor("dd", 4)
                          .Tensor("dw", 4)
                          .Node("fa", "relu", kF, {"x"}, {"a"}, 1)
                          .Node("m", "mm", kF, {"a"}, {"p"}, 1, /*workspace_bytes=*/1000)
                          .Node("nu", "mm", kF, {"a"}, {"u"}, 1)
                          .Node("v", "relu", kF, {"p"}, {"t"}, 1)
                          .Node("n2", "add", kF, {"u", "p"}, {"w"}, 1)
                          .Node("loss", "sum", kF, {"t", "w"}, {"l"}, 1)
                          .Node("loss_bwd", "sum_bwd", kB, {"l"}, {"dl"}, 1)
                          .Node("v_bwd", "relu_bwd", kB, {"dl", "t"}, {"dd"}, 1)
                          .Node("n2_bwd", "add_bwd", kB, {"dd", "w"}, {"dw"}, 1)
                          .Node("fa_bwd", "relu_bwd", kB, {"dw", "a"}, {}, 1)
                          .Build();
  SaveSet keep = SaveAll(graph);
  const TensorId t = testing::Id(graph, "t");
  keep[t] = keep[testing::Id(graph, "w")] = 0;
  // By hand, at m's new step, between nu and n2 (t, saved now, died after
  // v_bwd): x 10 + a 8 + dd 4 + u 50 + p 100 + workspace 1000 = 1172; the
  // highest old step that stays, forward m, is x 10 + a 8 + p 100 + 1000 =
  // 1118. Placing m before nu would give 1122.
  // m still runs; v's cost (1) is saved.
  CheckResave(graph, keep, t, 10 + 8 + 4 + 50 + 100 + 1000, -1);
}

TEST_CASE("a re-save whose run is inside a longer chain that reads what the run made scores it") {
  // g_bwd's chain for y runs m, h, c and g, depth first (g reads t and q,
  // in that order; h and c read p). t's run is m and h, but c, later in the
  // same chain, reads the copy of p that m made. Re-saving t: the chain,
  // replayed depth first, skips h (t is saved) and re-runs m for p right
  // before c.
  const Phase kF = Phase::kForward, kB = Phase::kBackward;
  const Graph graph = testing::GraphBuilder()
                          .Tensor("x", 10, TensorKind::kInput)
                          .Tensor("a", 8).Tensor("p", 100).Tensor("t", 4).Tensor("q", 20)
                          .Tensor("y", 30).Tensor("l", 1).Tensor("dl", 4).Tensor("dy", 4)
                          .Tensor("dp", 4)
                          .Node("fa", "relu", kF, {"x"}, {"a"}, 1)
                          .Node("m", "mm", kF, {"a"}, {"p"}, 1, /*workspace_bytes=*/1000)
                          .Node("h", "mul", kF, {"p"}, {"t"}, 1)
                          .Node("c", "pow", kF, {"p"}, {"q"}, 1)
                          .Node("g", "mul", kF, {"t", "q"}, {"y"}, 1)
                          .Node("loss", "sum", kF, {"y"}, {"l"}, 1)
                          .Node("loss_bwd", "sum_bwd", kB, {"l"}, {"dl"}, 1)
                          .Node("g_bwd", "mul_bwd", kB, {"dl", "y"}, {"dy"}, 1)
                          .Node("h_bwd", "mul_bwd", kB, {"dy", "t"}, {"dp"}, 1)
                          .Node("fa_bwd", "relu_bwd", kB, {"dp", "a"}, {}, 1)
                          .Build();
  SaveSet keep = SaveAll(graph);
  const TensorId t = testing::Id(graph, "t");
  keep[t] = keep[testing::Id(graph, "y")] = 0;
  // By hand, at m's step in the replayed chain (before c): x 10 (an input:
  // all step) + a 8 (saved) + dl 4 (read by g_bwd) + t 4 (saved now: its
  // original lives to h_bwd) + p's copy 100 + workspace 1000 = 1126. Before
  // the re-save that step was 1122 (t's original had died after g); the
  // highest old step that stays, forward m, is 10 + 8 + 100 + 1000 = 1118.
  // m still runs; h's cost (1) is saved.
  CheckResave(graph, keep, t, 10 + 8 + 4 + 4 + 100 + 1000, -1);
}

TEST_CASE("a re-save of a view whose root's copy other views read later moves the copy's maker") {
  // t and k view r. With both dropped, bt's chain runs m and vt, making r's
  // copy; bk's chain runs vk on that copy, and bt2 reads t (the copy) last.
  // Re-saving t: bt and bt2 read r's original, and m re-runs for the copy
  // in bk's chain, before vk; the copy then dies at bk.
  const Phase kF = Phase::kForward, kB = Phase::kBackward;
  const Graph graph = testing::GraphBuilder()
                          .Tensor("x", 10, TensorKind::kInput)
                          .Tensor("a", 8).Tensor("r", 100)
                          .Tensor("t", 100, TensorKind::kActivation, "r")
                          .Tensor("k", 100, TensorKind::kActivation, "r")
                          .Tensor("y", 4).Tensor("l", 1).Tensor("dl", 4).Tensor("dt", 40)
                          .Tensor("dk", 4).Tensor("dt2", 4)
                          .Node("fa", "relu", kF, {"x"}, {"a"}, 1)
                          .Node("m", "mm", kF, {"a"}, {"r"}, 1, /*workspace_bytes=*/1000)
                          .Node("vt", "view", kF, {"r"}, {"t"}, 0)
                          .Node("vk", "view", kF, {"r"}, {"k"}, 0)
                          .Node("g", "mul", kF, {"t", "k"}, {"y"}, 1)
                          .Node("loss", "sum", kF, {"y"}, {"l"}, 1)
                          .Node("loss_bwd", "sum_bwd", kB, {"l"}, {"dl"}, 1)
                          .Node("bt", "mul_bwd", kB, {"dl", "t"}, {"dt"}, 1)
                          .Node("bk", "mul_bwd", kB, {"dt", "k"}, {"dk"}, 1)
                          .Node("bt2", "mul_bwd", kB, {"dk", "t"}, {"dt2"}, 1,
                                /*workspace_bytes=*/1100)
                          .Node("fa_bwd", "relu_bwd", kB, {"dt2", "a"}, {}, 1)
                          .Build();
  SaveSet keep = SaveAll(graph);
  const TensorId t = testing::Id(graph, "t");
  keep[t] = keep[testing::Id(graph, "k")] = 0;
  // By hand, at m's new step (in bk's group, before vk): x 10 (an input: all
  // step) + a 8 (saved) + r's original 100 (read through t up to bt2) + dt
  // 40 (made by bt, read by bk) + r's copy 100 + workspace 1000 = 1258.
  // bt2's step: x 10 + a 8 + r's original 100 + dk 4 + dt2 4 + workspace
  // 1100 = 1226 (the copy died at bk: 1326 if it lived on to t's reads).
  // The old chain's m step, which goes, was x 10 + a 8 + dl 4 + 100 + 1000
  // = 1122; forward m, which stays, is 10 + 8 + 100 + 1000 = 1118.
  // m still runs; vt's cost (0) is saved.
  CheckResave(graph, keep, t, 10 + 8 + 100 + 40 + 100 + 1000, 0);
}

}  // namespace
}  // namespace ckptplan

namespace ckptplan {
namespace {

TEST_CASE("a re-save whose chain re-made a view a later step reads: the view's node re-runs once") {
  // v views a, at a cost (a traced _reshape_alias has one). With t and v
  // dropped and a saved, bt's chain re-runs vv (making v again) and p; bv
  // then reads that v. Re-saving t takes the chain away, but bv still needs
  // v, so vv re-runs alone before it: the re-save saves p's cost (2), not
  // the chain's (2 + 5). No storage of the chain is read after it (v has
  // none of its own), so only the views it made show this. vv's re-run
  // changes nothing but the cost (it allocates nothing and uses no
  // workspace, and bv's own step, which stays, holds more than it), so the
  // re-save is scored: added cost 5 - (5 + 2) = -2 whatever vv costs.
  const Phase kF = Phase::kForward, kB = Phase::kBackward;
  for (const double view_cost : {5.0, 0.0}) {
    CAPTURE(view_cost);
    const Graph graph = testing::GraphBuilder()
                            .Tensor("x", 10, TensorKind::kInput)
                            .Tensor("a", 100)
                            .Tensor("v", 100, TensorKind::kActivation, "a")
                            .Tensor("t", 50).Tensor("l", 1).Tensor("dl", 4).Tensor("dt", 4)
                            .Tensor("dv", 4)
                            .Node("fa", "relu", kF, {"x"}, {"a"}, 1)
                            .Node("vv", "reshape", kF, {"a"}, {"v"}, view_cost)
                            .Node("p", "relu", kF, {"v"}, {"t"}, 2)
                            .Node("loss", "sum", kF, {"t"}, {"l"}, 1)
                            .Node("loss_bwd", "sum_bwd", kB, {"l"}, {"dl"}, 1)
                            .Node("bt", "relu_bwd", kB, {"dl", "t"}, {"dt"}, 1)
                            .Node("bv", "mul_bwd", kB, {"dt", "v"}, {"dv"}, 1)
                            .Node("fa_bwd", "relu_bwd", kB, {"dv", "a"}, {}, 1)
                            .Build();
    SaveSet keep = SaveAll(graph);
    const TensorId t = testing::Id(graph, "t");
    keep[t] = keep[testing::Id(graph, "v")] = 0;
    const SimContext context(graph);
    SimOptions options;
    options.record_details = false;
    const SimResult base = Simulate(context, keep, options);
    SaveSet flipped = keep;
    flipped[t] = 1;
    const SimResult trial = Simulate(context, flipped, options);
    // By hand: before, bt's chain re-runs vv and p (2); after, vv re-runs
    // for bv.
    CHECK(base.recompute_cost == view_cost + 2);
    CHECK(trial.recompute_cost == view_cost);
    DropDelta delta(context);
    delta.Index(base, keep, 0, static_cast<NodeId>(graph.nodes.size()), nullptr);
    const DropDelta::Result scored = delta.ScoreResave(t);
    REQUIRE(scored.known);
    CHECK(scored.added_cost == -2);  // it read -7 before vv's re-run was counted
    CHECK(scored.added_cost == trial.recompute_cost - base.recompute_cost);
    CHECK(scored.region_max == RangeHighest(trial, nullptr));
  }
}

TEST_CASE("a re-save of a view whose chain's maker re-runs for its other outputs makes the copy again, unread") {
  // testing::LayerNormViewGraph under its plan: re-saving t moves ln, which
  // makes n's copy again, unread.
  const Graph graph = testing::LayerNormViewGraph();
  const SimContext context(graph);
  const SaveSet keep = testing::LayerNormViewPlan(graph);
  std::mt19937_64 random(7);
  Counts counts;
  CheckPlan(context, keep, random, "layer norm", &counts);
  MESSAGE(counts.resaves_known << " of " << counts.resaves << " re-saves answered, "
                               << counts.unread_copy_remakes << " re-making the copy unread");
  CHECK(counts.unread_copy_remakes > 0);
  // t's own re-save, by hand: before, mm_bwd's chain re-runs ln (3) and vt
  // (0); after, ln re-runs alone before ln_bwd (3): no cost added.
  SimOptions options;
  options.record_details = false;
  const SimResult base = Simulate(context, keep, options);
  CHECK(base.recompute_cost == 3);
  DropDelta delta(context);
  delta.Index(base, keep, 0, static_cast<NodeId>(graph.nodes.size()), nullptr);
  const DropDelta::Result scored = delta.ScoreResave(testing::Id(graph, "t"));
  REQUIRE(scored.known);
  CHECK(scored.added_cost == 0);
  CHECK(delta.unread_copy_remakes() == 1);
}

}  // namespace
}  // namespace ckptplan
