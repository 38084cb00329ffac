// The `plan` command's search: one strategy, or (the default) the cheapest
// fitting plan among several searches and the baselines.
//
// The default strategy runs the greedy (selector.h) from the --start set and,
// where RunsExtraGreedies, from the other start (min-cut, mincut.h, and
// save-all), takes the best every-k-th segment plan (k = 1..64,
// fewer on graphs of over 15,625 nodes, down to 2 over 500,000; when none
// fits and RunsExtraGreedies, also the greedy from the lowest-peak one) and
// the baselines
// (strategies.h), and cleans each
// fitting plan up (cleanup.h): a baseline's only where that costs at most
// max(1e6, 16 x nodes) node-steps of trials (one shared with a copy of its
// region counted at the region's candidates), or no greedy's plan fits (on
// one deep region a cleanup costs about dropped candidates x nodes). Local
// search (local_search.h) then runs from
// the best four distinct plans (the best one on graphs of more than 64
// candidates), with three-flip moves from the best plan on graphs of at most
// 20 candidates. It returns the cheapest plan that fits; when none fits, the
// one with the lowest peak. Ties keep the plan found first.
#ifndef CKPTPLAN_PLANNER_H_
#define CKPTPLAN_PLANNER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "ckptplan/ir/graph.h"
#include "ckptplan/plan/recompute_policy.h"
#include "ckptplan/sim/simulator.h"
#include "ckptplan/plan/strategies.h"

namespace ckptplan {

struct PlannerOptions {
  int64_t budget_bytes = 0;
  int64_t reserve_bytes = 0;
  Strategy strategy = Strategy::kCkptplan;
  std::string start = "mincut";  ///< greedy start: "mincut" or "save-all"
  RecomputePolicy policy = DefaultRecomputePolicy();
  /// Greedy runs use GreedyPlan instead of IncrementalPlan (same plans, slower).
  bool reference_greedy = false;
  /// Bounds rule out drops and re-saves without simulating them (the greedy's,
  /// cleanup's and local search's); off, every one is simulated. Plans are
  /// the same.
  bool prune = true;
  /// Simulate what the bounds ruled out and throw std::logic_error unless
  /// each bound held (tests).
  bool verify = false;
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
/// The same, reusing `context` (see SimContext).
SaveSet StartSet(const SimContext& context, const std::string& start,
                 const RecomputePolicy& policy);

/// `keep` less every saved candidate that is a view of a saved candidate's
/// storage: one whose recompute re-runs only nodes that alias that storage
/// (Made::kAlias, no workspace) and that read nothing but it (through a
/// saved candidate of it, or views of it) and resident tensors. Dropping
/// such a view allocates nothing and re-runs only those nodes. While it
/// stays saved, dropping the candidate holding the storage frees nothing
/// either (the view holds it), so no single drop frees the storage: on an
/// exported GPT-2, `_softmax` and the view `_reshape_alias` <- `expand_2`
/// of it, both saved by the min cut. Candidates are looked at in id order,
/// so that of views of one another the first stays. The greedy starts from
/// this set (PlanGraph, every strategy that runs it).
SaveSet DropSavedViews(const SimContext& context, SaveSet keep);

/// When a baseline's cleanup, stopped once a floor under its cost
/// (PeakFloor::CostOfFitting) passes `to_reach`, reads the floor next: after
/// `resaved` re-saves the floor read `floor`, and `last` (when given) holds
/// the reading before, (re-saves, floor). At most twice `resaved` (at least
/// 1); sooner where the floor's rise since `last`, kept up, passes
/// `to_reach` sooner, but never sooner than resaved + resaved / 16 (at
/// least one more).
size_t NextFloorReading(size_t resaved, double floor,
                        const std::optional<std::pair<size_t, double>>& last, double to_reach);

/// Whether the default strategy runs the greedy from the second start and
/// from the lowest-peak segment plan: on graphs of at most 10,000 candidates
/// whose candidates x largest region's nodes is at most 10^7 (a greedy costs
/// about that many node-steps; on one deep region it cost several times the
/// first greedy and gave the same or a worse plan).
bool RunsExtraGreedies(const SimContext& context);

/// Plans `graph` for options.budget_bytes with options.strategy.
PlannerResult PlanGraph(const Graph& graph, const PlannerOptions& options);

}  // namespace ckptplan

#endif  // CKPTPLAN_PLANNER_H_
