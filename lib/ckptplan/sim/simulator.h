// The memory accounting rule, written once.
//
// Memory at a step is the sum of the bytes of every storage live at that step,
// plus the running node's workspace, plus resident state and the reserve.
// Approximate recompute (SimOptions::approx_options) adds two terms: a re-run
// step of an approximated node has its option's workspace (when the option
// gives one) instead of the node's, and each approximated node's factor
// bytes are resident (buffers).
// Steps are the graph's nodes in listed order, with recompute steps inserted
// before the first non-forward node that reads a dropped tensor. A storage is
// allocated at the step of the node that makes it (while that node's inputs
// are live) and freed after the last step that reads it; aliases share their
// root's storage. Parameters, buffers, optimizer state and inputs are live
// all step; gradients from their producer to the end of the step; the reserve
// is constant. A forward tensor the backward reads is either saved (its
// original storage lives until its last read) or dropped (forward reads use
// the original; non-forward reads use a copy recomputed, with any missing
// ancestors, right before the first non-forward node that needs it, and freed
// after its last read).
//
// Speed code that restates a clause of this rule, by clause (change the
// rule, check these; their verify modes and differential tests say whether
// they still hold). The facts they share about one simulation (groups, each
// node's own and re-run step, storages, first and last non-forward reads,
// reads through views, families, last forward reads) are derived once, in
// step_facts.h StepFacts, which the incremental planner, cleanup and
// DropDelta read:
//  - Steps in node order, recompute steps before the first non-forward
//    reader (a node and the recompute steps before it form its "group";
//    SimResult::node_peak is per group): StepFacts' groups, own, group
//    begin and re-run steps, and first and last non-forward reads (by step;
//    incremental.cc View turns them into groups); selector.h ScoreDrop
//    compares node peaks; drop_delta.h (where a drop's chain goes:
//    InsertionStep, the chain a recompute step's read sits in, re-run whole
//    where the drop's steps would not stay one run in it); drop_patch.cc
//    (DropDelta::Patch: the steps after a drop, which of them start a chain;
//    its node peaks and categories go through PeakTracker (CopyRun: a group
//    whose steps a patch keeps together keeps its node peak, moved, and the
//    highest of those is the run's highest total) and
//    ForwardStorageCategory, below, which Simulate uses too; PatchInPlace
//    leaves the groups before the first step a drop changes, node peaks and
//    all, and their first highest steps, unless their node peaks reach the
//    rest's, so it depends on a group's node peak bounding its steps);
//    resave_delta.cc
//    (DropDelta::ScoreResave: the run of steps a re-saved tensor's chain
//    takes away, found by the steps it ran in and their starts); drop_patch.cc
//    PatchResave (the steps after that run goes: the one after it starts a
//    chain when the run did; a view the run made and a later step reads
//    re-runs its node, so that case is simulated).
//  - Sum of live storages + the running node's workspace + resident state:
//    regions.h (a region's node peaks differ from the step's by a plan-free
//    offset); incremental.cc bounds (a drop lowers node peaks only where a
//    storage it frees was live); cleanup.cc floors and ceilings, and
//    JudgePending (re-saves applied but not simulated add their storages'
//    bytes over the steps each holds it, and take only their chains away);
//    drop_delta.h (a step's bytes as range adds over the old totals; what
//    lives across a place between two steps).
//  - Allocated at the producer's step, freed after the last read, aliases
//    share the root: StepFacts' storages (a root's original, a tensor's
//    copy), reads through views non-forward nodes take, families (the
//    latest last use of a root's other saved candidates) and LastForwardReads
//    (the last forward read per root), read by incremental.cc bounds (where
//    the original can end earlier), cleanup.cc floors and ceilings and
//    DropDelta; cleanup.cc leaving_ (storages whose last read is a
//    recompute step); FindRegions' spans; DropDelta's lifetimes after a
//    drop (the original's last other read, the chain's copies, storages the
//    chain reads, views backward nodes take); ScoreResave's lifetimes
//    after a re-save (the copy's reads go to the original, storages the
//    removed chain read last die at their last kept read, a root's copy
//    read only through the re-saved view goes); peak_floor.h PeakFloor (at
//    a node's own step, every plan keeps the non-forward nodes' storages,
//    the forward roots a later forward node reads and those a later
//    non-forward node reads through a saved candidate, a dropped root's
//    copy between its first and last non-forward reader, and the copy of an
//    unsaved root whose producer a chain re-ran by then and that a later
//    non-forward node reads through it, itself or a dropped view).
//  - Resident state all step; gradients to the end of the step: FindRegions
//    and ShapeRegions (the region of the implicit gradients has its own
//    shape), SimOptions::first_node's region accounting, ComputeLowerBound.
//  - Saved vs dropped, the copy recomputed with its missing ancestors (the
//    chain: producers reached through tensors neither saved nor resident,
//    not already re-run): incremental.cc ChainWalker (its cost is the cost a
//    drop adds; reaching a node already re-run makes the drop "pull" it) and
//    its lazy keys (a walk changes only where a node it reaches is re-run
//    anew or reads a tensor dropped anew; a drop's chain re-runs only nodes
//    its walk reaches; first non-forward reads only move earlier as drops
//    are added);
//    cleanup.cc Ceiling and ByproductCeiling (a chain that served one tensor
//    alone); peak_floor.h RecomputeCostFloor and PeakFloor::CostOfFitting
//    (a dropped candidate's chain re-runs its producer and the producers
//    reached through tensors no plan saves, each node at least once) and
//    PeakFloor::Of (the chains of the dropped candidates read by a node's
//    own step re-run their producers by then, each node once in a
//    simulation: a copy lives from then to its last read); local_search.cc
//    AddsCost (a drop re-runs the nodes its chain reaches that no chain
//    re-runs now, ReachedByChains);
//    SaveCandidates and the min-cut's network (mincut.h);
//    drop_delta.h DropDelta::Score (the chain's depth-first order, nodes
//    re-run later pulled into it, the added cost) and ScoreResave (a chain
//    that served the re-saved tensor alone, its depth-first run inside
//    another chain, its cost; ChainStays: which input of the reader starts
//    a chain, by input order, and which tensor on the depth-first stack
//    re-runs a node; MovedChain: which nodes run again once the chain
//    that re-ran them goes, where (InsertionStep) and in which depth-first
//    order).
//  - Approximations' workspace and factors: no speed code restates it. The
//    memory planner and its fast paths (incremental.cc, drop_delta.h,
//    cleanup.cc, regions) plan exact plans only; approximations are chosen
//    after the memory plan and each choice re-simulated by Simulate with
//    approx_options (plan/approx_planner.cc ChooseApproximations).
#ifndef CKPTPLAN_SIMULATOR_H_
#define CKPTPLAN_SIMULATOR_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ckptplan/ir/graph.h"

