#include "ckptplan/sim/step_facts.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace ckptplan {
namespace {

// For each input x of `node`: read(x) where a forward node made x (reads are
// asked of forward tensors only: candidates, what re-run forward nodes make
// and read), alias(x) where x is another tensor's view (it counts only as a
// view of a forward one). forward_produced first: a byte a tensor, denser
// than view_base.
template <typename Read, typename Alias>
void ForEachRead(const SimContext& context, const std::vector<TensorId>& view_base, NodeId node,
                 Read read, Alias alias) {
  const TensorId* ids = context.ids.data();
  for (uint32_t i = context.inputs_begin[node]; i < context.outputs_begin[node]; ++i) {
    const TensorId x = ids[i];
    if (context.forward_produced[x]) {
      read(x);
    } else if (view_base[x] != x) {
      alias(x);
    }
  }
}

}  // namespace

std::vector<NodeId> LastForwardReads(const SimContext& context) {
  const size_t num_tensors = context.graph.tensors.size();
  std::vector<NodeId> last(num_tensors, 0);
  for (TensorId t = 0; t < num_tensors; ++t) {
    if (!context.forward_produced[t]) continue;
    NodeId& at = last[context.root[t]];
    at = std::max(at, context.producer[t]);
  }
  for (NodeId n = 0; n < context.graph.nodes.size(); ++n) {
    if (!context.node_forward[n]) continue;
    for (uint32_t i = context.inputs_begin[n]; i < context.outputs_begin[n]; ++i) {
      NodeId& at = last[context.root[context.ids[i]]];
      at = std::max(at, n);
    }
  }
  return last;
}

StepFacts::StepFacts(const SimContext& context, uint32_t block_bits)
    : context_(context), block_bits_(std::min<uint32_t>(block_bits, 31)) {
  const size_t num_tensors = context.graph.tensors.size();
  storages_.resize(num_tensors);
  reads_.resize(num_tensors);
  alias_reads_.resize(num_tensors);
  own_reads_.resize(num_tensors);
  view_base_.resize(num_tensors);
  // Candidates per root, saturating at 2.
  std::vector<uint8_t> candidate_root(num_tensors, 0);
  for (TensorId t : context.candidates) {
    uint8_t& count = candidate_root[context.root[t]];
    count = std::min<uint8_t>(count + 1, 2);
  }
  // A family is asked of a candidate's root only for the other candidates
  // sharing it (OtherSavedUse): a root with one candidate needs none.
  std::vector<uint8_t> family_member(num_tensors, 0);
  for (TensorId t : context.candidates) family_member[t] = candidate_root[context.root[t]] > 1;
  // Each member's next in its root's ring, in id order: the last member
  // seen of each root, then each root's first closes its ring.
  family_next_.assign(num_tensors, kNoId);
  std::vector<TensorId> first_member(num_tensors, kNoId), last_member(num_tensors, kNoId);
  for (TensorId t : context.candidates) {
    if (!family_member[t]) continue;
    const TensorId root = context.root[t];
    if (last_member[root] == kNoId) {
      first_member[root] = t;
    } else {
      family_next_[last_member[root]] = t;
    }
    last_member[root] = t;
  }
  for (TensorId t : context.candidates) {
    if (family_member[t] && family_next_[t] == kNoId) {
      family_next_[t] = first_member[context.root[t]];
    }
  }
  for (TensorId x = 0; x < num_tensors; ++x) {
    TensorId base = x;
    if (!context.resident_root[x]) {
      while (base != kNoId && !context.forward_produced[base]) base = context.alias_of[base];
    }
    // Only candidates' roots are asked whether they are odd: the reads of
    // others (gradients, mostly) are plain reads.
    if (base == kNoId && !candidate_root[context.root[x]]) base = x;
    view_base_[x] = base;
  }
}

namespace {

// Resets the entries of `entries` that `touched` lists, or all of them when
// that is cheaper: an empty entry is all ones (kNone, kNoId, kNo), so a
// memset.
template <typename T>
void ResetEntries(std::vector<TensorId>& touched, size_t one_by_one, std::vector<T>& entries) {
  if (touched.size() > one_by_one) {
    std::memset(static_cast<void*>(entries.data()), 0xff, entries.size() * sizeof(T));
  } else {
    for (TensorId t : touched) entries[t] = T{};
  }
}

}  // namespace

