// Approximate recompute under an error budget (docs/approximate-recompute.md).
//
// A memory plan fixes which nodes recomputation re-runs. A re-run linear node
// with "approx" options (ir/graph.h ApproxOption) may instead run at a lower
// rank: it costs the option's cost instead of its own, and adds the option's
// measured gradient error. The re-run makes the same tensors, but its
// temporaries (the option's workspace_bytes) and the factors kept all step
// (factor_bytes) are memory the simulator counts (SimOptions::approx_options):
// given the budget (ApproxFit), only approximations whose plan, re-simulated
// with them, fits are chosen. The estimated gradient error of a plan is the
// sum of its chosen options' errors (a first-order, triangle-inequality
// bound); a plan keeps it at or under max_error.
#ifndef CKPTPLAN_APPROX_PLANNER_H_
#define CKPTPLAN_APPROX_PLANNER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/plan/planner.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// One re-run node run approximately.
struct ApproxChoice {
  NodeId node = kNoId;
  size_t option = 0;      ///< index into graph.nodes[node].approx
  int64_t rank = 0;
  double error = 0;       ///< the option's measured gradient error
  uint32_t reruns = 0;    ///< times the plan's recomputation re-runs the node
  /// reruns x (NodeCost - ApproxCost), in the graph's cost unit.
  double cost_saved = 0;
};

/// Why a plan approximates nothing.
enum class NoApproxReason : uint8_t {
  kNone,               ///< something is approximated
  kExact,              ///< max_error is 0: exact plans
  kNoApproxFields,     ///< no node of the graph has "approx" options
  kNothingRecomputed,  ///< the plan recomputes nothing
  kNotRerun,           ///< no node with options is re-run by the plan
  kNoSaving,           ///< no option of a re-run node costs less than the node
  kErrorOverBudget,    ///< every option that saves has error > max_error
  /// every option within the error bound makes the re-simulated peak exceed
  /// the memory budget (its workspace and factors)
  kMemoryOverBudget,
};

struct ApproxPlan {
  double max_error = 0;
  std::vector<ApproxChoice> choices;  ///< by node id
  double estimated_error = 0;         ///< sum of choices' errors, in node order
  double cost_saved = 0;              ///< sum of choices' cost_saved, in node order
  double exact_recompute_cost = 0;    ///< the plan's recomputation run exactly
  double recompute_cost = 0;          ///< exact_recompute_cost - cost_saved
  NoApproxReason reason = NoApproxReason::kExact;
  /// kErrorOverBudget: the re-run node whose saving option has the lowest
  /// error, that option's index and error.
  NodeId best_node = kNoId;
  size_t best_option = 0;
  /// Saving per run of each node (0 when not approximated), by node id;
  /// empty when nothing is approximated.
  std::vector<double> saved_per_run;
  /// The plan's peak re-simulated with the approximations' memory (with an
  /// ApproxFit; -1 otherwise). kMemoryOverBudget: the lowest peak of a single
  /// option within the error bound (best_node, best_option).
  int64_t peak_bytes = -1;
  int64_t budget_bytes = -1;  ///< the budget checked; -1: none

  bool any() const { return !choices.empty(); }
  /// The choice for `n`, or nullptr.
  const ApproxChoice* Find(NodeId n) const;
};

/// Nodes re-run by `planned`'s recomputation, with how often, by node id
/// (needs SimOptions::record_details).
std::vector<uint32_t> RerunCounts(const Graph& graph, const SimResult& planned);

/// The memory an approximation must fit: the plan's save set, the options it
/// is simulated with (the reserve) and the budget.
struct ApproxFit {
  const SaveSet* keep = nullptr;
  SimOptions sim;
  int64_t budget_bytes = 0;
};

/// Per node id, the option index `approx` runs it with, kNoId when exact:
/// SimOptions::approx_options of the plan with its approximations.
std::vector<uint32_t> ApproxOptionsByNode(const Graph& graph, const ApproxPlan& approx);

/// The options to run `planned`'s re-run nodes with that save the most
/// recompute cost with estimated error <= max_error: an exact multiple-choice
/// knapsack over errors rounded up to max_error / K (K <= 10000), then
/// upgrades the rounding left room for. Ties keep fewer approximations,
/// earlier nodes and lower ranks. max_error <= 0 chooses nothing (kExact).
/// With `fit` (whose keep `planned` simulates), memory too: options whose
/// workspace or factors alone push the re-simulated peak over the budget are
/// left out, and while the chosen set's peak is over it, the change (a lower
/// saving option of one node, or none) that keeps the most saving and fits,
/// else lowers the peak most, is made. Without options giving
/// workspace_bytes or factor_bytes the peak is the exact plan's and nothing
/// is re-simulated.
ApproxPlan ChooseApproximations(const Graph& graph, const SimResult& planned, double max_error,
                                const ApproxFit* fit = nullptr);

/// The approximations a plan file names ((node, option index) pairs, by
/// node id), evaluated on `planned`; a choice whose node is not re-run has
/// reruns 0 and saves nothing.
ApproxPlan EvaluateApproximations(const Graph& graph, const SimResult& planned,
                                  const std::vector<std::pair<NodeId, size_t>>& chosen,
                                  double max_error);

/// Cost of one recomputation chain with `approx` applied.
double ApproxChainCost(const ApproxPlan& approx, const Recompute& recompute);
/// True when `chain` re-runs a node `approx` approximates.
bool ChainApproximated(const ApproxPlan& approx, const std::vector<NodeId>& chain);

/// A relative error as messages write it: "0.006", "1.2e-05" (4 digits).
std::string ErrorText(double error);

/// Why nothing is approximated, in words ("the plan recomputes nothing"),
/// naming the node and the bound for kErrorOverBudget; empty for kNone and
/// kExact.
std::string DescribeNoApprox(const Graph& graph, const ApproxPlan& approx);

/// `graph` with the nodes `approx` chooses costing their option's cost: what
/// the memory planner searches on to weigh drops by their approximate cost.
Graph WithApproxCosts(const Graph& graph, const ApproxPlan& approx);
/// `graph` with every node costing its cheapest option of error <= max_error
/// (alone): an optimistic start for the memory planner.
Graph WithCheapestOptions(const Graph& graph, double max_error);

/// The memory plan and its approximations.
struct ApproxPlanned {
  PlannerResult found;   ///< the memory plan (re-planned when that was cheaper)
  ApproxPlan approx;
  int replans = 0;       ///< re-plans kept (each lowered the approximate cost)
};
/// From the exact plan `found`: chooses approximations (fitting
/// options.budget_bytes with their memory); when it fits, also
/// plans memory on WithCheapestOptions and then on WithApproxCosts of the
/// plan held (up to three times), each evaluated on the real graph, and keeps
/// a plan only when its approximate recompute cost is lower (ties keep the
/// plan held, the exact one first). Every plan kept fits the budget with its
/// approximations (found.peak is that re-simulated peak).
ApproxPlanned PlanApproximations(const Graph& graph, const PlannerOptions& options,
                                 const PlannerResult& found, double max_error);

}  // namespace ckptplan

#endif  // CKPTPLAN_APPROX_PLANNER_H_
