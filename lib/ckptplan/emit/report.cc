#include "ckptplan/emit/report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "ckptplan/emit/plan_io.h"
#include "ckptplan/base/size.h"

namespace ckptplan {

using nlohmann::ordered_json;

std::vector<LiveTensor> LiveAt(const Graph& graph, const SimResult& sim, uint32_t step,
                               size_t limit) {
  std::vector<LiveTensor> live;
  for (const Buffer& buffer : sim.buffers) {
    const int64_t bytes = graph.tensors[buffer.root].bytes;
    if (buffer.first_step <= step && step <= buffer.last_step && bytes > 0) {
      live.push_back({buffer.root, bytes, buffer.category});
    }
  }
  std::sort(live.begin(), live.end(), [](const LiveTensor& a, const LiveTensor& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.tensor != b.tensor) return a.tensor < b.tensor;
    return a.category < b.category;
  });
  if (live.size() > limit) live.resize(limit);
  return live;
}

namespace {

std::string CostText(const Graph& graph, double cost) { return CostText(graph.cost_unit, cost); }

std::string StepText(const Graph& graph, const SimResult& sim, uint32_t step) {
  if (sim.steps.empty()) return "(no steps)";
  const Node& node = graph.nodes[sim.steps[step].node];
  return "at step " + std::to_string(step) + ", node '" + node.name + "' (" +
         std::string(ToString(node.phase)) + (sim.steps[step].recompute ? ", recompute" : "") +
         ")";
}

double OverheadPercent(const SimResult& sim) { return Percent(sim.recompute_cost, sim.step_cost); }

void Line(std::ostringstream& out, const char* format, const std::string& a,
          const std::string& b = "") {
  char buffer[512];
  std::snprintf(buffer, sizeof(buffer), format, a.c_str(), b.c_str());
  out << buffer << '\n';
}

}  // namespace

std::string SummaryText(const Graph& graph, const Summary& summary) {
  const SimResult& planned = *summary.planned;
  const SimResult& save_all = *summary.save_all;
  std::ostringstream out;
  out << "ckptplan " << summary.command << ": " << summary.graph_path << " ("
      << graph.nodes.size() << " nodes, " << graph.tensors.size() << " tensors)\n";
  if (summary.budget_bytes >= 0) {
    Line(out, "  budget              %s", FormatBytes(summary.budget_bytes));
  }
  if (summary.reserve_bytes > 0) Line(out, "  reserve             %s", FormatBytes(summary.reserve_bytes));
  Line(out, "  peak, save-all      %-12s %s", FormatBytes(save_all.peak_bytes),
       StepText(graph, save_all, save_all.peak_step));
  if (summary.has_plan) {
    Line(out, "  peak, planned       %-12s %s", FormatBytes(planned.peak_bytes),
         StepText(graph, planned, planned.peak_step));
  }
  if (!graph.training.bytes_per_param_formula.empty()) {
    Line(out, "  bytes per parameter %s", graph.training.bytes_per_param_formula);
  }
  Line(out, "  lower bound         %-12s %s", FormatBytes(summary.lower_bound.bytes),
       "= " + DescribeLowerBound(graph, summary.lower_bound));
  char overhead[64];
  std::snprintf(overhead, sizeof(overhead), "(%.2f%% of the step's %s)", OverheadPercent(planned),
                CostText(graph, planned.step_cost).c_str());
  Line(out, "  recompute cost      %-12s %s", CostText(graph, planned.recompute_cost), overhead);

  out << "\nMemory at the peak, by category:\n";
  ordered_json breakdown = BreakdownJson(planned, planned.peak_step);
  for (auto& [name, bytes] : breakdown.items()) {
    if (bytes.get<int64_t>() == 0) continue;
    Line(out, "  %-19s %s", name, FormatBytes(bytes.get<int64_t>()));
  }
  out << "\nLargest tensors live at the peak:\n";
  for (const LiveTensor& live : LiveAt(graph, planned, planned.peak_step, summary.top)) {
    const Tensor& tensor = graph.tensors[live.tensor];
    std::string made_by = tensor.producer == kNoId ? "" : graph.nodes[tensor.producer].op;
    if (tensor.producer != kNoId && !graph.nodes[tensor.producer].scope.empty()) {
      made_by += " in " + graph.nodes[tensor.producer].scope;
    }
    Line(out, "  %-12s %s", FormatBytes(live.bytes),
         tensor.name + "  [" + std::string(ToString(live.category)) + "]  " + made_by);
  }
  std::vector<Decision> decisions = MakeDecisions(graph, *summary.keep, planned);
  size_t recomputed = std::count_if(decisions.begin(), decisions.end(),
                                    [](const Decision& d) { return d.recompute; });
  out << "\nDecisions: " << recomputed << " of " << decisions.size()
      << " candidate tensors recomputed\n";
  for (const Decision& decision : decisions) {
    if (!decision.recompute) continue;
    std::string chain;
    for (NodeId n : decision.chain) chain += (chain.empty() ? "" : " -> ") + graph.nodes[n].name;
    Line(out, "  recompute %-28s %s", graph.tensors[decision.tensor].name,
         FormatBytes(decision.bytes) + ", cost " + CostText(graph, decision.recompute_cost) +
             (chain.empty() ? "" : ", chain " + chain));
  }
  return out.str();
}

