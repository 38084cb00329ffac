// What one drop does to a simulation, worked out from that simulation alone.
//
// Dropping a saved candidate t (the memory rule in simulator.h) changes the
// step in a few places:
//  - the original storage of t's root now dies after its last read that is
//    not a non-forward read of t (a range of steps loses its bytes);
//  - the chain that re-makes t (the closure of producers through tensors
//    neither saved nor resident) runs as new steps before t's first
//    non-forward reader: in that node's group, at the place its input order
//    gives, or inside the recompute chain whose step reads t first (where
//    its steps do not stay one run among that chain's old steps, that chain
//    re-runs whole at its place, depth first with t missing, each of its
//    old steps pulled into it);
//  - nodes of the chain that the plan re-runs later are "pulled": their old
//    steps go, their copies are made in the chain and live to their old last
//    read, and the storages only those steps read die after their last read
//    that stays; copies made before the chain are read where they are;
//  - the storages the chain makes live from their step to their last read
//    (t's copy: to the last non-forward read of t or of a view a backward
//    node took of it), and the old storages it reads live until it does;
//  - unless t is a by-product: its producer already re-runs before that
//    place, in a chain for another tensor (a node re-runs once at most), so
//    no step is added and the copy of t made there lives to t's last use.
// Each is a range add over the steps after the drop (old steps and the
// chain's, in one order of keys), so the region's highest node peak after
// the drop is a handful of range maxima over the current steps' totals.
// Re-saving a dropped tensor, the reverse, is scored the same way
// (ScoreResave, sim/resave_delta.cc) where it only takes a chain away.
// Drops outside what is handled here (inexact costs, a node of the chain
// re-run before it that is not t's producer, storages made by backward
// nodes in odd places) are reported unknown, and callers simulate them. A
// storage's last read that stays when steps go is found by walking back a
// few steps, then through the steps of the nodes reading its root (the
// graph's readers, listed once at construction; a node's steps from
// StepFacts). The simulation's groups, storages, non-forward reads and
// families come from StepFacts (step_facts.h), the incremental planner's
// when it scores the region it searches.
//
// Depends on these clauses of the rule (simulator.h lists them): steps in
// node order with recompute steps before the first non-forward reader;
// allocated at the producer's step, freed after the last read, aliases share
// the root; the chain and its depth-first order (Builder::MaterializeForTensor);
// a region's storages read after it live to its end; the implicit gradients
// from the first non-forward node's own step. tests/sim/drop_delta_test.cc
// checks every known answer against a simulation of the drop; the
// searches' verify modes (plan/fast_score.h) do the same for every fast score.
#ifndef CKPTPLAN_DROP_DELTA_H_
#define CKPTPLAN_DROP_DELTA_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ckptplan/base/range_add_max.h"
#include "ckptplan/base/range_max.h"
#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/simulator.h"
#include "ckptplan/sim/step_facts.h"

namespace ckptplan {

class DropDelta {
 public:
  /// Reads the simulation's groups, storages and reads from `facts` when
  /// given (they must outlive this): the caller fills them, every part, from
  /// the simulation it then indexes, before Index. Else from its own.
  explicit DropDelta(const SimContext& context, const StepFacts* facts = nullptr);

  /// Indexes `sim`, the simulation of nodes [first, end) under `keep`, whose
  /// node n's peak plus offset[n - first] (null: 0) is the step's bytes.
  /// `sim`, `keep` and `offset` must outlive the Score calls that follow.
  /// Shared facts (see the constructor) not filled from `sim`: throws
  /// std::logic_error. `group_max`, when given (offsets must then be 0):
  /// per node n of the range, at n - first, the highest total of its group's
  /// steps (its node peak), kept by the caller across drops (GroupChanges);
  /// the scores read the highest totals over runs of whole groups from it
  /// instead of an index of every step built here. It must not change
  /// before the next Index.
  void Index(const SimResult& sim, const SaveSet& keep, NodeId first, NodeId end,
             const std::vector<int64_t>* offset, const RangeAddMax* group_max = nullptr);