void StepFacts::Fill(const SimResult& sim, NodeId first, NodeId end, SimPrefix same) {
  if (sim.steps.size() >= (1u << 31) || sim.buffers.size() >= (1u << 31)) {
    throw std::length_error("StepFacts: a simulation of 2^31 steps or storages");
  }
  const size_t one_by_one = ResetOneByOne();
  // No plan changes which storages the nodes' own steps make, nor that each
  // node has an own step: a fill of the range filled before overwrites
  // those entries, and resets only the recompute steps' (copies, re-runs).
  const bool same_range = filled_ && first == first_ && end == end_;
  if (!same_range) same = {};
  same.steps = std::min<uint32_t>(
      same.steps, static_cast<uint32_t>(std::min<size_t>(filled_steps_, sim.steps.size())));
  same.buffers = std::min<uint32_t>(same.buffers, static_cast<uint32_t>(sim.buffers.size()));
  ++fills_;
  filled_ = true;
  if (!same_range) {
    ResetEntries(stored_, one_by_one, storages_);
    stored_.clear();
  }
  reads_ready_ = saved_ready_ = false;
  sim_ = &sim;
  first_ = first;
  end_ = end;
  const size_t num_steps = sim.steps.size();
  // The steps kept and the groups they end are read as they were: the loop
  // starts at the first group not ended among them.
  uint32_t begin = 0;
  if (same.steps > 0) {
    const uint32_t last = same.steps - 1;
    begin = sim.steps[last].recompute ? GroupBegin(Group(last)) : same.steps;
  }
  // The reads held are kept (and read again where they changed) when they
  // are the previous fill's and this one keeps some of its steps.
  reads_kept_ = reads_current_ && same_range && begin > 0;
  reads_current_ = false;
  old_tail_.clear();
  // The steps from `tail` on are the old ones from `tail - shift` on: their
  // groups' own steps and re-runs are moved, not read.
  // The tail's first step in the simulation filled before, among its steps.
  const int64_t tail_was = static_cast<int64_t>(same.tail) - same.shift;
  const bool has_tail = same_range && same.tail != SimPrefix::kNoTail && same.tail > 0 &&
                        same.tail >= begin && same.tail <= num_steps && tail_was >= 0 &&
                        tail_was <= filled_steps_;
  const uint32_t tail = has_tail ? same.tail : static_cast<uint32_t>(num_steps);
  // Added to an old step of the tail (modulo 2^32, as the steps are: a
  // negative shift wraps back).
  const uint32_t shift = has_tail ? static_cast<uint32_t>(same.shift) : 0;
  const uint32_t old_tail = has_tail ? static_cast<uint32_t>(tail_was) : kNone;
  if (same_range) {
    // The re-runs from `begin` on go, but for those of the tail (from
    // old_tail on), which stay: the gap moves to the first that goes and
    // takes them in. Each copy they made from the kept storages on goes
    // with them (those made before are the same storages, made by the same
    // re-run in the same group).
    const size_t mid = RerunsBefore(begin);
    const size_t kept = std::max(mid, RerunsBefore(old_tail));
    MoveGap(mid);
    for (size_t k = gap_hi_; k < gap_hi_ + (kept - mid); ++k) {
      const NodeId node = reruns_list_[k];
      if (reads_kept_) old_tail_.push_back(node);
      ForEachOutput(node, [&](TensorId x) {
        const uint32_t copy = Copy(x);
        if (copy != kNone && copy >= same.buffers) storages_[x].copy = kNone;
      });
      reruns_[node - first] = Rerun{};
    }
    gap_hi_ += kept - mid;
  } else {
    own_.assign(end - first, kNone);
    reruns_.resize(end - first);
    std::memset(static_cast<void*>(reruns_.data()), 0xff, reruns_.size() * sizeof(Rerun));
    reruns_list_.clear();
    gap_lo_ = gap_hi_ = 0;
    shifts_.assign(((end - first) >> block_bits_) + 1, Shift{kBias, kBias});
  }
  new_tail_ = gap_lo_;
  filled_steps_ = static_cast<uint32_t>(num_steps);
  // Recompute steps belong to the group of the node that follows them.
  for (uint32_t s = begin; s < tail; ++s) {
    const Step& step = sim.steps[s];
    if (step.recompute) continue;
    const uint32_t group_shift = ShiftOf(step.node).steps;
    own_[step.node - first] = s - group_shift;
    for (uint32_t i = begin; i < s; ++i) {
      reruns_[sim.steps[i].node - first] = {i - group_shift, step.node};
      PushRerun(sim.steps[i].node);
    }
    begin = s + 1;
  }
  fresh_end_ = gap_lo_;
  // The storages from the kept ones up to the first the tail's steps make
  // (storages come in the order their steps make them); those after are
  // the old ones, moved with their groups.
  const uint32_t num_buffers = static_cast<uint32_t>(sim.buffers.size());
  uint32_t read_end = num_buffers;
  if (has_tail) {
    read_end = static_cast<uint32_t>(
        std::partition_point(sim.buffers.begin() + same.buffers, sim.buffers.end(),
                             [&](const Buffer& buffer) { return buffer.first_step < tail; }) -
        sim.buffers.begin());
    ShiftTail(sim.steps[tail - 1].node + 1, shift, num_buffers - filled_buffers_);
  }
  filled_buffers_ = num_buffers;
  // A storage a recompute step made is a recomputed copy: its category says
  // so without reading its step (Simulate and the patches set it so).
  const NodeId* producer = context_.producer.data();
  for (uint32_t b = same.buffers; b < read_end; ++b) {
    const Buffer& buffer = sim.buffers[b];
    Storages& storages = storages_[buffer.root];
    if (buffer.category == Category::kRecomputed) {
      // (No re-run of its producer is read only where `same` is not a
      // prefix the simulations share: the copy is then left out.)
      const NodeId group = RerunGroup(producer[buffer.root]);
      storages.copy = group == kNoId ? kNone : b - ShiftOf(group).buffers;
    } else {
      storages.original = b - ShiftOf(producer[buffer.root]).buffers;
      if (!same_range) stored_.push_back(buffer.root);
    }
  }
}

