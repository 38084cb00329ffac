#include "ckptplan/emit/report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "ckptplan/emit/plan_io.h"
#include "ckptplan/base/size.h"
#include "ckptplan/base/text_escape.h"

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
  return "at step " + std::to_string(step) + ", node '" + ShowName(node.name) + "' (" +
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
  out << "ckptplan " << summary.command << ": " << ShowName(summary.graph_path) << " ("
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
  const ApproxPlan* approx = summary.approx;
  if (approx != nullptr && approx->any()) {
    std::snprintf(overhead, sizeof(overhead), "(%s of the step's %s), approximate",
                  PercentText(approx->recompute_cost, planned.step_cost).c_str(),
                  CostText(graph, planned.step_cost).c_str());
    Line(out, "  recompute cost      %-12s %s", CostText(graph, approx->recompute_cost), overhead);
    Line(out, "  exact recompute     %-12s %s", CostText(graph, approx->exact_recompute_cost),
         "(" + PercentText(approx->exact_recompute_cost, planned.step_cost) + "), " +
             PercentText(approx->cost_saved, approx->exact_recompute_cost) + " saved");
    Line(out, "  approximations      %s",
         std::to_string(approx->choices.size()) + " re-run linear" +
             (approx->choices.size() == 1 ? "" : "s") + ", estimated gradient error " +
             ErrorText(approx->estimated_error) + " <= max error " +
             ErrorText(approx->max_error));
  } else {
    Line(out, "  recompute cost      %-12s %s", CostText(graph, planned.recompute_cost), overhead);
    if (approx != nullptr) {
      Line(out, "  approximations      none: %s", DescribeNoApprox(graph, *approx));
    }
  }

  out << "\nMemory at the peak, by category:\n";
  ordered_json breakdown = BreakdownJson(planned, planned.peak_step);
  for (auto& [name, bytes] : breakdown.items()) {
    if (bytes.get<int64_t>() == 0) continue;
    Line(out, "  %-19s %s", name, FormatBytes(bytes.get<int64_t>()));
  }
  out << "\nLargest tensors live at the peak:\n";
  for (const LiveTensor& live : LiveAt(graph, planned, planned.peak_step, summary.top)) {
    const Tensor& tensor = graph.tensors[live.tensor];
    std::string made_by = tensor.producer == kNoId ? "" : ShowName(graph.nodes[tensor.producer].op);
    if (tensor.producer != kNoId && !graph.nodes[tensor.producer].scope.empty()) {
      made_by += " in " + ShowName(graph.nodes[tensor.producer].scope);
    }
    Line(out, "  %-12s %s", FormatBytes(live.bytes),
         ShowName(tensor.name) + "  [" + std::string(ToString(live.category)) + "]  " + made_by);
  }
  if (approx != nullptr && approx->any()) {
    out << "\nApproximate recompute (rank of the weight's truncated SVD):\n";
    for (const ApproxChoice& choice : approx->choices) {
      Line(out, "  %-19s %s", ShowName(graph.nodes[choice.node].name),
           "rank " + std::to_string(choice.rank) + ", error " + ErrorText(choice.error) +
               ", saves " + CostText(graph, choice.cost_saved));
    }
  }
  std::vector<Decision> decisions = MakeDecisions(graph, *summary.keep, planned, approx);
  size_t recomputed = std::count_if(decisions.begin(), decisions.end(),
                                    [](const Decision& d) { return d.recompute; });
  out << "\nDecisions: " << recomputed << " of " << decisions.size()
      << " candidate tensors recomputed\n";
  for (const Decision& decision : decisions) {
    if (!decision.recompute) continue;
    std::string chain;
    for (NodeId n : decision.chain) chain += (chain.empty() ? "" : " -> ") + ShowName(graph.nodes[n].name);
    Line(out, decision.approximate ? "  recompute_approx %-21s %s" : "  recompute %-28s %s",
         ShowName(graph.tensors[decision.tensor].name),
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
  const ApproxPlan* approx = summary.approx;
  if (approx != nullptr && approx->any()) {
    out["recompute_cost"] = approx->recompute_cost;
    out["recompute_overhead_percent"] = Percent(approx->recompute_cost, planned.step_cost);
    out["exact_recompute_cost"] = approx->exact_recompute_cost;
  } else {
    out["recompute_cost"] = planned.recompute_cost;
    out["recompute_overhead_percent"] = OverheadPercent(planned);
  }
  if (approx != nullptr) {
    out["max_error"] = approx->max_error;
    out["estimated_error"] = approx->estimated_error;
    ordered_json chosen = ordered_json::array();
    for (const ApproxChoice& choice : approx->choices) {
      chosen.push_back({{"node", graph.nodes[choice.node].name},
                        {"rank", choice.rank},
                        {"error", choice.error},
                        {"cost_saved", choice.cost_saved}});
    }
    out["approximations"] = std::move(chosen);
    if (!approx->any()) out["no_approximation"] = DescribeNoApprox(graph, *approx);
  }
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
  for (const Decision& decision : MakeDecisions(graph, *summary.keep, planned, approx)) {
    if (!decision.recompute) continue;
    ordered_json entry{{"tensor", graph.tensors[decision.tensor].name},
                       {"bytes", decision.bytes},
                       {"recompute_cost", decision.recompute_cost}};
    if (decision.approximate) entry["action"] = "recompute_approx";
    recomputed.push_back(std::move(entry));
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