namespace ckptplan {

enum class Category : uint8_t {
  kParameters,
  kGradients,
  kOptimizerState,
  kBuffers,
  kInputs,
  kSavedActivations,
  kTemporaries,
  kRecomputed,
  kReserve,
  kCollectives,  ///< what collective ops make (IsCollectiveOp): gathers, receives
};
inline constexpr size_t kNumCategories = 10;
std::string_view ToString(Category category);
using CategoryBytes = std::array<int64_t, kNumCategories>;

/// Forward tensors a non-forward node reads and whose storage is not
/// resident: the tensors a plan saves or recomputes. Sorted by id.
std::vector<TensorId> SaveCandidates(const Graph& graph);

/// SaveCandidates(graph) less those SimContext::pinned marks: the tensors a
/// planner may choose to recompute. Sorted by id.
std::vector<TensorId> DroppableCandidates(const Graph& graph);

/// keep[t] != 0: candidate t is saved. Indexed by TensorId; entries of
/// non-candidates are ignored.
using SaveSet = std::vector<uint8_t>;
/// Every candidate saved: what eager PyTorch does without checkpointing.
SaveSet SaveAll(const Graph& graph);

struct SimOptions {
  int64_t reserve_bytes = 0;
  bool record_categories = false;  ///< fill SimResult::by_category
  /// Fill SimResult::recomputes and SimResult::peak_breakdown; searches that
  /// read only the peaks and the recompute cost turn it off.
  bool record_details = true;
  /// Simulate only the nodes [first_node, end_node) (clamped to the graph):
  /// a region of the step (see FindRegions). Storages made before the range
  /// and resident state are not counted; storages made in it that are read
  /// after it live to its last step, as gradients do; the implicit gradients
  /// count only when the step's first non-forward node is in the range.
  /// SimResult::node_peak is then indexed by node - first_node. On a region,
  /// each node's peak differs from the whole step's by an amount no plan
  /// changes.
  NodeId first_node = 0;
  NodeId end_node = kNoId;
  /// Approximate recompute (docs/approximate-recompute.md): per node id, the
  /// index into graph.nodes[n].approx of the option its re-runs use, kNoId
  /// when exact; nullptr: nothing approximated. Its re-run steps then have
  /// the option's workspace_bytes (when >= 0) instead of the node's, and its
  /// factor_bytes are resident (Category::kBuffers; whole-step simulations).
  const std::vector<uint32_t>* approx_options = nullptr;
};

struct Step {
  NodeId node;
  bool recompute;
  /// The first of the recompute steps that one dropped tensor's first
  /// non-forward use re-runs (its chain, which ends with the step making
  /// its copy).
  bool starts_chain;
};

/// One storage over its lifetime, [first_step, last_step] inclusive. Its
/// bytes are its root's (SimContext::bytes): 16 bytes a storage, as searches
/// keep a few simulations at once.
struct Buffer {
  TensorId root;
  uint32_t first_step;
  uint32_t last_step;
  Category category;
};

/// A dropped tensor and the recompute steps its first non-forward use caused.
struct Recompute {
  TensorId tensor;
  std::vector<NodeId> chain;  ///< nodes re-run, in order
  double cost = 0;            ///< sum of the chain's node costs
};

struct SimResult {
  int64_t peak_bytes = 0;
  uint32_t peak_step = 0;  ///< first step that reaches the peak
  std::vector<Step> steps;
  std::vector<int64_t> total;  ///< bytes live at each step
  /// Per original node: the most bytes over its step and the recompute steps
  /// inserted before it. Comparable across plans. Indexed by node id minus
  /// SimOptions::first_node.
  std::vector<int64_t> node_peak;
  /// The most bytes at a node's own step (not a recompute step); the lowest
  /// int64_t without steps. Set with the node peaks (PeakTracker).
  int64_t max_own_total = std::numeric_limits<int64_t>::min();
  /// The first node whose own step holds max_own_total (kNoId without steps).
  NodeId max_own_node = kNoId;
  std::vector<CategoryBytes> by_category;  ///< per step, if recorded
  std::vector<Buffer> buffers;
  std::vector<Recompute> recomputes;  ///< in the order they first happen
  double recompute_cost = 0;
  double step_cost = 0;  ///< cost of every original node, run once
  CategoryBytes resident{};  ///< constant part: parameters ... reserve
  CategoryBytes peak_breakdown{};  ///< bytes by category at peak_step
};

/// Bytes by category at `step`: by_category's row, or at the peak step
/// peak_breakdown when categories were not recorded per step.
const CategoryBytes& CategoriesAt(const SimResult& sim, uint32_t step);

class RangeAddMax;   // base/range_add_max.h
struct Region;       // below
struct RegionShape;

/// Per-graph facts Simulate needs, computed once, so that planners that
/// simulate many plans of one graph do not recompute them. Holds a reference
/// to `graph`, which must outlive it.
struct SimContext {
  explicit SimContext(const Graph& graph);

