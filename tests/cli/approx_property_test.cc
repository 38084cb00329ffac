// Approximate recompute on random training graphs with random approx
// options: plans fit, stay within the error bound, never cost more than the
// exact plan, choose at least as well as enumerating every combination, and
// read back from the plan file to the same figures.
#include <algorithm>
#include <functional>
#include <random>

#include <doctest/doctest.h>

#include "ckptplan/emit/plan_io.h"
#include "ckptplan/ir/synth.h"
#include "ckptplan/plan/approx_planner.h"
#include "ckptplan/plan/planner.h"

namespace ckptplan {
namespace {

// Gives about half the costed forward nodes 1-3 options, each costing 5% to
// 120% of the node at an error of 0 to 0.02; with `memory`, each re-run
// holds a workspace of 0 to 2x the node's outputs and keeps factors of 0 to
// 0.5x them.
void AddRandomOptions(Graph* graph, uint64_t seed, bool memory) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (NodeId n = 0; n < graph->nodes.size(); ++n) {
    Node& node = graph->nodes[n];
    if (node.phase != Phase::kForward || graph->NodeCost(n) <= 0 || unit(rng) < 0.5) continue;
    const int count = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < count; ++i) {
      ApproxOption option;
      option.rank = 4 << i;
      option.flops = std::round(node.flops * (0.05 + 1.15 * unit(rng)));
      option.error = 0.02 * unit(rng);
      if (memory) {
        int64_t out = 0;
        for (TensorId t : node.outputs) out += graph->tensors[t].bytes;
        option.workspace_bytes = static_cast<int64_t>(2.0 * unit(rng) * static_cast<double>(out));
        option.factor_bytes = static_cast<int64_t>(0.5 * unit(rng) * static_cast<double>(out));
      }
      node.approx.push_back(option);
    }
  }
}

// The most any one-option-per-node choice within `max_error` saves on
// `planned`, by enumeration.
double BestSaving(const Graph& graph, const SimResult& planned, double max_error) {
  const std::vector<uint32_t> reruns = RerunCounts(graph, planned);
  std::vector<NodeId> nodes;
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    if (reruns[n] > 0 && !graph.nodes[n].approx.empty()) nodes.push_back(n);
  }
  double best = 0;
  std::function<void(size_t, double, double)> visit = [&](size_t i, double error, double saved) {
    if (error > max_error) return;
    if (i == nodes.size()) {
      best = std::max(best, saved);
      return;
    }
    visit(i + 1, error, saved);
    const NodeId n = nodes[i];
    for (const ApproxOption& option : graph.nodes[n].approx) {
      const double gain = reruns[n] * (graph.NodeCost(n) - graph.ApproxCost(n, option));
      if (gain > 0) visit(i + 1, error + option.error, saved + gain);
    }
  };
  visit(0, 0, 0);
  return best;
}

