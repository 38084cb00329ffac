#include "ckptplan/dist/pipeline.h"

#include <doctest/doctest.h>

#include "ckptplan/sim/simulator.h"
#include "ir_graphs.h"

namespace ckptplan {
namespace {

// Two layers, one forward and one backward node each:
//   f0 [h.0]: x, w0 -> a0 (100)     f1 [h.1]: a0, w1 -> a1 (50)
//   b1 [h.1]: a1, a0, w1 -> da0 (100), g1 (4)     b0 [h.0]: da0, x, w0 -> g0 (4)
Graph TwoLayers() {
  constexpr Phase F = Phase::kForward, B = Phase::kBackward;
  testing::ScopedGraphBuilder g("two-layers", /*flops=*/1);
  TensorId x = g.Tensor("x", 10, TensorKind::kInput);
  TensorId w0 = g.Tensor("w0", 4, TensorKind::kParameter);
  TensorId w1 = g.Tensor("w1", 4, TensorKind::kParameter);
  TensorId a0 = g.Tensor("a0", 100, TensorKind::kActivation);
  TensorId a1 = g.Tensor("a1", 50, TensorKind::kActivation);
  TensorId da0 = g.Tensor("da0", 100, TensorKind::kActivation);
  TensorId g1 = g.Tensor("g1", 4, TensorKind::kGradient);
  TensorId g0 = g.Tensor("g0", 4, TensorKind::kGradient);
  g.Node("f0", "h.0", F, {x, w0}, {a0});
  g.Node("f1", "h.1", F, {a0, w1}, {a1});
  g.Node("b1", "h.1", B, {a1, a0, w1}, {da0, g1});
  g.Node("b0", "h.0", B, {da0, x, w0}, {g0});
  return g.Build();
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

TEST_CASE("plans searched on fewer microbatches: how many, and spread to every microbatch") {
  ParallelLayout layout;
  layout.pp = 2;
  layout.microbatches = 8;
  // 1F1B: warm-up min(p - s - 1, m) + 3: stage 0 1 + 3 = 4, stage 1 0 + 3 = 3.
  CHECK(PlanningMicrobatches(layout, 0) == 4);
  CHECK(PlanningMicrobatches(layout, 1) == 3);
  layout.microbatches = 2;
  CHECK(PlanningMicrobatches(layout, 0) == 2);  // capped at m
  layout.microbatches = 8;
  layout.schedule = "gpipe";
  CHECK(PlanningMicrobatches(layout, 0) == 8);  // every microbatch in flight
  layout.schedule = "1f1b";
  // Stage 1 of TwoLayers: each microbatch's a1 (f1 makes it, b1 reads it)
  // is a candidate. Dropping microbatch 1's copy in a 3-microbatch plan
  // drops all six copies in the 6-microbatch stage, nothing else.
  const Graph graph = TwoLayers();
  const std::vector<int> stage_of = AssignStages(graph, 2);
  layout.microbatches = 3;
  const Graph small = StageGraph(graph, layout, 1, stage_of);
  layout.microbatches = 6;
  const Graph full = StageGraph(graph, layout, 1, stage_of);
  SaveSet keep = SaveAll(small);
  for (TensorId t = 0; t < small.tensors.size(); ++t) {
    if (small.tensors[t].name == "mb1.a1") keep[t] = 0;
  }
  const SaveSet spread = UniformPlan(small, keep, full);
  int dropped = 0;
  for (TensorId t = 0; t < full.tensors.size(); ++t) {
    if (spread[t]) continue;
    ++dropped;
    CHECK(full.tensors[t].name.substr(full.tensors[t].name.find('.') + 1) == "a1");
  }
  CHECK(dropped == 6);
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
  {
    // What the pp_recv nodes made is in the collectives category: at that
    // peak the received a0 (100); da0 and the fresh g1 are temporaries
    // (104), a1 a saved activation (50), g1 a gradient (4).
    Graph g = StageGraph(graph, layout, 1, AssignStages(graph, 2));
    const SimResult sim = Simulate(g, SaveAll(g), SimOptions());
    CHECK(sim.peak_breakdown[static_cast<size_t>(Category::kCollectives)] == 100);
    CHECK(sim.peak_breakdown[static_cast<size_t>(Category::kTemporaries)] == 104);
    CHECK(sim.peak_breakdown[static_cast<size_t>(Category::kSavedActivations)] == 50);
  }
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

namespace ckptplan {
namespace {

// Four layers in a chain, one forward and one backward node each:
//   f_i [h.i]: a_{i-1} (x for i = 0), w_i -> a_i (100)
//   b_i [h.i]: da_i (none for i = 3), a_i (i = 3 only), a_{i-1} (x for i = 0), w_i
//              -> da_{i-1} (100, none for i = 0), g_i (4)
Graph FourLayers() {
  testing::ScopedGraphBuilder g("four-layers", /*flops=*/1);
  const TensorId x = g.Tensor("x", 10, TensorKind::kInput);
  std::vector<TensorId> w, a, da, grad;
  for (int i = 0; i < 4; ++i) w.push_back(g.Tensor("w" + std::to_string(i), 4, TensorKind::kParameter));
  for (int i = 0; i < 4; ++i) {
    a.push_back(g.Tensor("a" + std::to_string(i), 100, TensorKind::kActivation));
    g.Node("f" + std::to_string(i), "h." + std::to_string(i), Phase::kForward,
         {i == 0 ? x : a[i - 1], w[i]}, {a[i]});
  }
  for (int i = 0; i < 3; ++i) da.push_back(g.Tensor("da" + std::to_string(i), 100, TensorKind::kActivation));
  for (int i = 0; i < 4; ++i) grad.push_back(g.Tensor("g" + std::to_string(i), 4, TensorKind::kGradient));
  for (int i = 3; i >= 0; --i) {
    std::vector<TensorId> in;
    if (i == 3) in.push_back(a[3]);
    if (i < 3) in.push_back(da[i]);
    in.push_back(i == 0 ? x : a[i - 1]);
    in.push_back(w[i]);
    std::vector<TensorId> out;
    if (i > 0) out.push_back(da[i - 1]);
    out.push_back(grad[i]);
    g.Node("b" + std::to_string(i), "h." + std::to_string(i), Phase::kBackward, in, out);
  }
  return g.Build();
}

std::string Order(const std::vector<ScheduleSlot>& slots) {
  std::string order;
  for (const ScheduleSlot& s : slots) {
    order += std::string(s.forward ? "F" : "B") + "c" + std::to_string(s.chunk) + "m" +
             std::to_string(s.microbatch) + " ";
  }
  return order;
}

}  // namespace

TEST_CASE("interleaved 1F1B: Megatron's warm-up and chunk order") {
  // p = 2, V = 2, m = 2: m V = 4 chunk-microbatches. Rank 0 warms up
  // min((2 - 0 - 1) 2 + (2 - 1) 2, 4) = 4: every forward first; rank 1
  // min(0 + 2, 4) = 2. The k-th forward runs chunk (k / 2) % 2, microbatch
  // k % 2; the k-th backward chunk 1 - (k / 2) % 2.
  CHECK(Order(StageSchedule("interleaved", 2, 0, 2, 2)) ==
        "Fc0m0 Fc0m1 Fc1m0 Fc1m1 Bc1m0 Bc1m1 Bc0m0 Bc0m1 ");
  CHECK(Order(StageSchedule("interleaved", 2, 1, 2, 2)) ==
        "Fc0m0 Fc0m1 Fc1m0 Bc1m0 Fc1m1 Bc1m1 Bc0m0 Bc0m1 ");
  // p = 2, V = 2, m = 4: rank 1 warms up 2 of 8; forwards 2..7 are
  // (c1 m0) (c1 m1) (c0 m2) (c0 m3) (c1 m2) (c1 m3).
  CHECK(Order(StageSchedule("interleaved", 2, 1, 4, 2)) ==
        "Fc0m0 Fc0m1 Fc1m0 Bc1m0 Fc1m1 Bc1m1 Fc0m2 Bc0m0 Fc0m3 Bc0m1 Fc1m2 Bc1m2 Fc1m3 "
        "Bc1m3 Bc0m2 Bc0m3 ");
}

TEST_CASE("interleaved 1F1B: a rank holds both chunks' microbatches in flight") {
  const Graph graph = FourLayers();
  ParallelLayout layout;
  layout.pp = 2;
  layout.microbatches = 2;
  layout.schedule = "interleaved";
  layout.virtual_stages = 2;
  // Virtual stage i = layer i; rank 0 holds layers 0 and 2 (chunks 0, 1).
  const std::vector<int> stage_of = AssignStages(graph, 4);
  CHECK(stage_of == std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0});
  Graph g = StageGraph(graph, layout, 0, stage_of);
  ValidateGraph(g);
  // Rank 0: Fc0m0 Fc0m1 Fc1m0 Fc1m1 Bc1m0 ... Resident w0, w2 8 + x per
  // microbatch 20 = 28. After the four forwards: a0 of both microbatches
  // (sent to layer 1, held to their backward: 200), the received a1 of
  // both (b2 reads them: 200), a2 of both (sent, held: 200). Bc1m0
  // receives da2 (100): 728; its b2 makes da1 (100) and g2 (4): 832, the
  // peak. Bc1m1's b2: a0 200 + a1 100 + a2 100 + da2 100 + g2 4 + da1 100
  // + the fresh g2 4 + 28 = 636 (Bc1m0's da1 was in flight until Bc1m1's
  // receive).
  CHECK(Simulate(g, SaveAll(g), SimOptions()).peak_bytes == 832);
}

}  // namespace ckptplan
