// The memory / recompute trade-off curve: one plan per budget.
//
// Budgets are planned in ascending order. The curve is monotone by
// construction: a plan that fits a smaller budget also fits every larger
// one, so when the plan found for a larger budget costs more, the cheaper
// plan of the smaller budget is kept (row.reused).
#ifndef CKPTPLAN_SWEEP_H_
#define CKPTPLAN_SWEEP_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/plan/planner.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// `steps` budgets evenly spaced from `from` to `to` inclusive (bytes,
/// rounded down). Throws InputError (kExitUsage) when steps < 1, from > to,
/// or steps > 1 with from == to.
std::vector<int64_t> LinearBudgets(int64_t from, int64_t to, int steps);

/// Parses "20GiB,40GiB,60GiB" (sizes as ParseSize reads them). Throws
/// InputError (kExitUsage) naming `what` (the caller's name for the list,
/// e.g. its flag) on a bad entry.
std::vector<int64_t> ParseBudgetList(std::string_view text, std::string_view what);

struct SweepRow {
  int64_t budget_bytes = 0;
  bool feasible = false;
  int64_t peak_bytes = 0;  ///< of the plan; when infeasible, the lowest peak found
  double recompute_cost = 0;
  std::string method;   ///< how the plan was found
  bool reused = false;  ///< the plan of a smaller budget, which was cheaper
};

struct SweepResult {
  std::vector<SweepRow> rows;  ///< ascending budget, duplicates removed
  int64_t save_all_peak_bytes = 0;
  double step_cost = 0;  ///< forward + backward + optimizer cost, run once
  LowerBound lower_bound;
  int64_t lowest_peak_bytes = 0;  ///< lowest peak any plan reached
  std::string strategy;
};

/// Plans every budget with `options` (its budget_bytes is ignored).
SweepResult RunSweep(const Graph& graph, std::vector<int64_t> budgets,
                     const PlannerOptions& options);

}  // namespace ckptplan

#endif  // CKPTPLAN_SWEEP_H_
