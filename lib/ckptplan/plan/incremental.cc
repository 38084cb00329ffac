#include "ckptplan/plan/incremental.h"

#include "ckptplan/base/text_escape.h"
#include "ckptplan/base/console.h"
#include "ckptplan/base/limits.h"
#include "ckptplan/base/range_add_max.h"
#include "ckptplan/sim/drop_delta.h"
#include "ckptplan/sim/regions.h"
#include "ckptplan/plan/fast_score.h"
#include "ckptplan/sim/step_facts.h"
#include "ckptplan/plan/selector.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <spdlog/spdlog.h>

namespace ckptplan {
namespace {

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
// Recomputed nodes a bound walks through before giving up on pulled inputs:
// every candidate gets a short walk; a long one only when its bound, loose
// because the short walk gave up, comes up best (long walks for every
// candidate cost more than the simulations they save).
constexpr size_t kShortPulledWalk = 1;
constexpr size_t kLongPulledWalk = 256;
// A search that bounds this many keys from their spans, and at least one in
// this many of the region's nodes, reads the node peaks' prefix and suffix
// maxima from arrays (PrepareEnds) rather than the tree: each span bound
// descends it twice (about 2 log n nodes apart in memory), the arrays cost a
// pass over the region.
constexpr size_t kSpanBoundsBeforeEnds = 16;
constexpr size_t kNodesPerSpanBound = 512;

// Drops are ranked exactly as the reference ranks them (DropChoice in
// selector.h); tests/plan/incremental_test.cc checks the two stay identical.
using Choice = DropChoice;

// Facts no plan changes, beside the SimContext's.
struct StaticInfo {
  std::vector<uint8_t> recomputable;     // forward-produced, storage not resident
};

StaticInfo ComputeStaticInfo(const SimContext& context) {
  StaticInfo info;
  const size_t num_tensors = context.graph.tensors.size();
  info.recomputable.assign(num_tensors, 0);
  for (TensorId t = 0; t < num_tensors; ++t) {
    info.recomputable[t] = context.forward_produced[t] && !context.resident_root[t];
  }
  return info;
}

constexpr int64_t kLowest = std::numeric_limits<int64_t>::min();

// Inclusive range of nodes; empty when lo > hi.
struct NodeRange {
  int64_t lo = 1, hi = 0;
  bool empty() const { return lo > hi; }
};

// What the current simulation of a region says about where a drop can lower
// memory: its groups, storages and reads (StepFacts), and its node peaks.
// Node-indexed vectors are indexed by node - first.
struct View {
  NodeId first = 0;                    // the region's first node
  int64_t peak = 0;                    // the step's peak
  const StepFacts* facts = nullptr;    // of the region's simulation
  // The group node `n` is re-run in; kNoId if it is not.
  NodeId Slot(NodeId n) const { return facts->RerunGroup(n); }
  // The first and last group a non-forward step reads `t` in (the last by a
  // group's own step); kNoId if none does.
  NodeId FirstUse(TensorId t) const { return facts->GroupOf(facts->FirstRead(t)); }
  NodeId LastNodeUse(TensorId t) const { return facts->GroupOf(facts->LastOwnRead(t)); }
  // Over nodes, the step's bytes: kept across drops of the region applied
  // from patches (DropDelta::GroupChanges), else built anew; the values
  // themselves, exact, in node_peak_values (the simulation's or own_values).
  RangeAddMax node_peak;
  const int64_t* node_peak_values = nullptr;
  std::vector<int64_t> own_values;
  // The same over [first, first + n) and [first + n, end): most bounds ask
  // for the highest node before and after a range. Filled by PrepareEnds
  // for searches that bound every candidate; a search bounding a few (lazy
  // keys) asks node_peak instead.
  bool ends_ready = false;
  std::vector<int64_t> prefix_max, suffix_max;
  // Tier-1 data, filled by PrepareTier1 when first needed after a build.
  bool tier1_ready = false;
  std::vector<uint32_t> peak_prefix;   // peak nodes in [first, first + n)
  // Over the peak nodes in [first, first + n): how far below the peak their
  // own steps are (saturating sum).
  std::vector<int64_t> gap_prefix;
  int64_t max_own_total = kLowest;     // most bytes at a node's own step
  NodeId max_own_node = kNoId;         // the first node whose own step holds it
};

// The most bytes at a node's own step with the region's offsets, the first
// node whose own step holds them (into *max_node, unless null) and (unless
// null) each node's peak with its offset into node_peak. The nodes' own steps
// come in node order, one each. (Locals in the loop: stores through a field
// would alias.)
int64_t OwnMax(const SimResult& sim, const RegionalMemory::Part& region, NodeId first,
               int64_t* node_peak, NodeId* max_node = nullptr) {
  const int64_t* const offset = region.offset.data();
  const int64_t* const sim_node_peak = sim.node_peak.data();
  const int64_t* const total = sim.total.data();
  const Step* const steps = sim.steps.data();
  int64_t max_own_total = kLowest;
  NodeId node = kNoId;
  for (size_t s = 0, num_steps = sim.steps.size(); s < num_steps; ++s) {
    if (steps[s].recompute) continue;
    const size_t n = steps[s].node - first;
    if (total[s] + offset[n] > max_own_total) {
      max_own_total = total[s] + offset[n];
      node = steps[s].node;
    }
    if (node_peak != nullptr) node_peak[n] = sim_node_peak[n] + offset[n];
  }
  if (max_node != nullptr) *max_node = node;
  return max_own_total;
}

// `same`: what the region's simulation keeps of the one `facts` were filled
// from last (StepFacts::Fill). `moved`, when given: how the node peaks moved
// from those of the view built last, of the simulation the region's is the
// patch of (zero offsets).
void BuildView(const SaveSet& keep, const RegionalMemory::Part& region, int64_t peak,
               SimPrefix same, const DropDelta::GroupChanges* moved, StepFacts* facts,
               View* view) {
  const SimResult& sim = region.sim.full();
  const NodeId first = region.range.first;
  const size_t num_nodes = region.range.end - first;
  view->first = first;
  view->peak = peak;
  facts->Fill(sim, first, region.range.end, same);
  facts->FillReads();
  facts->FillSaved(keep);
  view->facts = facts;
  view->tier1_ready = false;
  view->ends_ready = false;
  if (region.zero_offset) {
    // The simulation's own figures, read off as it was summed (and read in
    // place: the view lives until the region's simulation changes).
    view->node_peak_values = sim.node_peak.data();
    view->max_own_total = sim.max_own_total;
    view->max_own_node = sim.max_own_node;
    if (moved != nullptr && view->node_peak.size() == num_nodes) {
      moved->ApplyTo(sim.node_peak, &view->node_peak);
    } else {
      view->node_peak.Build(sim.node_peak.data(), num_nodes);
    }
  } else {
    view->own_values.resize(num_nodes);
    view->max_own_total =
        OwnMax(sim, region, first, view->own_values.data(), &view->max_own_node);
    view->node_peak_values = view->own_values.data();
    view->node_peak.Build(view->own_values.data(), num_nodes);
  }
}

// The view's prefix and suffix maxima, once a search bounds every candidate
// or many keys from their spans.
void PrepareEnds(View* view) {
  if (view->ends_ready) return;
  view->ends_ready = true;
  const size_t num_nodes = view->node_peak.size();
  const int64_t* const node_peak = view->node_peak_values;
  view->prefix_max.resize(num_nodes + 1);
  view->suffix_max.resize(num_nodes + 1);
  int64_t* const prefix_max = view->prefix_max.data();
  int64_t* const suffix_max = view->suffix_max.data();
  int64_t running_max = kLowest;
  prefix_max[0] = suffix_max[num_nodes] = kLowest;
  for (size_t n = 0; n < num_nodes; ++n) {
    running_max = std::max(running_max, node_peak[n]);
    prefix_max[n + 1] = running_max;
  }
  running_max = kLowest;
  for (size_t n = num_nodes; n-- > 0;) {
    running_max = std::max(running_max, node_peak[n]);
    suffix_max[n] = running_max;
  }
}

// What only tier-1 bounds read (the nodes at the peak and how far below it
// their own steps are), once they are needed: the peak can seldom not be
// lowered, so most searches never ask.
void PrepareTier1(const RegionalMemory::Part& region, View* view) {
  if (view->tier1_ready) return;
  view->tier1_ready = true;
  const SimResult& sim = region.sim.full();
  const size_t num_nodes = region.range.end - view->first;
  view->peak_prefix.resize(num_nodes + 1);
  view->gap_prefix.resize(num_nodes + 1);
  view->peak_prefix[0] = 0;
  view->gap_prefix[0] = 0;
  uint32_t peak_nodes = 0;
  for (size_t s = 0; s < sim.steps.size(); ++s) {
    if (sim.steps[s].recompute) continue;
    const size_t n = sim.steps[s].node - view->first;
    const int64_t own_total = sim.total[s] + region.offset[n];
    const bool at_peak = sim.node_peak[n] + region.offset[n] == view->peak;
    peak_nodes += at_peak;
    view->peak_prefix[n + 1] = peak_nodes;
    const int64_t gap = at_peak ? view->peak - own_total : 0;
    view->gap_prefix[n + 1] = SaturatingAdd(view->gap_prefix[n], gap);
  }
}

// Best case of dropping one candidate, from the current simulation.
struct Bound {
  TensorId tensor = kNoId;
  double score = 0;           // no more than the real score
  int64_t freed = kUnbounded;  // no less than the real bytes freed
  // From a short walk that gave up on pulled inputs: a long walk may tighten it.
  bool loose = false;
  double cost = 0;  // the chain's cost, less the slack (tier 0)
  // Tier 0: held under the floor the chain gives (ChainWalker::ChainFloor),
  // worked out for bounds that come first.
  bool floored = false;

  // Held to at most `most` bytes freed, scored again from its cost.
  void CapFreed(int64_t most) {
    if (most >= freed) return;
    freed = most;
    score = freed > 0 ? cost / static_cast<double>(freed) : 0.0;
  }
};

bool BoundBefore(const Bound& a, const Bound& b) {
  if (a.score != b.score) return a.score < b.score;
  if (a.freed != b.freed) return a.freed > b.freed;
  return a.tensor < b.tensor;
}

// A candidate whose bound does not beat `best` cannot beat it either: its
// score is at least the bound's and its bytes freed at most the bound's.
bool MayBeat(const Bound& bound, int tier, const Choice& best) {
  Choice optimistic{bound.tensor, tier, bound.score, bound.freed};
  return optimistic.BetterThan(best);
}

// Which term of ChainWalker::ChainFloor gave its floor, where that is a
// range of node peaks: the range, what the drop adds over it, and what the
// two were read from besides the walk, so that the floor can be read again
// on a later view without the walk (ChainWalker::WitnessFloor).
struct FloorWitness {
  enum Kind : uint8_t {
    kNone,           // not a range term: read again only by the walk
    kReadsOriginal,  // a root's original the chain reads at its place
    kReadsCopy,      // a copy made before the place that the chain reads there
    kGap,            // a gap between the groups the chain's moved nodes leave
  };
  Kind kind = kNone;
  NodeId first_use = kNoId;  // the drop's place then
  TensorId read = kNoId;     // kReads*: the tensor whose storage lives to the place
  int64_t copied_to = 0;     // kGap: ChainWalker::CopiedTo then
  int64_t lo = 0, hi = 0;    // the node peaks [lo, hi), region-relative
  int64_t plus = 0;          // added over them
};

// Walks the nodes a drop of `t` would re-run: its producer and, through
// tensors neither saved nor resident, their producers. Nodes the current
// plan already re-runs are not added but make the drop "pulling".
class ChainWalker {
 public:
  ChainWalker(const SimContext& context, const StaticInfo& info)
      : graph_(context.graph), context_(context), info_(info), mark_(graph_.nodes.size(), 0),
        passable_(info.recomputable) {}

  // Walks from now on see the plan `keep` of `candidates`: a walk goes on
  // through a recomputable tensor unless it is saved.
  void SetPlan(const SaveSet& keep, const std::vector<TensorId>& candidates) {
    for (TensorId t : candidates) Set(keep, t);
  }
  // Appends the nodes a walk from `t` reaches, none left out, to *nodes.
  void Reach(TensorId t, const View& view, std::vector<NodeId>* nodes) {
    reached_ = nodes;
    Walk(t, view, SIZE_MAX);
    reached_ = nullptr;
  }
  bool Passable(TensorId t) const { return passable_[t] != 0; }
  // The same for one candidate whose bit changed.
  void Set(const SaveSet& keep, TensorId t) { passable_[t] = info_.recomputable[t] && !keep[t]; }

