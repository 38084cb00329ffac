// The facts about one simulation that the speed code reads, derived once.
//
// The memory rule (simulator.h) puts recompute steps before the first
// non-forward reader and frees a storage after its last read. The
// incremental planner's bounds (plan/incremental.cc), cleanup's floors and
// ceilings (plan/cleanup.cc) and DropDelta's scores (drop_delta.h) all read
// the same consequences of that off a simulation of nodes [first, end):
//  - step groups: a node and the recompute steps before it; each node's own
//    step, its group's first step and the step re-running it;
//  - the storages: per root its original's and per tensor its recomputed
//    copy's (SimResult::buffers);
//  - the non-forward reads of each tensor (recompute steps and non-forward
//    nodes' own steps): the first, the last, the last by a group's own step,
//    whether a recompute step reads it; reads through views non-forward
//    nodes took of a forward tensor, which read that tensor's storage;
//  - per root, over its saved candidates, the two latest last reads (the
//    "family"): after dropping one, its original still lives to the other
//    candidates' last reads; and the root's last forward read, which no plan
//    changes (LastForwardReads).
// They are filled by parts, each on a consumer's demand (Fill, FillReads,
// FillSaved), into memory reused between fills; a fill resets only the
// entries the previous one set, so small regions of a large graph cost what
// they read. Tensor and node ids are those of the simulation read (a
// region's copy may share its simulation: cleanup reads it in the copy's
// ids). tests/sim/step_facts_test.cc works the facts out by hand.
#ifndef CKPTPLAN_STEP_FACTS_H_
#define CKPTPLAN_STEP_FACTS_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// Per storage root: the last node that reads its original whatever the
/// plan: the latest forward node reading any tensor of the root, or making a
/// forward-produced one. 0 for roots no forward node touches.
std::vector<NodeId> LastForwardReads(const SimContext& context);

class StepFacts {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;  ///< no such step or storage

  explicit StepFacts(const SimContext& context);

  /// Reads the steps and storages of `sim`, the simulation of nodes
  /// [first, end), which must outlive the reads that follow. Forgets the
  /// parts read before.
  void Fill(const SimResult& sim, NodeId first, NodeId end);
  /// Reads the non-forward reads of the filled simulation.
  void FillReads();
  /// Reads the families of the saved candidates under plan `keep` (the plan
  /// simulated), after FillReads.
  void FillSaved(const SaveSet& keep);

  const SimResult* sim() const { return sim_; }
  NodeId first() const { return first_; }
  NodeId end() const { return end_; }
  bool reads_ready() const { return reads_ready_; }
  bool saved_ready() const { return saved_ready_; }

  // Steps (Fill). Node arguments are in [first, end).
  /// The node whose group step `s` is in: the next own step's (every step
  /// has one: recompute steps come before a reader).
  NodeId Group(uint32_t s) const { return group_[s]; }
  /// Group(s), kNoId for kNone.
  NodeId GroupOf(uint32_t s) const { return s == kNone ? kNoId : group_[s]; }
  uint32_t OwnStep(NodeId n) const { return own_step_[n - first_]; }
  uint32_t GroupBegin(NodeId n) const { return group_begin_[n - first_]; }
  /// The step re-running `n`; kNone when none does (a node is re-run once
  /// at most: its copies then serve every later read).
  uint32_t RerunStep(NodeId n) const { return rerun_step_[n - first_]; }

  // Storages (Fill): indexes into the simulation's buffers, kNone for none.
  /// Root `root`'s original: the storage its own step made.
  uint32_t Original(TensorId root) const { return original_[root]; }
  /// The storage a recompute step made for tensor `t`.
  uint32_t Copy(TensorId t) const { return copy_[t]; }

  // Non-forward reads (FillReads), as steps; kNone when there is none.
  uint32_t FirstRead(TensorId t) const { return first_read_[t]; }
  uint32_t LastRead(TensorId t) const { return last_read_[t]; }
  /// The last by a group's own step (a non-forward node's).
  uint32_t LastOwnRead(TensorId t) const { return last_own_read_[t]; }
  bool RecomputeRead(TensorId t) const { return recompute_read_[t] != 0; }
  /// Through views non-forward nodes took of forward tensor `t`: the last
  /// step reading such a view, and the first step making one (0 for one
  /// made before the range).
  uint32_t AliasLastRead(TensorId t) const { return alias_last_read_[t]; }
  uint32_t AliasFirstMade(TensorId t) const { return alias_first_made_[t]; }
  /// A non-forward step reads a tensor of `root` that neither a forward node
  /// made nor views one: what the speed code does not place.
  bool OddRoot(TensorId root) const { return odd_root_[root] != 0; }
  /// The last non-forward read of `t` or of a view a non-forward node took
  /// of it.
  uint32_t LastUse(TensorId t) const {
    if (alias_last_read_[t] == kNone) return last_read_[t];
    if (last_read_[t] == kNone) return alias_last_read_[t];
    return std::max(last_read_[t], alias_last_read_[t]);
  }
  /// Tensors with an entry above, each once or twice (FillReads).
  const std::vector<TensorId>& read() const { return read_; }

  // Saved candidates (FillSaved).
  /// The latest LastUse of the saved candidates sharing t's root other than
  /// `t`: where the original lives to at least once `t` is dropped; kNone
  /// when there is no other.
  uint32_t OtherSavedUse(TensorId t) const {
    const TensorId root = context_.root[t];
    return family_last_tensor_[root] == t ? family_second_[root] : family_last_[root];
  }
  /// LastForwardReads' entry for `root` (plan-free).
  NodeId LastForwardRead(TensorId root) const { return last_forward_read_[root]; }

 private:
  void AliasRead(TensorId x, uint32_t step);

  const SimContext& context_;
  const SimResult* sim_ = nullptr;
  NodeId first_ = 0, end_ = 0;
  bool reads_ready_ = false, saved_ready_ = false;
  std::vector<NodeId> group_;           // per step
  std::vector<uint32_t> own_step_, group_begin_, rerun_step_;  // per node of the range
  // Per tensor; entries of stored_ and read_ are reset by the next Fill.
  std::vector<uint32_t> original_, copy_;
  std::vector<uint32_t> first_read_, last_read_, last_own_read_;
  std::vector<uint32_t> alias_last_read_, alias_first_made_;
  std::vector<uint8_t> recompute_read_, odd_root_;
  // Per root, over saved candidates: the two latest LastUse, and whose the first is.
  std::vector<uint32_t> family_last_, family_second_;
  std::vector<TensorId> family_last_tensor_;
  std::vector<NodeId> last_forward_read_;  // LastForwardReads, on the first FillSaved
  std::vector<TensorId> stored_;       // roots and tensors with a storage entry
  std::vector<TensorId> read_;         // tensors with a read entry
  std::vector<TensorId> family_roots_;  // roots with a family entry
};

}  // namespace ckptplan

#endif  // CKPTPLAN_STEP_FACTS_H_