void StepFacts::ShiftTail(NodeId group, uint32_t steps, uint32_t buffers) {
  if (group >= end_ || (steps == 0 && buffers == 0)) return;
  const uint32_t num_nodes = end_ - first_;
  const uint32_t at = group - first_;
  const uint32_t block = at >> block_bits_;
  const uint32_t block_end = std::min(num_nodes, (block + 1) << block_bits_);
  // The block's groups from `group` on, one entry at a time: own steps and
  // originals, then the tail's re-runs in them (in step order, so in group
  // order) and their copies.
  for (uint32_t i = at; i < block_end; ++i) {
    own_[i] += steps;
    ForEachOutput(first_ + i, [&](TensorId x) {
      if (storages_[x].original != kNone) storages_[x].original += buffers;
    });
  }
  for (size_t k = gap_hi_; k < reruns_list_.size(); ++k) {
    const NodeId node = reruns_list_[k];
    Rerun& rerun = reruns_[node - first_];
    if (rerun.group >= first_ + block_end) break;
    rerun.step += steps;
    ForEachOutput(node, [&](TensorId x) {
      if (storages_[x].copy != kNone) storages_[x].copy += buffers;
    });
  }
  bool fold = false;
  for (size_t k = block + 1; k < shifts_.size(); ++k) {
    Shift& shift = shifts_[k];
    shift.steps += steps;
    shift.buffers += buffers;
    const int32_t net_steps = static_cast<int32_t>(shift.steps - kBias);
    const int32_t net_buffers = static_cast<int32_t>(shift.buffers - kBias);
    fold = fold || net_steps > kMaxNet || net_steps < -kMaxNet || net_buffers > kMaxNet ||
           net_buffers < -kMaxNet;
  }
  if (fold) FoldShifts();
}

void StepFacts::FoldShifts() {
  if (!filled_) return;
  const uint32_t num_nodes = end_ - first_;
  const NodeId* producer = context_.producer.data();
  // Storages first: a copy's block is read through its re-run's group.
  for (const TensorId x : stored_) {
    Storages& storages = storages_[x];
    if (storages.original != kNone) {
      storages.original += ShiftOf(producer[x]).buffers - kBias;
    }
    const NodeId group = RerunGroup(producer[x]);
    if (storages.copy != kNone && group != kNoId) storages.copy += ShiftOf(group).buffers - kBias;
  }
  for (uint32_t i = 0; i < num_nodes; ++i) {
    own_[i] += shifts_[i >> block_bits_].steps - kBias;
    Rerun& rerun = reruns_[i];
    if (rerun.group != kNoId) rerun.step += ShiftOf(rerun.group).steps - kBias;
  }
  for (Shift& shift : shifts_) shift = Shift{kBias, kBias};
}

