// The `plan` command's search: one strategy, or (the default) the cheapest
// fitting plan among several searches and the baselines.
//
// The default strategy runs the greedy (selector.h) from the min-cut start
// (mincut.h) and from save-all, takes the best every-k-th segment plan and
// the baselines (strategies.h), cleans each fitting plan up (cleanup.h),
// then improves the winner by local search (local_search.h). It returns the
// cheapest plan that fits; when none fits, the one with the lowest peak.
#ifndef CKPTPLAN_PLANNER_H_
#define CKPTPLAN_PLANNER_H_

#include <cstdint>
#include <string>

#include "ckptplan/graph.h"
#include "ckptplan/recompute_policy.h"
#include "ckptplan/simulator.h"
#include "ckptplan/strategies.h"

namespace ckptplan {

struct PlannerOptions {
  int64_t budget_bytes = 0;
  int64_t reserve_bytes = 0;
  Strategy strategy = Strategy::kCkptplan;
  std::string start = "mincut";  ///< greedy start: "mincut" or "save-all"
  RecomputePolicy policy = DefaultRecomputePolicy();
};

struct PlannerResult {
  SaveSet keep;
  int64_t peak = 0;  ///< bytes
  double recompute_cost = 0;
  bool fits = false;
  std::string method;  ///< how `keep` was found, e.g. "greedy from mincut + cleanup"
};

/// The start set named by `start` ("mincut", "save-all"); throws InputError
/// (exit code kExitUsage) for any other name.
SaveSet StartSet(const Graph& graph, const std::string& start, const RecomputePolicy& policy);

/// Plans `graph` for options.budget_bytes with options.strategy.
PlannerResult PlanGraph(const Graph& graph, const PlannerOptions& options);

}  // namespace ckptplan

#endif  // CKPTPLAN_PLANNER_H_
