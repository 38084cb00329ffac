#include "ckptplan/dist/layout.h"

#include <doctest/doctest.h>

#include "ckptplan/base/errors.h"
#include "ckptplan/sim/simulator.h"
#include "ir_graphs.h"

namespace ckptplan {
namespace {

int64_t At(const CategoryBytes& bytes, Category c) { return bytes[static_cast<size_t>(c)]; }

// One forward and one backward node; the model state is all in
// TrainingState, as a loader that counts bytes per parameter gives it.
Graph ModelStateGraph(int64_t psi) {
  Graph g;
  g.source = "zero-paper";
  g.tensors = {{"x", 8, TensorKind::kInput, kNoId, kNoId},
               {"a", 8, TensorKind::kActivation, kNoId, kNoId},
               {"dx", 8, TensorKind::kActivation, kNoId, kNoId}};
  Node f;
  f.name = "f";
  f.op = "relu";
  f.inputs = {0};
  f.outputs = {1};
  Node b;
  b.name = "b";
  b.op = "relu_bwd";
  b.phase = Phase::kBackward;
  b.inputs = {1};
  b.outputs = {2};
  g.nodes = {f, b};
  g.training.optimizer = "adam";
  g.training.parameter_count = psi;
  g.training.extra_parameter_bytes = 2 * psi;    // 16-bit parameters
  g.training.implicit_gradient_bytes = 2 * psi;  // 16-bit gradients
  g.training.extra_optimizer_bytes = 12 * psi;   // K = 12: fp32 master, exp_avg, exp_avg_sq
  g.Finalize();
  return g;
}

// Parameters + gradients + optimizer state at the peak (the backward node,
// where the gradients exist).
int64_t ModelState(const Graph& g) {
  SimResult sim = Simulate(g, SaveAll(g), SimOptions());
  const CategoryBytes& at = sim.peak_breakdown;
  return At(at, Category::kParameters) + At(at, Category::kGradients) +
         At(at, Category::kOptimizerState);
}

}  // namespace

TEST_CASE("ZeRO paper: model state per device, psi = 7.5B, K = 12, N_d = 64") {
  const int64_t psi = 7'500'000'000;
  const Graph graph = ModelStateGraph(psi);
  ParallelLayout layout;
  layout.dp = 64;
  auto state = [&](int zero) {
    layout.zero = zero;
    std::vector<RankGraph> ranks = DistributeGraph(graph, layout);
    REQUIRE(ranks.size() == 1);  // flat shards: every rank alike
    CHECK(ranks[0].count == 64);
    return ModelState(ranks[0].graph);
  };
  // Baseline (2 + 2 + K) psi = 16 x 7.5e9 = 120e9: the paper's 120 GB.
  CHECK(state(0) == 120'000'000'000);
  // P_os: (2 + 2) psi + K psi / 64 = 30e9 + 1.40625e9 = 31.40625e9; the
  // paper rounds to 31.4 GB.
  CHECK(state(1) == 31'406'250'000);
  // P_os+g: 2 psi + (2 + K) psi / 64 = 15e9 + 1.640625e9 = 16.640625e9; the
  // paper's 16.6 GB.
  CHECK(state(2) == 16'640'625'000);
  // P_os+g+p: (2 + 2 + K) psi / 64 = 1.875e9; the paper rounds to 1.9 GB.
  // (7.5e9 / 64 = 117187500 exactly, so the flat shards need no padding.)
  CHECK(state(3) == 1'875'000'000);
}

TEST_CASE("DDP gradient buckets: a second copy of the gradients, or the gradients themselves") {
  const int64_t psi = 1000;
  const Graph graph = ModelStateGraph(psi);
  ParallelLayout layout;
  layout.dp = 8;
  // The paper's baseline leaves DDP's buckets out: copy mode holds them
  // resident (2 psi = 2000 in buffers) beside the 2 psi of gradients.
  std::vector<RankGraph> copy = DistributeGraph(graph, layout);
  SimResult sim = Simulate(copy[0].graph, SaveAll(copy[0].graph), SimOptions());
  CHECK(At(sim.peak_breakdown, Category::kBuffers) == 2000);
  CHECK(At(sim.peak_breakdown, Category::kGradients) == 2000);
  // gradient_as_bucket_view: the gradients live in the buckets (2000), none
  // of their own.
  layout.grad_buckets = "view";
  std::vector<RankGraph> view = DistributeGraph(graph, layout);
  sim = Simulate(view[0].graph, SaveAll(view[0].graph), SimOptions());
  CHECK(At(sim.peak_breakdown, Category::kBuffers) == 2000);
  CHECK(At(sim.peak_breakdown, Category::kGradients) == 0);
}

TEST_CASE("ZeroRedundancyOptimizer: whole parameters, largest first, to the fewest bytes") {
  Graph g;
  g.source = "zero-params";
  for (int64_t bytes : {40, 28, 20, 12, 12}) {
    g.tensors.push_back({"w" + std::to_string(g.tensors.size()), bytes, TensorKind::kParameter,
                         kNoId, kNoId});
  }
  g.tensors.push_back({"a", 4, TensorKind::kActivation, kNoId, kNoId});
  Node f;
  f.name = "f";
  f.op = "mm";
  f.inputs = {0, 1, 2, 3, 4};
  f.outputs = {5};
  g.nodes = {f};
  g.training.parameter_count = 28;          // 112 bytes of fp32
  g.training.extra_optimizer_bytes = 224;  // Adam: 8 bytes a parameter
  g.Finalize();
  // 40 -> r0; 28 -> r1; 20 -> r1 (28 < 40): 48; 12 -> r0 (40 < 48): 52;
  // 12 -> r1 (48 < 52): 60.
  ShardPlan plan = PlanShards(g, 2, "params");
  CHECK(plan.owned_bytes == std::vector<int64_t>{52, 60});
  CHECK(plan.owned[0] == std::vector<TensorId>{0, 3});
  CHECK(plan.owned[1] == std::vector<TensorId>{1, 2, 4});
  ParallelLayout layout;
  layout.dp = 2;
  layout.zero = 1;
  layout.zero_partition = "params";
  std::vector<RankGraph> ranks = DistributeGraph(g, layout);
  REQUIRE(ranks.size() == 2);
  // Optimizer state in proportion: 224 x 52 / 112 = 104 and 224 x 60 / 112 = 120.
  CHECK(ranks[0].graph.training.extra_optimizer_bytes == 104);
  CHECK(ranks[1].graph.training.extra_optimizer_bytes == 120);
  CHECK(ranks[1].dp_rank == 1);
  layout.zero = 2;
  CHECK_THROWS_AS(DistributeGraph(g, layout), InputError);
}

TEST_CASE("layout messages name a field as the plan file does, or as field_name says") {
  ParallelLayout layout;
  layout.dp = 0;
  CHECK_THROWS_WITH_AS(ValidateLayout(layout), "dp: must be at least 1 (got 0)", InputError);
  layout.dp = 2;
  layout.zero = 2;
  layout.zero_partition = "params";
  layout.field_name = [](const std::string& field) { return "<" + field + ">"; };
  CHECK_THROWS_WITH_AS(ValidateLayout(layout),
                       "<zero_partition> params is ZeroRedundancyOptimizer, which is ZeRO stage 1 "
                       "(got <zero> 2)",
                       InputError);
}

TEST_CASE("FSDP: each unit's parameters gathered around its forward and backward, prefetched") {
  testing::ScopedGraphBuilder b("fsdp");
  TensorId w0 = b.Tensor("h.0.w", 400, TensorKind::kParameter);
  TensorId w1 = b.Tensor("h.1.w", 800, TensorKind::kParameter);
  TensorId x = b.Tensor("x", 10, TensorKind::kInput);
  TensorId a0 = b.Tensor("a0", 100, TensorKind::kActivation);
  TensorId a1 = b.Tensor("a1", 100, TensorKind::kActivation);
  TensorId l = b.Tensor("l", 4, TensorKind::kActivation);
  TensorId da1 = b.Tensor("da1", 100, TensorKind::kActivation);
  TensorId da0 = b.Tensor("da0", 100, TensorKind::kActivation);
  TensorId g1 = b.Tensor("g1", 800, TensorKind::kGradient);
  TensorId g0 = b.Tensor("g0", 400, TensorKind::kGradient);
  b.Node("f0", "h.0/mlp", Phase::kForward, {x, w0}, {a0});
  b.Node("f1", "h.1/mlp", Phase::kForward, {a0, w1}, {a1});
  b.Node("loss", "loss", Phase::kForward, {a1}, {l});
  b.Node("bl", "loss", Phase::kBackward, {l}, {da1});
  b.Node("b1", "h.1/mlp", Phase::kBackward, {da1, a0, w1}, {da0, g1});
  b.Node("b0", "h.0/mlp", Phase::kBackward, {da0, x, w0}, {g0});
  const Graph g = b.Build();
  ParallelLayout layout;
  layout.dp = 4;
  layout.zero = 3;
  std::vector<RankGraph> ranks = DistributeGraph(g, layout);
  REQUIRE(ranks.size() == 1);
  const Graph& r = ranks[0].graph;
  std::vector<std::string> order;
  for (const Node& n : r.nodes) order.push_back(n.op == "all_gather" ? "G:" + n.scope : n.name);
  // Forward: h.0's gather, h.1's prefetched; backward likewise.
  CHECK(order == std::vector<std::string>{"G:h.0/mlp", "G:h.1/mlp", "f0", "f1", "loss", "bl",
                                          "G:h.1/mlp", "G:h.0/mlp", "b1", "b0"});
  SimResult sim = Simulate(r, SaveAll(r), SimOptions());
  // Shards 400/4 + 800/4 = 300 parameters, 10 input. At b1: gathers 800 + 400,
  // da1 100, a0 100, da0 100, g1's shard 200 and the full g1 while b1 runs
  // (its reduce-scatter: 800 - 200 = 600): 310 + 1200 + 300 + 200 + 600 = 2610.
  CHECK(sim.peak_bytes == 2610);
  CHECK(r.nodes[sim.steps[sim.peak_step].node].name == "b1");
  // At f0: 310 + gathers 400 + 800 + a0 100 = 1610, below the peak.
  CHECK(sim.total[2] == 1610);
}

}  // namespace ckptplan
