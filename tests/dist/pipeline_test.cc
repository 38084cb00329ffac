#include "ckptplan/dist/pipeline.h"

#include <doctest/doctest.h>

#include "ckptplan/sim/simulator.h"

namespace ckptplan {
namespace {

// Two layers, one forward and one backward node each:
//   f0 [h.0]: x, w0 -> a0 (100)     f1 [h.1]: a0, w1 -> a1 (50)
//   b1 [h.1]: a1, a0, w1 -> da0 (100), g1 (4)     b0 [h.0]: da0, x, w0 -> g0 (4)
Graph TwoLayers() {
  Graph g;
  g.source = "two-layers";
  auto tensor = [&](const char* name, int64_t bytes, TensorKind kind) {
    g.tensors.push_back({name, bytes, kind, kNoId, kNoId});
    return static_cast<TensorId>(g.tensors.size() - 1);
  };
  TensorId x = tensor("x", 10, TensorKind::kInput);
  TensorId w0 = tensor("w0", 4, TensorKind::kParameter);
  TensorId w1 = tensor("w1", 4, TensorKind::kParameter);
  TensorId a0 = tensor("a0", 100, TensorKind::kActivation);
  TensorId a1 = tensor("a1", 50, TensorKind::kActivation);
  TensorId da0 = tensor("da0", 100, TensorKind::kActivation);
  TensorId g1 = tensor("g1", 4, TensorKind::kGradient);
  TensorId g0 = tensor("g0", 4, TensorKind::kGradient);
  auto node = [&](const char* name, const char* scope, Phase phase, std::vector<TensorId> in,
                  std::vector<TensorId> out) {
    Node n;
    n.name = name;
    n.op = "op";
    n.scope = scope;
    n.phase = phase;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.flops = 1;
    g.nodes.push_back(n);
  };
  node("f0", "h.0", Phase::kForward, {x, w0}, {a0});
  node("f1", "h.1", Phase::kForward, {a0, w1}, {a1});
  node("b1", "h.1", Phase::kBackward, {a1, a0, w1}, {da0, g1});
  node("b0", "h.0", Phase::kBackward, {da0, x, w0}, {g0});
  g.Finalize();
  return g;
}

int64_t StagePeak(const Graph& graph, const ParallelLayout& layout, int stage) {
  Graph g = StageGraph(graph, layout, stage, AssignStages(graph, layout.pp));
  ValidateGraph(g);
  return Simulate(g, SaveAll(g), SimOptions()).peak_bytes;
}

}  // namespace

TEST_CASE("pipeline schedules: 1F1B warms up p - s - 1 forwards") {
  std::string order;
  for (const ScheduleSlot& s : StageSchedule("1f1b", 4, 0, 6)) {
    order += (s.forward ? "F" : "B") + std::to_string(s.microbatch) + " ";
  }
  CHECK(order == "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5 ");
  order.clear();
  for (const ScheduleSlot& s : StageSchedule("1f1b", 4, 3, 2)) {
    order += (s.forward ? "F" : "B") + std::to_string(s.microbatch) + " ";
  }
  CHECK(order == "F0 B0 F1 B1 ");
  CHECK(StageSchedule("gpipe", 2, 1, 2).front().forward);
  CHECK(!StageSchedule("gpipe", 2, 1, 2)[2].forward);
}

TEST_CASE("pipeline stages hold the activations their schedule keeps in flight") {
  const Graph graph = TwoLayers();
  ParallelLayout layout;
  layout.pp = 2;
  layout.microbatches = 3;
  CHECK(AssignStages(graph, 2) == std::vector<int>{0, 1, 1, 0});
  // Stage 0, 1F1B (F0 F1 B0 F2 B1 B2): resident w0 4 + three microbatches'
  // x 30 = 34. a0 of each microbatch is held until its backward has run:
  // two in flight. B0's b0 makes g0 (4); B1's b0 makes a fresh g0 (4, a
  // temporary added into g0 after b0). At B1's b0: a0 of microbatches 1
  // and 2 (200), the received da0 (100), g0 4 and the fresh g0 4: 342.
  CHECK(StagePeak(graph, layout, 0) == 342);
  // Stage 1 (F0 B0 F1 B1 ...): resident w1 4; at B1's b1: the received a0
  // 100, a1 50, da0 100, g1 4 and the fresh g1 4: 262, whatever the
  // microbatch count. (B0's da0 is in flight until F1's receive: there
  // 4 + da0 100 + g1 4 + the received a0 100 = 208.)
  CHECK(StagePeak(graph, layout, 1) == 262);
  layout.microbatches = 6;
  CHECK(StagePeak(graph, layout, 1) == 262);
  layout.microbatches = 3;
  // GPipe holds all three: stage 0 at B0's b0 34 + 300 + 100 + g0 4 = 438;
  // stage 1 at b1 of microbatch 0: 4 + 3 x (100 + 50) + 100 + 4 = 558.
  layout.schedule = "gpipe";
  CHECK(StagePeak(graph, layout, 0) == 438);
  CHECK(StagePeak(graph, layout, 1) == 558);
  // --pp-free-outputs: a0 is freed once its send completes, at the stage's
  // next receive: F0's and F1's sends complete at B0's receive, where
  // 34 + a0 x 2 (200) + the received da0 (100) = 334 is the peak; at B0's
  // b0 only 34 + da0 100 + g0 4 = 138 is live, and at B1's receive
  // 34 + a0 of F2 100 + da0 100 + g0 4 = 238.
  layout.schedule = "1f1b";
  layout.pp_free_outputs = true;
  CHECK(StagePeak(graph, layout, 0) == 334);
  // GPipe with --pp-free-outputs: the three sends complete at B0's
  // receive: 34 + 300 + 100 = 434, against 438 when a0 is held (g0 at b0).
  layout.schedule = "gpipe";
  CHECK(StagePeak(graph, layout, 0) == 434);
}

}  // namespace ckptplan