  struct Chain {
    double cost = 0;             // of the nodes added to the recompute set
    bool pulls = false;          // reaches a node already in the recompute set
    NodeId last_slot = 0;        // latest group such a node is re-run in now
    // Bytes of those nodes' inputs that may free earlier: all but those a
    // node at or after the pulled range reads (they stay live through it).
    int64_t pulled_inputs = 0;
    size_t pulled_nodes = 0;
  };

  // View::Slot gives the slots; the recompute set is closed under this walk,
  // so nodes reached through a recomputed node are recomputed too. The walk
  // stays in the view's region.
  Chain Walk(TensorId t, const View& view, size_t max_pulled) {
    NextEpoch();
    max_pulled_ = max_pulled;
    Chain chain;
    stack_.clear();
    pulled_.clear();
    pulled_slots_.clear();
    Visit(context_.producer[t], view, &chain);
    while (!stack_.empty()) {
      NodeId n = stack_.back();
      stack_.pop_back();
      const bool recomputed = view.Slot(n) != kNoId;
      // The flat arrays: walks run for every candidate on every drop.
      const TensorId* ids = context_.ids.data();
      for (uint32_t i = context_.inputs_begin[n]; i < context_.outputs_begin[n]; ++i) {
        const TensorId in = ids[i];
        if (recomputed && !context_.resident_root[in]) pulled_.push_back(in);
        if (!passable_[in]) continue;
        Visit(context_.producer[in], view, &chain);
      }
    }
    if (chain.pulled_inputs == kUnbounded) return chain;
    // The pulled nodes move to the first use of `t`; an input that a node
    // reads at or after the last group they leave is live throughout.
    const NodeId pulled_end = std::max(view.FirstUse(t), chain.last_slot);
    for (TensorId in : pulled_) {
      const NodeId last = view.LastNodeUse(in);
      if (last == kNoId || last < pulled_end) {
        chain.pulled_inputs += context_.bytes[context_.root[in]];
      }
    }
    return chain;
  }

  // A floor under the region's highest node peak after dropping `t`
  // (kLowest: none known), from the chain's own closure: from t's producer
  // through passable tensors, stopping at nodes re-run before t's first use
  // (Builder::MaterializeForTensor: a tensor the chain reads is missing when
  // passable, unless a step before the place made its copy); a node re-run
  // in that group may come before or after the place, so then nothing is
  // known. (The walk reaches more: it goes on through nodes re-run earlier.)
  // Each node of the closure runs at the place, in the first use's group:
  //  - what it reads lives to there. A kept root's original or the copy a
  //    node re-run before the first use made, last read in an earlier
  //    group, now lives over the groups between, where only t's original
  //    leaves (the moved nodes read their inputs at the place too: each
  //    kept original or earlier copy lives to there, and a copy made after
  //    the first use lived only after it);
  //  - a node of it re-run after the first use moves (its old step goes;
  //    each activation output gets a copy at the place), and such a copy of
  //    a dropped tensor, read last by a node's own step (which stays), lives
  //    from the place through that read: over the groups before the node's
  //    old one, on top of what lived there. Those groups keep their steps
  //    but for the groups moved nodes leave, whose own steps stay; each
  //    falls by what leaves it at most: the moved nodes' inputs last read by
  //    an own step before it or by none (the pulled inputs), and t's
  //    original (not where t's copy, made before them, stands for it: up to
  //    its last use, when t is a root);
  //  - the first use's own step keeps its bytes but the pulled inputs (the
  //    copy replaces the original there) and gains the moved copies.
  // Depends only on the view: a bound that comes first is floored once.
  // Returns once the floor reaches the peak (the bound then frees nothing).
  // Unless null, *witness says which term gave the floor returned, where it
  // is a range of node peaks (FloorWitness).
  int64_t ChainFloor(TensorId t, const View& view, const int64_t* offset,
                     FloorWitness* witness = nullptr) {
    FloorWitness unused;
    FloorWitness& term = witness != nullptr ? *witness : unused;
    term = {};
    const NodeId first_use = view.FirstUse(t);
    if (first_use == kNoId) return kLowest;
    const StepFacts& facts = *view.facts;
    const SimResult& sim = *facts.sim();
    const TensorId* ids = context_.ids.data();
    const TensorId root = context_.root[t];
    const int64_t own = context_.bytes[root];
    const NodeId first = view.first;
    int64_t floor = kLowest;
    NextEpoch();
    slots_.clear();
    moved_.clear();     // (old group, bytes of its node's moved copies)
    pulled_.clear();    // inputs of moved nodes, not resident
    // A storage the chain reads at its place, last read in an earlier group.
    // Raises the floor to `value`, which the term `from` gave.
    auto raise = [&](int64_t value, const FloorWitness& from) {
      if (value <= floor) return;
      floor = value;
      term = from;
      term.first_use = first_use;
    };
    // The floor over the node peaks [lo, hi) (region-relative) plus `plus`.
    auto raise_over = [&](int64_t lo, int64_t hi, int64_t plus, FloorWitness from) {
      from.lo = lo;
      from.hi = hi;
      from.plus = plus;
      raise(view.node_peak.Query(lo, hi) + plus, from);
    };
    auto read_at_place = [&](TensorId x, uint32_t storage, bool copy) {
      if (storage == StepFacts::kNone) return;
      const uint32_t last = sim.buffers[storage].last_step;
      if (last == StepFacts::kNone) return;
      const NodeId group = facts.Group(last);
      if (group + 1 >= first_use) return;
      FloorWitness from;
      from.kind = copy ? FloorWitness::kReadsCopy : FloorWitness::kReadsOriginal;
      from.read = x;
      raise_over(group + 1 - first, first_use - first, context_.bytes[x] - own, from);
    };
    int64_t copies = 0;
    stack_.assign(1, context_.producer[t]);
    while (!stack_.empty()) {
      const NodeId p = stack_.back();
      stack_.pop_back();
      if (p == kNoId || p < facts.first() || p >= facts.end()) return kLowest;
      if (mark_[p] == epoch_) continue;
      mark_[p] = epoch_;
      const NodeId slot = view.Slot(p);
      if (slot != kNoId && slot < first_use) continue;  // its copies are made
      if (slot == first_use) return kLowest;
      const bool moves = slot != kNoId;
      if (moves) {
        slots_.push_back(slot);
        const uint32_t rerun = facts.RerunStep(p);
        int64_t bytes = 0;
        for (uint32_t i = context_.outputs_begin[p]; i < context_.inputs_begin[p + 1]; ++i) {
          const TensorId x = ids[i];
          if (context_.made[x] != SimContext::Made::kActivation || !passable_[x]) continue;
          const uint32_t copy = facts.Copy(x);
          if (copy == StepFacts::kNone) continue;
          const Buffer& buffer = sim.buffers[copy];
          if (buffer.first_step != rerun || buffer.last_step == StepFacts::kNone ||
              sim.steps[buffer.last_step].recompute) {
            continue;
          }
          bytes += context_.bytes[buffer.root];
        }
        if (bytes > 0) moved_.push_back({slot, bytes});
        copies += bytes;
      }
      for (uint32_t i = context_.inputs_begin[p]; i < context_.outputs_begin[p]; ++i) {
        const TensorId x = ids[i];
        if (moves && !context_.resident_root[x]) pulled_.push_back(x);
        if (passable_[x]) {
          const NodeId producer = context_.producer[x];
          stack_.push_back(producer);
          if (context_.root[x] != x || x == root || producer == kNoId ||
              producer < facts.first() || producer >= facts.end()) {
            continue;
          }
          const NodeId made_in = view.Slot(producer);
          if (made_in == kNoId || made_in >= first_use) continue;
          const uint32_t copy = facts.Copy(x);
          if (copy != StepFacts::kNone &&
              sim.buffers[copy].first_step == facts.RerunStep(producer)) {
            read_at_place(x, copy, /*copy=*/true);
          }
        } else if (context_.root[x] == x && x != root && context_.forward_produced[x] &&
                   !context_.resident_root[x]) {
          read_at_place(x, facts.Original(x), /*copy=*/false);
        }
      }
      // A floor at the peak is all a bound asks (it then frees nothing).
      if (floor >= view.peak) return floor;
    }
    // The pulled inputs: those a node at or after the last group the moved
    // nodes leave reads are live throughout.
    std::sort(slots_.begin(), slots_.end());
    slots_.erase(std::unique(slots_.begin(), slots_.end()), slots_.end());
    const NodeId pulled_end = slots_.empty() ? first_use : std::max(first_use, slots_.back());
    pulled_last_.clear();
    int64_t pulled_inputs = 0;
    for (TensorId in : pulled_) {
      const NodeId last = view.LastNodeUse(in);
      if (last == kNoId || last < pulled_end) {
        const int64_t bytes = context_.bytes[context_.root[in]];
        pulled_inputs += bytes;
        pulled_last_.push_back({last == kNoId ? -1 : static_cast<int64_t>(last), bytes});
      }
    }
    const uint32_t first_read = facts.FirstRead(t);
    if (first_read != StepFacts::kNone && !sim.steps[first_read].recompute) {
      raise(sim.total[first_read] + offset[first_use - first] - pulled_inputs + copies, {});
    }
    if (slots_.empty() || floor >= view.peak) return floor;
    // t's copy stands for its original over the groups [lo, copied_to).
    const int64_t lo = static_cast<int64_t>(first_use) + 1;
    const int64_t copied_to = CopiedTo(t, view);
    FloorWitness gap;
    gap.kind = FloorWitness::kGap;
    gap.copied_to = copied_to;
    // Over the gaps between the groups moved nodes leave, the first gap
    // first, and those groups' own steps: `gained` sums the copies of nodes
    // whose old group is later, so it only falls, and `leaving` the pulled
    // inputs last read before the gap's end, which only grows: once the
    // peak itself plus the one less the other cannot raise the floor, no
    // later gap can.
    std::sort(moved_.begin(), moved_.end());
    std::sort(pulled_last_.begin(), pulled_last_.end());
    size_t next_input = 0;
    int64_t leaving = 0;
    int64_t gained = copies;
    size_t next = 0;
    for (size_t k = 0; k < slots_.size(); ++k) {
      const int64_t hi = slots_[k];  // gap [gap_lo, hi)
      const int64_t gap_lo = k == 0 ? lo : static_cast<int64_t>(slots_[k - 1]) + 1;
      for (; next < moved_.size() && moved_[next].first < hi; ++next) gained -= moved_[next].second;
      for (; next_input < pulled_last_.size() && pulled_last_[next_input].first < hi; ++next_input) {
        leaving += pulled_last_[next_input].second;
      }
      if (view.peak + gained - leaving <= floor) break;
      const int64_t split = std::clamp<int64_t>(copied_to, gap_lo, hi);
      if (gap_lo < split) raise_over(gap_lo - first, split - first, gained - leaving, gap);
      if (split < hi) raise_over(split - first, hi - first, gained - own - leaving, gap);
      // Group hi's own step: its re-run steps go, the copies of nodes whose
      // old group is later come, and what its own node reads stays.
      int64_t gained_after = gained;
      for (size_t j = next; j < moved_.size() && moved_[j].first == hi; ++j) {
        gained_after -= moved_[j].second;
      }
      const uint32_t own_step = facts.OwnStep(static_cast<NodeId>(hi));
      raise(sim.total[own_step] + offset[hi - first] + gained_after - leaving -
                (hi >= copied_to ? own : 0),
            {});
      if (floor >= view.peak) break;
    }
    return floor;
  }

  // Where the copy of `t`, once dropped, no longer stands for its original
  // (ChainFloor's gaps): the group after its last use, or the one of a
  // recompute step that reads it last; the group after its first use where
  // it is a view or unused.
  int64_t CopiedTo(TensorId t, const View& view) const {
    const StepFacts& facts = *view.facts;
    const int64_t lo = static_cast<int64_t>(view.FirstUse(t)) + 1;
    const uint32_t last_use = facts.LastUse(t);
    if (context_.root[t] != t || last_use == StepFacts::kNone) return lo;
    const int64_t group = facts.GroupOf(last_use);
    return std::max(lo, facts.sim()->steps[last_use].recompute ? group : group + 1);
  }

