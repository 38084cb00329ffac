// Approximate recompute's memory: an approximated re-run's workspace and
// factors in the simulated peak (sim/simulator.h), and the planner choosing
// only approximations whose re-simulated plan fits the budget.
#include <doctest/doctest.h>

#include <string>

#include "ckptplan/plan/approx_planner.h"
#include "tiny_graph.h"

namespace ckptplan {
namespace {

using testing::Id;
using testing::ApproxOptionOf;
using testing::TinyGraph;

// Two linears, f1 (100 FLOP) and f2 (50 FLOP), 100-byte activations, input
// x 10 bytes (resident).
constexpr const char* kTwoLayers =
    "T x 10 input; T a 100; T b 100; T c 100; T l 4; T dc 100; T db 100; T da 100;"
    "F f1 mm x -> a 100; F f2 mm a -> b 50; F f3 relu b -> c 1; F s sum c -> l 1;"
    "B s_bwd sum_bwd l -> dc 1; B f3_bwd relu_bwd dc c -> db 1;"
    "B f2_bwd mm_bwd db b -> da 1; B f1_bwd mm_bwd da a -> 1";

// f1: rank 8 (saves 50, error 0.006), rank 16 (saves 25, 0.002), no memory
// of their own. f2: rank 4 (saves 30, 0.005; x @ A 40 B, basis 8 B), rank 8
// (saves 20, 0.001; x @ A 150 B, basis 16 B).
Graph TwoLayers() {
  Graph graph = TinyGraph(kTwoLayers);
  graph.nodes[0].approx = {ApproxOptionOf(8, 50, 0.006), ApproxOptionOf(16, 75, 0.002)};
  graph.nodes[1].approx = {ApproxOptionOf(4, 20, 0.005, 40, 8),
                           ApproxOptionOf(8, 30, 0.001, 150, 16)};
  return graph;
}

// a and b dropped. Steps (bytes: storages + x's 10):
//   0 f1 a 110; 1 f2 a b 210; 2 f3 b c 210; 3 s c l 214; 4 s_bwd c l dc 214;
//   5 f3_bwd c dc db 310; 6 f1 (re-run) db a' 210; 7 f2 (re-run) db a' b' 310;
//   8 f2_bwd db a' b' da 410; 9 f1_bwd a' da 210. Exact peak 410 at step 8.
SaveSet DropAB(const Graph& graph) {
  SaveSet keep = SaveAll(graph);
  keep[Id(graph, "a")] = 0;
  keep[Id(graph, "b")] = 0;
  return keep;
}

SimResult SimulateWith(const Graph& graph, const SaveSet& keep, uint32_t f1, uint32_t f2) {
  std::vector<uint32_t> options(graph.nodes.size(), kNoId);
  options[0] = f1;
  options[1] = f2;
  SimOptions sim;
  sim.approx_options = &options;
  sim.record_categories = true;
  return Simulate(graph, keep, sim);
}

TEST_CASE("approx memory: the re-run's workspace and the factors in the simulated peak") {
  const Graph graph = TwoLayers();
  const SaveSet keep = DropAB(graph);
  const SimResult exact = Simulate(graph, keep, SimOptions());
  REQUIRE(exact.peak_bytes == 410);  // step 8, above
  REQUIRE(exact.steps[7].recompute);
  REQUIRE(exact.steps[7].node == 1);
  // f2 at rank 8: its re-run (step 7) holds x @ A, 150 B: 310 + 150 = 460, and
  // the basis, 16 B, lives all step: 476 at step 7 (step 8: 410 + 16 = 426).
  const SimResult rank8 = SimulateWith(graph, keep, kNoId, 1);
  CHECK(rank8.peak_bytes == 476);
  CHECK(rank8.peak_step == 7);
  CHECK(rank8.total[8] == 426);
  // Temporaries at step 7: db (100) + x @ A (150).
  CHECK(rank8.peak_breakdown[size_t(Category::kTemporaries)] == 250);
  CHECK(exact.total[7] == 310);  // the exact re-run of f2: db a' b' + x
  CHECK(rank8.peak_breakdown[size_t(Category::kBuffers)] == 16);  // the basis
  // The forward's f2 (step 1) runs exactly: 210 + 16, no workspace.
  CHECK(rank8.total[1] == 226);
  // f2 at rank 4: step 7 310 + 40 + 8 = 358, step 8 410 + 8 = 418: the peak
  // stays at f2_bwd.
  const SimResult rank4 = SimulateWith(graph, keep, kNoId, 0);
  CHECK(rank4.total[7] == 358);
  CHECK(rank4.peak_bytes == 418);
  CHECK(rank4.peak_step == 8);
  // Options without memory fields: the exact plan's bytes (f1 at rank 8).
  const SimResult plain = SimulateWith(graph, keep, 0, kNoId);
  CHECK(plain.total == exact.total);
}

ApproxPlan Choose(const Graph& graph, const SaveSet& keep, double max_error, int64_t budget) {
  ApproxFit fit;
  fit.keep = &keep;
  fit.budget_bytes = budget;
  return ChooseApproximations(graph, Simulate(graph, keep, SimOptions()), max_error, &fit);
}

TEST_CASE("approx memory: the planner chooses a lower rank, or none, when the memory does "
          "not fit") {
  const Graph graph = TwoLayers();
  const SaveSet keep = DropAB(graph);
  // No budget: f1 r8 + f2 r8 saves 50 + 20 = 70 at error 0.007 <= 0.01 (f1 r8
  // + f2 r4 is 0.011, over; f1 r16 + f2 r4 saves 55).
  ApproxPlan free = ChooseApproximations(graph, Simulate(graph, keep, SimOptions()), 0.01);
  REQUIRE(free.choices.size() == 2);
  CHECK(free.choices[1].rank == 8);
  CHECK(free.peak_bytes == -1);
  // Budget 430: f2 r8 peaks at 476 (above), over it; f2 r4 alone 418 fits.
  // Within 0.01 the most saving is then f1 r16 + f2 r4, 25 + 30 = 55 at
  // 0.002 + 0.005 = 0.007: f2 at the lower rank. Peak 418 (f1's options hold
  // no memory), cost 150 - 55 = 95.
  ApproxPlan plan = Choose(graph, keep, 0.01, 430);
  REQUIRE(plan.choices.size() == 2);
  CHECK(plan.choices[0].rank == 16);
  CHECK(plan.choices[1].rank == 4);
  CHECK(plan.cost_saved == 55);
  CHECK(plan.recompute_cost == 95);
  CHECK(plan.peak_bytes == 418);
  CHECK(SimulateWith(graph, keep, 1, 0).peak_bytes == 418);  // re-simulated
  // Budget 415: f2 r4 (418) does not fit either: f2 none, f1 r8 alone (saves
  // 50), peak 410, the exact plan's.
  plan = Choose(graph, keep, 0.01, 415);
  REQUIRE(plan.choices.size() == 1);
  CHECK(plan.choices[0].node == 0);
  CHECK(plan.choices[0].rank == 8);
  CHECK(plan.peak_bytes == 410);
  // Only f2 has options, budget 412: none fits; the reason names the lowest
  // peak, f2 at rank 4 peaking at 418.
  Graph second = graph;
  second.nodes[0].approx.clear();
  plan = Choose(second, keep, 0.01, 412);
  CHECK(!plan.any());
  CHECK(plan.reason == NoApproxReason::kMemoryOverBudget);
  CHECK(DescribeNoApprox(second, plan) ==
        "every option within the error bound makes the plan's peak exceed the budget (its "
        "re-run's workspace and factors): the lowest, node 'f2' at rank 4, peaks at 418 bytes > "
        "412");
}

TEST_CASE("approx memory: two approximations that fit alone but not together") {
  Graph graph = TwoLayers();
  graph.nodes[0].approx[0].factor_bytes = 10;  // f1 r8 keeps a 10-byte basis
  const SaveSet keep = DropAB(graph);
  // Alone: f1 r8 410 + 10 = 420, f2 r4 418; together 410 + 10 + 8 = 428
  // (step 8; step 7 is 310 + 18 + 40 = 368).
  CHECK(SimulateWith(graph, keep, 0, kNoId).peak_bytes == 420);
  CHECK(SimulateWith(graph, keep, 0, 0).peak_bytes == 428);
  // Bound 0.02, budget 425: the knapsack's f1 r8 + f2 r4 (saves 80 at 0.011)
  // peaks at 428, over. Changes: f1 to r16 (no basis) keeps 25 + 30 = 55 and
  // peaks at 418; dropping f2 keeps 50 (420); dropping f1 keeps 30 (418).
  // The most saving that fits: f1 r16 + f2 r4.
  const ApproxPlan plan = Choose(graph, keep, 0.02, 425);
  REQUIRE(plan.choices.size() == 2);
  CHECK(plan.choices[0].rank == 16);
  CHECK(plan.choices[1].rank == 4);
  CHECK(plan.cost_saved == 55);
  CHECK(plan.peak_bytes == 418);
  // Budget 430: together they fit (428): kept.
  const ApproxPlan roomy = Choose(graph, keep, 0.02, 430);
  CHECK(roomy.cost_saved == 80);
  CHECK(roomy.peak_bytes == 428);
}

TEST_CASE("approx memory: PlanApproximations keeps every plan within the budget") {
  const Graph graph = TwoLayers();
  PlannerOptions options;
  options.budget_bytes = 430;
  const PlannerResult exact = PlanGraph(graph, options);
  REQUIRE(exact.fits);
  const ApproxPlanned planned = PlanApproximations(graph, options, exact, 0.01);
  std::vector<uint32_t> by_node = ApproxOptionsByNode(graph, planned.approx);
  SimOptions sim;
  sim.approx_options = &by_node;
  const int64_t peak = Simulate(graph, planned.found.keep, sim).peak_bytes;
  CHECK(peak <= 430);
  CHECK(planned.found.peak == peak);
}

}  // namespace
}  // namespace ckptplan