size_t StepFacts::RerunsBefore(uint32_t step) const {
  auto before = [&](NodeId node) { return RerunStep(node) < step; };
  const NodeId* data = reruns_list_.data();
  const size_t low = std::partition_point(data, data + gap_lo_, before) - data;
  if (low < gap_lo_) return low;
  const NodeId* high = data + gap_hi_;
  return gap_lo_ + (std::partition_point(high, data + reruns_list_.size(), before) - high);
}

void StepFacts::MoveGap(size_t to) {
  NodeId* data = reruns_list_.data();
  if (to < gap_lo_) {
    const size_t moved = gap_lo_ - to;
    std::memmove(data + gap_hi_ - moved, data + to, moved * sizeof(NodeId));
    gap_lo_ = to;
    gap_hi_ -= moved;
  } else if (to > gap_lo_) {
    const size_t moved = to - gap_lo_;
    std::memmove(data + gap_lo_, data + gap_hi_, moved * sizeof(NodeId));
    gap_lo_ += moved;
    gap_hi_ += moved;
  }
}

void StepFacts::PushRerun(NodeId node) {
  if (gap_lo_ == gap_hi_) {
    // A gap of a quarter of the list: filled by as many re-runs as the
    // list's growth, it is made again after that many.
    const size_t room = std::max<size_t>(64, reruns_list_.size() / 4);
    reruns_list_.insert(reruns_list_.begin() + gap_hi_, room, kNoId);
    gap_hi_ += room;
  }
  reruns_list_[gap_lo_++] = node;
}

std::vector<NodeId> StepFacts::RerunNodes() const {
  std::vector<NodeId> nodes(reruns_list_.begin(), reruns_list_.begin() + gap_lo_);
  nodes.insert(nodes.end(), reruns_list_.begin() + gap_hi_, reruns_list_.end());
  return nodes;
}

void StepFacts::FillReads() {
  reads_ready_ = true;
  if (!own_ready_ || own_first_ != first_ || own_end_ != end_) FillOwnReads();
  if (reads_kept_ && ChangedReads()) {
    ++kept_read_fills_;
  } else {
    AllReads();
  }
  reads_kept_ = false;
  reads_current_ = true;
}

// Every recompute step's reads, in step order.
void StepFacts::AllReads() {
  const size_t one_by_one = ResetOneByOne();
  ResetEntries(read_, one_by_one, reads_);
  read_.clear();
  ResetEntries(alias_read_, one_by_one, alias_reads_);
  alias_read_.clear();
  auto read_node = [&](const NodeId node) {
    ForEachRead(
        context_, view_base_, node,
        [&](TensorId x) {
          Reads& reads = reads_[x];
          if (reads.first == kNoId) {
            reads.first = node;
            read_.push_back(x);
          }
          reads.last = node;
          reads.recompute = kYes;
        },
        [&](TensorId x) { AliasRead(x, node); });
  };
  for (size_t k = 0; k < gap_lo_; ++k) read_node(reruns_list_[k]);
  for (size_t k = gap_hi_; k < reruns_list_.size(); ++k) read_node(reruns_list_[k]);
}