  const Graph& graph;
  std::vector<TensorId> root;               ///< StorageRoot of each tensor
  std::vector<uint8_t> forward_produced;    ///< made by a forward node
  std::vector<uint8_t> collective_made;     ///< made by a collective op (IsCollectiveOp)
  std::vector<uint8_t> resident_root;       ///< storage is resident
  std::vector<uint8_t> is_candidate;        ///< in SaveCandidates
  /// Candidates every plan saves: recomputing one would re-run a random op
  /// (IsRandomOp), its producer or one reached through tensors no plan
  /// saves. Planners never drop them; a plan that does is refused by the
  /// PyTorch runner.
  std::vector<uint8_t> pinned;
  /// Per node: re-running it re-runs a random op, its own or one reached
  /// through inputs no plan saves (the producers of the pinned candidates
  /// are such nodes). No walk from a candidate that is not pinned reaches
  /// one: it would pass a pinned candidate, which every plan saves, or
  /// make the candidate pinned itself.
  std::vector<uint8_t> reruns_random;
  std::vector<TensorId> candidates;         ///< SaveCandidates(graph)
  /// The candidates a planner may drop: candidates less the pinned ones.
  std::vector<TensorId> droppable;
  std::vector<double> node_cost;            ///< Graph::NodeCost of each node
  double step_cost = 0;                     ///< every node's cost, run once
  /// Per storage root: the last node reading any tensor sharing it; kNoId
  /// when none does.
  std::vector<NodeId> last_reader;
  NodeId first_non_forward = kNoId;         ///< first node not in the forward
  CategoryBytes resident{};  ///< resident state by category, without a reserve
  /// Every node cost is an integer and all of them sum below 2^53, so any
  /// sum of costs is exact in a double whatever the order.
  bool exact_costs = false;