  // The floor the term `witness` of ChainFloor(t) on an earlier view gives
  // on `view`, read without the walk; kLowest where that is not known. The
  // caller knows the walk of `t` is the one the witness came from (its lazy
  // key is as it was: its nodes, which of them are re-run and where, and
  // the copies they make). Besides the walk, the term read t's first use
  // (the place, its range's end) and, for a storage read at the place, that
  // storage's last group (its range's start), for a gap where t's copy
  // stands for its original (whether t's bytes leave): where these are as
  // they were, the term is the same range with the same addend, and only
  // the node peaks are read again.
  int64_t WitnessFloor(TensorId t, const FloorWitness& witness, const View& view) const {
    if (witness.kind == FloorWitness::kNone || view.FirstUse(t) != witness.first_use) {
      return kLowest;
    }
    const StepFacts& facts = *view.facts;
    const SimResult& sim = *facts.sim();
    if (witness.kind == FloorWitness::kGap) {
      if (CopiedTo(t, view) != witness.copied_to) return kLowest;
    } else {
      const TensorId x = witness.read;
      const bool copy = witness.kind == FloorWitness::kReadsCopy;
      const uint32_t storage = copy ? facts.Copy(x) : facts.Original(x);
      if (storage == StepFacts::kNone) return kLowest;
      const Buffer& buffer = sim.buffers[storage];
      if (buffer.last_step == StepFacts::kNone ||
          (copy && buffer.first_step != facts.RerunStep(context_.producer[x]))) {
        return kLowest;
      }
      const int64_t start = static_cast<int64_t>(facts.Group(buffer.last_step)) + 1 -
                            static_cast<int64_t>(view.first);
      if (start != witness.lo) return kLowest;
    }
    return view.node_peak.Query(static_cast<size_t>(witness.lo), static_cast<size_t>(witness.hi)) +
           witness.plus;
  }

 private:
  // A new mark for mark_ (all reset when the count wraps).
  void NextEpoch() {
    if (++epoch_ == 0) {
      std::fill(mark_.begin(), mark_.end(), 0);
      epoch_ = 1;
    }
  }

  void Visit(NodeId n, const View& view, Chain* chain) {
    if (mark_[n] == epoch_) return;
    mark_[n] = epoch_;
    if (reached_ != nullptr) reached_->push_back(n);
    const NodeId slot = view.Slot(n);
    if (slot != kNoId) {
      chain->pulls = true;
      pulled_slots_.push_back(slot);
      // Slots only decrease towards the inputs, so the first recomputed
      // nodes reached give the latest slot; walking further only sums the
      // pulled inputs, which is capped (the bound then gives up on them).
      chain->last_slot = std::max(chain->last_slot, slot);
      if (++chain->pulled_nodes > max_pulled_) {
        chain->pulled_inputs = kUnbounded;
        return;
      }
    } else {
      chain->cost += context_.node_cost[n];
    }
    stack_.push_back(n);
  }

  const Graph& graph_;
  const SimContext& context_;
  const StaticInfo& info_;
  std::vector<uint32_t> mark_;
  uint32_t epoch_ = 0;
  size_t max_pulled_ = 0;
  std::vector<NodeId> stack_;
  std::vector<TensorId> pulled_;  // inputs of pulled nodes, not resident
  // ChainFloor's pulled inputs, as (last group an own step reads it in, -1
  // for none; bytes).
  std::vector<std::pair<int64_t, int64_t>> pulled_last_;
  std::vector<NodeId> pulled_slots_;  // groups the walk's re-run nodes are re-run in now
  std::vector<NodeId>* reached_ = nullptr;  // Reach's output
  std::vector<uint8_t> passable_;  // per tensor: recomputable and not saved (SetPlan)
  // ChainFloor's: the groups moved nodes leave, and (old group, bytes) of
  // their copies.
  std::vector<NodeId> slots_;
  std::vector<std::pair<NodeId, int64_t>> moved_;
};

// Finds the best drop in one region, from bounds and region simulations.
class RegionSearch {
 public:
  RegionSearch(const SimContext& context, const StaticInfo& info, const GreedyOptions& options,
               IncrementalStats* stats)
      : context_(context), info_(info), options_(options), walker_(context, info),
        stats_(*stats), facts_(context), scorer_(context, "incremental", &facts_),
        tried_at_(context.graph.tensors.size(), UINT32_MAX) {}

  // The best drop of a candidate of region `r`; its trial in *best_trial,
  // which is left as it is when there is none.
  DropChoice Best(const RegionalMemory& memory, size_t r, SaveSet& keep,
                  RegionalMemory::Trial* best_trial) {
    const RegionalMemory::Part& region = memory.part(r);
    const int64_t peak = memory.peak();
    const uint32_t search = searches_++;
    ++stats_.searches;
    // The region's simulation is the patch of the one the facts hold when
    // the drop applied last was this region's, patched, and nothing was
    // filled since.
    SimPrefix same;
    const bool patched = applied_.region == r && applied_.fills == facts_.fills();
    if (patched) same = applied_.prefix;
    // The view's node peaks move as the patch says where they are those of
    // the simulation patched (built last, for this region).
    const bool moved = patched && view_region_ == r && region.zero_offset;
    applied_.region = patched_.region = SIZE_MAX;
    applied_.tensor = patched_.tensor = kNoId;
    BuildView(keep, region, peak, same, moved ? &applied_.moved : nullptr, &facts_, &view_);
    view_region_ = r;
    if (options_.verify && (same.steps > 0 || same.buffers > 0)) VerifyFacts(region, keep);
    if (options_.verify && moved) VerifyNodePeaks(region);
    if (options_.verify) {
      NodeId node = kNoId;
      if (OwnMax(region.sim.full(), region, region.range.first, nullptr, &node) !=
              view_.max_own_total ||
          node != view_.max_own_node) {
        throw std::logic_error("incremental: the simulation's highest own step is not its own");
      }
    }
    scorer_.Forget(&view_.node_peak, r);
    const int64_t outside_region = memory.Outside(r);
    const bool lazy = LazyKeys(memory);
    if (!lazy) Bounds(region, keep, outside_region);
    DropChoice best;
    bool best_fast = false;  // scored by DropDelta: *best_trial not filled
    FastScore score, best_score;
    // A bound of `tier` that came first and may beat `best`: its drop is
    // scored into `best`, or, when its walk gave up, its tightened bound is
    // returned to go back in. Nothing for a drop scored before this search.
    auto take = [&](const Bound& bound, int tier) -> std::optional<Bound> {
      const TensorId t = bound.tensor;
      if (tried_at_[t] == search) return std::nullopt;
      Bound first = bound;
      if (tier == 0 && !first.floored && options_.chain_floors) {
        // Bounds are floored once they come first (most never do), loose
        // ones too (the floor needs no walk), and one the floor lowers goes
        // back in.
        first = Floored(region, first);
        ++stats_.floored;
        if (first.freed <= 0) return std::nullopt;
        if (first.freed != bound.freed) return first;
      }
      if (first.loose) return Tighten(region, outside_region, first, tier);
      tried_at_[t] = search;
      // Scored without simulating where DropDelta handles the drop, the
      // first one too, and the chosen drop's trial is then its patch.
      // (Simulating the first, most often the one chosen, cost 3% to 6%
      // more on a traced GPT-2 and a 96-layer transformer.)
      bool fast = false;
      DropChoice choice = ScoreFast(memory, r, keep, t, best, &score, &fast);
      if (!fast) choice = TryDrop(memory, r, keep, t, &trial_);
      spdlog::trace("incremental: try '{}': bound tier {} score {} freed {}; got tier {} score {} freed {}",
                    context_.graph.tensors[t].name, tier, bound.score, bound.freed, choice.tier,
                    choice.score, choice.freed);
      if (choice.tensor != kNoId && choice.BetterThan(best)) {
        best = choice;
        best_fast = fast;
        if (fast) {
          best_score = score;
        } else {
          std::swap(*best_trial, trial_);
        }
      }
      return std::nullopt;
    };
    auto after = [](const Bound& a, const Bound& b) { return BoundBefore(b, a); };
    // Bounds are taken best first; a loose one goes back in tightened, so
    // candidates are scored in the order of tight bounds. Until a drop is
    // scored or a loose bound tightened, the best is found by a scan; then
    // only the bounds that may beat it stay, as a heap: most searches score
    // one drop, and a heap of every bound cost more than the rest of the choice.
    auto try_bounds = [&](std::vector<Bound>& bounds, int tier) {
      bool heap = false;
      for (size_t size = bounds.size(); size > 0;) {
        if (!heap && best.tensor != kNoId) {
          auto beaten = std::partition(bounds.begin(), bounds.begin() + size,
                                       [&](const Bound& b) { return MayBeat(b, tier, best); });
          size = static_cast<size_t>(beaten - bounds.begin());
          std::make_heap(bounds.begin(), bounds.begin() + size, after);
          heap = true;
          continue;
        }
        if (heap) {
          std::pop_heap(bounds.begin(), bounds.begin() + size, after);
        } else {
          auto first = std::min_element(bounds.begin(), bounds.begin() + size, BoundBefore);
          std::iter_swap(first, bounds.begin() + size - 1);
        }
        const Bound bound = bounds[--size];
        if (best.tensor != kNoId && !MayBeat(bound, tier, best)) break;
        if (const std::optional<Bound> tight = take(bound, tier)) {
          bounds[size++] = *tight;
          if (heap) {
            std::push_heap(bounds.begin(), bounds.begin() + size, after);
          } else {
            // Loose bounds tend to come in runs (drops that pull re-run
            // nodes): a scan for each would cost bounds x loose ones. The
            // heap pops them in the same order, as bounds are ordered
            // totally (BoundBefore breaks ties by tensor id).
            std::make_heap(bounds.begin(), bounds.begin() + size, after);
            heap = true;
          }
        }
      }
    };
    if (!options_.prune) {
      // Every saved candidate simulated, in id order: what the bounds save.
      for (TensorId t : region.candidates) {
        if (!keep[t] || context_.pinned[t]) continue;  // pinned: never dropped
        DropChoice choice = TryDrop(memory, r, keep, t, &trial_);
        if (choice.tensor != kNoId && choice.BetterThan(best)) {
          best = choice;
          std::swap(*best_trial, trial_);
        }
      }
      return best;
    }
    // With lazy keys, tier-0 bounds are taken from the keys first; where no
    // drop of tier 0 comes of them, every candidate is bounded as without.
    bool decided = false;
    if (lazy) {
      PrepareKeys(region, keep);
      decided = LazyTier0(region, keep, outside_region, best, take);
      if (!decided) Bounds(region, keep, outside_region);
    }
    if (!decided) {
      try_bounds(tier0_, 0);
      // When nothing lowers the peak, every tier-0 bound was simulated and
      // `best` already holds the best tier-1 drop among them.
      if (best.tensor == kNoId || best.tier != 0) {
        Tier1Bounds(region, outside_region);
        try_bounds(tier1_, 1);
      }
    }
    deferred_ = {};
    if (best.tensor != kNoId && best_fast && patch_in_place_) {
      // Patched in place when applied (ApplyChosen), *best_trial not filled.
      deferred_ = {r, best.tensor, best_score};
    } else if (best.tensor != kNoId && best_fast) {
      // The caller applies the trial: from DropDelta's patch, or simulate
      // the drop chosen, once. Equal figures make an equal choice (a fast
      // score is of tier 0).
      if (scorer_.Apply(memory, r, keep, best.tensor, best_score, options_.verify, best_trial,
                        &verify_trial_)) {
        NotePatch(r, best.tensor);
        stats_.simulations += options_.verify;
      } else {
        scorer_.Confirm(memory, r, keep, best.tensor, best_score, best_trial);
        ++stats_.simulations;
      }
    }
    if (options_.verify) Verify(memory, r, keep, search, best);
    spdlog::trace("incremental: region [{}, {}): {} tier-0 bounds, {} tier-1 bounds, best tier {}",
                  region.range.first, region.range.end, tier0_.size(), tier1_.size(), best.tier);
    return best;
  }

  // Searches from now on leave the drop they choose, where DropDelta
  // scored it, to be patched in place when applied (ApplyChosen): for a
  // step of one region, where every search's choice is applied.
  void set_patch_in_place(bool in_place) { patch_in_place_ = in_place; }

  // Applies the drop of `t` in region `r` that the last search chose, when
  // it left it to be patched in place: true when patched (`keep` then drops
  // `t`); else false with its trial in *trial, to be applied by the caller
  // (a simulation, checked against the score). Nothing for a drop the
  // search did not leave so (false, *trial as the search left it).
  bool ApplyChosen(RegionalMemory& memory, size_t r, SaveSet& keep, TensorId t,
                   RegionalMemory::Trial* trial) {
    const Deferred deferred = deferred_;
    deferred_ = {};
    if (deferred.region != r || deferred.tensor != t) return false;
    if (scorer_.ApplyInPlace(memory, r, keep, t, deferred.score, options_.verify, trial,
                             &verify_trial_)) {
      NotePatch(r, t);
      stats_.simulations += options_.verify;
      return true;
    }
    scorer_.Confirm(memory, r, keep, t, deferred.score, trial);
    ++stats_.simulations;
    return false;
  }