// The reads of the fill before, kept where they still hold. The re-run
// nodes from the fill's kept prefix on, before (old_tail_) and now, are
// matched in step order; those left over (added, gone, or moved past
// others) are the changed ones. Every other re-run node is re-run at the
// same place among them as before, so an entry that no changed node reads
// names the same first and last node; the tensors the changed nodes read
// are read again over all their forward readers. False, with nothing
// changed, where that would cost about what reading every step does.
bool StepFacts::ChangedReads() {
  // The runs the two share at their ends match as they are; the rest is
  // matched below (a drop's chain and the steps its pulled nodes leave).
  const NodeId* fresh = reruns_list_.data() + new_tail_;
  size_t num_fresh = fresh_end_ - new_tail_;
  const NodeId* old = old_tail_.data();
  size_t num_old = old_tail_.size();
  while (num_old > 0 && num_fresh > 0 && old[num_old - 1] == fresh[num_fresh - 1]) {
    --num_old;
    --num_fresh;
  }
  while (num_old > 0 && num_fresh > 0 && *old == *fresh) {
    ++old;
    ++fresh;
    --num_old;
    --num_fresh;
  }
  if (node_mark_.size() != own_.size()) node_mark_.assign(own_.size(), 0);
  enum : uint8_t { kFresh = 1, kChanged = 2 };
  for (size_t j = 0; j < num_fresh; ++j) node_mark_[fresh[j] - first_] |= kFresh;
  changed_.clear();
  auto changed = [&](NodeId n) { return (node_mark_[n - first_] & kChanged) != 0; };
  auto change = [&](NodeId n) {
    if (changed(n)) return;
    node_mark_[n - first_] |= kChanged;
    changed_.push_back(n);
  };
  size_t i = 0, j = 0;
  while (i < num_old || j < num_fresh) {
    if (i < num_old && changed(old[i])) {
      ++i;
    } else if (j < num_fresh && changed(fresh[j])) {
      ++j;
    } else if (i == num_old) {
      change(fresh[j++]);
    } else if (j == num_fresh) {
      change(old[i++]);
    } else if (old[i] == fresh[j]) {
      ++i;
      ++j;
    } else if (!(node_mark_[old[i] - first_] & kFresh)) {
      change(old[i++]);  // no longer re-run
    } else {
      change(fresh[j++]);  // new, or come before the old node (a chain's)
    }
  }
  for (size_t k = 0; k < num_fresh; ++k) node_mark_[fresh[k] - first_] = 0;
  for (const NodeId n : changed_) node_mark_[n - first_] = 0;
  if (changed_.size() > RerunCount() / 4 + 16) return false;
  if (!readers_ready_) BuildReaders();
  if (key_mark_.size() != reads_.size()) key_mark_.assign(reads_.size(), 0);
  enum : uint8_t { kRead = 1, kAlias = 2, kOdd = 4 };
  keys_.clear();
  auto key = [&](TensorId x, uint8_t kind) {
    if (key_mark_[x] == 0) keys_.push_back(x);
    key_mark_[x] |= kind;
  };
  for (const NodeId n : changed_) {
    ForEachRead(
        context_, view_base_, n, [&](TensorId x) { key(x, kRead); },
        [&](TensorId x) {
          const TensorId base = view_base_[x];
          if (base == kNoId) {
            key(context_.root[x], kOdd);
          } else {
            key(base, kAlias);
          }
        });
  }
  for (const TensorId x : keys_) {
    const uint8_t kinds = key_mark_[x];
    key_mark_[x] = 0;
    if (kinds & kRead) ReadAgain(x);
    if (kinds & kAlias) ReadAliasAgain(x);
    if (kinds & kOdd) ReadOddAgain(x);
  }
  return true;
}

// The forward readers of each tensor a read can be kept for (forward-made,
// or a view), and the views by base and by odd root.
void StepFacts::BuildReaders() {
  readers_ready_ = true;
  const size_t num_tensors = reads_.size();
  auto kept = [&](TensorId x) {
    return context_.forward_produced[x] || view_base_[x] != x;
  };
  reader_begin_.assign(num_tensors + 1, 0);
  const size_t num_nodes = context_.graph.nodes.size();
  const TensorId* ids = context_.ids.data();
  for (NodeId n = 0; n < num_nodes; ++n) {
    if (!context_.node_forward[n]) continue;
    for (uint32_t i = context_.inputs_begin[n]; i < context_.outputs_begin[n]; ++i) {
      if (kept(ids[i])) ++reader_begin_[ids[i] + 1];
    }
  }
  for (size_t t = 0; t < num_tensors; ++t) reader_begin_[t + 1] += reader_begin_[t];
  readers_.resize(reader_begin_[num_tensors]);
  std::vector<uint32_t> next(reader_begin_.begin(), reader_begin_.end() - 1);
  for (NodeId n = 0; n < num_nodes; ++n) {
    if (!context_.node_forward[n]) continue;
    for (uint32_t i = context_.inputs_begin[n]; i < context_.outputs_begin[n]; ++i) {
      if (kept(ids[i])) readers_[next[ids[i]]++] = n;
    }
  }
  base_views_.clear();
  odd_views_.clear();
  for (TensorId v = 0; v < num_tensors; ++v) {
    if (context_.forward_produced[v] || view_base_[v] == v ||
        reader_begin_[v] == reader_begin_[v + 1]) {
      continue;
    }
    if (view_base_[v] == kNoId) {
      odd_views_.push_back({context_.root[v], v});
    } else {
      base_views_.push_back({view_base_[v], v});
    }
  }
  std::sort(base_views_.begin(), base_views_.end());
  std::sort(odd_views_.begin(), odd_views_.end());
}

