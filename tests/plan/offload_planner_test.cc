#include "ckptplan/plan/offload_planner.h"

#include <doctest/doctest.h>

#include <random>

#include "ckptplan/ir/synth.h"
#include "offload_graphs.h"
#include "tiny_graph.h"

namespace ckptplan {
namespace {

// The graph of tests/sim/offload_test.cc: save-all peaks at 2300 B at g1; the
// lower bound is 2100 B (f2: x 100 + a 1000 + b 1000).
constexpr const char* kOffloadChain =
    "T x 100 input; T a 1000; T b 1000; T c 100; T gb 100; T gb2 100; T ga 100;"
    "F f1 op x -> a 10; F f2 op a -> b 10; F f3 op b -> c 10;"
    "B g1 op c b -> gb 10; B g1b op gb -> gb2 10; B g2 op gb2 a -> ga 10";

// Both ways at `bytes_per_us`.
OffloadOptions Link(const Graph& graph, double bytes_per_us) {
  return testing::OffloadLink(graph, bytes_per_us, bytes_per_us);
}

PlannerOptions Budget(int64_t bytes) {
  PlannerOptions options;
  options.budget_bytes = bytes;
  return options;
}

TEST_CASE("offload planner: where the link hides the copies, offload beats recompute") {
  const Graph graph = testing::TinyGraph(kOffloadChain);
  const PlannerOptions options = Budget(2100);
  const PlannerResult recompute_only = PlanGraph(graph, options);
  // Recompute-only: drop a (re-run f1 before g2, 10 FLOP): f2 2100 is the peak.
  REQUIRE(recompute_only.fits);
  CHECK(recompute_only.recompute_cost == 10);
  // 1000 B/us: a's copies take 1 us each and overlap f2 and g1b (see
  // offload_test.cc): peak 2100, exposed 0 us, so cost 0 < 10.
  const OffloadPlan plan = PlanOffload(graph, options, Link(graph, 1000), recompute_only);
  CHECK(plan.fits);
  CHECK(plan.peak == 2100);
  REQUIRE(plan.offloaded.size() == 1);
  CHECK(graph.tensors[plan.offloaded[0]].name == "a");
  CHECK(plan.recompute_cost == 0);
  CHECK(plan.exposed_cost == 0);
  CHECK(plan.cost() < recompute_only.recompute_cost);
}

TEST_CASE("offload planner: a link too slow to help leaves the recompute plan") {
  const Graph graph = testing::TinyGraph(kOffloadChain);
  const PlannerOptions options = Budget(2100);
  const PlannerResult recompute_only = PlanGraph(graph, options);
  // 50 B/us: a's copy out takes 20 us, to 30 us, so a lives through f3 (2200 B);
  // the copy back (20 us, due at 50 us) starts at g1 (2300 B). Offloading a
  // alone never gets to 2100, and with a recomputed nothing is left to gain.
  const OffloadPlan plan = PlanOffload(graph, options, Link(graph, 50), recompute_only);
  CHECK(plan.fits);
  CHECK(plan.offloaded.empty());
  CHECK(plan.cost() == recompute_only.recompute_cost);
}

TEST_CASE("offload planner: never costlier than recompute-only, and re-measures the same") {
  // Random bandwidths and node times on synthetic graphs, at budgets between
  // the lowest peak and save-all.
  std::mt19937 random(7);
  int cheaper = 0;  // rounds where offload lowered the cost
  for (int round = 0; round < 12; ++round) {
    RandomGraphOptions shape;
    shape.layers = 4 + round % 5;
    shape.seed = 100 + round;
    const Graph graph = RandomTrainingGraph(shape);
    const int64_t save_all = Simulate(graph, SaveAll(graph), {0, false}).peak_bytes;
    const PlannerResult lowest = PlanGraph(graph, Budget(0));
    const double fraction = std::uniform_real_distribution<double>(0, 1)(random);
    const int64_t budget =
        lowest.peak + static_cast<int64_t>(fraction * static_cast<double>(save_all - lowest.peak));
    const PlannerOptions options = Budget(budget);
    OffloadOptions offload;
    const double bytes_per_us = std::uniform_real_distribution<double>(1, 1e5)(random);
    offload.link = {bytes_per_us * 1e6, bytes_per_us * 1e6};
    offload.node_time_us = NodeTimes(graph, std::uniform_real_distribution<double>(0.1, 100)(random));
    const PlannerResult recompute_only = PlanGraph(graph, options);
    const OffloadPlan plan = PlanOffload(graph, options, offload, recompute_only);
    CAPTURE(round);
    if (recompute_only.fits) {
      CHECK(plan.fits);
      CHECK(plan.cost() <= recompute_only.recompute_cost);
      cheaper += plan.cost() < recompute_only.recompute_cost;
    }
    const OffloadPlan again = MeasureOffloadPlan(graph, plan.keep, plan.offloaded, offload, options);
    CHECK(again.peak == plan.peak);
    CHECK(again.cost() == plan.cost());
  }
  CHECK(cheaper >= 6);  // 10 of the 12 with this seed
}

}  // namespace
}  // namespace ckptplan