  /// The graph in flat arrays, for the simulator's inner loop: node n reads
  /// ids[inputs_begin[n] .. outputs_begin[n]) and makes
  /// ids[outputs_begin[n] .. inputs_begin[n + 1]).
  std::vector<uint32_t> inputs_begin, outputs_begin;
  std::vector<TensorId> ids;
  std::vector<uint8_t> node_forward;      ///< phase is forward
  std::vector<int64_t> node_workspace;
  /// Per tensor: what making it allocates.
  enum class Made : uint8_t { kActivation, kGradient, kAlias, kNothing };
  std::vector<Made> made;
  std::vector<NodeId> producer;
  std::vector<TensorId> alias_of;

  /// Whether a recompute chain that needs `t` under `keep` re-runs its
  /// producer (unless a copy of it is made already): made by a forward
  /// node, not resident, not saved. Simulate's NeedsRecompute, and the
  /// floors (peak_floor.h), local search and DropDelta's scores and patches
  /// that restate chains, read it.
  bool Unsaved(TensorId t, const SaveSet& keep) const {
    return forward_produced[t] && !resident_root[t] && !(is_candidate[t] && keep[t]);
  }
  /// Whether no plan saves `t` while chains may need it: made by a forward
  /// node, not resident, not a candidate.
  bool NeverSaved(TensorId t) const {
    return forward_produced[t] && !resident_root[t] && !is_candidate[t];
  }
  std::vector<int64_t> bytes;

  /// FindRegions(*this) and ShapeRegions(*this, regions()), computed on
  /// first use.
  const std::vector<Region>& regions() const;
  const std::vector<RegionShape>& shapes() const;
  /// Per node: the index in regions() of the region holding it, computed
  /// with them.
  const std::vector<uint32_t>& region_of_node() const;
  /// Region (index in regions()) that makes candidate `t`.
  size_t RegionOf(TensorId t) const { return region_of_node()[producer[t]]; }

  /// Working memory Simulate reuses between calls (fresh pages are costly on
  /// large graphs); a context serves one thread at a time.
  struct Scratch {
    // All kNone between calls; a call resets only the entries it set.
    std::vector<uint32_t> original, recomputed;
    std::vector<TensorId> touched, stack;
    std::vector<int64_t> delta;
    /// The steps of a range's leading forward nodes, which no plan changes:
    /// their steps, storages (lifetimes as far as those steps read them)
    /// and the storage each output got. Kept per range, up to a size.
    struct ForwardPrefix {
      NodeId end = 0;  ///< first node after the prefix
      std::vector<Step> steps;
      std::vector<Buffer> buffers;
      std::vector<TensorId> outputs;
      std::vector<uint32_t> output_buffers;
    };
    std::unordered_map<uint64_t, ForwardPrefix> prefixes;  // by (first, end) node
    size_t prefix_bytes = 0;
  };
  mutable Scratch scratch;

