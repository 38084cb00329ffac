#include "ckptplan/plan/approx_planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

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

// The summed estimated error and cost saved of `choices`.
double SumErrors(const std::vector<ApproxChoice>& choices) {
  double error = 0;
  for (const ApproxChoice& choice : choices) error += choice.error;
  return error;
}
double SumSaved(const std::vector<ApproxChoice>& choices) {
  double saved = 0;
  for (const ApproxChoice& choice : choices) saved += choice.cost_saved;
  return saved;
}

// Fills the totals and saved_per_run from `plan.choices`.
void Finish(const Graph& graph, ApproxPlan* plan) {
  plan->estimated_error = SumErrors(plan->choices);
  plan->cost_saved = SumSaved(plan->choices);
  plan->saved_per_run.clear();
  if (plan->choices.empty()) {
    plan->recompute_cost = plan->exact_recompute_cost;
    return;
  }
  plan->reason = NoApproxReason::kNone;
  plan->saved_per_run.assign(graph.nodes.size(), 0.0);
  for (const ApproxChoice& choice : plan->choices) {
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

// True when some option of the graph gives memory of its own: otherwise an
// approximated plan's peak is the exact plan's.
bool AnyOptionMemory(const Graph& graph) {
  for (const Node& node : graph.nodes) {
    for (const ApproxOption& option : node.approx) {
      if (option.workspace_bytes >= 0 || option.factor_bytes > 0) return true;
    }
  }
  return false;
}

// Re-simulates a plan's save set with approximations: its peak.
class PeakWith {
 public:
  PeakWith(const Graph& graph, const ApproxFit& fit)
      : context_(graph), fit_(fit), options_(graph.nodes.size(), kNoId) {
    sim_ = fit.sim;
    sim_.record_details = false;
    sim_.record_categories = false;
    sim_.first_node = 0;
    sim_.end_node = kNoId;
    sim_.approx_options = &options_;
  }
  int64_t operator()(const std::vector<ApproxChoice>& choices) {
    for (const ApproxChoice& choice : choices) options_[choice.node] = uint32_t(choice.option);
    Simulate(context_, *fit_.keep, sim_, &result_);
    for (const ApproxChoice& choice : choices) options_[choice.node] = kNoId;
    return result_.peak_bytes;
  }

 private:
  SimContext context_;
  const ApproxFit& fit_;
  std::vector<uint32_t> options_;
  SimOptions sim_;
  SimResult result_;
};

// While `choices` re-simulate over `limit`: the change of one choice to a
// lower-saving option of its node (within the error bound) or to none that
// keeps the most saving and fits, else lowers the peak most; ties: the
// earlier node, then none before options, then the lower option. Each change
// lowers the saving, so this ends (at the latest with nothing approximated).
int64_t RepairMemory(const Graph& graph, PeakWith& peak_with, int64_t limit, double max_error,
                     std::vector<ApproxChoice>* choices) {
  int64_t peak = peak_with(*choices);
  while (peak > limit && !choices->empty()) {
    const double error = SumErrors(*choices);
    std::vector<ApproxChoice> best;
    int64_t best_peak = 0;
    double best_saved = 0;
    bool have = false;
    auto consider = [&](std::vector<ApproxChoice> next) {
      const int64_t next_peak = peak_with(next);
      const double saved = SumSaved(next);
      const bool fits = next_peak <= limit, best_fits = have && best_peak <= limit;
      const bool better = !have || (fits && !best_fits) ||
                          (fits && best_fits && saved > best_saved) ||
                          (!fits && !best_fits && next_peak < best_peak);
      if (!better) return;
      have = true;
      best = std::move(next);
      best_peak = next_peak;
      best_saved = saved;
    };
    for (size_t i = 0; i < choices->size(); ++i) {
      const ApproxChoice& current = (*choices)[i];
      std::vector<ApproxChoice> without = *choices;
      without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
      consider(without);
      for (size_t o = 0; o < graph.nodes[current.node].approx.size(); ++o) {
        const ApproxChoice alternative = MakeChoice(graph, current.node, o, current.reruns);
        if (o == current.option || !(alternative.cost_saved > 0) ||
            !(alternative.cost_saved < current.cost_saved) ||
            error - current.error + alternative.error > max_error) {
          continue;
        }
        std::vector<ApproxChoice> next = *choices;
        next[i] = alternative;
        consider(std::move(next));
      }
    }
    spdlog::debug("approx: peak {} over {}: {} approximation(s) saving {} instead, peak {}", peak,
                  limit, best.size(), best_saved, best_peak);
    *choices = std::move(best);
    peak = best_peak;
  }
  return peak;
}

}  // namespace

std::vector<uint32_t> ApproxOptionsByNode(const Graph& graph, const ApproxPlan& approx) {
  std::vector<uint32_t> options(graph.nodes.size(), kNoId);
  for (const ApproxChoice& choice : approx.choices) options[choice.node] = uint32_t(choice.option);
  return options;
}

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

ApproxPlan ChooseApproximations(const Graph& graph, const SimResult& planned, double max_error,
                                const ApproxFit* fit) {
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
  // Memory: only with a budget and options that give their own bytes. The
  // limit is the budget, or the exact plan's peak when that is over it (an
  // approximation never makes a plan worse).
  std::optional<PeakWith> peak_with;
  int64_t limit = 0;
  if (fit != nullptr && fit->keep != nullptr && AnyOptionMemory(graph)) {
    peak_with.emplace(graph, *fit);
    limit = std::max(fit->budget_bytes, (*peak_with)({}));
    plan.budget_bytes = fit->budget_bytes;
  }
  std::vector<Item> items;
  bool any_rerun = false, any_saving = false, any_within = false;
  double best_error = INFINITY;
  int64_t lowest_peak = INT64_MAX;
  NodeId lowest_node = kNoId;
  size_t lowest_option = 0;
  // Nothing fits for memory: the option that alone peaks lowest, for the message.
  auto memory_over_budget = [&] {
    plan.reason = NoApproxReason::kMemoryOverBudget;
    plan.best_node = lowest_node;
    plan.best_option = lowest_option;
    plan.peak_bytes = lowest_peak;
  };
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
      any_within = true;
      if (peak_with) {
        const int64_t alone = (*peak_with)({choice});
        if (alone < lowest_peak) {
          lowest_peak = alone;
          lowest_node = n;
          lowest_option = o;
        }
        if (alone > limit) continue;  // its workspace or factors alone do not fit
      }
      item.options.push_back({o, choice.cost_saved, choice.error, 0});
    }
    if (!item.options.empty()) items.push_back(std::move(item));
  }
  if (items.empty()) {
    plan.reason = !any_rerun    ? NoApproxReason::kNotRerun
                  : !any_saving ? NoApproxReason::kNoSaving
                  : !any_within ? NoApproxReason::kErrorOverBudget
                                : NoApproxReason::kMemoryOverBudget;
    if (plan.reason == NoApproxReason::kMemoryOverBudget) memory_over_budget();
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
  if (peak_with) {
    plan.peak_bytes = RepairMemory(graph, *peak_with, limit, max_error, &plan.choices);
    Finish(graph, &plan);
    if (plan.choices.empty()) memory_over_budget();
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
    case NoApproxReason::kMemoryOverBudget: {
      if (approx.best_node == kNoId) {
        return "every option within the error bound makes the plan's peak exceed the budget";
      }
      const ApproxOption& best = graph.nodes[approx.best_node].approx[approx.best_option];
      return "every option within the error bound makes the plan's peak exceed the budget "
             "(its re-run's workspace and factors): the lowest, node '" +
             ShowName(graph.nodes[approx.best_node].name) + "' at rank " +
             std::to_string(best.rank) + ", peaks at " + std::to_string(approx.peak_bytes) +
             " bytes > " + std::to_string(approx.budget_bytes);
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
  auto fit_of = [&](const SaveSet& keep) {
    ApproxFit fit;
    fit.keep = &keep;
    fit.sim = sim_options;
    fit.budget_bytes = options.budget_bytes;
    return fit;
  };
  const ApproxFit found_fit = fit_of(found.keep);
  result.approx = ChooseApproximations(graph, Simulate(graph, found.keep, sim_options), max_error,
                                       &found_fit);
  if (result.approx.any() && result.approx.peak_bytes >= 0) {
    result.found.peak = result.approx.peak_bytes;
  }
  const bool any_fields = std::any_of(graph.nodes.begin(), graph.nodes.end(),
                                      [](const Node& node) { return !node.approx.empty(); });
  if (!found.fits || !(max_error > 0) || !any_fields) return result;
  // Keeps `next` when its approximate cost is lower; ties keep the plan held.
  auto consider = [&](PlannerResult next, const char* how) {
    if (!next.fits || next.keep == result.found.keep) return false;
    const SimResult sim = Simulate(graph, next.keep, sim_options);
    const ApproxFit fit = fit_of(next.keep);
    ApproxPlan approx = ChooseApproximations(graph, sim, max_error, &fit);
    spdlog::debug("approx: {}: approximate recompute cost {} (held {})", how,
                  approx.recompute_cost, result.approx.recompute_cost);
    if (!(approx.recompute_cost < result.approx.recompute_cost)) return false;
    next.peak = approx.any() && approx.peak_bytes >= 0 ? approx.peak_bytes : sim.peak_bytes;
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
