// DropDelta::ScoreResave: what re-saving one dropped candidate does to a
// simulation, worked out from that simulation alone.
//
// Under the memory rule (simulator.h) a dropped `t` whose first
// non-forward reader finds it missing gets a chain: recompute steps, depth
// first from saved or resident inputs, the last of which makes t's copy (or
// t's run of steps inside the chain of a tensor that needs it). Saving `t`
// again takes those steps away when they served t alone: nothing else they
// made is read after them, but the storage t's reads use, and that only as
// t or a view of t. Every other step then runs as before, since no other
// chain found anything the removed steps made; t's reads read the original
// instead, which lives to the last of them; the storages the removed steps
// read lose those reads and die after their last read that stays
// (DropDelta::LastKeptRead); a root's copy made before, which a view read,
// keeps its other reads; the recompute cost falls by the removed nodes'.
// Each is a range add over the old steps that stay, so the region's highest
// node peak is a handful of range maxima, as for a drop. Where another
// output of t's producer would trigger the same steps once t is saved
// (ChainStays), they stay and only t's storages change. Anything else (a
// re-save that moves another tensor's re-run to a later chain) is reported
// unknown, and callers simulate. tests/sim/drop_delta_test.cc checks every
// known answer against a simulation of the re-save.
#include "ckptplan/sim/drop_delta.h"

#include <algorithm>

