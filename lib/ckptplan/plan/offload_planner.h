// Offload as a third decision beside save and recompute (sim/offload.h).
//
// Given the recompute-only plan, PlanOffload looks for a cheaper plan that
// fits: (1) offload first: from save-all, repeatedly offload the tensor with
// the least added exposed cost per byte of peak freed (the greedy's score)
// while the peak is over the budget, then plan the rest with the recompute
// planner on the rewritten graph; (2) conversions: in the recompute-only plan
// and in (1)'s, turn each recomputed tensor into an offloaded one, most
// costly recompute first, where the plan still fits and costs less. The cost
// of a plan is its recompute cost plus its exposed copy time in cost units.
// The result is never costlier than the recompute-only plan, which it
// returns (no offloads) when nothing beats it.
#ifndef CKPTPLAN_OFFLOAD_PLANNER_H_
#define CKPTPLAN_OFFLOAD_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/plan/planner.h"
#include "ckptplan/sim/offload.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

struct OffloadPlan {
  SaveSet keep;                     ///< over the original graph: 0 = recomputed
  std::vector<TensorId> offloaded;  ///< ascending ids; saved and offloaded
  int64_t peak = 0;
  double recompute_cost = 0;
  double exposed_cost = 0;  ///< in the graph's cost unit
  int64_t host_peak_bytes = 0;
  bool over_host_budget = false;
  bool fits = false;  ///< peak <= budget and within the host budget
  std::string method;

  double cost() const { return recompute_cost + exposed_cost; }
};

/// Simulates `keep` with `offloaded` (ApplyOffload then Simulate).
OffloadPlan MeasureOffloadPlan(const Graph& graph, const SaveSet& keep,
                               std::vector<TensorId> offloaded, const OffloadOptions& offload,
                               const PlannerOptions& options);

/// The cheapest fitting plan with offload, starting from `recompute_only`
/// (PlanGraph's result for the same options); see above.
OffloadPlan PlanOffload(const Graph& graph, const PlannerOptions& options,
                        const OffloadOptions& offload, const PlannerResult& recompute_only);

}  // namespace ckptplan

#endif  // CKPTPLAN_OFFLOAD_PLANNER_H_