 private:
  mutable std::shared_ptr<const std::vector<Region>> regions_;
  mutable std::shared_ptr<const std::vector<uint32_t>> region_of_node_;
  mutable std::shared_ptr<const std::vector<RegionShape>> shapes_;
};

/// Simulates one training step with `keep` deciding saved vs dropped.
SimResult Simulate(const Graph& graph, const SaveSet& keep, const SimOptions& options);
/// The same, reusing `context` (the result is identical).
SimResult Simulate(const SimContext& context, const SaveSet& keep, const SimOptions& options);
/// The same into `result`, reusing the memory it already holds.
void Simulate(const SimContext& context, const SaveSet& keep, const SimOptions& options,
              SimResult* result);
/// Simulate's recompute_cost for `keep` over `options`' range, summed the
/// same way (the same recompute steps, in the same order), without the
/// steps' storages and bytes: a fraction of a simulation.
double RecomputeCost(const SimContext& context, const SaveSet& keep, const SimOptions& options);

/// Makes room in `values`, per-step working memory, for `size` elements and
/// half as many again when it is short. resize() and assign() on a short
/// vector allocate the exact size, and step counts grow by a few with each
/// plan simulated: every time on fresh pages, whose first touch is what costs.
template <typename T>
void ReserveSteps(std::vector<T>& values, size_t size) {
  if (values.capacity() < size) values.reserve(size + size / 2);
}

/// The rule's category of a storage a forward node made, once its last read
/// is known: a saved activation when that read is a recompute step or a
/// non-forward node's, else a forward temporary. Simulate's settling and
/// DropDelta::Patch (a storage whose last read moved) both apply it.
inline Category ForwardStorageCategory(const SimContext& context, const Step& last_read) {
  return last_read.recompute || !context.node_forward[last_read.node]
             ? Category::kSavedActivations
             : Category::kTemporaries;
}

/// Turns a simulation's step totals, given in step order, into its peak,
/// first peak step and node peaks (a node's peak is the most over its step
/// and the recompute steps just before it). Simulate and DropDelta::Patch
/// both sum through it.
class PeakTracker {
 public:
  /// Node peaks of nodes [first, end) into `result`; with no steps the peak
  /// is `empty_peak`. Every node's own step must be summed (each writes its
  /// node's peak; the old values are not cleared first).
  PeakTracker(SimResult* result, NodeId first, NodeId end, int64_t empty_peak)
      : result_(result), first_(first), peak_(empty_peak) {
    // Sized exactly, as assign would (resize alone would grow it by half).
    std::vector<int64_t>& node_peak = result->node_peak;
    if (node_peak.capacity() < end - first) {
      node_peak.clear();
      node_peak.reserve(end - first);
    }
    node_peak.resize(end - first);
    node_peak_ = node_peak.data();
  }
  void Add(uint32_t s, const Step& step, int64_t total) {
    if (s == 0 || total > peak_) {
      peak_ = total;
      peak_step_ = s;
    }
    pending_ = std::max(pending_, total);
    if (!step.recompute) {
      node_peak_[step.node - first_] = pending_;
      pending_ = std::numeric_limits<int64_t>::min();
      if (total > max_own_) {
        max_own_ = total;
        max_own_node_ = step.node;
      }
    }
  }
  /// Add for steps [s, s + length) copied from a run of consecutive steps of
  /// another simulation of the same range (summed through a PeakTracker: its
  /// node peaks in `old_node_peak`), `from` and `from_totals`, each total
  /// moved by `delta`: written to `steps` and `totals` (step s's first) as
  /// they are summed. A group wholly inside the run has the same steps
  /// there, so its node peak is the old one moved by delta; only the groups
  /// at the run's ends are summed. `steps` may lie before `from` in one
  /// array (a patch in place): the steps are read where they are written.
  void CopyRun(uint32_t s, const Step* from, const int64_t* from_totals, uint32_t length,
               const int64_t* old_node_peak, int64_t delta, Step* steps, int64_t* totals) {
    if (steps != from) std::copy(from, from + length, steps);
    uint32_t i = AddHead(s, length, steps, from_totals, delta, totals);
    const uint32_t end = OwnEnd(i, length, steps);
    if (end > i) {
      // The inner groups' node peaks, moved in one pass over their nodes.
      // Their highest is the highest total of steps [i, end), which are
      // those groups' steps.
      constexpr int64_t kLow = std::numeric_limits<int64_t>::min();
      const auto [lo, hi] = InnerGroups(i, end, steps);
      int64_t most = kLow;
      for (size_t n = lo; n < hi; ++n) {
        node_peak_[n] = old_node_peak[n] + delta;
        most = std::max(most, node_peak_[n]);
      }
      if (most <= peak_ && most <= max_own_) {
        // Neither the peak nor the highest own step can be new (the own
        // steps' totals are no higher): the totals alone are moved (most
        // runs: the peak so far holds).
        for (uint32_t j = i; j < end; ++j) totals[j] = from_totals[j] + delta;
        pending_ = kLow;
        AddTail(s, end, length, steps, from_totals, delta, totals);
        return;
      }
      // The highest own step's total in one pass, without tracking where it
      // is reached; where one of the two is new, a second pass finds the
      // first step reaching it.
      int64_t most_own = kLow;
      for (uint32_t j = i; j < end; ++j) {
        const int64_t total = from_totals[j] + delta;
        totals[j] = total;
        most_own = std::max(most_own, steps[j].recompute ? kLow : total);
      }
      if (most > peak_) {
        uint32_t at = i;
        while (totals[at] != most) ++at;
        peak_ = most;
        peak_step_ = s + at;
      }
      if (most_own > max_own_) {
        uint32_t at = i;
        while (steps[at].recompute || totals[at] != most_own) ++at;
        max_own_ = most_own;
        max_own_node_ = steps[at].node;
      }
      pending_ = std::numeric_limits<int64_t>::min();
      i = end;
    }
    AddTail(s, i, length, steps, from_totals, delta, totals);
  }
  /// CopyRun for a run of steps each of which is its node's own and only
  /// step, of consecutive nodes (a range's leading forward steps): each node
  /// peak is its step's total, with no group to look up.
  void CopyOwnRun(uint32_t s, const Step* from, const int64_t* from_totals, uint32_t length,
                  int64_t delta, Step* steps, int64_t* totals) {
    if (length == 0) return;
    if (steps != from) std::copy(from, from + length, steps);
    totals[0] = from_totals[0] + delta;
    Add(s, steps[0], totals[0]);  // closes a group begun before it
    int64_t* const node_peak = node_peak_ + (steps[0].node - first_);
    int64_t most = std::numeric_limits<int64_t>::min();
    uint32_t most_at = 0;  // the first step reaching it
    for (uint32_t j = 1; j < length; ++j) {
      const int64_t total = from_totals[j] + delta;
      totals[j] = total;
      node_peak[j] = total;
      most_at = total > most ? j : most_at;
      most = std::max(most, total);
    }
    if (length > 1 && most > peak_) {
      peak_ = most;
      peak_step_ = s + most_at;
    }
    if (length > 1 && most > max_own_) {
      max_own_ = most;
      max_own_node_ = steps[most_at].node;
    }
  }
  /// Add for steps [s, s + length) that a patch in place leaves where they
  /// were, as they were (`steps` and `totals` at step s): each group wholly
  /// inside the run keeps its node peak, so only the groups at the run's
  /// ends are summed. The groups between are read only where their highest
  /// node peak (from `group_max`, the node peaks at n - first, when given;
  /// else from the node peaks) may raise the peak or the highest own step;
  /// *read says whether they were. Returns where the steps after the run's
  /// first own step begin (from the run's first; `length` when it has none
  /// but its last).
  uint32_t KeepRun(uint32_t s, uint32_t length, const Step* steps, int64_t* totals,
                   const RangeAddMax* group_max, bool* read);
  /// Sums from step `s` (the first of a group) on, into node peaks where
  /// those of the groups before are left as they are (a patch in place):
  /// the figures then are those of the steps from `s` until Before.
  void StartAt(uint32_t s) {
    if (s > 0) peak_ = std::numeric_limits<int64_t>::min();
  }
  int64_t peak() const { return peak_; }
  int64_t max_own() const { return max_own_; }
  /// The figures of the steps StartAt left out (the lowest int64_t and
  /// kNoId where not known: the steps summed then hold them), which come
  /// first: they win ties.
  void Before(int64_t peak, uint32_t peak_step, int64_t max_own, NodeId max_own_node) {
    if (peak >= peak_) {
      peak_ = peak;
      peak_step_ = peak_step;
    }
    if (max_own_node != kNoId && max_own >= max_own_) {
      max_own_ = max_own;
      max_own_node_ = max_own_node;
    }
  }
  /// Writes the peak, its step and the highest own step.
  void Finish() const {
    result_->peak_bytes = peak_;
    result_->peak_step = peak_step_;
    result_->max_own_total = max_own_;
    result_->max_own_node = max_own_node_;
  }

