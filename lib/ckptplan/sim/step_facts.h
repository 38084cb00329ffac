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
//  - per candidate, the latest last read of the other saved candidates
//    sharing its root (the "family"): after dropping it, its original still
//    lives to those; and the root's last forward read, which no plan
//    changes (LastForwardReads).
// They are filled by parts, each on a consumer's demand (Fill, FillReads,
// FillSaved), into memory reused between fills; a fill resets only the
// entries the previous one set (all of them when those are many: a fill
// over vectors costs less then), so small regions of a large graph cost what
// they read. Reads are kept by node and read as steps through the current
// fill's steps: a non-forward node's own step reads the same whatever the
// plan (FillReads reads those again only for a new range of nodes), and a
// recompute step is the one step re-running its node. A fill that keeps a
// prefix of the one before (SimPrefix) keeps every re-run node's entry whose
// readers are still re-run in the same order, and reads again only the
// tensors that the re-run nodes added, gone or moved read (from an index of
// each tensor's forward readers), so that a drop's fill costs its chain,
// not the recompute steps after it. Families are read when asked, over the
// root's few candidates. Tensor and
// node ids are those of the simulation read (a region's copy may share its
// simulation: cleanup reads it in the copy's ids).
// tests/sim/step_facts_test.cc works the facts out by hand.
#ifndef CKPTPLAN_STEP_FACTS_H_
#define CKPTPLAN_STEP_FACTS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ckptplan/ir/graph.h"
#include "ckptplan/sim/simulator.h"

namespace ckptplan {

/// Per storage root: the last node that reads its original whatever the
/// plan: the latest forward node reading any tensor of the root, or making a
/// forward-produced one. 0 for roots no forward node touches.
std::vector<NodeId> LastForwardReads(const SimContext& context);

/// The first `steps` steps (their nodes, which are recompute steps) and the
/// first `buffers` storages (roots, first steps) of a simulation that are
/// those of another simulation of the same range: after a drop, the steps
/// before its chain's place and the storages made before it
/// (DropDelta::Patch). StepFacts::Fill reads only the rest.
///
/// Also, where a patch in place left them as they were but for their place
/// (moved by its chain's length less the steps that went before them,
/// `shift`, which may be negative), the steps from `tail` on: the first step
/// of a group, or kNoTail. Their nodes, groups and re-runs are the other
/// simulation's from step `tail - shift` on; the storages are not part of
/// it.
struct SimPrefix {
  static constexpr uint32_t kNoTail = UINT32_MAX;
  uint32_t steps = 0, buffers = 0;
  uint32_t tail = kNoTail;
  int64_t shift = 0;
};

class StepFacts {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;  ///< no such step or storage

  /// `block_bits`: the log2 of the nodes in a block of shifts (below; tests
  /// make blocks small so that a small graph has many).
  explicit StepFacts(const SimContext& context, uint32_t block_bits = kBlockBits);

  /// Reads the steps and storages of `sim`, the simulation of nodes
  /// [first, end), which must outlive the reads that follow. Forgets the
  /// parts read before. `same`: the part of `sim` that is as in the
  /// simulation filled last, which is not read again (ignored unless that
  /// fill was of the same range).
  void Fill(const SimResult& sim, NodeId first, NodeId end, SimPrefix same = {});
  /// Sets every block's shift back to kBias, each entry stored again as it
  /// reads (Fill does when a block's net shift nears its limit; tests call
  /// it between fills).
  void FoldShifts();
  /// Fills since construction: a SimPrefix holds only while none follows
  /// the fill of the simulation it was taken from.
  uint64_t fills() const { return fills_; }
  /// Reads the non-forward reads of the filled simulation.
  void FillReads();
  /// FillReads since construction that kept the reads held and read again
  /// only those the changed re-run nodes read (for tests).
  uint64_t kept_read_fills() const { return kept_read_fills_; }
  /// Families (OtherSavedUse) are read under plan `keep` (the plan
  /// simulated), which must outlive them and not change until the next
  /// FillSaved; after FillReads.
  void FillSaved(const SaveSet& keep);

  const SimContext& context() const { return context_; }
  const SimResult* sim() const { return sim_; }
  NodeId first() const { return first_; }
  NodeId end() const { return end_; }
  bool reads_ready() const { return reads_ready_; }
  bool saved_ready() const { return saved_ready_; }
  /// FillSaved's plan (nullptr before the first).
  const SaveSet* saved_plan() const { return keep_; }

