// No stage of any planner recomputes a random op (IsRandomOp,
// SimContext::pinned): the plan runner cannot replay the random state.
#include <string>

#include <doctest/doctest.h>

#include "ckptplan/plan/planner.h"
#include "ckptplan/plan/strategies.h"
#include "ckptplan/plan/sweep.h"
#include "ckptplan/sim/simulator.h"
#include "json_graphs.h"
#include "test_graphs.h"

namespace ckptplan {
namespace {

using testing::FromJson;
using testing::Id;

// Two dropouts as PyTorch traces them. First as AOTAutograd decomposes
// nn.Dropout: e = empty_like(r); bern = bernoulli_(e) (in place, an alias
// of e); mask = div(bern); y = mul(r, mask). The backward reads mask and r,
// never bern, so mask can be re-made only by re-running bernoulli_. Then as
// one op: (z, zmask) = native_dropout(q), both read by the backward.
// Every activation is 4000 bytes except the 1000-byte zmask.
// Resident: x 4000 + w 400 + w2 400 + 2 x 2 x 400 Adam state = 6400 bytes.
const char* kDropoutGraph = R"({"format":"ckptplan.graph","version":1,
"training":{"optimizer":"adam"},
"tensors":[{"id":"x","bytes":4000,"kind":"input"},{"id":"w","bytes":400,"kind":"parameter"},
 {"id":"w2","bytes":400,"kind":"parameter"},
 {"id":"a","bytes":4000},{"id":"r","bytes":4000},{"id":"e","bytes":4000},
 {"id":"bern","bytes":0,"alias_of":"e"},{"id":"mask","bytes":4000},{"id":"y","bytes":4000},
 {"id":"q","bytes":4000},{"id":"z","bytes":4000},{"id":"zmask","bytes":1000},
 {"id":"loss","bytes":4},
 {"id":"dz","bytes":4000},{"id":"dq","bytes":4000},{"id":"dw2","bytes":400,"kind":"gradient"},
 {"id":"dy","bytes":4000},{"id":"dr","bytes":4000},{"id":"da","bytes":4000},
 {"id":"dw","bytes":400,"kind":"gradient"}],
"nodes":[
 {"id":"mm","op":"aten.mm.default","phase":"forward","inputs":["x","w"],"outputs":["a"],"flops":1000},
 {"id":"relu","op":"aten.relu.default","phase":"forward","inputs":["a"],"outputs":["r"],"flops":10},
 {"id":"empty","op":"aten.empty_like.default","phase":"forward","inputs":["r"],"outputs":["e"]},
 {"id":"bernoulli","op":"aten.bernoulli_.float","phase":"forward","inputs":["e"],"outputs":["bern"],"flops":10},
 {"id":"div","op":"aten.div.Scalar","phase":"forward","inputs":["bern"],"outputs":["mask"],"flops":10},
 {"id":"mul","op":"aten.mul.Tensor","phase":"forward","inputs":["r","mask"],"outputs":["y"],"flops":10},
 {"id":"mm2","op":"aten.mm.default","phase":"forward","inputs":["y","w2"],"outputs":["q"],"flops":1000},
 {"id":"drop","op":"aten.native_dropout.default","phase":"forward","inputs":["q"],"outputs":["z","zmask"],"flops":10},
 {"id":"lossf","op":"aten.sum.default","phase":"forward","inputs":["z"],"outputs":["loss"],"flops":10},
 {"id":"loss_bwd","op":"aten.mul.Tensor","phase":"backward","inputs":["z"],"outputs":["dz"],"flops":10},
 {"id":"drop_bwd","op":"aten.native_dropout_backward.default","phase":"backward","inputs":["dz","zmask"],"outputs":["dq"],"flops":10},
 {"id":"mm2_bwd_w","op":"aten.mm.default","phase":"backward","inputs":["y","dq"],"outputs":["dw2"],"flops":1000},
 {"id":"mm2_bwd_x","op":"aten.mm.default","phase":"backward","inputs":["dq","w2"],"outputs":["dy"],"flops":1000},
 {"id":"mul_bwd","op":"aten.mul.Tensor","phase":"backward","inputs":["dy","mask"],"outputs":["dr"],"flops":10},
 {"id":"relu_bwd","op":"aten.threshold_backward.default","phase":"backward","inputs":["dr","r"],"outputs":["da"],"flops":10},
 {"id":"mm_bwd","op":"aten.mm.default","phase":"backward","inputs":["x","da"],"outputs":["dw"],"flops":1000},
 {"id":"opt","op":"adam","phase":"optimizer","inputs":["w","dw","w2","dw2"],"outputs":[]}]})";