// Calls f(node, step) for each forward node of the range reading `x` that
// the fill re-runs, with the step re-running it.
template <typename F>
void StepFacts::ForEachRerunReader(TensorId x, F f) const {
  for (uint32_t k = reader_begin_[x]; k < reader_begin_[x + 1]; ++k) {
    const NodeId n = readers_[k];
    if (n < first_ || n >= end_) continue;
    const uint32_t s = RerunStep(n);
    if (s != kNone) f(n, s);
  }
}

// Calls f(view) for each of `views` (sorted (key, view) pairs) under `key`.
template <typename F>
void StepFacts::ForEachView(const std::vector<std::pair<TensorId, TensorId>>& views,
                            TensorId key, F f) {
  auto view = std::lower_bound(views.begin(), views.end(), std::make_pair(key, TensorId{0}));
  for (; view != views.end() && view->first == key; ++view) f(view->second);
}

// Forward-made tensor x's entry, from its re-run readers.
void StepFacts::ReadAgain(TensorId x) {
  Reads& reads = reads_[x];
  const bool listed = Listed(reads);
  NodeId first = kNoId, last = kNoId;
  uint32_t first_step = kNone, last_step = 0;
  ForEachRerunReader(x, [&](NodeId n, uint32_t s) {
    if (s < first_step) {
      first_step = s;
      first = n;
    }
    if (last == kNoId || s > last_step) {
      last_step = s;
      last = n;
    }
  });
  reads.first = first;
  reads.last = last;
  reads.recompute = first == kNoId ? kNo : kYes;
  if (!listed && first != kNoId) read_.push_back(x);
}

// View base `base`'s entry, from the re-run readers of its views.
void StepFacts::ReadAliasAgain(TensorId base) {
  AliasReads& alias = alias_reads_[base];
  const bool listed = alias.last != kNoId;
  NodeId last = kNoId, first_made = kNoId;
  uint32_t last_step = 0;
  ForEachView(base_views_, base, [&](TensorId v) {
    bool read = false;
    ForEachRerunReader(v, [&](NodeId n, uint32_t s) {
      read = true;
      if (last == kNoId || s > last_step) {
        last_step = s;
        last = n;
      }
    });
    if (read) first_made = std::min(first_made, MadeName(context_.producer[v]));
  });
  alias.last = last;
  alias.first_made = first_made;
  if (!listed && last != kNoId) alias_read_.push_back(base);
}

// Root `root`'s odd mark, from the re-run readers of its odd views.
void StepFacts::ReadOddAgain(TensorId root) {
  Reads& reads = reads_[root];
  const bool listed = Listed(reads);
  bool odd = false;
  ForEachView(odd_views_, root,
              [&](TensorId v) { ForEachRerunReader(v, [&](NodeId, uint32_t) { odd = true; }); });
  reads.odd = odd ? kYes : kNo;
  if (!listed && odd) read_.push_back(root);
}

// The reads by the own steps of the range's non-forward nodes, by node: no
// plan changes them.
void StepFacts::FillOwnReads() {
  ResetEntries(own_read_, ResetOneByOne(), own_reads_);
  own_read_.clear();
  own_ready_ = true;
  own_first_ = first_;
  own_end_ = end_;
  for (NodeId n = first_; n < end_; ++n) {
    if (context_.node_forward[n]) continue;
    ForEachRead(
        context_, view_base_, n,
        [&](TensorId x) {
          OwnReads& reads = own_reads_[x];
          if (reads.first == kNoId) {
            reads.first = n;
            own_read_.push_back(x);
          }
          reads.last = n;
        },
        [&](TensorId x) { OwnAliasRead(x, n); });
  }
}

