// Local search around a plan, for when no single greedy drop helps.
//
// Moves flip one candidate (drop a saved one or re-save a dropped one) or,
// when no single flip improves, two candidates at once (a swap, a double
// drop, a double re-save), then three on small graphs. A move is taken when it improves the key
// (bytes over budget, recompute cost, peak) lexicographically: first the
// plan is pushed under the budget, then made cheaper while it stays under.
// Each round takes the best move of the smallest neighbourhood that has one.
#ifndef CKPTPLAN_LOCAL_SEARCH_H_
#define CKPTPLAN_LOCAL_SEARCH_H_

#include <cstddef>
#include <cstdint>

#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

struct LocalSearchOptions {
  int64_t budget_bytes = 0;
  int64_t reserve_bytes = 0;
  size_t pair_limit = 64;          ///< no two-flip moves above this many candidates
  size_t triple_limit = 20;        ///< no three-flip moves above this many candidates
  /// Stop after considering this many moves (a flip tried or ruled out by a
  /// floor, each several-flip move), so that where the search stops does
  /// not depend on how many moves the floors answered without simulating.
  size_t max_considered = 20000;
  /// Rule out re-saves by their floor (ResaveBounds) and score single drops
  /// from the region's simulation (DropDelta, sim/drop_delta.h) instead of
  /// simulating them; off, every move is simulated. The plan is the same
  /// either way.
  bool prune = true;
  /// Simulate every move a floor ruled out and throw std::logic_error
  /// unless the floor held (its peak is over the budget), and every drop
  /// DropDelta scored and throw unless the figures are equal. For tests.
  bool verify = false;
};

struct LocalSearchResult {
  SaveSet keep;
  int64_t peak = 0;  ///< bytes
  double recompute_cost = 0;
  bool fits = false;
  size_t moves = 0;
  size_t considered = 0;   ///< moves considered (see max_considered)
  size_t simulations = 0;  ///< trials simulated, the start's included
  size_t floored = 0;  ///< re-saves not simulated: their floor is over the budget
  size_t fast_scores = 0;  ///< single drops and re-saves scored by DropDelta, not simulated
  /// Of those, drops whose score was cut short: seen not to beat the best
  /// move (DropDelta::Cutoff).
  size_t cut_scores = 0;
  /// Drops not scored while the plan fits: their chain re-runs a node of
  /// some cost that no chain re-runs now (ReachedByChains; exact costs).
  size_t costed = 0;
};

LocalSearchResult ImprovePlan(const Graph& graph, const SaveSet& keep,
                              const LocalSearchOptions& options);
/// The same, reusing `context` (see SimContext).
LocalSearchResult ImprovePlan(const SimContext& context, const SaveSet& keep,
                              const LocalSearchOptions& options);

}  // namespace ckptplan

#endif  // CKPTPLAN_LOCAL_SEARCH_H_