  // The caller applied the drop of `t` in region `r`, from the trial the
  // search that chose it filled.
  void Applied(size_t r, TensorId t) {
    if (patched_.region == r && patched_.tensor == t) std::swap(applied_, patched_);
    patched_.region = SIZE_MAX;
    patched_.tensor = kNoId;
    if (keys_ready_) pending_.push_back(t);
  }

 private:
  // Lazy keys. A search bounds every saved candidate of its region, but most
  // searches score one drop, the first bound; on one region the bounds are
  // most of a search (36% to 42% of the greedy on a 10^5-node transformer).
  // Instead each candidate has a key, no more than its tier-0 bound's score
  // in any search until the key is renewed: its walk's cost over the most
  // bytes BoundsOf can credit it (its storage's; with a pull, also the pulled
  // inputs and how far the peak is above every node's own step). Searches
  // bound candidates in key order, only while a key may beat the best drop
  // scored or come before the next bound. A walk changes only where a node
  // it reaches is re-run anew or reads a tensor dropped anew: a drop renews
  // the keys of the candidates whose walks reach a node its own walk reaches
  // or a forward reader of the tensor dropped, found forward from those
  // nodes through the tensors walks pass (Renew). A drop also moves the
  // first non-forward read of a candidate that a node of its chain reads,
  // but only earlier: the pulled inputs BoundsOf counts (those last read
  // before it or the pulled nodes' latest group) can only be fewer, and the
  // old key still holds. One region (the walks stay in it), exact costs (a
  // bound's slack is then 0), pruning on. The choice is the same: a
  // candidate never bounded has a key that cannot beat the drop chosen
  // (verify mode checks each key).
  bool LazyKeys(const RegionalMemory& memory) const {
    return options_.prune && options_.lazy_keys && context_.exact_costs && memory.size() == 1;
  }

  struct KeyEntry {
    double key;
    int64_t most;      // the most bytes the drop can free at the peak
    uint32_t index;    // in the region's candidates (in id order)
    uint32_t version;  // key_version_ when pushed; an older one is stale
    // As a bound: no real choice of the candidate is better.
    Bound Optimistic(TensorId t) const { return {t, key, most, false}; }
  };
  // The heap's order: BoundBefore's, of the entries as bounds.
  static bool KeyAfter(const KeyEntry& a, const KeyEntry& b) {
    if (a.key != b.key) return a.key > b.key;
    if (a.most != b.most) return a.most < b.most;
    return a.index > b.index;
  }

  // Renews the keys the drops applied since the last search changed, or
  // keys every candidate on the first search.
  void PrepareKeys(const RegionalMemory::Part& region, const SaveSet& keep) {
    const std::vector<TensorId>& candidates = region.candidates;
    const size_t n = candidates.size();
    const int64_t above_own =
        view_.max_own_total == kLowest ? kUnbounded : std::max<int64_t>(0, view_.peak - view_.max_own_total);
    auto renew = [&](uint32_t i) {
      if (key_dirty_[i] || key_kind_[i] == kKeyZero) return;
      dirty_.push_back(i);
      key_dirty_[i] = 1;
    };
    if (!keys_ready_) {
      keys_ready_ = true;
      walker_.SetPlan(keep, candidates);
      key_version_.assign(n, 0);
      floor_witness_.assign(n, {});
      floor_key_version_.assign(n, 0);
      key_kind_.assign(n, kKeyPlain);
      key_last_slot_.assign(n, 0);
      key_cost_.assign(n, 0);
      key_pulled_.assign(n, 0);
      key_hull_.assign(n, {0, kNoId});
      BuildReaders();
      candidate_index_.assign(context_.graph.tensors.size(), kNotCandidate);
      for (uint32_t i = 0; i < n; ++i) candidate_index_[candidates[i]] = i;
      key_dirty_.assign(n, 0);
      key_heap_.clear();
      parked_.clear();
      dirty_.clear();
      pending_.clear();
      above_own_ = above_own;
      for (uint32_t i = 0; i < n; ++i) renew(i);
    } else {
      for (TensorId u : pending_) walker_.Set(keep, u);
      for (TensorId u : pending_) Renew(u, renew);
      pending_.clear();
      if (above_own > above_own_) {
        above_own_ = above_own;
        for (uint32_t i = 0; i < n; ++i) {
          if (key_kind_[i] == kKeyPulls) renew(i);
        }
      }
    }
    for (uint32_t i : dirty_) {
      key_dirty_[i] = 0;
      const TensorId t = candidates[i];
      if (!keep[t] || context_.pinned[t]) continue;
      ++stats_.keyed;
      const ChainWalker::Chain chain = walker_.Walk(t, view_, kLongPulledWalk);
      double key = 0;
      int64_t most = kUnbounded;
      if (chain.pulled_inputs == kUnbounded) {
        // A walk that gave up: 0 is a key whatever changes.
        key_kind_[i] = kKeyZero;
      } else {
        // BoundsOf's freed0: at most own_bytes (the storage's bytes); with a
        // pull at most the peak less the highest own step, plus own_bytes
        // and the pulled inputs it counts (their last own reads are
        // plan-free; the pulled nodes' groups move only with the walk's
        // nodes).
        most = context_.bytes[context_.root[t]];
        if (chain.pulls) most = SaturatingAdd(SaturatingAdd(most, chain.pulled_inputs), above_own_);
        key = most > 0 ? std::max(0.0, chain.cost) / static_cast<double>(most)
                       : std::numeric_limits<double>::infinity();
        key_kind_[i] = chain.pulls ? kKeyPulls : kKeyPlain;
        key_last_slot_[i] = chain.pulls ? chain.last_slot : 0;
        key_cost_[i] = chain.cost;
        key_pulled_[i] = chain.pulls ? chain.pulled_inputs : 0;
        key_hull_[i] = KeyHull(t, chain);
      }
      key_heap_.push_back({key, most, i, ++key_version_[i]});
      std::push_heap(key_heap_.begin(), key_heap_.end(), KeyAfter);
    }
    dirty_.clear();
    if (key_heap_.size() + parked_.size() > 2 * n + 64) {  // stale entries: drop them
      auto stale = [&](const KeyEntry& e) {
        return e.version != key_version_[e.index] || !keep[candidates[e.index]];
      };
      key_heap_.erase(std::remove_if(key_heap_.begin(), key_heap_.end(), stale), key_heap_.end());
      std::make_heap(key_heap_.begin(), key_heap_.end(), KeyAfter);
      parked_.erase(std::remove_if(parked_.begin(), parked_.end(), stale), parked_.end());
    }
  }

  // Forward readers of every tensor walks may pass (forward-made, storage
  // not resident), once per search object.
  void BuildReaders() {
    const size_t num_tensors = context_.graph.tensors.size();
    reader_begin_.assign(num_tensors + 1, 0);
    auto each_edge = [&](auto&& visit) {
      for (NodeId z = 0; z < context_.graph.nodes.size(); ++z) {
        if (!context_.node_forward[z]) continue;
        for (uint32_t k = context_.inputs_begin[z]; k < context_.outputs_begin[z]; ++k) {
          if (info_.recomputable[context_.ids[k]]) visit(context_.ids[k], z);
        }
      }
    };
    each_edge([&](TensorId in, NodeId) { ++reader_begin_[in + 1]; });
    for (size_t t = 0; t < num_tensors; ++t) reader_begin_[t + 1] += reader_begin_[t];
    readers_.resize(reader_begin_[num_tensors]);
    std::vector<uint32_t> next(reader_begin_.begin(), reader_begin_.end() - 1);
    each_edge([&](TensorId in, NodeId z) { readers_[next[in]++] = z; });
    node_mark_.assign(context_.graph.nodes.size(), 0);
    mark_epoch_ = 0;
  }

  // Renews (`renew`, by index in the region's candidates) every candidate
  // whose walk reaches a node that the walk of `u`, dropped anew, reaches
  // (its chain re-runs or moves no other) or a forward reader of u: the
  // nodes reached forward from those through the outputs walks pass make
  // them, but for nodes that re-run a random op and those after them, which
  // no key's walk reaches.
  template <typename RenewFn>
  void Renew(TensorId u, RenewFn&& renew) {
    if (++mark_epoch_ == 0) {
      std::fill(node_mark_.begin(), node_mark_.end(), 0);
      mark_epoch_ = 1;
    }
    // u's producer is among the nodes its walk reaches, and u is passable
    // now: its forward readers come next.
    frontier_.clear();
    walker_.Reach(u, view_, &frontier_);
    for (NodeId z : frontier_) node_mark_[z] = mark_epoch_;
    while (!frontier_.empty()) {
      const NodeId x = frontier_.back();
      frontier_.pop_back();
      ++stats_.renew_visited;
      for (uint32_t k = context_.outputs_begin[x]; k < context_.inputs_begin[x + 1]; ++k) {
        const TensorId o = context_.ids[k];
        if (candidate_index_[o] != kNotCandidate) renew(candidate_index_[o]);
        if (!walker_.Passable(o)) continue;
        for (uint32_t r = reader_begin_[o]; r < reader_begin_[o + 1]; ++r) {
          const NodeId z = readers_[r];
          if (node_mark_[z] == mark_epoch_) continue;
          node_mark_[z] = mark_epoch_;
          // No key's walk reaches a node whose re-run re-runs a random op
          // (SimContext::reruns_random), nor the nodes after it: their
          // walks pass it, and only pinned candidates, never keyed, have
          // such walks. (On a transformer with dropout the residual stream
          // is such a path, to the end of the forward pass.)
          if (context_.reruns_random[z]) {
            ++stats_.renew_random_stops;
            if (options_.verify) VerifyRandomRerun(z);
            continue;
          }
          frontier_.push_back(z);
        }
      }
    }
  }

  // Verify mode: throws std::logic_error unless every candidate node `z`
  // makes is pinned (`z` re-runs a random op when re-run).
  void VerifyRandomRerun(NodeId z) const {
    for (uint32_t k = context_.outputs_begin[z]; k < context_.inputs_begin[z + 1]; ++k) {
      const TensorId o = context_.ids[k];
      if (context_.is_candidate[o] && !context_.pinned[o]) {
        throw std::logic_error("incremental: '" + context_.graph.tensors[o].name +
                               "' is made by a node that re-runs a random op, but it is not "
                               "pinned");
      }
    }
  }