// The random nodes any of `sim`'s recomputes re-run.
std::string RandomReruns(const Graph& graph, const SimResult& sim) {
  std::string out;
  for (const Recompute& r : sim.recomputes) {
    for (NodeId n : r.chain) {
      if (IsRandomOp(graph.nodes[n].op)) out += graph.nodes[n].name + " ";
    }
  }
  return out;
}

TEST_CASE("random ops: IsRandomOp reads aten and ONNX spellings") {
  CHECK(IsRandomOp("aten.bernoulli_.float"));
  CHECK(IsRandomOp("aten.native_dropout.default"));
  CHECK(IsRandomOp("Dropout"));
  CHECK(IsRandomOp("RandomNormalLike"));
  CHECK_FALSE(IsRandomOp("aten.div.Scalar"));
  CHECK_FALSE(IsRandomOp("aten.native_dropout_backward.default"));
}

TEST_CASE("random ops: masks and dropout outputs are pinned, their readers are not") {
  const Graph graph = FromJson(kDropoutGraph);
  const SimContext context(graph);
  // Candidates (forward tensors the backward reads): r, mask, y, z, zmask.
  // mask is made from bern, which no plan saves, by re-running bernoulli_;
  // z and zmask come from native_dropout itself. y = mul(r, mask) re-runs
  // only mul once mask is saved.
  for (const char* name : {"mask", "z", "zmask"}) CHECK(context.pinned[Id(graph, name)]);
  for (const char* name : {"r", "y"}) CHECK_FALSE(context.pinned[Id(graph, name)]);
  CHECK(context.candidates.size() == 5);
  CHECK(context.droppable.size() == 2);
  CHECK(DroppableCandidates(graph) == context.droppable);
  // The nodes whose re-run re-runs a random op: bernoulli and drop
  // themselves, and div, which reads bern (no plan saves it). mul reads mask
  // and lossf reads z: candidates, pinned and so saved, so neither is one.
  std::string reruns;
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    if (context.reruns_random[n]) reruns += graph.nodes[n].name + " ";
  }
  CHECK(reruns == "bernoulli div drop ");
}

TEST_CASE("random ops: no strategy recomputes one, even at the lowest budget") {
  const Graph graph = FromJson(kDropoutGraph);
  // Dropping mask would lower the peak: it is what a planner that ignores
  // the random state would do.
  SaveSet unsafe = SaveAll(graph);
  unsafe[Id(graph, "mask")] = 0;
  const SimResult unsafe_sim = Simulate(graph, unsafe, {});
  CHECK(RandomReruns(graph, unsafe_sim) == "bernoulli ");
  CHECK(unsafe_sim.peak_bytes < Simulate(graph, SaveAll(graph), {}).peak_bytes);

  PlannerOptions options;
  options.budget_bytes = 1;  // fits nothing: every search goes as low as it can
  std::vector<Strategy> strategies = AllStrategies();
  for (Strategy s : strategies) {
    options.strategy = s;
    for (const char* start : {"mincut", "save-all"}) {
      options.start = start;
      // A min-cut policy that allows every op, the random ones too, changes
      // nothing either.
      options.policy = DefaultRecomputePolicy();
      for (const Node& node : graph.nodes) options.policy.ops.insert(NormalizeOpName(node.op));
      const PlannerResult plan = PlanGraph(graph, options);
      const SimResult sim = Simulate(graph, plan.keep, {});
      INFO(plan.method);
      CHECK(RandomReruns(graph, sim).empty());
      for (const char* name : {"mask", "z", "zmask"}) CHECK(plan.keep[Id(graph, name)]);
    }
  }
  // The sweep's lowest plan recomputes r and y (so the searches did drop
  // what they could) and still re-runs no random op.
  options.strategy = Strategy::kCkptplan;
  options.start = "mincut";
  const SweepResult sweep = RunSweep(graph, {1, 100000}, options);
  CHECK(sweep.lowest_peak_bytes < sweep.save_all_peak_bytes);
  options.budget_bytes = sweep.lowest_peak_bytes;
  const PlannerResult lowest = PlanGraph(graph, options);
  CHECK(lowest.fits);
  CHECK_FALSE(lowest.keep[Id(graph, "r")]);
  CHECK(RandomReruns(graph, Simulate(graph, lowest.keep, {})).empty());
}

}  // namespace
}  // namespace ckptplan