 private:
  // The ends of a run of steps [s, s + length) (CopyRun, KeepRun): the
  // steps up to its first own step, whose group may begin before it, and
  // those after its last own step, whose group ends after it, are summed one
  // by one, each total from from_totals moved by delta written to totals.
  // AddHead returns where the steps after the first own step begin,
  // OwnEnd where those after the last one do (from `i`).
  uint32_t AddHead(uint32_t s, uint32_t length, const Step* steps, const int64_t* from_totals,
                   int64_t delta, int64_t* totals) {
    uint32_t i = 0;
    while (i < length) {
      const bool own = !steps[i].recompute;
      totals[i] = from_totals[i] + delta;
      Add(s + i, steps[i], totals[i]);
      ++i;
      if (own) break;
    }
    return i;
  }
  static uint32_t OwnEnd(uint32_t i, uint32_t length, const Step* steps) {
    uint32_t end = length;
    while (end > i && steps[end - 1].recompute) --end;
    return end;
  }
  void AddTail(uint32_t s, uint32_t i, uint32_t length, const Step* steps,
               const int64_t* from_totals, int64_t delta, int64_t* totals) {
    for (; i < length; ++i) {
      totals[i] = from_totals[i] + delta;
      Add(s + i, steps[i], totals[i]);
    }
  }
  // The groups of steps [i, end), between a run's first and last own steps
  // (i > 0): groups follow in node order, one own step each, so they are
  // the nodes after step i - 1's through step end - 1's (as node peak
  // indices, [first, second)).
  std::pair<size_t, size_t> InnerGroups(uint32_t i, uint32_t end, const Step* steps) const {
    return {steps[i - 1].node + 1 - first_, steps[end - 1].node + 1 - first_};
  }

