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
// (ChainStays), they stay and only t's storages change. Where the steps
// that go made storages read after them, the nodes that make what is read
// re-run later, before or inside its next readers (MovedChain): their steps
// go there, what they read lives to them, and what they make lives from
// them. Such a reader may be a later step of the chain the removed steps
// were in: that chain is replayed without them. A view's copy of its root
// that other tensors read after the chain is one of those storages: t's
// reads read the original, and the copy's makers re-run for the others.
// Anything else (a next reader in the old chain's own group, say) is
// reported unknown, and callers simulate. tests/sim/drop_delta_test.cc
// checks every known answer against a simulation of the re-save.
#include "ckptplan/sim/drop_delta.h"

#include <algorithm>

namespace ckptplan {

DropDelta::Result DropDelta::ScoreResave(TensorId t) {
  const Result unknown;
  scored_.tensor = kNoId;  // no Patch from this
  resaved_ = kNoId;        // nor PatchResave, until known
  events_sorted_ = false;
  lifetimes_.clear();
  chain_.clear();          // the nodes moved (MovedChain), none so far
  made_.clear();
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
        if (context_.Unsaved(x, *keep_)) {
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
  // Reads of the copy after the chain through t read the original once t
  // is saved (a root's tensors all view the root, so only a view's copy
  // needs the check). Other reads after it need the copy again: the nodes
  // that made it re-run for them (MovedChain), and it lives from there to
  // the last of them.
  uint32_t through_copy = kNone, other_copy = kNone;
  if (!reads_original && !copy_before && root != t &&
      !SplitReads(copy, t, &through_copy, &other_copy)) {
    return unknown;
  }
  const bool copy_moves = other_copy != kNone;
  // A view the steps made (no storage of its own) and a step after them
  // reads is missing once they go: its node re-runs for that read, with
  // the views of the steps it reads, which the storages below do not show.
  // Handled only where those re-runs use no workspace (a step that
  // allocates nothing then holds no more than the reader's own, which
  // stays); else not. Each such node re-runs once (its views are then
  // made again), so its cost comes back once (view_cost).
  auto made_here = [&](TensorId x) {
    const NodeId p = context_.producer[x];
    if (p < first_ || p >= end_) return false;
    const uint32_t rerun = facts.RerunStep(p);
    return rerun != kNone && rerun >= begin && rerun <= last;
  };
  auto view_of_steps = [&](TensorId x) {
    return context_.made[x] == SimContext::Made::kAlias && context_.Unsaved(x, *keep_) &&
           made_here(x);
  };
  view_reruns_.clear();
  double view_cost = 0;
  for (uint32_t s = begin; s <= last; ++s) {
    const NodeId node = sim.steps[s].node;
    for (uint32_t i = context_.outputs_begin[node]; i < context_.inputs_begin[node + 1]; ++i) {
      const TensorId x = ids[i];
      if (x == t || !view_of_steps(x)) continue;
      const uint32_t use = facts.LastUse(x);
      if (use == kNone || use <= last) continue;
      stack_.assign(1, x);
      for (int walked = 0; !stack_.empty(); ++walked) {
        if (walked == 64) return unknown;
        const NodeId p = context_.producer[stack_.back()];
        stack_.pop_back();
        if (context_.node_workspace[p] > 0) return unknown;
        if (std::find(view_reruns_.begin(), view_reruns_.end(), p) == view_reruns_.end()) {
          view_reruns_.push_back(p);
          view_cost += context_.node_cost[p];
        }
        for (uint32_t k = context_.inputs_begin[p]; k < context_.outputs_begin[p]; ++k) {
          if (view_of_steps(ids[k])) stack_.push_back(ids[k]);
        }
      }
    }
  }
  // What the chain made (buffers come in the order of their first steps):
  // nothing but t's copy may be read after it.
  // Unless what is read after them is what a few of them make: those nodes
  // then re-run as a chain of their own before the next reader (MovedChain,
  // into chain_), the inverse of a drop's pull.
  const uint32_t made_first = MadeFrom(begin), made_last = MadeFrom(last + 1);
  bool escapes = false;
  for (uint32_t b = made_first; b < made_last; ++b) {
    escapes = escapes || ((b != copy || copy_moves) && sim.buffers[b].last_step > last);
  }
  chain_.clear();
  if (escapes && (copy_before || !MovedChain(t, begin, last, made_first, made_last))) {
    return unknown;
  }
  // A view's node that moves makes the view at its new step: its cost
  // stays with the moved nodes' (below), not counted again.
  size_t moved_views = 0;
  for (const NodeId node : view_reruns_) {
    if (context_.node_cost[node] != 0 &&
        std::find(chain_.begin(), chain_.end(), node) != chain_.end()) {
      view_cost -= context_.node_cost[node];
      ++moved_views;
    }
  }
  // The k-th moved node's key, and its k (-1: not moved).
  auto moved_key = [&](int64_t k) { return moved_keys_[k]; };
  auto moved_index = [&](NodeId node) -> int64_t {
    for (size_t k = 0; k < chain_.size(); ++k) {
      if (chain_[k] == node) return static_cast<int64_t>(k);
    }
    return -1;
  };
  // The storages the moved nodes make: made at their new steps, read up to
  // their last read after the old chain, or inside the new one.
  made_.clear();
  bool copy_remade = false;
  for (uint32_t b = made_first; escapes && b < made_last; ++b) {
    const Buffer& buffer = sim.buffers[b];
    const int64_t k = moved_index(sim.steps[buffer.first_step].node);
    if (k < 0) {
      // Read after the chain and not made again.
      if ((b != copy || copy_moves) && buffer.last_step > last) return unknown;
      continue;
    }
    // A moved node that makes t's copy, read after the chain only through
    // t (the copy goes, below), makes it again unread: a storage of its
    // step alone.
    copy_remade = copy_remade || (b == copy && !copy_moves);
    const uint32_t last_read = b == copy ? other_copy : buffer.last_step;
    made_.push_back({context_.bytes[buffer.root], moved_key(k),
                     last_read != kNone && last_read > last ? Key(last_read) : moved_key(k), b});
  }
  // The storages the chain read from before it, and its cost.
  double cost = 0;
  // (storage, 0): read by the chain, last read inside it; (storage, key):
  // read by a moved node at its new step.
  extended_.clear();
  for (uint32_t s = begin; s <= last; ++s) {
    const NodeId node = sim.steps[s].node;
    const int64_t k = escapes ? moved_index(node) : -1;
    if (k >= 0) {
      // A moved node reads what was made before the chain, or by a moved
      // node before it, at its new step. Its cost stays.
      for (uint32_t i = context_.inputs_begin[node]; i < context_.outputs_begin[node]; ++i) {
        uint32_t storage;
        if (!OldStorage(ids[i], /*forward_read=*/false, &storage)) return unknown;
        if (storage == kNone) continue;
        storage &= ~kExisting;
        if (storage == original || (storage == copy && !copy_moves)) return unknown;
        if (sim.buffers[storage].first_step < begin) {
          extended_.push_back({storage, moved_key(k)});
          continue;
        }
        auto made = std::find_if(made_.begin(), made_.end(),
                                 [&](const NewBuffer& buffer) { return buffer.moved == storage; });
        if (made == made_.end() || made->first >= moved_key(k)) return unknown;
        made->last = std::max(made->last, moved_key(k));
      }
      continue;
    }
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
      LastReadMoves(original, Key(original_buffer.last_step), Key(through), bytes);
    }
    const uint32_t kept = other == kNone ? copy_buffer.first_step : other;
    if (kept < copy_buffer.last_step) {
      LastReadMoves(copy, Key(copy_buffer.last_step), Key(kept), bytes);
    }
  } else if (copy_moves) {
    // The reads through t read the original, which lives on to them; the
    // copy moves with the nodes that make it (below).
    if (through_copy != kNone && through_copy > original_buffer.last_step) {
      LastReadMoves(original, Key(original_buffer.last_step), Key(through_copy), bytes);
    }
  } else if (!reads_original) {
    // The copy goes; its reads read the original, which lives on to them.
    changes_.push_back({Key(copy_buffer.first_step), Key(copy_buffer.last_step), -bytes});
    if (copy_buffer.last_step > original_buffer.last_step) {
      LastReadMoves(original, Key(original_buffer.last_step), Key(copy_buffer.last_step), bytes);
    }
  }
  // The moved nodes' storages leave their old spans for their new ones.
  // (The copy's old span, when it does not move, went above.)
  for (const NewBuffer& buffer : made_) {
    const Buffer& old = sim.buffers[buffer.moved];
    if (buffer.moved != copy || copy_moves) {
      changes_.push_back({Key(old.first_step), Key(old.last_step), -buffer.bytes});
    }
    changes_.push_back({buffer.first, buffer.last, buffer.bytes});
  }
  // The storages the chain read: they die after their last read that stays,
  // or the moved node's.
  std::sort(extended_.begin(), extended_.end());
  for (size_t i = 0; i < extended_.size();) {
    const uint32_t b = extended_[i].first;
    int64_t latest = 0;
    for (; i < extended_.size() && extended_[i].first == b; ++i) {
      latest = std::max(latest, extended_[i].second);
    }
    const Buffer& buffer = sim.buffers[b];
    uint32_t kept;
    if (!LastKeptRead(b, &kept)) return unknown;
    LastReadMoves(b, Key(buffer.last_step), std::max(Key(kept), latest),
                  context_.bytes[buffer.root]);
  }
  // The old steps that stay, through range maxima, and the moved nodes' new
  // steps: what lives across their place, plus the changes there.
  // Each moved step's total is kept for PatchResave (moved_total_).
  int64_t highest = KeptStepsMax();
  moved_total_.clear();
  for (size_t k = 0; k < chain_.size(); ++k) {
    const int64_t key = moved_key(static_cast<int64_t>(k));
    const uint32_t a = static_cast<uint32_t>(key >> kKeyShift);
    int64_t total = Across(a) + std::max<int64_t>(context_.node_workspace[chain_[k]], 0);
    for (const Change& change : changes_) {
      if (change.lo <= key && key <= change.hi) total += change.bytes;
    }
    moved_total_.push_back(total);
    highest = std::max(highest, total + OffsetAt(a));
  }
  Result result;
  result.known = true;
  result.region_max = highest;
  result.added_cost = view_cost - cost;
  resaved_ = t;  // PatchResave writes it out
  resaved_cost_ = result.added_cost;
  costed_view_reruns_ += view_cost != 0;
  unread_copy_remakes_ += copy_remade;
  moved_view_reruns_ += moved_views != 0;
  return result;
}

// The nodes of t's chain [begin, last] that run again once `t` is saved,
// where its storages [made_first, made_last) are read after it. A tensor only
// that chain made is missing once it goes; the first step after it reading
// one gets, when it is a backward node's own step in a later group, a
// chain for each of its missing inputs, in input order, at its place in the
// node's group (InsertionStep), depth first as Builder::MaterializeForTensor
// would; when it is a step of a later chain, that chain is replayed depth
// first with the moved nodes inside it. The next step reading one those did
// not make gets the next, and so on. Into chain_ in that order (pulled_
// marks them), with their keys in moved_keys_ (a moved step before old step
// a: a << kKeyShift | its number there), when no chain re-runs t's
// producer. False when not handled.
bool DropDelta::MovedChain(TensorId t, uint32_t begin, uint32_t last, uint32_t made_first,
                           uint32_t made_last) {
  const SimResult& sim = *sim_;
  const StepFacts& facts = *facts_;
  const TensorId* ids = context_.ids.data();
  auto missing = [&](TensorId x) {
    const uint32_t s = CopyMadeAt(x, t);
    return x != t && s != kNone && s >= begin && s <= last;
  };
  // The reads after the chain of missing tensors, as (step, tensor), in order.
  reads_after_.clear();
  for (uint32_t b = made_first; b < made_last; ++b) {
    const Buffer& buffer = sim.buffers[b];
    if (buffer.last_step <= last) continue;
    const TensorId root = buffer.root;
    for (uint32_t r = readers_begin_[root]; r < readers_begin_[root + 1]; ++r) {
      const NodeId n = readers_[r];
      if (n < first_ || n >= end_) continue;
      for (const uint32_t s : {facts.OwnStep(n), facts.RerunStep(n)}) {
        if (s == kNone || s <= last) continue;
        if (context_.node_forward[n] && !sim.steps[s].recompute) continue;  // the original
        for (uint32_t k = context_.inputs_begin[n]; k < context_.outputs_begin[n]; ++k) {
          const TensorId x = ids[k];
          if (context_.root[x] == root && missing(x)) reads_after_.push_back({s, x});
        }
      }
    }
  }
  std::sort(reads_after_.begin(), reads_after_.end());
  // The chains, depth first; mark_ marks what they make, pulled_ their nodes.
  if (++epoch_ == 0) {
    std::fill(mark_.begin(), mark_.end(), 0);
    std::fill(pulled_.begin(), pulled_.end(), 0);
    epoch_ = 1;
  }
  constexpr size_t kMostMoved = 64;
  moved_keys_.clear();
  moved_starts_.clear();
  moved_replayed_ = false;
  uint32_t place = last;  // of the moved step last placed
  int64_t next_key = 0;   // the next one's there
  // Depth first from `trigger`, as Builder::MaterializeForTensor runs it:
  // nodes t's chain re-ran are moved, before old step `at`. With
  // old_begin < old_end, the run is the replay of the old chain [old_begin,
  // old_end): its nodes come as its old steps, in order, and moved ones go
  // before the next of them.
  auto depth_first = [&](TensorId trigger, uint32_t old_begin, uint32_t old_end, uint32_t at) {
    // A replay of the chain t's run is in skips the run: its nodes are
    // moved or go.
    auto in_old = [&](uint32_t s) {
      return s != kNone && s >= old_begin && s < old_end && (s < begin || s > last);
    };
    auto skip_run = [&](uint32_t s) { return s == begin && old_begin < old_end ? last + 1 : s; };
    uint32_t next_old = skip_run(old_begin);
    bool starts = old_begin >= old_end;  // the next node moved starts a chain
    auto needed = [&](TensorId y) {
      return mark_[y] != epoch_ && (missing(y) || in_old(CopyMadeAt(y, t)));
    };
    stack_.assign(1, trigger);
    while (!stack_.empty()) {
      const TensorId y = stack_.back();
      if (!needed(y)) {
        stack_.pop_back();
        continue;
      }
      const NodeId p = context_.producer[y];
      TensorId input = kNoId;
      for (uint32_t k = context_.inputs_begin[p]; k < context_.outputs_begin[p]; ++k) {
        if (needed(ids[k])) {
          input = ids[k];
          break;
        }
      }
      if (input != kNoId) {
        if (stack_.size() > kMostMoved) return false;
        stack_.push_back(input);
        continue;
      }
      stack_.pop_back();
      for (uint32_t k = context_.outputs_begin[p]; k < context_.inputs_begin[p + 1]; ++k) {
        const TensorId out = ids[k];
        if (context_.made[out] == SimContext::Made::kGradient) return false;
        if (!Saved(out)) mark_[out] = epoch_;
      }
      if (in_old(facts.RerunStep(p))) {
        if (facts.RerunStep(p) != next_old) return false;
        next_old = skip_run(next_old + 1);
        continue;
      }
      const uint32_t where = old_begin < old_end ? next_old : at;
      if (where < place || pulled_[p - first_] == epoch_ || chain_.size() == kMostMoved) {
        return false;
      }
      if (where != place) next_key = 0;
      place = where;
      pulled_[p - first_] = epoch_;
      moved_keys_.push_back((static_cast<int64_t>(place) << kKeyShift) | next_key++);
      moved_starts_.push_back(starts);
      moved_replayed_ = moved_replayed_ || old_begin < old_end;
      starts = false;
      chain_.push_back(p);
    }
    return next_old == old_end;
  };
  const uint32_t num_steps = static_cast<uint32_t>(sim.steps.size());
  for (const auto& [step, x] : reads_after_) {
    if (mark_[x] == epoch_) continue;
    const NodeId reader = sim.steps[step].node;
    if (sim.steps[step].recompute) {
      // A step of a later chain: replay that chain, from the input of its
      // group's node that its last node makes.
      uint32_t chain_begin = step, chain_end = step + 1;
      while (!sim.steps[chain_begin].starts_chain) --chain_begin;
      while (chain_end < num_steps && sim.steps[chain_end].recompute &&
             !sim.steps[chain_end].starts_chain) {
        ++chain_end;
      }
      const NodeId group = facts.Group(step), chain_last = sim.steps[chain_end - 1].node;
      TensorId target = kNoId;
      for (uint32_t i = context_.inputs_begin[group]; i < context_.outputs_begin[group]; ++i) {
        const TensorId y = ids[i];
        if (context_.producer[y] == chain_last && context_.Unsaved(y, *keep_)) {
          target = y;
          break;
        }
      }
      if (target == kNoId || !depth_first(target, chain_begin, chain_end, chain_begin)) {
        return false;
      }
    } else {
      if (reader == facts.Group(last)) return false;
      // The reader's missing inputs start a chain each, in input order.
      for (uint32_t i = context_.inputs_begin[reader]; i < context_.outputs_begin[reader]; ++i) {
        const TensorId trigger = ids[i];
        if (!missing(trigger) || mark_[trigger] == epoch_) continue;
        const uint32_t at = InsertionStep(reader, trigger);
        if (at <= last || !depth_first(trigger, 0, 0, at)) return false;
      }
    }
    if (mark_[x] != epoch_) return false;
  }
  return !chain_.empty() && pulled_[context_.producer[t] - first_] != epoch_;
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
  bool past_trigger = false;
  for (uint32_t i = context_.inputs_begin[reader]; i < context_.outputs_begin[reader]; ++i) {
    const TensorId x = ids[i];
    const uint32_t made = CopyMadeAt(x, t);
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
  if (copy_last > made) LastReadMoves(copy, Key(copy_last), Key(made), bytes);
  if (copy_last > original_last) LastReadMoves(original, Key(original_last), Key(copy_last), bytes);
  Result result;
  result.known = true;
  result.region_max = KeptStepsMax();
  result.added_cost = 0;
  resaved_ = t;
  resaved_cost_ = 0;
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
