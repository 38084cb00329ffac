#include "ckptplan/plan/plan_outcome.h"

#include <chrono>
#include <ctime>
#include <stdexcept>
#include <string>

#include "ckptplan/base/console.h"
#include "ckptplan/base/size.h"

namespace ckptplan {

SimResult SimulateRecorded(const Graph& graph, const SaveSet& keep, int64_t reserve,
                           bool per_step, const std::vector<uint32_t>* approx_options) {
  SimOptions options;
  options.reserve_bytes = reserve;
  options.record_categories = per_step;
  options.approx_options = approx_options;
  return Simulate(graph, keep, options);
}

PlanOutcome ComputePlan(const Graph& graph, const PlannerOptions& options, bool per_step) {
  PlanOutcome outcome;
  outcome.bound = ComputeLowerBound(graph, options.reserve_bytes);
  auto clock = std::chrono::steady_clock::now();
  const std::clock_t cpu = std::clock();
  outcome.found = PlanGraph(graph, options);
  outcome.plan_seconds = SecondsSince(clock);
  outcome.plan_cpu_seconds = static_cast<double>(std::clock() - cpu) / CLOCKS_PER_SEC;
  clock = std::chrono::steady_clock::now();
  outcome.save_all = SimulateRecorded(graph, SaveAll(graph), options.reserve_bytes, per_step);
  outcome.simulate_seconds = SecondsSince(clock);
  outcome.planned = SimulateRecorded(graph, outcome.found.keep, options.reserve_bytes, per_step);
  // The searches' figures come from patched and regional simulations; a plan
  // whose peak they got wrong is a bug, and its "fits" cannot be trusted.
  if (outcome.planned.peak_bytes != outcome.found.peak) {
    throw std::logic_error("planner: the plan found (" + outcome.found.method + ") peaks at " +
                           std::to_string(outcome.found.peak) + " bytes as searched but " +
                           std::to_string(outcome.planned.peak_bytes) + " bytes simulated");
  }
  if (outcome.found.fits) return outcome;
  const LowerBound& bound = outcome.bound;
  const int64_t budget_bytes = options.budget_bytes;
  outcome.infeasible =
      budget_bytes < bound.bytes
          ? "no plan can fit: the lower bound is " + FormatBytes(bound.bytes) + " = " +
                DescribeLowerBound(graph, bound) + " > budget " + FormatBytes(budget_bytes)
          : "the lowest peak reached is " + FormatBytes(outcome.planned.peak_bytes) +
                " > budget " + FormatBytes(budget_bytes) + " (lower bound " +
                FormatBytes(bound.bytes) + " = " + DescribeLowerBound(graph, bound) + ")";
  return outcome;
}

}  // namespace ckptplan