  SimResult* result_;
  int64_t* node_peak_;  // result_'s, which does not grow while summed
  NodeId first_;
  int64_t peak_;
  uint32_t peak_step_ = 0;
  int64_t pending_ = std::numeric_limits<int64_t>::min();  // most since the last node's step
  int64_t max_own_ = std::numeric_limits<int64_t>::min();
  NodeId max_own_node_ = kNoId;
};

/// Bytes any plan needs: resident state + reserve + the largest single step
/// (one node's inputs, outputs, workspace and the gradients made so far).
struct LowerBound {
  int64_t bytes = 0;
  CategoryBytes resident{};
  int64_t gradients = 0;   ///< gradients live at the worst node
  int64_t step_bytes = 0;  ///< that node's inputs + outputs + workspace
  NodeId node = kNoId;
};
LowerBound ComputeLowerBound(const Graph& graph, int64_t reserve_bytes);
/// "parameters 14.0 GiB + optimizer_state 28.0 GiB + ... + largest single
/// step 3.1 GiB (node 'x')".
std::string DescribeLowerBound(const Graph& graph, const LowerBound& bound);

/// A range of nodes [first, end) that no plan connects to the rest of the
/// step: every storage a forward node makes or reads is made and last read
/// within one region, so a plan's choices in one region change memory in
/// that region only (e.g. the microbatches of gradient accumulation).
struct Region {
  NodeId first = 0;
  NodeId end = 0;
};
/// Splits the step into the most regions such that each has a candidate
/// (the last one may have none when it is the only one). One region when the
/// step does not split, none when the graph has no nodes.
std::vector<Region> FindRegions(const SimContext& context);

/// Where a region's copy of its shape's first region sits. Regions of one
/// shape are copies of one another up to a shift of node and tensor ids (e.g.
/// the microbatches of gradient accumulation): node by node the same phase,
/// op, cost and workspace, reading and making tensors of the same bytes, kind,
/// aliasing and candidacy, read after the region or not alike. Any plan then
/// simulates the same in each, ids shifted, and a min cut cuts each alike.
struct RegionShape {
  size_t first_of_shape = 0;  ///< index of the shape's first region
  int64_t node_shift = 0;     ///< this region's node ids minus that region's
  int64_t tensor_shift = 0;   ///< the same for the tensors the region makes
  size_t copies = 1;          ///< regions of this shape
};
/// One RegionShape per region of `regions` (FindRegions). The region holding
/// the step's first non-forward node (where implicit gradients appear) has a
/// shape of its own.
std::vector<RegionShape> ShapeRegions(const SimContext& context,
                                      const std::vector<Region>& regions);

}  // namespace ckptplan

#endif  // CKPTPLAN_SIMULATOR_H_
