// StepFacts on a hand-made graph: groups, storages, non-forward reads (a
// view a backward node takes among them), families and last forward reads,
// worked out by hand; a second fill forgets the first; DropDelta scores the
// same from shared facts as from its own; facts kept between fills of
// corpus graphs' ranges equal fresh ones.
#include "ckptplan/sim/step_facts.h"

#include <doctest/doctest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ckptplan/sim/drop_delta.h"
#include "ckptplan/sim/simulator.h"
#include "test_graphs.h"

namespace ckptplan {
namespace {

using testing::GraphBuilder;
using testing::Id;
constexpr Phase F = Phase::kForward, B = Phase::kBackward;
constexpr uint32_t kNone = StepFacts::kNone;

// x -f-> a, v = view of a, -g-> b -h-> c -s-> l; the backward reads l, b,
// v and, through at (a view of a that backward node t takes), a.
// Candidates: a (read by t), v, b, l. Node ids: f 0, view 1, g 2, h 3, s 4,
// s_bwd 5, h_bwd 6, g_bwd 7, t 8, f_bwd 9.
Graph ViewGraph() {
  GraphBuilder b;
  b.Tensor("x", 10, TensorKind::kInput).Tensor("a", 1000);
  b.Tensor("v", 1000, TensorKind::kActivation, "a");
  b.Tensor("b", 100).Tensor("c", 100).Tensor("l", 4);
  b.Tensor("dc", 100).Tensor("db", 100).Tensor("dv", 1000);
  b.Tensor("at", 1000, TensorKind::kActivation, "a").Tensor("dx", 10);
  b.Node("f", "exp", F, {"x"}, {"a"}, 10).Node("view", "view", F, {"a"}, {"v"}, 0);
  b.Node("g", "exp", F, {"v"}, {"b"}, 10).Node("h", "exp", F, {"b"}, {"c"}, 10);
  b.Node("s", "sum", F, {"c"}, {"l"}, 1).Node("s_bwd", "sum_bwd", B, {"l"}, {"dc"}, 1);
  b.Node("h_bwd", "exp_bwd", B, {"dc", "b"}, {"db"}, 10);
  b.Node("g_bwd", "exp_bwd", B, {"db", "v"}, {"dv"}, 10);
  b.Node("t", "view", B, {"a"}, {"at"}, 0);
  b.Node("f_bwd", "exp_bwd", B, {"dv", "at"}, {"dx"}, 10);
  return b.Build();
}

TEST_CASE("step facts: groups, storages, reads and families of a plan with a recompute") {
  const Graph graph = ViewGraph();
  const SimContext context(graph);
  auto id = [&](const char* name) { return Id(graph, name); };
  REQUIRE(context.candidates ==
          std::vector<TensorId>{id("a"), id("v"), id("b"), id("l")});
  SaveSet keep = SaveAll(graph);
  keep[id("b")] = 0;
  const SimResult sim = Simulate(context, keep, SimOptions{});
  // Dropping b re-runs g (its input v is saved) before h_bwd, b's first
  // non-forward reader. Steps: 0 f, 1 view, 2 g, 3 h, 4 s, 5 s_bwd, 6 g
  // (re-run), 7 h_bwd, 8 g_bwd, 9 t, 10 f_bwd.
  REQUIRE(sim.steps.size() == 11);
  REQUIRE(sim.steps[6].recompute);
  StepFacts facts(context);
  facts.Fill(sim, 0, static_cast<NodeId>(graph.nodes.size()));
  // Groups: each node's own step alone, but h_bwd's: steps 6 and 7.
  for (uint32_t s = 0; s < 6; ++s) CHECK(facts.Group(s) == s);
  CHECK(facts.Group(6) == 6);  // g's re-run, in h_bwd's group
  CHECK(facts.Group(7) == 6);
  CHECK(facts.Group(10) == 9);
  CHECK(facts.GroupOf(kNone) == kNoId);
  CHECK(facts.OwnStep(6) == 7);
  CHECK(facts.GroupBegin(6) == 6);
  CHECK(facts.OwnStep(7) == 8);
  CHECK(facts.GroupBegin(7) == 8);
  CHECK(facts.RerunStep(2) == 6);
  CHECK(facts.RerunStep(3) == kNone);
  // Storages: a's original (made at step 0) is read through v and at until
  // f_bwd (step 10); b's original is last read by h (step 3): h_bwd reads
  // b's copy, made at step 6.
  REQUIRE(facts.Original(id("a")) != kNone);
  CHECK(sim.buffers[facts.Original(id("a"))].first_step == 0);
  CHECK(sim.buffers[facts.Original(id("a"))].last_step == 10);
  CHECK(sim.buffers[facts.Original(id("b"))].last_step == 3);
  REQUIRE(facts.Copy(id("b")) != kNone);
  CHECK(sim.buffers[facts.Copy(id("b"))].first_step == 6);
  CHECK(sim.buffers[facts.Copy(id("b"))].last_step == 7);
  CHECK(facts.Copy(id("a")) == kNone);

  facts.FillReads();
  // Non-forward reads: l at 5; v at 6 (the re-run of g) and 8 (g_bwd); b at
  // 7; a at 9 (t), and through at, the view t made at step 9, at 10.
  CHECK(facts.FirstRead(id("l")) == 5);
  CHECK(facts.FirstRead(id("v")) == 6);
  CHECK(facts.LastRead(id("v")) == 8);
  CHECK(facts.LastOwnRead(id("v")) == 8);
  CHECK(facts.RecomputeRead(id("v")));
  CHECK(facts.FirstRead(id("b")) == 7);
  CHECK(facts.LastRead(id("b")) == 7);
  CHECK_FALSE(facts.RecomputeRead(id("b")));
  CHECK(facts.FirstRead(id("a")) == 9);
  CHECK(facts.LastRead(id("a")) == 9);
  CHECK(facts.AliasLastRead(id("a")) == 10);
  CHECK(facts.AliasFirstMade(id("a")) == 9);
  CHECK(facts.LastUse(id("a")) == 10);  // max(9, 10)
  CHECK(facts.LastUse(id("v")) == 8);
  CHECK(facts.FirstRead(id("x")) == kNone);  // read by f only, a forward step
  CHECK(facts.FirstRead(id("c")) == kNone);
  // No root a candidate shares has a tensor that a non-forward step reads
  // and that neither a forward node made nor views one (dc, made by a
  // backward node, has a root of its own, which no candidate shares).
  CHECK_FALSE(facts.OddRoot(id("a")));
  CHECK_FALSE(facts.OddRoot(id("dc")));

  facts.FillSaved(keep);
  // Root a's saved candidates: a (last use 10) and v (8). Dropping a leaves
  // v's last read of the original, dropping v a's (through at).
  CHECK(facts.OtherSavedUse(id("a")) == 8);
  CHECK(facts.OtherSavedUse(id("v")) == 10);
  CHECK(facts.OtherSavedUse(id("l")) == kNone);
  // Last forward reads: root a is made by f and view and read by view and g
  // (through v): node 2; b is read by h: node 3; l is made by s: node 4.
  CHECK(facts.LastForwardRead(id("a")) == 2);
  CHECK(facts.LastForwardRead(id("b")) == 3);
  CHECK(facts.LastForwardRead(id("l")) == 4);
  CHECK(LastForwardReads(context)[id("a")] == 2);

  // Save-all: no recompute step (0 f ... 5 s_bwd, 6 h_bwd, 7 g_bwd, 8 t,
  // 9 f_bwd); nothing of the first fill stays.
  const SaveSet all = SaveAll(graph);
  const SimResult saved = Simulate(context, all, SimOptions{});
  REQUIRE(saved.steps.size() == 10);
  facts.Fill(saved, 0, static_cast<NodeId>(graph.nodes.size()));
  facts.FillReads();
  facts.FillSaved(all);
  CHECK(facts.RerunStep(2) == kNone);
  CHECK(facts.Copy(id("b")) == kNone);
  CHECK(facts.Group(6) == 6);
  CHECK(facts.FirstRead(id("v")) == 7);
  CHECK_FALSE(facts.RecomputeRead(id("v")));
  CHECK(facts.FirstRead(id("b")) == 6);
  CHECK(facts.AliasLastRead(id("a")) == 9);
  CHECK(facts.AliasFirstMade(id("a")) == 8);
  // b is saved now, alone in its root.
  CHECK(facts.OtherSavedUse(id("b")) == kNone);
  CHECK(facts.OtherSavedUse(id("v")) == 9);
}

TEST_CASE("step facts: DropDelta scores the same from shared facts as from its own") {
  const Graph graph = ViewGraph();
  const SimContext context(graph);
  SaveSet keep = SaveAll(graph);
  keep[Id(graph, "b")] = 0;
  const SimResult sim = Simulate(context, keep, SimOptions{});
  const NodeId end = static_cast<NodeId>(graph.nodes.size());
  StepFacts facts(context);
  DropDelta shared(context, &facts), own(context);
  facts.Fill(sim, 0, end);
  facts.FillReads();
  // Facts not read whole: refused.
  CHECK_THROWS_AS(shared.Index(sim, keep, 0, end, nullptr), std::logic_error);
  facts.FillSaved(keep);
  shared.Index(sim, keep, 0, end, nullptr);
  own.Index(sim, keep, 0, end, nullptr);
  size_t known = 0;
  for (TensorId t : context.droppable) {
    if (!keep[t]) continue;
    const DropDelta::Result a = shared.Score(t), b = own.Score(t);
    CAPTURE(graph.tensors[t].name);
    CHECK(a.known == b.known);
    CHECK(a.region_max == b.region_max);
    CHECK(a.added_cost == b.added_cost);
    known += a.known;
  }
  CHECK(known > 0);
}

// Every fact of `a` equals `b`'s, both filled from `sim`; counts the
// nodes and tensors that differ (one CHECK each, not one per fact: the test
// compares millions).
void CheckSameFacts(const SimContext& context, const StepFacts& a, const StepFacts& b,
                    const SimResult& sim) {
  for (uint32_t s = 0; s < sim.steps.size(); ++s) REQUIRE(a.Group(s) == b.Group(s));
  auto node_facts = [](const StepFacts& f, NodeId n) {
    return std::vector<uint32_t>{f.OwnStep(n), f.GroupBegin(n), f.RerunStep(n), f.RerunGroup(n)};
  };
  auto tensor_facts = [&](const StepFacts& f, TensorId t) {
    return std::vector<uint32_t>{
        f.Original(t), f.Copy(t), f.FirstRead(t), f.LastRead(t), f.LastOwnRead(t),
        f.RecomputeRead(t), f.AliasLastRead(t), f.AliasFirstMade(t), f.OddRoot(t), f.LastUse(t),
        context.is_candidate[t] ? f.OtherSavedUse(t) : 0};
  };
  for (NodeId n = a.first(); n < a.end(); ++n) {
    if (node_facts(a, n) != node_facts(b, n)) CHECK_MESSAGE(false, "node " << n);
  }
  for (TensorId t = 0; t < context.graph.tensors.size(); ++t) {
    if (tensor_facts(a, t) != tensor_facts(b, t)) {
      CHECK_MESSAGE(false, "tensor " << context.graph.tensors[t].name);
    }
  }
}

TEST_CASE("step facts kept between fills equal a fresh fill's") {
  // One StepFacts fills the regions and the whole step of each corpus graph
  // under random plans, in a random order with repeats: a range read again
  // reuses its own steps' reads, a new range reads them anew. Each fill
  // must give what a fresh StepFacts gives.
  size_t fills = 0, reused = 0;
  testing::ForEachDropCorpusGraph([&](const Graph& graph, uint64_t seed, const std::string& name) {
    CAPTURE(name);
    const SimContext context(graph);
    const std::vector<Region> ranges = testing::RegionsAndStep(context);
    StepFacts kept(context);
    NodeId last_first = kNoId, last_end = kNoId;
    testing::ForEachRandomPlan(context, seed, [&](const SaveSet& keep, std::mt19937_64& random) {
      for (int i = 0; i < 2; ++i) {
        const Region& range = ranges[random() % ranges.size()];
        SimOptions options;
        options.record_details = false;
        options.first_node = range.first;
        options.end_node = range.end;
        const SimResult sim = Simulate(context, keep, options);
        StepFacts fresh(context);
        for (StepFacts* facts : {&kept, &fresh}) {
          facts->Fill(sim, range.first, range.end);
          facts->FillReads();
          facts->FillSaved(keep);
        }
        reused += range.first == last_first && range.end == last_end;
        last_first = range.first;
        last_end = range.end;
        ++fills;
        CheckSameFacts(context, kept, fresh, sim);
      }
    });
  });
  CHECK(fills > 1000);
  CHECK(reused > 100);
  CHECK(fills - reused > 100);
  MESSAGE(fills << " fills, " << reused << " of them of the range filled just before");
}

// From a random plan in a random range of each drop-corpus graph, up to
// four patches one after another, each filled into facts kept from the fill
// before (as the incremental greedy and cleanup do) and compared with a
// fresh fill. `patch(context, delta, options, keep, random, now, next)` makes the
// next patch, `next`, from the simulation `delta` indexed, `now` (false: none;
// a patch in place leaves `now` as `next`) and updates `keep`;
// `check(kept, now, next, keep, range, delta)` runs before `kept` is filled
// from `next`. Returns the fills that kept the reads held.
template <typename MakePatch, typename Check>
size_t ForEachPatchedFill(MakePatch patch, Check check) {
  size_t kept_reads = 0;
  testing::ForEachDropCorpusGraph([&](const Graph& graph, uint64_t seed, const std::string& name) {
    CAPTURE(name);
    const SimContext context(graph);
    const std::vector<Region> ranges = testing::RegionsAndStep(context);
    testing::ForEachRandomPlan(context, seed, [&](const SaveSet& start, std::mt19937_64& random) {
      const Region& range = ranges[random() % ranges.size()];
      SimOptions options;
      options.record_details = false;
      options.first_node = range.first;
      options.end_node = range.end;
      SaveSet keep = start;
      SimResult sims[2];
      sims[0] = Simulate(context, keep, options);
      // Blocks of shifts of 2 nodes: a patch's tail spans many (on a large
      // graph, blocks of 256 nodes do).
      StepFacts kept(context, /*block_bits=*/1);
      kept.Fill(sims[0], range.first, range.end);
      kept.FillReads();
      kept.FillSaved(keep);
      DropDelta delta(context, &kept);
      for (int step = 0; step < 4; ++step) {
        SimResult& now = sims[step % 2];
        SimResult& next = sims[1 - step % 2];
        delta.Index(now, keep, range.first, range.end, nullptr);
        if (!patch(context, delta, options, keep, random, now, next)) break;
        // Fill tells a recomputed copy by its category: the patch made the
        // storages of recompute steps, and only those, recomputed ones.
        for (const Buffer& buffer : next.buffers) {
          REQUIRE((buffer.category == Category::kRecomputed) ==
                  next.steps[buffer.first_step].recompute);
        }
        check(kept, now, next, keep, range, delta);
        kept.Fill(next, range.first, range.end, delta.patched_prefix());
        kept.FillReads();
        kept.FillSaved(keep);
        StepFacts fresh(context);
        fresh.Fill(next, range.first, range.end);
        fresh.FillReads();
        fresh.FillSaved(keep);
        CheckSameFacts(context, kept, fresh, next);
        CHECK(StepFactsDifference(kept, fresh) == "");
        if (step == 1) {
          // Folded back (as Fill does where a block's shift nears its
          // limit), the facts read the same, and later fills go on from them.
          kept.FoldShifts();
          CHECK(StepFactsDifference(kept, fresh) == "");
        }
      }
      kept_reads += kept.kept_read_fills();
    });
  });
  return kept_reads;
}

// Whether facts `kept` filled from `next` with a `wrong` SimPrefix (one
// that says more is as it was than is) differ from a fresh fill's.
bool WrongFillCaught(const StepFacts& kept, const SimResult& next, const Region& range,
                     SimPrefix wrong) {
  StepFacts filled = kept;
  filled.Fill(next, range.first, range.end, wrong);
  filled.FillReads();
  StepFacts whole(kept.context());
  whole.Fill(next, range.first, range.end);
  whole.FillReads();
  return StepFactsDifference(filled, whole) != "";
}

// ForEachPatchedFill's `patch` that drops (`drop`) or re-saves a candidate
// of the range chosen at random among those DropDelta patches; a drop
// patched in place with `in_place`.
auto RandomPatch(bool drop, size_t* patches, bool in_place = false) {
  return [drop, patches, in_place](const SimContext& context, DropDelta& delta,
                                   const SimOptions& options, SaveSet& keep,
                                   std::mt19937_64& random, SimResult& now, SimResult& next) {
    for (TensorId t : context.droppable) {
      const NodeId p = context.producer[t];
      if (keep[t] != drop || p < options.first_node || p >= options.end_node ||
          random() % 3 != 0) {
        continue;
      }
      bool patched = false;
      if (!drop) {
        patched = delta.PatchResave(t, options, &next);
      } else if (!in_place) {
        patched = delta.Patch(t, options, &next);
      } else if (delta.PatchInPlace(t, options, &now)) {
        next = now;
        patched = true;
      }
      if (patched) {
        keep[t] = !drop;
        ++*patches;
        return true;
      }
    }
    return false;
  };
}

TEST_CASE("step facts filled after a patch, reading only what it changed, equal a fresh fill's") {
  // As the incremental greedy does: drop one saved candidate after another
  // through DropDelta's patch; the facts are filled from each patched
  // simulation reading only past the prefix the patch kept, and must give
  // what a fresh StepFacts gives. A prefix past a step the patch changed
  // must not.
  size_t patches = 0, kept_steps = 0, total_steps = 0, tried = 0, caught = 0;
  const size_t kept_reads = ForEachPatchedFill(
      RandomPatch(/*drop=*/true, &patches),
      [&](const StepFacts& kept, const SimResult& now, const SimResult& next, const SaveSet&,
          const Region& range, const DropDelta& delta) {
        const SimPrefix same = delta.patched_prefix();
        // The prefix is one the two simulations share: the same steps
        // (node, recompute or not) and storages (root, first step).
        REQUIRE(same.steps <= std::min(now.steps.size(), next.steps.size()));
        REQUIRE(same.buffers <= std::min(now.buffers.size(), next.buffers.size()));
        for (uint32_t i = 0; i < same.steps; ++i) {
          REQUIRE(now.steps[i].node == next.steps[i].node);
          REQUIRE(now.steps[i].recompute == next.steps[i].recompute);
        }
        for (uint32_t b = 0; b < same.buffers; ++b) {
          REQUIRE(now.buffers[b].root == next.buffers[b].root);
          REQUIRE(now.buffers[b].first_step == next.buffers[b].first_step);
        }
        kept_steps += same.steps;
        total_steps += next.steps.size();
        // A prefix that also covers the first own step the patch changed (a
        // node's step where another was, or a recompute step's place): the
        // check must see it (a fill kept in a copy, to go on).
        size_t changed = same.steps;
        while (changed < next.steps.size() && changed < now.steps.size() &&
               (next.steps[changed].recompute ||
                (now.steps[changed].node == next.steps[changed].node &&
                 !now.steps[changed].recompute))) {
          ++changed;
        }
        if (changed < next.steps.size() && changed < now.steps.size()) {
          caught += WrongFillCaught(kept, next, range,
                                    {static_cast<uint32_t>(changed + 1), same.buffers});
          ++tried;
        }
      });
  MESSAGE(patches << " patched drops; the fills after them read " << total_steps - kept_steps
                  << " of " << total_steps << " steps; " << caught << " of " << tried
                  << " fills from a prefix past a changed step caught; " << kept_reads
                  << " kept the reads held and read again what changed");
  CHECK(patches > 500);
  CHECK(kept_steps * 4 > total_steps);  // the prefixes are not trivial
  CHECK(tried > 20);
  CHECK(caught == tried);
  // Most fills after a drop keep the reads (the others have no prefix, or
  // more changed re-run nodes than a quarter of the recompute steps).
  CHECK(kept_reads * 2 > patches);
}

TEST_CASE("step facts filled after a patch in place, moving the steps it kept, equal a fresh fill's") {
  // As the incremental greedy on one region does: the drop patched into the
  // simulation itself, which says which steps at its end it left as they
  // were, moved by its chain (SimPrefix::tail). The fill moves their groups'
  // own steps and re-runs instead of reading them. A tail said to be moved
  // by one step more must be caught.
  size_t patches = 0, tails = 0, tail_steps = 0, total_steps = 0, tried = 0, caught = 0;
  ForEachPatchedFill(
      RandomPatch(/*drop=*/true, &patches, /*in_place=*/true),
      [&](const StepFacts& kept, const SimResult&, const SimResult& next, const SaveSet&,
          const Region& range, const DropDelta& delta) {
        const SimPrefix same = delta.patched_prefix();
        total_steps += next.steps.size();
        if (same.tail == SimPrefix::kNoTail) return;
        ++tails;
        REQUIRE(same.tail <= next.steps.size());
        REQUIRE(same.tail >= same.steps);
        REQUIRE(same.tail > 0);
        REQUIRE_FALSE(next.steps[same.tail - 1].recompute);  // a group's first step
        tail_steps += next.steps.size() - same.tail;
        if (same.tail < next.steps.size()) {
          SimPrefix wrong_shift = same;
          ++wrong_shift.shift;
          caught += WrongFillCaught(kept, next, range, wrong_shift);
          ++tried;
        }
      });
  MESSAGE(patches << " drops patched in place; " << tails << " kept a tail, "
                  << tail_steps << " of " << total_steps << " steps after them moved, not read; "
                  << caught << " of " << tried << " fills with a wrong shift caught");
  CHECK(patches > 500);
  CHECK(tails * 2 > patches);
  CHECK(tail_steps * 20 > total_steps);
  CHECK(tried > 100);
  CHECK(caught == tried);
}

TEST_CASE("step facts filled after a re-save's patch, keeping the reads held, equal a fresh fill's") {
  // As cleanup does: re-save one dropped candidate after another through
  // DropDelta::PatchResave (a run of recompute steps goes; nodes of it that
  // later readers need re-run later, at their places).
  size_t patches = 0;
  const size_t kept_reads = ForEachPatchedFill(
      RandomPatch(/*drop=*/false, &patches),
      [](const StepFacts&, const SimResult&, const SimResult&, const SaveSet&, const Region&,
         const DropDelta&) {});
  MESSAGE(patches << " patched re-saves; " << kept_reads
                  << " fills after them kept the reads held");
  CHECK(patches > 500);
  CHECK(kept_reads * 2 > patches);
}

}  // namespace
}  // namespace ckptplan
