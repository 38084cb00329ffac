// Plans with offload, written to a plan file and read back, re-simulate to the
// peak they were planned at (as `ckptplan simulate --plan` does).
#include <doctest/doctest.h>

#include <random>

#include "ckptplan/emit/plan_io.h"
#include "ckptplan/ir/synth.h"
#include "ckptplan/plan/offload_planner.h"
#include "ckptplan/plan/planner.h"
#include "ckptplan/sim/offload.h"

namespace ckptplan {
namespace {

TEST_CASE("plans with offload re-simulate from the plan file to the same peak") {
  // Random graphs, link rates (each direction its own) and compute rates, at
  // random budgets between the lowest recompute-only peak and save-all.
  std::mt19937 random(11);
  auto uniform = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(random);
  };
  int offloading = 0;  // rounds whose plan offloads something
  for (int round = 0; round < 12; ++round) {
    CAPTURE(round);
    RandomGraphOptions shape;
    shape.layers = 4 + round % 5;
    shape.seed = 300 + round;
    const Graph graph = RandomTrainingGraph(shape);
    SimOptions recorded;
    recorded.record_categories = true;
    const SimResult save_all = Simulate(graph, SaveAll(graph), recorded);
    PlannerOptions options;
    options.budget_bytes = 0;
    const int64_t lowest = PlanGraph(graph, options).peak;
    options.budget_bytes =
        lowest + static_cast<int64_t>(uniform(0, 1) * static_cast<double>(save_all.peak_bytes -
                                                                            lowest));
    OffloadSettings settings;
    settings.link = {uniform(1, 1e5) * 1e6, uniform(1, 1e5) * 1e6};
    settings.flops_per_us = uniform(0.1, 100);
    const OffloadOptions offload = TimeOffloads(graph, settings);
    const OffloadPlan plan = PlanOffload(graph, options, offload, PlanGraph(graph, options));
    if (!plan.fits || plan.offloaded.empty()) continue;
    ++offloading;
    const OffloadedGraph off = ApplyOffload(graph, plan.offloaded, offload);
    const SaveSet keep = KeepOnRewrite(plan.keep, off);
    const SimResult planned = Simulate(off.graph, keep, recorded);
    CHECK(planned.peak_bytes == plan.peak);
    PlanRecord record;
    record.graph_path = "random.json";
    record.budget_bytes = options.budget_bytes;
    record.save_all = &save_all;
    record.planned = &planned;
    record.keep = &keep;
    record.lower_bound = ComputeLowerBound(graph, 0);
    record.offloaded = &off;
    record.offload_settings = &settings;
    const std::string text = PlanToJson(off.graph, record).dump(2);

    const LoadedPlan loaded = ParsePlan(graph, text, "plan.json");
    CHECK(loaded.offloaded == plan.offloaded);
    CHECK(loaded.predicted_peak_bytes == plan.peak);
    const OffloadedGraph again =
        ApplyOffload(graph, loaded.offloaded, TimeOffloads(graph, loaded.offload));
    const SimResult resimulated = Simulate(again.graph, KeepOnRewrite(loaded.keep, again), {});
    CHECK(resimulated.peak_bytes == plan.peak);
    CHECK(again.exposed_us == doctest::Approx(off.exposed_us));
    CHECK(again.host_peak_bytes == off.host_peak_bytes);
  }
  CHECK(offloading >= 6);
}

}  // namespace
}  // namespace ckptplan
