// Differential test: every drop DropDelta::Patch applies must give, field by
// field, the simulation Simulate gives for the plan with the drop (steps,
// totals, node peaks, storages, recomputes, costs, peaks), on random graphs,
// small transformers and steps of several regions, under random plans.
#include "ckptplan/sim/drop_delta.h"

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "ckptplan/base/range_add_max.h"
#include "ckptplan/ir/synth.h"
#include "ckptplan/sim/simulator.h"
#include "test_graphs.h"

namespace ckptplan {
namespace {

struct Counts {
  size_t scored = 0;   // saved candidates asked about
  size_t patched = 0;  // patches checked against a simulation
  size_t pulling = 0;  // of those, more than one run of steps inserted
  size_t resaves = 0;           // dropped candidates asked about
  size_t resaves_patched = 0;   // re-save patches checked against a simulation
  size_t resaves_in_chain = 0;  // of those, the run went from inside a longer chain
  size_t resaves_moving = 0;    // of those, nodes of the run re-run for later readers
  size_t in_place = 0;          // drops patched in place and checked
  size_t in_place_kept = 0;     // of those, steps left as they were
  size_t in_place_summed = 0;   // of those, the figures over them summed again
  size_t kept_runs = 0;         // runs of steps in place patches left as they were
  size_t read_kept_runs = 0;    // of those, runs whose steps were read for the figures
};

// Field by field, with CHECKs of their own (not SimResultDifference, which
// verify modes use and which is checked below).
void CheckSame(const SimResult& patched, const SimResult& simulated) {
  // The first step and the first storage that differ, if any.
  REQUIRE(patched.steps.size() == simulated.steps.size());
  size_t s = 0;
  for (; s < patched.steps.size(); ++s) {
    const Step &x = patched.steps[s], &y = simulated.steps[s];
    if (x.node != y.node || x.recompute != y.recompute || x.starts_chain != y.starts_chain) break;
  }
  CHECK(s == patched.steps.size());
  CHECK(patched.total == simulated.total);
  CHECK(patched.node_peak == simulated.node_peak);
  REQUIRE(patched.buffers.size() == simulated.buffers.size());
  size_t b = 0;
  for (; b < patched.buffers.size(); ++b) {
    const Buffer &x = patched.buffers[b], &y = simulated.buffers[b];
    if (x.root != y.root || x.first_step != y.first_step || x.last_step != y.last_step ||
        x.category != y.category) {
      break;
    }
  }
  CHECK(b == patched.buffers.size());
  CHECK(patched.recomputes.empty());
  CHECK(simulated.recomputes.empty());
  CHECK(patched.by_category.empty());
  CHECK(simulated.by_category.empty());
  CHECK(patched.recompute_cost == simulated.recompute_cost);
  CHECK(patched.step_cost == simulated.step_cost);
  CHECK(patched.peak_bytes == simulated.peak_bytes);
  CHECK(patched.peak_step == simulated.peak_step);
  CHECK(patched.max_own_total == simulated.max_own_total);
  CHECK(patched.max_own_node == simulated.max_own_node);
  CHECK(patched.resident == simulated.resident);
  CHECK(patched.peak_breakdown == simulated.peak_breakdown);
  CHECK(SimResultDifference(patched, simulated) == "");
}

// Whether `after` is `before` with one run of steps inserted, no step gone
// and no chain start moved: drops that pull no re-run node into their chain.
bool OneRunInserted(const SimResult& before, const SimResult& after) {
  auto same = [](const Step& x, const Step& y) {
    return x.node == y.node && x.recompute == y.recompute && x.starts_chain == y.starts_chain;
  };
  const size_t n = before.steps.size(), m = after.steps.size();
  if (m < n) return false;
  size_t prefix = 0, suffix = 0;
  while (prefix < n && same(before.steps[prefix], after.steps[prefix])) ++prefix;
  while (suffix < n - prefix && same(before.steps[n - 1 - suffix], after.steps[m - 1 - suffix])) {
    ++suffix;
  }
  return prefix + suffix == n;
}

// Whether a node re-run in both simulations is re-run in another group (the
// node whose own step comes next) in `after`: a re-save that moves nodes.
bool RerunMoves(const SimResult& before, const SimResult& after, size_t num_nodes) {
  auto groups = [&](const SimResult& sim) {
    std::vector<NodeId> group(num_nodes, kNoId);
    std::vector<NodeId> pending;
    for (const Step& step : sim.steps) {
      if (step.recompute) {
        pending.push_back(step.node);
        continue;
      }
      for (NodeId n : pending) group[n] = step.node;
      pending.clear();
    }
    return group;
  };
  const std::vector<NodeId> a = groups(before), b = groups(after);
  for (size_t n = 0; n < num_nodes; ++n) {
    if (a[n] != kNoId && b[n] != kNoId && a[n] != b[n]) return true;
  }
  return false;
}

// Patches every saved droppable candidate of every region (and of the whole
// step) under `keep` that DropDelta handles, and checks each against a
// simulation of the drop; the same DropDelta serves every candidate of a
// range, as a region search uses it.
void CheckPlan(const SimContext& context, const SaveSet& keep, const std::string& what,
               Counts* counts) {
  const Graph& graph = context.graph;
  DropDelta delta(context);
  // Patches in place, each of a copy of the simulation indexed anew.
  DropDelta in_place(context);
  SimResult patched;
  for (const Region& range : testing::RegionsAndStep(context)) {
    SimOptions options;  // as RegionalMemory::OptionsFor gives them
    options.record_details = false;
    options.reserve_bytes = 64;
    options.first_node = range.first;
    options.end_node = range.end;
    const SimResult base = Simulate(context, keep, options);
    delta.Index(base, keep, range.first, range.end, nullptr);
    // The options must be those of the indexed simulation.
    SimOptions detailed = options;
    detailed.record_details = true;
    for (TensorId t : context.droppable) {
      const NodeId p = graph.tensors[t].producer;
      if (!keep[t] || p < range.first || p >= range.end) continue;
      ++counts->scored;
      const bool known = delta.Score(t).known;
      CHECK_FALSE(delta.Patch(t, detailed, &patched));
      CHECK(delta.Patch(t, options, &patched) == known);
      if (!known) continue;
      ++counts->patched;
      SaveSet dropped = keep;
      dropped[t] = 0;
      const SimResult simulated = Simulate(context, dropped, options);
      counts->pulling += !OneRunInserted(base, simulated);
      CAPTURE(what);
      CAPTURE(graph.tensors[t].name);
      CAPTURE(range.first);
      CAPTURE(range.end);
      CheckSame(patched, simulated);

      SimResult copy = base;
      // Every other drop with the caller's node-peak tree, which the
      // patch then reads the runs it keeps from (PeakTracker::KeepRun).
      const bool tree = counts->in_place % 2 == 1;
      RangeAddMax group_max;
      if (tree) group_max.Build(copy.node_peak.data(), copy.node_peak.size());
      in_place.Index(copy, keep, range.first, range.end, nullptr, tree ? &group_max : nullptr);
      // Not of another simulation than the one indexed, nor under other options.
      CHECK_FALSE(in_place.PatchInPlace(t, options, &patched));
      CHECK_FALSE(in_place.PatchInPlace(t, detailed, &copy));
      CHECK(SimResultDifference(copy, base) == "");
      REQUIRE(in_place.PatchInPlace(t, options, &copy));
      ++counts->in_place;
      CheckSame(copy, simulated);
      // The index is spent.
      CHECK_FALSE(in_place.PatchInPlace(t, options, &copy));
    }
    // Re-saves: PatchResave answers only where ScoreResave does.
    for (TensorId t : context.candidates) {
      const NodeId p = graph.tensors[t].producer;
      if (keep[t] || p < range.first || p >= range.end) continue;
      ++counts->resaves;
      CHECK_FALSE(delta.PatchResave(t, detailed, &patched));
      const bool known = delta.ScoreResave(t).known;
      if (!delta.PatchResave(t, options, &patched)) continue;
      REQUIRE(known);
      ++counts->resaves_patched;
      SaveSet resaved = keep;
      resaved[t] = 1;
      const SimResult simulated = Simulate(context, resaved, options);
      // Nodes of the run that go re-run for later readers
      // (DropDelta::MovedChain): in another group than before.
      counts->resaves_moving += RerunMoves(base, simulated, graph.nodes.size());
      // A run taken from inside a chain for another tensor: a step that
      // stays follows the gone run inside one chain.
      for (size_t s = 0; s + 1 < base.steps.size(); ++s) {
        if (base.steps[s].node == graph.tensors[t].producer && base.steps[s].recompute &&
            base.steps[s + 1].recompute && !base.steps[s + 1].starts_chain) {
          ++counts->resaves_in_chain;
          break;
        }
      }
      CAPTURE(what);
      CAPTURE(graph.tensors[t].name);
      CAPTURE(range.first);
      CAPTURE(range.end);
      CheckSame(patched, simulated);
    }
  }
  counts->in_place_kept += in_place.kept_prefixes();
  counts->in_place_summed += in_place.summed_prefixes();
  counts->kept_runs += in_place.kept_runs();
  counts->read_kept_runs += in_place.read_kept_runs();
}

// Save-all and random plans of `graph` (testing::ForEachRandomPlan).
void CheckGraph(const Graph& graph, uint64_t seed, const std::string& what, Counts* counts) {
  const SimContext context(graph);
  testing::ForEachRandomPlan(context, seed, [&](const SaveSet& keep, std::mt19937_64&) {
    CheckPlan(context, keep, what, counts);
  });
}

TEST_CASE("drops DropDelta patches into a simulation simulate to the same simulation") {
  Counts counts;
  testing::ForEachDropCorpusGraph([&](const Graph& graph, uint64_t seed, const std::string& name) {
    CheckGraph(graph, seed, name, &counts);
  });
  for (uint64_t seed = 500; seed < 504; ++seed) {
    CheckGraph(testing::DeepRandomGraph(seed), seed, "deep random " + std::to_string(seed),
               &counts);
  }
  MESSAGE("DropDelta patched " << counts.patched << " of " << counts.scored << " drops, "
                               << counts.pulling << " of them more than a run of steps inserted");
  // The corpus must exercise the patch, and not only on trivial drops.
  CHECK(counts.patched > 2000);
  CHECK(counts.patched * 4 > counts.scored);
  CHECK(counts.pulling > 100);
  MESSAGE("DropDelta patched " << counts.resaves_patched << " of " << counts.resaves
                               << " re-saves, " << counts.resaves_in_chain
                               << " of them a run from inside a longer chain, "
                               << counts.resaves_moving << " moving nodes to later readers");
  CHECK(counts.resaves_patched > 2000);
  CHECK(counts.resaves_in_chain > 100);
  CHECK(counts.resaves_moving > 100);
  MESSAGE("DropDelta patched " << counts.in_place << " drops in place, " << counts.in_place_kept
                               << " leaving steps as they were, " << counts.in_place_summed
                               << " of them summing their figures again");
  CHECK(counts.in_place == counts.patched);
  CHECK(counts.in_place_kept * 2 > counts.in_place);
  CHECK(counts.in_place_summed > 100);
  MESSAGE("DropDelta's patches in place kept " << counts.kept_runs << " runs of steps as they "
                                               << "were, " << counts.read_kept_runs
                                               << " of them read for the figures");
  CHECK(counts.kept_runs > 1000);
  CHECK(counts.read_kept_runs > 100);
  CHECK(counts.read_kept_runs * 2 < counts.kept_runs);
}

TEST_CASE("a re-save whose moved node makes the copy again, unread, patches as it simulates") {
  // testing::LayerNormViewGraph: re-saving t moves ln before ln_bwd, where
  // it makes n's copy again for no reader.
  const Graph graph = testing::LayerNormViewGraph();
  const SimContext context(graph);
  Counts counts;
  CheckPlan(context, testing::LayerNormViewPlan(graph), "layer norm", &counts);
  CHECK(counts.resaves_moving > 0);
}

TEST_CASE("SimResultDifference names the first field that differs") {
  const Graph graph = testing::SmallTransformer(1, 1);
  const SimContext context(graph);
  SimOptions options;
  options.record_details = false;
  const SimResult sim = Simulate(context, SaveAll(graph), options);
  CHECK(SimResultDifference(sim, sim) == "");
  SimResult other = sim;
  other.total.back() += 1;
  CHECK(SimResultDifference(sim, other) == "total at step " + std::to_string(sim.total.size() - 1));
  other = sim;
  other.buffers[1].last_step += 1;
  CHECK(SimResultDifference(sim, other) == "storage 1");
  other = sim;
  other.peak_step += 1;
  CHECK(SimResultDifference(sim, other) == "peak step");
  other = sim;
  other.steps[2].starts_chain = !other.steps[2].starts_chain;
  CHECK(SimResultDifference(sim, other) == "step 2");
}

}  // namespace
}  // namespace ckptplan