  struct Result {
    bool known = false;      ///< false: this drop is not one handled here
    int64_t region_max = 0;  ///< highest node peak of the range after, offsets added
    double added_cost = 0;   ///< recompute cost after minus before (exact)
    /// Stopped by the Cutoff given to Score: region_max is only a value the
    /// range's highest node peak after the drop reaches at least.
    bool cut = false;
  };
  /// What a caller that scores drops to choose one needs no more of: true
  /// when a drop adding `added_cost` whose range's highest node peak after
  /// is at least `region_max_at_least` (offsets added) cannot be chosen.
  class Cutoff {
   public:
    virtual ~Cutoff() = default;
    virtual bool Beaten(int64_t region_max_at_least, double added_cost) const = 0;
  };
  /// Dropping saved candidate `t` of the indexed range, from the index.
  /// With `cutoff`, once the chain and its range changes are known, the
  /// indexed simulation's first highest step, moved by the changes over it,
  /// is asked first: where the cutoff finds the drop beaten there, the
  /// result is cut (the maxima over every step are not read).
  Result Score(TensorId t, const Cutoff* cutoff = nullptr);

  /// Re-saving dropped candidate `t` of the indexed range, the reverse of a
  /// drop (sim/resave_delta.cc). Handled where t's root is an activation and
  /// the steps that made t (a chain, or t's depth-first run inside another)
  /// made nothing else read after them but the storage t's reads use, read
  /// only as t or views of t: then those steps go, t's reads read the
  /// original, which lives on to the last of them, and the storages the
  /// steps read die after their last read that stays. Also where another
  /// output of t's producer triggers the same steps once t is saved (t was
  /// a by-product of their re-run, or the next input its reader finds
  /// missing is one): the steps stay, t's copy dies at its step and the
  /// original lives to t's last read. And where the steps that go made what
  /// is read after them (MovedChain): the nodes making it re-run as a chain
  /// of their own before its next reader, or inside a later chain (the one
  /// t's steps were in, too) replayed depth first, the inverse of a drop's
  /// pull. What is read after them may be the root's copy t, a view, read
  /// through: the reads through t then read the original.
  /// The plan indexed may mark `t` saved (cleanup tries re-saves so): it is
  /// read as dropped. Families (StepFacts::FillSaved) are not read.
  Result ScoreResave(TensorId t);

  /// The simulation of the indexed range after dropping saved candidate `t`,
  /// into *out, worked out from the indexed simulation and what Score(t)
  /// finds (sim/drop_patch.cc): the chain's steps inserted at their place,
  /// pulled nodes' old steps removed, the totals moved by Score's range
  /// changes, storages with their new lifetimes. Equal, field by field, to
  /// Simulate under the plan with `t` dropped and `options`, which must be
  /// those of the indexed simulation: its range, without details,
  /// categories or approximations. False, *out unspecified, where Score(t)
  /// is unknown or `options` are not such; callers then simulate. `out`
  /// must not be the indexed simulation.
  bool Patch(TensorId t, const SimOptions& options, SimResult* out);
  /// Patch, but of the indexed simulation itself (`sim` must be it, as a
  /// mutable pointer): the steps before the group of the first old step
  /// the drop changes are left as they are, and those after are moved in
  /// their arrays instead of copied to others. False, `sim` as it was,
  /// where Patch would answer false. After true the index is spent: the
  /// next score or patch needs an Index first, and StepFacts filled from
  /// `sim` (the shared ones of the constructor too) read it as it is now
  /// (StepFacts::Group reads the steps), so they need a Fill first.
  bool PatchInPlace(TensorId t, const SimOptions& options, SimResult* sim);
  /// After a Patch or PatchResave that returned true: the part of *out that
  /// is as in the indexed simulation (StepFacts::Fill need not read it
  /// again); else empty.
  SimPrefix patched_prefix() const { return patched_prefix_; }
  /// After a Patch or PatchResave that returned true: how its node peaks
  /// (each the highest total of a node's group, offsets added) moved from
  /// the indexed simulation's. Nodes in `adds` ranges (indices from the
  /// range's first node, [lo, hi)) moved by the bytes given, summed where
  /// ranges overlap; nodes in `resets` (duplicates allowed) changed
  /// otherwise and are read from the patch; the others did not move. Node
  /// peaks kept by range adds (group_max of Index) follow a drop or a
  /// re-save in a few updates so.
  struct GroupChanges {
    struct Add {
      uint32_t lo, hi;
      int64_t bytes;
    };
    std::vector<Add> adds;
    std::vector<uint32_t> resets;
    /// Moves `tree`, the indexed simulation's node peaks (offsets 0), to
    /// the patch's, whose node peaks are `node_peak`.
    void ApplyTo(const std::vector<int64_t>& node_peak, RangeAddMax* tree) const;
    /// Verify modes: "" when `tree` holds node_peak (of the range's nodes
    /// from `first` of `graph`), else what the first node that differs
    /// shows.
    static std::string Mismatch(const RangeAddMax& tree, const std::vector<int64_t>& node_peak,
                                const Graph& graph, NodeId first);
  };
  const GroupChanges& group_changes() const { return group_changes_; }
  /// The same for re-saving dropped candidate `t` (ScoreResave(t)): the
  /// steps that go and the storages they made go, the nodes that re-run for
  /// later readers (MovedChain) come in as chains at their places with
  /// their storages, the totals move by the score's range changes, and the
  /// storages whose last read moves get it. `keep` as for ScoreResave.
  /// False where not handled (moved nodes inside a later chain's replay).
  bool PatchResave(TensorId t, const SimOptions& options, SimResult* out);