  // Tier-0 bounds in key order, each given to `take` (Best's) when it comes
  // first and may beat `best` (try_bounds' rule). True when `best` is then a
  // drop of tier 0, which no candidate left unbounded can beat; false leaves
  // the search to bound every candidate.
  template <typename Take>
  bool LazyTier0(const RegionalMemory::Part& region, const SaveSet& keep, int64_t outside_region,
                 const DropChoice& best, Take&& take) {
    const std::vector<TensorId>& candidates = region.candidates;
    auto after = [](const Bound& a, const Bound& b) { return BoundBefore(b, a); };
    std::vector<Bound>& bounds = tier0_;  // a heap, best first
    bounds.clear();
    popped_.clear();
    NodeRange peak_nodes;  // PeakNodes, once a plain key needs it
    bool peak_nodes_ready = false;
    // Keys come in key order from two sources: the keys read by earlier
    // searches (parked_, in key order) and the heap of those not read since
    // they were keyed. Each key read is parked, in order, for later searches
    // (it holds as it is); the parked keys not reached follow them.
    size_t next_parked = 0;
    size_t span_bounds = 0;  // in this search
    KeyEntry last_read{};  // verify mode: keys come in key order
    bool read_any = false;
    // A bound of a key read that frees nothing or cannot beat `best`.
    auto hopeless = [&](const Bound& b) {
      return b.freed <= 0 || (best.tensor != kNoId && !MayBeat(b, 0, best));
    };
    auto parked_first = [&]() {
      return next_parked < parked_.size() &&
             (key_heap_.empty() || !KeyAfter(parked_[next_parked], key_heap_.front()));
    };
    for (;;) {
      while (next_parked < parked_.size() || !key_heap_.empty()) {
        const bool from_parked = parked_first();
        const KeyEntry top = from_parked ? parked_[next_parked] : key_heap_.front();
        const TensorId t = candidates[top.index];
        const bool stale = top.version != key_version_[top.index] || !keep[t] || context_.pinned[t];
        if (!stale) {
          const Bound optimistic = top.Optimistic(t);
          if (best.tensor != kNoId && !MayBeat(optimistic, 0, best)) break;
          if (!bounds.empty() && BoundBefore(bounds.front(), optimistic)) break;
        }
        if (options_.verify && read_any && KeyAfter(last_read, top)) {
          throw std::logic_error("incremental: the lazy key of '" +
                                 context_.graph.tensors[t].name + "' was read out of key order");
        }
        last_read = top;
        read_any = true;
        if (from_parked) {
          ++next_parked;
        } else {
          std::pop_heap(key_heap_.begin(), key_heap_.end(), KeyAfter);
          key_heap_.pop_back();
        }
        if (stale) continue;
        popped_.push_back(top);
        // A current key's walk is the one it was keyed from (its version
        // would have moved with the walk): its bound is known to free
        // nothing when the peak lies outside the nodes its drop can lower,
        // with no walk; else its span bound (SpanBound) goes in, loose, to
        // be walked and bounded only when it comes first.
        if (key_kind_[top.index] != kKeyZero) {
          if (!peak_nodes_ready) {
            peak_nodes = PeakNodes(region, outside_region);
            peak_nodes_ready = true;
          }
          // The key's hull first: most keys are passed over from it alone
          // (an empty span misses the peak too).
          const NodeRange span = MissesPeak(key_hull_[top.index], peak_nodes)
                                     ? NodeRange{}
                                     : KeySpan(top.index, t, OwnRange(t, view_.FirstUse(t)));
          if (MissesPeak(span, peak_nodes)) {
            ++stats_.missed_peak;
            stats_.missed_peak_pulls += key_kind_[top.index] == kKeyPulls;
            continue;
          }
          // A drop whose floor was at the peak in an earlier search, and is
          // again, read from the term that gave it: its bound would be
          // floored to nothing when it came first (Floored), so it goes
          // no further. (Bounds taken out of the order before they come
          // first change neither the order of the others nor `best`.)
          if (options_.chain_floors && WitnessedFloor(region, top.index, t) != kLowest) {
            ++stats_.floor_passed;
            continue;
          }
          ++stats_.span_bounds;
          // Each span bound reads the node-peak tree from its root twice;
          // past a few per search, the view's prefix and suffix maxima (a
          // pass over the region) cost less.
          if (++span_bounds == std::max<size_t>(kSpanBoundsBeforeEnds,
                                                view_.node_peak.size() / kNodesPerSpanBound)) {
            PrepareEnds(&view_);
          }
          const Bound quick = SpanBound(region, outside_region, top, t, span);
          if (hopeless(quick)) {
            ++stats_.span_passed;
            continue;
          }
          // Then the bound of the key's walk as it was (KeyChain): exact
          // without a pull, else loose, to be walked when it comes first.
          const Bound keyed = KeyBound(region, outside_region, top.index, t);
          if (hopeless(keyed)) {
            ++stats_.key_passed;
            continue;
          }
          bounds.push_back(keyed);
          std::push_heap(bounds.begin(), bounds.end(), after);
          continue;
        }
        ChainWalker::Chain chain;
        const Bound bound0 = ShortBound(region, outside_region, t, &chain);
        if (bound0.freed > 0) {
          bounds.push_back(bound0);
          std::push_heap(bounds.begin(), bounds.end(), after);
        }
      }
      if (bounds.empty()) break;
      std::pop_heap(bounds.begin(), bounds.end(), after);
      const Bound bound = bounds.back();
      bounds.pop_back();
      // A key left cannot beat `best` either: it cannot, or comes after.
      if (best.tensor != kNoId && !MayBeat(bound, 0, best)) break;
      if (const std::optional<Bound> tight = take(bound, 0)) {
        bounds.push_back(*tight);
        std::push_heap(bounds.begin(), bounds.end(), after);
      }
    }
    popped_.insert(popped_.end(), parked_.begin() + next_parked, parked_.end());
    parked_.swap(popped_);
    return best.tensor != kNoId && best.tier == 0;
  }

  // Verify mode: throws std::logic_error unless the facts, filled reading
  // only what the last patch changed, equal a whole fill's.
  void VerifyFacts(const RegionalMemory::Part& region, const SaveSet& keep) {
    if (facts_.sim() != &region.sim.full() || facts_.first() != region.range.first ||
        facts_.end() != region.range.end || facts_.saved_plan() != &keep) {
      throw std::logic_error("incremental: the step facts are not of the region's simulation");
    }
    const std::string difference = DifferenceFromWholeFill(facts_);
    if (!difference.empty()) {
      throw std::logic_error("incremental: the step facts filled after a patch differ from a "
                             "whole fill in " + difference);
    }
  }

  // Verify mode: throws std::logic_error unless the view's node peaks, moved
  // as the last patch said, are the simulation's.
  void VerifyNodePeaks(const RegionalMemory::Part& region) const {
    const std::string mismatch = DropDelta::GroupChanges::Mismatch(
        view_.node_peak, region.sim.full().node_peak, context_.graph, region.range.first);
    if (!mismatch.empty()) throw std::logic_error("incremental: " + mismatch);
  }

  // Simulates dropping saved candidate `t` of region `r` into *trial and
  // scores it as the reference does.
  DropChoice TryDrop(const RegionalMemory& memory, size_t r, SaveSet& keep, TensorId t,
                     RegionalMemory::Trial* trial) {
    const RegionalMemory::Part& region = memory.part(r);
    keep[t] = 0;
    memory.Try(r, keep, trial);
    keep[t] = 1;
    ++stats_.simulations;
    RegionDrop drop;
    drop.peak = memory.peak();
    drop.trial_peak = trial->peak;
    drop.added_cost = trial->added_cost;
    drop.node_peak = &region.sim.figures().node_peak;
    drop.trial_node_peak = &trial->sim.figures().node_peak;
    drop.offset = &region.offset;
    return ScoreDrop(t, drop);
  }

  // Dropping `t` loses to `best`, a drop of tier 0 (it lowers the step's
  // peak, `peak`), once the step's peak after it (at least the other
  // regions' highest, `outside`, and the region's highest node peak) is seen
  // to be at least `peak` (tier 1 at best), or to free too few bytes: it
  // frees at most `peak` less that, so its score (added cost per byte
  // freed, ScoreDrop's division) is at least the cost over those bytes. A
  // higher score loses; an equal one loses on fewer bytes freed, or equal
  // bytes and a higher id (DropChoice::BetterThan).
  class BeatenBy final : public DropDelta::Cutoff {
   public:
    BeatenBy(TensorId t, const DropChoice& best, int64_t peak, int64_t outside)
        : t_(t), best_(best), peak_(peak), outside_(outside) {}
    bool Beaten(int64_t region_max_at_least, double added_cost) const override {
      const int64_t after = std::max(outside_, region_max_at_least);
      if (after >= peak_) return true;
      const int64_t most = peak_ - after;
      const double least = std::max(0.0, added_cost) / static_cast<double>(most);
      if (least != best_.score) return least > best_.score;
      return most < best_.freed || (most == best_.freed && t_ > best_.tensor);
    }

   private:
    TensorId t_;
    DropChoice best_;
    int64_t peak_, outside_;
  };

  // Verify mode, for a score cut short against `best`: simulates the drop
  // and throws std::logic_error unless its region reaches the value cut at,
  // it adds the cost scored, and it does not beat `best`.
  void VerifyCut(const RegionalMemory& memory, size_t r, SaveSet& keep, TensorId t,
                 const FastScore& score, const DropChoice& best) {
    const DropChoice choice = TryDrop(memory, r, keep, t, &verify_trial_);
    std::string wrong;
    if (verify_trial_.region_max < score.region_max) {
      wrong = "its region reaches " + std::to_string(verify_trial_.region_max) + ", not " +
              std::to_string(score.region_max);
    } else if (verify_trial_.added_cost != score.added_cost) {
      wrong = "it adds cost " + std::to_string(verify_trial_.added_cost) + ", not " +
              std::to_string(score.added_cost);
    } else if (choice.tensor != kNoId && choice.BetterThan(best)) {
      wrong = "it beats the best drop '" + context_.graph.tensors[best.tensor].name + "'";
    }
    if (!wrong.empty()) {
      throw std::logic_error("incremental: the score of dropping '" +
                             context_.graph.tensors[t].name + "' was cut short, but " + wrong);
    }
  }

  // Scores dropping saved candidate `t` of region `r` from the region's
  // current simulation (FastDropScorer, its figures in *score), without
  // simulating; *fast false when DropDelta does not handle the drop, or it
  // leaves the peak where it is (tier 1 counts node peaks: simulated) while
  // `best`, the best drop of the search so far, is not of tier 0. Pruning
  // off, never.
  DropChoice ScoreFast(const RegionalMemory& memory, size_t r, SaveSet& keep, TensorId t,
                       const DropChoice& best, FastScore* score, bool* fast) {
    *fast = false;
    const int64_t peak = memory.peak();
    // Once a drop of tier 0 is the best, a score may stop where the drop
    // is seen to lose to it (BeatenBy).
    const bool tier0 = best.tensor != kNoId && best.tier == 0;
    const BeatenBy beaten(t, best, peak, memory.Outside(r));
    if (!options_.prune || !scorer_.Score(memory, r, keep, t, score, tier0 ? &beaten : nullptr)) {
      return {};
    }
    if (score->cut) {
      ++stats_.fast_scores;
      ++stats_.cut_scores;
      // Verify mode: the drop's simulation reaches the value the score was
      // cut at, adds the cost scored, and does not beat `best`.
      if (options_.verify) VerifyCut(memory, r, keep, t, *score, best);
      *fast = true;
      return {};
    }
    const bool leaves_peak = score->peak == peak;
    if (leaves_peak && !tier0) return {};
    ++stats_.fast_scores;
    if (options_.verify) {
      scorer_.Confirm(memory, r, keep, t, *score, &verify_trial_);
      ++stats_.simulations;
    }
    *fast = true;
    // The drop leaves the peak: of tier 1 at best, it cannot beat `best`,
    // and which tier-1 or no-progress choice it is does not matter.
    if (leaves_peak) return {};
    const RegionalMemory::Part& region = memory.part(r);
    RegionDrop drop;
    drop.peak = peak;
    drop.trial_peak = score->peak;
    drop.added_cost = score->added_cost;
    drop.node_peak = drop.trial_node_peak = &region.sim.figures().node_peak;
    drop.offset = &region.offset;
    return ScoreDrop(t, drop);
  }

