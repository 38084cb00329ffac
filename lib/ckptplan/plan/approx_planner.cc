#include "ckptplan/plan/approx_planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "ckptplan/base/text_escape.h"

namespace ckptplan {
namespace {

// Error units of the knapsack: at most this many, and no more than keep its
// table (one entry per node and unit) under kMaxTableEntries.
constexpr size_t kMaxUnits = 10'000;
constexpr size_t kMinUnits = 64;
constexpr size_t kMaxTableEntries = 16'000'000;
// Re-plans of the memory plan on the approximate costs, at most.
constexpr int kMaxReplans = 3;

struct Option {
  size_t option;
  double saved;
  double error;
  size_t units;
};

// A re-run node's options that save cost and fit the bound alone.
struct Item {
  NodeId node;
  uint32_t reruns;
  std::vector<Option> options;
};

// Fills the totals and saved_per_run from `plan.choices`.
void Finish(const Graph& graph, ApproxPlan* plan) {
  plan->estimated_error = 0;
  plan->cost_saved = 0;
  plan->saved_per_run.clear();
  if (plan->choices.empty()) {
    plan->recompute_cost = plan->exact_recompute_cost;
    return;
  }
  plan->reason = NoApproxReason::kNone;
  plan->saved_per_run.assign(graph.nodes.size(), 0.0);
  for (const ApproxChoice& choice : plan->choices) {
    plan->estimated_error += choice.error;
    plan->cost_saved += choice.cost_saved;
    const ApproxOption& option = graph.nodes[choice.node].approx[choice.option];
    const double cost = graph.ApproxCost(choice.node, option);
    if (cost >= 0) plan->saved_per_run[choice.node] = graph.NodeCost(choice.node) - cost;
  }
  plan->recompute_cost = std::max(0.0, plan->exact_recompute_cost - plan->cost_saved);
}

// Multiple-choice knapsack over error units: at most one option per item,
// the most saving with total units <= `units`. Returns the option index per
// item (SIZE_MAX: none).
std::vector<size_t> Knapsack(const std::vector<Item>& items, size_t units) {
  std::vector<double> best(units + 1, 0.0), next;
  // choice[i * (units + 1) + k]: 0 none, else option + 1, for item i at k units.
  std::vector<uint16_t> choice(items.size() * (units + 1), 0);
  for (size_t i = 0; i < items.size(); ++i) {
    next = best;  // not taking item i
    uint16_t* row = &choice[i * (units + 1)];
    for (size_t o = 0; o < items[i].options.size(); ++o) {
      const Option& option = items[i].options[o];
      for (size_t k = option.units; k <= units; ++k) {
        const double value = best[k - option.units] + option.saved;
        if (value > next[k]) {  // strictly: ties keep none, then the lower rank
          next[k] = value;
          row[k] = static_cast<uint16_t>(o + 1);
        }
      }
    }
    best.swap(next);
  }
  std::vector<size_t> taken(items.size(), SIZE_MAX);
  size_t k = units;
  // The fewest units reaching the best saving (best[] is non-decreasing).
  while (k > 0 && best[k - 1] == best[k]) --k;
  for (size_t i = items.size(); i-- > 0;) {
    const uint16_t c = choice[i * (units + 1) + k];
    if (c == 0) continue;
    taken[i] = c - 1;
    k -= items[i].options[c - 1].units;
  }
  return taken;
}

// Rounding each error up to a unit can leave room: switch items to options
// that save more while the exact error sum stays within the bound.
void Upgrade(const std::vector<Item>& items, double max_error, std::vector<size_t>* taken) {
  double error = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if ((*taken)[i] != SIZE_MAX) error += items[i].options[(*taken)[i]].error;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < items.size(); ++i) {
      const size_t current = (*taken)[i];
      const double saved = current == SIZE_MAX ? 0 : items[i].options[current].saved;
      const double without = error - (current == SIZE_MAX ? 0 : items[i].options[current].error);
      size_t pick = current;
      double pick_saved = saved;
      for (size_t o = 0; o < items[i].options.size(); ++o) {
        const Option& option = items[i].options[o];
        if (option.saved > pick_saved && without + option.error <= max_error) {
          pick = o;
          pick_saved = option.saved;
        }
      }
      if (pick == current) continue;
      (*taken)[i] = pick;
      error = without + items[i].options[pick].error;
      changed = true;
    }
  }
}

ApproxChoice MakeChoice(const Graph& graph, NodeId n, size_t o, uint32_t reruns) {
  const ApproxOption& option = graph.nodes[n].approx[o];
  ApproxChoice choice;
  choice.node = n;
  choice.option = o;
  choice.rank = option.rank;
  choice.error = option.error;
  choice.reruns = reruns;
  const double cost = graph.ApproxCost(n, option);
  choice.cost_saved = cost < 0 ? 0 : reruns * (graph.NodeCost(n) - cost);
  return choice;
}

}  // namespace

std::string ErrorText(double error) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.4g", error);
  return buffer;
}