  /// Last reads found through the root's readers rather than a short walk
  /// back over the steps (LastKeptRead), since construction. For tests.
  size_t long_walks() const { return long_walks_; }
  /// Drops answered with the chain their steps run inside re-run whole
  /// (their steps not one run among its old ones), since construction. For
  /// tests.
  size_t whole_replays() const { return whole_replays_; }
  /// Re-saves answered whose removed steps made a view a later step reads,
  /// at a cost (its node re-runs for it), and those whose moved nodes make
  /// t's copy again unread, since construction. For tests.
  size_t costed_view_reruns() const { return costed_view_reruns_; }
  size_t unread_copy_remakes() const { return unread_copy_remakes_; }
  /// Re-saves answered where a costed view's node is among the moved ones.
  size_t moved_view_reruns() const { return moved_view_reruns_; }
  /// Patches in place that left steps as they were, and those of them that
  /// summed the figures over those steps again (the simulation's first
  /// highest step or own step was not among them), since construction. For
  /// tests.
  size_t kept_prefixes() const { return kept_prefixes_; }
  size_t summed_prefixes() const { return summed_prefixes_; }
  /// Runs of steps patches in place left where they were, as they were
  /// (PeakTracker::KeepRun), and those of them whose steps were read (their
  /// groups' highest node peak reached the figures summed before), since
  /// construction. For tests.
  size_t kept_runs() const { return kept_runs_; }
  size_t read_kept_runs() const { return read_kept_runs_; }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Change {  // bytes added over merged positions [lo, hi]
    int64_t lo, hi, bytes;
  };
  // The old steps s with change.lo <= key(s) <= change.hi: [*lo, *hi]; false
  // when none.
  static bool OldSteps(const Change& change, int64_t* lo, int64_t* hi) {
    *lo = (change.lo >> kKeyShift) + ((change.lo & kKeyMask) > kKeyHalf ? 1 : 0);
    *hi = (change.hi >> kKeyShift) - ((change.hi & kKeyMask) < kKeyHalf ? 1 : 0);
    return *lo <= *hi;
  }
  // events_ = the changes_ over old steps, as (step, bytes) where a running
  // sum starts and stops adding them; unsorted.
  void OldStepEvents();
  // events_ as Patch and PatchResave read them: sorted by step. Left so by
  // the last KeptStepsMax where no flip was scored since (with events of 0
  // bytes at the ends of the runs of steps that go, which only split the
  // patch's runs); else made again.
  void SortedOldStepEvents();
  void SortEventsByStep();  // events_ sorted by step; events_sorted_ set
  bool events_sorted_ = false;
  // The highest total plus offset over the old steps that stay (not
  // deleted_) after the changes_ (Score, ScoreResave).
  int64_t KeptStepsMax();
  // Score's cutoff, while it scores; and the indexed simulation's first
  // highest step (Index), kNone without steps.
  const Cutoff* cutoff_ = nullptr;
  uint32_t top_step_ = StepFacts::kNone;
  // Whether top_step_ is an old step that stays, and then its total plus
  // offset after the changes_.
  bool TopStays() const;
  int64_t TopValue() const;
  // With a cutoff: the top step's value after the changes_ into *at_least,
  // true when the cutoff finds a drop adding `added_cost` beaten there.
  bool CutAtTop(double added_cost, int64_t* at_least) const;
  // Score, with t's first non-forward read inside another recompute chain
  // either run with t's steps inserted among its old ones as one run, or
  // (`replay_whole`) re-run whole at its place; *replay set where the first
  // does not apply but the second may.
  Result ScoreChain(TensorId t, bool replay_whole, bool* replay);
  Result ScoreByproduct(TensorId t, uint32_t made, uint32_t original);
  bool OriginalDies(TensorId t, uint32_t original);
  bool ChainStays(TensorId t, uint32_t chain_begin, uint32_t last) const;
  bool MovedChain(TensorId t, uint32_t begin, uint32_t last, uint32_t made_first,
                  uint32_t made_last);
  Result ScoreResaveKeepingSteps(TensorId t, uint32_t copy, uint32_t original);
  static int64_t Key(int64_t s) { return (s << kKeyShift) | kKeyHalf; }  // old step s
  // Storage `b`, of `bytes`, is last read at position `after` instead of
  // `before` (keys): the positions between gain or lose its bytes
  // (changes_), and its new last read is kept for the patches (lifetimes_).
  void LastReadMoves(uint32_t b, int64_t before, int64_t after, int64_t bytes) {
    if (after > before) changes_.push_back({before + 1, after, bytes});
    if (after < before) changes_.push_back({after + 1, before, -bytes});
    if (after != before) lifetimes_.push_back({b, after});
  }
  // The bytes live across the place right before old step `a` (a chain's
  // steps inserted there start from them), offsets not added.
  int64_t Across(uint32_t a) const {
    return sim_->total[a] - std::max<int64_t>(context_.node_workspace[sim_->steps[a].node], 0) -
           BornAt(a);
  }
  // The first old storage made at or after old step `s` (storages come in
  // the order of their first steps, so found by binary search); the count
  // of storages when none is.
  uint32_t MadeFrom(uint32_t s) const {
    const std::vector<Buffer>& buffers = sim_->buffers;
    return static_cast<uint32_t>(
        std::partition_point(buffers.begin(), buffers.end(),
                             [s](const Buffer& buffer) { return buffer.first_step < s; }) -
        buffers.begin());
  }
  // The bytes that start at old step `a`: its storages and the implicit
  // gradients at their step.
  int64_t BornAt(uint32_t a) const {
    const std::vector<Buffer>& buffers = sim_->buffers;
    int64_t bytes = a == implicit_step_ ? implicit_bytes_ : 0;
    for (uint32_t b = MadeFrom(a); b < buffers.size() && buffers[b].first_step == a; ++b) {
      bytes += context_.bytes[buffers[b].root];
    }
    return bytes;
  }
  // The old step whose re-run made the copy that non-forward reads of `x`
  // read (its producer's re-run), `resaved` read as dropped; kNone where
  // those reads read no copy (x not forward-made, resident or saved) or x's
  // producer is outside the range (ScoreResave's ChainStays, MovedChain).
  uint32_t CopyMadeAt(TensorId x, TensorId resaved) const {
    if (!context_.forward_produced[x] || context_.resident_root[x]) return kNone;
    if (x != resaved && Saved(x)) return kNone;
    const NodeId producer = context_.producer[x];
    if (producer < first_ || producer >= end_) return kNone;
    return facts_->RerunStep(producer);
  }
  // Whether old step `s` goes (deleted_, sorted).
  bool Deleted(uint32_t s) const {
    return std::binary_search(deleted_.begin(), deleted_.end(), s);
  }
  bool Saved(TensorId t) const { return context_.is_candidate[t] && (*keep_)[t]; }
  uint32_t InsertionStep(NodeId g, TensorId t) const;
  bool OldStorage(TensorId x, bool forward_read, uint32_t* storage) const;
  bool ExistingCopy(TensorId x, uint32_t* storage) const;
  bool LastKeptRead(uint32_t b, uint32_t* step) const;
  int StepReads(uint32_t s, uint32_t b, TensorId root) const;
  enum class RootRead { kThrough, kOther, kNot, kUnplaced };
  RootRead ReadOf(TensorId x, bool forward_read, uint32_t b, TensorId t) const;
  bool SplitReads(uint32_t b, TensorId t, uint32_t* through, uint32_t* other) const;
  void IndexRootReaders();
  // Keys of positions after a drop (Score): old step s is s << kKeyShift |
  // kKeyHalf, the chain's k-th step a << kKeyShift | k.
  static constexpr int kKeyShift = 20;
  static constexpr int64_t kKeyHalf = int64_t{1} << (kKeyShift - 1);
  static constexpr int64_t kKeyMask = (int64_t{1} << kKeyShift) - 1;
  static constexpr int64_t kLost = -1;  // a read of a step that goes
  // Steps LastKeptRead walks back one by one before it reads the root's
  // readers.
  static constexpr int kShortWalk = 32;