  // Verify mode: simulates every saved candidate of region `r` that search
  // `search` did not, and throws std::logic_error unless its bounds (from a
  // long walk) held and it does not beat `best`.
  void Verify(const RegionalMemory& memory, size_t r, SaveSet& keep, uint32_t search,
              const DropChoice& best) {
    const RegionalMemory::Part& region = memory.part(r);
    PrepareTier1(region, &view_);
    const int64_t outside_region = memory.Outside(r);
    const double slack = context_.exact_costs ? 0.0 : 1e-9;
    const NodeRange peak_nodes = PeakNodes(region, outside_region);
    // Each candidate's key: its one entry of the current version (in the
    // heap, or parked by a search that read it).
    std::vector<const KeyEntry*> key(region.candidates.size(), nullptr);
    const bool lazy = keys_ready_ && LazyKeys(memory);
    if (lazy) {
      for (const std::vector<KeyEntry>* entries : {&key_heap_, &parked_}) {
        for (const KeyEntry& entry : *entries) {
          if (entry.version == key_version_[entry.index]) key[entry.index] = &entry;
        }
      }
    }
    for (uint32_t i = 0; i < region.candidates.size(); ++i) {
      const TensorId t = region.candidates[i];
      if (!keep[t] || context_.pinned[t]) continue;  // pinned: never dropped
      Bound bounds[2];
      const ChainWalker::Chain chain = walker_.Walk(t, view_, kLongPulledWalk);
      BoundsOf(region, t, chain, outside_region, &bounds[0], &bounds[1]);
      // A lazy key is no better than the tier-0 bound (and so than the drop).
      if (lazy && key[i] == nullptr) {
        throw std::logic_error("incremental: '" + context_.graph.tensors[t].name +
                               "' has no lazy key");
      }
      if (lazy && bounds[0].freed > 0 &&
          (bounds[0].score < key[i]->key || bounds[0].freed > key[i]->most)) {
        throw std::logic_error("incremental: the lazy key of '" + context_.graph.tensors[t].name +
                               "' (" + std::to_string(key[i]->key) + ", " +
                               std::to_string(key[i]->most) + " bytes) beats its bound (" +
                               std::to_string(bounds[0].score) + ", " +
                               std::to_string(bounds[0].freed) + " bytes)");
      }
      // A key passed over as missing the peak (LazyTier0) has a walk as
      // keyed, and its bound frees nothing.
      if (lazy && key_kind_[i] != kKeyZero) {
        const bool walk_as_keyed =
            key_kind_[i] == kKeyPlain ? !chain.pulls
                                      : chain.pulls && chain.last_slot <= key_last_slot_[i];
        if (!walk_as_keyed) {
          throw std::logic_error("incremental: the walk of '" + context_.graph.tensors[t].name +
                                 "' changed since its lazy key");
        }
        if (chain.cost != key_cost_[i]) {
          throw std::logic_error("incremental: the chain cost of '" +
                                 context_.graph.tensors[t].name + "' changed since its lazy key");
        }
        const NodeRange span = KeySpan(i, t, OwnRange(t, view_.FirstUse(t)));
        const NodeRange& hull = key_hull_[i];
        if (!span.empty() && (span.lo < hull.lo || span.hi > hull.hi)) {
          throw std::logic_error("incremental: the span of '" + context_.graph.tensors[t].name +
                                 "' left its key's hull");
        }
        if (MissesPeak(span, peak_nodes) && bounds[0].freed > 0) {
          throw std::logic_error("incremental: '" + context_.graph.tensors[t].name +
                                 "' is passed over as missing the peak, but its bound frees " +
                                 std::to_string(bounds[0].freed) + " bytes");
        }
        // Bounds read without the walk are no better than the walk's: one
        // that frees fewer bytes or scores higher than a bound that frees
        // some would pass the drop over wrongly.
        auto tighter = [&](const Bound& b) {
          return bounds[0].freed > 0 && (b.freed < bounds[0].freed || b.score > bounds[0].score);
        };
        auto show = [](const Bound& b) {
          return "(" + std::to_string(b.score) + ", " + std::to_string(b.freed) + " bytes)";
        };
        const Bound quick = SpanBound(region, outside_region, *key[i], t, span);
        if (tighter(quick)) {
          throw std::logic_error("incremental: the span bound of '" +
                                 context_.graph.tensors[t].name + "' " + show(quick) +
                                 " beats its bound " + show(bounds[0]));
        }
        // The bound of the key's walk as keyed, and the same as the walk's
        // where the walk does not pull.
        const Bound keyed = KeyBound(region, outside_region, i, t);
        const bool plain = key_kind_[i] == kKeyPlain;
        if (tighter(keyed) ||
            (plain && (keyed.freed != bounds[0].freed || keyed.score != bounds[0].score))) {
          throw std::logic_error("incremental: the bound of the lazy key's walk of '" +
                                 context_.graph.tensors[t].name + "' " + show(keyed) +
                                 " is not at most the bound of its walk " + show(bounds[0]));
        }
      }
      if (tried_at_[t] == search) continue;
      const DropChoice real = TryDrop(memory, r, keep, t, &verify_trial_);
      std::string broken;
      if (real.tensor != kNoId && real.BetterThan(best)) broken = "beats the drop chosen";
      if (real.tensor != kNoId && real.tier <= 1) {
        // Tier 0 against the bound under its chain's floor, which holds the
        // drop to no more than the bound alone (the keys, spans and hulls
        // above are checked against the bound alone, as they promise).
        const Bound bound = real.tier == 0 ? Floored(region, bounds[0]) : bounds[1];
        if (real.freed > bound.freed) broken = "frees more than its bound";
        if (real.score < bound.score * (1 - slack)) broken = "scores below its bound";
      }
      if (!broken.empty()) {
        throw std::logic_error("incremental: the drop of '" + context_.graph.tensors[t].name +
                               "' was not simulated but " + broken + " (tier " +
                               std::to_string(real.tier) + ", score " +
                               std::to_string(real.score) + ", freed " +
                               std::to_string(real.freed) + ")");
      }
    }
  }

  // Bounds every saved candidate of the region into tier0_ and tier1_, from
  // short walks: a bound whose walk gave up is tightened only when reached.
  // Tier-1 bounds come later (Tier1Bounds), from the same walks.
  void Bounds(const RegionalMemory::Part& region, const SaveSet& keep, int64_t outside_region) {
    PrepareEnds(&view_);
    tier0_.clear();
    tier1_.clear();
    walks_.clear();
    walker_.SetPlan(keep, region.candidates);
    for (TensorId t : region.candidates) {
      if (!keep[t] || context_.pinned[t]) continue;  // pinned: never dropped
      ChainWalker::Chain chain;
      const Bound bound0 = ShortBound(region, outside_region, t, &chain);
      walks_.push_back({t, chain});
      if (bound0.freed > 0) tier0_.push_back(bound0);
    }
  }

  // The tier-0 bound of dropping `t` from a short walk (*chain), loose when
  // the walk gave up on pulled inputs.
  Bound ShortBound(const RegionalMemory::Part& region, int64_t outside_region, TensorId t,
                   ChainWalker::Chain* chain) {
    ++stats_.bounded;
    *chain = walker_.Walk(t, view_, kShortPulledWalk);
    Bound bound0;
    BoundsOf(region, t, *chain, outside_region, &bound0, nullptr);
    bound0.loose = chain->pulled_inputs == kUnbounded;
    return bound0;
  }

  // Tier-1 bounds of the candidates Bounds walked, into tier1_.
  void Tier1Bounds(const RegionalMemory::Part& region, int64_t outside_region) {
    PrepareTier1(region, &view_);
    tier1_.clear();
    for (const auto& [t, chain] : walks_) {
      Bound bound0, bound1;
      BoundsOf(region, t, chain, outside_region, &bound0, &bound1);
      bound1.loose = chain.pulled_inputs == kUnbounded;
      if (bound1.freed > 0) tier1_.push_back(bound1);
    }
  }

  // Tier-0 bound `bound` held under the floor its chain gives (ChainFloor).
  // With lazy keys, a floor at the peak keeps the term that gave it
  // (FloorWitness) while the candidate's key is current: the same drops
  // come first search after search and are floored at the peak again (9 in
  // 10 floors on a 93,440-node random DAG at 50%), and the term, read on
  // the new view (WitnessFloor), most often says so without the walk.
  Bound Floored(const RegionalMemory::Part& region, Bound bound) {
    bound.floored = true;
    if (bound.freed <= 0) return bound;
    const TensorId t = bound.tensor;
    const uint32_t i = keys_ready_ ? candidate_index_[t] : kNotCandidate;
    if (i != kNotCandidate) {
      const int64_t known = WitnessedFloor(region, i, t);
      if (known >= view_.peak) {
        ++stats_.floors_witnessed;
        bound.CapFreed(view_.peak - known);
        return bound;
      }
    }
    FloorWitness witness;
    const int64_t floor = walker_.ChainFloor(t, view_, region.offset.data(), &witness);
    if (i != kNotCandidate) {
      floor_witness_[i] = floor >= view_.peak ? witness : FloorWitness{};
      floor_key_version_[i] = key_version_[i];
    }
    if (floor != kLowest) bound.CapFreed(view_.peak - floor);
    return bound;
  }

  // The floor at the peak that candidate `t` (index `i`) had in an earlier
  // search, read again from its term (WitnessFloor) where its key is as it
  // was then; kLowest where not known or no longer at the peak.
  int64_t WitnessedFloor(const RegionalMemory::Part& region, uint32_t i, TensorId t) {
    if (floor_key_version_[i] != key_version_[i]) return kLowest;
    const int64_t known = walker_.WitnessFloor(t, floor_witness_[i], view_);
    if (known < view_.peak) return kLowest;
    if (options_.verify) {
      const int64_t floor = walker_.ChainFloor(t, view_, region.offset.data());
      if (floor < view_.peak) {
        throw std::logic_error("incremental: the floor of '" + context_.graph.tensors[t].name +
                               "' read again from its term is " + std::to_string(known) +
                               ", at the peak " + std::to_string(view_.peak) +
                               ", but its chain's floor is " + std::to_string(floor));
      }
    }
    return known;
  }

  // Loose bound `bound` of `tier` tightened by a long walk; a floored one
  // keeps the cap its chain's floor put on it (Floored: no more bytes freed
  // than the peak less the floor). Nothing when it then frees nothing.
  std::optional<Bound> Tighten(const RegionalMemory::Part& region, int64_t outside_region,
                               const Bound& bound, int tier) {
    ++stats_.bounded;
    const ChainWalker::Chain chain = walker_.Walk(bound.tensor, view_, kLongPulledWalk);
    Bound bound0, bound1;
    BoundsOf(region, bound.tensor, chain, outside_region, &bound0,
             tier == 0 ? nullptr : &bound1);
    Bound tight = tier == 0 ? bound0 : bound1;
    if (bound.floored) tight.CapFreed(bound.freed);
    tight.floored = bound.floored;
    if (tight.freed <= 0) return std::nullopt;
    return tight;
  }

  // Where the original storage of `t` can end earlier once `t` is dropped
  // (nodes, inclusive): after its forward reads and the reads of the other
  // saved tensors sharing it, and (the copy taking over) before the first
  // non-forward use of `t` (`first_use`).
  NodeRange OwnRange(TensorId t, NodeId first_use) const {
    const StepFacts& facts = *view_.facts;
    const SimResult& sim = *facts.sim();
    const TensorId root = context_.root[t];
    const uint32_t original = facts.Original(root);
    const NodeId last_node = original == StepFacts::kNone
                                 ? 0
                                 : facts.Group(sim.buffers[original].last_step);
    NodeRange own{facts.LastForwardRead(root), std::min(last_node, first_use)};
    const NodeId other = facts.GroupOf(facts.OtherSavedUse(t));
    if (other != kNoId) own.lo = std::max<int64_t>(own.lo, other);
    return own;
  }

  // The nodes whose peaks dropping candidate `t` (index `i`, its key
  // current and not kKeyZero) may lower, as BoundsOf counts them, from
  // nodes [lo, hi]: its own range `own` (OwnRange) and, where its walk
  // pulls, the pulled range, from t's first use to the latest group a
  // pulled node is re-run in. The key's walk gave that group (a long walk,
  // which reaches as late a group as the short one, ChainWalker::Visit);
  // t's first use is the current one. Empty when the range is not known.
  NodeRange KeySpan(uint32_t i, TensorId t, const NodeRange& own) const {
    if (key_kind_[i] == kKeyPlain) return own;
    const NodeId first_use = view_.FirstUse(t);
    if (first_use == kNoId) return {};
    NodeRange span{first_use, std::max(first_use, key_last_slot_[i])};
    if (!own.empty()) span = {std::min(span.lo, own.lo), std::max(span.hi, own.hi)};
    return span;
  }
  // Nodes holding KeySpan while the key (keyed from `chain`, t's walk now)
  // is current, read from the key alone: its own range starts after the
  // root's last forward read, which no plan moves, and its pulled range at
  // t's first use, a non-forward node; both end by t's first use, which a
  // drop only brings earlier, or the latest group a pulled node is re-run in.
  NodeRange KeyHull(TensorId t, const ChainWalker::Chain& chain) const {
    const NodeId first_use = view_.FirstUse(t);
    const int64_t hi =
        first_use == kNoId ? kNoId : std::max(first_use, chain.pulls ? chain.last_slot : 0);
    return {std::min<int64_t>(view_.facts->LastForwardRead(context_.root[t]),
                              context_.first_non_forward),
            hi};
  }
  // A bound of dropping candidate `t` (its key `entry` current and not
  // kKeyZero) without its walk: the key's chain cost (its walk's, as when
  // keyed) over no more bytes than the key's and than the peak less the
  // highest node peak outside `span` (KeySpan, which holds the nodes whose
  // peaks BoundsOf lets the drop lower). Loose: a long walk tightens it
  // (Tighten) when it comes first.
  Bound SpanBound(const RegionalMemory::Part& region, int64_t outside_region,
                  const KeyEntry& entry, TensorId t, const NodeRange& span) const {
    const RangeAddMax& peaks = view_.node_peak;
    const int64_t first = region.range.first;
    const size_t lo = static_cast<size_t>(std::max<int64_t>(span.lo - first, 0));
    const size_t hi = static_cast<size_t>(std::clamp<int64_t>(span.hi + 1 - first, 0,
                                                             static_cast<int64_t>(peaks.size())));
    const int64_t outside =
        view_.ends_ready
            ? std::max({outside_region, view_.prefix_max[lo], view_.suffix_max[hi]})
            : std::max({outside_region, peaks.PrefixMax(lo), peaks.SuffixMax(hi)});
    const int64_t freed = std::min(entry.most, view_.peak - outside);
    const double cost = std::max(0.0, key_cost_[entry.index]);
    Bound bound{t, freed > 0 ? cost / static_cast<double>(freed) : 0.0, freed};
    bound.loose = true;
    return bound;
  }
  // The walk of candidate `t` (index `i`, its key current and not
  // kKeyZero) as far as its key knows it: the key's chain cost and whether
  // it pulls, as the walk now (the key would have been renewed with it); the
  // latest group a pulled node is re-run in and the pulled inputs as keyed,
  // which no drop raises (a pulled node is re-run earlier at most, and
  // fewer pulled inputs are last read before the pulled range's end, which
  // only comes earlier: LazyKeys). The walk itself would give these or less.
  ChainWalker::Chain KeyChain(uint32_t i) const {
    ChainWalker::Chain chain;
    chain.cost = key_cost_[i];
    chain.pulls = key_kind_[i] == kKeyPulls;
    if (chain.pulls) {
      chain.last_slot = key_last_slot_[i];
      chain.pulled_inputs = key_pulled_[i];
    }
    return chain;
  }
  // The tier-0 bound of dropping `t` (index `i`, its key current and not
  // kKeyZero) from KeyChain, without a walk: BoundsOf frees no fewer bytes
  // for a later pulled group or more pulled inputs, so it is no more than
  // the walk's bound. Exact for a key without a pull; loose with one.
  Bound KeyBound(const RegionalMemory::Part& region, int64_t outside_region, uint32_t i,
                 TensorId t) {
    Bound bound;
    BoundsOf(region, t, KeyChain(i), outside_region, &bound, nullptr);
    bound.loose = key_kind_[i] == kKeyPulls;
    return bound;
  }
  // For a drop that can lower node peaks over `span` at most (KeySpan):
  // true when its tier-0 bound frees nothing, as BoundsOf would find it (a
  // node peak outside that range, or another region, is at the peak),
  // without the walk. `peak_nodes`: the first and last node at the peak
  // (PeakNodes).
  static bool MissesPeak(const NodeRange& span, const NodeRange& peak_nodes) {
    return span.empty() || peak_nodes.empty() || peak_nodes.lo < span.lo ||
           peak_nodes.hi > span.hi;
  }
  // The first and last node of `region` whose peak is the step's (empty
  // when another region holds the peak): a node peak outside a range is at
  // the peak when one of these is.
  NodeRange PeakNodes(const RegionalMemory::Part& region, int64_t outside_region) const {
    const RangeAddMax& peaks = view_.node_peak;
    if (outside_region >= view_.peak) return {};
    const size_t lo = peaks.FirstAtLeast(view_.peak);
    if (lo == peaks.size()) return {};
    const int64_t first = region.range.first;
    return {first + static_cast<int64_t>(lo),
            first + static_cast<int64_t>(peaks.LastAtLeast(view_.peak))};
  }