const ApproxChoice* ApproxPlan::Find(NodeId n) const {
  auto it = std::lower_bound(choices.begin(), choices.end(), n,
                             [](const ApproxChoice& c, NodeId node) { return c.node < node; });
  return it != choices.end() && it->node == n ? &*it : nullptr;
}

std::vector<uint32_t> RerunCounts(const Graph& graph, const SimResult& planned) {
  std::vector<uint32_t> reruns(graph.nodes.size(), 0);
  for (const Recompute& recompute : planned.recomputes) {
    for (NodeId n : recompute.chain) ++reruns[n];
  }
  return reruns;
}

ApproxPlan ChooseApproximations(const Graph& graph, const SimResult& planned, double max_error) {
  ApproxPlan plan;
  plan.max_error = max_error;
  plan.exact_recompute_cost = planned.recompute_cost;
  plan.recompute_cost = planned.recompute_cost;
  if (!(max_error > 0)) return plan;
  const bool any_fields = std::any_of(graph.nodes.begin(), graph.nodes.end(),
                                      [](const Node& node) { return !node.approx.empty(); });
  if (!any_fields) {
    plan.reason = NoApproxReason::kNoApproxFields;
    return plan;
  }
  if (planned.recomputes.empty()) {
    plan.reason = NoApproxReason::kNothingRecomputed;
    return plan;
  }
  const std::vector<uint32_t> reruns = RerunCounts(graph, planned);
  std::vector<Item> items;
  bool any_rerun = false, any_saving = false;
  double best_error = INFINITY;
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    const std::vector<ApproxOption>& options = graph.nodes[n].approx;
    if (options.empty() || reruns[n] == 0) continue;
    any_rerun = true;
    Item item{n, reruns[n], {}};
    for (size_t o = 0; o < options.size(); ++o) {
      const ApproxChoice choice = MakeChoice(graph, n, o, reruns[n]);
      if (!(choice.cost_saved > 0)) continue;
      any_saving = true;
      if (choice.error < best_error) {
        best_error = choice.error;
        plan.best_node = n;
        plan.best_option = o;
      }
      if (choice.error > max_error) continue;
      item.options.push_back({o, choice.cost_saved, choice.error, 0});
    }
    if (!item.options.empty()) items.push_back(std::move(item));
  }
  if (items.empty()) {
    plan.reason = !any_rerun    ? NoApproxReason::kNotRerun
                  : !any_saving ? NoApproxReason::kNoSaving
                                : NoApproxReason::kErrorOverBudget;
    return plan;
  }
  const size_t units =
      std::clamp(kMaxTableEntries / items.size(), kMinUnits, kMaxUnits);
  for (Item& item : items) {
    for (Option& option : item.options) {
      // Rounded up, so that units within the budget mean errors within it.
      const double scaled = std::ceil(option.error / max_error * static_cast<double>(units));
      option.units = std::min(units, static_cast<size_t>(std::max(0.0, scaled)));
    }
  }
  std::vector<size_t> taken = Knapsack(items, units);
  Upgrade(items, max_error, &taken);
  for (size_t i = 0; i < items.size(); ++i) {
    if (taken[i] == SIZE_MAX) continue;
    plan.choices.push_back(
        MakeChoice(graph, items[i].node, items[i].options[taken[i]].option, items[i].reruns));
  }
  Finish(graph, &plan);
  // A sum rounded over the bound in the last bit: drop the smallest saving.
  while (plan.estimated_error > max_error && !plan.choices.empty()) {
    auto smallest = std::min_element(
        plan.choices.begin(), plan.choices.end(),
        [](const ApproxChoice& a, const ApproxChoice& b) { return a.cost_saved < b.cost_saved; });
    plan.choices.erase(smallest);
    Finish(graph, &plan);
  }
  spdlog::debug("approx: {} of {} re-run linears approximated, estimated error {} <= {}",
                plan.choices.size(), items.size(), plan.estimated_error, max_error);
  return plan;
}

ApproxPlan EvaluateApproximations(const Graph& graph, const SimResult& planned,
                                  const std::vector<std::pair<NodeId, size_t>>& chosen,
                                  double max_error) {
  ApproxPlan plan;
  plan.max_error = max_error;
  plan.exact_recompute_cost = planned.recompute_cost;
  plan.reason = NoApproxReason::kNotRerun;
  const std::vector<uint32_t> reruns = RerunCounts(graph, planned);
  for (const auto& [n, o] : chosen) plan.choices.push_back(MakeChoice(graph, n, o, reruns[n]));
  Finish(graph, &plan);
  return plan;
}

double ApproxChainCost(const ApproxPlan& approx, const Recompute& recompute) {
  double cost = recompute.cost;
  if (approx.saved_per_run.empty()) return cost;
  for (NodeId n : recompute.chain) cost -= approx.saved_per_run[n];
  return std::max(0.0, cost);
}

bool ChainApproximated(const ApproxPlan& approx, const std::vector<NodeId>& chain) {
  return std::any_of(chain.begin(), chain.end(),
                     [&](NodeId n) { return approx.Find(n) != nullptr; });
}