ordered_json SummaryJson(const Graph& graph, const Summary& summary) {
  const SimResult& planned = *summary.planned;
  ordered_json out;
  out["command"] = summary.command;
  out["graph"] = summary.graph_path;
  out["peak_bytes"] = planned.peak_bytes;
  if (summary.budget_bytes >= 0) {
    out["budget_bytes"] = summary.budget_bytes;
    out["fits"] = planned.peak_bytes <= summary.budget_bytes;
  }
  out["reserve_bytes"] = summary.reserve_bytes;
  out["save_all_peak_bytes"] = summary.save_all->peak_bytes;
  out["lower_bound_bytes"] = summary.lower_bound.bytes;
  if (!graph.training.bytes_per_param_formula.empty()) {
    out["bytes_per_param_formula"] = graph.training.bytes_per_param_formula;
  }
  out["peak_step"] = planned.peak_step;
  if (!planned.steps.empty()) out["peak_node"] = graph.nodes[planned.steps[planned.peak_step].node].name;
  out["peak_breakdown"] = BreakdownJson(planned, planned.peak_step);
  out["cost_unit"] = ToString(graph.cost_unit);
  out["step_cost"] = planned.step_cost;
  out["recompute_cost"] = planned.recompute_cost;
  out["recompute_overhead_percent"] = OverheadPercent(planned);
  ordered_json top = ordered_json::array();
  for (const LiveTensor& live : LiveAt(graph, planned, planned.peak_step, summary.top)) {
    const Tensor& tensor = graph.tensors[live.tensor];
    ordered_json entry;
    entry["tensor"] = tensor.name;
    entry["bytes"] = live.bytes;
    entry["category"] = ToString(live.category);
    if (tensor.producer != kNoId) {
      entry["node"] = graph.nodes[tensor.producer].name;
      entry["op"] = graph.nodes[tensor.producer].op;
      entry["scope"] = graph.nodes[tensor.producer].scope;
    }
    top.push_back(std::move(entry));
  }
  out["top_tensors_at_peak"] = std::move(top);
  ordered_json recomputed = ordered_json::array();
  for (const Decision& decision : MakeDecisions(graph, *summary.keep, planned)) {
    if (!decision.recompute) continue;
    recomputed.push_back({{"tensor", graph.tensors[decision.tensor].name},
                          {"bytes", decision.bytes},
                          {"recompute_cost", decision.recompute_cost}});
  }
  out["recomputed"] = std::move(recomputed);
  return out;
}

ordered_json TimelineJson(const Graph& graph, const SimResult& sim) {
  ordered_json out;
  out["format"] = "ckptplan.timeline";
  out["version"] = 1;
  ordered_json categories = ordered_json::array();
  for (size_t c = 0; c < kNumCategories; ++c) categories.push_back(ToString(static_cast<Category>(c)));
  out["categories"] = std::move(categories);
  out["peak_bytes"] = sim.peak_bytes;
  out["peak_step"] = sim.peak_step;
  ordered_json steps = ordered_json::array();
  for (uint32_t s = 0; s < sim.steps.size(); ++s) {
    const Node& node = graph.nodes[sim.steps[s].node];
    ordered_json row;
    row["step"] = s;
    row["node"] = node.name;
    row["op"] = node.op;
    row["phase"] = ToString(node.phase);
    row["recompute"] = sim.steps[s].recompute;
    row["total_bytes"] = sim.total[s];
    row["bytes"] = BreakdownJson(sim, s);
    steps.push_back(std::move(row));
  }
  out["steps"] = std::move(steps);
  return out;
}

}  // namespace ckptplan
