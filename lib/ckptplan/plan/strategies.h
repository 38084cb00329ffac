// Baseline plans: what users can do today without ckptplan, each a SaveSet
// that the one simulator (simulator.h) then measures.
#ifndef CKPTPLAN_STRATEGIES_H_
#define CKPTPLAN_STRATEGIES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

enum class Strategy : uint8_t {
  kCkptplan,         ///< the default: best of several searches and the baselines
  kGreedy,           ///< one greedy run from the --start set, then cleanup
  kSaveAll,          ///< no checkpointing
  kScopeCheckpoint,  ///< torch.utils.checkpoint around every module scope block
  kSqrtSegments,     ///< Chen et al.: sqrt(n) segments of forward nodes
  kKnapsack,         ///< PyTorch activation_memory_budget: knapsack on saved bytes
};
std::string_view ToString(Strategy strategy);
/// Returns false when `name` is not a strategy name.
bool ParseStrategy(std::string_view name, Strategy* strategy);
/// Every strategy, the default first.
const std::vector<Strategy>& AllStrategies();

/// Checkpoints groups of forward nodes: group[n] is the group of forward node
/// n (kNoId: not checkpointed). A candidate made inside a group is dropped
/// unless a forward node outside that group reads it (it is then a
/// checkpoint input, which torch.utils.checkpoint keeps).
SaveSet CheckpointGroups(const Graph& graph, const std::vector<uint32_t>& group);
/// The same, reusing `context` (see SimContext); so do the overloads below.
SaveSet CheckpointGroups(const SimContext& context, const std::vector<uint32_t>& group);

/// A module's internal tensors, for every group at once: the candidates made
/// by a forward node of a group that no forward node outside that group
/// reads (what checkpointing the group recomputes), in SaveCandidates order.
std::vector<TensorId> InternalCandidates(const Graph& graph, const std::vector<uint32_t>& group);

/// Full checkpointing of every scope block (ScopeBlock, ir/scope.h; nodes
/// without scope are not checkpointed). Equal to SaveAll when no node has a scope.
SaveSet ScopeCheckpointPlan(const Graph& graph);
SaveSet ScopeCheckpointPlan(const SimContext& context);

/// The forward nodes cut into `segments` runs of (nearly) equal node count,
/// each checkpointed. `segments` is clamped to [1, forward nodes].
SaveSet SegmentPlan(const Graph& graph, int segments);

/// SegmentPlan for many segment counts: what each droppable candidate's
/// forward producer and readers are, read once, so that a plan costs a pass
/// over the candidates. Segments are runs of forward nodes in order, so a
/// candidate is internal exactly when its producer and its first and last
/// forward readers fall in one segment.
class SegmentPlans {
 public:
  explicit SegmentPlans(const SimContext& context);
  /// Forward nodes of the graph.
  size_t forward() const { return forward_; }
  /// Equal to SegmentPlan(graph, segments).
  SaveSet Plan(int segments) const;

 private:
  struct Span {
    TensorId tensor;
    uint32_t first, last;  // lowest and highest forward index of producer and forward readers
  };
  size_t num_tensors_ = 0;
  size_t forward_ = 0;
  std::vector<Span> spans_;  // droppable candidates made by forward nodes
};

/// Chen et al. 2016: round(sqrt(forward nodes)) segments.
SaveSet SqrtSegmentsPlan(const Graph& graph);
SaveSet SqrtSegmentsPlan(const SimContext& context);

/// PyTorch's activation_memory_budget model: saved tensors cost their bytes
/// for the whole step and nothing else moves, calibrated so that saving every
/// candidate costs the save-all peak. Keeps the candidates of greatest total
/// recompute cost (their producer's cost) whose bytes fit in
/// budget - (save-all peak - bytes of all candidates), by a 0/1 knapsack with
/// byte weights quantised to 4096 buckets (fewer above 16,384 candidates).
SaveSet KnapsackPlan(const Graph& graph, int64_t budget_bytes, int64_t reserve_bytes);
SaveSet KnapsackPlan(const SimContext& context, int64_t budget_bytes, int64_t reserve_bytes);
/// The same from `save_all`, SaveAll's simulation under the reserve (its
/// peak is the one read), where the caller has it.
SaveSet KnapsackPlan(const SimContext& context, int64_t budget_bytes, const SimResult& save_all);

}  // namespace ckptplan

#endif  // CKPTPLAN_STRATEGIES_H_