namespace ckptplan {

DropDelta::Result DropDelta::ScoreResave(TensorId t) {
  const Result unknown;
  scored_.tensor = kNoId;  // no Patch from this
  lifetimes_.clear();
  const SimResult& sim = *sim_;
  const StepFacts& facts = *facts_;
  if (!context_.exact_costs || !context_.is_candidate[t]) return unknown;
  const TensorId root = context_.root[t];
  if (context_.made[root] != SimContext::Made::kActivation) return unknown;
  const uint32_t original = facts.Original(root);
  if (original == kNone) return unknown;
  const NodeId reader = context_.last_reader[root];
  if (!whole_ && reader != kNoId && reader >= end_) return unknown;  // lives to the end
  // The storage t's reads read (its copy, or for a view its root's copy or
  // original), and the chain [begin, last] whose last step re-runs t's producer.
  uint32_t copy;
  if (!ExistingCopy(t, &copy) || copy == kNone) return unknown;
  copy &= ~kExisting;
  const bool reads_original = copy == original;
  const NodeId producer = context_.producer[t];
  if (producer < first_ || producer >= end_) return unknown;
  const uint32_t last = facts.RerunStep(producer);
  if (last == kNone) return unknown;
  const Buffer& copy_buffer = sim.buffers[copy];
  if (!reads_original && copy_buffer.first_step > last) return unknown;
  const uint32_t num_steps = static_cast<uint32_t>(sim.steps.size());
  if (!sim.steps[last].recompute) return unknown;
  uint32_t chain_begin = last;
  while (!sim.steps[chain_begin].starts_chain) {
    if (chain_begin == 0 || !sim.steps[chain_begin - 1].recompute) return unknown;
    --chain_begin;
  }
  if (root == t && !reads_original && copy_buffer.first_step == last &&
      ChainStays(t, chain_begin, last)) {
    return ScoreResaveKeepingSteps(t, copy, original);
  }
  const TensorId* ids = context_.ids.data();
  uint32_t begin = chain_begin;
  if (last + 1 < num_steps && sim.steps[last + 1].recompute && !sim.steps[last + 1].starts_chain) {
    // t was made inside a chain for another tensor, depth first: its own
    // steps are the run before its copy's whose outputs the run reads (a
    // step before them made for another input is read after the copy too,
    // which the check on what the steps made below rules out).
    if (++epoch_ == 0) {
      std::fill(mark_.begin(), mark_.end(), 0);
      std::fill(pulled_.begin(), pulled_.end(), 0);
      epoch_ = 1;
    }
    auto need_inputs = [&](NodeId node) {
      for (uint32_t i = context_.inputs_begin[node]; i < context_.outputs_begin[node]; ++i) {
        const TensorId x = ids[i];
        if (context_.forward_produced[x] && !context_.resident_root[x] && !Saved(x)) {
          mark_[x] = epoch_;
        }
      }
    };
    need_inputs(sim.steps[last].node);
    begin = last;
    while (begin > chain_begin) {
      const NodeId node = sim.steps[begin - 1].node;
      bool needed = false;
      for (uint32_t i = context_.outputs_begin[node]; i < context_.inputs_begin[node + 1]; ++i) {
        needed = needed || mark_[ids[i]] == epoch_;
      }
      if (!needed) break;
      --begin;
      need_inputs(node);
    }
  }
  if (last - begin + 1 >= kKeyHalf) return unknown;
  // A view's copy of its root made before the chain stays, for the reads
  // not through t; those through t read the original.
  const bool copy_before = !reads_original && copy_buffer.first_step < begin;
  if (copy_before && root == t) return unknown;
  deleted_.clear();
  for (uint32_t s = begin; s <= last; ++s) deleted_.push_back(s);
  // Reads of the copy after the chain read the original once t is saved:
  // each must be a read of t or of a view of it (a root's tensors all view
  // the root, so only a view's copy needs the check).
  if (!reads_original && !copy_before && root != t) {
    uint32_t through, other;
    if (!SplitReads(copy, t, &through, &other) || other != kNone) return unknown;
  }
  // What the chain made (buffers come in the order of their first steps):
  // nothing but t's copy may be read after it.
  const auto made_begin =
      std::partition_point(sim.buffers.begin(), sim.buffers.end(),
                           [&](const Buffer& buffer) { return buffer.first_step < begin; });
  const auto made_end =
      std::partition_point(made_begin, sim.buffers.end(),
                           [&](const Buffer& buffer) { return buffer.first_step <= last; });
  for (auto it = made_begin; it != made_end; ++it) {
    if (static_cast<uint32_t>(it - sim.buffers.begin()) != copy && it->last_step > last) {
      return unknown;
    }
  }
  // The storages the chain read from before it, and its cost.
  double cost = 0;
  extended_.clear();  // (storage, 0): read by the chain, last read inside it
  for (uint32_t s = begin; s <= last; ++s) {
    const NodeId node = sim.steps[s].node;
    cost += context_.node_cost[node];
    for (uint32_t i = context_.inputs_begin[node]; i < context_.outputs_begin[node]; ++i) {
      uint32_t storage;
      if (!OldStorage(ids[i], /*forward_read=*/false, &storage)) return unknown;
      if (storage == kNone) continue;
      storage &= ~kExisting;
      const Buffer& buffer = sim.buffers[storage];
      if (buffer.first_step >= begin) continue;  // made by the chain: goes with it
      if (copy_before && storage == copy) continue;  // below
      if (storage == original) {
        if (reads_original) continue;  // t's reads read it on
        return unknown;                // not a chain of t's alone
      }
      if (buffer.last_step <= last) extended_.push_back({storage, 0});
    }
  }
  changes_.clear();
  const int64_t bytes = context_.bytes[root];
  const Buffer& original_buffer = sim.buffers[original];
  if (original_buffer.last_step >= begin && original_buffer.last_step <= last) return unknown;
  if (copy_before) {
    // The reads through t after the chain read the original; the copy lives
    // to its last other read that stays.
    uint32_t through, other;
    if (!SplitReads(copy, t, &through, &other)) return unknown;
    if (through != kNone && through > original_buffer.last_step) {
      changes_.push_back({Key(original_buffer.last_step) + 1, Key(through), bytes});
    }
    const uint32_t kept = other == kNone ? copy_buffer.first_step : other;
    if (kept < copy_buffer.last_step) {
      changes_.push_back({Key(kept) + 1, Key(copy_buffer.last_step), -bytes});
    }
  } else if (!reads_original) {
    // The copy goes; its reads read the original, which lives on to them.
    changes_.push_back({Key(copy_buffer.first_step), Key(copy_buffer.last_step), -bytes});
    if (copy_buffer.last_step > original_buffer.last_step) {
      changes_.push_back({Key(original_buffer.last_step) + 1, Key(copy_buffer.last_step), bytes});
    }
  }
  // The storages whose last read was a step of the chain.
  std::sort(extended_.begin(), extended_.end());
  extended_.erase(std::unique(extended_.begin(), extended_.end()), extended_.end());
  for (const auto& [b, unused] : extended_) {
    const Buffer& buffer = sim.buffers[b];
    uint32_t kept;
    if (!LastKeptRead(b, &kept)) return unknown;
    if (kept < buffer.last_step) {
      changes_.push_back({Key(kept) + 1, Key(buffer.last_step), -context_.bytes[buffer.root]});
    }
  }
  // The old steps that stay, through range maxima.
  const int64_t highest = KeptStepsMax();
  Result result;
  result.known = true;
  result.region_max = highest;
  result.added_cost = -cost;
  return result;
}

// Whether the steps stay once `t` is saved: the run of the chain starting at
// chain_begin whose last step, `last`, re-runs t's producer p. A recompute
// step re-runs p when the tensor on top of the depth-first stack is an output
// of p (the trigger); saving any other output leaves every step as it is.
//  - Inside a chain (a recompute step of the same chain follows), the
//    trigger is an input of a later step of the chain: when none of those
//    reads `t`, it is another output.
//  - At the end of a chain, the trigger is the input of the node R whose own
//    step follows that the chain makes first in R's input order (R's inputs
//    start a chain each when missing at their turn). When that is `t`, the
//    next input of R missing once t is saved (made at or after chain_begin)
//    starts the chain in its place, and when that is another output of p its
//    run is the same steps.
// Views are made when their producer re-runs, so "made by the chain" reads
// the producer's re-run step.
bool DropDelta::ChainStays(TensorId t, uint32_t chain_begin, uint32_t last) const {
  const SimResult& sim = *sim_;
  const StepFacts& facts = *facts_;
  const TensorId* ids = context_.ids.data();
  auto reads_t = [&](NodeId node) {
    for (uint32_t i = context_.inputs_begin[node]; i < context_.outputs_begin[node]; ++i) {
      if (ids[i] == t) return true;
    }
    return false;
  };
  const uint32_t num_steps = static_cast<uint32_t>(sim.steps.size());
  uint32_t s = last + 1;
  for (; s < num_steps && sim.steps[s].recompute && !sim.steps[s].starts_chain; ++s) {
    if (reads_t(sim.steps[s].node)) return false;
  }
  if (s > last + 1) return true;
  const NodeId p = context_.producer[t];
  const NodeId reader = facts.Group(last);
  // The step that made the copy R reads of `x` (its producer's re-run;
  // kNone for none, or when R reads no copy of x), `t` read as dropped.
  auto rerun_at = [&](TensorId x) -> uint32_t {
    if (!context_.forward_produced[x] || context_.resident_root[x]) return kNone;
    if (x != t && Saved(x)) return kNone;
    const NodeId producer = context_.producer[x];
    if (producer < first_ || producer >= end_) return kNone;
    return facts.RerunStep(producer);
  };
  bool past_trigger = false;
  for (uint32_t i = context_.inputs_begin[reader]; i < context_.outputs_begin[reader]; ++i) {
    const TensorId x = ids[i];
    const uint32_t made = rerun_at(x);
    if (made == kNone || made < chain_begin) continue;
    if (!past_trigger) {
      if (made > last) return false;  // R's first chain after this one
      if (x != t) return context_.producer[x] == p;  // t is a by-product: stays
      past_trigger = true;
      continue;
    }
    if (x == t) continue;  // saved now
    return made == last && context_.producer[x] == p;
  }
  return false;  // no other input needs the chain: it goes
}

// ScoreResave where the steps stay (ChainStays): the copy of `t` the chain
// makes is read by nothing once t is saved, so it dies at its step, and t's
// reads read the original (storage `original`), which lives to the last of
// them. Views of t a backward node takes before the copy is made read the
// original only once t is saved: not handled.
DropDelta::Result DropDelta::ScoreResaveKeepingSteps(TensorId t, uint32_t copy,
                                                     uint32_t original) {
  const Result unknown;
  const SimResult& sim = *sim_;
  const StepFacts& facts = *facts_;
  const Buffer& copy_buffer = sim.buffers[copy];
  const uint32_t made = copy_buffer.first_step;
  if (facts.FirstRead(t) != kNone && facts.FirstRead(t) <= made) return unknown;
  if (facts.AliasLastRead(t) != kNone && facts.AliasFirstMade(t) <= made) return unknown;
  const int64_t bytes = context_.bytes[t];
  const uint32_t copy_last = copy_buffer.last_step;
  const uint32_t original_last = sim.buffers[original].last_step;
  deleted_.clear();
  changes_.clear();
  if (copy_last > made) changes_.push_back({Key(made) + 1, Key(copy_last), -bytes});
  if (copy_last > original_last) {
    changes_.push_back({Key(original_last) + 1, Key(copy_last), bytes});
  }
  Result result;
  result.known = true;
  result.region_max = KeptStepsMax();
  result.added_cost = 0;
  return result;
}

// How a step's read of `x`, a tensor of t's root, reads storage `b`
// (t's copy or a copy of its root): kThrough as `t` or a view of `t` (which
// read t's storage), kOther otherwise, kNot not `b`, kUnplaced when not
// handled. A view a backward node took reads its nearest forward tensor's.
DropDelta::RootRead DropDelta::ReadOf(TensorId x, bool forward_read, uint32_t b,
                                      TensorId t) const {
  TensorId z = x;
  for (int depth = 0; z != t && context_.made[z] == SimContext::Made::kAlias; ++depth) {
    if (depth == 64) return RootRead::kUnplaced;
    z = context_.alias_of[z];
  }
  if (z == t) return RootRead::kThrough;
  TensorId base = x;
  for (int depth = 0; !context_.forward_produced[base] && !context_.resident_root[base]; ++depth) {
    if (depth == 64 || context_.made[base] != SimContext::Made::kAlias) return RootRead::kUnplaced;
    base = context_.alias_of[base];
  }
  uint32_t storage;
  if (!OldStorage(base, forward_read && base == x, &storage)) return RootRead::kUnplaced;
  return storage != kNone && (storage & ~kExisting) == b ? RootRead::kOther : RootRead::kNot;
}

// The steps that stay (not deleted_) and read storage `b`, a copy of t's
// root: in *through the last reading it as `t` or a view of `t`, in *other
// the last reading it otherwise (kNone for none); false where a read is not
// placed.
bool DropDelta::SplitReads(uint32_t b, TensorId t, uint32_t* through, uint32_t* other) const {
  *through = *other = kNone;
  const TensorId root = context_.root[t];
  const Buffer& buffer = sim_->buffers[b];
  for (uint32_t i = readers_begin_[root]; i < readers_begin_[root + 1]; ++i) {
    const NodeId n = readers_[i];
    if (n < first_ || n >= end_) continue;
    for (const uint32_t s : {facts_->OwnStep(n), facts_->RerunStep(n)}) {
      if (s == kNone || s <= buffer.first_step || s > buffer.last_step) continue;
      if (Deleted(s)) continue;
      const bool forward_read = context_.node_forward[n] && !sim_->steps[s].recompute;
      for (uint32_t k = context_.inputs_begin[n]; k < context_.outputs_begin[n]; ++k) {
        const TensorId x = context_.ids[k];
        if (context_.root[x] != root) continue;
        uint32_t* at = nullptr;
        switch (ReadOf(x, forward_read, b, t)) {
          case RootRead::kUnplaced: return false;
          case RootRead::kNot: break;
          case RootRead::kThrough: at = through; break;
          case RootRead::kOther: at = other; break;
        }
        if (at != nullptr && (*at == kNone || s > *at)) *at = s;
      }
    }
  }
  return true;
}

}  // namespace ckptplan