TEST_CASE("property: approximate plans fit, stay within the bound, cost no more than exact "
          "plans and read back from the plan file") {
  int approximated = 0, plans = 0, replanned = 0, with_memory = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    // Odd seeds' options hold memory of their own (workspace, factors).
    const bool memory = seed % 2 == 1;
    RandomGraphOptions random;
    random.seed = seed;
    random.layers = 2 + static_cast<int>(seed % 6);
    random.width = 1 + static_cast<int>(seed % 3);
    random.max_inputs = 1 + static_cast<int>(seed % 3);
    Graph graph = RandomTrainingGraph(random);
    AddRandomOptions(&graph, seed, memory);
    SimOptions sim_options;
    const int64_t save_all_peak = Simulate(graph, SaveAll(graph), sim_options).peak_bytes;
    const int64_t lower_bound = ComputeLowerBound(graph, 0).bytes;
    // Budgets between the lower bound and save-all.
    for (double fraction : {0.8, 0.5, 0.2}) {
      const double max_error = seed % 3 == 0 ? 0.002 : seed % 3 == 1 ? 0.01 : 0.03;
      CAPTURE(seed);
      CAPTURE(fraction);
      PlannerOptions options;
      options.budget_bytes =
          lower_bound + static_cast<int64_t>(fraction * (save_all_peak - lower_bound));
      const PlannerResult exact = PlanGraph(graph, options);
      if (!exact.fits) continue;
      ++plans;
      const ApproxPlanned planned = PlanApproximations(graph, options, exact, max_error);
      const ApproxPlan& approx = planned.approx;
      const SimResult sim = Simulate(graph, planned.found.keep, sim_options);
      // Memory: the plan kept, re-simulated with its approximations'
      // workspace and factors, fits; without memory fields they change no byte.
      const std::vector<uint32_t> by_node = ApproxOptionsByNode(graph, approx);
      SimOptions with_approx = sim_options;
      with_approx.approx_options = &by_node;
      const int64_t peak = Simulate(graph, planned.found.keep, with_approx).peak_bytes;
      CHECK(peak <= options.budget_bytes);
      CHECK(peak == planned.found.peak);
      if (!memory) CHECK(peak == sim.peak_bytes);
      if (memory && approx.any()) CHECK(approx.peak_bytes == peak);
      with_memory += memory && approx.any() && peak > sim.peak_bytes;
      // Error: the sum of the chosen options' errors, within the bound.
      double error = 0, saved = 0;
      for (size_t i = 0; i < approx.choices.size(); ++i) {
        const ApproxChoice& choice = approx.choices[i];
        if (i > 0) CHECK(approx.choices[i - 1].node < choice.node);
        CHECK(choice.reruns > 0);
        CHECK(choice.cost_saved > 0);
        CHECK(choice.error == graph.nodes[choice.node].approx[choice.option].error);
        error += choice.error;
        saved += choice.cost_saved;
      }
      CHECK(approx.estimated_error == doctest::Approx(error));
      CHECK(approx.estimated_error <= max_error);
      // Cost: the exact cost of the plan's recomputation less what the
      // approximations save, never above the exact plan's.
      CHECK(approx.exact_recompute_cost == sim.recompute_cost);
      CHECK(approx.recompute_cost == doctest::Approx(sim.recompute_cost - saved));
      CHECK(approx.recompute_cost <= exact.recompute_cost + 1e-9);
      // Re-planning only keeps a plan cheaper than approximating the exact one.
      ApproxFit fit;
      fit.keep = &exact.keep;
      fit.budget_bytes = options.budget_bytes;
      const ApproxPlan on_exact = ChooseApproximations(
          graph, Simulate(graph, exact.keep, sim_options), max_error, &fit);
      CHECK(approx.recompute_cost <= on_exact.recompute_cost);
      if (planned.replans > 0) CHECK(approx.recompute_cost < on_exact.recompute_cost);
      // The choice on the plan held is as good as any combination (with
      // memory, any combination is an upper bound: some do not fit).
      const double best = BestSaving(graph, sim, max_error);
      if (!memory) CHECK(approx.cost_saved >= best - 1e-6);
      CHECK(approx.cost_saved <= best + 1e-6);
      approximated += approx.any();
      replanned += planned.replans > 0;
      if (!approx.any()) continue;

      // The plan file, written and read back, gives the same figures.
      const SimResult save_all = Simulate(graph, SaveAll(graph), sim_options);
      PlanRecord record{"random.json", "", options.budget_bytes, 0, "mincut", nullptr,
                        &save_all, &sim, &planned.found.keep, ComputeLowerBound(graph, 0)};
      record.approx = &approx;
      const std::string text = PlanToJson(graph, record).dump();
      const LoadedPlan back = ParsePlan(graph, text, "random.plan.json");
      CHECK(back.keep == planned.found.keep);
      CHECK(back.max_error == max_error);
      const ApproxPlan again = EvaluateApproximations(
          graph, Simulate(graph, back.keep, sim_options), back.approximations, back.max_error);
      CHECK(again.recompute_cost == doctest::Approx(approx.recompute_cost));
      CHECK(again.estimated_error == doctest::Approx(approx.estimated_error));
      size_t approximate_decisions = 0;
      for (const Decision& decision : MakeDecisions(graph, back.keep, sim, &again)) {
        approximate_decisions += decision.approximate;
      }
      CHECK(approximate_decisions > 0);
    }
  }
  // The corpus exercises plans with and without approximations.
  CHECK(plans > 100);
  CHECK(approximated > 30);
  CHECK(with_memory > 5);  // plans whose approximations raise the peak, still within budget
  MESSAGE("approximate plans: " << approximated << " of " << plans << " fitting plans, "
                                << replanned << " re-planned, " << with_memory
                                << " with a peak raised by their memory");
}

}  // namespace
}  // namespace ckptplan
