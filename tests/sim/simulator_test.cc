#include "ckptplan/sim/simulator.h"

#include <doctest/doctest.h>

#include <numeric>
#include <random>

#include "ckptplan/base/limits.h"
#include "ckptplan/ir/synth.h"
#include "ckptplan/sim/drop_delta.h"  // SimResultDifference
#include "test_graphs.h"

namespace ckptplan {
namespace {

using testing::GraphBuilder;
using testing::Id;
constexpr Phase F = Phase::kForward, B = Phase::kBackward, O = Phase::kOptimizer;

int64_t At(const SimResult& sim, uint32_t step, Category category) {
  return sim.by_category[step][static_cast<size_t>(category)];
}

TEST_CASE("save-all timeline of the chain graph, step by step") {
  Graph graph = testing::ChainGraph();
  SimResult sim = Simulate(graph, SaveAll(graph), {0, true});
  // Resident 124 = x 100 + w 8 + Adam 2 params x 8 B.
  // f:     124 + a 1000                      = 1124
  // g:     124 + a 1000 + b 2000             = 3124
  // h:     124 + a + b + loss 4              = 3128 (loss never read: freed after h)
  // h_bwd: 124 + a + b + db 2000             = 5124 (b's last read)
  // g_bwd: 124 + a + db + da 1000            = 4124
  // f_bwd: 124 + da + dw 8                   = 1132
  // opt:   124 + dw 8                        = 132
  CHECK(sim.total == std::vector<int64_t>{1124, 3124, 3128, 5124, 4124, 1132, 132});
  CHECK(sim.peak_bytes == 5124);
  CHECK(sim.peak_step == 3);
  CHECK(At(sim, 3, Category::kSavedActivations) == 3000);  // a + b
  CHECK(At(sim, 3, Category::kTemporaries) == 2000);       // db
  CHECK(At(sim, 3, Category::kOptimizerState) == 16);
  CHECK(At(sim, 3, Category::kInputs) == 100);
  CHECK(At(sim, 5, Category::kGradients) == 8);  // dw from f_bwd to the end
  CHECK(At(sim, 6, Category::kGradients) == 8);
  CHECK(sim.recompute_cost == 0);
  CHECK(sim.step_cost == 920);  // 100 + 200 + 10 + 10 + 400 + 200 + 0
}

TEST_CASE("dropping a recomputes it before g_bwd and lowers the peak") {
  Graph graph = testing::ChainGraph();
  SaveSet keep = SaveAll(graph);
  keep[Id(graph, "a")] = 0;
  SimResult sim = Simulate(graph, keep, {0, true});
  // f 1124; g 3124 (a's last forward read); h: b + loss = 2128;
  // h_bwd: b + db = 4124; recompute f: db + a' = 3124;
  // g_bwd: db + a' + da = 4124; f_bwd: da + dw = 1132; opt: 132.
  CHECK(sim.total == std::vector<int64_t>{1124, 3124, 2128, 4124, 3124, 4124, 1132, 132});
  CHECK(sim.peak_bytes == 4124);
  REQUIRE(sim.steps.size() == 8);
  CHECK(sim.steps[4].recompute);
  CHECK(graph.nodes[sim.steps[4].node].name == "f");
  CHECK(At(sim, 5, Category::kRecomputed) == 1000);
  REQUIRE(sim.recomputes.size() == 1);
  CHECK(sim.recompute_cost == 100);  // f once
}

TEST_CASE("a recompute chain re-runs missing ancestors and counts their cost") {
  // x -> f -> a -> g(relu) -> b -> h -> loss. The backward reads only b, so
  // a is no candidate: recomputing b needs f then g. SGD: no optimizer state.
  GraphBuilder b;
  b.Tensor("x", 100, TensorKind::kInput).Tensor("w", 8, TensorKind::kParameter);
  b.Tensor("a", 1000).Tensor("b", 2000).Tensor("loss", 4).Tensor("db", 2000).Tensor("da", 1000);
  b.Tensor("dw", 8, TensorKind::kGradient);
  b.Node("f", "matmul", F, {"x", "w"}, {"a"}, 100).Node("g", "relu", F, {"a"}, {"b"}, 200);
  b.Node("h", "loss", F, {"b"}, {"loss"}, 10).Node("h_bwd", "loss_bwd", B, {"b"}, {"db"}, 10);
  b.Node("g_bwd", "relu_bwd", B, {"db", "b"}, {"da"}, 400);
  b.Node("f_bwd", "mm_bwd", B, {"da", "x", "w"}, {"dw"}, 200);
  b.Node("opt", "sgd", O, {"w", "dw"}, {});
  b.training().optimizer = "sgd";
  b.training().parameter_count = 2;
  Graph graph = b.Build();
  CHECK(SaveCandidates(graph) == std::vector<TensorId>{Id(graph, "b")});
  SaveSet keep = SaveAll(graph);
  keep[Id(graph, "b")] = 0;
  SimResult sim = Simulate(graph, keep, {0, true});
  // Resident 108 = x 100 + w 8.
  // f 1108; g: a + b 3108; h: b + loss 2112 (b's last forward read);
  // recompute f: a' 1108; recompute g: a' + b' 3108 (a' freed after);
  // h_bwd: b' + db 4108; g_bwd: b' + db + da 5108; f_bwd: da + dw 1116; opt 116.
  CHECK(sim.total ==
        std::vector<int64_t>{1108, 3108, 2112, 1108, 3108, 4108, 5108, 1116, 116});
  REQUIRE(sim.recomputes.size() == 1);
  const Recompute& record = sim.recomputes[0];
  CHECK(record.tensor == Id(graph, "b"));
  REQUIRE(record.chain.size() == 2);
  CHECK(graph.nodes[record.chain[0]].name == "f");
  CHECK(graph.nodes[record.chain[1]].name == "g");
  CHECK(record.cost == 300);  // f 100 + g 200
  CHECK(sim.recompute_cost == 300);
  CHECK(At(sim, 4, Category::kRecomputed) == 3000);  // a' + b'
}

TEST_CASE("aliases share storage, workspace lives one step, reserve is constant") {
  // v is a view of a (no bytes of its own); the backward reads v, so a's
  // storage stays; node g needs 500 B of workspace while it runs.
  GraphBuilder b;
  b.Tensor("x", 10, TensorKind::kInput).Tensor("a", 1000);
  b.Tensor("v", 1000, TensorKind::kActivation, "a");  // 250 float32, a's storage
  b.Tensor("b", 300).Tensor("db", 300).Tensor("dx", 10);
  b.Node("f", "exp", F, {"x"}, {"a"}).Node("view", "view", F, {"a"}, {"v"});
  b.Node("g", "sum", F, {"v"}, {"b"}, -1, 500);
  b.Node("g_bwd", "sum_bwd", B, {"b"}, {"db"}).Node("f_bwd", "exp_bwd", B, {"db", "v"}, {"dx"});
  Graph graph = b.Build();
  SimResult sim = Simulate(graph, SaveAll(graph), {64, true});
  // Resident: x 10 + reserve 64 = 74.
  // f: a 1000 -> 1074; view: a (v adds nothing) -> 1074;
  // g: a + b 300 + workspace 500 -> 1874; g_bwd: a + b + db 300 -> 1674;
  // f_bwd: a + db + dx 10 -> 1384.
  CHECK(sim.total == std::vector<int64_t>{1074, 1074, 1874, 1674, 1384});
  CHECK(At(sim, 2, Category::kTemporaries) == 500);  // the workspace
  CHECK(At(sim, 0, Category::kReserve) == 64);
  CHECK(At(sim, 4, Category::kSavedActivations) == 1000);  // a, kept for v
}

TEST_CASE("implicit gradients and optimizer state from the training block") {
  // 1000 parameters given only as a count: fp32 params 4000 B, AdamW state
  // 8000 B, and bf16 gradients 2000 B that appear at the first backward node.
  // (json_loader_test checks the loader derives these from a training block
  // {"optimizer":"adamw","parameter_count":1000,"gradient_dtype":"bfloat16"}.)
  GraphBuilder b;
  b.Tensor("x", 10, TensorKind::kInput).Tensor("a", 100).Tensor("da", 100);
  b.Node("f", "exp", F, {"x"}, {"a"}).Node("f_bwd", "exp_bwd", B, {"a"}, {"da"});
  b.Node("step", "adamw", O, {}, {});
  TrainingState& training = b.training();
  training.optimizer = "adamw";
  training.parameter_count = 1000;
  training.extra_parameter_bytes = 4000;    // 1000 x fp32
  training.extra_optimizer_bytes = 8000;    // 1000 x 8 B of moments
  training.implicit_gradient_bytes = 2000;  // 1000 x bf16
  Graph graph = b.Build();
  SimResult sim = Simulate(graph, SaveAll(graph), {0, true});
  // f: 10 + 4000 + 8000 + a 100 = 12110
  // f_bwd: 12010 + a + da 100 + gradients 2000 = 14210
  // step: 12010 + gradients 2000 = 14010
  CHECK(sim.total == std::vector<int64_t>{12110, 14210, 14010});
  CHECK(At(sim, 1, Category::kGradients) == 2000);
  CHECK(At(sim, 0, Category::kGradients) == 0);
  CHECK(At(sim, 0, Category::kParameters) == 4000);
  CHECK(At(sim, 0, Category::kOptimizerState) == 8000);
}

TEST_CASE("the largest accepted graph and reserve simulate without overflow") {
  // x 2^59 (input) + a 2^58 + loss 2^57 + da 2^57 = 2^60 bytes: the limit.
  GraphBuilder b;  // Build() validates against the default Limits
  b.Tensor("x", int64_t{1} << 59, TensorKind::kInput).Tensor("a", int64_t{1} << 58);
  b.Tensor("loss", int64_t{1} << 57).Tensor("da", int64_t{1} << 57);
  b.Node("f", "f", F, {"x"}, {"a"}).Node("l", "l", F, {"a"}, {"loss"});
  b.Node("lb", "lb", B, {"loss", "a"}, {"da"});
  Graph graph = b.Build();
  SimOptions options;
  options.reserve_bytes = kMaxReserveBytes;  // 2^62
  CHECK_NOTHROW(CheckReserve(options.reserve_bytes, "--reserve"));
  SimResult sim = Simulate(graph, SaveAll(graph), options);
  // At lb everything is live: 2^60 graph bytes + 2^62 reserve.
  CHECK(sim.peak_bytes == (int64_t{1} << 60) + (int64_t{1} << 62));
  // Recomputing a: the original is freed after l and a copy is made before
  // lb, so lb again holds x + a + loss + da + reserve = 2^60 + 2^62.
  SaveSet keep = SaveAll(graph);
  keep[testing::Id(graph, "a")] = 0;
  CHECK(Simulate(graph, keep, options).peak_bytes == (int64_t{1} << 60) + (int64_t{1} << 62));
}

TEST_CASE("lower bound is resident state plus the largest single step") {
  Graph graph = testing::ChainGraph();
  LowerBound bound = ComputeLowerBound(graph, 0);
  // h_bwd needs b 2000 + db 2000; g_bwd needs db + a + da = 4000 too, the
  // first such node wins: 124 + 4000 = 4124.
  CHECK(bound.bytes == 4124);
  CHECK(graph.nodes[bound.node].name == "h_bwd");
  CHECK(bound.step_bytes == 4000);
}

// The totals (one difference array, workspace and implicit gradients added
// as the steps are summed) equal each category row's sum (a difference
// array per category), and recording categories changes neither totals nor
// peaks: on random plans, on whole steps and on regions.
TEST_CASE("property: totals without categories equal the categories' sums") {
  std::mt19937_64 rng(17);
  size_t compared = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Graph graph;
    if (seed % 4 == 0) {
      graph = testing::SmallTransformer(1 + static_cast<int>(seed % 3));
    } else {
      graph = testing::Copies(testing::RandomStep(seed, 3), 1 + seed % 3);
    }
    // Workspace on some nodes, implicit gradients on some steps.
    for (Node& node : graph.nodes) node.workspace_bytes = rng() % 3 == 0 ? rng() % 50 : 0;
    graph.training.implicit_gradient_bytes = seed % 2 == 0 ? 33 : 0;
    CAPTURE(seed);
    SimContext context(graph);
    const std::vector<Region> ranges = testing::RegionsAndStep(context);
    for (int plan = 0; plan < 5; ++plan) {
      SaveSet keep = SaveAll(graph);
      for (TensorId t : context.candidates) keep[t] = rng() % 3 != 0;
      for (const Region& range : ranges) {
        SimOptions by_category;
        by_category.reserve_bytes = 7;
        by_category.record_categories = true;
        by_category.first_node = range.first;
        by_category.end_node = range.end;
        SimOptions plain = by_category;
        plain.record_categories = false;
        plain.record_details = false;
        const SimResult a = Simulate(context, keep, by_category);
        const SimResult b = Simulate(context, keep, plain);
        CHECK(a.total == b.total);
        CHECK(a.node_peak == b.node_peak);
        CHECK(a.peak_bytes == b.peak_bytes);
        CHECK(a.peak_step == b.peak_step);
        for (size_t s = 0; s < a.total.size(); ++s) {
          const CategoryBytes& row = a.by_category[s];
          CHECK(std::accumulate(row.begin(), row.end(), int64_t{0}) == a.total[s]);
        }
        ++compared;
      }
    }
  }
  CHECK(compared > 200);
}


// Simulate keeps each range's leading forward steps in the context and
// copies them on later calls (SimContext::Scratch). A context reused across
// plans and ranges, in an interleaved order, gives what a fresh context does,
// down to each step, storage and recompute.
TEST_CASE("property: a reused context simulates as a fresh one") {
  std::mt19937_64 rng(29);
  size_t compared = 0, resumed = 0;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    const Graph graph = seed % 4 == 0 ? testing::SmallTransformer(1 + static_cast<int>(seed % 3))
                                      : testing::Copies(testing::RandomStep(seed, 3), 1 + seed % 3);
    CAPTURE(seed);
    SimContext context(graph);
    const std::vector<Region> ranges = testing::RegionsAndStep(context);
    for (int call = 0; call < 30; ++call) {
      SaveSet keep = SaveAll(graph);
      for (TensorId t : context.candidates) keep[t] = rng() % 3 != 0;
      const Region& range = ranges[rng() % ranges.size()];
      SimOptions options;
      options.first_node = range.first;
      options.end_node = range.end;
      options.record_details = rng() % 2 == 0;
      resumed += context.scratch.prefixes.count((uint64_t{range.first} << 32) | range.end);
      const SimResult reused = Simulate(context, keep, options);
      const SimResult fresh = Simulate(graph, keep, options);
      CHECK(SimResultDifference(reused, fresh) == "");
      ++compared;
    }
  }
  CHECK(compared == 16 * 30);
  // Most calls start from a kept prefix (every range here starts with
  // forward nodes), so the comparison covers the copying.
  CHECK(resumed > compared / 2);
}

}  // namespace
}  // namespace ckptplan