  // Steps (Fill). Node arguments are in [first, end).
  /// The node whose group step `s` is in: the next own step's (every step
  /// has one: recompute steps come before a reader).
  /// (An own step's group is its node's; a recompute step's, the group
  /// its node is re-run in: a node is re-run once at most.)
  NodeId Group(uint32_t s) const {
    const Step& step = sim_->steps[s];
    return step.recompute ? reruns_[step.node - first_].group : step.node;
  }
  /// Group(s), kNoId for kNone.
  NodeId GroupOf(uint32_t s) const { return s == kNone ? kNoId : Group(s); }
  uint32_t OwnStep(NodeId n) const { return own_[n - first_] + ShiftOf(n).steps; }
  /// The first step of n's group: past the own step of the node before
  /// (groups come in node order).
  uint32_t GroupBegin(NodeId n) const { return n == first_ ? 0 : OwnStep(n - 1) + 1; }
  /// The step re-running `n`; kNone when none does (a node is re-run once
  /// at most: its copies then serve every later read).
  uint32_t RerunStep(NodeId n) const {
    const Rerun& rerun = reruns_[n - first_];
    return rerun.group == kNoId ? kNone : rerun.step + ShiftOf(rerun.group).steps;
  }
  /// GroupOf(RerunStep(n)): the group `n` is re-run in, kNoId if none.
  NodeId RerunGroup(NodeId n) const { return reruns_[n - first_].group; }
  /// The nodes the recompute steps re-run, in step order: the list the
  /// reads are read from (for StepFactsDifference).
  std::vector<NodeId> RerunNodes() const;

  // Storages (Fill): indexes into the simulation's buffers, kNone for none.
  /// Root `root`'s original: the storage its own step made.
  uint32_t Original(TensorId root) const {
    const uint32_t stored = storages_[root].original;
    return stored == kNone ? kNone : stored + ShiftOf(context_.producer[root]).buffers;
  }
  /// The storage a recompute step made for tensor `t`.
  uint32_t Copy(TensorId t) const {
    const uint32_t stored = storages_[t].copy;
    if (stored == kNone) return kNone;
    // (A copy whose producer is not re-run is left from a fill given a
    // SimPrefix the simulations did not share.)
    const NodeId group = RerunGroup(context_.producer[t]);
    return group == kNoId ? kNone : stored + ShiftOf(group).buffers;
  }

  // Non-forward reads (FillReads) of forward tensor `t` (one a forward node
  // made; kNone for others), as steps; kNone when there is none.
  uint32_t FirstRead(TensorId t) const {
    // kNone is the largest.
    return std::min(StepOf(own_reads_[t].first), RerunOf(reads_[t].first));
  }
  uint32_t LastRead(TensorId t) const {
    return Later(StepOf(own_reads_[t].last), RerunOf(reads_[t].last));
  }
  /// The last by a group's own step (a non-forward node's).
  uint32_t LastOwnRead(TensorId t) const { return StepOf(own_reads_[t].last); }
  bool RecomputeRead(TensorId t) const { return reads_[t].recompute == kYes; }
  /// Through views non-forward nodes took of forward tensor `t`: the last
  /// step reading such a view, and the first step making one (0 for one
  /// made before the range).
  uint32_t AliasLastRead(TensorId t) const {
    return Later(StepOf(own_reads_[t].alias_last), RerunOf(alias_reads_[t].last));
  }
  uint32_t AliasFirstMade(TensorId t) const {
    return std::min(MadeStep(own_reads_[t].alias_made), MadeStep(alias_reads_[t].first_made));
  }
  /// A non-forward step reads a tensor of `root`, a root some candidate
  /// shares, that neither a forward node made nor views one: what the speed
  /// code does not place. False for the roots no candidate shares.
  bool OddRoot(TensorId root) const {
    return own_reads_[root].odd == kYes || reads_[root].odd == kYes;
  }
  /// The last non-forward read of `t` or of a view a non-forward node took
  /// of it.
  uint32_t LastUse(TensorId t) const { return Later(LastRead(t), AliasLastRead(t)); }

  // Saved candidates (FillSaved).
  /// The latest LastUse of the saved candidates sharing t's root other than
  /// `t`: where the original lives to at least once `t` is dropped; kNone
  /// when there is no other. Read when asked, from the plan FillSaved was
  /// given (which must not change before the next FillSaved) over the few
  /// candidates sharing the root, rather than summed for every root at
  /// each fill.
  uint32_t OtherSavedUse(TensorId t) const {
    uint32_t latest = kNone;
    for (TensorId x = family_next_[t]; x != t && x != kNoId; x = family_next_[x]) {
      if (!(*keep_)[x]) continue;
      const uint32_t use = LastUse(x);
      if (use != kNone && (latest == kNone || use > latest)) latest = use;
    }
    return latest;
  }
  /// LastForwardReads' entry for `root` (plan-free).
  NodeId LastForwardRead(TensorId root) const { return last_forward_read_[root]; }

