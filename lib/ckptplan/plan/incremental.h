// The greedy planner of selector.h, made fast by bounding before simulating.
//
// GreedyPlan re-simulates the step for every saved candidate at every
// iteration. IncrementalPlan returns exactly the same plan (same drops in the
// same order, same peak and recompute cost) but simulates only the candidates
// whose bounds say they could be the best one. The bounds come from the
// current simulation alone:
//  - Dropping a candidate can only lower the per-node peaks (node_peak) of the
//    nodes in its "region": from the last forward read of its storage to the
//    node of the storage's last read, or to the end of the step when its
//    recompute would pull an already recomputed node earlier. Every other
//    node keeps or raises its value.
//  - Without such a pull, no node drops by more than the storage's bytes.
//    With one, the pulled nodes' inputs may leave too, but not those a node
//    reads at or after the last group the pulled nodes leave.
//  - The recompute cost a drop adds is the cost of the nodes its chain adds.
// Candidates are tried in order of their best possible score; the search
// stops as soon as no untried candidate can beat the best simulated one. A
// bound whose walk through pulled nodes was cut short is walked in full
// only when it comes up first, then put back in order.
// A drop the bounds let through is scored from the region's current
// simulation by DropDelta (sim/drop_delta.h, through FastDropScorer in
// fast_score.h, which local search shares) when it handles the drop, and
// simulated otherwise; the drop chosen is applied from DropDelta's patch of
// the region's simulation (DropDelta::Patch) where the region has no copies
// and DropDelta handles it, else simulated once (and a fast score that
// disagrees with the patch or that simulation throws). DropDelta is in the
// simulator's layer and restates its rule clause by clause; the differential
// tests and verify mode (which simulates every patch too) check it against
// Simulate.
// The bounds
// and DropDelta read the simulation's groups, storages and reads from one
// StepFacts (sim/step_facts.h), filled once per region search.
#ifndef CKPTPLAN_INCREMENTAL_H_
#define CKPTPLAN_INCREMENTAL_H_

#include <cstddef>

#include "ckptplan/ir/graph.h"
#include "ckptplan/plan/selector.h"

namespace ckptplan {

/// Work counters, for benchmarks and tests.
struct IncrementalStats {
  size_t iterations = 0;
  size_t simulations = 0;  ///< full Simulate calls, the start and trials
  size_t bounded = 0;      ///< candidate bounds computed (a walk each, tightenings too)
  /// Tier-0 bounds given their chain's floor (a walk of the chain's
  /// closure each) when they came first.
  size_t floored = 0;
  /// Of those, floors at the peak read again from the term that gave them
  /// in an earlier search (a range of node peaks), without the walk.
  size_t floors_witnessed = 0;
  /// Lazy keys passed over, before their span bounds, on such a term: their
  /// bounds would be floored to nothing when they came first.
  size_t floor_passed = 0;
  size_t keyed = 0;        ///< lazy keys computed (GreedyOptions::lazy_keys)
  /// Nodes a drop's renewal of lazy keys visited (forward from what its
  /// walk reaches), and the readers it did not visit: they re-run a random
  /// op when re-run (SimContext::reruns_random), so no key's walk reaches
  /// them or the nodes after them.
  size_t renew_visited = 0;
  size_t renew_random_stops = 0;
  /// Lazy keys passed over without a walk: a drop whose span (its own
  /// range and, with a pull, the pulled range; or the key's hull of it)
  /// misses a node at the peak frees nothing there.
  size_t missed_peak = 0;
  /// Of those, keys whose walk pulls: their range reaches the latest group
  /// a pulled node is re-run in.
  size_t missed_peak_pulls = 0;
  /// Lazy keys bounded from the nodes their drop may lower, without a walk
  /// (then walked only if that bound comes first), and of those, the ones
  /// passed over: that bound frees nothing or cannot beat the best drop.
  size_t span_bounds = 0;
  size_t span_passed = 0;
  /// Of the span bounds not passed over, those passed over on the bound of
  /// the key's walk as keyed (no walk either); the others go in with that
  /// bound, walked when it comes first unless the walk did not pull.
  size_t key_passed = 0;
  /// Tier-0 bounds of pulling drops held to the drop's own storage: a node
  /// before the drop's first use holds the peak at its own step.
  size_t peak_before_use = 0;
  /// Drops scored from the current simulation (DropDelta), not simulated.
  size_t fast_scores = 0;
  /// Of those, scores cut short: the drop was beaten by the best of the
  /// search at the simulation's highest step (DropDelta::Cutoff).
  size_t cut_scores = 0;
  /// Drops applied from a patch of the region's simulation (DropDelta::Patch),
  /// not simulated.
  size_t patched = 0;
  size_t regions = 0;      ///< regions searched apart (FindRegions)
  size_t searches = 0;     ///< region searches (bounds, then trials)
  /// Searches and trials answered from a copy of the region (ShapeRegions).
  size_t shared_searches = 0;
  size_t shared_trials = 0;
  /// Drops picked where the peak had stayed: only the regions the last
  /// drop changed were looked at, not every region at the peak.
  size_t quick_picks = 0;
};

/// Same contract and result as GreedyPlan.
GreedyResult IncrementalPlan(const Graph& graph, const SaveSet& start,
                             const GreedyOptions& options, IncrementalStats* stats = nullptr);
/// The same, reusing `context` (see SimContext).
GreedyResult IncrementalPlan(const SimContext& context, const SaveSet& start,
                             const GreedyOptions& options, IncrementalStats* stats = nullptr);

}  // namespace ckptplan

#endif  // CKPTPLAN_INCREMENTAL_H_