std::string DescribeNoApprox(const Graph& graph, const ApproxPlan& approx) {
  switch (approx.reason) {
    case NoApproxReason::kNone:
    case NoApproxReason::kExact:
      return "";
    case NoApproxReason::kNoApproxFields:
      return "the graph has no \"approx\" fields (ONNX models, and graphs exported without "
             "approximations=True, have none)";
    case NoApproxReason::kNothingRecomputed:
      return "the plan recomputes nothing";
    case NoApproxReason::kNotRerun:
      return "no node with \"approx\" options is re-run by the plan's recomputation";
    case NoApproxReason::kNoSaving:
      return "no option of a re-run node costs less than the node itself";
    case NoApproxReason::kErrorOverBudget: {
      const ApproxOption& best = graph.nodes[approx.best_node].approx[approx.best_option];
      return "every option is over the error bound: the lowest, node '" +
             ShowName(graph.nodes[approx.best_node].name) + "' at rank " +
             std::to_string(best.rank) + ", has error " + ErrorText(best.error) + " > " +
             ErrorText(approx.max_error);
    }
  }
  return "";
}

namespace {

// `graph` with each listed (node, option) costing the option's cost.
Graph Recosted(const Graph& graph, const std::vector<std::pair<NodeId, size_t>>& options) {
  Graph cheaper = graph;
  for (const auto& [n, o] : options) {
    const double cost = graph.ApproxCost(n, graph.nodes[n].approx[o]);
    if (cost < 0 || cost >= graph.NodeCost(n)) continue;
    (graph.cost_unit == CostUnit::kFlops ? cheaper.nodes[n].flops : cheaper.nodes[n].time_us) =
        cost;
  }
  return cheaper;
}

}  // namespace

Graph WithApproxCosts(const Graph& graph, const ApproxPlan& approx) {
  std::vector<std::pair<NodeId, size_t>> options;
  for (const ApproxChoice& choice : approx.choices) options.emplace_back(choice.node, choice.option);
  return Recosted(graph, options);
}

Graph WithCheapestOptions(const Graph& graph, double max_error) {
  std::vector<std::pair<NodeId, size_t>> options;
  for (NodeId n = 0; n < graph.nodes.size(); ++n) {
    const std::vector<ApproxOption>& approx = graph.nodes[n].approx;
    size_t best = SIZE_MAX;
    double best_cost = graph.NodeCost(n);
    for (size_t o = 0; o < approx.size(); ++o) {
      const double cost = graph.ApproxCost(n, approx[o]);
      if (approx[o].error <= max_error && cost >= 0 && cost < best_cost) {
        best = o;
        best_cost = cost;
      }
    }
    if (best != SIZE_MAX) options.emplace_back(n, best);
  }
  return Recosted(graph, options);
}

ApproxPlanned PlanApproximations(const Graph& graph, const PlannerOptions& options,
                                 const PlannerResult& found, double max_error) {
  SimOptions sim_options;
  sim_options.reserve_bytes = options.reserve_bytes;
  ApproxPlanned result;
  result.found = found;
  result.approx = ChooseApproximations(graph, Simulate(graph, found.keep, sim_options), max_error);
  const bool any_fields = std::any_of(graph.nodes.begin(), graph.nodes.end(),
                                      [](const Node& node) { return !node.approx.empty(); });
  if (!found.fits || !(max_error > 0) || !any_fields) return result;
  // Keeps `next` when its approximate cost is lower; ties keep the plan held.
  auto consider = [&](PlannerResult next, const char* how) {
    if (!next.fits || next.keep == result.found.keep) return false;
    const SimResult sim = Simulate(graph, next.keep, sim_options);
    ApproxPlan approx = ChooseApproximations(graph, sim, max_error);
    spdlog::debug("approx: {}: approximate recompute cost {} (held {})", how,
                  approx.recompute_cost, result.approx.recompute_cost);
    if (!(approx.recompute_cost < result.approx.recompute_cost)) return false;
    next.peak = sim.peak_bytes;
    next.recompute_cost = sim.recompute_cost;
    next.method += std::string(" (") + how + ")";
    result.found = std::move(next);
    result.approx = std::move(approx);
    ++result.replans;
    return true;
  };
  // Planned as if every option within the bound were taken, then evaluated.
  consider(PlanGraph(WithCheapestOptions(graph, max_error), options),
           "re-planned on the cheapest options' costs");
  for (int round = 0; round < kMaxReplans && result.approx.any(); ++round) {
    if (!consider(PlanGraph(WithApproxCosts(graph, result.approx), options),
                  "re-planned on the chosen options' costs")) {
      break;
    }
  }
  spdlog::info("approx: {} approximated, recompute cost {} -> {}, estimated error {}",
               result.approx.choices.size(), result.approx.exact_recompute_cost,
               result.approx.recompute_cost, result.approx.estimated_error);
  return result;
}

}  // namespace ckptplan