 private:
  // A node's own step; kNone for kNoId.
  uint32_t StepOf(NodeId n) const { return n == kNoId ? kNone : OwnStep(n); }
  // The step re-running a node; kNone for kNoId.
  uint32_t RerunOf(NodeId n) const { return n == kNoId ? kNone : RerunStep(n); }

  // Steps and storage indexes are stored less what the block of nodes of
  // the group they belong to adds (modulo 2^32): a node's own step and
  // original storage, its producer's; a re-run's step, and the copy a
  // re-run makes, the group it is re-run in. A fill keeping a SimPrefix
  // tail so moves the tail's groups by adding to the blocks after the one
  // its first group is in, and to that block's entries one by one: a
  // drop's fill costs a block and a pass over the blocks, not one over the
  // steps and storages after its chain. A block adds kBias and the tails'
  // net shift since kBias was set; Fill keeps the net within kMaxNet
  // either way (FoldShifts) and refuses 2^31 steps or storages, so that an
  // entry stored, an index plus 2^30 less the net, is never kNone.
  static constexpr uint32_t kBlockBits = 8;
  static constexpr uint32_t kBias = 0xC0000000u;  // -2^30
  static constexpr int32_t kMaxNet = 1 << 28;
  struct Shift {
    uint32_t steps = 0, buffers = 0;
  };
  const Shift& ShiftOf(NodeId group) const { return shifts_[(group - first_) >> block_bits_]; }
  // Adds `steps` and `buffers` to the entries of groups from `group` on.
  void ShiftTail(NodeId group, uint32_t steps, uint32_t buffers);
  // Calls f(x) for each output x of node `n` (its storages are keyed by them).
  template <typename F>
  void ForEachOutput(NodeId n, F f) const {
    for (uint32_t i = context_.outputs_begin[n]; i < context_.inputs_begin[n + 1]; ++i) {
      f(context_.ids[i]);
    }
  }
  // A view's maker as the reads keep it: plus one, 0 for a node before the
  // range (or none); MadeStep reads it back as the step making the view.
  NodeId MadeName(NodeId maker) const {
    return maker >= first_ && maker < end_ ? maker + 1 : 0;
  }
  uint32_t MadeStep(NodeId made) const {
    return made == kNoId ? kNone : made == 0 ? 0 : StepOf(made - 1);
  }
  // The later of two steps, either of them kNone for none.
  static uint32_t Later(uint32_t a, uint32_t b) {
    if (a == kNone) return b;
    if (b == kNone) return a;
    return std::max(a, b);
  }
  void FillOwnReads();
  void AllReads();
  bool ChangedReads();
  void BuildReaders();
  template <typename F>
  void ForEachRerunReader(TensorId x, F f) const;
  template <typename F>
  static void ForEachView(const std::vector<std::pair<TensorId, TensorId>>& views, TensorId key,
                          F f);
  void ReadAgain(TensorId x);
  void ReadAliasAgain(TensorId base);
  void ReadOddAgain(TensorId root);
  void AliasRead(TensorId x, NodeId node);
  void OwnAliasRead(TensorId x, NodeId n);

  struct Rerun {  // per node of the range; all ones when empty, as below
    uint32_t step = kNone;
    NodeId group = kNoId;
  };
  // Per tensor, one record a fact kind so that a tensor's facts share a
  // cache line: reads and resets touch them one tensor at a time. Every
  // field of an empty record is all ones (flags: kNo), so that resetting
  // every record is a memset.
  static constexpr uint8_t kNo = 0xff, kYes = 1;
  struct Storages {
    uint32_t original = kNone, copy = kNone;
  };
  // The recompute steps' reads (by re-run node: the first and last by
  // step, and for views the maker of the first made, plus one) ...
  struct Reads {
    NodeId first = kNoId, last = kNoId;
    uint8_t recompute = kNo, odd = kNo;  // odd: OddRoot, for roots
  };
  struct AliasReads {
    NodeId last = kNoId, first_made = kNoId;
  };
  // Whether a Reads entry is listed in read_ (it has a read or is odd).
  static bool Listed(const Reads& reads) { return reads.first != kNoId || reads.odd == kYes; }
  // ... and the non-forward nodes' (by node, of the range FillOwnReads read):
  // the first and last reading node, and for views of the tensor the last
  // node reading one and the first node making one, plus one (0: a node
  // before the range).
  struct OwnReads {
    NodeId first = kNoId, last = kNoId, alias_last = kNoId, alias_made = kNoId;
    uint8_t odd = kNo;
  };
  // The tensors a fill set entries of, past which resetting them one by one
  // costs more than resetting every tensor's.
  size_t ResetOneByOne() const { return storages_.size() / 8; }

