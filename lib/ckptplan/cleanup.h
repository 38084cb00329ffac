// Cleanup after a drop-only search: re-save tensors whose drop is no longer
// needed.
//
// A greedy that drops tensors one at a time can end with drops that later
// drops made unnecessary. This pass re-saves dropped candidates, the one
// whose re-save removes the most recompute cost first, as long as the
// simulated peak stays within the budget.
#ifndef CKPTPLAN_CLEANUP_H_
#define CKPTPLAN_CLEANUP_H_

#include <cstdint>
#include <vector>

#include "ckptplan/graph.h"
#include "ckptplan/simulator.h"

namespace ckptplan {

struct CleanupResult {
  SaveSet keep;                             ///< the plan after re-saving
  std::vector<TensorId> resaved;            ///< candidates re-saved, in order
  int64_t peak_before = 0, peak_after = 0;  ///< bytes
  double cost_before = 0, cost_after = 0;   ///< recompute cost
};

/// Re-saves dropped candidates of `keep`, most expensive recompute first
/// (the recompute cost a re-save removes; ties: lower id), each only when
/// the peak stays <= `budget_bytes`; repeats until no re-save applies. When
/// `keep` is already over budget, nothing is re-saved.
CleanupResult ResaveDropped(const Graph& graph, const SaveSet& keep, int64_t budget_bytes,
                            int64_t reserve_bytes);
/// The same, reusing `context` (see SimContext).
CleanupResult ResaveDropped(const SimContext& context, const SaveSet& keep, int64_t budget_bytes,
                            int64_t reserve_bytes);

}  // namespace ckptplan

#endif  // CKPTPLAN_CLEANUP_H_
