#include "ckptplan/plan/approx_planner.h"

#include <doctest/doctest.h>

#include "test_graphs.h"
#include "tiny_graph.h"

namespace ckptplan {
namespace {

using testing::Id;
using testing::ApproxOptionOf;
using testing::TinyGraph;

// The tiny chain with f1 (100 FLOP) and f2 (50 FLOP) as linears:
// x -f1-> a -f2-> b -f3-> c -> loss, 100-byte activations; save-all peak 510
// at f3_bwd (x 10 + a + b + c + dc + db).
constexpr const char* kLinearChain =
    "T x 10 input; T a 100; T b 100; T c 100; T l 4; T dc 100; T db 100; T da 100;"
    "F f1 mm x -> a 100; F f2 mm a -> b 50; F f3 relu b -> c 1; F s sum c -> l 1;"
    "B s_bwd sum_bwd l -> dc 1; B f3_bwd relu_bwd dc c -> db 1;"
    "B f2_bwd mm_bwd db b -> da 1; B f1_bwd mm_bwd da a -> 1";

// f1: rank 8 costs 50 (saves 50) at error 0.006, rank 16 costs 75 (saves
// 25) at 0.002. f2: rank 4 costs 20 (saves 30) at 0.005, rank 8 costs 30
// (saves 20) at 0.001.
Graph LinearChain() {
  Graph graph = TinyGraph(kLinearChain);
  graph.nodes[0].approx = {ApproxOptionOf(8, 50, 0.006), ApproxOptionOf(16, 75, 0.002)};
  graph.nodes[1].approx = {ApproxOptionOf(4, 20, 0.005), ApproxOptionOf(8, 30, 0.001)};
  return graph;
}

// a and b dropped: recomputing b for f2_bwd re-runs f1 then f2 (chain cost
// 100 + 50 = 150); f1_bwd reads the copy of a that chain made.
SimResult DropAB(const Graph& graph) {
  SaveSet keep = SaveAll(graph);
  keep[Id(graph, "a")] = 0;
  keep[Id(graph, "b")] = 0;
  return Simulate(graph, keep, SimOptions());
}

TEST_CASE("approx: the most saving within the error bound, by hand") {
  const Graph graph = LinearChain();
  const SimResult sim = DropAB(graph);
  REQUIRE(sim.recompute_cost == 150);
  REQUIRE(sim.recomputes.size() == 1);
  // Bound 0.01: f1 r8 + f2 r8 saves 50 + 20 = 70 at 0.006 + 0.001 = 0.007;
  // f1 r8 + f2 r4 (80) is 0.011, over; f1 r16 + f2 r4 saves 55. Cost
  // 150 - 70 = 80.
  ApproxPlan plan = ChooseApproximations(graph, sim, 0.01);
  REQUIRE(plan.choices.size() == 2);
  CHECK(plan.reason == NoApproxReason::kNone);
  CHECK(plan.choices[0].node == 0);
  CHECK(plan.choices[0].rank == 8);
  CHECK(plan.choices[0].cost_saved == 50);
  CHECK(plan.choices[1].node == 1);
  CHECK(plan.choices[1].rank == 8);
  CHECK(plan.choices[1].cost_saved == 20);
  CHECK(plan.cost_saved == 70);
  CHECK(plan.recompute_cost == 80);
  CHECK(plan.exact_recompute_cost == 150);
  CHECK(plan.estimated_error == doctest::Approx(0.007));
  // The chain run with both approximated: 150 - 50 - 20 = 80.
  CHECK(ApproxChainCost(plan, sim.recomputes[0]) == 80);
  CHECK(ChainApproximated(plan, sim.recomputes[0].chain));

  // Bound 0.005: f1 r16 + f2 r8 saves 25 + 20 = 45 at 0.003; f2 r4 alone
  // saves 30 at 0.005; f1 r8 (0.006) does not fit alone. Cost 150 - 45 = 105.
  plan = ChooseApproximations(graph, sim, 0.005);
  REQUIRE(plan.choices.size() == 2);
  CHECK(plan.choices[0].rank == 16);
  CHECK(plan.choices[1].rank == 8);
  CHECK(plan.recompute_cost == 105);
  CHECK(plan.estimated_error == doctest::Approx(0.003));
}

TEST_CASE("approx: says why nothing is approximated") {
  const Graph graph = LinearChain();
  // Bound 0.0005: every option is over it; the lowest is f2's rank 8, 0.001.
  ApproxPlan plan = ChooseApproximations(graph, DropAB(graph), 0.0005);
  CHECK(!plan.any());
  CHECK(plan.reason == NoApproxReason::kErrorOverBudget);
  CHECK(plan.recompute_cost == 150);
  CHECK(DescribeNoApprox(graph, plan) ==
        "every option is over the error bound: the lowest, node 'f2' at rank 8, has error "
        "0.001 > 0.0005");
  // max_error 0: exact plans, nothing to say.
  plan = ChooseApproximations(graph, DropAB(graph), 0);
  CHECK(plan.reason == NoApproxReason::kExact);
  CHECK(DescribeNoApprox(graph, plan).empty());
  // Save-all recomputes nothing.
  plan = ChooseApproximations(graph, Simulate(graph, SaveAll(graph), SimOptions()), 0.01);
  CHECK(plan.reason == NoApproxReason::kNothingRecomputed);
  CHECK(DescribeNoApprox(graph, plan) == "the plan recomputes nothing");
  // Only c dropped: its chain re-runs f3 (relu), which has no options.
  SaveSet keep = SaveAll(graph);
  keep[Id(graph, "c")] = 0;
  plan = ChooseApproximations(graph, Simulate(graph, keep, SimOptions()), 0.01);
  CHECK(plan.reason == NoApproxReason::kNotRerun);
  // No approx fields at all.
  const Graph plain = TinyGraph(kLinearChain);
  plan = ChooseApproximations(plain, DropAB(plain), 0.01);
  CHECK(plan.reason == NoApproxReason::kNoApproxFields);
  CHECK(DescribeNoApprox(plain, plan).find("no \"approx\" fields") != std::string::npos);
  // Options that cost as much as the node save nothing.
  Graph costly = LinearChain();
  costly.nodes[0].approx = {ApproxOptionOf(8, 100, 0.001)};
  costly.nodes[1].approx = {ApproxOptionOf(8, 60, 0.001)};
  plan = ChooseApproximations(costly, DropAB(costly), 0.01);
  CHECK(plan.reason == NoApproxReason::kNoSaving);
}

TEST_CASE("approx: an option of error 0 joins the others") {
  Graph graph = LinearChain();
  graph.nodes[0].approx = {ApproxOptionOf(8, 60, 0.004)};  // saves 40
  graph.nodes[1].approx = {ApproxOptionOf(4, 10, 0.004), ApproxOptionOf(32, 45, 0)};  // saves 40, 5
  // Bound 0.005 holds one 0.004 option. f1 r8 (40) with f2 r32 (5, error 0)
  // saves 45; f2 r4 (40) leaves f1 nothing that fits, 40.
  ApproxPlan plan = ChooseApproximations(graph, DropAB(graph), 0.005);
  REQUIRE(plan.choices.size() == 2);
  CHECK(plan.choices[0].node == 0);
  CHECK(plan.choices[1].rank == 32);
  CHECK(plan.cost_saved == 45);
  CHECK(plan.estimated_error == doctest::Approx(0.004));
}

TEST_CASE("approx: re-planning on the approximate costs drops the cheaper linear") {
  Graph graph = LinearChain();
  graph.nodes[0].approx = {ApproxOptionOf(4, 10, 0.001)};  // f1: 100 -> 10
  graph.nodes[1].approx.clear();
  PlannerOptions options;
  // Budget 410: dropping b (f3_bwd: x + a + c + dc + db = 410; f2_bwd after
  // re-running f2: x + a + b' + db + da = 410) costs f2's 50; dropping a
  // (f3_bwd: x + b + c + dc + db = 410; f1_bwd after re-running f1:
  // x + a' + da = 210) costs f1's 100 exactly, 10 approximately.
  options.budget_bytes = 410;
  const PlannerResult exact = PlanGraph(graph, options);
  REQUIRE(exact.fits);
  CHECK(exact.recompute_cost == 50);
  CHECK(exact.keep[Id(graph, "b")] == 0);
  // The exact plan re-runs only f2, which has no options.
  CHECK(ChooseApproximations(graph, Simulate(graph, exact.keep, SimOptions()), 0.01).reason ==
        NoApproxReason::kNotRerun);
  const ApproxPlanned planned = PlanApproximations(graph, options, exact, 0.01);
  CHECK(planned.found.fits);
  CHECK(planned.found.peak == 410);
  CHECK(planned.found.keep[Id(graph, "a")] == 0);
  CHECK(planned.found.keep[Id(graph, "b")] == 1);
  CHECK(planned.found.recompute_cost == 100);  // exact cost of the drop set
  CHECK(planned.approx.recompute_cost == 10);  // 100 - 90 saved
  CHECK(planned.approx.estimated_error == doctest::Approx(0.001));
  CHECK(planned.replans == 1);
  // With a bound under f1's error the exact plan stays, byte for byte.
  const ApproxPlanned tight = PlanApproximations(graph, options, exact, 0.0001);
  CHECK(tight.found.keep == exact.keep);
  CHECK(!tight.approx.any());
}

TEST_CASE("approx: in a graph timed in microseconds options cost their time_us") {
  // Every node timed: f1 40 us (100 FLOP), f2 20 us (50 FLOP), the rest 1 us.
  Graph graph = LinearChain();
  for (Node& node : graph.nodes) node.time_us = 1;
  graph.nodes[0].time_us = 40;
  graph.nodes[1].time_us = 20;
  graph.Finalize();
  REQUIRE(graph.cost_unit == CostUnit::kMicroseconds);
  // f1 r8 given 10 us (saves 30); f2 r8 without time_us: 20 us x 30 / 50
  // FLOP = 12 us (saves 8). Both within 0.01 (0.007): 38 of the chain's
  // 60 us saved, 22 us left.
  graph.nodes[0].approx[0].time_us = 10;
  ApproxPlan plan = ChooseApproximations(graph, DropAB(graph), 0.01);
  REQUIRE(plan.choices.size() == 2);
  CHECK(plan.exact_recompute_cost == 60);
  CHECK(plan.choices[0].cost_saved == 30);
  CHECK(plan.choices[1].cost_saved == doctest::Approx(8));
  CHECK(plan.recompute_cost == doctest::Approx(22));
}

TEST_CASE("approx: a plan file's approximations, evaluated") {
  const Graph graph = LinearChain();
  const SimResult sim = DropAB(graph);
  // f1 at rank 16 (option 1): saves 100 - 75 = 25 once.
  ApproxPlan plan = EvaluateApproximations(graph, sim, {{0, 1}}, 0.01);
  REQUIRE(plan.choices.size() == 1);
  CHECK(plan.choices[0].reruns == 1);
  CHECK(plan.recompute_cost == 125);
  // Save-all re-runs nothing: the choice is recorded with no rerun.
  plan = EvaluateApproximations(graph, Simulate(graph, SaveAll(graph), SimOptions()), {{0, 1}},
                                0.01);
  CHECK(plan.choices[0].reruns == 0);
  CHECK(plan.cost_saved == 0);
}

}  // namespace
}  // namespace ckptplan