  const SimContext& context_;
  const SimResult* sim_ = nullptr;
  NodeId first_ = 0, end_ = 0;
  bool reads_ready_ = false, saved_ready_ = false;
  uint32_t filled_steps_ = 0;  // of the last fill
  // Per node of the range: its own step, and its re-run (apart, so that a
  // fill writing the own steps of the groups it reads again writes 4 bytes
  // a node); steps stored less their group's block's shift.
  std::vector<uint32_t> own_;
  std::vector<Rerun> reruns_;
  // Per block of 2^block_bits_ nodes of the range (by group).
  const uint32_t block_bits_;
  std::vector<Shift> shifts_;
  uint32_t filled_buffers_ = 0;  // of the last fill
  // Per tensor; the entries the lists below name are reset by the next Fill.
  std::vector<Storages> storages_;
  std::vector<Reads> reads_;
  std::vector<AliasReads> alias_reads_;
  // Per tensor, the own steps' reads of nodes [own_first_, own_end_), reset
  // only when the range changes.
  bool own_ready_ = false;
  NodeId own_first_ = 0, own_end_ = 0;
  std::vector<OwnReads> own_reads_;
  // The re-run nodes in step order, with a gap where the last fill wrote
  // its own: reruns_list_ [0, gap_lo_) then [gap_hi_, end). A fill moves
  // the gap to the first re-run it changes (past the re-runs between: a
  // layer's for drops that come layer by layer), takes the re-runs that go
  // into it and writes the new ones there; a SimPrefix tail's stay after it.
  std::vector<NodeId> reruns_list_;
  size_t gap_lo_ = 0, gap_hi_ = 0;
  size_t RerunCount() const { return gap_lo_ + (reruns_list_.size() - gap_hi_); }
  // The re-runs (in step order) at steps before `step`.
  size_t RerunsBefore(uint32_t step) const;
  void MoveGap(size_t to);
  void PushRerun(NodeId node);
  // Whether the recompute steps' reads (reads_, alias_reads_, read_,
  // alias_read_) are those of the last fill; after a fill, whether they are
  // those of the fill before, which kept the steps before the re-run nodes
  // in old_tail_ (in step order; reruns_list_ [new_tail_, fresh_end_) are
  // the fill's). Neither holds a SimPrefix tail's re-run nodes, the same
  // in both, in the same order.
  bool reads_current_ = false;
  bool reads_kept_ = false;
  std::vector<NodeId> old_tail_;
  size_t new_tail_ = 0, fresh_end_ = 0;
  // Per tensor, the forward nodes reading it (only they are re-run), by
  // index from reader_begin_; the views (not forward-made, read by a forward
  // node) of each view base and of each odd root, as sorted (key, view).
  bool readers_ready_ = false;
  std::vector<uint32_t> reader_begin_;
  std::vector<NodeId> readers_;
  std::vector<std::pair<TensorId, TensorId>> base_views_, odd_views_;
  // ChangedReads' working memory: per node of the range and per tensor.
  std::vector<uint8_t> node_mark_, key_mark_;
  std::vector<NodeId> changed_;
  std::vector<TensorId> keys_;
  // Per tensor, plan-free: the forward tensor a non-forward read of it
  // reads the storage of: itself when forward-made or resident, the nearest
  // forward-made one it views, kNoId for none (its root is odd) when a
  // candidate shares its root, else itself.
  std::vector<TensorId> view_base_;
  std::vector<NodeId> last_forward_read_;  // LastForwardReads, on the first FillSaved
  bool filled_ = false;
  uint64_t fills_ = 0;
  uint64_t kept_read_fills_ = 0;
  std::vector<TensorId> stored_;        // tensors with an original's (or a copy's) entry
  std::vector<TensorId> read_;          // tensors with a read entry, odd roots
  std::vector<TensorId> alias_read_;    // tensors with an alias entry
  std::vector<TensorId> own_read_;      // tensors with an own-read entry, odd roots
  // Per candidate sharing its root with others, the next of them (a ring
  // over the root's candidates in id order); kNoId for other tensors.
  std::vector<TensorId> family_next_;
  const SaveSet* keep_ = nullptr;  // FillSaved's
};

/// Where two StepFacts, filled (with reads and, when both are, families)
/// from simulations of the same range, first differ, through every accessor;
/// empty when they do not. For verify modes and tests.
std::string StepFactsDifference(const StepFacts& a, const StepFacts& b);
/// StepFactsDifference between `facts` and a fresh fill of the same
/// simulation and range, with reads and families where `facts` has them.
/// For verify modes.
std::string DifferenceFromWholeFill(const StepFacts& facts);

}  // namespace ckptplan

#endif  // CKPTPLAN_STEP_FACTS_H_
