// Greedy choice of which saved tensors to drop and recompute.
#ifndef CKPTPLAN_SELECTOR_H_
#define CKPTPLAN_SELECTOR_H_

#include <cstdint>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

struct GreedyOptions {
  int64_t budget_bytes = 0;  ///< peak bytes the plan must stay at or under
  int64_t reserve_bytes = 0;
  /// IncrementalPlan only: simulate only the drops whose bounds may beat the
  /// best one simulated, scoring those DropDelta handles without simulating;
  /// off, every saved candidate of a searched region is simulated. The plan
  /// is the same either way.
  bool prune = true;
  /// IncrementalPlan only: also simulate every drop the bounds ruled out and
  /// throw std::logic_error unless its bound held and it does not beat the
  /// drop chosen, and simulate every drop DropDelta scored and throw unless
  /// the scores are equal. For tests.
  bool verify = false;
  /// IncrementalPlan only, with `prune`: on a graph of one region, bound the
  /// candidates lazily, in the order of keys that only a drop near them
  /// renews, instead of bounding every candidate in every search. The plan
  /// is the same either way.
  bool lazy_keys = true;
  /// IncrementalPlan only, with `prune`: hold a tier-0 bound that comes
  /// first under the floor its chain's closure gives (the storages it reads
  /// live to its place, the copies it moves) before scoring its drop. The
  /// plan is the same either way.
  bool chain_floors = true;
};

struct GreedyResult {
  SaveSet keep;                 ///< the plan: candidates saved (1) or dropped (0)
  std::vector<TensorId> drops;  ///< tensors dropped, in the order chosen
  int64_t start_peak = 0;       ///< peak of the start set
  int64_t peak = 0;             ///< peak of `keep`
  double recompute_cost = 0;    ///< of `keep`
  bool fits = false;            ///< peak <= budget
};

/// How the greedy ranks dropping one saved candidate. Shared by GreedyPlan and
/// IncrementalPlan so that both pick the same drops.
struct DropChoice {
  TensorId tensor = kNoId;  ///< kNoId: the drop makes no progress
  int tier = 2;             ///< 0: lowers the peak; 1: flattens a tied peak
  double score = 0;         ///< added recompute cost per byte freed
  int64_t freed = 0;        ///< bytes freed (tier 0: at the peak; tier 1: at peak nodes)

  /// Lower tier, then lower score, then more bytes freed, then lower id.
  bool BetterThan(const DropChoice& other) const;
};

/// Scores dropping `t`, given the simulations before (`current`) and after
/// (`trial`) the drop.
DropChoice ScoreDrop(TensorId t, const SimResult& current, const SimResult& trial);

/// What ScoreDrop reads, for a drop that changes the node peaks of one region
/// only (FindRegions): the step's peak before and after, and the region's node
/// peaks before and after (region simulations, plus `offset` per node to make
/// them the step's; null for none).
struct RegionDrop {
  int64_t peak = 0;
  int64_t trial_peak = 0;
  double added_cost = 0;  ///< recompute cost after minus before
  const std::vector<int64_t>* node_peak = nullptr;
  const std::vector<int64_t>* trial_node_peak = nullptr;
  const std::vector<int64_t>* offset = nullptr;
};
/// ScoreDrop for such a drop; equal to ScoreDrop on the whole step's
/// simulations.
DropChoice ScoreDrop(TensorId t, const RegionDrop& drop);

/// From `start`, repeatedly drops the saved candidate with the least added
/// recompute cost per byte of peak it frees, re-simulating each time, until
/// the peak fits the budget. When no single drop lowers the peak (equal peaks
/// at several steps), it drops the one that frees the most bytes, per unit of
/// cost, at the steps that are at the peak, provided fewer steps end up at the
/// peak. A drop never raises the peak. Ties: larger saving, then lower id.
GreedyResult GreedyPlan(const Graph& graph, const SaveSet& start,
                        const GreedyOptions& options);

}  // namespace ckptplan

#endif  // CKPTPLAN_SELECTOR_H_
