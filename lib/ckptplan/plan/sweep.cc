#include "ckptplan/plan/sweep.h"

#include <algorithm>

#include "ckptplan/base/errors.h"
#include "ckptplan/base/size.h"

namespace ckptplan {

std::vector<int64_t> LinearBudgets(int64_t from, int64_t to, int steps) {
  if (steps < 1)
    throw InputError("sweep: expected at least 1 step, got " + std::to_string(steps), kExitUsage);
  if (from > to) {
    throw InputError("sweep: the lowest budget, " + FormatBytes(from) + ", is above the highest, " +
                         FormatBytes(to),
                     kExitUsage);
  }
  if (steps == 1) return {from};
  std::vector<int64_t> budgets;
  const long double span = static_cast<long double>(to - from);
  for (int i = 0; i < steps; ++i) {
    budgets.push_back(from + static_cast<int64_t>(span * i / (steps - 1)));
  }
  return budgets;
}

std::vector<int64_t> ParseBudgetList(std::string_view text, std::string_view what) {
  std::vector<int64_t> budgets;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    budgets.push_back(ParseSize(text.substr(begin, end - begin), what));
    begin = end + 1;
  }
  return budgets;
}

SweepResult RunSweep(const Graph& graph, std::vector<int64_t> budgets,
                     const PlannerOptions& options) {
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  SimOptions sim_options;
  sim_options.reserve_bytes = options.reserve_bytes;
  SimResult save_all = Simulate(graph, SaveAll(graph), sim_options);
  SweepResult sweep;
  sweep.save_all_peak_bytes = save_all.peak_bytes;
  sweep.step_cost = save_all.step_cost;
  sweep.lower_bound = ComputeLowerBound(graph, options.reserve_bytes);
  sweep.strategy = std::string(ToString(options.strategy));
  sweep.lowest_peak_bytes = save_all.peak_bytes;
  PlannerOptions planner = options;
  int cheapest_fit = -1;  // row index of the feasible row of least cost so far
  for (int64_t budget : budgets) {
    planner.budget_bytes = budget;
    PlannerResult plan = PlanGraph(graph, planner);
    SweepRow row{budget, plan.fits, plan.peak, plan.recompute_cost, plan.method, false};
    sweep.lowest_peak_bytes = std::min(sweep.lowest_peak_bytes, plan.peak);
    if (cheapest_fit >= 0 &&
        (!row.feasible || sweep.rows[cheapest_fit].recompute_cost < row.recompute_cost)) {
      row = sweep.rows[cheapest_fit];
      row.budget_bytes = budget;
      row.reused = true;
    }
    sweep.rows.push_back(row);
    if (row.feasible) cheapest_fit = static_cast<int>(sweep.rows.size() - 1);
  }
  // The lowest budget reachable: plan for the lower bound itself.
  planner.budget_bytes = sweep.lower_bound.bytes;
  if (budgets.empty() || budgets.front() > sweep.lower_bound.bytes) {
    sweep.lowest_peak_bytes = std::min(sweep.lowest_peak_bytes, PlanGraph(graph, planner).peak);
  }
  return sweep;
}

}  // namespace ckptplan
