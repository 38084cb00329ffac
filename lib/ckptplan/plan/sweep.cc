#include "ckptplan/plan/sweep.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include <spdlog/spdlog.h>

#include "ckptplan/base/errors.h"
#include "ckptplan/emit/report.h"
#include "ckptplan/base/size.h"

namespace ckptplan {
namespace {

double Percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

}  // namespace

std::vector<int64_t> LinearBudgets(int64_t from, int64_t to, int steps) {
  if (steps < 1)
    throw InputError("--steps: expected at least 1, got " + std::to_string(steps), kExitUsage);
  if (from > to) {
    throw InputError("--from " + FormatBytes(from) + " is above --to " + FormatBytes(to),
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

std::vector<int64_t> ParseBudgetList(std::string_view text) {
  std::vector<int64_t> budgets;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    budgets.push_back(ParseSize(text.substr(begin, end - begin), "--budgets"));
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

std::string SweepText(const Graph& graph, const std::string& graph_path, const SweepResult& sweep) {
  std::ostringstream out;
  char line[512];
  out << "ckptplan sweep: " << graph_path << " (" << graph.nodes.size() << " nodes, strategy "
      << sweep.strategy << ")\n";
  out << "  save-all peak " << FormatBytes(sweep.save_all_peak_bytes) << ", lowest peak reached "
      << FormatBytes(sweep.lowest_peak_bytes) << ", lower bound "
      << FormatBytes(sweep.lower_bound.bytes) << "\n\n";
  std::snprintf(line, sizeof(line), "  %-12s %-12s %14s %10s  %-8s %s\n", "budget", "peak",
                "recompute", "overhead", "feasible", "plan");
  out << line;
  for (const SweepRow& row : sweep.rows) {
    const std::string cost = CostText(graph.cost_unit, row.recompute_cost);
    char overhead[32];
    std::snprintf(overhead, sizeof(overhead), "%.2f%%",
                  Percent(row.recompute_cost, sweep.step_cost));
    std::string method = row.method + (row.reused ? " (reused from a smaller budget)" : "");
    std::snprintf(line, sizeof(line), "  %-12s %-12s %14s %10s  %-8s %s\n",
                  FormatBytes(row.budget_bytes).c_str(), FormatBytes(row.peak_bytes).c_str(),
                  row.feasible ? cost.c_str() : "-", row.feasible ? overhead : "-",
                  row.feasible ? "yes" : "NO", row.feasible ? method.c_str() : "");
    out << line;
  }
  out << "\n  overhead = recompute / the step's " << CostText(graph.cost_unit, sweep.step_cost)
      << " (forward + backward + optimizer, run once)\n";
  return out.str();
}

nlohmann::ordered_json SweepJson(const Graph& graph, const std::string& graph_path,
                                 const SweepResult& sweep) {
  nlohmann::ordered_json out;
  out["command"] = "sweep";
  out["graph"] = graph_path;
  out["strategy"] = sweep.strategy;
  out["cost_unit"] = ToString(graph.cost_unit);
  out["step_cost"] = sweep.step_cost;
  out["save_all_peak_bytes"] = sweep.save_all_peak_bytes;
  out["lowest_peak_bytes"] = sweep.lowest_peak_bytes;
  out["lower_bound_bytes"] = sweep.lower_bound.bytes;
  out["lower_bound"] = DescribeLowerBound(graph, sweep.lower_bound);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const SweepRow& row : sweep.rows) {
    nlohmann::ordered_json entry;
    entry["budget_bytes"] = row.budget_bytes;
    entry["feasible"] = row.feasible;
    entry["peak_bytes"] = row.peak_bytes;
    if (row.feasible) {
      entry["recompute_cost"] = row.recompute_cost;
      entry["recompute_overhead_percent"] = Percent(row.recompute_cost, sweep.step_cost);
      entry["method"] = row.method;
      entry["reused"] = row.reused;
    }
    rows.push_back(std::move(entry));
  }
  out["rows"] = std::move(rows);
  return out;
}

}  // namespace ckptplan
