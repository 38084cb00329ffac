#include "ckptplan/emit/sweep_report.h"

#include <cstdio>
#include <sstream>

#include "ckptplan/base/size.h"
#include "ckptplan/emit/report.h"

namespace ckptplan {
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
    const std::string overhead = PercentText(row.recompute_cost, sweep.step_cost);
    std::string method = row.method + (row.reused ? " (reused from a smaller budget)" : "");
    std::snprintf(line, sizeof(line), "  %-12s %-12s %14s %10s  %-8s %s\n",
                  FormatBytes(row.budget_bytes).c_str(), FormatBytes(row.peak_bytes).c_str(),
                  row.feasible ? cost.c_str() : "-", row.feasible ? overhead.c_str() : "-",
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