  // The tier-0 and, unless `bound1` is null, tier-1 bounds of dropping `t`,
  // whose recompute walks `chain`; a bound that frees no byte has freed <= 0.
  // Tier 1 needs PrepareTier1.
  void BoundsOf(const RegionalMemory::Part& region, TensorId t, const ChainWalker::Chain& chain,
                int64_t outside_region, Bound* bound0, Bound* bound1) {
    const View& view = view_;
    const int64_t first = region.range.first;
    const int64_t end = region.range.end;
    // Max of the step's node peaks over global node ids [lo, hi).
    auto peak_max = [&](int64_t lo, int64_t hi) {
      if (lo >= hi) return kLowest;
      if (lo == first) {
        return view.ends_ready ? view.prefix_max[hi - first] : view.node_peak.PrefixMax(hi - first);
      }
      if (hi == end) {
        return view.ends_ready ? view.suffix_max[lo - first] : view.node_peak.SuffixMax(lo - first);
      }
      return view.node_peak.Query(lo - first, hi - first);
    };
    auto peaks_in = [&](int64_t lo, int64_t hi) {  // inclusive
      return static_cast<int64_t>(view.peak_prefix[hi + 1 - first] - view.peak_prefix[lo - first]);
    };
    auto gaps_in = [&](int64_t lo, int64_t hi) {  // inclusive
      const int64_t total = view.gap_prefix[hi + 1 - first];
      return total == kUnbounded ? kUnbounded : total - view.gap_prefix[lo - first];
    };
    const StepFacts& facts = *view.facts;
    const SimResult& sim = *facts.sim();
    const TensorId root = context_.root[t];
    const int64_t bytes = context_.bytes[root];
    const uint32_t first_read = facts.FirstRead(t);
    const NodeId first_use = facts.GroupOf(first_read);
    NodeRange own = OwnRange(t, first_use);
    // A pulled node moves from its slot to the first use of `t`, and its
    // inputs may then end earlier.
    NodeRange pulled;
    if (chain.pulls) pulled = {first_use, std::max(first_use, chain.last_slot)};
    if (!own.empty() && !pulled.empty() && own.lo > pulled.lo) std::swap(own, pulled);
    // Max of node peaks that cannot get lower.
    const NodeRange& a = own.empty() ? pulled : own;
    const NodeRange& b = own.empty() ? NodeRange{} : pulled;
    int64_t outside;
    int64_t peaks_inside = 0;
    int64_t gaps_inside = 0;  // how far below the peak those nodes' own steps are
    const bool tier1 = bound1 != nullptr;
    if (a.empty()) {
      outside = view.peak;
    } else if (b.empty() || b.lo > a.hi + 1) {
      outside = std::max(peak_max(first, a.lo), peak_max(a.hi + 1, b.empty() ? end : b.lo));
      if (!b.empty()) outside = std::max(outside, peak_max(b.hi + 1, end));
      if (tier1) {
        peaks_inside = peaks_in(a.lo, a.hi);
        gaps_inside = gaps_in(a.lo, a.hi);
        if (!b.empty()) {
          peaks_inside += peaks_in(b.lo, b.hi);
          gaps_inside = SaturatingAdd(gaps_inside, gaps_in(b.lo, b.hi));
        }
      }
    } else {
      const int64_t hi = std::max(a.hi, b.hi);
      outside = std::max(peak_max(first, a.lo), peak_max(hi + 1, end));
      if (tier1) {
        peaks_inside = peaks_in(a.lo, hi);
        gaps_inside = gaps_in(a.lo, hi);
      }
    }
    outside = std::max(outside, outside_region);
    // The first non-forward reader's own step keeps its bytes: the copy
    // replaces the original there, and only pulled inputs may leave.
    int64_t reader_floor = kLowest;
    if (first_read != StepFacts::kNone && !sim.steps[first_read].recompute &&
        chain.pulled_inputs != kUnbounded) {
      reader_floor = sim.total[first_read] + region.offset[first_use - first] -
                     (chain.pulls ? chain.pulled_inputs : 0);
      outside = std::max(outside, reader_floor);
    }
    const int64_t own_bytes = own.empty() && !chain.pulls ? 0 : bytes;
    // Floating-point slack: the real added cost is a difference of two sums.
    const double slack =
        context_.exact_costs ? 0.0 : 1e-9 * (region.sim.figures().recompute_cost + chain.cost);
    const double cost = std::max(0.0, chain.cost - slack);
    int64_t freed0 = view.peak - outside;
    // A node's own step stays; only storages that end earlier leave it.
    // Without a pull no recompute step leaves a group either. With one, a
    // node's peak may fall to its own step's bytes less what leaves it.
    const int64_t leaving = chain.pulls ? SaturatingAdd(own_bytes, chain.pulled_inputs)
                                        : own_bytes;
    if (!chain.pulls) {
      freed0 = std::min(freed0, own_bytes);
    } else if (view.max_own_total != kLowest) {
      freed0 = std::min(freed0, SaturatingAdd(view.peak - view.max_own_total, leaving));
      // A node before t's first use whose own step holds the peak keeps it
      // but t's storage: the chain and the pulled nodes run from that use
      // on, and the pulled inputs are read there.
      if (view.max_own_total == view.peak && first_read != StepFacts::kNone &&
          view.max_own_node < first_use && freed0 > own_bytes) {
        freed0 = own_bytes;
        ++stats_.peak_before_use;
      }
    }
    *bound0 = {t, freed0 > 0 ? cost / static_cast<double>(freed0) : 0.0, freed0};
    bound0->cost = cost;
    if (!tier1) return;
    // Per peak node, as for freed0.
    const int64_t freed1 = chain.pulls
                               ? SaturatingAdd(gaps_inside, SaturatingMul(leaving, peaks_inside))
                               : SaturatingMul(own_bytes, peaks_inside);
    *bound1 = {t, 0.0, 0};
    if (peaks_inside > 0 && freed1 > 0) *bound1 = {t, cost / static_cast<double>(freed1), freed1};
  }

  const SimContext& context_;
  const StaticInfo& info_;
  const GreedyOptions& options_;
  ChainWalker walker_;
  IncrementalStats& stats_;
  StepFacts facts_;          // the region's simulation's, filled by BuildView
  View view_;
  FastDropScorer scorer_;    // indexes the region's simulation at the first fast score
  std::vector<Bound> tier0_, tier1_;
  std::vector<std::pair<TensorId, ChainWalker::Chain>> walks_;  // Bounds' short walks
  RegionalMemory::Trial verify_trial_;
  RegionalMemory::Trial trial_;  // reused: fresh memory for every simulation is slow
  std::vector<uint32_t> tried_at_;  // per tensor: search that simulated its drop
  uint32_t searches_ = 0;
  // A drop whose trial is a patch: the region, the tensor, the facts' fills
  // when they held the simulation patched, and what the patch kept of it.
  struct Patched {
    size_t region = SIZE_MAX;
    TensorId tensor = kNoId;
    uint64_t fills = 0;
    SimPrefix prefix;
    DropDelta::GroupChanges moved;  // how the patch moved the node peaks
  };
  size_t view_region_ = SIZE_MAX;  // the region view_ was built for last
  Patched patched_;  // the last search's, until applied
  Patched applied_;  // applied since the last search
  // The drop of `t` in region `r` just patched, as patched_.
  void NotePatch(size_t r, TensorId t) {
    patched_.region = r;
    patched_.tensor = t;
    patched_.fills = facts_.fills();
    patched_.prefix = scorer_.patched_prefix();
    patched_.moved = scorer_.group_changes();
    ++stats_.patched;
  }
  // The last search's choice where it is to be patched in place.
  bool patch_in_place_ = false;
  struct Deferred {
    size_t region = SIZE_MAX;
    TensorId tensor = kNoId;
    FastScore score;
  };
  Deferred deferred_;
  // Lazy keys (LazyKeys), per candidate of the region by its index there.
  bool keys_ready_ = false;
  std::vector<KeyEntry> key_heap_;  // min-heap by key (KeyAfter)
  std::vector<uint32_t> key_version_;
  // Per candidate: the term of its last floor at the peak (none where the
  // floor was below it), and its key's version then (Floored).
  std::vector<FloorWitness> floor_witness_;
  std::vector<uint32_t> floor_key_version_;
  // What a key is from: a walk without a pull, one with (renewed too when
  // the peak rises above every own step by more than the key counted), or
  // one that gave up (key 0, which no drop changes).
  enum : uint8_t { kKeyPlain, kKeyPulls, kKeyZero };
  std::vector<uint8_t> key_kind_, key_dirty_;
  // Per candidate with a pulling key: the latest group its walk's pulled
  // nodes are re-run in (ChainWalker::Chain::last_slot), for KeySpan.
  std::vector<NodeId> key_last_slot_;
  // Per candidate: its key's chain cost (its walk's, SpanBound) and, for a
  // pulling key, the pulled inputs its walk counted (KeyChain).
  std::vector<double> key_cost_;
  std::vector<int64_t> key_pulled_;
  // Per candidate: nodes holding its span while its key is current (KeyHull).
  std::vector<NodeRange> key_hull_;
  // Forward readers by tensor (BuildReaders), and Renew's marks and stack.
  std::vector<uint32_t> reader_begin_;
  std::vector<NodeId> readers_;
  // Per tensor, its index in the region's candidates (lazy keys: one
  // region), or kNotCandidate.
  static constexpr uint32_t kNotCandidate = UINT32_MAX;
  std::vector<uint32_t> candidate_index_;
  std::vector<uint32_t> node_mark_;
  uint32_t mark_epoch_ = 0;
  std::vector<NodeId> frontier_;
  std::vector<uint32_t> dirty_;
  std::vector<KeyEntry> popped_;  // LazyTier0's keys read, in key order
  // Keys read by a search, in key order (KeyAfter), not in key_heap_.
  std::vector<KeyEntry> parked_;
  std::vector<TensorId> pending_;   // drops applied since the last search
  int64_t above_own_ = 0;           // the peak above every own step, at most, since keying
};

// The best drop of one region as last computed, valid while the region's
// plan, the step's peak and the other regions' highest node are unchanged.
struct CachedChoice {
  bool valid = false;
  uint32_t version = 0;  // of the region's plan
  int64_t peak = 0, outside = 0;
  DropChoice choice;
  uint32_t stamp = 0;  // counts the choices cached for the region
};

// The regions at the step's peak with a current cached drop, best first:
// the greedy's pick without a pass over every region. Entries are
// (cached choice, region, the cache's stamp then); one whose region has left
// the peak or cached another choice since is dropped when it comes first.
class AtPeak {
 public:
  struct Entry {
    DropChoice choice;
    size_t region;
    uint32_t stamp;
  };
  void clear() { heap_.clear(); }
  void Push(size_t r, const CachedChoice& cached) {
    heap_.push_back({cached.choice, r, cached.stamp});
    std::push_heap(heap_.begin(), heap_.end(), After);
  }
  // The best current entry (none: nullptr), the stale ones before it dropped.
  const Entry* Best(const RegionalMemory& memory, int64_t peak,
                    const std::vector<CachedChoice>& cache) {
    while (!heap_.empty()) {
      const Entry& top = heap_.front();
      if (memory.maxes()[top.region] == peak && cache[top.region].stamp == top.stamp) return &top;
      std::pop_heap(heap_.begin(), heap_.end(), After);
      heap_.pop_back();
    }
    return nullptr;
  }