  const SimContext& context_;
  // The indexed simulation's groups, storages, reads and families.
  std::unique_ptr<StepFacts> own_facts_;  // unless shared
  const StepFacts* facts_;
  // The indexed simulation.
  const SimResult* sim_ = nullptr;
  const SaveSet* keep_ = nullptr;
  NodeId first_ = 0, end_ = 0;
  bool whole_ = false;
  std::vector<int64_t> offset_;        // per step: its group's node offset; empty: all 0
  int64_t OffsetAt(int64_t s) const { return offset_.empty() ? 0 : offset_[s]; }
  RangeMax value_;                     // per step: total + offset; unless group_max_
  // The highest step of the indexed simulation (StepsMax over all), once
  // KeptStepsMax first asks after an Index.
  bool all_max_ready_ = false;
  int64_t all_max_ = 0;
  const RangeAddMax* group_max_ = nullptr;  // Index's group_max
  // The highest total plus offset over old steps [lo, hi), non-empty: from
  // value_, or the steps of the groups at its ends and group_max_ between.
  int64_t StepsMax(uint32_t lo, uint32_t hi) const;
  GroupChanges group_changes_;  // of the last Patch or PatchResave
  void FindGroupChanges(const uint32_t* places, size_t num_places);
  std::vector<uint32_t> places_;  // PatchResave's, for FindGroupChanges
  uint32_t implicit_step_ = StepFacts::kNone;  // the step implicit gradients start at
  // The range's leading forward nodes, whose own steps are its first ones
  // (for first_, end_ as cached in forward_range_).
  uint32_t forward_steps_ = 0;
  std::pair<NodeId, NodeId> forward_range_{kNoId, kNoId};
  int64_t implicit_bytes_ = 0;
  // Per storage root, the nodes reading a tensor of it (IndexRootReaders, at
  // construction): readers_[readers_begin_[root], readers_begin_[root + 1]).
  std::vector<uint32_t> readers_begin_;
  std::vector<NodeId> readers_;
  mutable std::vector<uint32_t> reader_steps_;  // LastKeptRead's working memory
  mutable size_t long_walks_ = 0;
  size_t whole_replays_ = 0;
  size_t costed_view_reruns_ = 0, unread_copy_remakes_ = 0, moved_view_reruns_ = 0;
  size_t kept_prefixes_ = 0, summed_prefixes_ = 0, kept_runs_ = 0, read_kept_runs_ = 0;
  // Score's working memory: per tensor, the storage of its copy in the chain
  // (a new storage's index, or kExisting | an old buffer's, or kNone) while
  // mark_ is the epoch.
  static constexpr uint32_t kExisting = 0x80000000u;
  std::vector<uint32_t> mark_, ref_;
  uint32_t epoch_ = 0;
  std::vector<TensorId> stack_;
  std::vector<NodeId> view_reruns_;  // ScoreResave: views' nodes re-run for later reads
  std::vector<NodeId> chain_;
  struct NewBuffer {
    int64_t bytes;
    int64_t first, last;  // keys of positions
    uint32_t moved;       // a pulled node's old storage it replaces; kNone
  };
  std::vector<uint32_t> pulled_;   // per node of the range: epoch when pulled
  std::vector<uint32_t> deleted_;  // old steps of pulled nodes, sorted
  std::vector<uint32_t> moved_;    // old storages of their copies, sorted
  std::vector<NewBuffer> made_;
  std::vector<std::pair<uint32_t, int64_t>> extended_;  // old storage, key read at (kLost)
  std::vector<Change> changes_;
  std::vector<std::pair<int64_t, int64_t>> events_;
  // chain_events_ = the changes_ over the `m` steps of a chain placed
  // before old step `a`, as the differences of a running sum (index k: the
  // chain's step k); ScoreChain and Patch read it.
  void ChainEvents(int64_t a, int64_t m);
  std::vector<int64_t> chain_events_;
  // What the last known Score worked out beside its result, for Patch: the
  // old step the chain goes before (a; for a by-product's drop, which has no
  // chain, the old step count), whether it runs inside the recompute chain
  // starting at old step chain_begin, the cost it adds; and per old storage
  // whose last read moves, the key of its new last read.
  struct Scored {
    TensorId tensor = kNoId;
    int64_t a = 0;
    bool inside = false;
    uint32_t chain_begin = 0;
    double added_cost = 0;
  };
  Scored scored_;
  SimPrefix patched_prefix_;  // of the last Patch or PatchResave
  std::vector<std::pair<uint32_t, int64_t>> lifetimes_;
  // Patch: an old step's index after the drop, from where the chain's `m`
  // steps come in (before old step `a`) and the old steps that go
  // (`deleted`, sorted), without a per-step array; kNone for one that goes.
  struct StepMap {
    uint32_t a, m;
    const std::vector<uint32_t>* deleted;
    // Steps before the first that goes and after the last, in branches the
    // patch's loops inline.
    uint32_t first_gone = deleted->empty() ? kNone : deleted->front();
    uint32_t last_gone = deleted->empty() ? kNone : deleted->back();
    uint32_t operator()(uint32_t s) const {
      if (s < first_gone) return s + (s >= a ? m : 0);
      if (s > last_gone) return s - static_cast<uint32_t>(deleted->size()) + (s >= a ? m : 0);
      return AfterGone(s);
    }
    uint32_t AfterGone(uint32_t s) const {
      auto it = std::lower_bound(deleted->begin(), deleted->end(), s);
      if (it != deleted->end() && *it == s) return kNone;
      const uint32_t gone = static_cast<uint32_t>(it - deleted->begin());  // before s
      return s - gone + (s >= a ? m : 0);
    }
  };
  // The tensor of the last ScoreResave when PatchResave can write it out
  // (kNoId: none), and the cost it adds; lifetimes_ holds the old storages
  // whose last read moves, as for Score.
  TensorId resaved_ = kNoId;
  double resaved_cost_ = 0;
  std::vector<uint32_t> buffer_index_;  // PatchResave: per old storage, its index after
  // Patch and PatchResave: whether `options` simulate the indexed range as
  // it was simulated, into another SimResult; out's steps and totals sized;
  // its figures the steps do not give, from the indexed simulation's.
  bool SameRange(const SimOptions& options, const SimResult* out) const;
  static void SizeSteps(uint32_t num_steps, SimResult* out);
  void FinishPatch(double added_cost, SimResult* out) const;
  // A storage's last read moves to `last_step` (not kNone) of the patch,
  // `last_read` there, with the category it gives; false where that is not
  // handled (gradients, a storage read after the range).
  bool MoveLastRead(uint32_t last_step, const Step& last_read, Buffer* buffer) const;
  // Patch and PatchInPlace.
  bool PatchDrop(TensorId t, const SimOptions& options, SimResult* out, bool in_place);
  // PatchInPlace's storages, swapped in at its end (each keeps the other's
  // capacity), where a step goes. Where none does, the storages are patched
  // where they are: the chain's storages (chain_buffers_) and the old ones
  // whose last read moves (moved_lifetimes_, by index after the patch) are
  // worked out before anything is written.
  std::vector<Buffer> buffers_;
  std::vector<Buffer> chain_buffers_;
  std::vector<std::pair<size_t, Buffer>> moved_lifetimes_;
  // ScoreResave's moved chains (MovedChain): their steps' keys, and the
  // reads after the old chain of what it alone made, as (step, tensor).
  std::vector<int64_t> moved_keys_;
  // Per moved step: whether it starts a chain (the first of a chain made
  // for a reader's missing input); and whether any went inside a later
  // chain replayed (PatchResave does not write those out).
  std::vector<uint8_t> moved_starts_;
  bool moved_replayed_ = false;
  std::vector<std::pair<uint32_t, TensorId>> reads_after_;
  // Per moved step, its total after the re-save, offsets not added
  // (ScoreResave); PatchResave's working memory: the moved steps' indices
  // after it, and the order of their storages.
  std::vector<int64_t> moved_total_;
  std::vector<uint32_t> moved_step_, made_order_;
};

/// Where two simulations first differ, field by field (steps, storages,
/// recomputes, totals, node peaks, categories, peaks, costs, resident
/// bytes); empty when they are the same. For verify modes.
std::string SimResultDifference(const SimResult& a, const SimResult& b);

}  // namespace ckptplan

#endif  // CKPTPLAN_DROP_DELTA_H_