// AliasRead for the own step of non-forward node `n`, by node.
void StepFacts::OwnAliasRead(TensorId x, NodeId n) {
  const TensorId base = view_base_[x];
  if (base == kNoId) {
    const TensorId root = context_.root[x];
    if (own_reads_[root].odd != kYes) {
      own_reads_[root].odd = kYes;
      own_read_.push_back(root);
    }
    return;
  }
  const NodeId made = MadeName(context_.producer[x]);
  OwnReads& alias = own_reads_[base];
  if (alias.alias_last == kNoId) {
    own_read_.push_back(base);
    alias.alias_made = made;
  }
  alias.alias_last = n;
  alias.alias_made = std::min(alias.alias_made, made);
}

// A non-forward read of `x`, which no forward node made: a view a backward
// node took of a forward tensor reads the storage that tensor had when the
// view was made (its original when saved, else its copy), so the read counts
// as one of the nearest forward-made tensor it views (view_base_). Anything
// else marks its root odd.
void StepFacts::AliasRead(TensorId x, NodeId node) {
  const TensorId base = view_base_[x];
  if (base == kNoId) {
    const TensorId root = context_.root[x];
    if (reads_[root].odd != kYes) {
      reads_[root].odd = kYes;
      read_.push_back(root);
    }
    return;
  }
  const NodeId made = MadeName(context_.producer[x]);
  AliasReads& alias = alias_reads_[base];
  if (alias.last == kNoId) alias_read_.push_back(base);
  alias.last = node;
  alias.first_made = std::min(alias.first_made, made);
}

void StepFacts::FillSaved(const SaveSet& keep) {
  saved_ready_ = true;
  keep_ = &keep;
  if (last_forward_read_.empty()) last_forward_read_ = LastForwardReads(context_);
}

std::string DifferenceFromWholeFill(const StepFacts& facts) {
  StepFacts whole(facts.context());
  whole.Fill(*facts.sim(), facts.first(), facts.end());
  if (facts.reads_ready()) whole.FillReads();
  if (facts.saved_ready()) whole.FillSaved(*facts.saved_plan());
  return StepFactsDifference(facts, whole);
}

std::string StepFactsDifference(const StepFacts& a, const StepFacts& b) {
  if (a.first() != b.first() || a.end() != b.end()) return "their range";
  const size_t num_steps = a.sim()->steps.size();
  if (b.sim()->steps.size() != num_steps) return "their step count";
  for (uint32_t s = 0; s < num_steps; ++s) {
    if (a.Group(s) != b.Group(s)) return "the group of step " + std::to_string(s);
  }
  for (NodeId n = a.first(); n < a.end(); ++n) {
    if (a.OwnStep(n) != b.OwnStep(n) || a.GroupBegin(n) != b.GroupBegin(n) ||
        a.RerunStep(n) != b.RerunStep(n) || a.RerunGroup(n) != b.RerunGroup(n)) {
      return "the steps of node " + std::to_string(n);
    }
  }
  if (a.RerunNodes() != b.RerunNodes()) {
    return "the list of recompute steps";
  }
  const bool reads = a.reads_ready() && b.reads_ready();
  const bool saved = a.saved_ready() && b.saved_ready();
  const SimContext& context = a.context();
  for (TensorId t = 0; t < context.graph.tensors.size(); ++t) {
    const std::string name = " of tensor '" + context.graph.tensors[t].name + "'";
    if (a.Original(t) != b.Original(t) || a.Copy(t) != b.Copy(t)) return "the storages" + name;
    if (reads && (a.FirstRead(t) != b.FirstRead(t) || a.LastRead(t) != b.LastRead(t) ||
                  a.LastOwnRead(t) != b.LastOwnRead(t) ||
                  a.RecomputeRead(t) != b.RecomputeRead(t) ||
                  a.AliasLastRead(t) != b.AliasLastRead(t) ||
                  a.AliasFirstMade(t) != b.AliasFirstMade(t) || a.OddRoot(t) != b.OddRoot(t))) {
      return "the reads" + name;
    }
    if (saved && context.is_candidate[t] && a.OtherSavedUse(t) != b.OtherSavedUse(t)) {
      return "the family" + name;
    }
  }
  return "";
}

}  // namespace ckptplan