 private:
  // Whether `a` comes after `b`: BetterThan, then the lower region (the
  // order a pass over the regions keeps on ties).
  static bool After(const Entry& a, const Entry& b) {
    if (b.choice.BetterThan(a.choice)) return true;
    if (a.choice.BetterThan(b.choice)) return false;
    return a.region > b.region;
  }
  std::vector<Entry> heap_;
};

// Region searches kept for the region's copies: a copy with the same plan,
// node peaks shifted by as much as the step's peak and the highest node
// outside it, has the same best drop, its tensor ids shifted.
class SharedSearches {
 public:
  explicit SharedSearches(const RegionalMemory& memory) : memory_(memory) {}

  // The search of region `r` done for a copy, translated; false when none.
  bool Find(size_t r, const SaveSet& keep, int64_t peak, int64_t outside, DropChoice* choice) {
    if (!Eligible(r)) return false;
    const uint64_t key = Key(r, keep, peak, outside);
    auto found = entries_.find(key);
    if (found == entries_.end()) return false;
    const Entry& entry = found->second;
    const RegionalMemory::Part& part = memory_.part(r);
    const RegionalMemory::Part& source = memory_.part(entry.source);
    if (source.shape.first_of_shape != part.shape.first_of_shape || entry.plan != plan_ ||
        entry.peak != peak - part.offset_shift || entry.outside != outside - part.offset_shift) {
      return false;
    }
    *choice = entry.choice;
    if (choice->tensor != kNoId) {
      choice->tensor = static_cast<TensorId>(choice->tensor + part.shape.tensor_shift -
                                             source.shape.tensor_shift);
    }
    return true;
  }

  void Store(size_t r, const SaveSet& keep, int64_t peak, int64_t outside,
             const DropChoice& choice) {
    if (!Eligible(r)) return;
    const uint64_t key = Key(r, keep, peak, outside);
    // Bounded like RegionalMemory's trials: dropped all at once past a size.
    const size_t most = std::max(kMinBytes, kBytesPerNode * memory_.context().graph.nodes.size());
    if (bytes_ > most) {
      entries_.clear();
      bytes_ = 0;
    }
    const RegionalMemory::Part& part = memory_.part(r);
    Entry& entry = entries_[key];
    bytes_ += plan_.size() + sizeof(Entry) - entry.plan.size();
    entry = {r, plan_, peak - part.offset_shift, outside - part.offset_shift, choice};
  }

 private:
  static constexpr size_t kBytesPerNode = 16;
  static constexpr size_t kMinBytes = size_t{1} << 20;
  struct Entry {
    size_t source;
    std::vector<uint8_t> plan;
    int64_t peak, outside;  // less the source's offset shift
    DropChoice choice;
  };

  bool Eligible(size_t r) const {
    const RegionalMemory::Part& part = memory_.part(r);
    return part.shape.copies > 1 && part.offsets_match;
  }

  uint64_t Key(size_t r, const SaveSet& keep, int64_t peak, int64_t outside) {
    const int64_t shift = memory_.part(r).offset_shift;
    uint64_t key = memory_.PlanKey(r, keep, &plan_);
    for (int64_t value : {peak - shift, outside - shift}) {
      key = (key ^ static_cast<uint64_t>(value)) * 0x9e3779b97f4a7c15ull;
    }
    return key;
  }

  const RegionalMemory& memory_;
  std::unordered_map<uint64_t, Entry> entries_;
  size_t bytes_ = 0;  // about, over entries_
  std::vector<uint8_t> plan_;
};

}  // namespace

GreedyResult IncrementalPlan(const Graph& graph, const SaveSet& start,
                             const GreedyOptions& options, IncrementalStats* stats) {
  return IncrementalPlan(SimContext(graph), start, options, stats);
}

GreedyResult IncrementalPlan(const SimContext& context, const SaveSet& start,
                             const GreedyOptions& options, IncrementalStats* stats) {
  const Graph& graph = context.graph;
  const auto started = std::chrono::steady_clock::now();
  IncrementalStats local_stats;
  IncrementalStats& counters = stats ? *stats : local_stats;
  SimOptions sim_options;
  sim_options.reserve_bytes = options.reserve_bytes;
  GreedyResult result;
  result.keep = start;
  RegionalMemory memory(context, result.keep, sim_options);
  counters.simulations += memory.start_simulations();
  counters.regions = memory.size();
  result.start_peak = memory.start_peak();
  const StaticInfo info = ComputeStaticInfo(context);
  RegionSearch search(context, info, options, &counters);
  // One region: every search's choice is applied, and patched in place.
  search.set_patch_in_place(memory.size() == 1);

  std::vector<CachedChoice> cache(memory.size());
  SharedSearches shared(memory);
  std::vector<uint32_t> version(memory.size(), 0);
  // The trial of the last region search that found a drop, kept so that
  // applying its choice right away needs no new simulation. A search that
  // finds none leaves it as it is.
  RegionalMemory::Trial chosen;
  size_t chosen_region = SIZE_MAX;
  TensorId chosen_tensor = kNoId;
  // Region r's cached choice made current (searched, or copied from a copy
  // of the region), where it is not; an entry for it in `at_peak`.
  AtPeak at_peak;
  // Whether region r's cached choice is of its plan now, at `peak`.
  auto current = [&](size_t r, int64_t peak) {
    const CachedChoice& cached = cache[r];
    return cached.valid && cached.version == version[r] && cached.peak == peak &&
           cached.outside == memory.Outside(r);
  };
  auto refresh = [&](size_t r, int64_t peak) {
    if (current(r, peak)) return;
    CachedChoice& cached = cache[r];
    const int64_t outside = memory.Outside(r);
    cached = {true, version[r], peak, outside, {}, cached.stamp + 1};
    if (shared.Find(r, result.keep, peak, outside, &cached.choice)) {
      ++counters.shared_searches;
    } else {
      cached.choice = search.Best(memory, r, result.keep, &chosen);
      shared.Store(r, result.keep, peak, outside, cached.choice);
      if (cached.choice.tensor != kNoId) {
        chosen_region = r;
        chosen_tensor = cached.choice.tensor;
      }
    }
    if (cached.choice.tensor != kNoId) at_peak.Push(r, cached);
  };
  // The peak `at_peak` holds the regions of (none: kLowest), and the region
  // the last drop was applied in.
  int64_t at_peak_of = kLowest;
  size_t applied = SIZE_MAX;
  while (memory.peak() > options.budget_bytes) {
    ++counters.iterations;
    const int64_t peak = memory.peak();
    // The regions at the peak, each with its cached choice made current, in
    // region order (the order of the searches, whose last found drop is
    // `chosen`). A region below the peak has no drop: the peak stays, and
    // none of its nodes is at it. While the peak stays, a choice cached at
    // it stays current but in the region the last drop changed, and, where
    // that drop left one region at the peak, in that one (its outside,
    // RegionalMemory::Outside, is then another region's highest node peak):
    // only those are looked at, not every region.
    if (peak != at_peak_of) {
      at_peak.clear();
      for (size_t r = 0; r < memory.size(); ++r) {
        if (memory.maxes()[r] == peak) refresh(r, peak);
      }
      at_peak_of = peak;
    } else {
      ++counters.quick_picks;
      size_t alone = SIZE_MAX;  // the one region at the peak
      if (memory.at_top() == 1) {
        if (memory.maxes()[applied] == peak) {
          alone = applied;
        } else {
          alone = static_cast<size_t>(
              std::find(memory.maxes().begin(), memory.maxes().end(), peak) -
              memory.maxes().begin());
        }
      }
      const size_t first = std::min(applied, alone), second = std::max(applied, alone);
      if (memory.maxes()[first] == peak) refresh(first, peak);
      if (second != first && second != SIZE_MAX && memory.maxes()[second] == peak) {
        refresh(second, peak);
      }
    }
    DropChoice best;
    size_t best_region = SIZE_MAX;
    if (const AtPeak::Entry* top = at_peak.Best(memory, peak, cache)) {
      best = top->choice;
      best_region = top->region;
    }
    if (options.verify) {
      // A pass over the regions: every one at the peak has a current
      // choice, and the best of them is the one taken.
      DropChoice passed;
      size_t passed_region = SIZE_MAX;
      for (size_t r = 0; r < memory.size(); ++r) {
        if (memory.maxes()[r] != peak) continue;
        const CachedChoice& cached = cache[r];
        if (!current(r, peak)) {
          throw std::logic_error("incremental: region " + std::to_string(r) +
                                 " is at the peak with a choice cached before its last change");
        }
        if (cached.choice.tensor != kNoId && cached.choice.BetterThan(passed)) {
          passed = cached.choice;
          passed_region = r;
        }
      }
      if (passed_region != best_region || passed.tensor != best.tensor) {
        throw std::logic_error("incremental: the regions at the peak, best first, did not give "
                               "the best region's drop");
      }
    }
    if (best.tensor == kNoId) break;
    result.drops.push_back(best.tensor);
    const bool searched = chosen_region == best_region && chosen_tensor == best.tensor;
    if (!searched || !search.ApplyChosen(memory, best_region, result.keep, best.tensor, &chosen)) {
      result.keep[best.tensor] = 0;
      if (!searched) {
        // Chosen from the cache: simulate it again.
        memory.Try(best_region, result.keep, &chosen);
        ++counters.simulations;
      }
      memory.Apply(&chosen);
    }
    search.Applied(best_region, best.tensor);
    chosen_region = SIZE_MAX;
    ++version[best_region];
    applied = best_region;
    if (spdlog::should_log(spdlog::level::debug)) {  // ShowName costs a string
      spdlog::debug("incremental: drop '{}' (peak {} -> {})",
                    ShowName(graph.tensors[best.tensor].name), peak, memory.peak());
    }
  }
  // The regions' figures are the step's (exactly: see RegionalMemory).
  result.peak = memory.peak();
  result.recompute_cost = memory.cost();
  result.fits = result.peak <= options.budget_bytes;
  counters.shared_trials = memory.shared_trials();
  spdlog::debug("incremental: {} bounds ({} floored, {} of them from an earlier floor's term), "
                "{} lazy keys ({} passed over on such a term; renewals visited {} nodes, stopped "
                "at {} that re-run a random op), {} passed over (span misses the peak), {} span "
                "bounds ({} passed over), {} scores cut short",
                counters.bounded, counters.floored, counters.floors_witnessed, counters.keyed,
                counters.floor_passed, counters.renew_visited, counters.renew_random_stops,
                counters.missed_peak,
                counters.span_bounds, counters.span_passed, counters.cut_scores);
  spdlog::info(
      "incremental: {} drops in {} regions, peak {} -> {} bytes (budget {}), {}; {} region "
      "searches ({} more copied from a copy of the region), {} simulations ({} copied), {} drops "
      "scored without simulating, {} picked looking at the changed regions only ({:.3f} s)",
      result.drops.size(), memory.size(), result.start_peak, result.peak, options.budget_bytes,
      result.fits ? "fits" : "does not fit", counters.searches, counters.shared_searches,
      counters.simulations, counters.shared_trials, counters.fast_scores, counters.quick_picks,
      SecondsSince(started));
  return result;
}

}  // namespace ckptplan
