// The planning path `plan` and `check` share: the plan, the lower bound and
// the simulations a summary reports.
#ifndef CKPTPLAN_PLAN_OUTCOME_H_
#define CKPTPLAN_PLAN_OUTCOME_H_

#include <string>

#include "ckptplan/ir/graph.h"
#include "ckptplan/plan/planner.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// The planning path `plan` and `check` share: PlanGraph (planner.h) with
/// `options`, then save-all and the plan simulated with categories recorded
/// at every step (`per_step`) or at the peak only.
/// Never throws for an unreachable budget: `infeasible` says why instead.
struct PlanOutcome {
  LowerBound bound;
  PlannerResult found;     ///< the plan; the lowest peak found if it does not fit
  SimResult save_all;
  SimResult planned;       ///< simulation of found.keep
  std::string infeasible;  ///< why no plan fits the budget; empty when found.fits
  double plan_seconds = 0;      ///< PlanGraph alone
  double plan_cpu_seconds = 0;  ///< PlanGraph alone, process CPU time (user + sys)
  double simulate_seconds = 0;  ///< the save-all simulation alone
};
PlanOutcome ComputePlan(const Graph& graph, const PlannerOptions& options, bool per_step = true);

/// Simulate with `reserve` bytes held, categories recorded at every step
/// (`per_step`: timelines, reports) or at the peak only.
SimResult SimulateRecorded(const Graph& graph, const SaveSet& keep, int64_t reserve,
                           bool per_step = true,
                           const std::vector<uint32_t>* approx_options = nullptr);

}  // namespace ckptplan

#endif  // CKPTPLAN_PLAN_OUTCOME_H_
