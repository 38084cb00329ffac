#include "ckptplan/sim/step_facts.h"

#include <algorithm>
#include <cstring>

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

StepFacts::StepFacts(const SimContext& context) : context_(context) {
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
  const size_t one_by_one = ResetOneByOne();
  // No plan changes which storages the nodes' own steps make, nor that each
  // node has an own step: a fill of the range filled before overwrites
  // those entries, and resets only the recompute steps' (copies, re-runs).
  const bool same_range = filled_ && first == first_ && end == end_;
  if (!same_range) same = {};
  same.steps = std::min<uint32_t>(
      same.steps, static_cast<uint32_t>(std::min(group_.size(), sim.steps.size())));
  same.buffers = std::min<uint32_t>(same.buffers, static_cast<uint32_t>(sim.buffers.size()));
  ++fills_;
  filled_ = true;
  if (!same_range) {
    ResetEntries(stored_, one_by_one, storages_);
    stored_.clear();
  }
  // Copies: those of the storages kept stay (copied_ is in storage order,
  // and a tensor has one copy at most), the others go.
  while (!copied_.empty() && copied_.back().second >= same.buffers) {
    storages_[copied_.back().first].copy = kNone;
    copied_.pop_back();
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
    begin = sim.steps[last].recompute ? nodes_[group_[last] - first].begin : same.steps;
  }
  if (same_range) {
    // Re-runs are listed in step order: those from `begin` on go.
    while (!rerun_nodes_.empty() && nodes_[rerun_nodes_.back() - first].rerun >= begin) {
      NodeSteps& node = nodes_[rerun_nodes_.back() - first];
      node.rerun = kNone;
      node.rerun_group = kNoId;
      rerun_nodes_.pop_back();
    }
    while (!recompute_steps_.empty() && recompute_steps_.back() >= begin) {
      recompute_steps_.pop_back();
    }
  } else {
    nodes_.resize(end - first);
    std::memset(static_cast<void*>(nodes_.data()), 0xff, nodes_.size() * sizeof(NodeSteps));
    rerun_nodes_.clear();
    recompute_steps_.clear();
  }
  // The recompute steps' reads: those of the steps kept stay (their steps
  // and what they read are as they were), the others' are undone.
  if (same_range && begin > 0) {
    UndoReads(begin);
  } else {
    ResetEntries(read_, one_by_one, reads_);
    read_.clear();
    ResetEntries(alias_read_, one_by_one, alias_reads_);
    alias_read_.clear();
    read_undo_.clear();
    reads_applied_ = 0;
  }
  ReserveSteps(group_, num_steps);
  group_.resize(num_steps);
  // Recompute steps belong to the group of the node that follows them.
  for (uint32_t s = begin; s < num_steps; ++s) {
    const Step& step = sim.steps[s];
    if (step.recompute) continue;
    NodeSteps& node = nodes_[step.node - first];
    node.own = s;
    node.begin = begin;
    for (uint32_t i = begin; i < s; ++i) {
      NodeSteps& rerun = nodes_[sim.steps[i].node - first];
      rerun.rerun = i;
      rerun.rerun_group = step.node;
      group_[i] = step.node;
      recompute_steps_.push_back(i);
      rerun_nodes_.push_back(sim.steps[i].node);
    }
    group_[s] = step.node;
    begin = s + 1;
  }
  for (uint32_t b = same.buffers; b < sim.buffers.size(); ++b) {
    const Buffer& buffer = sim.buffers[b];
    Storages& storages = storages_[buffer.root];
    if (sim.steps[buffer.first_step].recompute) {
      storages.copy = b;
      copied_.push_back({buffer.root, b});
    } else {
      storages.original = b;
      if (!same_range) stored_.push_back(buffer.root);
    }
  }
}

void StepFacts::FillReads() {
  reads_ready_ = true;
  if (!own_ready_ || own_first_ != first_ || own_end_ != end_) FillOwnReads();
  const SimResult& sim = *sim_;
  // The steps from reads_applied_ on (recompute_steps_ is in step order).
  auto from = std::lower_bound(recompute_steps_.begin(), recompute_steps_.end(), reads_applied_);
  for (; from != recompute_steps_.end(); ++from) {
    const uint32_t s = *from;
    ForEachRead(
        context_, view_base_, sim.steps[s].node,
        [&](TensorId x) {
          Reads& reads = reads_[x];
          PushUndo(s, x, false, reads.first == kNone, reads, {});
          if (reads.first == kNone) {
            reads.first = s;
            read_.push_back(x);
          }
          reads.last = s;
          reads.recompute = kYes;
        },
        [&](TensorId x) { AliasRead(x, s); });
  }
  reads_applied_ = static_cast<uint32_t>(sim.steps.size());
}

// Filled in place: a braced temporary is stored field by field and loaded
// back whole to be copied, which stalls (the loads wait for the stores).
void StepFacts::PushUndo(uint32_t step, TensorId tensor, bool alias, bool listed,
                         const Reads& reads, const AliasReads& alias_reads) {
  ReadUndo& undo = read_undo_.emplace_back();
  undo.step = step;
  undo.tensor = tensor;
  undo.alias = alias;
  undo.listed = listed;
  undo.reads = reads;
  undo.alias_reads = alias_reads;
}

void StepFacts::UndoReads(uint32_t begin) {
  while (!read_undo_.empty() && read_undo_.back().step >= begin) {
    const ReadUndo& undo = read_undo_.back();
    if (undo.alias) {
      alias_reads_[undo.tensor] = undo.alias_reads;
      if (undo.listed) alias_read_.pop_back();
    } else {
      reads_[undo.tensor] = undo.reads;
      if (undo.listed) read_.pop_back();
    }
    read_undo_.pop_back();
  }
  reads_applied_ = std::min(reads_applied_, begin);
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
  const NodeId maker = context_.producer[x];
  const NodeId made = maker >= first_ && maker < end_ ? maker + 1 : 0;
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
void StepFacts::AliasRead(TensorId x, uint32_t step) {
  const TensorId base = view_base_[x];
  if (base == kNoId) {
    const TensorId root = context_.root[x];
    if (reads_[root].odd != kYes) {
      PushUndo(step, root, false, true, reads_[root], {});
      reads_[root].odd = kYes;
      read_.push_back(root);
    }
    return;
  }
  const NodeId maker = context_.producer[x];
  const uint32_t made = maker >= first_ && maker < end_ ? nodes_[maker - first_].own : 0;
  AliasReads& alias = alias_reads_[base];
  PushUndo(step, base, true, alias.last == kNone, {}, alias);
  if (alias.last == kNone) {
    alias_read_.push_back(base);
    alias.first_made = made;
  }
  alias.last = step;
  alias.first_made = std::min(alias.first_made, made);
}

void StepFacts::FillSaved(const SaveSet& keep) {
  saved_ready_ = true;
  keep_ = &keep;
  if (last_forward_read_.empty()) last_forward_read_ = LastForwardReads(context_);
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
